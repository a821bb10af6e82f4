/** The file handling the spool and the retention share (both synchronous, one process per data directory). */
import * as Fs from "node:fs"

/** Writes all of `data` at `position` (the end of the file for an append-mode descriptor); returns its byte length. */
export const writeAll = (fd: number, data: string | Uint8Array, position: number): number => {
  const bytes = typeof data === "string" ? Buffer.from(data, "utf8") : data
  let written = 0
  while (written < bytes.length) written += Fs.writeSync(fd, bytes, written, bytes.length - written, position + written)
  return bytes.length
}

/** Flushes a descriptor to disk and closes it, even when the flush fails. */
export const syncAndClose = (fd: number): void => {
  try {
    Fs.fsyncSync(fd)
  } finally {
    Fs.closeSync(fd)
  }
}

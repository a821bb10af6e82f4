/** The file handling the spool and the retention share (both synchronous, one process per data directory). */
import * as Fs from "node:fs"

/** Writes all of `data` at `position` (the end of the file for an append-mode descriptor); returns its byte length. */
export const writeAll = (fd: number, data: string | Uint8Array, position: number): number => {
  const bytes = typeof data === "string" ? Buffer.from(data, "utf8") : data
  let written = 0
  while (written < bytes.length) written += Fs.writeSync(fd, bytes, written, bytes.length - written, position + written)
  return bytes.length
}

/** Writes the parts one after another at `position` (one system call unless the write comes up short); returns their byte length. */
export const writeAllParts = (fd: number, parts: ReadonlyArray<Uint8Array>, position: number): number => {
  let total = 0
  for (const part of parts) total += part.length
  const written = Fs.writevSync(fd, parts, position)
  if (written < total) {
    // the rest part by part: writeAll loops until done, or throws when the disk refuses
    let start = 0
    for (const part of parts) {
      const end = start + part.length
      if (end > written) {
        const from = Math.max(0, written - start)
        writeAll(fd, part.subarray(from), position + start + from)
      }
      start = end
    }
  }
  return total
}

/** Flushes a descriptor to disk and closes it, even when the flush fails. */
export const syncAndClose = (fd: number): void => {
  try {
    Fs.fsyncSync(fd)
  } finally {
    Fs.closeSync(fd)
  }
}

/**
 * What the watcher's transcript readers share: a reader takes a transcript's complete lines in order and gives
 * back the model turns they complete, each with the position in the file where it became complete — the watcher
 * keeps, per file, the position up to which every completed turn has been taken by the service, and after a restart
 * reads the file again from its start (the turns need the conversation before them) sending only what completes
 * past that position.
 */
import type { ReadTurn } from "../domain/transcript.ts"

export type { ReadTurn }

export interface CompletedTurn {
  readonly turn: ReadTurn
  /** byte offset in the file of the end of the line that completed the turn */
  readonly completedAt: number
}

/** Lines a reader skipped, by why. */
export interface SkippedLines {
  /** not JSON (a corrupt line) */
  corrupt: number
  /** JSON, but not an entry this reader knows or needs */
  unknown: number
}

export interface TranscriptReader {
  /** One complete line (without its newline) ending at byte offset `end`; the turns it completes. */
  line(text: string, end: number): ReadonlyArray<CompletedTurn>
  /** The file has stopped growing: turns still waiting for a sign of their end are complete as they are. */
  idle(end: number): ReadonlyArray<CompletedTurn>
  readonly skipped: SkippedLines
}

/** A line's JSON object, or undefined (counted as corrupt) when it is not one. */
export const parseLine = (text: string, skipped: SkippedLines): Record<string, unknown> | undefined => {
  try {
    const value: unknown = JSON.parse(text)
    if (typeof value === "object" && value !== null && !Array.isArray(value)) return value as Record<string, unknown>
  } catch {
    // counted below
  }
  skipped.corrupt++
  return undefined
}

export const asRecord = (value: unknown): Record<string, unknown> | undefined =>
  typeof value === "object" && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined

export const asString = (value: unknown): string | undefined => (typeof value === "string" && value !== "" ? value : undefined)

/** epoch ms of an ISO timestamp, or undefined */
export const timeOf = (value: unknown): number | undefined => {
  const ms = typeof value === "string" ? Date.parse(value) : Number.NaN
  return Number.isFinite(ms) ? ms : undefined
}

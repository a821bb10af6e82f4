/**
 * The progress of a long command (`ledger rebuild`, `verify`, `export`) on stderr (stdout stays for the result): a bar
 * redrawn in place on a terminal, a plain line every tenth of the way otherwise (logs, CI), so a redirected run does
 * not fill a file with frames.
 */
import { Effect } from "effect"

/** How far a command over the decisions has come. */
export interface Progress {
  readonly done: number
  readonly total: number
}

const WIDTH = 30
const REDRAW_MS = 100

export interface ProgressOutput {
  readonly isTTY?: boolean | undefined
  write(text: string): unknown
}

const count = (n: number) => n.toLocaleString("en-US")

export const progressBar = (label: string, out: ProgressOutput = process.stderr) => {
  const tty = out.isTTY === true
  const started = Date.now()
  let drawn = 0
  let tenth = -1
  let last: Progress | undefined
  const line = ({ done, total }: Progress) => {
    const share = total === 0 ? 1 : Math.min(1, done / total)
    const seconds = (Date.now() - started) / 1000
    const rate = seconds > 0 ? done / seconds : 0
    const eta = rate > 0 && done < total ? ` eta ${Math.ceil((total - done) / rate)} s` : ""
    const bar = tty ? `[${"█".repeat(Math.round(share * WIDTH)).padEnd(WIDTH, "░")}] ` : ""
    return `${label} ${bar}${Math.floor(share * 100)}% ${count(done)}/${count(total)} decisions ${count(Math.round(rate))}/s${eta}`
  }
  return {
    update: (progress: Progress) =>
      Effect.sync(() => {
        last = progress
        const now = Date.now()
        if (tty) {
          if (now - drawn < REDRAW_MS && progress.done < progress.total) return
          drawn = now
          out.write(`\r${line(progress)}\u001b[K`)
          return
        }
        const reached = progress.total === 0 ? 10 : Math.floor((progress.done / progress.total) * 10)
        if (reached > tenth) {
          tenth = reached
          out.write(`${line(progress)}\n`)
        }
      }),
    /** Draws the final state and ends the line. */
    finish: Effect.sync(() => {
      if (tty && last !== undefined) out.write(`\r${line(last)}\u001b[K\n`)
    })
  }
}

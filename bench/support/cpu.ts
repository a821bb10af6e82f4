/** CPU time of processes, read from Linux /proc (what the benchmarks report per decision or per call). */
import * as Fs from "node:fs"

/** CPU seconds (user + system) used so far, from a Linux /proc stat file; undefined where /proc is not there. */
export const cpuSecondsOf = (statFile: string): number | undefined => {
  try {
    // fields after the parenthesised command name: state is field 3, utime 14 and stime 15 (clock ticks, 100/s on Linux)
    const fields = Fs.readFileSync(statFile, "utf8").split(") ")[1]!.split(" ")
    return (Number(fields[11]) + Number(fields[12])) / 100
  } catch {
    return undefined
  }
}

/** CPU seconds a process has used so far, all its threads (JS, GC helpers, libuv pool). */
export const processCpu = (pid: number | undefined): number | undefined => cpuSecondsOf(`/proc/${pid}/stat`)

/** CPU seconds of a process's main thread (its JavaScript and event loop); the rest of processCpu is its helper threads, mostly GC. */
export const mainThreadCpu = (pid: number | undefined): number | undefined => cpuSecondsOf(`/proc/${pid}/task/${pid}/stat`)

/** CPU seconds each process has used so far; a process that exited counts as 0. */
export const processesCpu = (pids: ReadonlyArray<number>): Map<number, number> =>
  new Map(pids.map((pid) => [pid, processCpu(pid) ?? 0]))

/** CPU seconds a Redis server has used so far (user + system), from the text of its `INFO cpu`. */
export const redisCpuSeconds = (info: string): number => {
  const seconds = (name: string) => Number(new RegExp(`^${name}:(\\S+)`, "m").exec(info)?.[1] ?? NaN)
  return seconds("used_cpu_user") + seconds("used_cpu_sys")
}

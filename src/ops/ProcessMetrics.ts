/**
 * Process metrics on `/metrics` for every role, under the names Node.js dashboards expect (those of prom-client's
 * default metrics). Per thread, labelled `thread` (`main`; `builder` for the builder thread of the default process):
 * event-loop delay (p50, p99, max, mean over the last window), V8 heap used and total, external memory, garbage
 * collection time by kind, and active resources. Per process, from the main thread only: resident memory, CPU
 * seconds, open file descriptors and the start time.
 *
 * Values are read when `/metrics` is scraped (registered series), except the event-loop delay, which is sampled by
 * `monitorEventLoopDelay` and summarised per WINDOW, and GC pauses, observed as they happen.
 */
import { Context, Duration, Effect, Layer, Metric } from "effect"
import * as Fs from "node:fs"
import { isMainThread } from "node:worker_threads"
import * as PerfHooks from "node:perf_hooks"
import * as V8 from "node:v8"

/** The event-loop delay figures cover the last completed window of this length. */
const WINDOW = Duration.seconds(10)
/** The delay sampler's timer period; it is subtracted, so the figures are the lag beyond it. */
const RESOLUTION_MS = 10
const GC_BOUNDARIES_SECONDS = [0.001, 0.01, 0.1, 1, 2, 5]
const GC_KINDS: Record<number, string> = {
  [PerfHooks.constants.NODE_PERFORMANCE_GC_MINOR]: "minor",
  [PerfHooks.constants.NODE_PERFORMANCE_GC_MAJOR]: "major",
  [PerfHooks.constants.NODE_PERFORMANCE_GC_INCREMENTAL]: "incremental",
  [PerfHooks.constants.NODE_PERFORMANCE_GC_WEAKCB]: "weakcb"
}

const gauge = (name: string, description: string, attributes?: Record<string, string>) =>
  Metric.gauge(name, { description, ...(attributes === undefined ? {} : { attributes }) })

const counter = (name: string, description: string) => Metric.counter(name, { description, incremental: true })

/** Reads a gauge's value at scrape time. */
const readOnScrape = <I>(metric: Metric.Metric<I, Metric.GaugeState<number>>, context: Context.Context<never>, read: () => number) =>
  Metric.registerUnsafe(metric, context, { get: () => ({ value: read() }), update: () => {}, modify: () => {} })

const openFileDescriptors = () => {
  try {
    return Fs.readdirSync("/proc/self/fd").length
  } catch {
    return Number.NaN
  }
}

export class ProcessMetrics extends Context.Service<ProcessMetrics, {
  /** the label value of this thread's series */
  readonly thread: string
}>()("ledger/ops/ProcessMetrics") {
  /** The metrics of the current thread, labelled `thread`; the process-wide ones too when it is the main thread. */
  static readonly layer = (thread: string) =>
    Layer.effect(
      ProcessMetrics,
      Effect.gen(function*() {
        const context = yield* Effect.context<never>()
        const labels = { thread }
        const registrations = [
          readOnScrape(gauge("nodejs_heap_size_used_bytes", "V8 heap in use", labels), context, () => V8.getHeapStatistics().used_heap_size),
          readOnScrape(gauge("nodejs_heap_size_total_bytes", "V8 heap allocated", labels), context, () => V8.getHeapStatistics().total_heap_size),
          readOnScrape(gauge("nodejs_external_memory_bytes", "memory of C++ objects bound to JavaScript objects", labels), context, () => process.memoryUsage().external),
          readOnScrape(gauge("nodejs_active_resources_total", "resources keeping the event loop alive (sockets, timers, file requests)", labels), context, () => process.getActiveResourcesInfo().length)
        ]
        if (isMainThread) {
          const started = Date.now() / 1000 - process.uptime()
          const cpu = (pick: (usage: NodeJS.CpuUsage) => number) => () => pick(process.cpuUsage()) / 1e6
          const cpuCounter = (name: string, description: string, read: () => number) =>
            Metric.registerUnsafe(counter(name, description), context, { get: () => ({ count: read(), incremental: true }), update: () => {}, modify: () => {} })
          registrations.push(
            readOnScrape(gauge("process_resident_memory_bytes", "resident memory of the process"), context, () => process.memoryUsage.rss()),
            readOnScrape(gauge("process_open_fds", "open file descriptors of the process"), context, openFileDescriptors),
            readOnScrape(gauge("process_start_time_seconds", "start time of the process, seconds since the Unix epoch"), context, () => started),
            cpuCounter("process_cpu_user_seconds_total", "user CPU time of the process, seconds", cpu((usage) => usage.user)),
            cpuCounter("process_cpu_system_seconds_total", "system CPU time of the process, seconds", cpu((usage) => usage.system)),
            cpuCounter("process_cpu_seconds_total", "user and system CPU time of the process, seconds", cpu((usage) => usage.user + usage.system))
          )
        }

        // event-loop delay: summarised per window, the lag beyond the sampler's own period
        const delay = PerfHooks.monitorEventLoopDelay({ resolution: RESOLUTION_MS })
        delay.enable()
        const lag = { p50: 0, p99: 0, max: 0, mean: 0 }
        const seconds = (nanoseconds: number) => Math.max(0, nanoseconds / 1e6 - RESOLUTION_MS) / 1000
        const summarise = Effect.sync(() => {
          if (delay.count > 0) {
            lag.p50 = seconds(delay.percentile(50))
            lag.p99 = seconds(delay.percentile(99))
            lag.max = seconds(delay.max)
            lag.mean = seconds(delay.mean)
          }
          delay.reset()
        })
        yield* summarise.pipe(Effect.delay(WINDOW), Effect.forever, Effect.forkScoped)
        for (const [figure, description] of [
          ["p50", "median"],
          ["p99", "99th percentile of the"],
          ["max", "longest"],
          ["mean", "mean"]
        ] as const) {
          registrations.push(readOnScrape(
            gauge(`nodejs_eventloop_lag_${figure}_seconds`, `${description} event-loop delay over the last ${Duration.toSeconds(WINDOW)} s`, labels),
            context,
            () => lag[figure]
          ))
        }

        // garbage collection pauses, by kind
        const gcSeries = new Map<number, Metric.Metric<number, unknown>>()
        const observer = new PerfHooks.PerformanceObserver((list) => {
          for (const entry of list.getEntries()) {
            const kind = ((entry as PerformanceEntry & { detail?: { kind?: number } }).detail)?.kind ?? 0
            let series = gcSeries.get(kind)
            if (series === undefined) {
              series = Metric.histogram("nodejs_gc_duration_seconds", {
                description: "garbage collection pauses, by kind",
                boundaries: GC_BOUNDARIES_SECONDS,
                attributes: { ...labels, kind: GC_KINDS[kind] ?? "other" }
              })
              gcSeries.set(kind, series)
            }
            series.updateUnsafe(entry.duration / 1000, context)
          }
        })
        observer.observe({ entryTypes: ["gc"] })

        yield* Effect.addFinalizer(() =>
          Effect.sync(() => {
            delay.disable()
            observer.disconnect()
            for (const registration of registrations) registration.remove()
          })
        )
        return ProcessMetrics.of({ thread })
      })
    )
}

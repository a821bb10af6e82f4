/**
 * Process metrics in this thread: the conventional Node.js names, labelled by thread, read at scrape time; garbage
 * collection pauses observed by kind; the process-wide figures only from the main thread.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { PrometheusMetrics } from "effect/observability"
import { ProcessMetrics } from "../../src/ops/ProcessMetrics.ts"

describe("ProcessMetrics", () => {
  it.live("heap, resources, event-loop delay and GC pauses of the thread; memory, CPU and descriptors of the process", () =>
    Effect.gen(function*() {
      yield* Layer.build(ProcessMetrics.layer("test-thread"))
      // garbage, for a few collections
      let kept: Array<unknown> = []
      for (let round = 0; round < 50; round++) {
        for (let i = 0; i < 20_000; i++) kept.push({ i, text: `garbage ${i}` })
        if (kept.length > 200_000) kept = []
        yield* Effect.sleep(2)
      }
      yield* Effect.sleep(50)
      const text = yield* PrometheusMetrics.format()
      for (const name of ["nodejs_heap_size_used_bytes", "nodejs_heap_size_total_bytes", "nodejs_external_memory_bytes", "nodejs_active_resources_total"]) {
        assert.match(text, new RegExp(`^${name}\\{thread="test-thread"\\} \\d+`, "m"), name)
      }
      for (const figure of ["p50", "p99", "max", "mean"]) {
        assert.match(text, new RegExp(`^nodejs_eventloop_lag_${figure}_seconds\\{thread="test-thread"\\} [\\d.e-]+$`, "m"))
      }
      assert.match(text, /^nodejs_gc_duration_seconds_count\{thread="test-thread",kind="(minor|major|incremental|weakcb)"\} [1-9]\d*$/m)
      for (const name of ["process_resident_memory_bytes", "process_open_fds", "process_start_time_seconds", "process_cpu_seconds_total"]) {
        assert.isAbove(Number(new RegExp(`^${name} (\\S+)$`, "m").exec(text)?.[1]), 0, name)
      }
    }))
})

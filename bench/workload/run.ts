/**
 * Drives a workload through the gateway: each planned call is a real `POST /v1/chat/completions` with a gateway
 * key, the caller's provider key and agent attribution, answered by the fake providers. The planned time travels in
 * the request's `metadata` and `RetimedCaptureStream` gives the capture that time before the builder reads it, so
 * 48 hours of traffic replay in seconds with the timestamps the patterns need.
 */
import { Effect, Layer } from "effect"
import { CaptureStream, type StreamEntry } from "../../src/capture/CaptureStream.ts"
import type { Workload, WorkloadCall } from "./scenario.ts"

export interface GatewayTarget {
  /** `http://host:port/v1` */
  readonly baseURL: string
  readonly gatewayKey: string
  /** forwarded to the provider as the caller's key */
  readonly providerKey: string
}

export interface CallResult {
  readonly call: WorkloadCall
  readonly ledger_id: string
  readonly status: number
  /** the answer text ("" for tool calls and errors) */
  readonly answer: string
}

const PLACEHOLDER = /\{\{output:([^}]+)\}\}/g

const send = async (target: GatewayTarget, call: WorkloadCall, answers: ReadonlyMap<string, string>): Promise<CallResult> => {
  const query = new URLSearchParams({ agent_id: call.agent_id, agent_name: call.agent_name })
  if (call.execution_id !== null) query.set("execution_id", call.execution_id)
  const body = {
    model: call.model,
    messages: call.messages.map((message) => ({
      ...message,
      content: message.content.replace(PLACEHOLDER, (_, key: string) => answers.get(key) ?? "(no answer)")
    })),
    ...(call.tools === undefined ? {} : { tools: call.tools }),
    metadata: { workload_call: call.key, workload_at: String(call.at), workload_latency_ms: String(call.latency_ms) }
  }
  const response = await fetch(`${target.baseURL}/chat/completions?${query}`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      authorization: `Bearer ${target.gatewayKey}`,
      "x-service-provider-api-key": target.providerKey
    },
    body: JSON.stringify(body)
  })
  const json: any = await response.json()
  const ledger_id = response.headers.get("x-ledger-id")
  if (ledger_id === null) throw new Error(`no x-ledger-id for ${call.key}: ${response.status} ${JSON.stringify(json)}`)
  return { call, ledger_id, status: response.status, answer: json?.choices?.[0]?.message?.content ?? "" }
}

/** Sends every call in time order (later calls may quote earlier answers); yields each call's ledger id and answer. */
export const runWorkload = (workload: Workload, target: GatewayTarget) =>
  Effect.promise(async () => {
    const answers = new Map<string, string>()
    const results: Array<CallResult> = []
    for (const call of workload.calls) {
      const result = await send(target, call, answers)
      answers.set(call.key, result.answer)
      results.push(result)
    }
    return results
  })

/** Gives a capture its planned time (from the request's workload metadata); other captures pass unchanged. */
export const retimeCapture = (payload: string): string => {
  const capture = JSON.parse(payload)
  let metadata: Record<string, string> | undefined
  try {
    metadata = JSON.parse(capture.request)?.metadata
  } catch {
    return payload
  }
  if (metadata?.workload_at === undefined) return payload
  const at = Number(metadata.workload_at)
  const latency = Number(metadata.workload_latency_ms)
  return JSON.stringify({
    ...capture,
    started_at: at,
    first_token_at: capture.first_token_at === null ? null : at + Math.min(200, latency),
    ended_at: at + latency,
    upstream_ms: Math.max(0, latency - 2)
  })
}

const retimed = (entries: ReadonlyArray<StreamEntry>) => entries.map((entry) => ({ ...entry, payload: retimeCapture(entry.payload) }))

/** The capture stream as the builder sees it during a workload: what it reads carries the planned times. */
export const RetimedCaptureStream = Layer.effect(
  CaptureStream,
  Effect.gen(function*() {
    const stream = yield* CaptureStream
    return CaptureStream.of({
      ...stream,
      read: (consumer, options) => Effect.map(stream.read(consumer, options), retimed),
      reclaim: (consumer, options) => Effect.map(stream.reclaim(consumer, options), retimed)
    })
  })
)

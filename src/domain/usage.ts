/**
 * Token usage, normalised to chat-completions semantics, and its readers for every shape a provider reports it in.
 *
 * Semantics: `prompt_tokens` includes cached and cache-written tokens (so the uncached input is
 * `prompt - cached - cache_write`), and `completion_tokens` includes reasoning tokens. Each count is taken from the
 * provider's own usage fields and counted once: Anthropic's `input_tokens` excludes cache reads and writes, OpenAI's
 * and Gemini's prompt counts include cache reads — the readers below add or leave them accordingly.
 */
import { Schema } from "effect"

export const Usage = Schema.Struct({
  prompt_tokens: Schema.Number,
  completion_tokens: Schema.Number,
  total_tokens: Schema.Number,
  /** input tokens served from the provider's prompt cache (OpenAI cached_tokens, Anthropic cache_read_input_tokens, Gemini cachedContentTokenCount) */
  cached_tokens: Schema.optional(Schema.Number),
  /** input tokens written to the prompt cache (Anthropic cache_creation_input_tokens) */
  cache_write_tokens: Schema.optional(Schema.Number),
  /** of `cache_write_tokens`, those written with a one-hour lifetime (Anthropic prices them higher) */
  cache_write_1h_tokens: Schema.optional(Schema.Number),
  /** reasoning tokens, when the provider reports them */
  reasoning_tokens: Schema.optional(Schema.Number)
})
export type Usage = typeof Usage.Type

type MutableUsage = { -readonly [K in keyof Usage]: Usage[K] }

const count = (value: unknown): number | undefined => (typeof value === "number" && value >= 0 ? value : undefined)

/**
 * Usage from separate counts, as translated providers report them: `input` excludes cache reads and writes
 * (Anthropic, Bedrock), so `prompt_tokens` adds them back.
 */
export const usageFrom = (counts: {
  readonly input: number
  readonly output: number
  readonly cacheRead?: number | undefined
  readonly cacheWrite?: number | undefined
  readonly cacheWrite1h?: number | undefined
  readonly reasoning?: number | undefined
}): Usage => {
  const cacheRead = counts.cacheRead ?? 0
  const cacheWrite = counts.cacheWrite ?? 0
  const prompt = counts.input + cacheRead + cacheWrite
  const usage: MutableUsage = { prompt_tokens: prompt, completion_tokens: counts.output, total_tokens: prompt + counts.output }
  if (counts.cacheRead !== undefined) usage.cached_tokens = counts.cacheRead
  if (counts.cacheWrite !== undefined) usage.cache_write_tokens = counts.cacheWrite
  if (counts.cacheWrite1h !== undefined && counts.cacheWrite1h > 0) usage.cache_write_1h_tokens = counts.cacheWrite1h
  if (counts.reasoning !== undefined) usage.reasoning_tokens = counts.reasoning
  return usage
}

/** A chat-completions usage object, as OpenAI-type providers report it and the gateway's chat answers carry it. */
export interface OpenAIUsage {
  prompt_tokens: number
  completion_tokens: number
  total_tokens: number
  prompt_tokens_details?: { cached_tokens?: number; cache_write_tokens?: number }
  completion_tokens_details?: { reasoning_tokens?: number }
}

/** A chat-completions usage object → usage; null when there is none (counts that are not numbers are left out). */
export const fromOpenAIUsage = (raw: OpenAIUsage | null | undefined): Usage | null => {
  const prompt = count(raw?.prompt_tokens)
  if (prompt === undefined) return null
  const completion = count(raw!.completion_tokens) ?? 0
  const usage: MutableUsage = {
    prompt_tokens: prompt,
    completion_tokens: completion,
    total_tokens: count(raw!.total_tokens) ?? prompt + completion
  }
  const cached = count(raw!.prompt_tokens_details?.cached_tokens)
  if (cached !== undefined) usage.cached_tokens = cached
  const written = count(raw!.prompt_tokens_details?.cache_write_tokens)
  if (written !== undefined) usage.cache_write_tokens = written
  const reasoning = count(raw!.completion_tokens_details?.reasoning_tokens)
  if (reasoning !== undefined) usage.reasoning_tokens = reasoning
  return usage
}

/** The OpenAI Responses API's usage object; `input_tokens` includes the cached ones. */
export interface ResponsesUsage {
  input_tokens?: number | null
  input_tokens_details?: { cached_tokens?: number | null; cache_write_tokens?: number | null } | null
  output_tokens?: number | null
  output_tokens_details?: { reasoning_tokens?: number | null } | null
  total_tokens?: number | null
}

/** Responses usage → usage; null when there is none. */
export const fromResponsesUsage = (raw: ResponsesUsage | null | undefined): Usage | null => {
  const input = count(raw?.input_tokens)
  if (input === undefined) return null
  const output = count(raw!.output_tokens) ?? 0
  const usage: MutableUsage = { prompt_tokens: input, completion_tokens: output, total_tokens: count(raw!.total_tokens) ?? input + output }
  const cached = count(raw!.input_tokens_details?.cached_tokens)
  if (cached !== undefined) usage.cached_tokens = cached
  const written = count(raw!.input_tokens_details?.cache_write_tokens)
  if (written !== undefined && written > 0) usage.cache_write_tokens = written
  const reasoning = count(raw!.output_tokens_details?.reasoning_tokens)
  if (reasoning !== undefined) usage.reasoning_tokens = reasoning
  return usage
}

/** Usage → the Responses usage object (what the gateway's translated Responses answers report). */
export const toResponsesUsage = (usage: Usage): ResponsesUsage => ({
  input_tokens: usage.prompt_tokens,
  input_tokens_details: { cached_tokens: usage.cached_tokens ?? 0 },
  output_tokens: usage.completion_tokens,
  output_tokens_details: { reasoning_tokens: usage.reasoning_tokens ?? 0 },
  total_tokens: usage.total_tokens
})

/**
 * Anthropic Messages usage. `input_tokens` excludes cache reads and writes; `cache_creation` splits the writes by
 * lifetime. In a stream, `message_start` carries it and each `message_delta` repeats the fields it updates as
 * cumulative totals: merge them (`mergeAnthropicUsage`), never add.
 */
export interface AnthropicUsage {
  input_tokens?: number | null
  output_tokens?: number | null
  cache_read_input_tokens?: number | null
  cache_creation_input_tokens?: number | null
  cache_creation?: { ephemeral_5m_input_tokens?: number | null; ephemeral_1h_input_tokens?: number | null } | null
  output_tokens_details?: { thinking_tokens?: number | null } | null
}

/** Overwrites `into`'s fields with those `update` reports (Anthropic's cumulative stream usage). */
export const mergeAnthropicUsage = (into: AnthropicUsage, update: AnthropicUsage | null | undefined): void => {
  if (!update) return
  for (const key of Object.keys(update) as Array<keyof AnthropicUsage>) {
    if (update[key] != null) (into as Record<string, unknown>)[key] = update[key]
  }
}

/** Anthropic usage → usage; null when there is none. */
export const fromAnthropicUsage = (raw: AnthropicUsage | null | undefined): Usage | null => {
  const input = count(raw?.input_tokens)
  const output = count(raw?.output_tokens)
  if (input === undefined && output === undefined) return null
  return usageFrom({
    input: input ?? 0,
    output: output ?? 0,
    cacheRead: count(raw!.cache_read_input_tokens),
    cacheWrite: count(raw!.cache_creation_input_tokens),
    cacheWrite1h: count(raw!.cache_creation?.ephemeral_1h_input_tokens),
    reasoning: count(raw!.output_tokens_details?.thinking_tokens)
  })
}

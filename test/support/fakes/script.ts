/**
 * What the fake providers answer, decided from the request (see fake-providers.ts for the markers), and the HTTP
 * helpers every fake writer uses.
 */
import type { ServerResponse } from "node:http"
import { setTimeout as sleep } from "node:timers/promises"

/** Cache counts reported on every answer of the providers that have a prompt cache. */
export const FAKE_CACHE_READ_TOKENS = 128
export const FAKE_CACHE_WRITE_TOKENS = 64
export const FAKE_REASONING = "Thinking it over step by step."
export const FAKE_REFUSAL = "I can't help with that."

export interface ToolCallScript {
  readonly id: string
  readonly name: string
  readonly args: Record<string, unknown>
}

export interface Script {
  readonly text: string
  readonly reasoning: string | null
  readonly toolCalls: Array<ToolCallScript>
  readonly finish: "stop" | "length" | "tool" | "refuse"
  readonly errorStatus: number | null
  readonly streamError: boolean
  readonly slowMs: number
  readonly usage: { input: number; output: number }
}

/** What the provider-specific reader extracts from a request. */
export interface Prompt {
  /** text of the last message, when it is a user message */
  readonly userText: string
  /** the tool result, when the last message is one */
  readonly toolResult: string | null
  readonly toolNames: Array<string>
  /** size of the request body, for a deterministic prompt token count */
  readonly bodyLength: number
  /** in an agent's tool loop: the user's ask that started it, and the tool results since */
  readonly loop?: { readonly ask: string; readonly results: number }
}

const MARKER = /\[\[([a-z-]+)(?::([^\]]*))?\]\]/g

/** The arguments a coding agent's shell tool takes, by the tool's name. */
const shellArguments = (name: string, command: string): Record<string, unknown> => {
  switch (name) {
    case "exec_command":
      return { cmd: command }
    case "shell":
      return { command: ["bash", "-lc", command] }
    case "Bash":
      return { command, description: "Run the command the user asked for" }
    default:
      return { command }
  }
}

const SHELL_TOOLS = ["exec_command", "shell", "shell_command", "Bash"]

/** `[[runs:N:CMD]]`: the agent runs CMD (numbered) N times in a row before it answers. */
const RUNS = /\[\[runs:(\d+):([^\]]*)\]\]/

export const script = (prompt: Prompt): Script => {
  const loop = prompt.loop === undefined ? null : RUNS.exec(prompt.loop.ask)
  if (loop !== null && prompt.loop!.results < Number(loop[1])) {
    const shell = prompt.toolNames.find((name) => SHELL_TOOLS.includes(name)) ?? prompt.toolNames[0] ?? "lookup"
    const round = prompt.loop!.results + 1
    return {
      text: "",
      reasoning: null,
      toolCalls: [{ id: `call_fake_run_${round}`, name: shell, args: shellArguments(shell, `${loop[2]} ${round}`) }],
      finish: "tool",
      errorStatus: null,
      streamError: false,
      slowMs: 0,
      usage: { input: 8 + Math.ceil(prompt.bodyLength / 4), output: 12 }
    }
  }
  const markers = new Map<string, string>()
  if (prompt.toolResult === null) {
    for (const match of prompt.userText.matchAll(MARKER)) markers.set(match[1]!, match[2] ?? "")
  }
  const number = (name: string) => Number(markers.get(name) ?? 0)
  const subject = prompt.userText.replace(MARKER, "").trim().slice(0, 80)
  const names = prompt.toolNames.length > 0 ? prompt.toolNames : ["lookup"]
  const shell = names.find((name) => SHELL_TOOLS.includes(name)) ?? names[0]!
  const toolCalls = markers.has("run")
    ? [{ id: "call_fake_run", name: shell, args: shellArguments(shell, markers.get("run")!) }]
    : markers.has("tools")
    ? [
      { id: "call_fake_1", name: names[0]!, args: { query: "first" } },
      { id: "call_fake_2", name: names[1] ?? names[0]!, args: { query: "second" } }
    ]
    : markers.has("tool")
    ? [{ id: "call_fake_1", name: names[0]!, args: { query: subject || "anything" } }]
    : []
  const refuse = markers.has("refuse")
  const text = toolCalls.length > 0 || refuse
    ? ""
    : prompt.toolResult !== null
    ? `Tool said: ${prompt.toolResult.slice(0, 400)}`
    : markers.has("truncate")
    ? "This answer stops before it is"
    : markers.has("long")
    ? `${"x".repeat(1023)} `.repeat(number("long"))
    : `Fake answer to: ${subject || "nothing"}`
  const reasoning = markers.has("think") ? FAKE_REASONING : null
  return {
    text,
    reasoning,
    toolCalls,
    finish: refuse ? "refuse" : toolCalls.length > 0 ? "tool" : markers.has("truncate") ? "length" : "stop",
    errorStatus: markers.has("error") ? number("error") || 500 : null,
    streamError: markers.has("stream-error"),
    slowMs: number("slow"),
    usage: {
      input: 8 + Math.ceil(prompt.bodyLength / 4),
      output: Math.ceil((text.length + (reasoning?.length ?? 0)) / 4) + 12 * toolCalls.length + (refuse ? 6 : 0)
    }
  }
}

/** The answer text in a few pieces, so streams have several chunks. */
export const pieces = (text: string): Array<string> => text.match(/\S+\s*/g) ?? []

export const nowSeconds = () => Math.floor(Date.now() / 1000)

export interface Out {
  readonly res: ServerResponse
  readonly delayMs: number
}

export const json = (out: Out, status: number, body: unknown, headers: Record<string, string> = {}): void => {
  const text = JSON.stringify(body)
  out.res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text), ...headers })
  out.res.end(text)
}

/** Writes stream parts with the configured pause between them. */
export const streamParts = async (out: Out, contentType: string, parts: Iterable<string | Uint8Array>): Promise<void> => {
  out.res.writeHead(200, { "content-type": contentType, "cache-control": "no-cache" })
  for (const part of parts) {
    if (out.res.destroyed) return
    out.res.write(part)
    if (out.delayMs > 0) await sleep(out.delayMs)
  }
  out.res.end()
}

/** Text of an OpenAI-style content: a string, or its text parts (`text`, `input_text`, `output_text`). */
export const textOfParts = (content: unknown): string =>
  typeof content === "string"
    ? content
    : Array.isArray(content)
    ? content.filter((p) => typeof p?.text === "string").map((p) => p.text).join("")
    : ""

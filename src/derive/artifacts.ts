/**
 * Artifacts: what this call produced. Structured output (the whole answer is a JSON document), fenced code
 * blocks, files (a block whose fence, first line or lead-in line names a path), shell commands (shell
 * blocks and `$ ` lines in prose), the arguments of the tool calls the model issued, and what those calls do when
 * they are a coding agent's commands and edits. A coding agent's turn also shows the commands it ran just before
 * this call, with what they printed (the results this call reads).
 */
import type { Artifact } from "../domain/decision.ts"
import { ARTIFACT_CHARS, commandOf, toolCallArtifact } from "./agentTools.ts"
import { type ChatCall, isInstruction } from "./chatCall.ts"
import { excerpt, type FencedBlock, type FencedText, findFilePaths, isJsonDocument, splitFences, truncate } from "./text.ts"
const MAX_ARTIFACTS = 50

const SHELL_LANGUAGES = new Set([
  "bash", "sh", "shell", "zsh", "console", "shell-session", "shellsession", "terminal", "powershell", "pwsh", "ps1", "cmd", "bat"
])
const PROMPT_LINE = /^\s*\$ (.+)$/

/** The one path `text` consists of, or undefined. */
const onlyPath = (text: string): string | undefined => {
  const paths = findFilePaths(text)
  return paths.length === 1 ? paths[0] : undefined
}

/** ```ts title="src/app.ts"```, ```python:app/main.py```, or a fence whose info string is itself a path. */
const pathInInfo = (info: string): string | undefined => {
  const attribute = /\b(?:title|file|filename|path)=["']?([^"'\s]+)/.exec(info)?.[1]
  const afterColon = /^[\w+-]+:(\S+)/.exec(info)?.[1]
  return onlyPath(attribute ?? afterColon ?? info.split(/\s/, 1)[0] ?? "")
}

/** `// src/app.ts`, `# file: app/main.py`, `<!-- index.html -->` as the block's first line. */
const pathInFirstLine = (content: string): string | undefined => {
  const comment = /^\s*(?:\/\/|#|--|<!--|\/\*)\s*(?:file(?:name)?:\s*)?(\S+)\s*(?:-->|\*\/)?\s*$/i.exec(
    content.split("\n", 1)[0] ?? ""
  )
  return comment === null ? undefined : onlyPath(comment[1]!)
}

/** A short lead-in such as "Update `src/app.ts`:" or "**src/app.ts**" that names exactly one path. */
const pathInLeadIn = (line: string): string | undefined => {
  const text = line.replace(/[*_`#>]/g, "").replace(/^\s*(?:file(?:name)?|path):\s*/i, "").trim()
  if (text.length > 100) return undefined
  const path = onlyPath(text)
  return path !== undefined && (text.endsWith(":") || text === path) ? path : undefined
}

const fileNameOf = (block: FencedBlock): string | undefined =>
  pathInInfo(block.info) ?? pathInFirstLine(block.content) ?? pathInLeadIn(block.precedingLine)

/** The commands of a shell block: its `$ ` lines when it shows a session, else the whole block. */
const commandsOf = (content: string): string => {
  const prompted = content.split("\n").flatMap((line) => PROMPT_LINE.exec(line)?.[1] ?? [])
  return prompted.length > 0 ? prompted.join("\n") : content
}

const blockArtifact = (block: FencedBlock): Artifact => {
  const content = truncate(block.content, ARTIFACT_CHARS)
  const name = fileNameOf(block)
  const language = block.language ?? (name === undefined ? undefined : name.split(".").at(-1)?.toLowerCase())
  const withLanguage = language === undefined ? {} : { language }
  if (name !== undefined) return { kind: "file", name, ...withLanguage, content }
  if (block.language !== undefined && SHELL_LANGUAGES.has(block.language)) {
    return { kind: "command", ...withLanguage, content: truncate(commandsOf(block.content), ARTIFACT_CHARS) }
  }
  return { kind: "code", ...withLanguage, content }
}

/** The answer is one JSON document, bare or as the only content of a ```json fence. */
const structuredOutput = (call: ChatCall, { blocks, prose }: FencedText): Artifact | undefined => {
  const answer = call.answer.text
  const document = isJsonDocument(answer)
    ? answer.trim()
    : prose.trim() === "" && blocks.length === 1 && isJsonDocument(blocks[0]!.content)
    ? blocks[0]!.content.trim()
    : undefined
  if (document === undefined) return undefined
  return {
    kind: "structured_output",
    language: "json",
    ...(call.schemaName === undefined ? {} : { name: call.schemaName }),
    content: truncate(document, ARTIFACT_CHARS)
  }
}

/**
 * The commands run by the tool calls whose results close the input (this round of the agent's loop, before any
 * instructions the harness put after them), with their output.
 */
const commandsRan = (call: ChatCall): Array<Artifact> => {
  const { messages } = call
  let last = messages.length
  while (last > 0 && isInstruction(messages[last - 1]!)) last--
  let first = last
  while (first > 0 && messages[first - 1]!.role === "tool") first--
  const results = messages.slice(first, last)
  const step = messages[first - 1]
  if (results.length === 0 || step?.role !== "assistant") return []
  return step.toolCalls.flatMap((tool) => {
    const command = commandOf(tool)
    if (command === undefined) return []
    const result = results.find((message) => message.toolCallId === tool.id)
    return [{
      kind: "command" as const,
      name: tool.name,
      language: "shell",
      content: truncate(command, ARTIFACT_CHARS),
      ...(result === undefined ? {} : { result: excerpt(result.text) })
    }]
  })
}

export const extractArtifacts = (call: ChatCall): Array<Artifact> => {
  const artifacts: Array<Artifact> = [...commandsRan(call)]
  const fenced = splitFences(call.answer.text)
  const structured = structuredOutput(call, fenced)
  if (structured !== undefined) {
    artifacts.push(structured)
  } else {
    artifacts.push(...fenced.blocks.filter((block) => block.content.trim() !== "").map(blockArtifact))
    for (const line of fenced.prose.split("\n")) {
      const command = PROMPT_LINE.exec(line)?.[1]
      if (command !== undefined) artifacts.push({ kind: "command", content: command.trim() })
    }
  }
  for (const tool of call.answer.toolCalls) {
    artifacts.push({ kind: "tool_arguments", name: tool.name, language: "json", content: truncate(tool.arguments, ARTIFACT_CHARS) })
    const done = toolCallArtifact(tool)
    if (done !== undefined) artifacts.push(done)
  }
  return artifacts.slice(0, MAX_ARTIFACTS)
}

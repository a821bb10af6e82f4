/**
 * What coding agents' tool calls do, read from their arguments: the shell commands they run (Codex's
 * `exec_command`, `shell`, `shell_command` and `local_shell`; Claude Code's `Bash`) and the edits they make (Codex's
 * `apply_patch`; Claude Code's `Write`, `Edit` and `MultiEdit`). Names match whatever namespace a tool is in.
 */
import type { Artifact } from "../domain/decision.ts"
import type { ToolCall } from "./chatCall.ts"
import { parseJson, truncate } from "./text.ts"

/** Artifacts are kept whole for audit, up to this size each. */
export const ARTIFACT_CHARS = 20_000

type Args = Record<string, unknown>

const argsOf = (call: ToolCall): Args | undefined => {
  const value = parseJson(call.arguments)
  return typeof value === "object" && value !== null && !Array.isArray(value) ? (value as Args) : undefined
}

const text = (value: unknown): string | undefined => (typeof value === "string" && value.trim() !== "" ? value : undefined)

/** `bash -lc "…"` as Codex's shell tool writes a command: the command itself. */
const unwrapShell = (argv: ReadonlyArray<unknown>): string | undefined => {
  const parts = argv.map(String)
  if (parts.length === 3 && /^(?:ba|z)?sh$/.test(parts[0]!.split("/").at(-1)!) && /^-l?c$/.test(parts[1]!)) return parts[2]
  return parts.length === 0 ? undefined : parts.join(" ")
}

/** The shell command a tool call runs, if it is a shell tool. */
export const commandOf = (call: ToolCall): string | undefined => {
  const tool = call.name.split(".").at(-1)!
  const args = argsOf(call)
  switch (tool) {
    case "exec_command":
      return text(args?.cmd)
    case "shell":
    case "shell_command":
    case "Bash":
      return Array.isArray(args?.command) ? unwrapShell(args.command) : text(args?.command)
    case "local_shell": {
      const command = args?.command
      return Array.isArray(command) ? unwrapShell(command) : undefined
    }
    default:
      return undefined
  }
}

/** The edit a tool call makes, as an artifact (a patch, or a file written whole). */
const editOf = (call: ToolCall): Artifact | undefined => {
  const tool = call.name.split(".").at(-1)!
  if (tool === "apply_patch") {
    // a freeform (custom) tool's input is the patch itself; the JSON form carries it in `input`
    const args = argsOf(call)
    const patch = text(args?.input) ?? text(args?.patch) ?? (args === undefined ? text(call.arguments) : undefined)
    return patch === undefined ? undefined : { kind: "patch", language: "diff", content: truncate(patch, ARTIFACT_CHARS) }
  }
  const args = argsOf(call)
  const path = text(args?.file_path)
  if (path === undefined) return undefined
  if (tool === "Write" && typeof args?.content === "string") return { kind: "file", name: path, content: truncate(args.content, ARTIFACT_CHARS) }
  const edits = tool === "Edit" ? [args] : tool === "MultiEdit" && Array.isArray(args?.edits) ? (args.edits as Array<Args>) : []
  const hunks = edits.flatMap((edit) => {
    const before = typeof edit?.old_string === "string" ? edit.old_string : undefined
    const after = typeof edit?.new_string === "string" ? edit.new_string : undefined
    if (before === undefined || after === undefined) return []
    const lines = (prefix: string, body: string) => body.split("\n").map((line) => `${prefix}${line}`).join("\n")
    return [`@@\n${lines("-", before)}\n${lines("+", after)}`]
  })
  return hunks.length === 0 ? undefined : { kind: "patch", name: path, language: "diff", content: truncate(`--- ${path}\n+++ ${path}\n${hunks.join("\n")}`, ARTIFACT_CHARS) }
}

/** What a tool call the answer issued produces: the command it asks to run, or the edit it asks to make. */
export const toolCallArtifact = (call: ToolCall): Artifact | undefined => {
  const command = commandOf(call)
  if (command !== undefined) return { kind: "command", name: call.name, language: "shell", content: truncate(command, ARTIFACT_CHARS) }
  const edit = editOf(call)
  return edit === undefined ? undefined : { ...edit, name: edit.name ?? call.name }
}

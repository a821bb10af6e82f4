/**
 * What decoding a stream payload as a StorableCapture gives: the capture, or the issue as the interpreter words it.
 * Imported by the decoding test (the builder's decoder, compiled by Effect's JIT compiler) and run as a script under
 * `--disallow-code-generation-from-strings`, where the compiler cannot make its function and Effect interprets the
 * schema: the reference the compiled decoder is held to.
 *
 *   node --disallow-code-generation-from-strings test/support/capture-decoding.ts < payloads.json > outcomes.json
 */
import { Cause, Exit, Schema } from "effect"
import { Buffer } from "node:buffer"
import { StorableCapture } from "../../src/builder/reconstruct.ts"

export type DecodingOutcome =
  | { readonly ok: true; readonly capture: unknown }
  | { readonly ok: false; readonly issue: string }

const decode = Schema.decodeUnknownExit(StorableCapture)

export const decodingOutcomes = (payloads: ReadonlyArray<string>): Array<DecodingOutcome> =>
  payloads.map((payload) => {
    const exit = decode(JSON.parse(payload))
    if (Exit.isSuccess(exit)) return { ok: true, capture: exit.value }
    const error = Cause.squash(exit.cause)
    return { ok: false, issue: error instanceof Error ? error.message : String(error) }
  })

/** Whether this process can generate code (the compiler needs it): false under the flag above. */
export const codeGeneration = (): boolean => {
  try {
    return Function("return true")() as boolean
  } catch {
    return false
  }
}

if (import.meta.main) {
  const chunks: Array<Buffer> = []
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer)
  const payloads = JSON.parse(Buffer.concat(chunks).toString()) as Array<string>
  process.stdout.write(JSON.stringify({ codeGeneration: codeGeneration(), outcomes: decodingOutcomes(payloads) }))
}

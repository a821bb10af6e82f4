/**
 * The intake of a gateway request: its body read (bounded) while its Gateway Key is checked (cached), and the
 * request handed on once both are in — or refused with the 401/503 the key earns or a 413 for a body over the
 * limit. An over-limit body is answered at once and the rest of it read and dropped: a client still sending would
 * otherwise meet a reset connection and never read the answer (the openai SDK reports a connection error, and
 * retries). A client that sends for longer than DISCARD_MS more is cut.
 */
import type * as Http from "node:http"
import type { Principal } from "../domain/principal.ts"
import type { GatewayAuth } from "./GatewayAuth.ts"
import { gatewayError } from "./GatewayServer.ts"
import type { ProviderError } from "../providers/index.ts"

/** How long the rest of an over-limit body is read (and dropped) after the 413 before the connection is cut. */
const DISCARD_MS = 30_000

export interface IntakeOptions {
  readonly auth: GatewayAuth
  readonly maxBodyBytes: number
  /** the key may come as `x-api-key` (Anthropic clients' default) */
  readonly apiKeyHeader: boolean
  /** the key is good and the whole body is in: its text, and the bytes it was decoded from */
  readonly ready: (principal: Principal, body: string, bytes: Buffer) => void
  /** the request is refused before anything was done with it */
  readonly refused: (error: ProviderError) => void
}

/** Starts reading `req`; exactly one of `ready` and `refused` is called, unless the client goes away first. */
export const intake = (req: Http.IncomingMessage, options: IntakeOptions): void => {
  const limit = options.maxBodyBytes
  let settled = false
  let principal: Principal | undefined
  let chunks: Array<Buffer> = []
  let size = 0
  let body: string | undefined
  let bytes: Buffer | undefined

  const refuse = (error: ProviderError) => {
    if (settled) return
    settled = true
    chunks = []
    options.refused(error)
  }
  const proceed = () => {
    if (settled || principal === undefined || body === undefined || bytes === undefined) return
    settled = true
    options.ready(principal, body, bytes)
  }
  const tooLarge = () => {
    refuse(gatewayError(413, `the request body is larger than ${limit} bytes`, "request_too_large"))
    if (req.complete) return
    const cut = setTimeout(() => req.destroy(), DISCARD_MS)
    req.once("end", () => clearTimeout(cut))
    req.once("close", () => clearTimeout(cut))
  }

  req.on("data", (chunk: Buffer) => {
    if (settled) return
    size += chunk.length
    if (size > limit) return tooLarge()
    chunks.push(chunk)
  })
  req.on("end", () => {
    if (settled) return
    bytes = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size)
    body = bytes.toString("utf8")
    chunks = []
    proceed()
  })
  const declared = req.headers["content-length"]
  if (declared !== undefined && Number(declared) > limit) return tooLarge()
  options.auth(
    req,
    options.apiKeyHeader,
    (accepted) => {
      principal = accepted
      proceed()
    },
    refuse
  )
}

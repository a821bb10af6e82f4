/**
 * Client ID Metadata Documents (draft-ietf-oauth-client-id-metadata-document, which the MCP authorization spec of
 * 2025-11-25 recommends over dynamic registration): a client names itself by an https URL, and the JSON document at
 * that URL is its registration. The ledger takes public clients only this way (`token_endpoint_auth_method` none:
 * a document cannot share a secret), which is what MCP clients are.
 *
 * Fetching a URL a stranger chose is a server-side request forgery risk, so a document is fetched only:
 * - from an https URL with a path, in normal form, without credentials or fragment;
 * - from a host whose every address is public: a name is resolved first and each address checked (loopback,
 *   private, link-local, carrier-grade NAT, unique-local, multicast, documentation and other reserved ranges are
 *   refused, and so are the IPv6 forms that embed an IPv4 address — IPv4-compatible, NAT64, 6to4, Teredo — except
 *   IPv4-mapped, judged as the IPv4 address it maps), and the connection is then made to exactly the addresses
 *   checked, so a second answer of the DNS (rebinding) cannot point it elsewhere;
 * - within DOCUMENT_FETCH_TIMEOUT_MS for the whole exchange, DOCUMENT_MAX_BYTES of body at most, redirects never
 *   followed, and a limited number of uncached fetches per connecting address and minute.
 * When LEDGER_PUBLIC_URL is itself a loopback address (a developer's machine, the tests) the ledger cannot be
 * reached by anyone else, so loopback documents — plain http included — are allowed; private addresses still are not.
 *
 * Documents are kept in this process's memory for their Cache-Control max-age (DOCUMENT_CACHE_DEFAULT_S without
 * one, DOCUMENT_CACHE_MAX_S at most, not at all with no-store/no-cache). A client is written to `oauth_clients`
 * (keyed by its URL) only when a user signs in for it, so its grants and tokens have a row to refer to; the token
 * and revocation endpoints authenticate it from that row as the public client it is.
 */
import { Clock, Effect, Result } from "effect"
import * as Dns from "node:dns"
import * as Net from "node:net"
import { Agent, request } from "undici"
import { tokenBuckets } from "../serving/tokenBuckets.ts"
import { LOOPBACK_HOSTS } from "../config/LedgerConfig.ts"
import type { DatabaseUnavailable } from "../domain/errors.ts"
import type { OAuthClient, OAuthStore } from "../auth/OAuthStore.ts"
import { GRANT_TYPES, redirectUriProblem } from "./redirectUris.ts"
import { BoundedMap } from "../collections/BoundedMap.ts"

export const DOCUMENT_FETCH_TIMEOUT_MS = 5_000
export const DOCUMENT_MAX_BYTES = 5 * 1024
export const DOCUMENT_CACHE_DEFAULT_S = 300
export const DOCUMENT_CACHE_MAX_S = 86_400
/** uncached document fetches per connecting address and minute, in bursts of as many */
export const DOCUMENT_FETCHES_PER_MINUTE = 30
const MAX_CLIENT_ID_LENGTH = 2_048
const MAX_CACHED = 1_000
const MAX_REDIRECT_URIS = 20
/** the optional metadata kept from a document (what the pages show, and what registration keeps too) */
const KEPT_STRING_FIELDS = ["client_name", "client_uri", "software_id", "software_version"] as const

/** Whether a client_id is meant as a metadata document's URL (a registered client's id is `ldg_client_…`). */
export const isMetadataDocumentId = (clientId: string): boolean => /^https?:\/\//i.test(clientId)

/** The host a document client is known by (the consent page names it), or undefined for a registered client. */
export const documentHost = (client: OAuthClient): string | undefined =>
  isMetadataDocumentId(client.client_id) ? new URL(client.client_id).host : undefined

/** Why a client_id cannot be a metadata document's URL (draft §3), or undefined when it can. */
export const clientIdProblem = (clientId: string, allowLoopback: boolean): string | undefined => {
  if (clientId.length > MAX_CLIENT_ID_LENGTH) return `is longer than ${MAX_CLIENT_ID_LENGTH} characters`
  let url: URL
  try {
    url = new URL(clientId)
  } catch {
    return "is not a URL"
  }
  if (url.protocol !== "https:" && !(allowLoopback && url.protocol === "http:" && LOOPBACK_HOSTS.has(url.hostname))) {
    return "must be an https URL"
  }
  if (url.username !== "" || url.password !== "") return "must not contain a user name or password"
  if (clientId.includes("#")) return "must not contain a fragment"
  if (url.pathname === "/") return "must have a path (for example https://client.example/oauth/client.json)"
  // simple string comparison is how the document's client_id is matched: only the normal form is accepted (no
  // dot segments, lower-case scheme and host, no default port)
  if (url.href !== clientId) return `must be written in normal form (${url.href})`
  return undefined
}

// ---------------------------------------------------------------------------------------------------------------
// Addresses

const LOOPBACK_V4 = new Net.BlockList()
LOOPBACK_V4.addSubnet("127.0.0.0", 8, "ipv4")

/** Not the public internet (IANA special-purpose address registries). */
const NOT_PUBLIC = new Net.BlockList()
for (
  const [network, prefix] of [
    ["0.0.0.0", 8],
    ["10.0.0.0", 8],
    ["100.64.0.0", 10],
    ["169.254.0.0", 16],
    ["172.16.0.0", 12],
    ["192.0.0.0", 24],
    ["192.0.2.0", 24],
    ["192.88.99.0", 24],
    ["192.168.0.0", 16],
    ["198.18.0.0", 15],
    ["198.51.100.0", 24],
    ["203.0.113.0", 24],
    ["224.0.0.0", 4],
    ["240.0.0.0", 4]
  ] as const
) NOT_PUBLIC.addSubnet(network, prefix, "ipv4")
// IPv6 is judged within global unicast (2000::/3) only — outside it are loopback, unspecified, the IPv4-compatible
// and -translated forms (::/8), NAT64 (64:ff9b::/96, 64:ff9b:1::/48), discard, unique-local, link- and site-local,
// multicast — less these ranges inside it:
for (
  const [network, prefix] of [
    // IETF protocol assignments, Teredo (which embeds an IPv4 address) among them
    ["2001::", 23],
    ["2001:db8::", 32],
    // 6to4 embeds an IPv4 address, which may be a private one
    ["2002::", 16],
    ["3fff::", 20]
  ] as const
) NOT_PUBLIC.addSubnet(network, prefix, "ipv6")

/** The eight 16-bit groups of a valid IPv6 address (any text form: `::`, a dotted IPv4 tail, leading zeros). */
const ipv6Groups = (address: string): ReadonlyArray<number> => {
  const dotted = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(address)
  const text = dotted === null
    ? address
    : `${address.slice(0, dotted.index)}${((Number(dotted[1]) << 8) | Number(dotted[2])).toString(16)}:${((Number(dotted[3]) << 8) | Number(dotted[4])).toString(16)}`
  const parse = (part: string) => (part === "" ? [] : part.split(":").map((group) => parseInt(group, 16)))
  const [head, tail] = text.split("::") as [string, string | undefined]
  if (tail === undefined) return parse(head)
  const [before, after] = [parse(head), parse(tail)]
  return [...before, ...Array<number>(8 - before.length - after.length).fill(0), ...after]
}

const v4Problem = (address: string, allowLoopback: boolean): string | undefined =>
  LOOPBACK_V4.check(address, "ipv4")
    ? allowLoopback ? undefined : "a loopback address"
    : NOT_PUBLIC.check(address, "ipv4")
    ? "a private, link-local or reserved address"
    : undefined

/**
 * Why a document may not be fetched from an address, or undefined when it may. An IPv4-mapped IPv6 address
 * (::ffff:a.b.c.d, however written) is the IPv4 address it maps, and is judged by the IPv4 rules.
 */
export const addressProblem = (address: string, allowLoopback: boolean): string | undefined => {
  if (Net.isIPv4(address)) return v4Problem(address, allowLoopback)
  if (!Net.isIPv6(address)) return "not an IP address"
  // a zone id scopes an address to one interface: only link-local ones need it, and a name never resolves to it
  if (address.includes("%")) return "a scoped address (with a zone id)"
  const groups = ipv6Groups(address)
  if (groups.slice(0, 5).every((group) => group === 0)) {
    if (groups[5] === 0xffff) return v4Problem(`${groups[6]! >> 8}.${groups[6]! & 0xff}.${groups[7]! >> 8}.${groups[7]! & 0xff}`, allowLoopback)
    if (groups[5] === 0 && groups[6] === 0 && groups[7] === 1) return allowLoopback ? undefined : "a loopback address"
  }
  if ((groups[0]! & 0xe000) !== 0x2000 || NOT_PUBLIC.check(groups.map((group) => group.toString(16)).join(":"), "ipv6")) {
    return "a private, link-local or reserved address"
  }
  return undefined
}

// ---------------------------------------------------------------------------------------------------------------
// Caching

/** How long a document may be kept, from its Cache-Control header (s-maxage wins over max-age: this is a shared cache). */
export const cacheSeconds = (cacheControl: string | undefined): number => {
  if (cacheControl === undefined || cacheControl.trim() === "") return DOCUMENT_CACHE_DEFAULT_S
  const directives = new Map(cacheControl.toLowerCase().split(",").map((part) => {
    const [name, value] = part.trim().split("=", 2)
    return [name!.trim(), value?.trim().replace(/^"|"$/g, "")] as const
  }))
  if (directives.has("no-store") || directives.has("no-cache")) return 0
  const age = directives.get("s-maxage") ?? directives.get("max-age")
  if (age === undefined || !/^\d+$/.test(age)) return DOCUMENT_CACHE_DEFAULT_S
  return Math.min(Number(age), DOCUMENT_CACHE_MAX_S)
}

// ---------------------------------------------------------------------------------------------------------------
// The document

/** A document (or its fetch) refused, in words for the page. */
class Refused extends Error {}

const keptStrings = (input: Record<string, unknown>) => {
  const kept: Record<string, string> = {}
  for (const field of KEPT_STRING_FIELDS) {
    const value = input[field]
    if (value === undefined) continue
    if (typeof value !== "string" || value.length > 200) throw new Refused(`${field} must be a string of at most 200 characters`)
    kept[field] = value
  }
  return kept
}

/** The client a fetched document describes (draft §4), or a refusal of it. */
export const clientOfDocument = (clientId: string, body: unknown): OAuthClient => {
  if (typeof body !== "object" || body === null || Array.isArray(body)) throw new Refused("it is not a JSON object")
  const input = body as Record<string, unknown>
  if (input.client_id !== clientId) throw new Refused("its client_id is not the URL it was fetched from")
  // no secret can be shared through a public document: public clients only
  if (input.client_secret !== undefined || input.client_secret_expires_at !== undefined) throw new Refused("it must not contain a client secret")
  const method = input.token_endpoint_auth_method ?? "none"
  if (method !== "none") throw new Refused(`token_endpoint_auth_method must be none (public clients only), not ${String(method)}`)
  const redirectUris = input.redirect_uris
  if (
    !Array.isArray(redirectUris) || redirectUris.length === 0 || redirectUris.length > MAX_REDIRECT_URIS ||
    !redirectUris.every((uri) => typeof uri === "string")
  ) {
    throw new Refused(`redirect_uris must be a list of 1 to ${MAX_REDIRECT_URIS} URIs`)
  }
  const problem = redirectUris.map(redirectUriProblem).find((p) => p !== undefined)
  if (problem !== undefined) throw new Refused(`redirect_uris: ${problem}`)
  const grantTypes = input.grant_types ?? GRANT_TYPES
  if (!Array.isArray(grantTypes) || !grantTypes.includes("authorization_code")) {
    throw new Refused("grant_types must include authorization_code")
  }
  const responseTypes = input.response_types ?? ["code"]
  if (!Array.isArray(responseTypes) || !responseTypes.includes("code")) throw new Refused("response_types must include code")
  return {
    client_id: clientId,
    client_secret_hash: null,
    token_endpoint_auth_method: "none",
    redirect_uris: redirectUris as Array<string>,
    metadata: {
      ...keptStrings(input),
      redirect_uris: redirectUris,
      token_endpoint_auth_method: "none",
      // the grants this server knows of those the document lists (a refresh_token grant not listed is not allowed)
      grant_types: GRANT_TYPES.filter((grant) => grantTypes.includes(grant)),
      response_types: ["code"]
    }
  }
}

const JSON_TYPE = /^application\/(?:json|[\w.!#$&^-]+\+json)$/

/** the bytes of a body, refused past DOCUMENT_MAX_BYTES (the body is not read further) */
const boundedBody = async (body: AsyncIterable<Buffer> & { destroy(): unknown }) => {
  const chunks: Array<Buffer> = []
  let size = 0
  for await (const chunk of body) {
    size += chunk.length
    if (size > DOCUMENT_MAX_BYTES) {
      body.destroy()
      throw new Refused(`it is larger than ${DOCUMENT_MAX_BYTES} bytes`)
    }
    chunks.push(chunk)
  }
  return Buffer.concat(chunks).toString("utf8")
}

const withDeadline = <A>(promise: Promise<A>, signal: AbortSignal): Promise<A> =>
  new Promise((resolve, reject) => {
    const abort = () => reject(signal.reason)
    if (signal.aborted) return abort()
    signal.addEventListener("abort", abort, { once: true })
    promise.then(resolve, reject).finally(() => signal.removeEventListener("abort", abort))
  })

/** The checked addresses of a document's host: every one must be allowed. */
const checkedAddresses = async (url: URL, allowLoopback: boolean, signal: AbortSignal) => {
  const host = url.hostname.replace(/^\[|\]$/g, "")
  const family = Net.isIP(host)
  const addresses = family !== 0
    ? [{ address: host, family }]
    : await withDeadline(Dns.promises.lookup(host, { all: true, order: "verbatim" }), signal).catch((cause: unknown) => {
      throw (cause as { name?: string }).name === "TimeoutError"
        ? cause
        : new Refused(`its host ${host} could not be resolved (${(cause as { code?: string }).code ?? String(cause)})`)
    })
  for (const { address } of addresses) {
    const problem = addressProblem(address, allowLoopback)
    if (problem !== undefined) throw new Refused(`its host ${host} is ${address}, ${problem}`)
  }
  return addresses
}

/** Connects to the checked addresses only, whatever the DNS would answer now. */
const pinnedLookup = (addresses: ReadonlyArray<{ readonly address: string; readonly family: number }>): Net.LookupFunction =>
  ((_hostname: string, options: Dns.LookupOptions, callback: (...args: Array<unknown>) => void) => {
    if (options.all) callback(null, addresses)
    else callback(null, addresses[0]!.address, addresses[0]!.family)
  }) as Net.LookupFunction

const describeFailure = (cause: unknown): string => {
  if (cause instanceof Refused) return cause.message
  const error = cause as { name?: string; code?: string; message?: string; cause?: { code?: string } }
  if (error?.name === "TimeoutError" || error?.name === "AbortError" || /Timeout/.test(error?.code ?? "")) {
    return `it did not arrive within ${DOCUMENT_FETCH_TIMEOUT_MS / 1000} s`
  }
  return `it could not be fetched (${error?.code ?? error?.cause?.code ?? error?.message ?? String(cause)})`
}

/** Fetches and checks a client's document: the client, and the seconds it may be kept. */
export const fetchClientDocument = async (clientId: string, allowLoopback: boolean) => {
  const url = new URL(clientId)
  const signal = AbortSignal.timeout(DOCUMENT_FETCH_TIMEOUT_MS)
  const addresses = await checkedAddresses(url, allowLoopback, signal)
  const agent = new Agent({
    connect: { lookup: pinnedLookup(addresses), timeout: DOCUMENT_FETCH_TIMEOUT_MS },
    headersTimeout: DOCUMENT_FETCH_TIMEOUT_MS,
    bodyTimeout: DOCUMENT_FETCH_TIMEOUT_MS,
    pipelining: 0
  })
  try {
    // undici's request never follows redirects (that takes an interceptor)
    const response = await request(url, {
      dispatcher: agent,
      method: "GET",
      signal,
      headers: { accept: "application/json", "user-agent": "agent-decision-ledger (OAuth client metadata)" }
    })
    // a body left unread is destroyed, which makes it emit an error: nobody else listens for it
    response.body.on("error", () => undefined)
    const header = (name: string) => {
      const value = response.headers[name]
      return Array.isArray(value) ? value.join(", ") : value
    }
    if (response.statusCode !== 200) {
      response.body.destroy()
      throw new Refused(
        response.statusCode >= 300 && response.statusCode < 400
          ? `it answered a redirect (HTTP ${response.statusCode}); redirects are not followed`
          : `it answered HTTP ${response.statusCode}`
      )
    }
    const type = (header("content-type") ?? "").split(";")[0]!.trim().toLowerCase()
    if (!JSON_TYPE.test(type)) {
      response.body.destroy()
      throw new Refused(`its content type is ${type === "" ? "missing" : type}, not application/json`)
    }
    if (Number(header("content-length") ?? 0) > DOCUMENT_MAX_BYTES) {
      response.body.destroy()
      throw new Refused(`it is larger than ${DOCUMENT_MAX_BYTES} bytes`)
    }
    const text = await boundedBody(response.body)
    let body: unknown
    try {
      body = JSON.parse(text)
    } catch {
      throw new Refused("it is not valid JSON")
    }
    return { client: clientOfDocument(clientId, body), keepSeconds: cacheSeconds(header("cache-control")) }
  } finally {
    agent.destroy().catch(() => undefined)
  }
}

// ---------------------------------------------------------------------------------------------------------------
// The directory of clients the endpoints look up

export type ClientLookup =
  | { readonly _tag: "Found"; readonly client: OAuthClient }
  /** in words for the user: the client cannot be used (unknown, or its document refused) */
  | { readonly _tag: "Refused"; readonly message: string }

export const UNREGISTERED_CLIENT = "This client is not registered here. Let the MCP client register again and retry."

export interface ClientDirectory {
  /**
   * The client a client_id names in an authorization request: a registered one from the store, or one known by its
   * metadata document (cached, else fetched). `requester` (the connecting address) is counted for fetches.
   */
  lookup(clientId: string, requester: string): Effect.Effect<ClientLookup, DatabaseUnavailable>
}

interface Cached {
  readonly client: OAuthClient
  readonly until: number
}

export const clientDirectory = (store: OAuthStore["Service"], options: { readonly allowLoopback: boolean }): ClientDirectory => {
  const cache = new BoundedMap<string, Cached>(MAX_CACHED)
  const inFlight = new Map<string, Promise<{ client: OAuthClient; keepSeconds: number }>>()
  const fetches = tokenBuckets(DOCUMENT_FETCHES_PER_MINUTE / 60, DOCUMENT_FETCHES_PER_MINUTE)
  const refused = (message: string): ClientLookup => ({ _tag: "Refused", message })

  const fromDocument = Effect.fnUntraced(function*(clientId: string, requester: string) {
    const problem = clientIdProblem(clientId, options.allowLoopback)
    if (problem !== undefined) return refused(`The client's id ${clientId} cannot be used: it ${problem}.`)
    const now = yield* Clock.currentTimeMillis
    const cached = cache.get(clientId)
    if (cached !== undefined && cached.until > now) return { _tag: "Found", client: cached.client } satisfies ClientLookup
    cache.delete(clientId)
    const wait = fetches(requester, now)
    if (wait > 0) return refused(`Too many client documents fetched for this address; wait ${wait} s and connect again.`)
    const fetched = yield* Effect.tryPromise({
      try: () => {
        // two sign-ins at once fetch the document once
        let pending = inFlight.get(clientId)
        if (pending === undefined) {
          pending = fetchClientDocument(clientId, options.allowLoopback).finally(() => inFlight.delete(clientId))
          inFlight.set(clientId, pending)
        }
        return pending
      },
      catch: describeFailure
    }).pipe(Effect.result)
    if (Result.isFailure(fetched)) {
      yield* Effect.logInfo("oauth client metadata document refused").pipe(Effect.annotateLogs({ client_id: clientId, reason: fetched.failure }))
      return refused(`The client's metadata document at ${clientId} cannot be used: ${fetched.failure}.`)
    }
    const { client, keepSeconds } = fetched.success
    if (keepSeconds > 0) {
      cache.set(clientId, { client, until: now + keepSeconds * 1000 })
    }
    return { _tag: "Found", client } satisfies ClientLookup
  })

  const lookup = Effect.fnUntraced(function*(clientId: string, requester: string) {
    if (isMetadataDocumentId(clientId)) return yield* fromDocument(clientId, requester)
    const client = yield* store.client(clientId)
    return client === undefined ? refused(UNREGISTERED_CLIENT) : ({ _tag: "Found", client } satisfies ClientLookup)
  })

  return { lookup }
}

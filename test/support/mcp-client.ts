/**
 * The MCP SDK's own client against a running API server (`{baseUrl}/mcp`), for tests:
 *
 *   const client = yield* mcpClient(stack.baseUrl, { token: stack.pat })
 *   const result = yield* callTool(client, "list_agents", { limit: 5 })
 *
 * The connection is closed with the scope. `authProvider` runs the SDK's OAuth flow instead of a fixed token
 * (`MemoryOAuthProvider` below is an in-memory one).
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { type OAuthClientProvider, UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import type { OAuthClientInformationMixed, OAuthClientMetadata, OAuthTokens } from "@modelcontextprotocol/sdk/shared/auth.js"
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js"
import { Effect, type Scope } from "effect"
import * as Crypto from "node:crypto"

export interface McpClientOptions {
  /** sent as `Authorization: Bearer …` */
  readonly token?: string | undefined
  readonly authProvider?: OAuthClientProvider | undefined
  /** declared client capabilities (e.g. the MCP Apps extension) */
  readonly capabilities?: Record<string, unknown> | undefined
}

export const mcpTransport = (baseUrl: string, options: McpClientOptions = {}) =>
  new StreamableHTTPClientTransport(new URL(`${baseUrl}/mcp`), {
    ...(options.token === undefined ? {} : { requestInit: { headers: { authorization: `Bearer ${options.token}` } } }),
    ...(options.authProvider === undefined ? {} : { authProvider: options.authProvider })
  })

export const newMcpClient = (options: McpClientOptions = {}) =>
  new Client({ name: "ledger-tests", version: "1.0.0" }, { capabilities: options.capabilities ?? {} })

/** A connected client, closed when the scope ends. */
export const mcpClient = (baseUrl: string, options: McpClientOptions = {}): Effect.Effect<Client, unknown, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.tryPromise(async () => {
      const client = newMcpClient(options)
      await client.connect(mcpTransport(baseUrl, options))
      return client
    }),
    (client) => Effect.promise(() => client.close())
  )

/** `tools/call`, as the SDK returns it (its output-schema validation included). */
export const callTool = (client: Client, name: string, args: Record<string, unknown> = {}) =>
  Effect.promise(() => client.callTool({ name, arguments: args }) as Promise<CallToolResult>)

/** The text of a result's content blocks. */
export const textOf = (result: CallToolResult): string =>
  result.content.map((block) => (block.type === "text" ? block.text : "")).join("\n")

/**
 * An OAuth client of the SDK's `auth()` flow that keeps everything in memory: it registers dynamically (no client
 * id or secret to start with), stores the PKCE verifier and tokens, and records the authorization URL it is sent
 * to instead of opening a browser — the test drives that URL itself.
 */
export class MemoryOAuthProvider implements OAuthClientProvider {
  client: OAuthClientInformationMixed | undefined
  saved: OAuthTokens | undefined
  verifier = ""
  authorizationUrl: URL | undefined
  readonly redirect: string
  readonly metadata: OAuthClientMetadata

  constructor(redirect: string, metadata: Partial<OAuthClientMetadata> = {}) {
    this.redirect = redirect
    this.metadata = {
      client_name: "Ledger e2e client",
      redirect_uris: [redirect],
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
      ...metadata
    }
  }

  get redirectUrl() {
    return this.redirect
  }
  get clientMetadata() {
    return this.metadata
  }
  clientInformation() {
    return this.client
  }
  saveClientInformation(information: OAuthClientInformationMixed) {
    this.client = information
  }
  tokens() {
    return this.saved
  }
  saveTokens(tokens: OAuthTokens) {
    this.saved = tokens
  }
  redirectToAuthorization(url: URL) {
    this.authorizationUrl = url
  }
  saveCodeVerifier(verifier: string) {
    this.verifier = verifier
  }
  codeVerifier() {
    return this.verifier
  }
}

// ---------------------------------------------------------------------------------------------------------------
// The authorization server's forms and endpoints, as a browser and a client use them (for flows without a browser)

/** A PKCE S256 pair. */
export const pkcePair = () => {
  const verifier = Crypto.randomBytes(32).toString("base64url")
  return { verifier, challenge: Crypto.createHash("sha256").update(verifier).digest("base64url") }
}

export interface FormReply {
  readonly status: number
  readonly location: string | null
  readonly text: string
  readonly json: any
}

/** POSTs a form without following redirects. */
export const postForm = async (url: string, form: Record<string, string>, headers: Record<string, string> = {}): Promise<FormReply> => {
  const response = await fetch(url, {
    method: "POST",
    redirect: "manual",
    headers: { "content-type": "application/x-www-form-urlencoded", ...headers },
    body: new URLSearchParams(form)
  })
  const text = await response.text()
  let json: any = undefined
  try {
    json = JSON.parse(text)
  } catch {
    // an HTML page
  }
  return { status: response.status, location: response.headers.get("location"), text, json }
}

/** RFC 7591 registration of a client (public by default). */
export const registerOAuthClient = async (baseUrl: string, redirect: string, extra: Record<string, unknown> = {}) => {
  const response = await fetch(`${baseUrl}/oauth/register`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ client_name: "forms client", redirect_uris: [redirect], token_endpoint_auth_method: "none", ...extra })
  })
  return { status: response.status, body: await response.json() as any }
}

/**
 * The SDK client's first connection without a token: it follows the 401 challenge, registers and, instead of opening
 * a browser, leaves the authorization URL in `provider.authorizationUrl`. `transport.finishAuth(code)` completes it.
 */
export const beginSdkAuthorization = (baseUrl: string, redirectUrl: string) =>
  Effect.promise(async () => {
    const provider = new MemoryOAuthProvider(redirectUrl)
    const transport = mcpTransport(baseUrl, { authProvider: provider })
    const refused = await newMcpClient().connect(transport).then(() => undefined, (error: unknown) => error)
    if (!(refused instanceof UnauthorizedError)) throw new Error(`expected the SDK to ask for authorization, got ${String(refused)}`)
    return { provider, transport, authorizationUrl: provider.authorizationUrl! }
  })

/** Whether /mcp accepts a bearer token: a tools/list round trip with the SDK client. */
export const mcpAccepts = async (baseUrl: string, token: string): Promise<boolean> => {
  const client = newMcpClient()
  try {
    await client.connect(mcpTransport(baseUrl, { token }))
    await client.listTools()
    return true
  } catch {
    return false
  } finally {
    await client.close()
  }
}

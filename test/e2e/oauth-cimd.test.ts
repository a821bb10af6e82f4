/**
 * MCP OAuth with Client ID Metadata Documents, end to end: a client named by the URL of its document (served by a
 * loopback HTTP server: allowed because the ledger's public URL is loopback too) completes the flow — sign-in page
 * and consent page naming the client and the document's host, the code redeemed by the public client with PKCE, the
 * token accepted at /mcp, refreshed, the document fetched once and kept for its Cache-Control. Then what is refused:
 * a document whose client_id is another URL, a redirect URI it does not list, one too large (declared or streamed),
 * a confidential auth method or a secret, a redirect (not followed), an error status, the wrong content type,
 * missing redirect URIs, a URL without a path, a document that does not answer in time; and, with a public URL that
 * is not loopback, plain http, and hosts on loopback, private or link-local addresses (never fetched).
 */
import { assert, describe, layer } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import * as Http from "node:http"
import { DOCUMENT_FETCH_TIMEOUT_MS, DOCUMENT_MAX_BYTES } from "../../src/oauth/clientMetadataDocument.ts"
import { ScopedSql, TenantSql } from "../../src/store/TenantSql.ts"
import { ApiStack } from "../support/api-stack.ts"
import { mcpAccepts, pkcePair, postForm } from "../support/mcp-client.ts"
import { authorizationQuery, oauthBrowser, type Reply, ticketOf } from "../support/oauth-browser.ts"
import { onFreePort } from "../support/ports.ts"

interface Served {
  readonly status?: number
  readonly headers?: Record<string, string>
  /** a JSON value, or the body as it is */
  readonly body?: unknown
  /** sent in two chunks without a content-length */
  readonly streamed?: boolean
  /** never answer (the fetch must give up) */
  readonly hang?: boolean
}

/** Client documents on a loopback port: `serve(path, answer)`, and how often each path was fetched. */
class Documents extends Context.Service<Documents, {
  readonly origin: string
  serve(path: string, answer: Served): string
  hits(path: string): number
}>()("test/cimd/Documents") {
  static readonly layer = Layer.effect(
    Documents,
    Effect.gen(function*() {
      const answers = new Map<string, Served>()
      const hits = new Map<string, number>()
      const hanging = new Set<Http.ServerResponse>()
      const server = yield* Effect.acquireRelease(
        onFreePort((port) =>
          Effect.tryPromise(() =>
            new Promise<Http.Server>((resolve, reject) => {
              const server = Http.createServer((request, response) => {
                const path = new URL(request.url!, "http://127.0.0.1").pathname
                hits.set(path, (hits.get(path) ?? 0) + 1)
                const answer = answers.get(path)
                if (answer === undefined) return response.writeHead(404).end()
                if (answer.hang) return void hanging.add(response)
                const body = typeof answer.body === "string" ? answer.body : JSON.stringify(answer.body)
                if (answer.streamed) {
                  response.writeHead(answer.status ?? 200, { "content-type": "application/json", ...answer.headers })
                  response.write(body.slice(0, 1000))
                  return void setTimeout(() => response.end(body.slice(1000)), 20)
                }
                response.writeHead(answer.status ?? 200, {
                  "content-type": "application/json",
                  "content-length": String(Buffer.byteLength(body)),
                  ...answer.headers
                }).end(body)
              })
              server.once("error", reject)
              server.listen(port, "127.0.0.1", () => resolve(server))
            })
          )
        ).pipe(Effect.orDie),
        (server) =>
          Effect.promise(() =>
            new Promise<void>((resolve) => {
              for (const response of hanging) response.destroy()
              server.closeAllConnections()
              server.close(() => resolve())
            })
          )
      )
      const port = (server.address() as { port: number }).port
      const origin = `http://127.0.0.1:${port}`
      return {
        origin,
        serve: (path, answer) => {
          answers.set(path, answer)
          return `${origin}${path}`
        },
        hits: (path) => hits.get(path) ?? 0
      }
    })
  )
}

const REDIRECT = "http://127.0.0.1:9/cb"

/** A valid document for a client id (its name, one loopback redirect, a public client). */
const documentFor = (clientId: string, extra: Record<string, unknown> = {}) => ({
  client_id: clientId,
  client_name: "Documented Client",
  client_uri: "https://client.example",
  redirect_uris: [REDIRECT],
  grant_types: ["authorization_code", "refresh_token"],
  response_types: ["code"],
  token_endpoint_auth_method: "none",
  ...extra
})

const live = <A>(f: () => Promise<A>) => Effect.promise(f)

/** GET /oauth/authorize for a client (the resource named by the ledger's public URL), from a fresh browser. */
const page = (clientId: string, redirect = REDIRECT): Effect.Effect<Reply, never, ApiStack> =>
  Effect.gen(function*() {
    const { baseUrl, settings } = yield* ApiStack
    return yield* live(() => oauthBrowser(baseUrl).authorize(authorizationQuery(settings.publicUrl, { clientId, redirect })))
  })

const accepted = (baseUrl: string, token: string) => live(() => mcpAccepts(baseUrl, token))

/** An error page (no redirect: the client's redirect URI cannot be trusted) that says `why`. */
const assertRefused = (reply: Reply, why: string) => {
  assert.strictEqual(reply.status, 400, reply.text)
  assert.isNull(reply.location)
  assert.include(reply.text.replaceAll("&#39;", "'"), why)
  assert.notInclude(reply.text, `name="password"`, "no sign-in form")
}

describe("MCP OAuth with Client ID Metadata Documents", () => {
  layer(Documents.layer.pipe(Layer.merge(ApiStack.layer())), { timeout: 180_000, excludeTestServices: true })("loopback ledger", (it) => {
    it.effect("a client named by its document's URL signs in, gets tokens (public, PKCE), calls /mcp and refreshes", () =>
      Effect.gen(function*() {
        const { baseUrl, pat, principal, context } = yield* ApiStack
        const documents = yield* Documents
        const clientId = `${documents.origin}/clients/good.json`
        documents.serve("/clients/good.json", { body: documentFor(clientId) })
        const metadata = yield* live(() => fetch(`${baseUrl}/.well-known/oauth-authorization-server`).then((r) => r.json()))
        assert.strictEqual((metadata as any).client_id_metadata_document_supported, true)

        const { verifier, challenge } = pkcePair()
        const browser = oauthBrowser(baseUrl)
        const signIn = yield* live(() => browser.authorize(authorizationQuery(baseUrl, { clientId, redirect: REDIRECT, challenge })))
        assert.strictEqual(signIn.status, 200, signIn.text)
        assert.include(signIn.text, "Sign in to connect Documented Client")
        assert.include(signIn.text, `<span class="host">(${new URL(documents.origin).host})</span>`)
        const consent = yield* live(() => browser.signInWithToken(signIn, pat))
        assert.strictEqual(consent.status, 200, consent.text)
        assert.include(consent.text, "Allow Documented Client?")
        assert.include(consent.text, `describes itself in a document on <strong>${new URL(documents.origin).host}</strong>`)
        assert.strictEqual(documents.hits("/clients/good.json"), 1, "fetched once: the sign-in kept it")

        const location = yield* live(() => browser.allow(consent, principal.workspace_id))
        assert.strictEqual(location.searchParams.get("iss"), baseUrl)
        const token = (form: Record<string, string>) => live(() => postForm(`${baseUrl}/oauth/token`, form))
        const issued = yield* token({
          grant_type: "authorization_code",
          client_id: clientId,
          code: location.searchParams.get("code")!,
          code_verifier: verifier,
          redirect_uri: REDIRECT,
          resource: `${baseUrl}/mcp`
        })
        assert.strictEqual(issued.status, 200, issued.text)
        assert.isTrue(yield* accepted(baseUrl, issued.json.access_token))
        const refreshed = yield* token({ grant_type: "refresh_token", client_id: clientId, refresh_token: issued.json.refresh_token })
        assert.strictEqual(refreshed.status, 200, refreshed.text)
        assert.isTrue(yield* accepted(baseUrl, refreshed.json.access_token))
        // a public client: a secret with its id is refused, not ignored
        const withSecret = yield* token({ grant_type: "refresh_token", client_id: clientId, client_secret: "guess", refresh_token: refreshed.json.refresh_token })
        assert.strictEqual(withSecret.status, 401)
        assert.strictEqual(withSecret.json.error, "invalid_client")
        const spent = yield* token({ grant_type: "refresh_token", client_id: clientId, refresh_token: issued.json.refresh_token })
        assert.strictEqual(spent.json.error, "invalid_grant", "the spent refresh token")

        // the client is stored by its URL, as the public client its document describes
        const rows = yield* TenantSql.use((sql) =>
          sql.control(ScopedSql.use((s) =>
            s<{ token_endpoint_auth_method: string; client_secret_hash: Buffer | null; redirect_uris: Array<string>; metadata: any }>`
              SELECT token_endpoint_auth_method, client_secret_hash, redirect_uris, metadata FROM oauth_clients WHERE client_id = ${clientId}`
          ))
        ).pipe(Effect.provide(context), Effect.orDie)
        assert.strictEqual(rows.length, 1)
        assert.deepInclude(rows[0], { token_endpoint_auth_method: "none", client_secret_hash: null, redirect_uris: [REDIRECT] })
        assert.strictEqual(rows[0]!.metadata.client_name, "Documented Client")
        assert.strictEqual(documents.hits("/clients/good.json"), 1, "the token endpoint does not fetch the document")
      }))

    it.effect("a document is kept for its Cache-Control max-age (five minutes without one), not at all with no-store", () =>
      Effect.gen(function*() {
        const documents = yield* Documents
        for (const [path, headers, fetches] of [
          ["/cache/default.json", {}, 1],
          ["/cache/long.json", { "cache-control": "public, max-age=3600" }, 1],
          ["/cache/zero.json", { "cache-control": "max-age=0" }, 3],
          ["/cache/no-store.json", { "cache-control": "no-store" }, 3]
        ] as const) {
          const clientId = `${documents.origin}${path}`
          documents.serve(path, { body: documentFor(clientId), headers })
          for (let i = 0; i < 3; i++) assert.strictEqual((yield* page(clientId)).status, 200)
          assert.strictEqual(documents.hits(path), fetches, path)
        }
      }))

    it.effect(`a document that does not answer is given up after ${DOCUMENT_FETCH_TIMEOUT_MS / 1000} s`, () =>
      Effect.gen(function*() {
        const documents = yield* Documents
        const clientId = documents.serve("/slow/hang.json", { hang: true })
        const started = Date.now()
        assertRefused(yield* page(clientId), `did not arrive within ${DOCUMENT_FETCH_TIMEOUT_MS / 1000} s`)
        const took = Date.now() - started
        assert.isTrue(took >= DOCUMENT_FETCH_TIMEOUT_MS - 200 && took < DOCUMENT_FETCH_TIMEOUT_MS + 3_000, `took ${took} ms`)
      }))
  })

  // a layer of its own: its fetches are counted apart from the other tests' (DOCUMENT_FETCHES_PER_MINUTE per address)
  layer(Documents.layer.pipe(Layer.merge(ApiStack.layer())), { timeout: 180_000, excludeTestServices: true })("documents refused", (it) => {
    it.effect("refused with an error page: another client_id, an unlisted redirect URI, too large, confidential, a redirect, bad answers", () =>
      Effect.gen(function*() {
        const documents = yield* Documents
        const at = (path: string) => `${documents.origin}${path}`
        const refusedFor = (path: string, answer: Served, why: string, redirect = REDIRECT) =>
          Effect.gen(function*() {
            documents.serve(path, answer)
            assertRefused(yield* page(at(path), redirect), why)
          })

        yield* refusedFor("/bad/mismatch.json", { body: documentFor(at("/bad/other.json")) }, "its client_id is not the URL it was fetched from")
        yield* refusedFor("/bad/trailing.json", { body: documentFor(`${at("/bad/trailing.json")}/`) }, "its client_id is not the URL")
        documents.serve("/bad/unlisted.json", { body: documentFor(at("/bad/unlisted.json")) })
        assertRefused(yield* page(at("/bad/unlisted.json"), "http://127.0.0.1:9/elsewhere"), "not one of those the client's metadata document lists")
        assertRefused(yield* page(at("/bad/unlisted.json"), "https://attacker.example/cb"), "not one of those")
        const padding = "x".repeat(DOCUMENT_MAX_BYTES)
        yield* refusedFor("/bad/large.json", { body: documentFor(at("/bad/large.json"), { padding }) }, `larger than ${DOCUMENT_MAX_BYTES} bytes`)
        // no content-length: the body is cut off while it streams in
        yield* refusedFor("/bad/streamed.json", { body: documentFor(at("/bad/streamed.json"), { padding }), streamed: true }, `larger than ${DOCUMENT_MAX_BYTES} bytes`)
        for (const method of ["client_secret_basic", "client_secret_post", "private_key_jwt"]) {
          yield* refusedFor(`/bad/${method}.json`, { body: documentFor(at(`/bad/${method}.json`), { token_endpoint_auth_method: method }) }, "token_endpoint_auth_method must be none")
        }
        yield* refusedFor("/bad/secret.json", { body: documentFor(at("/bad/secret.json"), { client_secret: "s3cret" }) }, "must not contain a client secret")
        documents.serve("/bad/target.json", { body: documentFor(at("/bad/redirected.json")) })
        yield* refusedFor("/bad/redirected.json", { status: 302, headers: { location: at("/bad/target.json") }, body: "" }, "redirects are not followed")
        assert.strictEqual(documents.hits("/bad/target.json"), 0, "the redirect was not followed")
        assertRefused(yield* page(at("/bad/missing.json")), "answered HTTP 404")
        yield* refusedFor("/bad/html.json", { body: "<!doctype html>", headers: { "content-type": "text/html" } }, "content type is text/html")
        yield* refusedFor("/bad/broken.json", { body: "{\"client_id\":" }, "not valid JSON")
        yield* refusedFor("/bad/array.json", { body: [1, 2] }, "not a JSON object")
        yield* refusedFor("/bad/no-uris.json", { body: documentFor(at("/bad/no-uris.json"), { redirect_uris: undefined }) }, "redirect_uris must be a list")
        yield* refusedFor("/bad/http-uri.json", { body: documentFor(at("/bad/http-uri.json"), { redirect_uris: ["http://client.example/cb"] }) }, "http is allowed for loopback hosts only")
        yield* refusedFor("/bad/implicit.json", { body: documentFor(at("/bad/implicit.json"), { response_types: ["token"] }) }, "response_types must include code")
        // the URL itself
        assertRefused(yield* page(documents.origin), "must have a path")
        assertRefused(yield* page(`${documents.origin}/`), "must have a path")
        assertRefused(yield* page(`${documents.origin}/a/../good.json`), "normal form")
        assertRefused(yield* page(`${documents.origin}/good.json#frag`), "must not contain a fragment")
        assertRefused(yield* page(`http://user:pw@127.0.0.1:${new URL(documents.origin).port}/good.json`), "user name or password")
      }))
  })

  // a ledger others can reach: its own machine and network are out of bounds (SSRF)
  const Public = Documents.layer.pipe(Layer.merge(ApiStack.layer({ settings: { publicUrl: "https://ledger.example" } })))
  layer(Public, { timeout: 180_000, excludeTestServices: true })("ledger with a public URL", (it) => {
    it.effect("plain http, and hosts on loopback, private or link-local addresses are refused without a fetch", () =>
      Effect.gen(function*() {
        const { baseUrl } = yield* ApiStack
        const documents = yield* Documents
        const port = new URL(documents.origin).port
        const clientId = documents.serve("/clients/good.json", { body: documentFor(`${documents.origin}/clients/good.json`) })
        const metadata = yield* live(() => fetch(`${baseUrl}/.well-known/oauth-authorization-server`).then((r) => r.json()))
        assert.strictEqual((metadata as any).client_id_metadata_document_supported, true)

        assertRefused(yield* page(clientId), "must be an https URL")
        assertRefused(yield* page(`https://localhost:${port}/clients/good.json`), "a loopback address")
        assertRefused(yield* page(`https://127.0.0.1:${port}/clients/good.json`), "is 127.0.0.1, a loopback address")
        assertRefused(yield* page(`https://[::1]:${port}/clients/good.json`), "is ::1, a loopback address")
        assertRefused(yield* page(`https://[::ffff:7f00:1]:${port}/clients/good.json`), "a loopback address")
        for (const host of ["10.20.30.40", "192.168.1.1", "172.16.5.5", "169.254.169.254", "100.64.0.1", "0.0.0.0", "[fd00::1]", "[fe80::1]"]) {
          assertRefused(yield* page(`https://${host}/client.json`), "a private, link-local or reserved address")
        }
        assert.strictEqual(documents.hits("/clients/good.json"), 0, "nothing was fetched")
        // a registered client still works as before
        const registered = yield* live(() =>
          fetch(`${baseUrl}/oauth/register`, {
            method: "POST",
            headers: { "content-type": "application/json" },
            body: JSON.stringify({ redirect_uris: [REDIRECT], token_endpoint_auth_method: "none" })
          }).then((r) => r.json() as Promise<{ client_id: string }>)
        )
        const signIn = yield* page(registered.client_id)
        assert.strictEqual(signIn.status, 200)
        assert.isUndefined(ticketOf(signIn.text))
      }))
  })
})

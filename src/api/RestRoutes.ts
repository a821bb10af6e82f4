/**
 * The REST read API's implementation: PAT authentication with a per-token rate limit, parameter errors as JSON,
 * handlers over `LedgerQuery`, the OpenAPI document at `/v1/openapi.json` and the API reference at `/docs`
 * (Scalar, its script inlined: the page makes no request to another origin).
 */
import { Effect, Layer, Redacted, SchemaIssue } from "effect"
import { HttpEffect, HttpServerRequest, HttpServerResponse } from "effect/http"
import { HttpApiBuilder, type HttpApiError, HttpApiMiddleware, HttpApiScalar } from "effect/http-api"
import type { BadRequest, DatabaseUnavailable, NotFound } from "../domain/errors.ts"
import { LedgerQuery } from "../query/LedgerQuery.ts"
import { Authenticator } from "../auth/Authenticator.ts"
import { addressOf } from "../auth/browser.ts"
import { recordPrincipal } from "./AccessLog.ts"
import { RequestRateLimit } from "../serving/RequestRateLimit.ts"
import { apiError, CurrentPrincipal, LedgerApi, ParameterErrors, PatAuth } from "./RestApi.ts"

const OPENAPI_PATH = "/v1/openapi.json"
const DOCS_PATH = "/docs"

/** 429 with `Retry-After`. */
const rateLimited = (seconds: number, message = `too many requests with this token: retry in ${seconds} s`) =>
  Effect.andThen(
    HttpEffect.appendPreResponseHandler((_request, response) =>
      Effect.succeed(HttpServerResponse.setHeader(response, "retry-after", String(seconds)))
    ),
    Effect.fail(apiError.tooManyRequests(message))
  )

const PatAuthLive = Layer.effect(
  PatAuth,
  Effect.gen(function*() {
    const authenticator = yield* Authenticator
    const limiter = yield* RequestRateLimit
    return PatAuth.of({
      pat: (httpEffect, { credential }) =>
        HttpServerRequest.HttpServerRequest.use((request) => authenticator.authenticate(Redacted.value(credential), "pat", addressOf(request))).pipe(
          Effect.catchTags({
            Unauthorized: (error) => Effect.fail(apiError.unauthorized(error.message)),
            TooManyAttempts: (error) => rateLimited(error.retryAfter, error.message),
            DatabaseUnavailable: (error) =>
              Effect.andThen(
                Effect.logWarning("authentication failed: database unavailable", error.cause),
                Effect.fail(apiError.unavailable("the database is unavailable; retry later"))
              )
          }),
          Effect.tap(recordPrincipal),
          Effect.tap((principal) => Effect.flatMap(limiter.take(principal.token_id), (wait) => wait === 0 ? Effect.void : rateLimited(wait))),
          Effect.flatMap((principal) => Effect.provideService(httpEffect, CurrentPrincipal, principal))
        )
    })
  })
).pipe(Layer.provide(RequestRateLimit.layer))

const formatIssues = SchemaIssue.makeFormatterStandardSchemaV1()

/** `limit: Expected a value between 1 and 100; order: Expected "recent" | ...` — named as the caller sent them. */
const describe = (error: HttpApiError.HttpApiSchemaError) =>
  formatIssues(error.cause.issue).issues.map((issue) => {
    const path = (issue.path ?? []).map((segment) => String(typeof segment === "object" ? segment.key : segment))
    return path.length === 0 ? issue.message : `${path.join(".")}: ${issue.message}`
  }).join("; ")

const ParameterErrorsLive = HttpApiMiddleware.layerSchemaErrorTransform(ParameterErrors, (error) =>
  error.kind === "Body" || error.kind === "ResponseHeaders"
    // the server produced a body its own schema refuses: a bug, reported, never blamed on the caller
    ? Effect.andThen(
      Effect.logError("response does not match its schema", error.cause),
      Effect.fail(apiError.internal("the server produced an invalid response"))
    )
    : Effect.fail(apiError.badRequest(`invalid ${error.kind === "Params" ? "path parameter" : "query parameter"}: ${describe(error)}`)))

const toApiError = (error: BadRequest | NotFound | DatabaseUnavailable) => {
  switch (error._tag) {
    case "BadRequest":
      return Effect.fail(apiError.badRequest(error.message))
    case "NotFound":
      return Effect.fail(apiError.notFound(error.message))
    case "DatabaseUnavailable":
      return Effect.andThen(
        Effect.logWarning("read failed: database unavailable", error.cause),
        Effect.fail(apiError.unavailable("the database is unavailable; retry later"))
      )
  }
}

const AgentsHandlers = HttpApiBuilder.group(
  LedgerApi,
  "agents",
  Effect.fnUntraced(function*(handlers) {
    const ledger = yield* LedgerQuery
    return handlers
      .handle("listAgents", ({ query }) =>
        Effect.flatMap(CurrentPrincipal, (principal) => ledger.listAgents(principal, query)).pipe(Effect.catch(toApiError)))
      .handle("listAgentSessions", ({ params, query }) =>
        Effect.flatMap(CurrentPrincipal, (principal) => ledger.listAgentSessions(principal, params.agent_id, query)).pipe(
          Effect.catch(toApiError)
        ))
  })
)

const SessionsHandlers = HttpApiBuilder.group(
  LedgerApi,
  "sessions",
  Effect.fnUntraced(function*(handlers) {
    const ledger = yield* LedgerQuery
    return handlers
      .handle("getSession", ({ params }) =>
        Effect.flatMap(CurrentPrincipal, (principal) => ledger.getSession(principal, params.session_id)).pipe(
          Effect.catch(toApiError)
        ))
      .handle("listSessionDecisions", ({ params, query }) =>
        Effect.flatMap(CurrentPrincipal, (principal) => ledger.listSessionDecisions(principal, params.session_id, query)).pipe(
          Effect.catch(toApiError)
        ))
      .handle("getDecision", ({ params }) =>
        Effect.flatMap(CurrentPrincipal, (principal) => ledger.getDecision(principal, params.ledger_id, params.session_id)).pipe(
          Effect.catch(toApiError)
        ))
  })
)

const DecisionsHandlers = HttpApiBuilder.group(
  LedgerApi,
  "decisions",
  Effect.fnUntraced(function*(handlers) {
    const ledger = yield* LedgerQuery
    return handlers.handle("listDecisions", ({ query }) =>
      Effect.flatMap(CurrentPrincipal, (principal) => ledger.listDecisions(principal, query)).pipe(Effect.catch(toApiError)))
  })
)

/** REST `/v1` and its OpenAPI document (needs LedgerQuery and Authenticator). */
export const RestRoutes = HttpApiBuilder.layer(LedgerApi, { openapiPath: OPENAPI_PATH }).pipe(
  Layer.provide([AgentsHandlers, SessionsHandlers, DecisionsHandlers]),
  Layer.provide([PatAuthLive, ParameterErrorsLive])
)

/** The API reference page, rendered from the same contract. */
export const DocsRoute = HttpApiScalar.layer(LedgerApi, {
  path: DOCS_PATH,
  scalar: {
    // the default fonts come from a CDN; the page must work offline
    withDefaultFonts: false,
    hideTestRequestButton: false,
    defaultOpenAllTags: true,
    customCss: "body { font-family: system-ui, -apple-system, 'Segoe UI', sans-serif; }"
  }
})

/**
 * Every request on the API port, whatever route answers it: one access log line (method, path, status,
 * duration, and the caller's ids once a surface authenticated it — never a token), and an error response that
 * has no body of its own gets the documented `{"error":{"code","message"}}` (unknown routes, defects, aborts).
 */
import { Cause, Context, Effect, Option } from "effect"
import { HttpRouter, HttpServerError, HttpServerRequest, HttpServerResponse } from "effect/http"
import type { unhandled } from "effect/Types"
import type { Principal } from "../domain/principal.ts"

/** The request's log entry, which the authenticating surface fills in. */
class RequestLogEntry extends Context.Service<RequestLogEntry, { principal: Principal | undefined }>()(
  "ledger/api/RequestLogEntry"
) {}

/** Names the caller of the current request in its access log line (call after authentication). */
export const recordPrincipal = (principal: Principal): Effect.Effect<void> =>
  Effect.map(Effect.serviceOption(RequestLogEntry), (entry) => {
    if (Option.isSome(entry)) entry.value.principal = principal
  })

const CODES: Record<number, string> = {
  400: "invalid_parameter",
  401: "unauthorized",
  403: "forbidden",
  404: "not_found",
  405: "method_not_allowed",
  406: "not_acceptable",
  413: "payload_too_large",
  415: "unsupported_media_type",
  429: "rate_limited",
  499: "client_closed_request",
  500: "internal_error",
  503: "unavailable"
}

const isOverlongParameter = (cause: Cause.Cause<unknown>) =>
  cause.reasons.some((reason) =>
    reason._tag === "Fail" && HttpServerError.isHttpServerError(reason.error) &&
    reason.error.reason._tag === "RouteNotFound" && reason.error.reason.description !== undefined
  )

const messageFor = (status: number, request: HttpServerRequest.HttpServerRequest, path: string) =>
  status === 404
    ? `no route for ${request.method} ${path}`
    : status === 400
    ? "invalid path parameter: too long"
    : status >= 500
    ? "unexpected server error"
    : `request refused (${status})`

/** An error response without a body gets the documented JSON error body; a 401 always names the scheme. */
const withErrorBody = (
  response: HttpServerResponse.HttpServerResponse,
  request: HttpServerRequest.HttpServerRequest,
  path: string
): HttpServerResponse.HttpServerResponse => {
  let result = response
  if (response.status >= 400 && response.body._tag === "Empty") {
    result = HttpServerResponse.jsonUnsafe(
      { error: { code: CODES[response.status] ?? "error", message: messageFor(response.status, request, path) } },
      { status: response.status, headers: response.headers }
    )
  }
  if (result.status === 401 && result.headers["www-authenticate"] === undefined) {
    // RFC 6750 §3: a request that carried a token learns it was not accepted
    const challenge = request.headers.authorization === undefined
      ? `Bearer realm="ledger"`
      : `Bearer realm="ledger", error="invalid_token"`
    result = HttpServerResponse.setHeader(result, "www-authenticate", challenge)
  }
  return result
}

const logLine = (
  request: HttpServerRequest.HttpServerRequest,
  path: string,
  status: number,
  startedAt: number,
  entry: { principal: Principal | undefined }
) => {
  const principal = entry.principal
  return Effect.logInfo("http request").pipe(
    Effect.annotateLogs({
      method: request.method,
      path,
      status,
      duration_ms: Math.round((performance.now() - startedAt) * 100) / 100,
      ...(principal === undefined ? {} : {
        tenant_id: principal.tenant_id,
        workspace_id: principal.workspace_id,
        user_id: principal.user_id,
        token_id: principal.token_id,
        credential_kind: principal.kind
      })
    })
  )
}

/** Global router middleware: wraps every route of the server it is merged into, including unmatched paths. */
export const AccessLogLive = HttpRouter.middleware(
  (httpApp) =>
    Effect.withFiber((fiber) => {
      const request = Context.getUnsafe(fiber.context, HttpServerRequest.HttpServerRequest)
      const path = request.url.split("?", 1)[0]!
      const startedAt = performance.now()
      const entry: { principal: Principal | undefined } = { principal: undefined }
      return Effect.provideService(httpApp, RequestLogEntry, entry).pipe(
        Effect.matchCauseEffect({
          onSuccess: (response) => {
            const sent = withErrorBody(response, request, path)
            return Effect.as(logLine(request, path, sent.status, startedAt, entry), sent)
          },
          onFailure: (cause) =>
            Effect.flatMap(HttpServerError.causeResponse(cause), ([routed]) => {
              // the router refuses an overlong path parameter as "no route": it is a bad parameter
              const response = isOverlongParameter(cause) ? HttpServerResponse.empty({ status: 400 }) : routed
              const logged = logLine(request, path, response.status, startedAt, entry)
              // an aborted request has no one to answer: keep the interruption
              if (Cause.hasInterruptsOnly(cause)) return Effect.andThen(logged, Effect.failCause(cause))
              const sent = withErrorBody(response, request, path)
              const report = sent.status >= 500
                ? Effect.logError("request failed", cause).pipe(Effect.annotateLogs({ method: request.method, path }))
                : Effect.void
              return Effect.as(Effect.andThen(report, logged), sent)
            })
        })
      ) as Effect.Effect<HttpServerResponse.HttpServerResponse, unhandled>
    }),
  { global: true }
)

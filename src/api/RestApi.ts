/**
 * The REST read API (docs/ARCHITECTURE.md, "Surfaces") as an Effect HttpApi contract: paths, parameters, responses
 * and errors. The OpenAPI document (`/v1/openapi.json`) and the reference page (`/docs`) are generated from it, so
 * what is documented is what is validated and served. Payloads are the read model's schemas (the MCP tools return the
 * same ones); every error is `{"error":{"code","message"}}` with its status.
 */
import { Context, Schema } from "effect"
import { HttpApi, HttpApiEndpoint, HttpApiGroup, HttpApiMiddleware, HttpApiSecurity, OpenApi } from "effect/http-api"
import { Decision } from "../domain/decision.ts"
import { SessionDetail } from "../domain/ledger.ts"
import type { Principal } from "../domain/principal.ts"
import { AgentPage, DecisionFilters, DecisionPage, SessionPage } from "../query/LedgerQuery.ts"
import {
  AgentId,
  AgentOrder,
  DecisionOrder,
  IsoDateTime,
  LedgerUuid,
  PageCursor,
  PageLimit,
  SessionOrder
} from "../query/params.ts"

// ---------------------------------------------------------------------------------------------------------
// Errors: one body shape, one class per status (the class picks the status when the failure is encoded)

const ErrorDetail = Schema.Struct({
  code: Schema.String.annotate({ description: "Stable machine-readable code, e.g. `invalid_parameter`, `not_found`." }),
  message: Schema.String.annotate({ description: "What went wrong, for a person." })
})

const errorClass = <Self>() =>
<const Id extends string>(identifier: Id, status: number, description: string) =>
  Schema.Error<Self>(identifier)({ error: ErrorDetail }, { httpApiStatus: status, description })

export class ApiBadRequest extends errorClass<ApiBadRequest>()(
  "BadRequestError",
  400,
  "A parameter is invalid: malformed id, limit out of range, unknown filter value, or a cursor not issued for this query."
) {}
export class ApiUnauthorized extends errorClass<ApiUnauthorized>()(
  "UnauthorizedError",
  401,
  "Missing, unknown, revoked or expired token, or a token of another kind (send a Personal Access Token)."
) {}
export class ApiNotFound extends errorClass<ApiNotFound>()(
  "NotFoundError",
  404,
  "No such resource visible to the caller (unknown ids and other tenants' ids look the same)."
) {}
export class ApiTooManyRequests extends errorClass<ApiTooManyRequests>()(
  "TooManyRequestsError",
  429,
  "Over the per-token request rate (LEDGER_API_RATE_LIMIT per second): wait `Retry-After` seconds."
) {}
export class ApiInternalError extends errorClass<ApiInternalError>()(
  "InternalError",
  500,
  "An unexpected server error (a bug): the request may be retried."
) {}
export class ApiUnavailable extends errorClass<ApiUnavailable>()(
  "UnavailableError",
  503,
  "The database is unavailable; retry later."
) {}

export const apiError = {
  badRequest: (message: string) => new ApiBadRequest({ error: { code: "invalid_parameter", message } }),
  unauthorized: (message: string) => new ApiUnauthorized({ error: { code: "unauthorized", message } }),
  notFound: (message: string) => new ApiNotFound({ error: { code: "not_found", message } }),
  tooManyRequests: (message: string) => new ApiTooManyRequests({ error: { code: "rate_limited", message } }),
  internal: (message: string) => new ApiInternalError({ error: { code: "internal_error", message } }),
  unavailable: (message: string) => new ApiUnavailable({ error: { code: "unavailable", message } })
}

// ---------------------------------------------------------------------------------------------------------
// Middleware

/** The caller, resolved from the bearer token by `PatAuth`. */
export class CurrentPrincipal extends Context.Service<CurrentPrincipal, Principal>()("ledger/api/CurrentPrincipal") {}

/** Bearer Personal Access Token; resolves the caller. */
export class PatAuth extends HttpApiMiddleware.Service<PatAuth, { provides: CurrentPrincipal }>()("ledger/api/PatAuth", {
  security: {
    pat: HttpApiSecurity.bearer.pipe(
      HttpApiSecurity.annotate(
        OpenApi.Description,
        "Personal Access Token (`ldg_pat_…`), e.g. from `ledger admin token create --kind pat`."
      )
    )
  },
  error: [ApiUnauthorized, ApiTooManyRequests, ApiUnavailable]
}) {}

/** Turns request decoding failures (path and query parameters) into the documented 400 body. */
export class ParameterErrors extends HttpApiMiddleware.Service<ParameterErrors>()("ledger/api/ParameterErrors", {
  error: [ApiBadRequest, ApiInternalError]
}) {}

// ---------------------------------------------------------------------------------------------------------
// Endpoints

const page = { limit: Schema.optional(PageLimit), cursor: Schema.optional(PageCursor) }

const SessionIdParam = LedgerUuid.annotate({ description: "The session id (a UUID)." })

/** `list_decisions` filters as query parameters (repeat `outcomes` / `intents` for several values). */
const decisionQuery = {
  ...page,
  order: Schema.optional(DecisionOrder),
  ...DecisionFilters.fields
}

const AgentPageBody = AgentPage.annotate({ identifier: "AgentPage" })
const SessionPageBody = SessionPage.annotate({ identifier: "SessionPage" })
const DecisionPageBody = DecisionPage.annotate({ identifier: "DecisionPage" })

export class AgentsGroup extends HttpApiGroup.make("agents")
  .add(
    HttpApiEndpoint.get("listAgents", "/v1/agents", {
      query: {
        ...page,
        order: Schema.optional(AgentOrder),
        active_since: Schema.optional(IsoDateTime.annotate({ description: "Only agents active at or after this ISO 8601 time." })),
        active_until: Schema.optional(IsoDateTime.annotate({ description: "Only agents whose last activity is before this ISO 8601 time." }))
      },
      success: AgentPageBody
    }).annotate(OpenApi.Summary, "List agents")
      .annotate(OpenApi.Description, "Agents of the caller's workspace with their rollups: decisions, sessions, cost, mean confidence, errors, first and last activity."),
    HttpApiEndpoint.get("listAgentSessions", "/v1/agents/:agent_id/sessions", {
      params: { agent_id: AgentId },
      query: {
        ...page,
        order: Schema.optional(SessionOrder),
        since: Schema.optional(IsoDateTime.annotate({ description: "Only sessions still active at or after this ISO 8601 time." })),
        until: Schema.optional(IsoDateTime.annotate({ description: "Only sessions started at or before this ISO 8601 time." }))
      },
      success: SessionPageBody,
      error: ApiNotFound
    }).annotate(OpenApi.Summary, "List an agent's sessions")
      .annotate(OpenApi.Description, "The agent's sessions with their statistics and summary. 404 when the agent is unknown or not visible.")
  )
  .annotate(OpenApi.Description, "Agents and their sessions")
{}

export class SessionsGroup extends HttpApiGroup.make("sessions")
  .add(
    HttpApiEndpoint.get("getSession", "/v1/sessions/:session_id", {
      params: { session_id: SessionIdParam },
      success: SessionDetail.annotate({ identifier: "SessionDetail" }),
      error: ApiNotFound
    }).annotate(OpenApi.Summary, "Get a session")
      .annotate(
        OpenApi.Description,
        "One session: statistics, outcome and intent mix, its latest decisions, and `health` (status healthy / degraded / failing / idle with the reasons, error rate, loops, p95 latency, cost per hour, token growth, last activity)."
      ),
    HttpApiEndpoint.get("listSessionDecisions", "/v1/sessions/:session_id/decisions", {
      params: { session_id: SessionIdParam },
      query: decisionQuery,
      success: DecisionPageBody,
      error: ApiNotFound
    }).annotate(OpenApi.Summary, "List a session's decisions")
      .annotate(OpenApi.Description, "The session's decisions (without their audit trail), filtered and ordered like `GET /v1/decisions`."),
    HttpApiEndpoint.get("getDecision", "/v1/sessions/:session_id/decisions/:ledger_id", {
      params: { session_id: SessionIdParam, ledger_id: LedgerUuid.annotate({ description: "The decision's ledger id (the gateway's `x-ledger-id`)." }) },
      success: Decision.annotate({ identifier: "Decision" }),
      error: ApiNotFound
    }).annotate(OpenApi.Summary, "Get a decision")
      .annotate(
        OpenApi.Description,
        "One decision with its full audit trail: logic trace, evidence, findings, artifacts, outcome, intent, cost breakdown, quality and confidence with their reasons; and `integrity`, its place in the workspace's hash chain (`seq`, `hash`, `prev_hash` as lowercase hex, `recorded_at`, `chain_key`) that `ledger verify` checks — null until the decision is chained."
      )
  )
  .annotate(OpenApi.Description, "Sessions and their decisions")
{}

export class DecisionsGroup extends HttpApiGroup.make("decisions")
  .add(
    HttpApiEndpoint.get("listDecisions", "/v1/decisions", {
      query: decisionQuery,
      success: DecisionPageBody
    }).annotate(OpenApi.Summary, "List decisions")
      .annotate(
        OpenApi.Description,
        "Decisions across the workspace (the `list_decisions` MCP tool): filters on time range, outcomes, intents, cost and quality ranges, agent, session and model; ordered newest, oldest, by cost or by quality."
      )
  )
  .annotate(OpenApi.Description, "Decisions across the workspace")
{}

/** The numeric query parameters as their values are checked (query strings carry them as text). */
const numericQueryParameters: Record<string, unknown> = Object.fromEntries(
  Object.entries(Schema.toJsonSchemaDocument(Schema.Struct({ ...page, ...DecisionFilters.fields })).schema.properties ?? {})
)

/** Text-encoded numbers in the generated document, by the pattern the query string codec gives them. */
const isNumericText = (schema: any) => schema?.type === "string" && typeof schema.pattern === "string" && schema.pattern.includes("\\d")

/**
 * Completes the generated document with what the HttpApi cannot express: numeric query parameters documented as
 * numbers with their bounds (not as the digit strings they travel as), the `WWW-Authenticate` header of every
 * 401 (added for all routes by the access-log middleware) and the `Retry-After` of every 429.
 */
const completeDocument = (spec: Record<string, any>): Record<string, any> => {
  for (const item of Object.values(spec.paths ?? {}) as Array<Record<string, any>>) {
    for (const operation of Object.values(item)) {
      for (const parameter of operation?.parameters ?? []) {
        // optional fields come out as `anyOf: [T, null]`: a query parameter is simply absent instead
        const property: any = numericQueryParameters[parameter.name]
        const typed = property?.anyOf?.find((member: any) => member.type !== "null") ?? property
        if (parameter.in === "query" && typed !== undefined && isNumericText(parameter.schema)) parameter.schema = typed
      }
      const limited = operation?.responses?.["429"]
      if (limited !== undefined) {
        limited.headers = { "Retry-After": { description: "Seconds to wait before the next request.", schema: { type: "integer" } } }
      }
      const unauthorized = operation?.responses?.["401"]
      if (unauthorized !== undefined) {
        unauthorized.headers = {
          "WWW-Authenticate": {
            description: "`Bearer realm=\"ledger\"`, with `error=\"invalid_token\"` when a token was sent but refused.",
            schema: { type: "string" }
          }
        }
      }
    }
  }
  return spec
}

export class LedgerApi extends HttpApi.make("ledger")
  .add(AgentsGroup)
  .add(SessionsGroup)
  .add(DecisionsGroup)
  // outermost first: authenticate, then decode parameters
  .middleware(ParameterErrors)
  .middleware(PatAuth)
  .annotateMerge(OpenApi.annotations({
    title: "Agent Decision Ledger — REST read API",
    version: "1",
    description: [
      "Read the decisions your agents made through the gateway: agents → sessions → decisions, with the full audit trail.",
      "",
      "Authenticate with a Personal Access Token: `Authorization: Bearer ldg_pat_…`.",
      "Lists return `{\"data\": [...], \"next_cursor\": string | null}`: pass `next_cursor` back as `cursor` (with the same other",
      "parameters) for the next page; `limit` is 1–100 (default 20). Pages are keyset-based: while new decisions arrive",
      "no item repeats and none is skipped, except that an agent or session active during the walk moves to the front",
      "of a list ordered by activity or cost (a new first page shows it).",
      "Errors are `{\"error\": {\"code\", \"message\"}}`: 400 bad parameter, 401 bad token, 404 unknown or not visible,",
      "429 over the per-token rate (see `Retry-After`), 503 database unavailable.",
      "Times are ISO 8601 UTC, money is USD."
    ].join("\n"),
    transform: completeDocument
  }))
  .annotate(HttpApi.QueryParseOptions, { onExcessProperty: "error", errors: "all" })
{}

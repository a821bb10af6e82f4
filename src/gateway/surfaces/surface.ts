/**
 * An API surface of the gateway (chat completions, Responses, Messages, embeddings): what a route accepts, how it
 * picks the provider, and the shape of its errors. The call itself (authenticate, forward, relay, capture) is the
 * same for every surface (GatewayCall.ts).
 */
import type * as Http from "node:http"
import type { CaptureApi } from "../../domain/capture.ts"
import { gatewayError } from "../GatewayServer.ts"
import type { CallContext, ProviderAdapter, ProviderError } from "../../providers/index.ts"
import type { ProviderRoute, ProviderRoutes } from "../../providers/routing.ts"

export interface PlanInput {
  readonly providers: ProviderRoutes
  readonly req: Http.IncomingMessage
  /** the body as received (pass-through adapters forward it with only the model edited) */
  readonly bodyText: string
  /** the same body as the bytes received, when they are valid UTF-8 (exactly `bodyText`'s encoding) */
  readonly bodyBytes: Buffer | undefined
  /** the caller's provider key (x-service-provider-api-key) */
  readonly apiKey: string | undefined
  readonly ledgerId: string
}

/** A validated call: the provider, its adapter for this surface, the request and its context. */
export interface CallPlan {
  readonly route: ProviderRoute
  readonly adapter: ProviderAdapter<any>
  readonly request: unknown
  readonly ctx: CallContext
  /** the answer the caller got, in the surface's format (a Responses chain keeps it for the next turn) */
  readonly answered?: ((answer: string) => void) | undefined
  /** the earlier turns the gateway joined to the call (JSON text), captured with it */
  readonly context?: string | undefined
}

export interface Surface {
  /** `POST /v1/…` */
  readonly route: string
  /** the API captures of this route speak; null: forwarded but not recorded (no model generated anything) */
  readonly api: CaptureApi | null
  /** Anthropic clients send their key as `x-api-key`: the Gateway Key may come that way */
  readonly apiKeyHeader: boolean
  /** what a request must look like, for the message of a request that cannot be translated */
  readonly shape: string
  /** an error as this API's callers expect it (JSON text) */
  errorText(error: ProviderError): string
  /** validates the parsed body and picks the provider; or the error to answer */
  plan(body: unknown, input: PlanInput): CallPlan | ProviderError
}

/** The chat-completions error shape, which the OpenAI APIs (chat, Responses, embeddings) share. */
export const openAIErrorText = (error: ProviderError): string => JSON.stringify(error.body)

/** The error for a body that is not a JSON object. */
export const notAnObject = () => gatewayError(400, "the request body must be a JSON object", "invalid_body")

/**
 * The 400 for a request that could not be read or translated (for `provider`): a shape the code did not expect is
 * the caller's to fix — never a 5xx, and never an exception loose in the gateway.
 */
export const unreadable = (shape: string, cause: unknown, provider?: string): ProviderError =>
  gatewayError(
    400,
    `the request could not be ${provider === undefined ? "read" : `translated for ${provider}`} (is it in ${shape}?): ${cause instanceof Error ? cause.message : String(cause)}`,
    "invalid_request"
  )

export const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

/**
 * The provider of a model: `provider/model-name` names it; a bare model goes to the surface's own provider (`home`:
 * OpenAI for the OpenAI APIs, Anthropic for Messages) when the surface has one.
 */
export const routeModel = (
  model: unknown,
  providers: ProviderRoutes,
  home: string | undefined
): { readonly route: ProviderRoute; readonly model: string } | ProviderError => {
  if (typeof model !== "string" || model === "") {
    return gatewayError(400, "model is required: provider/model-name, e.g. openai/gpt-4o", "missing_parameter", "model")
  }
  const slash = model.indexOf("/")
  if (slash === -1 && home !== undefined) {
    const route = providers.routes.get(home)
    if (route !== undefined) return { route, model }
  }
  if (slash <= 0 || slash === model.length - 1) {
    return gatewayError(400, `model must be provider/model-name (e.g. openai/gpt-4o), got "${model.slice(0, 100)}"`, "invalid_model", "model")
  }
  const prefix = model.slice(0, slash)
  const route = providers.routes.get(prefix)
  if (route === undefined) {
    const hint = providers.unconfigured.get(prefix)
    return gatewayError(
      400,
      hint !== undefined
        ? `provider ${prefix} is not configured on this gateway: ${hint}`
        : `unknown provider "${prefix.slice(0, 100)}"; known: ${[...providers.routes.keys()].join(", ")}`,
      "unknown_provider",
      "model"
    )
  }
  return { route, model: model.slice(slash + 1) }
}

/**
 * What every surface checks first: a JSON object, a model routed to a provider (`home` for a bare model), then the
 * surface's own checks of the request.
 */
export const routed = (
  body: unknown,
  input: PlanInput,
  home: string | undefined,
  validate: (request: Record<string, unknown>) => ProviderError | undefined
): { readonly request: Record<string, unknown>; readonly target: { readonly route: ProviderRoute; readonly model: string } } | ProviderError => {
  if (!isObject(body)) return notAnObject()
  const target = routeModel(body.model, input.providers, home)
  if ("status" in target) return target
  return validate(body) ?? { request: body, target }
}

/** The context of a call to the routed provider, from what the caller sent. */
export const callContext = (
  target: { readonly route: ProviderRoute; readonly model: string },
  input: PlanInput,
  options: { readonly stream: boolean; readonly includeUsage?: boolean; readonly passHeaders?: Readonly<Record<string, string>> }
): CallContext => ({
  model: target.model,
  apiKey: input.apiKey,
  baseUrl: target.route.baseUrl,
  stream: options.stream,
  includeUsage: options.includeUsage ?? false,
  apiVersion: target.route.apiVersion,
  requestText: input.bodyText,
  requestBytes: input.bodyBytes,
  passHeaders: options.passHeaders,
  ledgerId: input.ledgerId
})

/** A string header, or undefined. */
export const header = (req: Http.IncomingMessage, name: string): string | undefined => {
  const value = req.headers[name]
  return typeof value === "string" && value !== "" ? value : undefined
}

/** A boolean field: absent, a boolean, or the error. */
export const optionalBoolean = (request: Record<string, unknown>, name: string): boolean | ProviderError => {
  const value = request[name]
  if (value === undefined || value === null) return false
  return typeof value === "boolean" ? value : gatewayError(400, `${name} must be a boolean`, "invalid_parameter", name)
}

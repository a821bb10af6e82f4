/**
 * What analytics takes from one built decision, pure and deterministic: its search document, local vector, call
 * signature, hand-off fingerprints, subjects and evidence sources. The builder stored the call as exchanged and its
 * derivation; this reads both back without re-deriving anything.
 */
import { readCall } from "../derive/read.ts"
import type { Subject } from "../derive/subjects.ts"
import { collapseWhitespace, splitFences, truncate } from "../derive/text.ts"
import type { Capture } from "../domain/capture.ts"
import type { SummaryRow } from "../query/rows.ts"
import { callSignature, fingerprints, localVector } from "./text.ts"

/** The columns of a decision the materialiser reads: the listed decision's, and more. */
export interface BuiltDecision extends
  Pick<
    SummaryRow,
    "ledger_id" | "session_id" | "agent_id" | "execution_id" | "created_at" | "provider" | "model" | "title" | "intent" | "outcome" | "cost_usd" | "quality" | "latency_ms" | "status"
  >
{
  readonly built_at: Date
  readonly total_tokens: number
  readonly completion_tokens: number
  readonly status: number
  readonly derivation: { readonly evidence?: unknown; readonly findings?: unknown; readonly artifacts?: unknown } | null
  readonly api: Capture["api"]
  readonly raw_request: string
  readonly raw_response: string | null
  readonly subjects: unknown
}

export interface EvidenceSource {
  /** `kind:identity` */
  readonly source_id: string
  readonly kind: string
  readonly label: string
}

export interface DecisionAnalysis {
  readonly decision: BuiltDecision
  /** what the decision says, in short: the vector (and a model embedding) is made of it */
  readonly searchText: string
  /** what the decision holds word for word — its title, newest inputs, answer and findings — for the lexical index */
  readonly lexicalText: string
  readonly vector: Array<number>
  readonly signature: string
  readonly inputPrints: Array<string>
  readonly outputPrints: Array<string>
  readonly subjects: ReadonlyArray<Subject>
  readonly sources: ReadonlyArray<EvidenceSource>
}

const SEARCH_ASK_CHARS = 600
const SEARCH_TEXT_CHARS = 2_000
/** Of each of the newest inputs and the answer, the lexical index holds this much (a pasted log or file is cut). */
const LEXICAL_PART_CHARS = 6_000
const SOURCE_LABEL_CHARS = 120

const asArray = (value: unknown): ReadonlyArray<any> => (Array.isArray(value) ? value : [])

const isSubject = (value: any): value is Subject =>
  typeof value?.kind === "string" && typeof value?.key === "string" && typeof value?.label === "string"

/** Evidence kinds that name a source worth a graph node; a user turn (`messages[3]`) is not one. */
const sourceOf = (evidence: any): EvidenceSource | undefined => {
  const source = typeof evidence?.source === "string" ? evidence.source : ""
  const hash = typeof evidence?.hash === "string" ? evidence.hash.slice(0, 16) : ""
  const content = typeof evidence?.content === "string" ? evidence.content : ""
  switch (evidence?.kind) {
    case "url":
    case "file":
      return source === "" ? undefined : { source_id: `${evidence.kind}:${source}`, kind: evidence.kind, label: source }
    case "tool_result":
      return source === "" ? undefined : { source_id: `tool:${source}`, kind: "tool", label: source }
    case "document":
      return hash === "" ? undefined : {
        source_id: `document:${hash}`,
        kind: "document",
        label: truncate(collapseWhitespace(content), SOURCE_LABEL_CHARS)
      }
    case "image":
      return source.startsWith("data:")
        ? hash === "" ? undefined : { source_id: `image:${hash}`, kind: "image", label: source }
        : source === "" ? undefined : { source_id: `image:${source}`, kind: "image", label: source }
    default:
      return undefined
  }
}

export const analyseDecision = (decision: BuiltDecision): DecisionAnalysis => {
  // readCall reads only the API, the request and the response of a capture
  const call = readCall({ api: decision.api, request: decision.raw_request, response: decision.raw_response } as Capture)
  const lastAssistant = call.messages.findLastIndex((message) => message.role === "assistant")
  const newestInputs = call.messages.slice(lastAssistant + 1).filter((message) => message.role === "user" || message.role === "tool")
    .map((message) => message.text)
  const answer = call.answer
  const answerText = answer.text !== ""
    ? answer.text
    : answer.refusal !== ""
    ? answer.refusal
    : answer.toolCalls.length > 0
    ? answer.toolCalls.map((tool) => `${tool.name}(${tool.arguments})`).join("\n")
    : `status ${decision.status}`
  const lastUser = call.messages.findLast((message) => message.role === "user")?.text ?? ""
  const findings = asArray(decision.derivation?.findings).flatMap((finding) => typeof finding?.text === "string" ? [finding.text] : [])
  const artifacts = asArray(decision.derivation?.artifacts).flatMap((artifact) =>
    typeof artifact?.content === "string" ? [artifact.content] : []
  )
  const ask = truncate(collapseWhitespace(splitFences(lastUser).prose), SEARCH_ASK_CHARS)
  const searchText = truncate([decision.title, ask === decision.title ? "" : ask, ...findings].filter((part) => part !== "").join("\n"), SEARCH_TEXT_CHARS)
  const lexicalText = [decision.title, truncate(newestInputs.join("\n"), LEXICAL_PART_CHARS), truncate(answerText, LEXICAL_PART_CHARS), ...findings]
    .filter((part) => part !== "").join("\n")
  const sources = new Map<string, EvidenceSource>()
  for (const evidence of asArray(decision.derivation?.evidence)) {
    const source = sourceOf(evidence)
    if (source !== undefined && !sources.has(source.source_id)) sources.set(source.source_id, source)
  }
  return {
    decision,
    searchText,
    lexicalText,
    vector: localVector(searchText),
    signature: callSignature(newestInputs.join("\n"), answerText),
    inputPrints: fingerprints(newestInputs),
    outputPrints: fingerprints([answer.text, ...artifacts]),
    subjects: asArray(decision.subjects).filter(isSubject),
    sources: [...sources.values()]
  }
}

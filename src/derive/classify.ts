/**
 * The deterministic intent classifier. Rules are tried in a fixed order and the first that fires wins;
 * its name goes into `intent_reason` so every label can be traced back to the words that produced it.
 *
 * 1. error output pasted into the last user turn                      → debugging
 * 2. task keywords in the last user turn (prose, code excluded)       → summarization … planning
 * 3. the same keywords in the first sentence of the system prompt     (the role a pipeline gives the model)
 * 4. a json_schema response format with no other signal               → extraction
 * 5. a short greeting or thanks                                       → conversation
 * 6. the request offered tools and the model called them              → tool_use
 * 7. a question mark or an interrogative opening                      → question
 * 8. otherwise                                                        → other
 */
import type { Intent } from "../domain/decision.ts"
import { type ChatCall, isInstruction, lastUserText } from "./chatCall.ts"
import { collapseWhitespace, findFilePaths, splitFences } from "./text.ts"

export interface IntentVerdict {
  readonly intent: Intent
  readonly reason: string
}

interface KeywordRule {
  readonly intent: Intent
  readonly keywords: RegExp
  /**
   * `required`: fires only with code around (block, file path or code term); `absent`: only without a code
   * block; `noted`: fires either way and names the code it saw in the reason.
   */
  readonly code?: "required" | "absent" | "noted"
}

/** Order matters: more specific tasks come before the broad debugging / change / generation verbs. */
const KEYWORD_RULES: ReadonlyArray<KeywordRule> = [
  {
    intent: "summarization",
    keywords: /\b(summar(?:y|ies|ise|ize|ised|ized|ising|izing|isation|ization)|tl;?dr|recap|condense|key (?:points|takeaways)|gist|synopsis)\b/
  },
  { intent: "translation", keywords: /\b(translat(?:e|ed|ing|ion|or)|how (?:do|would) (?:you|i) say)\b/, code: "absent" },
  { intent: "extraction", keywords: /\b(extract(?:s|ed|ing|ion)?|pull out|named entities|find all|list all|parse out)\b/ },
  {
    intent: "classification",
    keywords:
      /\b(classif(?:y|ied|ier|ication)|categori[sz](?:e|ed|ation)|sentiment|which category|is (?:this|it) spam|label (?:this|these|each|the following))\b/
  },
  { intent: "review", keywords: /\b(review|critique|feedback on|audit|look over|sanity[- ]check)\b/, code: "noted" },
  {
    intent: "debugging",
    keywords:
      /\b(fix(?:es|ed|ing)?|bugs?|debug(?:ging)?|broken|crash(?:es|ed|ing)?|(?:exceptions?|errors?)(?! handling)|not working|doesn'?t work|fails?|failing|failed|stack ?trace|traceback)\b/,
    code: "noted"
  },
  {
    intent: "code_change",
    keywords:
      /\b(refactor(?:ing)?|rename|modify|change|update|migrate|rewrite|convert|port|translate|optimi[sz]e|improve|simplify|clean up|add|remove|replace|extend)\b/,
    code: "required"
  },
  {
    intent: "code_generation",
    keywords: /\b(write|implement|create|generate|build|scaffold|make|give me)\b/,
    code: "required"
  },
  {
    intent: "planning",
    keywords:
      /\b(plan(?:s|ning)?|roadmap|strategy|milestones?|architecture|step[- ]by[- ]step|break (?:it|this|that) down|how should (?:i|we) (?:approach|structure|design|organi[sz]e)|prioriti[sz]e|design doc)\b/
  }
]

/** Output that only a failing program produces. */
const ERROR_OUTPUT =
  /Traceback \(most recent call last\)|^\s+at [\w$.<>]+ ?\(.*:\d+(?::\d+)?\)|\b[A-Z]\w*(?:Error|Exception)\b: |^panic: |error\[E\d+\]|\berror TS\d+|npm ERR!|Segmentation fault/m

const CODE_TERMS =
  /\b(functions?|methods?|class(?:es)?|scripts?|programs?|code|components?|endpoints?|api|quer(?:y|ies)|sql|regex|unit tests?|tests|modules?|cli|library|snippet|algorithm|dockerfile|schema|migration|hooks?|handlers?|python|typescript|javascript|java|golang|rust|c\+\+|c#|ruby|php|kotlin|swift|bash|html|css|react)\b/

const CODE_LINE = /^\s*(?:def |class |function |const |let |import |from \S+ import |#include|public |func |fn |SELECT |CREATE TABLE )/m

const GREETING =
  /^(?:hi|hello|hey|yo|hiya|thanks|thank you|thx|ty|good (?:morning|afternoon|evening|night)|how are you|how's it going|bye|goodbye|see you|cheers|ok(?:ay)?|cool|great|nice|awesome)\b/
const GREETING_MAX_CHARS = 80

const INTERROGATIVE = /^(what|why|how|when|where|who|which|can|could|would|should|is|are|does|do|did|explain|tell me|describe|define)\b/

/** How code shows up in the ask, strongest first; the label goes into the reason. `prose` is lowercased. */
const codeContext = (ask: string, prose: string): { readonly block: boolean; readonly label: string | undefined } => {
  const block = splitFences(ask).blocks.length > 0 || CODE_LINE.test(ask)
  if (block) return { block, label: "code block" }
  if (findFilePaths(prose).length > 0) return { block, label: "file path" }
  const term = CODE_TERMS.exec(prose)?.[1]
  return { block, label: term === undefined ? undefined : `code term "${term}"` }
}

const matchKeywordRules = (
  text: string,
  code: ReturnType<typeof codeContext>,
  origin: "keyword" | "system"
): IntentVerdict | undefined => {
  for (const rule of KEYWORD_RULES) {
    if (rule.code === "required" && code.label === undefined) continue
    if (rule.code === "absent" && code.block) continue
    const keyword = rule.keywords.exec(text)?.[1]
    if (keyword === undefined) continue
    const withCode = (rule.code === "required" || rule.code === "noted") && code.label !== undefined ? ` + ${code.label}` : ""
    return { intent: rule.intent, reason: `${origin}:"${keyword}"${withCode} → ${rule.intent}` }
  }
  return undefined
}

const firstSentence = (text: string): string => collapseWhitespace(text.split(/(?<=[.!?])\s|\n/, 1)[0] ?? "")

export const classifyIntent = (call: ChatCall): IntentVerdict => {
  const ask = lastUserText(call)
  const prose = collapseWhitespace(splitFences(ask).prose).toLowerCase()
  const code = codeContext(ask, prose)

  if (ERROR_OUTPUT.test(ask)) return { intent: "debugging", reason: "error output in the ask → debugging" }
  const byAsk = matchKeywordRules(prose, code, "keyword")
  if (byAsk !== undefined) return byAsk

  const system = call.messages.find(isInstruction)
  const bySystem = system === undefined ? undefined : matchKeywordRules(firstSentence(system.text).toLowerCase(), code, "system")
  if (bySystem !== undefined) return bySystem

  if (call.responseFormat === "json_schema") return { intent: "extraction", reason: "json_schema response format → extraction" }

  const greeting = GREETING.exec(prose)?.[0]
  if (greeting !== undefined && prose.length <= GREETING_MAX_CHARS) {
    return { intent: "conversation", reason: `greeting:"${greeting}" → conversation` }
  }

  const called = call.answer.toolCalls.filter((tool) => call.toolsOffered.includes(tool.name)).map((tool) => tool.name)
  if (called.length > 0) return { intent: "tool_use", reason: `tools called: ${called.join(", ")} → tool_use` }

  if (prose.endsWith("?")) return { intent: "question", reason: "question mark → question" }
  const interrogative = INTERROGATIVE.exec(prose)?.[1]
  if (interrogative !== undefined) return { intent: "question", reason: `interrogative:"${interrogative}" → question` }

  if (ask.trim() === "") {
    const why = call.problems.length > 0 ? call.problems.join("; ") : "no user turn"
    return { intent: "other", reason: `${why} → other` }
  }
  return { intent: "other", reason: "no rule matched → other" }
}

/**
 * Subjects: the things a decision is about (tickets, issues, files, URLs, services, tables, functions,
 * tools, topics), with normalised keys so that analytics can link decisions and sessions that share one.
 *
 * Subjects come from what the user asked, what the model answered and what it called tools with, read in
 * that order and capped per kind. Tool results are evidence, not subjects: a search result listing fifty
 * tickets or a whole repository would otherwise link every session that ran the same search.
 */
import type { Capture, CaptureSource } from "../domain/capture.ts"
import type { Derivation } from "../domain/decision.ts"
import type { ChatCall } from "./chatCall.ts"
import { readCall } from "./read.ts"
import { findFilePaths, findUrls, matchesOf, splitFences } from "./text.ts"

export type SubjectKind =
  | "ticket"
  | "issue"
  | "file"
  | "url"
  | "service"
  | "table"
  | "function"
  | "tool"
  | "topic"
  | "directory"
  | "branch"

export interface Subject {
  readonly kind: SubjectKind
  /** normalised identity: the same subject mentioned differently gets the same key */
  readonly key: string
  /** as first written */
  readonly label: string
}

const MAX_SUBJECTS = 40
const MAX_PER_KIND = 10

/** `PAY-231`; the prefixes excluded are standards and versions that share the shape (UTF-8, SHA-256). */
const TICKET = /(?<![\w.-])([A-Z][A-Z0-9]{1,9})-(\d{1,7})\b/g
/** what every TICKET match contains */
const TICKET_HINT = /[A-Z0-9]-\d/
const NOT_TICKET_PREFIXES = new Set([
  "UTF", "SHA", "ISO", "GPT", "HTTP", "TLS", "SSL", "RFC", "CVE", "CWE", "AES", "RSA", "MD", "ES", "IPV", "COVID",
  "WCAG", "PEP", "ECMA", "ARM", "RS", "PCI", "SOC", "IEC", "IEEE", "DDR", "LTE", "USB", "HDMI", "MP", "ID", "X86"
])

const REPOSITORY_ISSUE_URL =
  /^https?:\/\/(?:www\.)?(?:github\.com|gitlab\.com)\/([\w.-]+)\/([\w.-]+)\/(?:-\/)?(?:pull|pulls|issues|merge_requests)\/(\d+)/i
const REPOSITORY_ISSUE = /(?<![\w/.-])([\w.-]+\/[\w.-]+)#(\d+)\b/g
/** Bare `#123`, read only from prose (in code it is a colour or a comment); one digit is usually a list rank. */
const BARE_ISSUE = /(?<![\w&#/])#(\d{2,6})\b/g

const SERVICE = /(?<![\w.-])([a-z][a-z0-9]*(?:-[a-z0-9]+)*-(?:service|svc|api|worker|gateway))(?![\w-])/gi
/** what every SERVICE match contains */
const SERVICE_HINT = /-(?:service|svc|api|worker|gateway)(?![\w-])/i
const NOT_SERVICE_PREFIXES = new Set(["rest", "web", "http", "json", "public", "open", "the", "an", "graph", "x"])

/** SQL keywords in capitals are SQL wherever they appear; inside ```sql blocks any case is. */
const TABLE_SOURCE = String.raw`\b(?:FROM|JOIN|INTO|UPDATE|TABLE)\s+(?:IF\s+(?:NOT\s+)?EXISTS\s+)?((?:[\`"\[]?[A-Za-z_][\w$]*[\`"\]]?\.)?[\`"\[]?[A-Za-z_][\w$]*[\`"\]]?)`
const TABLE = new RegExp(TABLE_SOURCE, "g")
const TABLE_ANY_CASE = new RegExp(TABLE_SOURCE, "gi")
const NOT_TABLES = new Set(["select", "lateral", "only", "unnest", "values", "set", "where", "dual", "generate_series"])

const FUNCTION = /\b(?:def|function|func|fn)\s+(?:\([^)\n]{0,200}\)\s*)?([A-Za-z_$][\w$]*)\s*[(<]/g

/** CamelCase identifiers in what the user wrote (`PaymentProcessor`, `retryPolicy`) name what the work is on. */
const TOPIC = /\b([A-Z][a-z0-9]+(?:[A-Z][a-z0-9]+)+|[a-z][a-z0-9]+(?:[A-Z][a-z0-9]+)+)\b/g
const NOT_TOPICS = new Set(["javascript", "typescript", "github", "gitlab", "paypal", "youtube", "linkedin", "wordpress", "powershell", "devops", "macbook"])

const normalisePath = (path: string): string => path.replaceAll("\\", "/").replace(/^(?:\.\/)+/, "")

/** Lowercase host, no query or fragment, no trailing slash. */
const normaliseUrl = (url: string): string | undefined => {
  try {
    const parsed = new URL(url)
    return `${parsed.protocol}//${parsed.host.toLowerCase()}${parsed.pathname.replace(/\/+$/, "")}`
  } catch {
    return undefined
  }
}

const unquote = (identifier: string): string => identifier.replace(/[`"[\]]/g, "")

export const extractSubjects = (capture: Capture, derivation: Derivation): Array<Subject> =>
  extractSubjectsFromCall(derivation, readCall(capture))

/** `extractSubjects` for a caller that has already read the call (see `deriveFromCall`). */
export const extractSubjectsFromCall = (derivation: Derivation, call: ChatCall): Array<Subject> => {
  const subjects: Array<Subject> = []
  const seen = new Set<string>()
  const perKind = new Map<SubjectKind, number>()
  const add = (kind: SubjectKind, key: string, label: string) => {
    const identity = `${kind}\u0000${key}`
    const count = perKind.get(kind) ?? 0
    if (key === "" || seen.has(identity) || count >= MAX_PER_KIND || subjects.length >= MAX_SUBJECTS) return
    seen.add(identity)
    perKind.set(kind, count + 1)
    subjects.push({ kind, key, label })
  }
  // An agent's call carries its whole conversation: once a kind (or the whole list) is full, the scans that could
  // only add to it are skipped — what they would find is refused anyway (bench/notes/builder.md, "Long agent conversations")
  const open = (kind: SubjectKind) => (perKind.get(kind) ?? 0) < MAX_PER_KIND
  const full = () => subjects.length >= MAX_SUBJECTS
  const addTable = (table: string) => {
    const key = unquote(table).toLowerCase()
    if (!NOT_TABLES.has(key)) add("table", key, table)
  }

  const userTexts = call.messages.filter((message) => message.role === "user").map((message) => message.text)
  const toolArguments = [
    ...call.messages.flatMap((message) => message.toolCalls.map((tool) => tool.arguments)),
    ...call.answer.toolCalls.map((tool) => tool.arguments)
  ]
  const texts = [...userTexts, call.answer.text, ...toolArguments]

  const proses: Array<string> = []
  for (const text of texts) {
    if (full()) break
    const { prose, blocks } = splitFences(text)
    proses.push(prose)
    // Each pattern below is tried only when the text has what any match must contain: most texts have no
    // ticket, issue number or service name, and scanning them with the full patterns is the costly part.
    const mayHaveTicket = open("ticket") && TICKET_HINT.test(text)
    const mayHaveIssue = open("issue") && text.includes("#")
    for (const [, project, number] of mayHaveTicket ? matchesOf(TICKET, text) : []) {
      if (!NOT_TICKET_PREFIXES.has(project!)) add("ticket", `${project}-${number}`.toUpperCase(), `${project}-${number}`)
    }
    for (const url of open("issue") || open("url") ? findUrls(text) : []) {
      const issue = REPOSITORY_ISSUE_URL.exec(url)
      if (issue !== null) {
        add("issue", `${issue[1]}/${issue[2]}#${issue[3]}`.toLowerCase(), url)
        continue
      }
      const key = normaliseUrl(url)
      if (key !== undefined) add("url", key, url)
    }
    for (const [label, repository, number] of mayHaveIssue ? matchesOf(REPOSITORY_ISSUE, text) : []) {
      add("issue", `${repository}#${number}`.toLowerCase(), label)
    }
    for (const [label, number] of mayHaveIssue ? matchesOf(BARE_ISSUE, prose) : []) add("issue", `#${number}`, label)
    for (const path of open("file") ? findFilePaths(text) : []) add("file", normalisePath(path), path)
    for (const [, service] of open("service") && SERVICE_HINT.test(text) ? matchesOf(SERVICE, text) : []) {
      if (!NOT_SERVICE_PREFIXES.has(service!.split("-")[0]!.toLowerCase())) add("service", service!.toLowerCase(), service!)
    }
    if (open("table")) {
      for (const [, table] of matchesOf(TABLE, text)) addTable(table!)
      for (const block of blocks) {
        if (block.language === "sql") for (const [, table] of matchesOf(TABLE_ANY_CASE, block.content)) addTable(table!)
      }
    }
    for (const [, name] of open("function") ? matchesOf(FUNCTION, text) : []) add("function", name!, name!)
  }

  for (const step of derivation.logic_trace) {
    if (step.kind === "tool_call" && step.tool_name !== undefined) add("tool", step.tool_name, step.tool_name)
  }

  const functionNames = new Set(subjects.filter((subject) => subject.kind === "function").map((subject) => subject.key))
  // the user texts come first in `texts`
  for (const prose of proses.slice(0, userTexts.length)) {
    if (full() || !open("topic")) break
    for (const [topic] of matchesOf(TOPIC, prose)) {
      const key = topic.toLowerCase()
      if (!NOT_TOPICS.has(key) && !functionNames.has(topic)) add("topic", key, topic)
    }
  }
  return subjects
}

/**
 * Where a coding assistant's turn was worked on, as its transcript says (`ledger watch`): the directory, and the git
 * branch checked out there (a detached `HEAD` names nothing).
 */
export const sourceSubjects = (source: CaptureSource | undefined): Array<Subject> => {
  if (source?.cwd == null) return []
  const directory = normalisePath(source.cwd)
  const branch = source.git_branch
  return [
    { kind: "directory", key: directory, label: source.cwd },
    ...(branch == null || branch === "" || branch === "HEAD" ? [] : [{ kind: "branch" as const, key: `${directory}@${branch}`, label: branch }])
  ]
}

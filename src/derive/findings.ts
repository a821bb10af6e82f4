/**
 * Findings: the conclusions an answer states, picked sentence by sentence from its prose (code blocks
 * are skipped). A sentence is a recommendation, a decision or a claim by its phrasing; everything else
 * (questions, lead-ins to code, headings, filler) is left out.
 */
import type { Finding } from "../domain/decision.ts"
import { collapseWhitespace, splitFences, truncate, uniqueBy } from "./text.ts"

const MAX_FINDINGS = 10
const FINDING_CHARS = 300

const RULES: ReadonlyArray<{ readonly kind: Finding["kind"]; readonly pattern: RegExp }> = [
  {
    kind: "recommendation",
    pattern:
      /\b(?:you should|you'll want to|you (?:may|might) want to|we should|i(?: would|'d)? (?:recommend|suggest|advise)|consider|make sure|be sure to|it'?s (?:best|better|safer) to|prefer|avoid|don'?t forget to)\b/i
  },
  {
    kind: "decision",
    pattern:
      /\b(?:i will|i'll|we will|we'll|i'm going to|i am going to|we're going to|(?:i|we) (?:have )?decided|decided to|the fix is|the solution is|the answer is|let's|going with|(?:i|we) chose|(?:i|we) picked|i've (?:updated|changed|added|removed|fixed|replaced))\b/i
  },
  {
    kind: "claim",
    pattern:
      /\b(?:is|are|was|were|isn't|aren't|wasn't|causes?|caused|because|due to|means|results? in|leads? to|returns?|fails?|happens|occurs|contains|requires|depends on)\b/i
  }
]

const ABBREVIATION = /\b(?:e\.g|i\.e|etc|vs|approx|incl|mr|mrs|dr|no|fig)\.$/i
const LIST_MARKER = /^(?:[-*+•]|\d+[.)])\s+/

/** Prose lines joined into logical lines: markdown soft-wraps are undone, list items and headings stay apart. */
const logicalLines = (prose: string): Array<string> => {
  const lines: Array<string> = []
  let current = ""
  for (const raw of prose.split("\n")) {
    const line = raw.trim()
    if (line === "" || line.startsWith("#") || line.startsWith("|") || LIST_MARKER.test(line)) {
      if (current !== "") lines.push(current)
      current = line.startsWith("#") || line.startsWith("|") ? "" : line.replace(LIST_MARKER, "")
      continue
    }
    current = current === "" ? line : `${current} ${line}`
  }
  if (current !== "") lines.push(current)
  return lines
}

/** Splits a line into sentences, not breaking after common abbreviations. */
const sentences = (line: string): Array<string> => {
  const parts = line.split(/(?<=[.!?])\s+(?=[A-Z0-9"'(`*_])/)
  const merged: Array<string> = []
  for (const part of parts) {
    const previous = merged.at(-1)
    if (previous !== undefined && ABBREVIATION.test(previous)) merged[merged.length - 1] = `${previous} ${part}`
    else merged.push(part)
  }
  return merged
}

/** Strips emphasis markers so the stored finding reads as plain text. */
const plain = (sentence: string): string => collapseWhitespace(sentence.replace(/\*\*|__|`/g, ""))

/** Four words or more (three spaces), not a question or a lead-in. */
const isStatement = (sentence: string): boolean =>
  !sentence.endsWith("?") && !sentence.endsWith(":") && hasSpaces(sentence, 3)

const hasSpaces = (text: string, count: number): boolean => {
  let at = -1
  for (let found = 0; found < count; found++) {
    at = text.indexOf(" ", at + 1)
    if (at === -1) return false
  }
  return true
}

/** `cutOff`: the answer stops mid-sentence (truncated), so its unfinished last sentence is no finding. */
export const extractFindings = (answer: string, options: { readonly cutOff: boolean }): Array<Finding> => {
  const all = logicalLines(splitFences(answer).prose).flatMap((line) => sentences(line).map(plain))
  const finished = options.cutOff && !/[.!?]$/.test(all.at(-1) ?? "") ? all.slice(0, -1) : all
  const found: Array<Finding> = []
  for (const sentence of finished) {
    if (!isStatement(sentence)) continue
    const rule = RULES.find(({ pattern }) => pattern.test(sentence))
    if (rule !== undefined) found.push({ kind: rule.kind, text: truncate(sentence, FINDING_CHARS) })
  }
  return uniqueBy(found, (finding) => finding.text.toLowerCase()).slice(0, MAX_FINDINGS)
}

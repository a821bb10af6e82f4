/** `ledger verify`'s report for people (the JSON form is the result itself). */
import type { VerifyResult, WorkspaceVerification } from "./Verifier.ts"

const n = (value: number) => value.toLocaleString("en-US")

const REASONS: Record<string, string> = {
  hash: "its facts or place no longer match its hash",
  raw: "its stored raw exchange is not the one hashed",
  link: "its prev_hash is not its predecessor's hash",
  order: "its seq number appears twice",
  unchained: "it has no place in the chain",
  key: "it was chained with a key not held here",
  erasure: "its content was removed without a signed erasure"
}

const workspaceLines = (w: WorkspaceVerification): Array<string> => {
  const span = w.first_seq === null ? "" : ` (seq ${n(w.first_seq)}–${n(w.last_seq!)})`
  const pruned = w.pruned_through > 0 ? `, pruned through seq ${n(w.pruned_through)}` : ""
  const lines = [`${w.tenant}/${w.workspace}  ${n(w.decisions)} decisions${span}${pruned}`]
  if (w.integrity.ok) lines.push("  integrity     OK")
  else {
    lines.push(`  integrity     FAILED: ${n(w.integrity.altered_total)} altered${w.integrity.problems.length > 0 ? `, ${w.integrity.problems.length} chain problem(s)` : ""}`)
    for (const a of w.integrity.altered) lines.push(`    ${a.ledger_id}  ${a.seq === null ? "no seq" : `seq ${n(a.seq)}`}: ${REASONS[a.reason] ?? a.reason}`)
    if (w.integrity.altered_total > w.integrity.altered.length) lines.push(`    … and ${n(w.integrity.altered_total - w.integrity.altered.length)} more`)
    for (const problem of w.integrity.problems) lines.push(`    ${problem}`)
  }
  if (w.completeness.ok) lines.push("  completeness  OK")
  else {
    lines.push(`  completeness  FAILED: ${n(w.completeness.missing)} missing`)
    for (const gap of w.completeness.gaps) lines.push(`    gap: seq ${gap.from === gap.to ? n(gap.from) : `${n(gap.from)}–${n(gap.to)}`}`)
    const tail = w.completeness.tail
    if (tail !== null) {
      lines.push(`    tail cut: the ${tail.by === "checkpoint" ? "checkpoint" : "chain's recorded head"} expects seq ${n(tail.expected_through)}, the chain ends at ${n(tail.found_through)}`)
    }
  }
  if (w.checkpoint !== null) lines.push(`  checkpoint    seq ${n(w.checkpoint.seq)} ${w.checkpoint.matches ? "matches" : "does NOT match"}`)
  return lines
}

export const renderVerification = (result: VerifyResult): string => {
  const rate = result.seconds > 0 ? Math.round(result.decisions / result.seconds) : result.decisions
  return [
    ...result.workspaces.flatMap(workspaceLines),
    `verified ${n(result.decisions)} decisions in ${result.workspaces.length} workspace(s) in ${result.seconds.toFixed(1)} s (${n(rate)}/s): ${result.ok ? "OK" : "FAILED"}`
  ].join("\n")
}

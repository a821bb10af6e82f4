import { Schema } from "effect"
import { Decision, LedgerQuery } from "../../query/LedgerQuery.ts"
import { ledgerIdParam } from "../../views/params.ts"
import { decisionText } from "../../views/text.ts"
import { defineTool } from "./Tool.ts"

export const getDecision = defineTool({
  name: "get_decision",
  title: "Get a decision's audit trail",
  description:
    "Get one decision — a single model call an agent made — rebuilt as an audit trail: the logic trace (instructions, " +
    "turns, reasoning, tool calls and results, answer), the evidence the model was given (with sources and content " +
    "hashes), the findings its answer states, the artifacts it produced (code, commands, tool arguments), plus " +
    "outcome, intent, cost breakdown, quality and confidence with their reasons, latency and token usage, and " +
    "`integrity`: the decision's place in its workspace's hash chain (`seq`, `hash`, `prev_hash`; null until chained). " +
    "Use it to explain or verify why an agent did something.",
  input: Schema.Struct({ ledger_id: ledgerIdParam }),
  output: Decision,
  run: (principal, args) => LedgerQuery.use((query) => query.getDecision(principal, args.ledger_id)),
  text: decisionText
})

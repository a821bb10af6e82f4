import { Effect } from "effect"
import * as Fs from "node:fs"
import * as R from "../src/builder/reconstruct.ts"
import * as S from "../src/builder/store.ts"
import * as P from "../src/builder/ContentPolicies.ts"
import * as C from "../bench/ingest/captures.ts"
const identity = { tenant_id: "0194a000-0000-7000-8000-000000000001", workspace_id: "0194a000-0000-7000-8000-000000000002", user_id: "0194a000-0000-7000-8000-000000000003", key_id: "0194a000-0000-7000-8000-000000000004" }
for (const kind of ["short", "realistic"] as const) {
  const out: Array<string> = []
  for (let i = 0; i < 200; i++) {
    const payload = JSON.stringify(C.realisticCapture(identity, { agent_id: `agent-${i % 50}`, started_at: Date.now(), variant: i }, kind))
    const capture = Effect.runSync(R.decodeEntry(payload))
    const rec = Effect.runSync(R.reconstruct(P.beforeDerivation(capture, "full")))
    const st = S.storable(P.afterDerivation(rec, "full"))
    out.push(JSON.stringify({ d: st.prepared.derivation, s: st.prepared.subjects, u: capture.usage === null ? null : R.pgJson(capture.usage) }))
  }
  Fs.writeFileSync(`/tmp/sample-${kind}.jsonl`, out.join("\n"))
  const avg = (k: "d" | "s") => out.reduce((a, l) => a + JSON.parse(l)[k].length, 0) / out.length
  console.log(kind, "derivation", avg("d"), "subjects", avg("s"))
}

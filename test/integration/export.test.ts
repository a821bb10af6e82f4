/**
 * `ledger export` against real PostgreSQL: one workspace's decisions, in chain order, with enough of each to
 * recompute its hash and raw hash with the key alone; since/until by creation time; pages by keyset past 10,000
 * rows, chained then unchained; another workspace's rows never in it; the command's flags checked before any
 * reading.
 */
import { assert, describe, layer } from "@effect/vitest"
import { NodeServices } from "@effect/platform-node"
import { Effect, FileSystem, Layer, Option, Result } from "effect"
import { CliError, Command } from "effect/cli"
import { SqlClient } from "effect/sql"
import * as Crypto from "node:crypto"
import * as Path from "node:path"
import { encodeFacts, rawHash } from "../../src/chain/chain.ts"
import { Exporter, ExportRangeInvalid } from "../../src/integrity/Exporter.ts"
import { exportDecisions, ExportFailed, parseInstant } from "../../src/integrity/exportCommand.ts"
import { IntegrityKeys } from "../../src/chain/IntegrityKeys.ts"
import { UnknownWorkspace } from "../../src/integrity/workspaces.ts"
import { tempDir } from "../support/stack.ts"
import { builderStack, chainedWorkspace, MINUTE, T0 } from "./builder-harness.ts"

interface Line {
  readonly [field: string]: any
  readonly integrity: {
    readonly seq: number
    readonly prev_hash: string
    readonly hash: string
    readonly raw_hash: string
    readonly chain_key: number
    readonly recorded_at: string
    readonly erased: boolean
  } | null
}

/** Runs the exporter into a fresh file and parses what it wrote. */
const exportToFile = (options: { readonly workspace?: string; readonly since?: Date; readonly until?: Date }) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const file = Path.join(yield* tempDir, "export.jsonl")
    const progress: Array<{ done: number; total: number }> = []
    const result = yield* (yield* Exporter).run({
      ...options,
      out: fs.sink(file),
      onProgress: (p) => Effect.sync(() => void progress.push(p))
    })
    const text = yield* fs.readFileString(file)
    assert.isTrue(text === "" || text.endsWith("\n"))
    const lines = text.split("\n").filter((l) => l.length > 0).map((l) => JSON.parse(l) as Line)
    return { result, lines, progress }
  })

describe("export", () => {
  layer(Exporter.layer.pipe(Layer.provideMerge(builderStack("postgres")), Layer.provideMerge(NodeServices.layer)), {
    timeout: 120_000,
    excludeTestServices: true
  })("export on PostgreSQL", (it) => {
    it.effect("one workspace's decisions in seq order, each hash recomputed from the line with the key", () =>
      Effect.gen(function*() {
        const [a, b] = [yield* chainedWorkspace(12, "export"), yield* chainedWorkspace(5, "export")]
        const { result, lines, progress } = yield* exportToFile({ workspace: a.workspace_id })
        assert.deepStrictEqual([result.decisions, result.workspaces], [12, 1])
        assert.strictEqual(lines.length, 12)
        assert.deepStrictEqual(lines.map((l) => l.integrity?.seq), Array.from({ length: 12 }, (_, i) => i + 1))
        assert.isTrue(lines.every((l) => l.workspace_id === a.workspace_id && l.tenant_id === a.tenant_id && l.workspace === "ops"))
        assert.deepStrictEqual(progress.at(-1), { done: 12, total: 12 })

        // the other workspace's rows are not there
        const sql = yield* SqlClient.SqlClient
        const others = new Set((yield* sql<{ ledger_id: string }>`SELECT ledger_id FROM decisions WHERE workspace_id = ${b.workspace_id}`)
          .map((row) => row.ledger_id))
        assert.strictEqual(others.size, 5)
        assert.isTrue(lines.every((l) => !others.has(l.ledger_id) && l.workspace_id !== b.workspace_id))

        // an auditor holding the key: every hash, raw hash and link from the exported fields alone
        const keys = yield* IntegrityKeys
        let previous: string | undefined
        for (const l of lines) {
          const chain = l.integrity!
          const facts = {
            tenant_id: l.tenant_id,
            workspace_id: l.workspace_id,
            seq: chain.seq,
            chain_key: chain.chain_key,
            ledger_id: l.ledger_id,
            user_id: l.user_id,
            key_id: l.key_id,
            agent_id: l.agent_id,
            execution_id: l.execution_id,
            provider: l.provider,
            provider_type: l.provider_type,
            model: l.model,
            api: l.api,
            stream: l.stream,
            status: l.status,
            aborted: l.aborted,
            created_at: Date.parse(l.created_at),
            captured_at: Date.parse(l.captured_at),
            recorded_at: Date.parse(chain.recorded_at),
            first_token_ms: l.first_token_ms,
            latency_ms: l.latency_ms,
            upstream_ms: l.upstream_ms,
            usage: l.usage,
            response_id: l.response_id,
            previous_response_id: l.previous_response_id,
            capture_version: l.capture_version,
            source: l.source
          }
          // as an auditor holding the key would: a plain HMAC-SHA-256 over the documented encoding and the links
          const secret = Buffer.from(keys.secrets.find((key) => key.id === chain.chain_key)!.secret, "base64url")
          const hmac = Crypto.createHmac("sha256", secret).update(encodeFacts(facts))
          assert.strictEqual(hmac.update(Buffer.from(chain.prev_hash, "hex")).update(Buffer.from(chain.raw_hash, "hex")).digest("hex"), chain.hash)
          assert.isFalse(chain.erased)
          assert.strictEqual(rawHash(l.raw_request, l.raw_response, l.raw_context).toString("hex"), chain.raw_hash)
          if (previous !== undefined) assert.strictEqual(chain.prev_hash, previous)
          previous = chain.hash
        }
        // the derived fields and the attribution are there too
        for (const field of ["title", "intent", "outcome", "cost_usd", "quality", "confidence", "session_id", "tenant", "error"]) {
          assert.isTrue(field in lines[0]!, field)
        }
      }))

    it.effect("since/until select by creation time, until exclusive", () =>
      Effect.gen(function*() {
        const a = yield* chainedWorkspace(10, "export")
        const since = new Date(T0 + 3 * MINUTE)
        const until = new Date(T0 + 8 * MINUTE)
        const { result, lines } = yield* exportToFile({ workspace: a.workspace_id, since, until })
        assert.strictEqual(result.decisions, 5)
        assert.deepStrictEqual(lines.map((l) => Date.parse(l.created_at)), [3, 4, 5, 6, 7].map((i) => T0 + i * MINUTE))
        assert.deepStrictEqual(lines.map((l) => l.integrity!.seq), [4, 5, 6, 7, 8])
        assert.strictEqual((yield* exportToFile({ workspace: a.workspace_id, since })).lines.length, 7)
        assert.strictEqual((yield* exportToFile({ workspace: a.workspace_id, until })).lines.length, 8)
        const inverted = yield* Effect.result((yield* Exporter).run({ out: (yield* FileSystem.FileSystem).sink("/dev/null"), since: until, until: since }))
        assert.isTrue(Result.isFailure(inverted) && inverted.failure instanceof ExportRangeInvalid)
        const unknown = yield* Effect.result(exportToFile({ workspace: "no-such-workspace" }))
        assert.isTrue(Result.isFailure(unknown) && unknown.failure instanceof UnknownWorkspace)
      }))

    it.effect("pages by keyset past 10,000 rows: the chain in seq order, then unchained decisions by creation time", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const a = yield* chainedWorkspace(1, "export")
        // copies of the built decision (short raw exchange): 10,003 more chained, 10,002 not chained yet, in threes
        // sharing a creation time so the unchained keyset needs the ledger id to go on
        const [{ columns, copied }] = yield* sql<{ columns: string; copied: string }>`SELECT
            string_agg(quote_ident(column_name), ', ') AS columns, string_agg('copy.' || quote_ident(column_name), ', ') AS copied
          FROM information_schema.columns WHERE table_name = 'decisions' AND table_schema = current_schema() AND is_generated = 'NEVER'`
        const copies = (changes: string, series: string) =>
          sql`INSERT INTO decisions (${sql.literal(columns!)}) SELECT ${sql.literal(copied!)}
            FROM decisions d, ${sql.literal(series)} g, LATERAL jsonb_populate_record(d, jsonb_build_object('ledger_id', gen_random_uuid(),
              'raw_request', '{}', 'raw_response', NULL, 'raw_context', NULL, ${sql.literal(changes)})) copy
            WHERE d.workspace_id = ${a.workspace_id} AND d.seq = 1`
        yield* copies(`'seq', g, 'created_at', d.created_at + g * interval '1 second'`, "generate_series(2, 10004)")
        yield* copies(
          `'seq', NULL, 'prev_hash', NULL, 'hash', NULL, 'raw_hash', NULL, 'chain_key', NULL,
            'created_at', d.created_at - (g / 3) * interval '1 millisecond'`,
          "generate_series(1, 10002)"
        )
        const { result, lines, progress } = yield* exportToFile({ workspace: a.workspace_id })
        assert.strictEqual(result.decisions, 20_006)
        assert.strictEqual(new Set(lines.map((l) => l.ledger_id)).size, 20_006)
        const chained = lines.slice(0, 10_004)
        assert.deepStrictEqual(chained.map((l) => l.integrity?.seq), Array.from({ length: 10_004 }, (_, i) => i + 1))
        const unchained = lines.slice(10_004)
        assert.isTrue(unchained.every((l) => l.integrity === null))
        const order = unchained.map((l) => `${l.created_at} ${l.ledger_id}`)
        assert.deepStrictEqual(order, [...order].sort())
        assert.deepStrictEqual(progress.map((p) => p.done), [10_000, 10_004, 20_004, 20_006])
      }))

    it.effect("the command: --format jsonl is required, dates must be ISO, the export goes to --out", () =>
      Effect.gen(function*() {
        const a = yield* chainedWorkspace(3, "export")
        const fs = yield* FileSystem.FileSystem
        const file = Path.join(yield* tempDir, "cli.jsonl")
        const cli = Command.runWith(exportDecisions, { version: "test", renderErrors: false })
        yield* cli(["--workspace", a.workspace_id, "--format", "jsonl", "--out", file, "--since", "2025-11-03T09:01:00Z"])
        const lines = (yield* fs.readFileString(file)).trimEnd().split("\n").map((l) => JSON.parse(l) as Line)
        assert.deepStrictEqual(lines.map((l) => l.integrity!.seq), [2, 3])

        // each refused at the flags, naming the flag
        const refused = [
          [["--format", "csv"], 'Invalid value for flag --format: "csv". Expected: "jsonl"'],
          [[], "Missing required flag: --format"],
          [["--format", "jsonl", "--since", "2025-02-30"], 'Invalid value for flag --since: "2025-02-30". Expected: an ISO date'],
          [["--format", "jsonl", "--until", "yesterday"], 'Invalid value for flag --until: "yesterday". Expected: an ISO date']
        ] as const
        for (const [args, message] of refused) {
          const failed = yield* Effect.result(cli(["--workspace", a.workspace_id, "--out", file, ...args]))
          const errors = Result.isFailure(failed) && failed.failure instanceof CliError.ShowHelp ? failed.failure.errors.map((e) => e.message) : []
          assert.isTrue(errors.some((e) => e.startsWith(message)), `${args.join(" ")}: ${errors.join("; ")}`)
        }
        // failures past the flags are told on stderr, not left to the runtime (which reports on stdout)
        const inverted = yield* Effect.result(cli(["--workspace", a.workspace_id, "--format", "jsonl", "--since", "2025-11-04", "--until", "2025-11-03"]))
        assert.isTrue(Result.isFailure(inverted) && inverted.failure instanceof ExportFailed && inverted.failure.cause instanceof ExportRangeInvalid)
        const iso = (text: string) => Option.getOrNull(Option.map(parseInstant(text), (date) => date.toISOString()))
        assert.strictEqual(iso("2025-11-03"), "2025-11-03T00:00:00.000Z")
        assert.strictEqual(iso("2025-11-03T10:30"), "2025-11-03T10:30:00.000Z")
        assert.strictEqual(iso("2025-11-03T10:30:00.250+01:00"), "2025-11-03T09:30:00.250Z")
        assert.strictEqual(iso("2025-11-03T24:00"), null)
        assert.strictEqual(iso("2025-02-29"), null)
      }))
  })
})

/**
 * Checkpoints (docs/ARCHITECTURE.md, "Integrity"): each workspace's chain head — seq, hash, when it was recorded — in
 * one document signed with Ed25519, to be kept outside the database (object storage, a ticket, a transparency log).
 * Walking the chain cannot show a cut tail; a head kept elsewhere can: `ledger verify --checkpoint` expects at least
 * that seq, with that hash.
 */
import { Clock, Effect, Schema } from "effect"
import { ScopedSql, TenantSql } from "../store/TenantSql.ts"
import { canonicalJson, GENESIS } from "../chain/chain.ts"
import { IntegrityKeys, verifySignature } from "../chain/IntegrityKeys.ts"
import { listWorkspaces } from "./workspaces.ts"

export const CHECKPOINT_FORMAT = "ledger-checkpoint/1"

const CheckpointEntry = Schema.Struct({
  tenant_id: Schema.String,
  workspace_id: Schema.String,
  tenant: Schema.String,
  workspace: Schema.String,
  seq: Schema.Number,
  hash: Schema.String,
  recorded_at: Schema.NullOr(Schema.String)
})

export const Checkpoint = Schema.Struct({
  format: Schema.Literal(CHECKPOINT_FORMAT),
  created_at: Schema.String,
  key_id: Schema.Number,
  public_key: Schema.String,
  workspaces: Schema.Array(CheckpointEntry),
  signature: Schema.String
})
export type Checkpoint = typeof Checkpoint.Type

export class CheckpointInvalid extends Schema.TaggedError<CheckpointInvalid>()("CheckpointInvalid", {
  message: Schema.String
}) {}

const signedText = (checkpoint: Omit<Checkpoint, "signature">) =>
  `${CHECKPOINT_FORMAT}\n${canonicalJson({ created_at: checkpoint.created_at, key_id: checkpoint.key_id, public_key: checkpoint.public_key, workspaces: checkpoint.workspaces })}`

/** The signed heads of every workspace's chain, as they are now. */
export const makeCheckpoint = Effect.fn("Checkpoint.make")(function*() {
  const tenantSql = yield* TenantSql
  const keys = yield* IntegrityKeys
  const workspaces = []
  for (const scope of yield* listWorkspaces()) {
    const [head] = yield* tenantSql.read({ tenant_id: scope.tenant_id, workspace_id: scope.workspace_id, user_id: "", role: "member" }, ScopedSql.use((sql) =>
      sql<{ head_seq: number; head_hash: Uint8Array | null; head_at: Date | null }>`SELECT head_seq::float8 AS head_seq, head_hash, head_at
        FROM ledger_chains WHERE tenant_id = ${scope.tenant_id}::uuid AND workspace_id = ${scope.workspace_id}::uuid`
    ))
    workspaces.push({
      tenant_id: scope.tenant_id,
      workspace_id: scope.workspace_id,
      tenant: scope.tenant,
      workspace: scope.workspace,
      seq: head?.head_seq ?? 0,
      hash: Buffer.from(head?.head_hash ?? GENESIS).toString("hex"),
      recorded_at: head?.head_at?.toISOString() ?? null
    })
  }
  const unsigned = {
    format: CHECKPOINT_FORMAT,
    created_at: new Date(yield* Clock.currentTimeMillis).toISOString(),
    key_id: keys.current.id,
    public_key: keys.sign("").public_key,
    workspaces
  } as const
  return { ...unsigned, signature: keys.sign(signedText(unsigned)).signature } satisfies Checkpoint
})

/** Reads a checkpoint document (JSON text). */
export const parseCheckpoint = (text: string) =>
  Effect.try({ try: () => JSON.parse(text) as unknown, catch: () => new CheckpointInvalid({ message: "the checkpoint is not JSON" }) }).pipe(
    Effect.flatMap(Schema.decodeUnknownEffect(Checkpoint)),
    Effect.mapError((error) => error instanceof CheckpointInvalid ? error : new CheckpointInvalid({ message: `not a ${CHECKPOINT_FORMAT} document: ${error.message}` }))
  )

/**
 * The heads a checkpoint vouches for, by workspace id — once its signature holds and its public key is the one this
 * install's key of that id derives (a checkpoint signed by anyone else proves nothing about this ledger).
 */
export const checkpointHeads = Effect.fnUntraced(function*(checkpoint: Checkpoint) {
  const keys = yield* IntegrityKeys
  if (!verifySignature(checkpoint.public_key, signedText(checkpoint), checkpoint.signature)) {
    return yield* Effect.fail(new CheckpointInvalid({ message: "the checkpoint's signature does not hold: it was changed after it was signed" }))
  }
  if (keys.publicKey(checkpoint.key_id) !== checkpoint.public_key) {
    return yield* Effect.fail(new CheckpointInvalid({ message: `the checkpoint was signed with a key other than this ledger's key ${checkpoint.key_id}` }))
  }
  return new Map(checkpoint.workspaces.map((entry) => [entry.workspace_id, { seq: entry.seq, hash: Buffer.from(entry.hash, "hex") }]))
})

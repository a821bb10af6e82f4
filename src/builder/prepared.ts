/**
 * What a batch holds of each decision from its derivation until its transaction commits: the reconstruction, trimmed
 * to what the transaction reads, and the row's parts that need no lock, prepared beforehand (bench/notes/builder.md,
 * "What a batch holds").
 */
import { captureApi } from "../domain/capture.ts"
import type { Derivation } from "../domain/decision.ts"
import { type ChainDraft, chainDraft } from "./chaining.ts"
import { type Reconstruction } from "./reconstruct.ts"
import { pgJson } from "../store/pgValues.ts"

/** What the transaction reads of a derivation: the row's columns and the rollups' figures. */
export interface HeldDerivation {
  readonly title: string
  readonly intent: Derivation["intent"]
  readonly outcome: Derivation["outcome"]
  readonly cost: { readonly total_usd: number | null }
  readonly quality: { readonly value: number }
  readonly confidence: { readonly value: number }
}

/**
 * A reconstruction as its batch holds it until commit. A batch of thousands outlives several young-generation
 * collections, and each copies what it still holds: whole derivations (trace, evidence, scores' reasons) were about a
 * third of a short decision's copied bytes and most of its objects (bench/notes/builder.md, "What a batch holds").
 */
export interface HeldReconstruction extends Omit<Reconstruction, "derivation" | "subjects"> {
  readonly derivation: HeldDerivation
  /**
   * The whole derivation of a Responses API call, the one kind a call continues (`previous_response_id`): the
   * transaction may open its trace with the turns it continues or read its trace for a successor built before it
   * (continuations.ts). Undefined for the others.
   */
  readonly whole: Derivation | undefined
}

/**
 * What a decision's row holds that no lock decides: what its chain hash covers apart from its place, and its JSON
 * texts. Computed before the batch's transactions (by a consumer while its previous batch commits), so none of it
 * runs while the batch holds its locks. The texts are kept as UTF-8 bytes, outside the JavaScript heap, which
 * collections do not copy (a text with one character beyond Latin-1, such as an intent reason's arrow, takes two
 * bytes a character there); they are what the driver would have encoded anyway.
 */
export interface Prepared {
  readonly draft: ChainDraft
  /** the derivation the JSON text is of: a call that continues another gets a new one, its trace joined (continuations.ts) */
  readonly derivationOf: Derivation | undefined
  readonly derivation: Buffer
  readonly subjects: Buffer
}

/** A reconstruction and its row's prepared parts: what `storeBatch` stores. */
export interface StorableDecision {
  readonly reconstruction: HeldReconstruction
  readonly prepared: Prepared
}

/** JSON text for a json or jsonb column as UTF-8 bytes, sent as bytea (`convert_from(…, 'UTF8')` in SQL). */
const jsonBytes = (value: unknown) => Buffer.from(pgJson(value))

/** Prepares a reconstruction's row (see Prepared) and what its batch holds of it until commit (HeldReconstruction). */
export const storable = (reconstruction: Reconstruction): StorableDecision => {
  const { derivation, subjects, ...call } = reconstruction
  const whole = captureApi(call.capture) === "responses" ? derivation : undefined
  return {
    reconstruction: {
      ...call,
      whole,
      derivation: whole ?? {
        title: derivation.title,
        intent: derivation.intent,
        outcome: derivation.outcome,
        cost: { total_usd: derivation.cost.total_usd },
        quality: { value: derivation.quality.value },
        confidence: { value: derivation.confidence.value }
      }
    },
    prepared: {
      draft: chainDraft(call.capture, reconstruction),
      derivationOf: whole,
      derivation: jsonBytes(derivation),
      subjects: jsonBytes(subjects)
    }
  }
}

/** The derivation's JSON text: the one prepared, unless the derivation changed since. */
export const derivationJson = (prepared: Prepared, item: HeldReconstruction) =>
  item.whole === prepared.derivationOf ? prepared.derivation : jsonBytes(item.whole)

/**
 * The keys of the decision chain (docs/ARCHITECTURE.md, "Integrity"), kept outside the database: from
 * LEDGER_INTEGRITY_KEY, or the data directory's `integrity.key` (created on first use, mode 0600).
 *
 * - Chain hashes, prune markers and audit events are HMAC-SHA-256 with a numbered key; every decision records the
 *   number (`chain_key`), so a rotated-in key chains new decisions while the older keys still verify older ones.
 *   The newest key (highest number) is the current one.
 * - Checkpoints are signed with Ed25519, from a key pair derived from the current secret: whoever holds the
 *   checkpoint and the published public key can check the head was written by the key holder.
 */
import { Context, Effect, Layer, Option, Redacted } from "effect"
import * as Crypto from "node:crypto"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { LedgerConfig } from "../config/LedgerConfig.ts"
import { type ChainHasher, chainHasher } from "./chain.ts"
import { InvalidSetting } from "../domain/errors.ts"

export interface ChainKey {
  readonly id: number
  readonly hash: ChainHasher
}

export interface Signature {
  readonly key_id: number
  /** the Ed25519 public key, base64 of its 32 raw bytes */
  readonly public_key: string
  readonly signature: string
}

const SECRET_BYTES = 32
export const keyFileName = "integrity.key"

interface KeyFile {
  readonly keys: ReadonlyArray<{ readonly id: number; readonly secret: string; readonly created_at?: string }>
}

const decodeSecret = (text: string, where: string): Buffer => {
  const bytes = Buffer.from(text.trim(), "base64url")
  if (bytes.length < SECRET_BYTES) throw new Error(`${where}: a key must be at least ${SECRET_BYTES} bytes (base64url)`)
  return bytes
}

/** `SECRET` (key 1) or `ID:SECRET,ID:SECRET`. */
export const parseKeyList = (text: string, where: string): ReadonlyArray<{ id: number; secret: Buffer }> =>
  text.split(",").map((part) => part.trim()).filter((part) => part.length > 0).map((part) => {
    const colon = part.indexOf(":")
    if (colon < 0) return { id: 1, secret: decodeSecret(part, where) }
    const id = Number(part.slice(0, colon))
    if (!Number.isInteger(id) || id < 1 || id > 32767) throw new Error(`${where}: key ids are integers from 1 to 32767`)
    return { id, secret: decodeSecret(part.slice(colon + 1), where) }
  })

/** Reads the key file, creating it with one fresh key when there is none (two processes racing: one file wins). */
const loadKeyFile = (dataDir: string): ReadonlyArray<{ id: number; secret: Buffer }> => {
  const file = Path.join(dataDir, keyFileName)
  if (!Fs.existsSync(file)) {
    Fs.mkdirSync(dataDir, { recursive: true })
    const fresh: KeyFile = { keys: [{ id: 1, secret: Crypto.randomBytes(SECRET_BYTES).toString("base64url"), created_at: new Date().toISOString() }] }
    const temp = `${file}.${process.pid}.${Crypto.randomBytes(4).toString("hex")}`
    Fs.writeFileSync(temp, JSON.stringify(fresh, null, 2) + "\n", { mode: 0o600 })
    try {
      Fs.linkSync(temp, file)
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error
    } finally {
      Fs.rmSync(temp, { force: true })
    }
  }
  const parsed = JSON.parse(Fs.readFileSync(file, "utf8")) as KeyFile
  if (!Array.isArray(parsed.keys) || parsed.keys.length === 0) throw new Error(`${file}: expected {"keys":[{"id":1,"secret":"…"}]}`)
  return parsed.keys.map((entry) => {
    if (!Number.isInteger(entry.id) || entry.id < 1 || entry.id > 32767) throw new Error(`${file}: key ids are integers from 1 to 32767`)
    return { id: entry.id, secret: decodeSecret(entry.secret, file) }
  })
}

// PKCS#8 wrapping of a raw Ed25519 seed (RFC 8410)
const ED25519_PKCS8_PREFIX = Buffer.from("302e020100300506032b657004220420", "hex")

const signingKeyOf = (secret: Buffer) => {
  const seed = Crypto.createHmac("sha256", secret).update("ledger checkpoint signing key/1").digest()
  const privateKey = Crypto.createPrivateKey({ key: Buffer.concat([ED25519_PKCS8_PREFIX, seed]), format: "der", type: "pkcs8" })
  const publicKey = Crypto.createPublicKey(privateKey)
  const raw = publicKey.export({ format: "der", type: "spki" }).subarray(-32)
  return { privateKey, publicKey: raw.toString("base64") }
}

/** Checks an Ed25519 signature made by `sign` against a base64 raw public key. */
export const verifySignature = (publicKey: string, text: string, signature: string): boolean => {
  try {
    const raw = Buffer.from(publicKey, "base64")
    if (raw.length !== 32) return false
    const key = Crypto.createPublicKey({ key: Buffer.concat([Buffer.from("302a300506032b6570032100", "hex"), raw]), format: "der", type: "spki" })
    return Crypto.verify(null, Buffer.from(text, "utf8"), key, Buffer.from(signature, "base64"))
  } catch {
    return false
  }
}

export class IntegrityKeys extends Context.Service<IntegrityKeys, {
  /** the key new decisions are chained with */
  readonly current: ChainKey
  /** the chain hash under key `id` (undefined when the key is unknown here) */
  readonly hasher: (id: number) => ChainHasher | undefined
  /** HMAC-SHA-256 of `text` with key `id` (undefined when the key is unknown here) */
  readonly mac: (id: number, text: string) => Buffer | undefined
  /** Ed25519 signature of `text` with the current key's signing pair */
  readonly sign: (text: string) => Signature
  /** the public half of key `id`'s signing pair (base64 of 32 raw bytes) */
  readonly publicKey: (id: number) => string | undefined
  /** the keys as configured (base64url), for the verifier's own threads to hold them too */
  readonly secrets: ReadonlyArray<{ readonly id: number; readonly secret: string }>
}>()("ledger/chain/IntegrityKeys") {
  static readonly fromSecrets = (secrets: ReadonlyArray<{ id: number; secret: Buffer }>) => {
    const keys = new Map(secrets.map(({ id, secret }) => [id, Crypto.createSecretKey(secret)]))
    if (keys.size !== secrets.length) throw new Error("integrity keys: each id may appear once")
    const hashers = new Map(secrets.map(({ id, secret }) => [id, chainHasher(secret)]))
    const newest = secrets.reduce((a, b) => (b.id > a.id ? b : a))
    const signing = signingKeyOf(newest.secret)
    const secretOf = new Map(secrets.map(({ id, secret }) => [id, secret]))
    return IntegrityKeys.of({
      current: { id: newest.id, hash: hashers.get(newest.id)! },
      hasher: (id) => hashers.get(id),
      mac: (id, text) => {
        const key = keys.get(id)
        return key === undefined ? undefined : Crypto.createHmac("sha256", key).update(text).digest()
      },
      sign: (text) => ({
        key_id: newest.id,
        public_key: signing.publicKey,
        signature: Crypto.sign(null, Buffer.from(text, "utf8"), signing.privateKey).toString("base64")
      }),
      publicKey: (id) => {
        const secret = secretOf.get(id)
        return secret === undefined ? undefined : signingKeyOf(secret).publicKey
      },
      secrets: secrets.map(({ id, secret }) => ({ id, secret: secret.toString("base64url") }))
    })
  }

  static readonly layer = Layer.effect(
    IntegrityKeys,
    Effect.gen(function*() {
      const config = yield* LedgerConfig
      const secrets = yield* Effect.try({
        try: () =>
          Option.isSome(config.integrityKey)
            ? parseKeyList(Redacted.value(config.integrityKey.value), "LEDGER_INTEGRITY_KEY")
            : loadKeyFile(config.dataDir),
        catch: (error) => new InvalidSetting({ message: `integrity key: ${error instanceof Error ? error.message : String(error)}` })
      })
      if (secrets.length === 0) return yield* new InvalidSetting({ message: "LEDGER_INTEGRITY_KEY names no key" })
      return IntegrityKeys.fromSecrets(secrets)
    })
  )
}

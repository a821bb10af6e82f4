/**
 * Password hashing for the app's accounts: scrypt (memory-hard) from node:crypto, stored as
 * `scrypt$N$r$p$<salt>$<hash>` (base64url) so the cost can be raised later without invalidating stored hashes.
 * Verification runs in constant time over the derived bytes; an unknown account is verified against a dummy hash
 * so a refusal takes the same time whether the email exists or not.
 */
import { Effect } from "effect"
import * as Crypto from "node:crypto"

const COST = { N: 2 ** 15, r: 8, p: 1 }
const KEY_BYTES = 32
// scrypt needs 128 * N * r bytes; twice that leaves room for node's own accounting
const maxmemFor = (N: number, r: number) => 256 * N * r

export const MIN_PASSWORD_LENGTH = 10
export const MAX_PASSWORD_LENGTH = 1024

const derive = (password: string, salt: Buffer, N: number, r: number, p: number) =>
  Effect.callback<Buffer>((resume) => {
    Crypto.scrypt(password, salt, KEY_BYTES, { N, r, p, maxmem: maxmemFor(N, r) }, (error, key) => {
      resume(error ? Effect.die(error) : Effect.succeed(key))
    })
  })

export const hashPassword = Effect.fn("Passwords.hash")(function*(password: string) {
  const salt = Crypto.randomBytes(16)
  const key = yield* derive(password, salt, COST.N, COST.r, COST.p)
  return `scrypt$${COST.N}$${COST.r}$${COST.p}$${salt.toString("base64url")}$${key.toString("base64url")}`
})

const DUMMY = `scrypt$${COST.N}$${COST.r}$${COST.p}$${Buffer.alloc(16).toString("base64url")}$${Buffer.alloc(KEY_BYTES).toString("base64url")}`

/** Whether the password matches the stored hash; a missing hash is checked against a dummy (always false). */
export const verifyPassword = Effect.fn("Passwords.verify")(function*(password: string, stored: string | null) {
  const parts = (stored ?? DUMMY).split("$")
  if (parts.length !== 6 || parts[0] !== "scrypt") return false
  const [N, r, p] = [Number(parts[1]), Number(parts[2]), Number(parts[3])]
  const expected = Buffer.from(parts[5]!, "base64url")
  const key = yield* derive(password, Buffer.from(parts[4]!, "base64url"), N, r, p)
  return stored !== null && key.length === expected.length && Crypto.timingSafeEqual(key, expected)
})

/** Why a new password is refused, or undefined when it is acceptable. */
export const passwordProblem = (password: string, email: string): string | undefined =>
  password.length < MIN_PASSWORD_LENGTH
    ? `Use at least ${MIN_PASSWORD_LENGTH} characters.`
    : password.length > MAX_PASSWORD_LENGTH
    ? `Use at most ${MAX_PASSWORD_LENGTH} characters.`
    : password.toLowerCase() === email.toLowerCase()
    ? "Do not use your email address as your password."
    : undefined

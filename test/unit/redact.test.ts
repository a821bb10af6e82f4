import { assert, describe, it } from "@effect/vitest"
import fc from "fast-check"
import { redactJsonText, redactText } from "../../src/domain/redact.ts"

/** A test secret of each kind, the way it appears in text, and its placeholder. */
const SAMPLES: ReadonlyArray<readonly [name: string, sample: string, kind: string]> = [
  ["e-mail", "alice.smith+ledger@mail.example.co.uk", "email"],
  ["OpenAI key", "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zAb3dEf6hIj9k", "api_key"],
  ["OpenAI legacy key", "sk-T3BlbkFJ1a2b3c4d5e6f7g8h9i0jklmnopqrstuvwxyzABCD", "api_key"],
  ["Anthropic key", "sk-ant-api03-Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Jh1Gf0EdCbA-zyxwvutsrq_AA", "api_key"],
  ["GitHub token", "ghp_16C7e42F292c6912E7710c838347Ae178B4a", "api_key"],
  ["GitHub OAuth token", "gho_16C7e42F292c6912E7710c838347Ae178B4a", "api_key"],
  ["GitHub app token", "ghs_16C7e42F292c6912E7710c838347Ae178B4a", "api_key"],
  ["GitHub fine-grained token", "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQ", "api_key"],
  ["Slack token", "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx", "api_key"],
  ["Google key", "AIzaSyDdI0hCZtE6vySjMm-WEfRq3CPzqKqqsHI", "api_key"],
  ["Stripe secret key", "sk_live_4eC39HqLyjWDarjtT1zdp7dc", "api_key"],
  ["Stripe restricted key", "rk_live_51H8xYzAbCdEfGhIjKlMnOpQr", "api_key"],
  ["ledger key", "ldg_pat_Yk3Jc9QmX2pL7vN4rT8wB1sD6fH0gK5aZ", "api_key"],
  ["ledger gateway key", "ldg_gw_qwertyuiopasdfghjklzxcvbnm", "api_key"],
  ["Groq key", "gsk_Q9f2LmX7pR4tZ8vB1nK6wY3cH5Q9f2LmX7pR4tZ8vB1nK6wY3", "api_key"],
  ["xAI key", "xai-Q9f2LmX7pR4tZ8vB1nK6wY3cH5Q9f2LmX7pR4tZ8vB1nK6wY3", "api_key"],
  ["AWS access key id", "AKIAIOSFODNN7EXAMPLE", "aws_key"],
  ["AWS session key id", "ASIAY34FZKBOKMUTVV7A", "aws_key"],
  [
    "JWT",
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIn0.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
    "jwt"
  ],
  ["Visa", "4111 1111 1111 1111", "card"],
  ["Visa, dashed", "4111-1111-1111-1111", "card"],
  ["Visa, plain", "4242424242424242", "card"],
  ["Mastercard", "5555 5555 5555 4444", "card"],
  ["Amex", "3782 822463 10005", "card"],
  ["phone, international", "+44 20 7946 0958", "phone"],
  ["phone, E.164", "+14155552671", "phone"],
  ["phone, international with area code", "+1 (415) 555-2671", "phone"],
  ["phone, US", "(555) 123-4567", "phone"],
  ["phone, US dashed", "555-123-4567", "phone"],
  ["IPv4", "192.168.10.254", "ip"],
  ["IBAN", "DE89 3704 0044 0532 0130 00", "iban"],
  ["IBAN, compact", "GB82WEST12345698765432", "iban"],
  ["SSN", "123-45-6789", "ssn"]
]

const PEM_KEY = [
  "-----BEGIN RSA PRIVATE KEY-----",
  "MIIEowIBAAKCAQEA0Z3VS5JJcds3xfn/ygWyF8PbnGy0AHB7MhgHcTz6sE2I2yPB",
  "aNBPGfNa4mDk0Q2EJ8Z4Ra8G6VhT5lVh5JnRKw==",
  "-----END RSA PRIVATE KEY-----"
].join("\n")

const placeholder = (kind: string) => `[REDACTED:${kind}]`

/** The text of a chat-completion request whose last message says `content`. */
const chatRequest = (content: string) =>
  JSON.stringify({
    model: "gpt-4o-mini",
    temperature: 0.2,
    max_tokens: 1024,
    messages: [{ role: "system", content: "You are helpful." }, { role: "user", content }]
  })

const lastContent = (json: string): string => {
  const parsed = JSON.parse(json) as { messages: Array<{ content: string }> }
  return parsed.messages[parsed.messages.length - 1]!.content
}

describe("redactText: each kind", () => {
  for (const [name, sample, kind] of SAMPLES) {
    it(`masks ${name} in plain text`, () => {
      assert.strictEqual(redactText(`before ${sample} after`), `before ${placeholder(kind)} after`)
      // (a text that is nothing but digits is a JSON number, which is never masked)
      if (!/^\d+$/.test(sample)) assert.strictEqual(redactText(sample), placeholder(kind))
      assert.strictEqual(redactText(`(${sample}),`), `(${placeholder(kind)}),`)
    })

    it(`masks ${name} inside a JSON string, keeping the escapes around it`, () => {
      const content = `line one\n${sample}\t"${sample}"\\${sample}\r\né ${sample}.`
      const redacted = redactText(chatRequest(content))
      const mask = placeholder(kind)
      assert.strictEqual(lastContent(redacted), `line one\n${mask}\t"${mask}"\\${mask}\r\né ${mask}.`)
      assert.isFalse(redacted.includes(sample))
    })
  }

  it("masks a PEM private key, raw or with JSON-escaped newlines", () => {
    assert.strictEqual(redactText(`key:\n${PEM_KEY}\nthanks`), "key:\n[REDACTED:private_key]\nthanks")
    const redacted = redactText(chatRequest(`key:\n${PEM_KEY}\nthanks`))
    assert.strictEqual(lastContent(redacted), "key:\n[REDACTED:private_key]\nthanks")
    const pkcs8 = "-----BEGIN PRIVATE KEY-----\\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\\n-----END PRIVATE KEY-----\\n"
    assert.strictEqual(redactText(pkcs8), "[REDACTED:private_key]\\n")
  })

  it("masks an encrypted PEM key with its header lines, and a truncated one", () => {
    const encrypted = "-----BEGIN ENCRYPTED PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,3F17F5316E2BAC89\n\nMIIFHzBJBgkqhkiG9w0BBQ0wPDAbBgkq\n-----END ENCRYPTED PRIVATE KEY-----"
    assert.strictEqual(redactText(`${encrypted}\nok`), "[REDACTED:private_key]\nok")
    const truncated = JSON.stringify({ text: PEM_KEY.slice(0, 90) })
    assert.deepStrictEqual(JSON.parse(redactText(truncated)), { text: "[REDACTED:private_key]" })
  })

  it("masks the credential after Bearer and Basic, keeping the scheme", () => {
    assert.strictEqual(redactText("Authorization: Bearer 8f14e45fceea167a5a36dedd4bea2543"), "Authorization: Bearer [REDACTED:bearer]")
    assert.strictEqual(redactText("authorization: bearer abc.DEF_123-xyz~"), "authorization: bearer [REDACTED:bearer]")
    assert.strictEqual(redactText("Authorization: Basic dXNlcjpwYXNzd29yZA=="), "Authorization: Basic [REDACTED:bearer]")
    const headers = JSON.stringify({ authorization: "Bearer sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z" })
    assert.deepStrictEqual(JSON.parse(redactText(headers)), { authorization: "Bearer [REDACTED:api_key]" })
  })

  it("masks the password of a URL and an AWS secret access key after its name", () => {
    assert.strictEqual(
      redactText("postgres://ledger:s3cr3t-Pa55@db.internal:5432/ledger"),
      "postgres://ledger:[REDACTED:password]@db.internal:5432/ledger"
    )
    const secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
    assert.strictEqual(redactText(`aws_secret_access_key = ${secret}`), "aws_secret_access_key = [REDACTED:aws_key]")
    assert.deepStrictEqual(JSON.parse(redactText(JSON.stringify({ SecretAccessKey: secret }))), {
      SecretAccessKey: "[REDACTED:aws_key]"
    })
  })

  it("masks several secrets of different kinds in one text", () => {
    const text = "Email alice@example.com, call +1 (415) 555-0132, key sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z, " +
      "card 4111 1111 1111 1111 exp 12/28, from 10.0.0.12."
    assert.strictEqual(
      redactText(text),
      "Email [REDACTED:email], call [REDACTED:phone], key [REDACTED:api_key], card [REDACTED:card] exp 12/28, from [REDACTED:ip]."
    )
  })

  it("redactJsonText is redactText", () => {
    const json = chatRequest("mail bob@example.com")
    assert.strictEqual(redactJsonText(json), redactText(json))
  })
})

describe("redactText: JSON escapes", () => {
  it("masks an e-mail right after an escaped newline, keeping the \\n", () => {
    assert.strictEqual(redactText(String.raw`{"a":"hi\nbob@example.com"}`), String.raw`{"a":"hi\n[REDACTED:email]"}`)
    assert.strictEqual(redactText(String.raw`"\tbob@example.com\r"`), String.raw`"\t[REDACTED:email]\r"`)
  })

  it("keeps escaped quotes around a token", () => {
    const text = String.raw`{"a":"key \"sk-ant-api03-Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Jh1Gf0E\" set"}`
    assert.strictEqual(redactText(text), String.raw`{"a":"key \"[REDACTED:api_key]\" set"}`)
  })

  it("keeps a \\uXXXX escape right before a token whole", () => {
    assert.strictEqual(redactText(String.raw`"\u00e9bob@example.com"`), String.raw`"\u00e9[REDACTED:email]"`)
    assert.strictEqual(redactText(String.raw`"\u00204111111111111111"`), String.raw`"\u0020[REDACTED:card]"`)
    assert.strictEqual(
      redactText(String.raw`"\u0041KIAIOSFODNN7EXAMPLE"`),
      String.raw`"\u0041KIAIOSFODNN7EXAMPLE"`,
      "the A of the escape is not the start of a key"
    )
  })

  it("tells an escaped backslash before a token from an escape", () => {
    // `\\` is a backslash: the token after it starts right there
    assert.strictEqual(redactText(String.raw`"C:\\nbob@example.com"`), String.raw`"C:\\[REDACTED:email]"`)
    assert.strictEqual(redactText(String.raw`"\\\nbob@example.com"`), String.raw`"\\\n[REDACTED:email]"`)
    assert.strictEqual(
      redactText(String.raw`"\\sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z"`),
      String.raw`"\\[REDACTED:api_key]"`
    )
    // `\b` is a backspace: `earer …` is not a Bearer credential
    assert.strictEqual(redactText(String.raw`"\bearer abcdef1234567890"`), String.raw`"\bearer abcdef1234567890"`)
  })

  it("never masks a bare JSON number, only digits inside strings", () => {
    const json = JSON.stringify({ id: 4111111111111111, ids: [1, 4111111111111111, -4242424242424242], card: "4111111111111111" })
    assert.deepStrictEqual(JSON.parse(redactText(json)), {
      id: 4111111111111111,
      ids: [1, 4111111111111111, -4242424242424242],
      card: "[REDACTED:card]"
    })
    const pretty = JSON.stringify({ a: 4111111111111111, b: [0.4111111111111111, 1e-7] }, null, 2)
    assert.strictEqual(redactText(pretty), pretty)
    assert.strictEqual(redactText("4111111111111111"), "4111111111111111", "a JSON text that is one number")
    assert.strictEqual(redactText(String.raw`{"a":"x\\", "b": 4111111111111111}`), String.raw`{"a":"x\\", "b": 4111111111111111}`)
  })

  it("keeps server-sent events valid", () => {
    const event = (content: string) => `data: ${JSON.stringify({ choices: [{ delta: { content } }] })}\n\n`
    const stream = event("mail ") + event("bob@example.com\n") + event(" key sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z") + "data: [DONE]\n\n"
    const redacted = redactText(stream)
    const contents = redacted.split("\n\n").filter((line) => line.startsWith("data: {")).map((line) =>
      (JSON.parse(line.slice(6)) as { choices: Array<{ delta: { content: string } }> }).choices[0]!.delta.content
    )
    assert.deepStrictEqual(contents, ["mail ", "[REDACTED:email]\n", " key [REDACTED:api_key]"])
  })
})

describe("redactText: what stays", () => {
  const unchanged = (text: string, why?: string) => assert.strictEqual(redactText(text), text, why)

  it("keeps order and account numbers that fail the Luhn check or have no card prefix", () => {
    unchanged("order 4111111111111112", "Luhn fails")
    unchanged("order 4111 1111 1111 1112", "Luhn fails")
    unchanged("ref 1234567890123456", "Luhn passes, but no network starts with 1")
    unchanged("tracking 9400111899223033005282", "22 digits")
    unchanged("ORD-20240315-0042")
  })

  it("keeps version strings, decimals and short dotted numbers", () => {
    unchanged("v1.22.333")
    unchanged("1.2.3.4.5")
    unchanged("10.0")
    unchanged("Python 3.12.4 and numpy 1.26.4")
    unchanged("256.1.1.1 and 01.02.03.04")
    unchanged("pi is 3.14159265358979 and e is 2.718281828459045")
  })

  it("keeps UUIDs, dates, timestamps and durations", () => {
    unchanged("550e8400-e29b-41d4-a716-446655440000")
    unchanged("123e4567-e89b-12d3-a456-426614174000")
    unchanged("00000000-0000-0000-0000-000000000000")
    unchanged("2024-03-15T10:20:30.123Z")
    unchanged("2024-03-15 10:20:30+02:00")
    unchanged("created 1700000000 at 1700000000000 ns 1700000000000000000")
    unchanged("took 00:01:23.456")
  })

  it("keeps prose, code and identifiers", () => {
    unchanged("The quarterly report shows revenue grew 12.5% to $4,210,000 in Q3 2023 (EMEA: 1,200,000).")
    unchanged("Use a Bearer token to authenticate; Bearer authentication is described in RFC 6750.")
    unchanged("Install scikit-learn and sk-learn-compatible-estimator-wrappers, then call get_user_account_information_by_id.")
    unchanged("const test_parse_http_response_with_status = () => max_tokens + prompt_tokens")
    unchanged("email me at the usual address; user@localhost is not an address with a domain")
    unchanged("@types/node and @effect/vitest are packages")
    unchanged("call 555 1234 or ext. 42; room 123-45")
    unchanged("AKIA is the prefix of an AWS key id")
  })

  it("keeps the ids that providers and tools put in calls, which look like keys", () => {
    unchanged("call_Qk3n9W5l7Vb2Xr8Jt4Yh6Ms1 toolu_01A09q90qw90lq917835lq9 msg_01XFDUDYJgAACzvnptvVoYEL")
    unchanged("resp_67ccd2bed1ec8190b14f964abc0542670bb6a6b452d3795b chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT")
    unchanged("pi_3MtwBwLkdIwHu7ix28a3tqPa fp_44709d6fcb req_011CSHoEeqs5C35K2UUqR7Fy")
    const toolCall = JSON.stringify({ tool_calls: [{ id: "call_Qk3n9W5l7Vb2Xr8Jt4Yh6Ms1", type: "function" }] })
    unchanged(toolCall)
  })
})

describe("redactText: properties", () => {
  const secrets = SAMPLES.map(([, sample]) => sample).concat(PEM_KEY, "Bearer 8f14e45fceea167a5a36dedd4bea2543")
  /** Pieces that make strings full of secrets, escapes, digits and separators next to each other. */
  const piece = fc.oneof(
    { weight: 3, arbitrary: fc.constantFrom(...secrets) },
    { weight: 3, arbitrary: fc.constantFrom("\n", "\"", "\\", "\t", "\u0000", "\u001f", "é", "\u2028", "😀", "\ud800", "/") },
    { weight: 3, arbitrary: fc.constantFrom(" ", "-", ".", "@", ":", "+", "(", ")", "_", ",", "[", "]", "=", "e", "u", "n") },
    { weight: 2, arbitrary: fc.stringMatching(/^\d{1,5}$/) },
    { weight: 2, arbitrary: fc.string({ unit: "binary", maxLength: 6 }) }
  )
  /** Values whose strings are full of secrets; object keys are plain (two masked keys would be one key). */
  const secretJson = fc.letrec((tie) => ({
    value: fc.oneof(
      { depthSize: "small", withCrossShrink: true },
      fc.string({ unit: piece, maxLength: 12 }),
      fc.double({ noNaN: true, noDefaultInfinity: true }),
      fc.integer({ min: -(2 ** 53) + 1, max: 2 ** 53 - 1 }),
      fc.constantFrom(4111111111111111, 4242424242424242, -5555555555554444, 0.4111111111111111, 4.111111111111111e-7),
      fc.boolean(),
      fc.constant(null),
      fc.array(tie("value"), { maxLength: 5 }),
      fc.dictionary(fc.string({ unit: "grapheme-ascii", maxLength: 6 }), tie("value"), { maxKeys: 5 })
    )
  })).value

  it("keeps JSON valid, numbers and shape unchanged, and is idempotent", () => {
    // any JSON, pretty-printed or not; and JSON with secrets, escapes and card-like numbers everywhere
    fc.assert(
      fc.property(fc.oneof(fc.jsonValue(), secretJson), fc.boolean(), (value, pretty) => {
        const text = pretty ? JSON.stringify(value, null, 2) : JSON.stringify(value)
        const redacted = redactText(text)
        const parsed: unknown = JSON.parse(redacted)
        assert.deepStrictEqual(shape(parsed), shape(JSON.parse(text)))
        assert.strictEqual(redactText(redacted), redacted)
      }),
      // REDACT_RUNS=30000 for a deeper search
      { numRuns: Number(process.env.REDACT_RUNS ?? 400) }
    )
  })

  it("is idempotent on any text, and masks every secret put between separators", () => {
    fc.assert(
      fc.property(fc.array(piece, { maxLength: 30 }), (pieces) => {
        // plain text: any mix of secrets, escapes and separators
        const text = pieces.join("")
        const redacted = redactText(text)
        assert.strictEqual(redactText(redacted), redacted)
      }),
      { numRuns: Number(process.env.REDACT_RUNS ?? 400) }
    )
    fc.assert(
      fc.property(fc.constantFrom(...SAMPLES), fc.constantFrom(" ", "\n", "\"", ", ", "\t", "; "), ([, sample, kind], separator) => {
        assert.strictEqual(redactText(`x${separator}${sample}${separator}y`), `x${separator}${placeholder(kind)}${separator}y`)
      })
    )
  })
})

/** The structure of a JSON value with strings and object keys left out: numbers, booleans and nulls in place. */
const shape = (value: unknown): unknown => {
  if (typeof value === "string") return "s"
  if (Array.isArray(value)) return value.map(shape)
  if (value !== null && typeof value === "object") return Object.values(value).map(shape)
  return value
}

describe("redactText: adversarial input", () => {
  const MB = 1_000_000
  /** Compared without a diff of a megabyte in the failure message. */
  const same = (actual: string, expected: string, what: string) =>
    assert.isTrue(actual === expected, `${what}: ${actual.length} characters, expected ${expected.length}`)

  it("reads a megabyte of digits, e-mail fragments or JWT fragments, and other near-misses, in linear time", () => {
    const QUARTER = MB / 4
    for (const [what, text] of [
      ["digits", "1234567890".repeat(MB / 10)],
      ["e-mail fragments", "a@a.".repeat(MB / 4)],
      ["JWT fragments", "eyJ.".repeat(MB / 4)],
      ["JWT-like segments", "eyJhbGciOi.".repeat(MB / 11)],
      ["backslashes", "\\".repeat(MB)],
      ["dotted digits", "1.".repeat(MB / 2)],
      ["underscores", "ab_".repeat(MB / 3)],
      // the near-misses that cost a check each: a quarter of a megabyte
      ["spaced digits", "1 ".repeat(QUARTER / 2)],
      ["dashed digits", "12-".repeat(QUARTER / 3)],
      ["card groups", "4111 ".repeat(QUARTER / 5)],
      ["plus signs", "+1 ".repeat(QUARTER / 3)],
      ["IBAN starts", "DE89 ".repeat(QUARTER / 5)],
      ["key prefixes", "sk-".repeat(QUARTER / 3)]
    ] as const) {
      same(redactText(text), text, what)
    }
    const headers = "-----BEGIN RSA PRIVATE KEY-----".repeat(MB / 31 / 4)
    same(redactText(headers), "[REDACTED:private_key]".repeat(MB / 31 / 4), "key headers")
  })
})

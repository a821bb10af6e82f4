/**
 * Masking of secrets and common personal data in raw call text, for workspaces whose content policy is `redacted`
 * (OWASP AISVS C13): applied to the raw request, response and context text of a capture before anything is stored
 * or derived from it.
 *
 * Each match is replaced by a typed placeholder, `[REDACTED:<kind>]`:
 *
 * - `private_key` — PEM private key blocks (`-----BEGIN … PRIVATE KEY-----` … `-----END … PRIVATE KEY-----`, also
 *   when the newlines inside are JSON-escaped, and a block whose end is missing)
 * - `jwt` — JSON Web Tokens (`eyJ…` header, payload and signature in base64url; a JWE's five parts)
 * - `aws_key` — AWS access key ids (`AKIA…`, `ASIA…`, …) and a 40-character secret access key that follows its name
 * - `api_key` — provider keys and tokens: OpenAI and Anthropic `sk-…` (`sk-proj-…`, `sk-ant-…`), GitHub
 *   `ghp_/gho_/ghu_/ghs_/ghr_…` and `github_pat_…`, Slack `xox?-…`/`xapp-…`, Google `AIza…`, Stripe
 *   `sk_/rk_ live|test …` and `whsec_…`, GitLab `glpat-…`, npm `npm_…`, Hugging Face `hf_…`, PyPI `pypi-…`, SendGrid
 *   `SG.….…`, Groq `gsk_…`, xAI `xai-…`, Perplexity `pplx-…`, Replicate `r8_…`, Shopify `shpat_…`, DigitalOcean
 *   `dop_v1_…`, LangSmith `lsv2_…`, NVIDIA `nvapi-…`, Tavily `tvly-…`, and this ledger's own `ldg_…`. Not any
 *   `prefix_<random>` token: provider ids (`call_…`, `toolu_…`, `msg_…`) look the same and must stay
 * - `bearer` — the credential after `Bearer ` or `Basic ` (the scheme word is kept)
 * - `password` — the password in a URL's `user:password@`
 * - `email` — e-mail addresses (the domain needs a dot and a letters-only top-level label)
 * - `phone` — international numbers (`+` and 8–15 digits, single spaces or dashes, a parenthesised group) and
 *   North American ones (`(555) 123-4567`, `555-123-4567`, `555.123.4567`, optionally `1-` first)
 * - `iban` — IBANs (country code, check digits, the country's length, mod-97 checksum), plain or in groups of four
 * - `ssn` — US social security numbers `123-45-6789` (no 000, 666 or 9xx area, 00 group or 0000 serial)
 * - `ip` — IPv4 addresses with valid octets (not a version string's `1.2.3.4.5`, not `10.0`)
 * - `card` — payment card numbers: 13–19 digits, plain or in groups split by single spaces or dashes, with a card
 *   network's prefix and length, and a valid Luhn check digit (so order and account numbers mostly stay)
 *
 * **JSON-safe.** A placeholder holds no `"`, `\` or control character, and no match starts or ends inside a JSON
 * escape sequence (`\n`, `\"`, `\\`, `\u00e9`): a token right after an escape is found and the escape kept. A
 * match never spans a `"`, so it stays inside one JSON string (or one stretch of plain text), and a bare JSON number
 * (one after `:`, `[` or `,` outside a string, or the whole text) is never taken for a card number. So when the
 * input is JSON the output is JSON with the same shape: `redactText` can be given raw JSON text as it is, and
 * `redactJsonText` is the same function under the name that says so. Server-sent-event text (`data: {…}` lines)
 * is handled the same way.
 *
 * **Idempotent.** Placeholders match no pattern, and the patterns read a word boundary on both sides, so
 * redacting twice gives what redacting once gives. Where a placeholder touches a token character (tokens of two
 * kinds run together, as in `Basic dXNlcjpwYXNz+1 415 555 2671`), the passes run again until nothing changes.
 *
 * **Cost.** A dozen regular-expression passes, most skipped when a cheap test shows they cannot match (no `@`, no
 * `eyJ`, no `PRIVATE KEY`, no `+`, no `://`), each linear in the text: searches are anchored on a rare character
 * where they can be (the `@` of an e-mail, the `_`/`-` of a key), quantifiers are bounded or over classes that
 * cannot overlap, and validation (Luhn, mod-97, randomness, base64) runs in code on candidates only. About
 * 140 MB/s on a 20 KB chat-completion request; a megabyte of adversarial input takes milliseconds.
 *
 * Limitations: IPv6 addresses, names and postal addresses are not recognised; an e-mail address needs a
 * dotted domain (`user@localhost` stays); a North American number needs separators (`5551234567` stays, as it
 * cannot be told from other numbers); keys are recognised by known prefixes only (a bare 40-character secret
 * stays unless named, like `aws_secret_access_key=`); digits joined by `.` to other digits (`1.4111…`) are never a
 * card; a text that is only a number is taken for a JSON number and stays; an escaped `\/` ends a secret.
 */

export type RedactionKind =
  | "private_key"
  | "jwt"
  | "aws_key"
  | "api_key"
  | "bearer"
  | "password"
  | "email"
  | "phone"
  | "iban"
  | "ssn"
  | "ip"
  | "card"

const mask = (kind: RedactionKind): string => `[REDACTED:${kind}]`

/**
 * The left boundary of a token, aware of JSON escapes: the previous character is not a word character nor a
 * backslash; or the position follows a whole escape (`\n`, `\t`, `\b`, `\f`, `\r`, `\uXXXX`, which read as a
 * non-word character); or it follows an even run of backslashes (escaped backslashes, up to 8 pairs). A position
 * right after a single backslash (inside an escape such as `\n`) or inside `\uXXXX` is never a start.
 */
const boundary = (alsoNot = "", word = "A-Za-z0-9_") =>
  String.raw`(?:(?<![${word}${alsoNot}\\])|(?<=\\[bfnrt]|\\u[0-9A-Fa-f]{4}|(?<!\\)(?:\\\\){1,8}))`
const LB = boundary()
/** The right boundary: no word character follows. */
const RB = String.raw`(?![A-Za-z0-9_])`

// ---------------------------------------------------------------------------------------------------------------
// character tests

const isDigitCode = (code: number) => code >= 48 && code <= 57
const isUpperCode = (code: number) => code >= 65 && code <= 90
const isLowerCode = (code: number) => code >= 97 && code <= 122
/** A word character, as the boundaries read it (NaN, past the end of the text, is not one). */
const isWordCode = (code: number) => isDigitCode(code) || isUpperCode(code) || isLowerCode(code) || code === 95

/** Counts of digits, upper and lower case letters in `text`. */
const charMix = (text: string) => {
  let digits = 0
  let upper = 0
  let lower = 0
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i)
    if (isDigitCode(code)) digits++
    else if (isUpperCode(code)) upper++
    else if (isLowerCode(code)) lower++
  }
  return { digits, upper, lower }
}

/**
 * A random-looking key body: a letter and a digit, or two of each case in 16 characters or more (identifiers and
 * prose have no digits and mostly one case).
 */
const looksRandom = (body: string) => {
  const { digits, lower, upper } = charMix(body)
  return (digits > 0 && lower + upper > 0) || (lower >= 2 && upper >= 2 && body.length >= 16)
}

/** Whether the character at `index` is escaped, i.e. follows an odd run of backslashes. */
const isEscaped = (text: string, index: number) => {
  let backslashes = 0
  for (let i = index - 1; i >= 0 && text.charCodeAt(i) === 92; i--) backslashes++
  return backslashes % 2 === 1
}

// ---------------------------------------------------------------------------------------------------------------
// private keys

const PEM_LABEL = String.raw`[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?`
/** What a key block holds: `Proc-Type:`/`DEK-Info:` header lines, base64 lines, whitespace or escaped newlines. */
const PEM_BODY = String.raw`(?:(?:Proc-Type|DEK-Info|Comment):[ A-Za-z0-9,.-]*|[A-Za-z0-9+/=\s]|\\[nrt/])`
/**
 * The header, then the body up to the footer — or, when the footer is missing (a truncated paste), as far as the
 * body goes. Each backslash of the body is read with the character it escapes, so the match ends outside escapes.
 */
const PEM = new RegExp(
  String.raw`-----BEGIN ${PEM_LABEL}-----${PEM_BODY}*?(?:-----END ${PEM_LABEL}-----|(?!${PEM_BODY}))`,
  "g"
)

const redactPrivateKeys = (text: string) =>
  text.includes("PRIVATE KEY") ? text.replace(PEM, mask("private_key")) : text

// ---------------------------------------------------------------------------------------------------------------
// JSON Web Tokens

const JWT = new RegExp(
  String.raw`${LB}eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*(?:\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+)?`,
  "g"
)

const redactJwts = (text: string) => (text.includes("eyJ") ? text.replace(JWT, mask("jwt")) : text)

// ---------------------------------------------------------------------------------------------------------------
// provider keys and tokens

/**
 * Keys with a known lower-case prefix and `_` or `-` (`sk-…`, `ghp_…`, `ldg_…`, `xoxb-…`). The search is anchored
 * on the separator, which the engine finds fast, with the prefix and its left boundary in a lookbehind; the body is
 * read up to 64 characters (enough to judge it), and a masked key is extended over the rest of its run.
 *
 * Only known prefixes: the ids that model providers and tools put in every call have the same shape as keys
 * (`call_…`, `toolu_…`, `msg_…`, `resp_…`, Stripe's `pi_…`) and must stay, as decisions link tool calls by them.
 */
const PREFIXED = new RegExp(
  String.raw`(?:(?<=${LB}(?<underscored>gh[pousr]|github|sk|rk|whsec|ldg|npm|hf|gsk|r8|shp(?:at|ss|ca|pa)|dop|lsv2))_` +
    String.raw`|(?<=${LB}(?<dashed>sk|xox[abposr]|xapp|glpat|pypi|xai|pplx|nvapi|tvly))-)` +
    String.raw`(?<body>[A-Za-z0-9_-]{10,64})`,
  "g"
)

/** Whether `prefix` + `_` + `body` is a key: long enough for its kind (and random-looking where words could be). */
const isUnderscoredKey = (prefix: string, body: string) => {
  switch (prefix) {
    case "ghp":
    case "gho":
    case "ghu":
    case "ghs":
    case "ghr":
    case "hf":
      return body.length >= 30
    case "github":
      return body.startsWith("pat_") && body.length >= 34
    case "sk":
    case "rk":
      return (body.startsWith("live_") || body.startsWith("test_")) && body.length >= 21
    case "ldg":
      return body.length >= 16
    case "whsec":
      return body.length >= 24
    case "npm":
      return body.length >= 36
    case "dop":
      return body.startsWith("v1_") && body.length >= 40
    case "lsv2":
      return /^(?:pt|sk)_/.test(body) && body.length >= 20
    default: // Groq gsk_, Replicate r8_, Shopify shpat_ and the like
      return body.length >= 20 && looksRandom(body)
  }
}

/** Whether `prefix` + `-` + `body` is a key (OpenAI and Anthropic `sk-` bodies must look random). */
const isDashedKey = (prefix: string, body: string) => {
  switch (prefix) {
    case "sk":
      return body.length >= 20 && looksRandom(body)
    case "glpat":
      return body.length >= 20
    case "pypi":
      return body.length >= 50
    case "xai":
    case "pplx":
    case "nvapi":
    case "tvly":
      return body.length >= 20 && looksRandom(body)
    default: // Slack
      return true
  }
}

const isTokenCode = (code: number) =>
  isDigitCode(code) || isUpperCode(code) || isLowerCode(code) || code === 95 /* _ */ || code === 45 /* - */

const redactPrefixedKeys = (text: string) => {
  PREFIXED.lastIndex = 0
  let out = ""
  let last = 0
  for (let found = PREFIXED.exec(text); found !== null; found = PREFIXED.exec(text)) {
    const { body, dashed, underscored } = found.groups as { body: string; dashed?: string; underscored?: string }
    const key = underscored !== undefined ? isUnderscoredKey(underscored, body) : isDashedKey(dashed!, body)
    if (!key) {
      // a token can only start again after a `-` of this body (`_` and letters are word characters)
      const dash = body.indexOf("-")
      PREFIXED.lastIndex = dash < 0 ? found.index + 1 + body.length : found.index + 1 + dash
      continue
    }
    const start = found.index - (underscored ?? dashed!).length
    let end = found.index + found[0].length
    while (end < text.length && isTokenCode(text.charCodeAt(end))) end++
    out += text.slice(last, start) + mask("api_key")
    last = end
    PREFIXED.lastIndex = end
  }
  return last === 0 ? text : out + text.slice(last)
}

/** Keys that start with upper case: AWS access key ids, Google `AIza…`, SendGrid `SG.….…`. */
const UPPER_KEYS = new RegExp(
  String.raw`${LB}(?:(?<aws>A(?:KIA|SIA|BIA|CCA|GPA|IDA|IPA|NPA|NVA|PKA|ROA|SCA)[A-Z0-9]{16}${RB})` +
    String.raw`|AIza[A-Za-z0-9_-]{35,}|SG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,})`,
  "g"
)

const redactUpperKeys = (text: string) =>
  text.replace(UPPER_KEYS, (...args: Array<unknown>) =>
    (args[args.length - 1] as { aws?: string }).aws !== undefined ? mask("aws_key") : mask("api_key"))

const redactKeys = (text: string) => redactUpperKeys(redactPrefixedKeys(text))

/** An AWS secret access key after its name: `aws_secret_access_key = …`, `"SecretAccessKey": "…"`. */
const AWS_SECRET =
  /((?:[Aa][Ww][Ss]_?)?[Ss][Ee][Cc][Rr][Ee][Tt]_?[Aa][Cc][Cc][Ee][Ss][Ss]_?[Kk][Ee][Yy](?:\\?["'])?[ \t]*[:=][ \t]*(?:\\?["'])?)[A-Za-z0-9/+]{40}(?![A-Za-z0-9_])/g

const redactAwsSecrets = (text: string) =>
  /secret_?access_?key/i.test(text) ? text.replace(AWS_SECRET, `$1${mask("aws_key")}`) : text

// ---------------------------------------------------------------------------------------------------------------
// credentials in headers and URLs

/** `Bearer <token>` and `Basic <base64>`: the scheme is kept, the credential masked. */
const AUTH = new RegExp(
  String.raw`${LB}(?:([Bb]earer)([ \t]+)([A-Za-z0-9._~+/=-]{8,})|([Bb]asic)([ \t]+)([A-Za-z0-9+/]{6,}={0,2}))`,
  "g"
)

/** `Basic` credentials are base64 of printable `user:password`. */
const decodesToUserPassword = (value: string) => {
  try {
    const decoded = atob(value)
    return decoded.includes(":") && /^[\x20-\x7e]+$/.test(decoded)
  } catch {
    return false
  }
}

const redactAuthHeaders = (text: string) =>
  text.replace(
    AUTH,
    (match: string, bearer?: string, bearerSpace?: string, token?: string, basic?: string, basicSpace?: string, credential?: string) => {
      if (bearer !== undefined) {
        const secret = token!.length >= 12 && (/\d/.test(token!) || looksRandom(token!))
        return secret ? `${bearer}${bearerSpace}${mask("bearer")}` : match
      }
      return decodesToUserPassword(credential!) ? `${basic}${basicSpace}${mask("bearer")}` : match
    }
  )

/** `scheme://user:password@` — the password is masked (a placeholder is never taken for either). */
const URL_PASSWORD = /([A-Za-z][A-Za-z0-9+.-]{0,20}:\/\/[^\s/:@"\\[\]]{1,128}:)[^\s/@"\\[\]]{1,256}@/g

const redactUrlPasswords = (text: string) =>
  text.includes("://") ? text.replace(URL_PASSWORD, `$1${mask("password")}@`) : text

// ---------------------------------------------------------------------------------------------------------------
// e-mail addresses

/** The domain part, from the `@`: dotted labels and a letters-only top-level label. */
const EMAIL_DOMAIN = /@(?:[A-Za-z0-9-]{1,63}\.){1,8}[A-Za-z]{2,24}(?![A-Za-z0-9_-])/g

const isLocalPartCode = (code: number) =>
  isDigitCode(code) || isUpperCode(code) || isLowerCode(code) || code === 46 /* . */ || code === 95 /* _ */ ||
  code === 37 /* % */ || code === 43 /* + */ || code === 45 /* - */

/**
 * Finds each domain with a regular expression, then walks back over the local part (at most up to the previous
 * replacement, so the walks together read the text once). When the local part starts right after a backslash, the
 * characters that belong to the escape (`n` of `\n`, `u00e9` of `\u00e9`) are left out.
 */
const redactEmails = (text: string) => {
  if (!text.includes("@")) return text
  EMAIL_DOMAIN.lastIndex = 0
  let out = ""
  let last = 0
  for (let found = EMAIL_DOMAIN.exec(text); found !== null; found = EMAIL_DOMAIN.exec(text)) {
    const at = found.index
    let start = at
    while (start > last && isLocalPartCode(text.charCodeAt(start - 1))) start--
    if (start > 0 && text.charCodeAt(start - 1) === 92 && isEscaped(text, start)) {
      start += text.charCodeAt(start) === 117 /* u */ ? 5 : 1
    }
    if (start >= at) continue
    out += text.slice(last, start) + mask("email")
    last = at + found[0].length
  }
  return last === 0 ? text : out + text.slice(last)
}

// ---------------------------------------------------------------------------------------------------------------
// international phone numbers

/** `+`, a country code, then groups split by one space or dash, or a parenthesised group; `+` follows no letter. */
const INTL_PHONE = new RegExp(
  String.raw`${boundary("+", "A-Za-z_")}\+\d{1,15}(?:(?:[ -]|[ ]?\(\d{1,5}\)[ ]?)\d{1,12}){0,6}${RB}`,
  "g"
)

const countDigits = (text: string) => {
  let digits = 0
  for (let i = 0; i < text.length; i++) if (isDigitCode(text.charCodeAt(i))) digits++
  return digits
}

/**
 * A number of 8–15 digits is masked; when more groups follow (another number, a card), the longest run of whole
 * groups from the start that stays within 15 digits is, and the rest is left to the later passes.
 */
const redactIntlPhones = (text: string) =>
  text.includes("+")
    ? text.replace(INTL_PHONE, (match: string) => {
      let digits = 0
      let end = 0
      for (let i = 1; i < match.length; i++) {
        if (!isDigitCode(match.charCodeAt(i))) continue
        if (++digits > 15) break
        if (!isDigitCode(match.charCodeAt(i + 1))) end = i + 1
      }
      return end > 0 && countDigits(match.slice(0, end)) >= 8 ? mask("phone") + match.slice(end) : match
    })
    : text

// ---------------------------------------------------------------------------------------------------------------
// IBANs

/** Length of the IBAN of each country that has one (SWIFT IBAN registry). */
const IBAN_LENGTH: Readonly<Record<string, number>> = {
  AD: 24, AE: 23, AL: 28, AT: 20, AZ: 28, BA: 20, BE: 16, BG: 22, BH: 22, BI: 27, BR: 29, BY: 28, CH: 21, CR: 22,
  CY: 28, CZ: 24, DE: 22, DJ: 27, DK: 18, DO: 28, EE: 20, EG: 29, ES: 24, FI: 18, FK: 18, FO: 18, FR: 27, GB: 22,
  GE: 22, GI: 23, GL: 18, GR: 27, GT: 28, HN: 28, HR: 21, HU: 28, IE: 22, IL: 23, IQ: 23, IS: 26, IT: 27, JO: 30,
  KW: 30, KZ: 20, LB: 28, LC: 32, LI: 21, LT: 20, LU: 20, LV: 21, LY: 25, MC: 27, MD: 24, ME: 22, MK: 19, MN: 20,
  MR: 27, MT: 31, MU: 30, NI: 28, NL: 18, NO: 15, OM: 23, PK: 24, PL: 28, PS: 29, PT: 25, QA: 29, RO: 24, RS: 22,
  RU: 33, SA: 24, SC: 31, SD: 18, SE: 24, SI: 19, SK: 24, SM: 27, SO: 23, ST: 25, SV: 28, TL: 23, TN: 24, TR: 26,
  UA: 29, VA: 22, VG: 24, XK: 20, YE: 30
}

const IBAN = new RegExp(String.raw`${LB}[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}`, "g")

/** The ISO 13616 check: move the first four characters to the end, read letters as 10–35, the number mod 97 is 1. */
const ibanChecksumOk = (iban: string) => {
  const rearranged = iban.slice(4) + iban.slice(0, 4)
  let remainder = 0
  for (let i = 0; i < rearranged.length; i++) {
    const code = rearranged.charCodeAt(i)
    remainder = isDigitCode(code)
      ? (remainder * 10 + (code - 48)) % 97
      : (remainder * 100 + (code - 55)) % 97
  }
  return remainder === 1
}

/**
 * Each candidate is cut to its country's length (a longer run of groups may follow it); the IBAN must end at the
 * end of a group. When it fails, the search resumes one character later, so an IBAN that starts inside a rejected
 * candidate is still found.
 */
const redactIbans = (text: string) => {
  IBAN.lastIndex = 0
  let out = ""
  let last = 0
  for (let found = IBAN.exec(text); found !== null; found = IBAN.exec(text)) {
    const candidate = found[0]
    const length = IBAN_LENGTH[candidate.slice(0, 2)]
    let end = -1
    if (length !== undefined) {
      let compact = ""
      let i = 0
      for (; i < candidate.length && compact.length < length; i++) {
        if (candidate.charCodeAt(i) !== 32) compact += candidate[i]
      }
      const next = i === candidate.length ? text.charCodeAt(found.index + i) : candidate.charCodeAt(i)
      const atGroupEnd = compact.length === length && (next === 32 || !isWordCode(next))
      if (atGroupEnd && ibanChecksumOk(compact)) end = found.index + i
    }
    if (end < 0) {
      IBAN.lastIndex = found.index + 1
      continue
    }
    out += text.slice(last, found.index) + mask("iban")
    last = end
    IBAN.lastIndex = end
  }
  return last === 0 ? text : out + text.slice(last)
}

// ---------------------------------------------------------------------------------------------------------------
// numbers: SSNs, North American phone numbers, IPv4 addresses, card numbers

const SSN = String.raw`(?<ssn>(?<!\d-)(?!000|666|9\d\d)\d{3}-(?!00)\d{2}-(?!0000)\d{4}(?![A-Za-z0-9_]|-\d))`
const US_PHONE = String.raw`(?<phone>(?<!\d-)(?:1-)?\d{3}-\d{3}-\d{4}(?![A-Za-z0-9_]|-\d))`
/**
 * SSNs and dashed phone numbers inside a run of digits that held no card; neither is part of a longer dashed number
 * (`555-123-4567-8`), on either side.
 */
const NUMBERS_IN_RUN = new RegExp(`${LB}(?:${SSN}|${US_PHONE})`, "g")

/**
 * Numbers: a dotted one (an IPv4 address, or a phone number `555.123.4567`), or a run of 11 or more digits,
 * spaces and dashes (cards, SSNs, dashed phone numbers), checked in code. Neither is part of a longer dotted
 * number: a run never follows or precedes `.` and a digit (`1.4111…`), as a dotted number never does.
 */
const NUMBERS = new RegExp(
  String.raw`${LB}(?:(?<dotted>(?<!\.)\d{1,3}(?:\.\d{1,4}){2,3}(?![A-Za-z0-9_]|\.\d))` +
    String.raw`|(?<run>(?<!\d\.)\d[\d -]{9,}\d(?![A-Za-z0-9_]|\.\d)))`,
  "g"
)
/** `(555) 123-4567`: the `(` may follow a digit (a number before it), not a letter. */
const PAREN_PHONE = new RegExp(
  String.raw`${boundary("", "A-Za-z_")}\(\d{3}\) ?\d{3}[-. ]\d{4}(?![A-Za-z0-9_]|[-.]\d)`,
  "g"
)

const isOctet = (part: string) => part.length > 0 && part.length <= 3 && (part.length === 1 || part[0] !== "0") &&
  Number(part) <= 255

const redactDotted = (dotted: string) => {
  const parts = dotted.split(".")
  if (parts.length === 4) return parts.every(isOctet) ? mask("ip") : dotted
  return parts.length === 3 && parts[0]!.length === 3 && parts[1]!.length === 3 && parts[2]!.length === 4
    ? mask("phone")
    : dotted
}

/** A card network's prefix and length (Visa, Mastercard, Amex, Diners, JCB, Discover, UnionPay, Maestro). */
const cardNetworkOk = (digits: string) => {
  const n = digits.length
  const p2 = Number(digits.slice(0, 2))
  const p3 = Number(digits.slice(0, 3))
  const p4 = Number(digits.slice(0, 4))
  if (digits[0] === "4") return n === 13 || n === 16 || n === 19
  if ((p2 >= 51 && p2 <= 55) || (p4 >= 2221 && p4 <= 2720)) return n === 16
  if (p2 === 34 || p2 === 37) return n === 15
  if ((p3 >= 300 && p3 <= 305) || p2 === 36 || p2 === 38 || p2 === 39) return n >= 14 && n <= 19
  if (p4 >= 3528 && p4 <= 3589) return n >= 16 && n <= 19
  if (p2 === 50 || (p2 >= 56 && p2 <= 69)) return n >= 13 && n <= 19
  return false
}

const luhnOk = (digits: string) => {
  let sum = 0
  let double = false
  for (let i = digits.length - 1; i >= 0; i--) {
    let digit = digits.charCodeAt(i) - 48
    if (double) {
      digit *= 2
      if (digit > 9) digit -= 9
    }
    sum += digit
    double = !double
  }
  return sum % 10 === 0
}

const isJsonSpaceCode = (code: number) => code === 32 || code === 9 || code === 10 || code === 13

/**
 * Whether the digits at [start, end) are a bare JSON number (or part of one) rather than text: after `:` that ends
 * a key, after `[`, after `,` that follows a value, after the `.` of a fraction, or the whole text. A number in a
 * string can look the same (`"[4111…"`) and then stays; the reverse — masking a bare number — would break the JSON.
 */
const isBareJsonNumber = (text: string, start: number, end: number) => {
  let i = start - 1
  const sign = text.charCodeAt(i)
  if (sign === 45 /* - */ || sign === 43 /* + */) i--
  // the fraction or the exponent of a number: `0.4111…`, `1e-4111…`
  const mark = text.charCodeAt(i)
  if ((mark === 46 /* . */ || mark === 101 /* e */ || mark === 69 /* E */) && isDigitCode(text.charCodeAt(i - 1))) return true
  while (i >= 0 && isJsonSpaceCode(text.charCodeAt(i))) i--
  if (i < 0) return /^(?:\.\d+)?(?:[eE][+-]?\d+)?\s*$/.test(text.slice(end, end + 64)) && text.length - end <= 64
  const code = text.charCodeAt(i)
  if (code === 91 /* [ */) return true
  if (code !== 58 /* : */ && code !== 44 /* , */) return false
  let j = i - 1
  while (j >= 0 && isJsonSpaceCode(text.charCodeAt(j))) j--
  const before = text.charCodeAt(j)
  if (before === 34 /* " */) return !isEscaped(text, j)
  if (code === 58) return false
  return isDigitCode(before) || before === 93 /* ] */ || before === 125 /* } */ || before === 101 /* e */ ||
    before === 108 /* l */
}

/**
 * The card numbers in a run of digit groups: windows of whole groups, one separator throughout, 13–19 digits,
 * groups of 3–8 digits when split, a network's prefix and length and the Luhn check; the longest window from the
 * earliest group wins. What is left is searched for SSNs and phone numbers.
 */
const redactDigitRun = (run: string, text: string, offset: number): string => {
  if (run.length < 13) return redactNumbersInRun(run)
  const starts: Array<number> = []
  const ends: Array<number> = []
  let groupStart = -1
  for (let i = 0; i <= run.length; i++) {
    const digit = i < run.length && isDigitCode(run.charCodeAt(i))
    if (digit && groupStart < 0) groupStart = i
    if (!digit && groupStart >= 0) {
      starts.push(groupStart)
      ends.push(i)
      groupStart = -1
    }
  }
  let out = ""
  let last = 0
  let g = 0
  while (g < starts.length) {
    let best = -1
    let digits = ""
    for (let h = g; h < starts.length; h++) {
      if (h > g) {
        const gap = starts[h]! - ends[h - 1]!
        if (gap !== 1 || run[starts[h]! - 1] !== run[starts[g + 1]! - 1]) break
      }
      const size = ends[h]! - starts[h]!
      digits += run.slice(starts[h]!, ends[h]!)
      if (digits.length > 19) break
      if (h > g && (size < 3 || size > 8 || ends[g]! - starts[g]! < 3 || ends[g]! - starts[g]! > 8)) break
      if (digits.length >= 13 && cardNetworkOk(digits) && luhnOk(digits)) {
        if (h > g || !isBareJsonNumber(text, offset + starts[g]!, offset + ends[g]!)) best = h
      }
    }
    if (best < 0) {
      g++
      continue
    }
    out += redactNumbersInRun(run.slice(last, starts[g]!)) + mask("card")
    last = ends[best]!
    g = best + 1
  }
  return last === 0 ? redactNumbersInRun(run) : out + redactNumbersInRun(run.slice(last))
}

const redactNumbersInRun = (run: string) =>
  run.length < 11 || !run.includes("-") ? run : run.replace(NUMBERS_IN_RUN, (...args: Array<unknown>) =>
    (args[args.length - 1] as { ssn?: string }).ssn !== undefined ? mask("ssn") : mask("phone"))

const redactNumbers = (text: string) => {
  let out = text.replace(NUMBERS, (match: string, ...rest: Array<unknown>) => {
    const groups = rest[rest.length - 1] as { dotted?: string }
    return groups.dotted !== undefined
      ? redactDotted(match)
      : redactDigitRun(match, rest[rest.length - 2] as string, rest[rest.length - 3] as number)
  })
  if (out.includes("(")) out = out.replace(PAREN_PHONE, mask("phone"))
  return out
}

// ---------------------------------------------------------------------------------------------------------------

const runPasses = (text: string): string => {
  let out = redactPrivateKeys(text)
  out = redactJwts(out)
  out = redactUrlPasswords(out)
  out = redactKeys(out)
  out = redactAwsSecrets(out)
  out = redactAuthHeaders(out)
  out = redactEmails(out)
  out = redactIbans(out)
  // after the passes whose tokens can end in a letter, as a letter before `+` keeps a phone number from matching
  out = redactIntlPhones(out)
  out = redactNumbers(out)
  return out
}

/** A character a token can end with, or go on with: a word character or one of `- . + / % ~`. */
const isTokenGlueCode = (code: number) =>
  isWordCode(code) || code === 45 || code === 46 || code === 43 || code === 47 || code === 37 || code === 126

/** A character a token can start with and that its left boundary reads: a word character, `+` or `(`. */
const isTokenStartCode = (code: number) => isWordCode(code) || code === 43 || code === 40

/**
 * Whether a placeholder comes right after a character a token can end with (not counting the letter of an escape
 * such as `\n`), or right before one a token can start with. Only then can a placeholder that a later pass put in
 * let an earlier pass find a token it did not find before — as in `Basic dXNlcjpwYXNz+1 415 555 2671`, where the
 * phone number hid the end of the credential.
 */
const placeholderTouchesToken = (text: string) => {
  let at = text.indexOf("[REDACTED:")
  while (at >= 0) {
    const before = text.charCodeAt(at - 1)
    if (isTokenGlueCode(before) && !(isLowerCode(before) && isEscaped(text, at - 1))) return true
    const end = text.indexOf("]", at) + 1
    if (isTokenStartCode(text.charCodeAt(end))) return true
    at = text.indexOf("[REDACTED:", end)
  }
  return false
}

/**
 * `text` with secrets and personal data replaced by `[REDACTED:<kind>]`. Safe on JSON text (see the top of this
 * file): valid JSON stays valid JSON. Idempotent: the passes run again (rarely: at most three more times) while a
 * new placeholder touches a token character.
 */
export const redactText = (text: string): string => {
  let previous = text
  let out = runPasses(text)
  for (let round = 0; round < 3 && out !== previous && placeholderTouchesToken(out); round++) {
    previous = out
    out = runPasses(out)
  }
  return out
}

/** {@link redactText}, named for raw JSON text (request and response bodies): the output is JSON when the input is. */
export const redactJsonText: (text: string) => string = redactText

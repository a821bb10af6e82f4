/**
 * What a careless or hostile client sends, as fast-check arbitraries: path segments and query strings made of any
 * bytes (control characters, NUL, invalid UTF-8, broken percent escapes), header values, and JSON bodies that are
 * a valid request with parts replaced by anything. Shared by the fuzz suites of every surface, with a raw HTTP
 * client that sends a path exactly as given (fetch would normalise it).
 */
import fc from "fast-check"
import * as Http from "node:http"

/** Runs per property: enough to meet the odd cases (each run is one or two HTTP calls). */
export const RUNS = Number(process.env.FUZZ_RUNS ?? 150)

/**
 * fast-check's options for properties over HTTP: no shrinking after a failure (each rerun can wait for a timeout;
 * the failure's message already shows the input), and `FUZZ_SEED` to replay a run.
 */
export const checkOptions = (numRuns = RUNS): fc.Parameters<unknown> => ({
  numRuns,
  endOnFailure: true,
  ...(process.env.FUZZ_SEED === undefined ? {} : { seed: Number(process.env.FUZZ_SEED) })
})

const percentEncoded = (bytes: Uint8Array) => Array.from(bytes, (byte) => `%${byte.toString(16).padStart(2, "0")}`).join("")

/** Escapes that do not decode: a lone `%`, non-hex digits, truncated or overlong UTF-8. */
const brokenEscape = fc.constantFrom("%", "%z", "%zz", "%4", "%e2%82", "%c0%af", "%ed%a0%80", "%ff%fe", "%00", "%0a")

/** A path segment or query value: valid text, any bytes percent-encoded, broken escapes, or some of each. */
export const anyComponent: fc.Arbitrary<string> = fc.oneof(
  fc.string({ unit: "grapheme", maxLength: 40 }).map(encodeURIComponent),
  fc.uint8Array({ maxLength: 40 }).map(percentEncoded),
  fc.string({ unit: fc.integer({ min: 0, max: 0x1f }).map((code) => String.fromCharCode(code)), minLength: 1, maxLength: 4 })
    .map(encodeURIComponent),
  fc.array(fc.oneof(brokenEscape, fc.string({ unit: "grapheme-ascii", maxLength: 6 }).map(encodeURIComponent)), { minLength: 1, maxLength: 4 })
    .map((parts) => parts.join("")),
  fc.string({ unit: "grapheme-ascii", minLength: 200, maxLength: 3000 }).map(encodeURIComponent)
)

/** A value that is one of `valid` (so the deeper code runs), the same with a character changed, or anything. */
export const nearly = (valid: ReadonlyArray<string>): fc.Arbitrary<string> =>
  fc.oneof(
    fc.constantFrom(...valid).map(encodeURIComponent),
    fc.tuple(fc.constantFrom(...valid), fc.nat(), anyComponent).map(([value, at, insert]) =>
      encodeURIComponent(value.slice(0, at % (value.length + 1))) + insert + encodeURIComponent(value.slice((at % (value.length + 1)) + 1))
    ),
    anyComponent
  )

/** A query string (without `?`) of parameters from `names` or any, any values, repeats and stray separators. */
export const anyQuery = (names: ReadonlyArray<string>, values: fc.Arbitrary<string> = anyComponent): fc.Arbitrary<string> =>
  fc.array(
    fc.oneof(
      fc.tuple(fc.oneof(fc.constantFrom(...names), anyComponent), values).map(([name, value]) => `${name}=${value}`),
      fc.constantFrom("", "=", "&", "a", "=x", "%", "a=%"),
      fc.constantFrom(...names)
    ),
    { maxLength: 6 }
  ).map((pairs) => pairs.join("&"))

/** A header value Node's client will send: visible ASCII, spaces and tabs, and bytes above 0x7f (as latin1). */
export const anyHeaderValue: fc.Arbitrary<string> = fc.oneof(
  fc.string({ unit: "grapheme-ascii", maxLength: 60 }),
  fc.string({ unit: fc.integer({ min: 0x80, max: 0xff }).map((code) => String.fromCharCode(code)), maxLength: 20 }),
  fc.string({ unit: "grapheme-ascii", minLength: 300, maxLength: 9000 }),
  fc.constantFrom("", " ", "\t", "Bearer", "Bearer ", "null", "{}", "undefined")
)

/** Any JSON value, nested a few levels. */
export const anyJson: fc.Arbitrary<unknown> = fc.jsonValue({ maxDepth: 4 })

/**
 * A body that starts from a valid request and has some of its fields (at any depth) replaced by any JSON value,
 * removed, or joined by new ones — the way a client gets a request almost right.
 */
export const mutated = (valid: Record<string, unknown>, values: fc.Arbitrary<unknown> = anyJson): fc.Arbitrary<unknown> => {
  const paths: Array<Array<string | number>> = []
  const walk = (value: unknown, path: Array<string | number>) => {
    paths.push(path)
    if (Array.isArray(value)) value.forEach((item, index) => walk(item, [...path, index]))
    else if (value !== null && typeof value === "object") for (const [key, item] of Object.entries(value)) walk(item, [...path, key])
  }
  walk(valid, [])
  const edit = fc.tuple(fc.constantFrom(...paths.slice(1)), fc.oneof(values, fc.constant(undefined)), fc.option(fc.string({ maxLength: 12 })))
  return fc.array(edit, { minLength: 1, maxLength: 3 }).map((edits) => {
    const body = structuredClone(valid) as any
    for (const [path, value, extraKey] of edits) {
      let parent = body
      for (const step of path.slice(0, -1)) {
        parent = parent?.[step]
        if (parent === null || typeof parent !== "object") break
      }
      if (parent === null || typeof parent !== "object") continue
      const last = path.at(-1)!
      if (extraKey !== null && !Array.isArray(parent)) parent[extraKey] = value ?? null
      else if (value === undefined) Array.isArray(parent) ? parent.splice(Number(last), 1) : delete parent[last]
      else parent[last] = value
    }
    return body
  })
}

export interface RawAnswer {
  readonly status: number
  readonly headers: Http.IncomingHttpHeaders
  readonly text: string
}

/** How long a fuzzed request may take: a hang is a finding too. */
const ANSWER_TIMEOUT_MS = 10_000

/** One HTTP request with the path sent byte for byte as given; fails when no whole answer comes within 10 s. */
export const rawRequest = (
  baseUrl: string,
  options: { readonly method?: string; readonly path: string; readonly headers?: Http.OutgoingHttpHeaders; readonly body?: string | Buffer }
): Promise<RawAnswer> =>
  new Promise((resolve, reject) => {
    const url = new URL(baseUrl)
    const req = Http.request({
      host: url.hostname,
      port: url.port,
      method: options.method ?? "GET",
      path: options.path,
      headers: options.headers,
      agent: false
    }, (res) => {
      const chunks: Array<Buffer> = []
      res.on("data", (chunk: Buffer) => chunks.push(chunk))
      res.on("end", () => resolve({ status: res.statusCode!, headers: res.headers, text: Buffer.concat(chunks).toString("utf8") }))
      res.on("error", reject)
    })
    req.on("error", reject)
    req.setTimeout(ANSWER_TIMEOUT_MS, () => {
      req.destroy()
      reject(new Error(`no answer within ${ANSWER_TIMEOUT_MS} ms`))
    })
    req.end(options.body)
  })

/** The answer's body as JSON, or undefined when it is not JSON. */
export const jsonOf = (answer: RawAnswer): any => {
  try {
    return JSON.parse(answer.text)
  } catch {
    return undefined
  }
}

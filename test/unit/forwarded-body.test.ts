/**
 * Pass-through adapters forward the caller's body with only the model edited (and a stream's usage option added):
 * from the caller's own bytes when they are valid UTF-8, spliced around the edits, and otherwise from its text.
 * Either way the provider receives the same JSON the text edits describe, whatever characters come before or after.
 */
import { assert, describe, it } from "@effect/vitest"
import { editedBody, forwardableBytes, modelEdit, withModel } from "../../src/providers/body.ts"
import type { ChatRequest } from "../../src/providers/chatCompletions.ts"
import { adapterFor } from "../../src/providers/index.ts"
import type { CallContext } from "../../src/providers/types.ts"

const ctx = (text: string, overrides: Partial<CallContext> = {}): CallContext => ({
  model: "gpt-4o-mini",
  apiKey: "sk-caller",
  baseUrl: "https://provider.example/v1",
  stream: false,
  includeUsage: false,
  requestText: text,
  requestBytes: forwardableBytes(Buffer.from(text)),
  ...overrides
})

const decoded = (body: string | Buffer) => (typeof body === "string" ? body : body.toString("utf8"))

describe("forwarded body", () => {
  const text = `{"messages":[{"role":"user","content":"❯ vitest → 2 failed ✅🚀 \\"quoted\\" é"}],"model":"openai/gpt-4o-mini","temperature":0.2,"note":"après"}`

  it("splices the caller's bytes around the model edit, non-ASCII text on both sides", () => {
    const body = withModel(ctx(text), "openai/gpt-4o-mini")
    assert.instanceOf(body, Buffer)
    assert.strictEqual(decoded(body!), text.replace('"model":"openai/gpt-4o-mini"', '"model":"gpt-4o-mini"'))
  })

  it("forwards the caller's bytes untouched when the model needs no edit", () => {
    const same = ctx(text, { model: "openai/gpt-4o-mini" })
    assert.strictEqual(withModel(same, "openai/gpt-4o-mini"), same.requestBytes)
  })

  it("edits the text instead when the bytes were not valid UTF-8 (what the provider gets is the decoded text)", () => {
    const invalid = Buffer.concat([Buffer.from(text.slice(0, 20)), Buffer.from([0xe2, 0x82]), Buffer.from(text.slice(20))])
    assert.isUndefined(forwardableBytes(invalid))
    const body = withModel({ ...ctx(invalid.toString("utf8")), requestBytes: undefined }, "openai/gpt-4o-mini")
    assert.isString(body)
    assert.include(body as string, '"model":"gpt-4o-mini"')
  })

  it("applies several edits in order, the same from bytes as from text", () => {
    const edits = [{ at: 1, remove: 0, insert: '"stream_options":{"include_usage":true},' }, ...modelEdit(text, "openai/gpt-4o-mini", "gpt-4o-mini")!]
    const fromBytes = decoded(editedBody(ctx(text), edits))
    const fromText = editedBody({ ...ctx(text), requestBytes: undefined }, edits)
    assert.strictEqual(fromBytes, fromText)
    assert.deepStrictEqual(JSON.parse(fromBytes), { ...JSON.parse(text), model: "gpt-4o-mini", stream_options: { include_usage: true } })
  })

  it("a chat-completions stream asks for the usage chunk in the bytes it forwards", () => {
    const streamed = `{"model":"openai/gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"résumé ❯"}]}`
    const request = JSON.parse(streamed) as ChatRequest
    const upstream = adapterFor("openai").prepare(request, ctx(streamed, { stream: true }))
    assert.instanceOf(upstream.body, Buffer)
    assert.deepStrictEqual(JSON.parse(decoded(upstream.body)), {
      stream_options: { include_usage: true },
      ...request,
      model: "gpt-4o-mini"
    })
  })

  it("refuses an edit it cannot make safely: the adapter serialises the request instead", () => {
    assert.isUndefined(modelEdit(`{"model":"a","tools":[{"model":"a"}]}`, "a", "b"), "a second \"model\" key")
    assert.isUndefined(withModel(ctx(`{"model" : "openai/gpt-4o-mini"}`), "openai/gpt-4o-mini"))
  })
})

/**
 * Property-based fuzzing of the MCP tools with the SDK's own client against real PostgreSQL: every tool called with
 * arguments built from its input schema (values of the declared types, enum members, real ids, ids almost right)
 * and with anything at all. A bad argument is the caller's mistake: the answer is a result or an `isError` result
 * saying what is wrong — never an internal error, a protocol error other than invalid params, or a 5xx.
 */
import type { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { ErrorCode, McpError, type Tool } from "@modelcontextprotocol/sdk/types.js"
import { assert, describe, layer } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import fc from "fast-check"
import { ApiStack, type ApiStackInfo } from "../support/api-stack.ts"
import { type Member, seedTwoTenantLedger } from "../support/ledger-fixture.ts"
import { callTool, mcpClient, textOf } from "../support/mcp-client.ts"
import { anyJson, checkOptions, rawRequest, RUNS } from "./arbitraries.ts"

class Fixture extends Context.Service<Fixture, {
  readonly stack: ApiStackInfo
  readonly ann: Member
  /** ids and names that exist, so some calls get past validation to the queries */
  readonly known: ReadonlyArray<string>
}>()("test/fuzz/McpFixture") {}

const FixtureLive = Layer.effect(
  Fixture,
  Effect.gen(function*() {
    const stack = yield* ApiStack
    const { ann, sessions, rows } = yield* seedTwoTenantLedger(stack)
    const known = [
      ...new Set(sessions.map((session) => session.agent)),
      ...sessions.map((session) => session.id),
      ...rows.slice(0, 5).map((row) => row.capture.ledger_id),
      "ticket:PAY-245",
      "file:src/pay/retry.ts",
      "2025-11-03T09:30:00Z"
    ]
    return { stack, ann, known }
  })
).pipe(Layer.provideMerge(ApiStack.layer({ settings: { apiRateLimit: 1_000_000 } })))

/** Values for a JSON schema: of its type (enum members, known ids), near it, or anything. */
const valueFor = (schema: any, known: ReadonlyArray<string>): fc.Arbitrary<unknown> => {
  const text = fc.oneof(
    fc.constantFrom(...known),
    fc.string({ unit: "binary", maxLength: 40 }),
    fc.constantFrom(...known).chain((id) => fc.nat(id.length).map((at) => `${id.slice(0, at)}\u0000${id.slice(at + 1)}`)),
    fc.string({ unit: "grapheme-ascii", minLength: 2000, maxLength: 9000 })
  )
  const typed: Array<fc.Arbitrary<unknown>> = []
  if (Array.isArray(schema?.enum)) typed.push(fc.constantFrom(...schema.enum))
  for (const branch of [...(schema?.anyOf ?? []), ...(schema?.oneOf ?? [])]) typed.push(valueFor(branch, known))
  const types: Array<string> = Array.isArray(schema?.type) ? schema.type : schema?.type === undefined ? [] : [schema.type]
  for (const type of types) {
    if (type === "string") typed.push(text)
    if (type === "integer") typed.push(fc.oneof(fc.integer({ min: -5, max: 300 }), fc.integer(), fc.maxSafeInteger()))
    if (type === "number") typed.push(fc.oneof(fc.double({ noNaN: true, noDefaultInfinity: true }), fc.integer({ min: -2, max: 2 })))
    if (type === "boolean") typed.push(fc.boolean())
    if (type === "array") typed.push(fc.array(valueFor(schema.items ?? {}, known), { maxLength: 5 }))
    if (type === "object") typed.push(argumentsFor(schema, known))
  }
  return typed.length === 0 ? anyJson : fc.oneof({ weight: 4, arbitrary: fc.oneof(...typed) }, { weight: 1, arbitrary: anyJson })
}

/** Arguments for an object schema: any subset of its properties, sometimes an unknown one. */
const argumentsFor = (schema: any, known: ReadonlyArray<string>): fc.Arbitrary<Record<string, unknown>> => {
  const properties: Record<string, any> = schema?.properties ?? {}
  const declared = fc.record(
    Object.fromEntries(Object.entries(properties).map(([name, property]) => [name, valueFor(property, known)])),
    { requiredKeys: [] }
  )
  return fc.tuple(declared, fc.option(fc.tuple(fc.string({ maxLength: 12 }), anyJson), { freq: 5 })).map(([args, extra]) =>
    extra === null ? args : { ...args, [extra[0]]: extra[1] }
  )
}

/** Calls a tool; fails the property on anything but a result or an invalid-params refusal. */
const checkCall = async (client: Client, name: string, args: unknown) => {
  const where = `${name} ${JSON.stringify(args)?.slice(0, 300)}`
  try {
    const result = await client.callTool({ name, arguments: args as Record<string, unknown> })
    if (result.isError === true) {
      const text = textOf(result as any)
      assert.notMatch(text, /internal error|unavailable/i, where)
      assert.isAbove(text.length, 0, where)
    }
  } catch (error) {
    // the SDK client validates structured output against the tool's output schema: a mismatch is our bug
    assert.instanceOf(error, McpError, `${where}: ${String(error)}`)
    assert.strictEqual((error as McpError).code, ErrorCode.InvalidParams, `${where}: ${String(error)}`)
  }
}

describe("fuzzing the MCP tools", () => {
  layer(FixtureLive, { timeout: 300_000, excludeTestServices: true })((it) => {
    it.effect("every tool, arguments from its schema or anything: a result or a clear refusal, never an internal error", () =>
      Effect.gen(function*() {
        const { stack, ann, known } = yield* Fixture
        const client = yield* mcpClient(stack.baseUrl, { token: ann.pat })
        const { tools } = yield* Effect.promise(() => client.listTools())
        assert.strictEqual(tools.length, 13)
        for (const tool of tools as Array<Tool>) {
          const args = fc.oneof({ weight: 5, arbitrary: argumentsFor(tool.inputSchema, known) }, { weight: 1, arbitrary: anyJson })
          yield* Effect.promise(() =>
            fc.assert(fc.asyncProperty(args, (value) => checkCall(client, tool.name, value)), checkOptions(Math.ceil(RUNS / 2)))
          )
        }
        // unknown tools and malformed calls are protocol refusals, and the session goes on
        yield* Effect.promise(() => checkCall(client, "no_such_tool", {}).catch(() => undefined))
        const after = yield* callTool(client, "list_agents", {})
        assert.notStrictEqual(after.isError, true, textOf(after))
      }))

    it.effect("POST /mcp with any body and any Accept or content type: a JSON-RPC answer or a 4xx, never a 5xx", () =>
      Effect.gen(function*() {
        const { stack, ann } = yield* Fixture
        const message = fc.oneof(
          anyJson,
          fc.record({ jsonrpc: fc.constantFrom("2.0", "1.0", 2), id: fc.oneof(fc.integer(), fc.string(), fc.constant(null)), method: fc.oneof(fc.constantFrom("tools/call", "tools/list", "initialize", "resources/read", "logging/setLevel", "ping"), fc.string()), params: anyJson }, { requiredKeys: [] })
        )
        const body = fc.oneof(
          message.map((value) => JSON.stringify(value) ?? ""),
          fc.array(message, { maxLength: 3 }).map((batch) => JSON.stringify(batch)),
          fc.string({ maxLength: 200 })
        )
        yield* Effect.promise(() =>
          fc.assert(
            fc.asyncProperty(body, fc.constantFrom("application/json, text/event-stream", "application/json", "text/html", "*/*", ""), fc.constantFrom("application/json", "text/plain", ""), async (text, accept, contentType) => {
              const answer = await rawRequest(stack.baseUrl, {
                method: "POST",
                path: "/mcp",
                headers: { authorization: `Bearer ${ann.pat}`, accept, "content-type": contentType, "mcp-protocol-version": "2025-11-25" },
                body: text
              })
              assert.isBelow(answer.status, 500, `${text.slice(0, 200)} → ${answer.status} ${answer.text.slice(0, 300)}`)
              assert.notMatch(answer.text, /"code":\s*-32603/, `${text.slice(0, 200)} → ${answer.text.slice(0, 300)}`)
            }),
            // found by a CI run: an initialize without params was answered -32603 by the SDK's own handler
            { ...checkOptions(), examples: [[JSON.stringify({ jsonrpc: "2.0", id: "", method: "initialize" }), "application/json, text/event-stream", "application/json"]] }
          )
        )
      }))
  })
})

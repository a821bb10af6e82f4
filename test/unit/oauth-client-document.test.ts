/**
 * The rules of Client ID Metadata Documents that need no server: which client ids may be fetched, from which
 * addresses, for how long a document is kept, and what a document must say (the end-to-end test, oauth-cimd, serves
 * real documents).
 */
import { assert, describe, it } from "@effect/vitest"
import fc from "fast-check"
import * as Net from "node:net"
import {
  addressProblem,
  cacheSeconds,
  clientIdProblem,
  clientOfDocument,
  DOCUMENT_CACHE_DEFAULT_S,
  DOCUMENT_CACHE_MAX_S,
  isMetadataDocumentId
} from "../../src/oauth/clientMetadataDocument.ts"

describe("client ID metadata documents", () => {
  it("a client id is a document's URL when it is an http(s) URL; registered ids are not", () => {
    assert.isTrue(isMetadataDocumentId("https://client.example/oauth.json"))
    assert.isTrue(isMetadataDocumentId("HTTP://client.example/x"))
    assert.isFalse(isMetadataDocumentId("ldg_client_abc"))
    assert.isFalse(isMetadataDocumentId("urn:client"))
  })

  it("client ids: https with a path, in normal form, no credentials or fragment; loopback http only when allowed", () => {
    assert.isUndefined(clientIdProblem("https://client.example/oauth/client.json", false))
    assert.isUndefined(clientIdProblem("https://client.example:8443/c?v=1", false))
    const refused: Array<[string, string]> = [
      ["http://client.example/c.json", "https"],
      ["http://127.0.0.1:8080/c.json", "https"],
      ["https://client.example", "path"],
      ["https://client.example/", "path"],
      ["https://client.example/a/../c.json", "normal form"],
      ["https://client.example/./c.json", "normal form"],
      ["https://Client.Example/c.json", "normal form"],
      ["https://client.example:443/c.json", "normal form"],
      ["https://user:pw@client.example/c.json", "user name"],
      ["https://client.example/c.json#x", "fragment"],
      ["not a url", "not a URL"],
      [`https://client.example/${"x".repeat(2100)}`, "longer than"]
    ]
    for (const [clientId, why] of refused) assert.include(clientIdProblem(clientId, false) ?? "", why, clientId)
    assert.isUndefined(clientIdProblem("http://127.0.0.1:8080/c.json", true))
    assert.isUndefined(clientIdProblem("http://localhost:8080/c.json", true))
    assert.include(clientIdProblem("http://client.example/c.json", true) ?? "", "https", "only loopback http")
  })

  it("addresses: public ones only; loopback when allowed; IPv4-mapped, NAT64 and 6to4 forms of private ones refused", () => {
    for (const address of ["93.184.216.34", "8.8.8.8", "2606:4700::1111", "::ffff:8.8.8.8"]) {
      assert.isUndefined(addressProblem(address, false), address)
    }
    for (const address of ["127.0.0.1", "127.8.9.1", "::1", "0:0:0:0:0:0:0:1", "::ffff:127.0.0.1", "::ffff:7f00:1", "0:0:0:0:0:ffff:7f00:1"]) {
      assert.include(addressProblem(address, false) ?? "", "loopback", address)
      assert.isUndefined(addressProblem(address, true), address)
    }
    const notPublic = [
      "10.0.0.1", "172.16.0.1", "172.31.255.255", "192.168.0.1", "169.254.169.254", "100.64.0.1", "0.0.0.0", "224.0.0.1",
      "255.255.255.255", "192.0.2.1", "198.18.0.1", "::", "fc00::1", "fd12:3456::1", "fe80::1", "ff02::1", "::ffff:10.0.0.1",
      "::ffff:a9fe:a9fe", "64:ff9b::a00:1", "2002:a00:1::1", "2001:db8::1", "::127.0.0.1", "::7f00:1", "::ffff:0:7f00:1",
      "::8.8.8.8", "64:ff9b:1::a00:1", "100::1", "5f00::1", "3fff::1", "fe80::1%eth0", "::1%lo", "2606:4700::1111%1"
    ]
    for (const address of notPublic) {
      assert.match(addressProblem(address, false) ?? "", /private|scoped/, address)
      assert.match(addressProblem(address, true) ?? "", /private|scoped/, `${address}, even on a loopback ledger`)
    }
    assert.include(addressProblem("client.example", false) ?? "", "not an IP address")
  })

  it("addresses: every IPv6 form that embeds an IPv4 address, however written, is refused — but IPv4-mapped, judged as its IPv4", () => {
    const uint32 = (dotted: string) => dotted.split(".").reduce((n, octet) => n * 256 + Number(octet), 0)
    const dotted = (n: number) => [24, 16, 8, 0].map((shift) => Math.floor(n / 2 ** shift) % 256).join(".")
    // the IPv4 special-purpose registry, and loopback
    const special = fc.constantFrom(
      ...([["0.0.0.0", 8], ["10.0.0.0", 8], ["100.64.0.0", 10], ["127.0.0.0", 8], ["169.254.0.0", 16], ["172.16.0.0", 12],
        ["192.0.0.0", 24], ["192.0.2.0", 24], ["192.88.99.0", 24], ["192.168.0.0", 16], ["198.18.0.0", 15], ["198.51.100.0", 24],
        ["203.0.113.0", 24], ["224.0.0.0", 4], ["240.0.0.0", 4]] as const)
    ).chain(([network, prefix]) => fc.integer({ min: 0, max: 2 ** (32 - prefix) - 1 }).map((host) => uint32(network) + host))
    const anyV4 = fc.integer({ min: 0, max: 2 ** 32 - 1 })
    const group = fc.integer({ min: 0, max: 0xffff })
    const embeddings = {
      mapped: fc.constant([0, 0, 0, 0, 0, 0xffff]),
      compatible: fc.constant([0, 0, 0, 0, 0, 0]),
      translated: fc.constant([0, 0, 0, 0, 0xffff, 0]),
      nat64: fc.constant([0x64, 0xff9b, 0, 0, 0, 0]),
      nat64Local: fc.tuple(group, group, group).map((middle) => [0x64, 0xff9b, 1, ...middle]),
      // these carry the address further up: what else they hold is arbitrary
      sixToFour: fc.tuple(group, group, group, group, group).map((rest) => [0x2002, ...rest]),
      teredo: fc.tuple(group, group).map((flagsAndPort) => [0x2001, 0, ...flagsAndPort])
    }
    type Embedding = keyof typeof embeddings
    const groupsOf = (embedding: Embedding, prefix: ReadonlyArray<number>, v4: number) => {
      const [high, low] = [Math.floor(v4 / 0x10000), v4 % 0x10000]
      if (embedding === "sixToFour") return [prefix[0]!, high, low, ...prefix.slice(1)]
      // Teredo: the server's address, then flags and port, then the client's address, inverted
      if (embedding === "teredo") return [...prefix.slice(0, 2), high, low, ...prefix.slice(2), 0xffff - high, 0xffff - low]
      return [...prefix, high, low]
    }
    const style = fc.record({
      compress: fc.option(fc.nat()),
      pad: fc.boolean(),
      upper: fc.boolean(),
      dottedTail: fc.boolean(),
      zone: fc.option(fc.constantFrom("eth0", "1", "lo"))
    })
    type Style = typeof style extends fc.Arbitrary<infer S> ? S : never
    /** The groups in one of IPv6's text forms: any zero run as `::`, leading zeros or not, a dotted tail or not, a zone. */
    const write = (groups: ReadonlyArray<number>, how: Style) => {
      const hex = (g: number) => (how.upper ? g.toString(16).toUpperCase() : g.toString(16)).padStart(how.pad ? 4 : 1, "0")
      const hexCount = how.dottedTail ? 6 : 8
      const pieces = [...groups.slice(0, hexCount).map(hex), ...(how.dottedTail ? [dotted(groups[6]! * 0x10000 + groups[7]!)] : [])]
      const runs: Array<[number, number]> = []
      for (let start = 0; start < hexCount; start++) for (let end = start + 1; end <= hexCount && groups[end - 1] === 0; end++) runs.push([start, end])
      const run = how.compress === null || runs.length === 0 ? undefined : runs[how.compress % runs.length]!
      const text = run === undefined ? pieces.join(":") : `${pieces.slice(0, run[0]).join(":")}::${pieces.slice(run[1]).join(":")}`
      return how.zone === null ? text : `${text}%${how.zone}`
    }
    const address = (v4: fc.Arbitrary<number>) =>
      fc.constantFrom(...(Object.keys(embeddings) as Array<Embedding>)).chain((embedding) =>
        fc.tuple(fc.constant(embedding), embeddings[embedding], v4, style).map(([embedding, prefix, v4, how]) => {
          const groups = groupsOf(embedding, prefix, v4)
          return { embedding, v4, groups, how, text: write(groups, how) }
        })
      )
    const realLoopback = (a: { embedding: Embedding; v4: number; how: { zone: string | null } }) =>
      a.how.zone === null && ((a.embedding === "mapped" && Math.floor(a.v4 / 2 ** 24) === 127) || (a.embedding === "compatible" && a.v4 === 1))

    // a private or special IPv4 address is refused in every form; loopback only on a loopback ledger, as ::1 or mapped
    fc.assert(fc.property(address(special), (a) => {
      assert.isTrue(Net.isIPv6(a.text), a.text)
      assert.isDefined(addressProblem(a.text, false), a.text)
      if (realLoopback(a)) assert.isUndefined(addressProblem(a.text, true), a.text)
      else assert.isDefined(addressProblem(a.text, true), a.text)
    }), { numRuns: 2_000 })
    // any IPv4 address: mapped, the IPv4 rules answer; embedded any other way, refused
    fc.assert(fc.property(address(anyV4), fc.boolean(), (a, allowLoopback) => {
      const problem = addressProblem(a.text, allowLoopback)
      if (a.embedding === "mapped" && a.how.zone === null) assert.strictEqual(problem, addressProblem(dotted(a.v4), allowLoopback), a.text)
      else if (!(allowLoopback && realLoopback(a))) assert.isDefined(problem, a.text)
    }), { numRuns: 2_000 })
  })

  it("kept for Cache-Control's max-age (s-maxage first), five minutes without one, a day at most, not with no-store", () => {
    assert.strictEqual(cacheSeconds(undefined), DOCUMENT_CACHE_DEFAULT_S)
    assert.strictEqual(cacheSeconds(""), DOCUMENT_CACHE_DEFAULT_S)
    assert.strictEqual(cacheSeconds("public"), DOCUMENT_CACHE_DEFAULT_S)
    assert.strictEqual(cacheSeconds("max-age=60"), 60)
    assert.strictEqual(cacheSeconds("public, Max-Age=\"120\""), 120)
    assert.strictEqual(cacheSeconds("max-age=60, s-maxage=30"), 30)
    assert.strictEqual(cacheSeconds("max-age=0"), 0)
    assert.strictEqual(cacheSeconds("max-age=31536000"), DOCUMENT_CACHE_MAX_S)
    assert.strictEqual(cacheSeconds("max-age=-5"), DOCUMENT_CACHE_DEFAULT_S)
    assert.strictEqual(cacheSeconds("max-age=soon"), DOCUMENT_CACHE_DEFAULT_S)
    assert.strictEqual(cacheSeconds("max-age=600, no-store"), 0)
    assert.strictEqual(cacheSeconds("no-cache"), 0)
  })

  it("a document: its own URL as client_id, redirect URIs, a public client; what is kept of it", () => {
    const id = "https://client.example/c.json"
    const client = clientOfDocument(id, {
      client_id: id,
      client_name: "Client",
      redirect_uris: ["http://127.0.0.1/cb", "https://client.example/cb"],
      grant_types: ["authorization_code", "client_credentials"],
      logo_uri: "https://client.example/logo.png",
      jwks_uri: "https://client.example/jwks"
    })
    assert.deepStrictEqual(client, {
      client_id: id,
      client_secret_hash: null,
      token_endpoint_auth_method: "none",
      redirect_uris: ["http://127.0.0.1/cb", "https://client.example/cb"],
      metadata: {
        client_name: "Client",
        redirect_uris: ["http://127.0.0.1/cb", "https://client.example/cb"],
        token_endpoint_auth_method: "none",
        grant_types: ["authorization_code"],
        response_types: ["code"]
      }
    }, "no auth method: a public client; a grant this server does not know, and unknown fields, are dropped")
    const refused = (body: unknown, why: string) => assert.throws(() => clientOfDocument(id, body), why)
    refused({ client_id: "https://client.example/other.json", redirect_uris: ["https://client.example/cb"] }, "client_id")
    refused({ client_id: id, redirect_uris: [] }, "redirect_uris")
    refused({ client_id: id, redirect_uris: "https://client.example/cb" }, "redirect_uris")
    refused({ client_id: id, redirect_uris: ["javascript:alert(1)"] }, "scheme not allowed")
    refused({ client_id: id, redirect_uris: ["https://client.example/cb"], token_endpoint_auth_method: "client_secret_basic" }, "must be none")
    refused({ client_id: id, redirect_uris: ["https://client.example/cb"], client_secret: "x" }, "client secret")
    refused({ client_id: id, redirect_uris: ["https://client.example/cb"], grant_types: ["refresh_token"] }, "authorization_code")
    refused({ client_id: id, redirect_uris: ["https://client.example/cb"], client_name: 7 }, "client_name")
    refused(null, "not a JSON object")
  })
})

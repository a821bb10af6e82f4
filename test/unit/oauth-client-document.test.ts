/**
 * The rules of Client ID Metadata Documents that need no server: which client ids may be fetched, from which
 * addresses, for how long a document is kept, and what a document must say (the end-to-end test, oauth-cimd, serves
 * real documents).
 */
import { assert, describe, it } from "@effect/vitest"
import {
  addressProblem,
  cacheSeconds,
  clientIdProblem,
  clientOfDocument,
  DOCUMENT_CACHE_DEFAULT_S,
  DOCUMENT_CACHE_MAX_S,
  isMetadataDocumentId
} from "../../src/mcp/oauth/clientMetadataDocument.ts"

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
    for (const address of ["127.0.0.1", "127.8.9.1", "::1", "::ffff:127.0.0.1"]) {
      assert.include(addressProblem(address, false) ?? "", "loopback", address)
      assert.isUndefined(addressProblem(address, true), address)
    }
    const notPublic = [
      "10.0.0.1", "172.16.0.1", "172.31.255.255", "192.168.0.1", "169.254.169.254", "100.64.0.1", "0.0.0.0", "224.0.0.1",
      "255.255.255.255", "192.0.2.1", "198.18.0.1", "::", "fc00::1", "fd12:3456::1", "fe80::1", "ff02::1", "::ffff:10.0.0.1",
      "::ffff:a9fe:a9fe", "64:ff9b::a00:1", "2002:a00:1::1", "2001:db8::1"
    ]
    for (const address of notPublic) {
      assert.include(addressProblem(address, false) ?? "", "private", address)
      assert.include(addressProblem(address, true) ?? "", "private", `${address}, even on a loopback ledger`)
    }
    assert.include(addressProblem("client.example", false) ?? "", "not an IP address")
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

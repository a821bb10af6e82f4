/**
 * The baseline the gateway's targets are set against (bench/notes/gateway.md, "How the gateway benchmark runs"): a bare
 * Node proxy — node:http in,
 * undici out, the request body and the answer passed through untouched, nothing parsed, authenticated or captured.
 * Measured in the same run as the gateway, it shows what any proxy costs on the machine at hand.
 *
 *   node bench/gateway/bare-proxy.ts <upstream origin>      prints {"url": ...} once listening; stops on SIGTERM
 */
import * as Http from "node:http"
import type * as Net from "node:net"
import { Pool } from "undici"

const upstream = new Pool(process.argv[2]!, { connections: 512 })

const server = Http.createServer((request, response) => {
  const chunks: Array<Buffer> = []
  request.on("data", (chunk: Buffer) => chunks.push(chunk))
  request.on("end", () => {
    upstream.request({
      path: request.url!,
      method: "POST",
      // the credential headers of the providers the benchmark reaches (OpenAI's bearer, Anthropic's key and version)
      headers: {
        "content-type": "application/json",
        authorization: request.headers.authorization ?? "",
        ...(request.headers["x-api-key"] === undefined ? {} : { "x-api-key": String(request.headers["x-api-key"]) }),
        ...(request.headers["anthropic-version"] === undefined ? {} : { "anthropic-version": String(request.headers["anthropic-version"]) })
      },
      body: Buffer.concat(chunks)
    }).then(async (answer) => {
      response.writeHead(answer.statusCode, { "content-type": String(answer.headers["content-type"] ?? "application/json") })
      for await (const chunk of answer.body) response.write(chunk)
      response.end()
    }, () => {
      response.writeHead(502).end()
    })
  })
})

server.listen(0, "127.0.0.1", () => {
  process.stdout.write(JSON.stringify({ url: `http://127.0.0.1:${(server.address() as Net.AddressInfo).port}` }) + "\n")
})
process.on("SIGTERM", () => server.close(() => void upstream.close().then(() => process.exit(0))))

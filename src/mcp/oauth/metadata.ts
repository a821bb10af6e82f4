/**
 * The authorization server's metadata document (RFC 8414), and the CORS preflight answer of the endpoints a
 * browser-based MCP client calls directly.
 */
import { HttpServerResponse } from "effect/http"
import { authorizationServerMetadata } from "../urls.ts"
import { CORS, json, type OAuthContext } from "./protocol.ts"

export const metadataHandlers = ({ urls }: OAuthContext) => ({
  // the document never changes while the server runs: built once
  metadata: json(authorizationServerMetadata(urls)),
  preflight: HttpServerResponse.empty({ status: 204, headers: CORS })
})

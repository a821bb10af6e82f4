/**
 * The authorization server's metadata document (RFC 8414), and the CORS preflight answer of the endpoints a
 * browser-based MCP client calls directly.
 */
import { HttpServerResponse } from "effect/http"
import { authorizationServerMetadata } from "./urls.ts"
import { CORS, json, type OAuthContext } from "./protocol.ts"

export const metadataHandlers = ({ urls }: OAuthContext) => ({
  // the document never changes while the server runs: built once. A client may also name itself by the URL of its
  // metadata document instead of registering (clientMetadataDocument.ts).
  metadata: json({ ...authorizationServerMetadata(urls), client_id_metadata_document_supported: true }),
  preflight: HttpServerResponse.empty({ status: 204, headers: CORS })
})

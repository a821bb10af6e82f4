/**
 * Where the MCP surface and its authorization server live, from the public URL (LEDGER_PUBLIC_URL): clients find
 * them through the 401 challenge → protected-resource metadata → authorization-server metadata.
 */

/** The one scope: read the ledger of the workspace the user picked, as that member. */
export const LEDGER_SCOPE = "ledger:read"

export interface McpUrls {
  /** the protected resource (RFC 8707/9728) and the audience of every token issued for it */
  readonly resource: string
  readonly resourceMetadata: string
  readonly issuer: string
  readonly authorize: string
  readonly token: string
  readonly register: string
  readonly revoke: string
  readonly documentation: string
}

export const mcpUrls = (publicUrl: string): McpUrls => ({
  resource: `${publicUrl}/mcp`,
  resourceMetadata: `${publicUrl}/.well-known/oauth-protected-resource/mcp`,
  issuer: publicUrl,
  authorize: `${publicUrl}/oauth/authorize`,
  token: `${publicUrl}/oauth/token`,
  register: `${publicUrl}/oauth/register`,
  revoke: `${publicUrl}/oauth/revoke`,
  documentation: `${publicUrl}/docs`
})

/** RFC 9728 protected-resource metadata of `/mcp`. */
export const protectedResourceMetadata = (urls: McpUrls) => ({
  resource: urls.resource,
  authorization_servers: [urls.issuer],
  scopes_supported: [LEDGER_SCOPE],
  bearer_methods_supported: ["header"],
  resource_name: "Agent Decision Ledger",
  resource_documentation: urls.documentation
})

/** RFC 8414 authorization-server metadata. */
export const authorizationServerMetadata = (urls: McpUrls) => ({
  issuer: urls.issuer,
  authorization_endpoint: urls.authorize,
  token_endpoint: urls.token,
  registration_endpoint: urls.register,
  revocation_endpoint: urls.revoke,
  scopes_supported: [LEDGER_SCOPE],
  response_types_supported: ["code"],
  response_modes_supported: ["query"],
  grant_types_supported: ["authorization_code", "refresh_token"],
  code_challenge_methods_supported: ["S256"],
  token_endpoint_auth_methods_supported: ["none", "client_secret_post", "client_secret_basic"],
  revocation_endpoint_auth_methods_supported: ["none", "client_secret_post", "client_secret_basic"],
  authorization_response_iss_parameter_supported: true,
  service_documentation: urls.documentation
})

/**
 * What a client may register, whichever way it is known (registration.ts, clientMetadataDocument.ts): its grant types
 * and redirect URIs, and how a requested redirect matches a registered one.
 */
import { LOOPBACK_HOSTS } from "../config/LedgerConfig.ts"

export const GRANT_TYPES = ["authorization_code", "refresh_token"]

const FORBIDDEN_SCHEMES = new Set(["javascript:", "data:", "file:", "vbscript:", "blob:", "about:"])

/** Where a redirect URI may point: https, loopback http (any port, RFC 8252 §7.3) or an app's private scheme. */
export const redirectUriProblem = (uri: string): string | undefined => {
  let url: URL
  try {
    url = new URL(uri)
  } catch {
    return `not an absolute URI: ${uri}`
  }
  if (url.hash !== "") return `must not contain a fragment: ${uri}`
  if (FORBIDDEN_SCHEMES.has(url.protocol)) return `scheme not allowed: ${uri}`
  if (url.protocol === "http:" && !LOOPBACK_HOSTS.has(url.hostname)) return `http is allowed for loopback hosts only: ${uri}`
  return undefined
}

export const sameRedirect = (registered: string, requested: string): boolean => {
  if (registered === requested) return true
  try {
    const a = new URL(registered)
    const b = new URL(requested)
    // loopback redirects may use any port (native apps bind an ephemeral one)
    return a.protocol === "http:" && LOOPBACK_HOSTS.has(a.hostname) && a.protocol === b.protocol && a.hostname === b.hostname &&
      a.pathname === b.pathname && a.search === b.search
  } catch {
    return false
  }
}

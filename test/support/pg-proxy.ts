/**
 * A TCP proxy in front of the test PostgreSQL, to make the database "stop" for a client and come back — without
 * touching the shared server. Its `url` reaches the same database through the proxy; closed with its scope.
 */
import { tcpProxyTo } from "./tcp-proxy.ts"

export const pgProxy = (databaseUrl: string) => tcpProxyTo(databaseUrl, 5432)

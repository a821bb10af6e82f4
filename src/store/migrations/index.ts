/**
 * Database migrations, applied by `ledger migrate` and at `serve` start (Effect's SQL migrator, idempotent). One file
 * per migration, named after its id; the SQL they share, and the isolation model it implements, are in sql.ts.
 */
import type { Effect } from "effect"
import type { SqlClient } from "effect/sql"
import { initial } from "./0001_initial.ts"
import { builder } from "./0002_builder.ts"
import { query } from "./0003_query.ts"
import { oauth } from "./0004_oauth.ts"
import { analytics } from "./0005_analytics.ts"
import { analyticsLeases } from "./0006_analytics_leases.ts"
import { oauthSweep } from "./0007_oauth_sweep.ts"
import { loopIndex } from "./0008_loop_index.ts"
import { oauthClientUse } from "./0009_oauth_client_use.ts"
import { sessionAliases } from "./0010_session_aliases.ts"
import { sessionSummaryOwner } from "./0011_session_summary_owner.ts"
import { oidcLogins } from "./0012_oidc_logins.ts"
import { agentApis } from "./0013_agent_apis.ts"
import { transcriptSource } from "./0014_transcript_source.ts"
import { analyticsEdges } from "./0015_analytics_edges.ts"
import { app } from "./0016_app.ts"
import { memberReads } from "./0017_member_reads.ts"
import { appSweep } from "./0018_app_sweep.ts"
import { integrity } from "./0019_integrity.ts"
import { searchStatistics } from "./0020_search_statistics.ts"
import { postingBlocks } from "./0021_posting_blocks.ts"
import { searchCompression } from "./0022_search_compression.ts"
import { sessionFirst } from "./0023_session_first.ts"
import { derivationJson } from "./0024_derivation_json.ts"
import { responseIndex } from "./0025_response_index.ts"
import { contextCompression } from "./0026_context_compression.ts"

/** Ordered migrations; ids never change once released (the database records them). */
export const migrations: Record<string, Effect.Effect<void, unknown, SqlClient.SqlClient>> = {
  "0001_initial": initial,
  "0002_builder": builder,
  "0003_query": query,
  "0004_oauth": oauth,
  "0005_analytics": analytics,
  "0006_analytics_leases": analyticsLeases,
  "0007_oauth_sweep": oauthSweep,
  "0008_loop_index": loopIndex,
  "0009_oauth_client_use": oauthClientUse,
  "0010_session_aliases": sessionAliases,
  "0011_session_summary_owner": sessionSummaryOwner,
  "0012_oidc_logins": oidcLogins,
  "0013_agent_apis": agentApis,
  "0014_transcript_source": transcriptSource,
  "0015_analytics_edges": analyticsEdges,
  "0016_app": app,
  "0017_member_reads": memberReads,
  "0018_app_sweep": appSweep,
  "0019_integrity": integrity,
  "0020_search_statistics": searchStatistics,
  "0021_posting_blocks": postingBlocks,
  "0022_search_compression": searchCompression,
  "0023_session_first": sessionFirst,
  "0024_derivation_json": derivationJson,
  "0025_response_index": responseIndex,
  "0026_context_compression": contextCompression
}

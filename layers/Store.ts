/**
 * The store: the owner's pool (migrated), the tenant-scoped client built on it, the control plane and
 * authentication, and the planner statistics the builders keep fresh. The raw pool is not part of this layer's
 * output, so everything above the store reaches the database only through `TenantSql`.
 */
import { Layer } from "effect"
import { Accounts } from "../src/auth/Accounts.ts"
import { AppSessions } from "../src/auth/AppSessions.ts"
import { Authenticator } from "../src/auth/Authenticator.ts"
import { Credentials } from "../src/auth/Credentials.ts"
import { SignInLimiter } from "../src/auth/SignInLimiter.ts"
import { IntegrityKeys } from "../src/chain/IntegrityKeys.ts"
import { DecisionRetention } from "../src/integrity/DecisionRetention.ts"
import { DatabaseLive } from "../src/store/Database.ts"
import { PlannerStatistics } from "../src/store/PlannerStatistics.ts"
import { TenantSql } from "../src/store/TenantSql.ts"

export const StoreLive = Layer.mergeAll(Authenticator.layer, Accounts.layer, AppSessions.layer, SignInLimiter.layer, DecisionRetention.layer).pipe(
  Layer.provideMerge(Credentials.layer),
  Layer.provideMerge(Layer.mergeAll(TenantSql.layer, PlannerStatistics.layer, IntegrityKeys.layer)),
  Layer.provide(DatabaseLive)
)

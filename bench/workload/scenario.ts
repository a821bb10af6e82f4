/**
 * A realistic multi-agent workload over 48 hours of explicit, seeded time: five agents working on tickets,
 * reviews, triage and reports — and, in the `planted` variant, patterns analytics must find:
 *
 *   loop               the coder repeats one tool call six times in a minute-by-minute session (hour 34)
 *   cost-spike         the reporter summarises twelve huge exports in one hour (hour 28)
 *   error-burst        the triage agent's provider fails eight times in one hour (hour 40)
 *   latency-regression the reviewer's calls take 12 s instead of ~1.5 s for an hour (hour 16)
 *   low-quality        the reporter's answers are cut off six times in a row (hour 24)
 *   right-sizing       an intake router classifies tickets with gpt-4.1 (hours 5–15)
 *   idle-agent         a sync agent works regularly, then stops at hour 18 while the others carry on
 *   handoff            the planner's plan for PAY-245 becomes the coder's input (hour 21–22)
 *   feature-x/-y       PAY-231 (retry loop) and PAY-245 (retry policy): two features that are the same work
 *   paraphrase         three agents ask the same question in other words (hours 8, 19, 37)
 *
 * Both variants contain the same base traffic and two ordinary features (BILL-142, AUTH-77). The `control`
 * variant contains nothing else: analytics must raise no insight, no merge suggestion, no hand-off on it.
 *
 * Calls are plain chat-completions requests for the fake providers; `{{output:KEY}}` in a message is replaced at
 * run time by the answer of call KEY (how a hand-off carries one agent's output into another's input).
 */

export type Variant = "planted" | "control"

export type Pattern =
  | "feature-a"
  | "feature-b"
  | "feature-x"
  | "feature-y"
  | "handoff"
  | "loop"
  | "cost-spike"
  | "error-burst"
  | "latency-regression"
  | "low-quality"
  | "right-sizing"
  | "idle-agent"
  | "paraphrase"

export interface ChatMessage {
  readonly role: "system" | "user" | "assistant" | "tool"
  readonly content: string
}

export interface WorkloadCall {
  /** unique within the workload; `{{output:KEY}}` refers to it */
  readonly key: string
  readonly pattern: Pattern | null
  readonly agent_id: string
  readonly agent_name: string
  readonly execution_id: string | null
  /** gateway model, `provider/model` */
  readonly model: string
  readonly messages: ReadonlyArray<ChatMessage>
  readonly tools?: ReadonlyArray<{ readonly type: "function"; readonly function: { readonly name: string; readonly description: string; readonly parameters: object } }>
  /** planned start, epoch ms */
  readonly at: number
  readonly latency_ms: number
}

export interface Workload {
  readonly variant: Variant
  readonly start: number
  readonly end: number
  /** in time order */
  readonly calls: ReadonlyArray<WorkloadCall>
}

/** Monday 2025-11-03 00:00 UTC. */
export const WORKLOAD_START = Date.UTC(2025, 10, 3)
export const WORKLOAD_HOURS = 48

const HOUR = 3_600_000
const MINUTE = 60_000

/** mulberry32: a small seeded generator, so a workload is the same on every run. */
const random = (seed: number) => () => {
  seed = (seed + 0x6d2b79f5) | 0
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed)
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
  return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296
}

// ---------------------------------------------------------------------------------------------------------
// Agents and their everyday work

interface Agent {
  readonly id: string
  readonly name: string
  readonly model: string
  readonly system: string
  /** everyday asks; each session takes the next one and its follow-up */
  readonly asks: ReadonlyArray<readonly [ask: string, followUp: string]>
}

const PLANNER: Agent = {
  id: "planner",
  name: "Planning agent",
  model: "openai/gpt-4.1",
  system: "You are the engineering planning assistant. Produce concrete plans with milestones and owners.",
  asks: [
    ["Draft a plan with milestones for moving the nightly batch reports to a streaming pipeline.", "Which milestone carries the most risk in that plan?"],
    ["Draft a plan with milestones for retiring the legacy fax integration used by two hospitals.", "Break the first milestone down into weekly steps."],
    ["Draft a rollout plan with milestones for feature flags in the mobile app.", "How should we prioritise the flag clean-up work?"],
    ["Draft a plan with milestones for consolidating our three logging vendors into one.", "What should the cut-over checklist contain?"],
    ["Draft a migration plan with milestones for moving staging to the new Kubernetes cluster.", "Which teams need to sign off before the switch?"],
    ["Draft a roadmap with milestones for the customer data export requested by enterprise accounts.", "How do we phase the export so small accounts get it first?"],
    ["Draft a plan with milestones for shrinking build times of the web monorepo by half.", "Which quick wins belong in the first week?"],
    ["Draft a plan with milestones for introducing on-call rotations in the data team.", "How should escalations work during holidays?"],
    ["Draft a plan with milestones for archiving warehouse tables older than seven years.", "What needs legal review before deleting anything?"],
    ["Draft a plan with milestones for localising the help centre into Spanish and German.", "Which articles should be localised first?"],
    ["Draft a strategy with milestones for reducing cloud egress costs across regions.", "Where do we measure progress each month?"],
    ["Draft a plan with milestones for the accessibility audit of the checkout flow.", "Who owns fixes that span design and engineering?"],
    ["Draft a plan with milestones for replacing the cron scheduler with a workflow engine.", "What is the rollback path if jobs start failing?"],
    ["Draft a plan with milestones for the quarterly disaster recovery drill.", "How long should each recovery step take at most?"],
    ["Draft a plan with milestones for onboarding the new partner bank integration.", "What test accounts do we need from the bank?"],
    ["Draft a plan with milestones for deprecating version one of the public REST interface.", "How much notice do customers get at each stage?"],
    ["Draft a plan with milestones for adding single sign-on to the admin console.", "Which identity providers come first?"],
    ["Draft a plan with milestones for the office network upgrade in Lisbon.", "What can be done outside working hours?"]
  ]
}

const CODER: Agent = {
  id: "coder",
  name: "Coding agent",
  model: "anthropic/claude-sonnet-4-5",
  system: "You are a senior TypeScript engineer. Answer with working code.",
  asks: [
    ["Refactor this helper so the discount is applied before tax.\n\n```ts\nexport const priceWithTax = (net: number, rate: number, discount: number) => net * (1 + rate) - discount\n```", "Add a unit test for a zero tax rate."],
    ["Refactor this parser so empty lines are skipped.\n\n```ts\nexport const parseLines = (text: string) => text.split(\"\\n\").map((line) => line.trim())\n```", "Make it handle Windows line endings too."],
    ["Rewrite this loop with reduce and keep the behaviour.\n\n```ts\nlet total = 0\nfor (const order of orders) total += order.amount\n```", "Explain the difference in readability."],
    ["Convert this callback code to async and await.\n\n```ts\nreadConfig((error, config) => { if (error) throw error; start(config) })\n```", "Handle the error without throwing."],
    ["Simplify this nested conditional about shipping zones.\n\n```ts\nif (zone === 1) { if (weight > 10) fee = 12; else fee = 8 } else { fee = 20 }\n```", "Turn the fees into a lookup table."],
    ["Optimise this search so it stops at the first match.\n\n```ts\nconst found = users.filter((user) => user.email === email)[0]\n```", "What does it change for large arrays?"],
    ["Extend this logger so each line carries a request id.\n\n```ts\nexport const log = (message: string) => console.log(message)\n```", "Pass the request id through async calls."],
    ["Rename the variables in this snippet so they describe the data.\n\n```ts\nconst a = rows.map((r) => r.x * r.y)\n```", "Add types for the rows."],
    ["Replace this manual date formatting with Intl.\n\n```ts\nconst label = d.getDate() + \"/\" + (d.getMonth() + 1) + \"/\" + d.getFullYear()\n```", "Show the German format as well."],
    ["Refactor this cache so entries expire after five minutes.\n\n```ts\nconst cache = new Map<string, string>()\n```", "Make the expiry configurable."],
    ["Migrate this snippet from moment to native dates.\n\n```ts\nconst tomorrow = moment().add(1, \"day\").startOf(\"day\")\n```", "Cover daylight saving changes."],
    ["Rewrite this class component as a function component.\n\n```tsx\nclass Badge extends React.Component { render() { return <span>{this.props.label}</span> } }\n```", "Memoise it."],
    ["Improve the error message thrown by this validator.\n\n```ts\nif (!input.email.includes(\"@\")) throw new Error(\"bad\")\n```", "List every invalid field at once."],
    ["Modify this retry-free upload so it streams the file instead of buffering it.\n\n```ts\nconst body = await readFile(path)\nawait upload(body)\n```", "Report progress while streaming."],
    ["Port this bash one-liner to a small Node script.\n\n```bash\nfind . -name \"*.log\" -mtime +7 -delete\n```", "Add a dry-run flag."],
    ["Clean up this promise chain.\n\n```ts\nload().then((x) => transform(x)).then((y) => save(y)).catch((e) => report(e))\n```", "Run transform and save for many items in parallel."],
    ["Add pagination to this listing query helper.\n\n```ts\nexport const listInvoices = (db: Db) => db.all(\"select * from invoices\")\n```", "Use keyset pagination instead of offsets."],
    ["Replace the magic numbers in this snippet with named constants.\n\n```ts\nif (attempts > 3 && elapsed > 30000) abort()\n```", "Where should the constants live?"]
  ]
}

const REVIEWER: Agent = {
  id: "reviewer",
  name: "Review agent",
  model: "openai/gpt-4o-mini",
  system: "You review changes for correctness, security and clarity. Be specific.",
  asks: [
    ["Review this change to the password reset email: the link now expires after one hour instead of a day.", "Is one hour too short for customers abroad?"],
    ["Review this change to the export job: it now writes files to a temporary folder first.", "What happens when the disk fills up?"],
    ["Review this change to the pricing page: annual plans show the monthly equivalent.", "Could the rounding mislead customers?"],
    ["Review this change to the audit trail: deleted records keep their history for ninety days.", "Does that meet the retention policy?"],
    ["Review this change to the signup form: the company field became optional.", "What reports depend on that field?"],
    ["Review this change to the mobile release notes generator: it groups entries by team.", "Should internal-only changes be hidden?"],
    ["Review this change to the rate card import: rows with unknown currencies are skipped.", "Should skipped rows be reported somewhere?"],
    ["Review this change to the backup schedule: snapshots move from midnight to four in the morning.", "Does that collide with the index rebuild?"],
    ["Review this change to the search ranking: recent documents get a small boost.", "How would we measure whether it helps?"],
    ["Review this change to the notification settings: digest emails default to weekly.", "Will existing users be migrated?"],
    ["Review this change to the invoice template: the tax number moved to the header.", "Is that required in every country we bill?"],
    ["Review this change to the warehouse sync: conflicts now prefer the newest write.", "Can clocks drift between sites?"],
    ["Review this change to the support macros: refunds over five hundred need approval.", "Who approves on weekends?"],
    ["Review this change to the onboarding checklist: security training comes first.", "How long does the training take?"],
    ["Review this change to the dashboard filters: the default range is now thirty days.", "Does it slow down large accounts?"],
    ["Review this change to the file uploader: images are resized on the client.", "What about very old browsers?"],
    ["Review this change to the referral programme: credits expire after a year.", "How do we notify people before expiry?"],
    ["Review this change to the status page: incidents show the affected regions.", "Should resolved incidents stay visible?"]
  ]
}

const TRIAGE: Agent = {
  id: "triage",
  name: "Support triage agent",
  model: "gemini/gemini-2.5-flash",
  system: "You route customer support tickets.",
  asks: [
    ["Classify this support ticket as billing, technical or account: \"I was charged twice for my March subscription.\"", "Classify this one too: \"My invoice shows the wrong company name.\""],
    ["Classify this support ticket as billing, technical or account: \"The mobile app crashes when I open settings.\"", "Classify this one too: \"Push notifications stopped after the update.\""],
    ["Classify this support ticket as billing, technical or account: \"I cannot change the email on my profile.\"", "Classify this one too: \"Please merge my two accounts.\""],
    ["Classify this support ticket as billing, technical or account: \"Exports time out for our largest project.\"", "Classify this one too: \"The chart legend overlaps the axis.\""],
    ["Classify this support ticket as billing, technical or account: \"Our card was declined although it is valid.\"", "Classify this one too: \"Can we pay by bank transfer instead?\""],
    ["Classify this support ticket as billing, technical or account: \"Two-factor codes never arrive by text.\"", "Classify this one too: \"I lost access to my authenticator phone.\""],
    ["Classify this support ticket as billing, technical or account: \"The calendar import skips recurring meetings.\"", "Classify this one too: \"Time zones look wrong in the weekly view.\""],
    ["Classify this support ticket as billing, technical or account: \"We need a refund for unused seats.\"", "Classify this one too: \"Downgrade us to the starter plan next month.\""],
    ["Classify this support ticket as billing, technical or account: \"Search returns nothing for accented names.\"", "Classify this one too: \"Attachments over ten megabytes fail.\""],
    ["Classify this support ticket as billing, technical or account: \"Please close the account of a former employee.\"", "Classify this one too: \"Transfer ownership of our workspace.\""],
    ["Classify this support ticket as billing, technical or account: \"The receipt is missing our tax number.\"", "Classify this one too: \"Why did the price go up this month?\""],
    ["Classify this support ticket as billing, technical or account: \"Dark mode makes tables unreadable.\"", "Classify this one too: \"Keyboard shortcuts do not work in Firefox.\""]
  ]
}

const REPORTER: Agent = {
  id: "reporter",
  name: "Reporting agent",
  model: "openai/gpt-4o-mini",
  system: "You write short factual summaries for managers.",
  asks: [
    ["Summarize these standup notes in three bullet points: the design team finished the onboarding screens, the checkout team is blocked on a payment provider sandbox, and the data team shipped the churn dashboard.", "Summarize the blockers only."],
    ["Summarize this customer interview: the buyer likes the reporting but finds user management confusing and wants audit exports every month.", "Summarize the feature requests only."],
    ["Summarize the sales call notes: the prospect runs three warehouses, needs offline scanning and signs in January if pilots go well.", "Summarize the risks to the deal."],
    ["Summarize the sprint review: seven stories closed, two carried over, the performance work slipped because of an outage.", "Summarize what slipped and why."],
    ["Summarize the hiring update: two engineers accepted offers, the designer role reopened, and the recruiter leaves in December.", "Summarize the open roles."],
    ["Summarize the vendor assessment: the new analytics vendor is cheaper, lacks single sign-on, and stores data in the United States.", "Summarize the compliance concerns."],
    ["Summarize the board memo: revenue grew nine percent, churn fell slightly, and the Asia expansion is paused until spring.", "Summarize the decisions the board must take."],
    ["Summarize the support week: ticket volume rose after the release, median reply time stayed under two hours, and refunds doubled.", "Summarize the refund drivers."],
    ["Summarize the security review: two medium findings in the admin console, none critical, and penetration testing is booked for February.", "Summarize the remediation owners."],
    ["Summarize the marketing retrospective: the webinar series doubled signups while paid search underperformed.", "Summarize the budget changes proposed."],
    ["Summarize the infrastructure report: storage costs rose, two regions were consolidated, and database upgrades finished early.", "Summarize next quarter's priorities."],
    ["Summarize the partner update: the reseller in Brazil launched, the Canadian partner churned, and two new integrations are in review.", "Summarize the partner pipeline."]
  ]
}

const BASE_AGENTS: ReadonlyArray<Agent> = [PLANNER, CODER, REVIEWER, TRIAGE, REPORTER]

// ---------------------------------------------------------------------------------------------------------
// Building calls

interface SessionOptions {
  readonly agent: Agent
  readonly pattern: Pattern | null
  readonly key: string
  readonly start: number
  readonly asks: ReadonlyArray<string>
  readonly execution_id?: string | null
  readonly model?: string
  readonly spacingMinutes?: number
  readonly latency?: (index: number) => number
  readonly tools?: WorkloadCall["tools"]
}

/** A session: the asks in order, each a new user turn over the conversation so far. */
const session = (options: SessionOptions, rand: () => number): Array<WorkloadCall> => {
  const history: Array<ChatMessage> = [{ role: "system", content: options.agent.system }]
  return options.asks.map((ask, index) => {
    const key = `${options.key}/${index}`
    const messages = [...history, { role: "user", content: ask } as const]
    history.push({ role: "user", content: ask }, { role: "assistant", content: `{{output:${key}}}` })
    return {
      key,
      pattern: options.pattern,
      agent_id: options.agent.id,
      agent_name: options.agent.name,
      execution_id: options.execution_id ?? null,
      model: options.model ?? options.agent.model,
      messages,
      ...(options.tools === undefined ? {} : { tools: options.tools }),
      at: options.start + index * (options.spacingMinutes ?? 4) * MINUTE,
      latency_ms: options.latency?.(index) ?? Math.round(800 + rand() * 1700)
    }
  })
}

/** Everyday traffic: every agent opens a session every ~100 minutes, all 48 hours long. */
const baseTraffic = (start: number, rand: () => number): Array<WorkloadCall> =>
  BASE_AGENTS.flatMap((agent, agentIndex) => {
    const calls: Array<WorkloadCall> = []
    let at = start + (agentIndex * 13 + 5) * MINUTE
    for (let n = 0; at < start + WORKLOAD_HOURS * HOUR - 20 * MINUTE; n++) {
      const [ask, followUp] = agent.asks[n % agent.asks.length]!
      // a rare provider rate limit, never more than one in an hour
      const throttled = n % 11 === 7
      calls.push(...session({
        agent,
        pattern: null,
        key: `base/${agent.id}/${n}`,
        start: at,
        asks: n % 3 === 2 ? [ask] : [ask, throttled ? `${followUp} [[error:429]]` : followUp],
        spacingMinutes: 3 + Math.floor(rand() * 5)
      }, rand))
      at += (85 + Math.floor(rand() * 30)) * MINUTE
    }
    return calls
  })

// ---------------------------------------------------------------------------------------------------------
// Work items (features)

const featureA = (start: number, rand: () => number) => [
  ...session({
    agent: PLANNER,
    pattern: "feature-a",
    key: "feature-a/plan",
    start: start + 2 * HOUR,
    execution_id: "run-bill-142-plan",
    asks: ["Draft a plan with milestones for BILL-142: export invoices to CSV from the billing-service.", "Which milestone of BILL-142 needs finance sign-off?"]
  }, rand),
  ...session({
    agent: CODER,
    pattern: "feature-a",
    key: "feature-a/code",
    start: start + 4 * HOUR,
    execution_id: "run-bill-142-code",
    asks: [
      "BILL-142: add a CSV writer to src/billing/invoice_export.ts in the billing-service.\n\n```ts\nexport const exportInvoices = (invoices: Invoice[]) => invoices.map(toRow)\n```",
      "BILL-142: escape commas and quotes in src/billing/invoice_export.ts as well."
    ]
  }, rand),
  ...session({
    agent: REVIEWER,
    pattern: "feature-a",
    key: "feature-a/review",
    start: start + 8 * HOUR,
    execution_id: "run-bill-142-review",
    asks: ["Review the BILL-142 change to src/billing/invoice_export.ts: invoices are exported as CSV with escaped fields."]
  }, rand)
]

const featureB = (start: number, rand: () => number) => [
  ...session({
    agent: PLANNER,
    pattern: "feature-b",
    key: "feature-b/plan",
    start: start + 30 * HOUR,
    execution_id: "run-auth-77-plan",
    asks: ["Draft a plan with milestones for AUTH-77: rate limiting for failed logins in the auth-service."]
  }, rand),
  ...session({
    agent: CODER,
    pattern: "feature-b",
    key: "feature-b/code",
    start: start + 36 * HOUR,
    execution_id: "run-auth-77-code",
    asks: [
      "AUTH-77: count failed logins per account in src/auth/login_limiter.ts of the auth-service.\n\n```ts\nexport const recordFailure = (accountId: string) => attempts.set(accountId, (attempts.get(accountId) ?? 0) + 1)\n```",
      "AUTH-77: lock the account for fifteen minutes after five failures."
    ]
  }, rand),
  ...session({
    agent: REVIEWER,
    pattern: "feature-b",
    key: "feature-b/review",
    start: start + 46 * HOUR,
    execution_id: "run-auth-77-review",
    asks: ["Review the AUTH-77 change to src/auth/login_limiter.ts: accounts lock for fifteen minutes after five failed logins."]
  }, rand)
]

/** PAY-231: the retry loop in the payment-service (ends with a failed call: stalled). */
const featureX = (start: number, rand: () => number) => [
  ...session({
    agent: CODER,
    pattern: "feature-x",
    key: "feature-x/debug",
    start: start + 12 * HOUR,
    execution_id: "run-pay-231-debug",
    asks: [
      "PAY-231: the retry loop in src/payments/retry.ts never stops when the payment-service returns 503. Fix it.\n\n```ts\nwhile (true) { try { return await charge() } catch { await sleep(100) } }\n```",
      "PAY-231: cap the retries in src/payments/retry.ts at three attempts."
    ]
  }, rand),
  ...session({
    agent: REVIEWER,
    pattern: "feature-x",
    key: "feature-x/review",
    start: start + 14 * HOUR,
    execution_id: "run-pay-231-review",
    asks: ["Review the PAY-231 fix to the retry loop in src/payments/retry.ts for the payment-service."]
  }, rand),
  ...session({
    agent: CODER,
    pattern: "feature-x",
    key: "feature-x/follow-up",
    start: start + 19 * HOUR + 30 * MINUTE,
    execution_id: "run-pay-231-follow-up",
    asks: ["PAY-231: the capped retry loop in src/payments/retry.ts still fails in staging; check the payment-service logs. [[error:500]]"]
  }, rand)
]

/** PAY-245: a retry policy with backoff for the payment-service, planned then implemented from the plan (hand-off). */
const featureY = (start: number, rand: () => number, variant: Variant) => [
  ...session({
    agent: PLANNER,
    pattern: "feature-y",
    key: "feature-y/plan",
    start: start + 21 * HOUR,
    execution_id: "run-pay-245",
    asks: ["Draft a plan for PAY-245: add a retry policy with exponential backoff to the payment-service in src/payments/retry_policy.ts."]
  }, rand),
  ...session({
    agent: CODER,
    pattern: variant === "planted" ? "handoff" : "feature-y",
    key: "feature-y/implement",
    start: start + 21 * HOUR + 40 * MINUTE,
    execution_id: "run-pay-245",
    asks: [
      "PAY-245: implement this plan from the planning agent in src/payments/retry_policy.ts.\n\n{{output:feature-y/plan/0}}",
      "PAY-245: add jitter to the backoff in src/payments/retry_policy.ts."
    ]
  }, rand),
  ...session({
    agent: REVIEWER,
    pattern: "feature-y",
    key: "feature-y/review",
    start: start + 23 * HOUR + 30 * MINUTE,
    execution_id: "run-pay-245-review",
    asks: ["Review the PAY-245 retry policy with exponential backoff in src/payments/retry_policy.ts of the payment-service."]
  }, rand)
]

// ---------------------------------------------------------------------------------------------------------
// Planted patterns

const LOOKUP_TOOL = [{
  type: "function" as const,
  function: {
    name: "job_status",
    description: "Status of a background job",
    parameters: { type: "object", properties: { query: { type: "string" } } }
  }
}]

const loop = (start: number, rand: () => number) =>
  session({
    agent: CODER,
    pattern: "loop",
    key: "loop",
    start: start + 34 * HOUR + 10 * MINUTE,
    execution_id: "run-export-check",
    spacingMinutes: 1,
    tools: LOOKUP_TOOL,
    asks: Array.from({ length: 6 }, () => "[[tool]] Check whether the nightly ledger export job has finished.")
  }, rand).map((call) => ({
    ...call,
    // the agent resends the same request, ignoring the answer: a loop
    messages: [{ role: "system", content: CODER.system }, { role: "user", content: "[[tool]] Check whether the nightly ledger export job has finished." }] as ReadonlyArray<ChatMessage>
  }))

const REGIONS = ["north", "south", "east", "west", "central", "coastal", "alpine", "island", "harbour", "valley", "desert", "forest"]
const METRICS = ["checkout", "refund", "signup", "renewal", "upgrade", "cancellation", "invoice", "shipment", "return", "review", "login", "search"]

/** A long operations export (about 120 kB) in a region's own words, so each summary is a different call. */
const exportDocument = (region: string, metric: string) =>
  Array.from({ length: 1_500 }, (_, i) => `${region} ${metric} batch ${i} processed with status ok and latency within budget`).join("\n")

const costSpike = (start: number, rand: () => number) =>
  REGIONS.map((region, index) =>
    session({
      agent: REPORTER,
      pattern: "cost-spike",
      key: `cost-spike/${region}`,
      start: start + 28 * HOUR + (3 + index * 4) * MINUTE,
      asks: [`Summarize the ${region} operations export for ${METRICS[index]} volumes:\n\n${exportDocument(region, METRICS[index]!)}`]
    }, rand)
  ).flat()

const errorBurst = (start: number, rand: () => number) =>
  TRIAGE.asks.slice(0, 8).map(([ask], index) =>
    session({
      agent: TRIAGE,
      pattern: "error-burst",
      key: `error-burst/${index}`,
      start: start + 40 * HOUR + (2 + index * 6) * MINUTE,
      asks: [`${ask.replace("this support ticket", "this escalated ticket")} [[error:503]]`]
    }, rand)
  ).flat()

const latencyRegression = (start: number, rand: () => number) =>
  session({
    agent: REVIEWER,
    pattern: "latency-regression",
    key: "latency-regression",
    start: start + 16 * HOUR + 5 * MINUTE,
    spacingMinutes: 10,
    latency: (index) => 11_500 + index * 250,
    asks: [
      "Review the change to the cookie banner: consent is stored for six months.",
      "Review the change to the tax report: credit notes are now negative lines.",
      "Review the change to the team invite flow: invitations expire after a week.",
      "Review the change to the API key page: keys are masked after creation.",
      "Review the change to the delivery estimates: weekends are excluded."
    ]
  }, rand)

const lowQuality = (start: number, rand: () => number) =>
  session({
    agent: REPORTER,
    pattern: "low-quality",
    key: "low-quality",
    start: start + 24 * HOUR + 10 * MINUTE,
    execution_id: "run-churn-digest",
    spacingMinutes: 5,
    asks: [
      "Summarize the churn interviews from the enterprise segment. [[truncate]]",
      "Summarize the churn interviews again, but shorter. [[truncate]]",
      "Summarize only the pricing complaints from the churn interviews. [[truncate]]",
      "Summarize the onboarding complaints from the churn interviews. [[truncate]]",
      "Summarize the support complaints from the churn interviews. [[truncate]]",
      "Summarize the churn interviews in one sentence. [[truncate]]"
    ]
  }, rand)

const INTAKE_ROUTER: Agent = {
  id: "intake-router",
  name: "Intake router",
  model: "openai/gpt-4.1",
  system: "You route incoming requests to the right queue.",
  asks: []
}

const INTAKE_TICKETS = [
  "The export button is greyed out.", "I need a copy of last year's invoices.", "How do I add a second admin?",
  "The app logs me out every hour.", "Our plan renewal failed.", "Can you delete my old workspace?",
  "Images do not load on the tablet.", "I want to change our billing address.", "The password rules are unclear.",
  "Reports show yesterday's numbers.", "Please extend our trial.", "The integration token expired.",
  "We were billed in the wrong currency.", "Sync with the calendar stopped.", "How do I reset a colleague's access?",
  "The CSV import rejects our file.", "Upgrade us to the business plan.", "Notifications arrive twice.",
  "We need an invoice with a purchase order number.", "The login page shows an error.", "Remove a user who left.",
  "The mobile app uses too much battery.", "Send the receipt to our accountant.", "Search is slow for old projects."
]

/** 24 classifications on day one (the pattern), then a few a day so the router never looks idle. */
const rightSizing = (start: number, rand: () => number) => [
  ...INTAKE_TICKETS.map((ticket, index) =>
    session({
      agent: INTAKE_ROUTER,
      pattern: "right-sizing",
      key: `right-sizing/${index}`,
      start: start + 5 * HOUR + index * 45 * MINUTE,
      asks: [`Classify this request as billing, technical or account: "${ticket}"`]
    }, rand)
  ).flat(),
  ...INTAKE_TICKETS.slice(0, 8).map((ticket, index) =>
    session({
      agent: INTAKE_ROUTER,
      pattern: null,
      key: `intake-day-two/${index}`,
      start: start + 25 * HOUR + index * 3 * HOUR,
      asks: [`Classify this follow-up request as billing, technical or account: "Still waiting: ${ticket}"`]
    }, rand)
  ).flat()
]

const SYNC_AGENT: Agent = {
  id: "legacy-sync",
  name: "Legacy CRM sync",
  model: "openai/gpt-4o-mini",
  system: "You read records from the old CRM and report what changed.",
  asks: []
}

const SYNC_RECORDS = [
  "a contact whose phone number moved to a new area code", "an account that switched its industry to logistics",
  "a deal whose close date slipped by a month", "a lead that asked to stop receiving newsletters",
  "a contact promoted from analyst to director", "an account that merged with its parent company",
  "a deal that lost its second decision maker", "a lead imported twice from a trade fair",
  "an account whose billing country changed to Austria", "a contact whose email domain changed after a rebrand",
  "a deal re-opened after a failed pilot", "a lead that booked a demo for next week",
  "an account that added a procurement contact", "a contact who left the company"
]

const idleAgent = (start: number, rand: () => number) =>
  SYNC_RECORDS.map((record, index) =>
    session({
      agent: SYNC_AGENT,
      pattern: "idle-agent",
      key: `idle-agent/${index}`,
      start: start + 20 * MINUTE + index * 75 * MINUTE,
      asks: [`Extract the changed fields from this record: ${record}.`]
    }, rand)
  ).flat()

const PARAPHRASES = [
  { agent: PLANNER, hour: 8, ask: "How do we rotate the signing keys of the webhook-gateway without any downtime?" },
  { agent: REVIEWER, hour: 19, ask: "What is the procedure to rotate webhook-gateway signing keys with zero downtime?" },
  { agent: CODER, hour: 37, ask: "Rotating the webhook-gateway signing keys: how can we do it without downtime?" }
]

/** A fourth wording, never sent: the text query that must find the three. */
export const PARAPHRASE_QUERY = "Steps for rotating signing keys on the webhook-gateway while avoiding downtime"

const paraphrases = (start: number, rand: () => number) =>
  PARAPHRASES.map(({ agent, ask, hour }, index) =>
    session({ agent, pattern: "paraphrase", key: `paraphrase/${index}`, start: start + hour * HOUR + 47 * MINUTE, asks: [ask] }, rand)
  ).flat()

// ---------------------------------------------------------------------------------------------------------

export const planWorkload = (variant: Variant, options: { readonly start?: number; readonly seed?: number } = {}): Workload => {
  const start = options.start ?? WORKLOAD_START
  const rand = random(options.seed ?? 7)
  const calls = [
    ...baseTraffic(start, rand),
    ...featureA(start, rand),
    ...featureB(start, rand),
    ...(variant === "planted"
      ? [
        ...featureX(start, rand),
        ...featureY(start, rand, variant),
        ...loop(start, rand),
        ...costSpike(start, rand),
        ...errorBurst(start, rand),
        ...latencyRegression(start, rand),
        ...lowQuality(start, rand),
        ...rightSizing(start, rand),
        ...idleAgent(start, rand),
        ...paraphrases(start, rand)
      ]
      : [])
  ].sort((a, b) => a.at - b.at || a.key.localeCompare(b.key))
  return { variant, start, end: start + WORKLOAD_HOURS * HOUR, calls }
}

/** The calls of one planted pattern. */
export const callsOf = (workload: Workload, pattern: Pattern): ReadonlyArray<WorkloadCall> =>
  workload.calls.filter((call) => call.pattern === pattern)

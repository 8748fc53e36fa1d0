# ruff: noqa: E501  (data: one journal line per line)
"""The concept set's journal, as sessions of (kind, source, content); `make.py` turns it into events.

Five projects, written the way coding agents and developers write in a journal. Lines marked with a
question key (`("decision", "agent", "...", "q-auth")`) are the answers to `questions.py`.
"""

SESSIONS: list[tuple[str, str, list[tuple[str, ...]]]] = [
    ("billing-api", "2026-03-02T09:00:00Z", [
        ("prompt", "dev", "the authentication flow for the dashboard is a mess, users get logged out every hour. can you look at how we authenticate?"),
        ("tool_use", "claude", "Read src/billing/auth/session.py"),
        ("note", "claude", "Session cookies expire after 3600s and there is no refresh path; the authentication middleware just rejects."),
        ("command", "claude", "pytest tests/auth -q -> 14 passed, 2 failed (test_refresh_token, test_expired_session)"),
        ("decision", "claude", "We switched login to OAuth with PKCE through the company IdP; tokens refresh silently in the SPA.", "q-auth"),
        ("commit", "claude", "feat(auth): OAuth authorization code + PKCE, drop password form"),
        ("conversation", "dev", "nice, authentication finally behaves. remember to tell the mobile team"),
    ]),
    ("billing-api", "2026-03-04T14:10:00Z", [
        ("prompt", "dev", "we got hammered by a scraper last night, the API fell over. need some protection against abuse"),
        ("tool_use", "claude", "Grep 'middleware' src/billing/app.py"),
        ("note", "claude", "No throttling anywhere; one client made 40k requests per minute against /invoices."),
        ("decision", "claude", "Added a token bucket per API key in Redis: 600 calls a minute, burst 100, 429 with Retry-After beyond.", "q-abuse"),
        ("command", "claude", "k6 run load/invoices.js -> p95 180ms, 0.3% 429s as expected"),
        ("commit", "claude", "feat: per-key token bucket limiter (redis)"),
    ]),
    ("billing-api", "2026-03-09T10:30:00Z", [
        ("prompt", "dev", "customers are being charged twice sometimes when stripe retries webhooks. payments bug, high priority"),
        ("tool_use", "claude", "Read src/billing/webhooks/stripe.py"),
        ("note", "claude", "The handler creates a charge record before checking whether the event was already processed."),
        ("decision", "claude", "Every webhook now stores the Stripe event id in a unique-keyed table first; a replayed delivery is acknowledged and skipped.", "q-double-charge"),
        ("command", "claude", "stripe trigger invoice.paid --repeat 3 -> one ledger row"),
        ("commit", "claude", "fix(webhooks): idempotent on stripe event id"),
        ("conversation", "dev", "good, payments look sane again. refund the three customers manually"),
    ]),
    ("billing-api", "2026-03-16T08:45:00Z", [
        ("prompt", "dev", "time to upgrade the database, we're on postgres 12 which is end of life"),
        ("command", "claude", "pg_dump --schema-only billing > schema.sql"),
        ("note", "claude", "Two extensions pinned old versions: pg_partman 4.5 and pgcrypto; the migration plan needs both."),
        ("decision", "claude", "Plan: logical replication to a 16 replica, cut over in the Sunday window, keep 12 read-only for a week as fallback.", "q-db-upgrade"),
        ("command", "claude", "alembic upgrade head on staging-16 -> ok, 212 revisions"),
        ("commit", "claude", "chore(db): compat fixes for PG16 (pg_partman 5)"),
    ]),
    ("billing-api", "2026-03-20T16:00:00Z", [
        ("prompt", "dev", "accounting wants the invoice documents to look like the old ones, with the logo and VAT breakdown"),
        ("tool_use", "claude", "Read templates/invoice.html"),
        ("decision", "claude", "Render invoices with WeasyPrint from the Jinja template instead of reportlab; fonts embedded, VAT per line.", "q-invoice-pdf"),
        ("command", "claude", "python -m billing.render --sample 10 -> out/*.pdf"),
        ("commit", "claude", "feat(invoices): weasyprint renderer"),
    ]),
    ("billing-api", "2026-03-25T11:20:00Z", [
        ("prompt", "dev", "our test suite takes 14 minutes in CI, it's killing everyone's productivity"),
        ("command", "claude", "pytest --durations=20 -> slowest: test_reconcile_month 95s, fixtures spin a db per test"),
        ("decision", "claude", "Share one Postgres per worker with transactional rollback between cases, and run pytest-xdist with 4 workers: 14 min -> 3 min.", "q-slow-tests"),
        ("commit", "claude", "ci: xdist + per-worker db with rollback"),
        ("conversation", "dev", "3 minutes, finally. CI is usable"),
    ]),
    ("mobile-app", "2026-03-03T13:00:00Z", [
        ("prompt", "dev", "the app crashes on some Android phones when people open the camera to scan a receipt"),
        ("tool_use", "codex", "Read android/app/src/main/java/com/acme/ScanActivity.kt"),
        ("error", "codex", "java.lang.SecurityException: Permission Denial: READ_MEDIA_IMAGES on Android 14"),
        ("decision", "codex", "Ask for READ_MEDIA_VISUAL_USER_SELECTED at runtime and fall back to the system picker on API 34.", "q-android-crash"),
        ("commit", "codex", "fix(scan): runtime media permission on API 34"),
        ("conversation", "dev", "crash rate back under 0.1% in the console"),
    ]),
    ("mobile-app", "2026-03-06T10:00:00Z", [
        ("prompt", "dev", "when two devices edit the same expense offline, one of the edits disappears after syncing"),
        ("note", "codex", "The sync endpoint is last-write-wins on the whole record."),
        ("decision", "codex", "Merge per field using vector clocks; genuinely concurrent edits to one field keep both values and ask the user.", "q-offline-conflict"),
        ("commit", "codex", "feat(sync): per-field merge with vector clocks"),
    ]),
    ("mobile-app", "2026-03-11T15:30:00Z", [
        ("prompt", "dev", "marketing wants to notify users when their reimbursement is approved"),
        ("tool_use", "codex", "Read src/notifications/index.ts"),
        ("decision", "codex", "Push goes through FCM for both platforms (APNs via FCM), messages are sent from a queue worker, not the request path.", "q-push"),
        ("command", "codex", "npx react-native run-ios -> device token registered"),
        ("commit", "codex", "feat(push): FCM topic per user"),
    ]),
    ("mobile-app", "2026-03-18T09:15:00Z", [
        ("prompt", "dev", "apple rejected the release again. can you look at what the reviewers wrote"),
        ("note", "codex", "Guideline 5.1.1: the app asks for contacts without explaining why; also the sign-in screen lacks Sign in with Apple."),
        ("decision", "codex", "Removed the contacts import entirely and added Sign in with Apple next to Google.", "q-store-rejection"),
        ("command", "codex", "fastlane ios beta -> build 4.2.0 (311) uploaded"),
        ("commit", "codex", "chore(ios): drop contacts import, add apple sign-in"),
    ]),
    ("mobile-app", "2026-03-23T17:40:00Z", [
        ("prompt", "dev", "app startup is slow on older phones, like 4 seconds before anything shows"),
        ("command", "codex", "npx react-native-bundle-visualizer -> moment.js 290kB, lodash 70kB"),
        ("decision", "codex", "Enabled Hermes, replaced moment with date-fns, and lazy-load the charts screen: cold start 4.1s -> 1.6s on a Moto G7.", "q-startup"),
        ("commit", "codex", "perf: hermes, date-fns, lazy charts"),
    ]),
    ("mobile-app", "2026-03-27T12:00:00Z", [
        ("prompt", "dev", "translations: we're launching in Germany and Brazil next month"),
        ("decision", "codex", "Strings move to i18next JSON bundles per locale; Crowdin syncs them nightly; dates and currency via Intl.", "q-i18n"),
        ("commit", "codex", "feat(i18n): de-DE and pt-BR bundles"),
    ]),
    ("infra", "2026-03-02T19:00:00Z", [
        ("prompt", "dev", "the AWS bill doubled this quarter, finance is asking questions. where is the money going?"),
        ("command", "claude", "aws ce get-cost-and-usage --granularity MONTHLY --group-by SERVICE"),
        ("note", "claude", "EC2 on-demand for the batch workers is 61% of the spend; they run 24/7 but are busy 3 hours a day."),
        ("decision", "claude", "Batch workers move to spot instances in an autoscaling group that scales to zero overnight.", "q-cost"),
        ("commit", "claude", "terraform: spot ASG for batch, min 0"),
        ("conversation", "dev", "projected saving ~ $9k a month, finance is happy"),
    ]),
    ("infra", "2026-03-07T07:30:00Z", [
        ("prompt", "dev", "the certificate for api.acme.io expired at 3am and everything broke. how do we stop this from happening again"),
        ("error", "claude", "x509: certificate has expired or is not yet valid: current time 2026-03-07T03:02:11Z"),
        ("decision", "claude", "cert-manager issues Let's Encrypt certificates for every ingress and renews 30 days ahead; a Prometheus alert fires at 14 days left.", "q-tls"),
        ("commit", "claude", "k8s: cert-manager ClusterIssuer letsencrypt-prod"),
    ]),
    ("infra", "2026-03-12T11:00:00Z", [
        ("prompt", "dev", "logs are scattered across nodes, debugging production is painful. we need centralised logging"),
        ("decision", "claude", "Promtail on every node ships to Loki in S3 with 14-day retention; Grafana gets the datasources.", "q-logging"),
        ("command", "claude", "helm upgrade --install loki grafana/loki -f loki-values.yaml"),
        ("commit", "claude", "observability: loki + promtail"),
    ]),
    ("infra", "2026-03-17T22:10:00Z", [
        ("prompt", "dev", "on-call is miserable, pagerduty fired 140 times last week and almost none of it needed a human"),
        ("note", "claude", "Most pages are CPU > 80% on single pods and 5xx blips shorter than a minute."),
        ("decision", "claude", "Page only on SLO burn rate (2% of the monthly error budget in an hour); everything else becomes a ticket.", "q-alerts"),
        ("commit", "claude", "alertmanager: burn-rate paging, route the rest to jira"),
    ]),
    ("infra", "2026-03-22T09:00:00Z", [
        ("prompt", "dev", "security review flagged that database passwords sit in plain env vars in the deployment yaml"),
        ("decision", "claude", "Secrets come from Vault through the External Secrets Operator; rotation every 30 days, nothing in git.", "q-secrets"),
        ("command", "claude", "kubectl get externalsecrets -A -> 23 synced"),
        ("commit", "claude", "k8s: external-secrets for db credentials"),
    ]),
    ("infra", "2026-03-26T14:00:00Z", [
        ("prompt", "dev", "we need to be able to recover if the primary region goes down. what's our disaster story?"),
        ("decision", "claude", "Nightly snapshots copied to eu-central-1, RDS cross-region read replica, and a runbook tested every quarter: RPO 5 min, RTO 1 h.", "q-dr"),
        ("commit", "claude", "terraform: cross-region replica + snapshot copy"),
    ]),
    ("search-service", "2026-03-05T10:00:00Z", [
        ("prompt", "dev", "search got slow after last week's deploy, p99 went from 80ms to 600ms"),
        ("command", "gemini", "go test -bench=. ./ranker -> BenchmarkScore 3x slower than v1.8"),
        ("note", "gemini", "The new tokenizer allocates a map per document; pprof shows 70% in runtime.mallocgc."),
        ("decision", "gemini", "Reuse a sync.Pool of scratch buffers in the scorer and intern terms once at index time.", "q-latency"),
        ("commit", "gemini", "perf(ranker): pooled buffers, interned terms"),
    ]),
    ("search-service", "2026-03-10T13:30:00Z", [
        ("prompt", "dev", "the same popular queries hit the index thousands of times an hour, can we avoid recomputing them"),
        ("decision", "gemini", "Added a Redis layer keyed by normalised query + filters, TTL 5 minutes, invalidated on reindex.", "q-cache"),
        ("commit", "gemini", "feat: redis result layer with reindex invalidation"),
    ]),
    ("search-service", "2026-03-15T16:20:00Z", [
        ("prompt", "dev", "the index doesn't fit on one machine any more, 180GB and growing"),
        ("decision", "gemini", "Split into 8 shards by hash of tenant id; a coordinator fans out and merges top-k.", "q-sharding"),
        ("command", "gemini", "go run ./cmd/reshard --shards 8 -> done in 41m"),
        ("commit", "gemini", "feat: tenant-hash sharding with fan-out coordinator"),
    ]),
    ("search-service", "2026-03-21T10:45:00Z", [
        ("prompt", "dev", "users complain that typos return nothing. 'recieve' finds zero results"),
        ("decision", "gemini", "Fuzzy matching with Levenshtein automata up to distance 2 for words of 5+ letters, behind the exact match.", "q-typos"),
        ("commit", "gemini", "feat(query): levenshtein automata"),
    ]),
    ("search-service", "2026-03-28T15:00:00Z", [
        ("prompt", "dev", "product wants to know if the new ranking is actually better before we roll it out to everyone"),
        ("decision", "gemini", "Interleaving experiment on 10% of traffic for two weeks, judged by clicks in the top 3.", "q-ab-test"),
        ("commit", "gemini", "feat: team-draft interleaving behind flag ranking_v2"),
    ]),
    ("docs-site", "2026-03-08T11:00:00Z", [
        ("prompt", "dev", "the docs site takes 9 minutes to build, every typo fix is painful"),
        ("command", "claude", "time npm run build -> 8m52s, 1400 pages, image optimisation 6 min"),
        ("decision", "claude", "Moved from Gatsby to Astro with images resized once in CI cache: 9 min -> 70 s.", "q-docs-build"),
        ("commit", "claude", "build: astro migration"),
    ]),
    ("docs-site", "2026-03-14T09:30:00Z", [
        ("prompt", "dev", "people can't find anything in the documentation, the search box is useless"),
        ("decision", "claude", "Pagefind indexes the static output at build time; no server, works offline.", "q-docs-search"),
        ("commit", "claude", "feat: pagefind"),
    ]),
    ("docs-site", "2026-03-19T15:00:00Z", [
        ("prompt", "dev", "broken links keep shipping, customers report 404s from old blog posts"),
        ("decision", "claude", "lychee checks every href in CI and fails the PR; a redirects file maps retired URLs.", "q-broken-links"),
        ("commit", "claude", "ci: lychee link checker + _redirects"),
    ]),
    ("docs-site", "2026-03-24T10:00:00Z", [
        ("prompt", "dev", "screen reader users say the docs are hard to navigate"),
        ("decision", "claude", "Landmarks and skip-to-content, alt text enforced by a lint rule, contrast fixed to WCAG AA; axe runs in CI.", "q-a11y"),
        ("commit", "claude", "a11y: landmarks, alt lint, axe in CI"),
    ]),
]

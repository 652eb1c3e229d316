from ._common import commit, status, vitest_ok

STRIPE_TS = """import { Router } from "express";
import Stripe from "stripe";
import { db } from "../db";
import { config } from "../config";
import { applyLedgerEntry } from "../ledger";

export const stripeWebhooks = Router();
const stripe = new Stripe(config.stripe.apiKey);

stripeWebhooks.post("/stripe", async (req, res) => {
  const sig = req.header("stripe-signature") ?? "";
  const event = stripe.webhooks.constructEvent(req.rawBody, sig, config.stripe.webhookSecret);
  if (event.type === "charge.succeeded") {
    await db.$transaction(async (tx) => {
      await applyLedgerEntry(tx, event.data.object as Stripe.Charge);
    });
  }
  res.sendStatus(200);
});
"""

SCHEMA = """generator client {
  provider = "prisma-client-js"
}

datasource db {
  provider = "postgresql"
  url      = env("DATABASE_URL")
}

model Payment {
  id        String   @id @default(cuid())
  orgId     String
  amount    Int
  currency  String
  status    String
  createdAt DateTime @default(now())

  @@index([orgId, createdAt])
}

model LedgerEntry {
  id        String   @id @default(cuid())
  paymentId String
  delta     Int
  createdAt DateTime @default(now())
}
"""

BANK_TS = """import { request } from "undici";
import { config } from "../config";

export interface PayoutRequest {
  accountId: string;
  amount: number;
  currency: string;
}

export async function createPayout(body: PayoutRequest): Promise<{ id: string }> {
  const res = await request(`${config.bank.baseUrl}/v2/payouts`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
    headersTimeout: 8_000,
  });
  if (res.statusCode >= 300) {
    throw new Error(`bank API ${res.statusCode}`);
  }
  return (await res.body.json()) as { id: string };
}
"""

PAYMENTS_TS = """import { Router } from "express";
import { z } from "zod";
import { db } from "../db";
import { requireAuth } from "../middleware/auth";

export const payments = Router();

const ListQuery = z.object({
  offset: z.coerce.number().int().min(0).default(0),
  limit: z.coerce.number().int().min(1).max(100).default(50),
});

payments.get("/", requireAuth, async (req, res) => {
  const { offset, limit } = ListQuery.parse(req.query);
  const rows = await db.payment.findMany({
    where: { orgId: req.user.orgId },
    orderBy: { createdAt: "desc" },
    skip: offset,
    take: limit,
  });
  res.json({ data: rows, offset, limit });
});
"""

PAYMENTS_TEST = """import { describe, it, expect } from "vitest";
import { api, seedPayments } from "./helpers";

describe("GET /v1/payments", () => {
  it("returns the first page", async () => {
    await seedPayments(120);
    const res = await api.get("/v1/payments?limit=50");
    expect(res.body.data).toHaveLength(50);
  });

  it("returns the second page", async () => {
    const res = await api.get("/v1/payments?offset=50&limit=50");
    expect(res.body.data[0].id).not.toEqual(undefined);
  });
});
"""

WEBHOOK_TEST = """import { describe, it, expect } from "vitest";
import { api, signed, ledgerFor } from "./helpers";

describe("POST /webhooks/stripe", () => {
  it("applies a charge once", async () => {
    const evt = signed({ id: "evt_test_charge_1", type: "charge.succeeded", amount: 1200 });
    await api.post("/webhooks/stripe").set(evt.headers).send(evt.body);
    expect(await ledgerFor("ch_test_1")).toHaveLength(1);
  });

  it("ignores a redelivered event", async () => {
    const evt = signed({ id: "evt_test_charge_1", type: "charge.succeeded", amount: 1200 });
    await api.post("/webhooks/stripe").set(evt.headers).send(evt.body);
    await api.post("/webhooks/stripe").set(evt.headers).send(evt.body);
    expect(await ledgerFor("ch_test_1")).toHaveLength(1);
  });
});
"""


def build(ds):
    h = ds.history("h01", "claude-code", "/home/dev/src/payments-api",
                   "Express + Prisma payments API: idempotent Stripe webhooks, bank payout retries, offset to "
                   "cursor pagination, a flaky webhook test, and an admin export exception.",
                   start="2026-03-02T09:00:00Z")

    # ---- session 1: idempotent webhooks
    s = h.session("2026-03-02T09:14:05Z", mode="default")
    s.prompt("Finance says some Stripe charges show up twice in the ledger. I think the webhook gets redelivered "
             "and we process it again. Can you look at src/webhooks/stripe.ts and make the handler idempotent?")
    s.todo([("Find why redelivered Stripe events are applied twice", "in_progress"),
            ("Make the webhook handler idempotent", "pending"),
            ("Add a regression test for redelivery", "pending")])
    s.read("src/webhooks/stripe.ts", STRIPE_TS)
    s.grep("applyLedgerEntry", "src/webhooks/stripe.ts:5:import { applyLedgerEntry } from \"../ledger\";\n"
           "src/webhooks/stripe.ts:16:      await applyLedgerEntry(tx, event.data.object as Stripe.Charge);\n"
           "src/ledger/index.ts:12:export async function applyLedgerEntry(tx: Tx, charge: Stripe.Charge) {\n"
           "src/jobs/reconcile.ts:41:        await applyLedgerEntry(tx, charge);\n", path="src")
    s.read("prisma/schema.prisma", SCHEMA)
    s.read("tests/webhooks.test.ts", WEBHOOK_TEST)
    e_schema = s.edit("prisma/schema.prisma", """model LedgerEntry {""", """model ProcessedEvent {
  id          String   @id
  type        String
  processedAt DateTime @default(now())
}

model LedgerEntry {""")
    s.bash("npx prisma migrate dev --name webhook_idempotency",
           "Environment variables loaded from .env\nPrisma schema loaded from prisma/schema.prisma\n"
           "Datasource \"db\": PostgreSQL database \"payments_dev\", schema \"public\" at \"localhost:5432\"\n\n"
           "Applying migration `20260302092411_webhook_idempotency`\n\nThe following migration(s) have been created "
           "and applied from new schema changes:\n\nmigrations/\n  \u2514\u2500 20260302092411_webhook_idempotency/\n"
           "    \u2514\u2500 migration.sql\n\nYour database is now in sync with your schema.\n\n"
           "\u2714 Generated Prisma Client (v6.4.1) to ./node_modules/@prisma/client in 212ms\n",
           desc="Create and apply the migration", secs=6.2)
    e_stripe = s.edit("src/webhooks/stripe.ts", """    await db.$transaction(async (tx) => {
      await applyLedgerEntry(tx, event.data.object as Stripe.Charge);
    });""", """    await db.$transaction(async (tx) => {
      // Stripe redelivers events; the unique id makes a second delivery a no-op.
      const seen = await tx.processedEvent.findUnique({ where: { id: event.id } });
      if (seen) return;
      await tx.processedEvent.create({ data: { id: event.id, type: event.type } });
      await applyLedgerEntry(tx, event.data.object as Stripe.Charge);
    });""")
    e_fail1 = s.bash("npm test -- --run tests/webhooks.test.ts",
                     "\n> payments-api@0.9.3 test\n> vitest --run tests/webhooks.test.ts\n\n"
                     " \u276f tests/webhooks.test.ts (2 tests | 1 failed) 611ms\n"
                     "   \u00d7 POST /webhooks/stripe > ignores a redelivered event 233ms\n"
                     "     \u2192 expected 500 to be 200\n\n"
                     " FAIL  tests/webhooks.test.ts > POST /webhooks/stripe > ignores a redelivered event\n"
                     "PrismaClientKnownRequestError: Unique constraint failed on the fields: (`id`)\n"
                     "  code: 'P2002', meta: { modelName: 'ProcessedEvent', target: [ 'id' ] }\n"
                     " \u276f src/webhooks/stripe.ts:18:7\n\n Test Files  1 failed (1)\n      Tests  1 failed | 1 passed (2)\n",
                     code=1, desc="Run webhook tests", secs=3.1)
    s.edit("src/webhooks/stripe.ts", """      const seen = await tx.processedEvent.findUnique({ where: { id: event.id } });
      if (seen) return;
      await tx.processedEvent.create({ data: { id: event.id, type: event.type } });""",
           """      // Two concurrent deliveries can both pass a findUnique; let the insert decide.
      const inserted = await tx.processedEvent.createMany({
        data: [{ id: event.id, type: event.type }],
        skipDuplicates: true,
      });
      if (inserted.count === 0) return;""")
    s.bash("npm test -- --run tests/webhooks.test.ts",
           vitest_ok("payments-api", "0.9.3", [("tests/webhooks.test.ts", 2)], "1.4"), desc="Run webhook tests")
    e_dec1 = s.stop("The handler now records each Stripe event id in a new ProcessedEvent table (unique primary key) "
                    "inside the same transaction as the ledger write, and skips the ledger entry when the insert was a "
                    "duplicate. I chose a Postgres table over a Redis SETNX key so the dedupe record commits atomically "
                    "with the ledger entry; a crash between the two can no longer lose or double a charge. "
                    "createMany with skipDuplicates avoids the P2002 race between concurrent redeliveries.")
    s.prompt("nice. commit it")
    status(s, [" M prisma/schema.prisma", " M src/webhooks/stripe.ts", "?? prisma/migrations/20260302092411_webhook_idempotency/"])
    commit(s, "Make Stripe webhook handling idempotent (processed_events table)",
           ["prisma/schema.prisma", "src/webhooks/stripe.ts", "prisma/migrations/20260302092411_webhook_idempotency/migration.sql"],
           "4e1a9c2", 21, 3, add="-A")
    s.stop("Committed as 4e1a9c2 on main.")
    s.end()

    # ---- session 2: bank client retries
    s = h.session("2026-03-04T14:02:11Z")
    s.prompt("The payouts job fails a few times a day with bank API timeouts (UND_ERR_HEADERS_TIMEOUT). "
             "Add retries with exponential backoff to the bank client, max 3 attempts, only for timeouts and 5xx.")
    s.read("src/clients/bankClient.ts", BANK_TS)
    s.grep("createPayout", "src/clients/bankClient.ts:10:export async function createPayout(body: PayoutRequest): Promise<{ id: string }> {\n"
           "src/jobs/payouts.ts:27:    const payout = await createPayout({ accountId, amount, currency });\n", path="src")
    s.write("src/lib/retry.ts", """export interface RetryOptions {
  retries: number;
  baseMs: number;
  maxMs?: number;
  retryOn: (err: unknown) => boolean;
}

export async function withRetry<T>(fn: () => Promise<T>, opts: RetryOptions): Promise<T> {
  let attempt = 0;
  for (;;) {
    try {
      return await fn();
    } catch (err) {
      attempt += 1;
      if (attempt >= opts.retries || !opts.retryOn(err)) throw err;
      const delay = Math.min(opts.baseMs * 2 ** (attempt - 1), opts.maxMs ?? Infinity);
      await new Promise((r) => setTimeout(r, delay + Math.random() * opts.baseMs));
    }
  }
}
""")
    e_retry3 = s.edit("src/clients/bankClient.ts", """export async function createPayout(body: PayoutRequest): Promise<{ id: string }> {
  const res = await request(`${config.bank.baseUrl}/v2/payouts`, {""",
                      """const isRetryable = (err: unknown) =>
  err instanceof Error && (err.name === "HeadersTimeoutError" || /bank API 5\\d\\d/.test(err.message));

export async function createPayout(body: PayoutRequest): Promise<{ id: string }> {
  return withRetry(() => postPayout(body), { retries: 3, baseMs: 200, retryOn: isRetryable });
}

async function postPayout(body: PayoutRequest): Promise<{ id: string }> {
  const res = await request(`${config.bank.baseUrl}/v2/payouts`, {""")
    s.edit("src/clients/bankClient.ts", """import { config } from "../config";
""", """import { config } from "../config";
import { withRetry } from "../lib/retry";
""")
    s.write("tests/bankClient.test.ts", """import { describe, it, expect, vi } from "vitest";
import { MockAgent, setGlobalDispatcher } from "undici";
import { createPayout } from "../src/clients/bankClient";

describe("createPayout", () => {
  it("retries a 503 and then succeeds", async () => {
    const agent = new MockAgent();
    setGlobalDispatcher(agent);
    const pool = agent.get("https://bank.test");
    pool.intercept({ path: "/v2/payouts", method: "POST" }).reply(503, "");
    pool.intercept({ path: "/v2/payouts", method: "POST" }).reply(201, { id: "po_1" });
    await expect(createPayout({ accountId: "a1", amount: 500, currency: "EUR" })).resolves.toEqual({ id: "po_1" });
  });
});
""")
    s.bash("npm test -- --run tests/bankClient.test.ts",
           vitest_ok("payments-api", "0.9.3", [("tests/bankClient.test.ts", 1)], "0.9"), desc="Run bank client tests")
    s.stop("Added src/lib/retry.ts (withRetry: exponential backoff with jitter) and wrapped createPayout in it: "
           "3 attempts, 200 ms base, retrying only HeadersTimeoutError and 5xx. A 4xx is still thrown at once so "
           "we never double-submit a rejected payout. New test covers 503 then 201.")
    s.prompt("CI says typecheck fails, can you fix it")
    e_tsc = s.bash("npx tsc --noEmit", "src/lib/retry.ts(14,7): error TS2322: Type 'unknown' is not assignable to type 'Error'.\n"
                   "src/clients/bankClient.ts(12,3): error TS7030: Not all code paths return a value.\n\n"
                   "Found 2 errors in 2 files.\n\nErrors  Files\n     1  src/lib/retry.ts:14\n     1  src/clients/bankClient.ts:12\n",
                   code=2, desc="Type-check", secs=7.4)
    s.read("tsconfig.json", """{
  "compilerOptions": {
    "target": "ES2022",
    "module": "NodeNext",
    "strict": true,
    "noImplicitReturns": true,
    "useUnknownInCatchVariables": true,
    "outDir": "dist"
  },
  "include": ["src", "tests"]
}
""")
    s.edit("src/lib/retry.ts", """  for (;;) {
    try {
      return await fn();
    } catch (err) {""", """  for (;;) {
    try {
      return await fn();
    } catch (err: unknown) {""")
    s.edit("src/lib/retry.ts", """      await new Promise((r) => setTimeout(r, delay + Math.random() * opts.baseMs));
    }
  }
}""", """      await new Promise((r) => setTimeout(r, delay + Math.random() * opts.baseMs));
    }
  }
  // unreachable: the loop returns or throws
}""")
    s.bash("npx tsc --noEmit", "", desc="Type-check", secs=6.8)
    commit(s, "Retry bank payouts with exponential backoff",
           ["src/lib/retry.ts", "src/clients/bankClient.ts", "tests/bankClient.test.ts"], "b93d0f7", 58, 2)
    s.stop("Typecheck is clean again: the catch variable is typed unknown explicitly and the retry loop's "
           "fallthrough no longer trips noImplicitReturns. Committed the retry work as b93d0f7.")
    s.end()

    # ---- session 3: offset -> cursor pagination
    s = h.session("2026-03-09T10:31:40Z")
    s.prompt("GET /v1/payments gets really slow past page 200 and the mobile team says rows get skipped or "
             "repeated when new payments arrive while they scroll. Move it from offset to cursor pagination.")
    s.read("src/routes/payments.ts", PAYMENTS_TS)
    s.glob("src/routes/*.ts", ["src/routes/payments.ts", "src/routes/adminPayments.ts", "src/routes/refunds.ts",
                               "src/routes/health.ts"])
    s.bash("psql payments_dev -c \"EXPLAIN ANALYZE SELECT * FROM \\\"Payment\\\" WHERE \\\"orgId\\\" = 'org_42' ORDER BY \\\"createdAt\\\" DESC OFFSET 10000 LIMIT 50\"",
           " Limit  (cost=18233.10..18324.28 rows=50 width=72) (actual time=412.881..413.020 rows=50 loops=1)\n"
           "   ->  Index Scan Backward using \"Payment_orgId_createdAt_idx\" on \"Payment\"  (actual time=0.031..398.112 rows=10050 loops=1)\n"
           "         Index Cond: (\"orgId\" = 'org_42'::text)\n Planning Time: 0.190 ms\n Execution Time: 413.077 ms\n",
           desc="Check the plan for a deep offset")
    s.task("Find offset pagination call sites",
           "List every route under src/ that paginates with skip/offset. Report file:line and the orderBy used. Do not edit.",
           "Found 2 offset-paginated handlers:\n1. src/routes/payments.ts:16 \u2014 skip: offset, orderBy createdAt only.\n"
           "2. src/routes/adminPayments.ts:21 \u2014 skip: (page - 1) * 100, used by the admin CSV export.\n"
           "src/routes/refunds.ts already uses a cursor (id).")
    e_cursor = s.edit("src/routes/payments.ts", """const ListQuery = z.object({
  offset: z.coerce.number().int().min(0).default(0),
  limit: z.coerce.number().int().min(1).max(100).default(50),
});

payments.get("/", requireAuth, async (req, res) => {
  const { offset, limit } = ListQuery.parse(req.query);
  const rows = await db.payment.findMany({
    where: { orgId: req.user.orgId },
    orderBy: { createdAt: "desc" },
    skip: offset,
    take: limit,
  });
  res.json({ data: rows, offset, limit });
});""", """const ListQuery = z.object({
  cursor: z.string().optional(),
  limit: z.coerce.number().int().min(1).max(100).default(50),
});

payments.get("/", requireAuth, async (req, res) => {
  const { cursor, limit } = ListQuery.parse(req.query);
  const rows = await db.payment.findMany({
    where: { orgId: req.user.orgId },
    orderBy: [{ createdAt: "desc" }, { id: "desc" }],
    take: limit + 1,
    ...(cursor ? { cursor: { id: cursor }, skip: 1 } : {}),
  });
  const hasMore = rows.length > limit;
  const page = hasMore ? rows.slice(0, limit) : rows;
  res.json({ data: page, nextCursor: hasMore ? page[page.length - 1].id : null });
});""")
    s.read("tests/payments.test.ts", PAYMENTS_TEST)
    e_pagfail = s.bash("npm test -- --run tests/payments.test.ts",
                       "\n> payments-api@0.9.3 test\n> vitest --run tests/payments.test.ts\n\n"
                       " \u276f tests/payments.test.ts (2 tests | 1 failed) 702ms\n"
                       "   \u00d7 GET /v1/payments > returns the second page 98ms\n"
                       "     \u2192 Cannot read properties of undefined (reading 'id')\n\n"
                       " FAIL  tests/payments.test.ts > GET /v1/payments > returns the second page\n"
                       "TypeError: Cannot read properties of undefined (reading 'id')\n"
                       " \u276f tests/payments.test.ts:13:29\n\n Test Files  1 failed (1)\n      Tests  1 failed | 1 passed (2)\n",
                       code=1, desc="Run payments route tests", secs=3.3)
    s.edit("tests/payments.test.ts", """  it("returns the second page", async () => {
    const res = await api.get("/v1/payments?offset=50&limit=50");
    expect(res.body.data[0].id).not.toEqual(undefined);
  });""", """  it("follows nextCursor without repeating or skipping rows", async () => {
    const first = await api.get("/v1/payments?limit=50");
    const second = await api.get(`/v1/payments?limit=50&cursor=${first.body.nextCursor}`);
    const ids = new Set([...first.body.data, ...second.body.data].map((p) => p.id));
    expect(ids.size).toBe(100);
  });""")
    s.bash("npm test -- --run tests/payments.test.ts",
           vitest_ok("payments-api", "0.9.3", [("tests/payments.test.ts", 2)], "1.2"), desc="Run payments route tests")
    s.bash("npx eslint src/routes tests --max-warnings 0", "", desc="Lint")
    e_dec_cursor = s.stop("GET /v1/payments now uses keyset (cursor) pagination: ordered by [createdAt desc, id desc], "
                          "take limit+1 to compute hasMore, and the cursor row is skipped with skip: 1. The response "
                          "returns nextCursor instead of offset. Offsets made Postgres scan and discard every earlier row "
                          "and shifted under concurrent inserts; a cursor on the unique id is stable. I left "
                          "src/routes/adminPayments.ts on page numbers for now since the CSV export depends on it.")
    s.prompt("update the openapi spec too, and commit")
    s.read("docs/openapi.yaml", """paths:
  /v1/payments:
    get:
      summary: List payments
      parameters:
        - name: offset
          in: query
          schema: { type: integer, minimum: 0, default: 0 }
        - name: limit
          in: query
          schema: { type: integer, minimum: 1, maximum: 100, default: 50 }
      responses:
        "200":
          description: A page of payments
""")
    e_openapi = s.edit("docs/openapi.yaml", """        - name: offset
          in: query
          schema: { type: integer, minimum: 0, default: 0 }""", """        - name: cursor
          in: query
          description: Opaque id from the previous page's nextCursor; omit for the first page.
          schema: { type: string }""")
    s.bash("git diff --stat", " docs/openapi.yaml      |  7 ++++---\n src/routes/payments.ts | 13 ++++++++-----\n"
           " tests/payments.test.ts |  8 +++++---\n 3 files changed, 18 insertions(+), 10 deletions(-)\n", desc="Diff stat")
    commit(s, "payments: cursor pagination instead of offset",
           ["src/routes/payments.ts", "tests/payments.test.ts", "docs/openapi.yaml"], "7c20e5a", 24, 12)
    s.stop("Spec updated (cursor replaces offset) and committed as 7c20e5a.")
    s.end()

    # ---- session 4: flaky webhook test, retry bump
    s = h.session("2026-03-16T16:05:27Z")
    s.prompt("tests/webhooks.test.ts fails maybe 1 in 5 runs on CI. can you figure out why")
    s.bash("for i in $(seq 1 10); do npx vitest --run tests/webhooks.test.ts --reporter=dot || echo FAIL-$i; done | tail -5",
           "\u00b7\u00b7\n\u00b7x\nFAIL-4\n\u00b7\u00b7\n\u00b7\u00b7\n", desc="Run the webhook tests 10 times", secs=21.0)
    e_flaky = s.bash("npx vitest --run tests/webhooks.test.ts",
                     " \u276f tests/webhooks.test.ts (2 tests | 1 failed) 540ms\n"
                     "   \u00d7 POST /webhooks/stripe > applies a charge once 61ms\n"
                     "     \u2192 expected [ { id: 'le_1' }, { id: 'le_2' } ] to have a length of 1 but got 2\n\n"
                     " Test Files  1 failed (1)\n      Tests  1 failed | 1 passed (2)\n", code=1,
                     desc="Reproduce the flaky failure", secs=2.6)
    s.read("vitest.config.ts", """import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    globalSetup: "./tests/globalSetup.ts",
    pool: "threads",
    fileParallelism: true,
  },
});
""")
    s.read("tests/reconcile.test.ts", """import { describe, it, expect } from "vitest";
import { seedCharge, runReconcile, ledgerFor } from "./helpers";

describe("reconcile job", () => {
  it("backfills a missing ledger entry", async () => {
    await seedCharge("ch_test_1", 1200);
    await runReconcile();
    expect(await ledgerFor("ch_test_1")).toHaveLength(1);
  });
});
""")
    s.grep("ch_test_1", "tests/webhooks.test.ts:8:    expect(await ledgerFor(\"ch_test_1\")).toHaveLength(1);\n"
           "tests/webhooks.test.ts:15:    expect(await ledgerFor(\"ch_test_1\")).toHaveLength(1);\n"
           "tests/reconcile.test.ts:22:    await seedCharge(\"ch_test_1\", 1200);\n", path="tests")
    e_flakyfix = s.edit("tests/webhooks.test.ts", """describe("POST /webhooks/stripe", () => {
  it("applies a charge once", async () => {
    const evt = signed({ id: "evt_test_charge_1", type: "charge.succeeded", amount: 1200 });
    await api.post("/webhooks/stripe").set(evt.headers).send(evt.body);
    expect(await ledgerFor("ch_test_1")).toHaveLength(1);
  });""", """describe("POST /webhooks/stripe", () => {
  // Each test gets its own charge id: tests/reconcile.test.ts seeds ch_test_1 in parallel.
  it("applies a charge once", async () => {
    const charge = `ch_${randomUUID()}`;
    const evt = signed({ id: `evt_${randomUUID()}`, type: "charge.succeeded", amount: 1200, charge });
    await api.post("/webhooks/stripe").set(evt.headers).send(evt.body);
    expect(await ledgerFor(charge)).toHaveLength(1);
  });""")
    s.edit("tests/webhooks.test.ts", """import { describe, it, expect } from "vitest";""",
           """import { randomUUID } from "node:crypto";
import { describe, it, expect } from "vitest";""")
    s.bash("for i in $(seq 1 20); do npx vitest --run tests/webhooks.test.ts tests/reconcile.test.ts --reporter=dot || echo FAIL-$i; done | grep -c FAIL",
           "0\n", desc="Run both suites 20 times", secs=44.0)
    s.bash("npm test -- --run", vitest_ok("payments-api", "0.9.3", [("tests/webhooks.test.ts", 2), ("tests/reconcile.test.ts", 1),
           ("tests/payments.test.ts", 2), ("tests/bankClient.test.ts", 1), ("tests/adminPayments.test.ts", 3)], "4.8"),
           desc="Full test suite", secs=9.5)
    s.stop("The flake was shared test data, not the handler: tests/reconcile.test.ts also seeds a ledger entry for "
           "ch_test_1 and runs in parallel (fileParallelism), so ledgerFor('ch_test_1') sometimes saw 2 rows. The "
           "webhook test now uses a random charge id per test. 20 consecutive runs of both files pass.")
    s.prompt("Also the bank sandbox in staging is still flaky. Bump the payout retries to 5 and cap the backoff at 5 seconds.")
    s.read("src/clients/bankClient.ts")
    e_retry5 = s.edit("src/clients/bankClient.ts", "{ retries: 3, baseMs: 200, retryOn: isRetryable }",
                      "{ retries: 5, baseMs: 200, maxMs: 5_000, retryOn: isRetryable }")
    s.bash("npm test -- --run tests/bankClient.test.ts",
           vitest_ok("payments-api", "0.9.3", [("tests/bankClient.test.ts", 1)], "0.9"), desc="Run bank client tests")
    commit(s, "Fix flaky webhook test; payouts retry 5x with 5s cap",
           ["tests/webhooks.test.ts", "src/clients/bankClient.ts"], "d0a4b18", 9, 5)
    s.stop("createPayout now makes up to 5 attempts (200 ms base, doubled each time, capped at 5 s, plus jitter). "
           "Committed both changes as d0a4b18.")
    s.end()

    # ---- session 5: admin export exception
    s = h.session("2026-03-27T11:20:02Z")
    e_p_admin = s.prompt("Finance's admin export needs page numbers (they jump to page 40 of the report). Keep cursors on the "
             "public API, but leave /v1/admin/payments on offset pages. Cap it at 10k rows so nobody can pull the "
             "whole table that way.")
    s.bash("git log --oneline -5", "d0a4b18 Fix flaky webhook test; payouts retry 5x with 5s cap\n"
           "7c20e5a payments: cursor pagination instead of offset\nb93d0f7 Retry bank payouts with exponential backoff\n"
           "4e1a9c2 Make Stripe webhook handling idempotent (processed_events table)\n1d77e0b Add refunds route\n",
           desc="Recent history")
    s.read("src/routes/adminPayments.ts", """import { Router } from "express";
import { z } from "zod";
import { db } from "../db";
import { requireRole } from "../middleware/auth";

export const adminPayments = Router();

const Query = z.object({ page: z.coerce.number().int().min(1).default(1) });

adminPayments.get("/", requireRole("finance"), async (req, res) => {
  const { page } = Query.parse(req.query);
  const rows = await db.payment.findMany({
    orderBy: { createdAt: "desc" },
    skip: (page - 1) * 100,
    take: 100,
  });
  res.json({ data: rows, page });
});
""")
    e_cap = s.edit("src/routes/adminPayments.ts", """const Query = z.object({ page: z.coerce.number().int().min(1).default(1) });""",
                   """// Finance needs page numbers for the export; 100 pages x 100 rows = a 10k row ceiling.
const MAX_PAGE = 100;
const Query = z.object({ page: z.coerce.number().int().min(1).max(MAX_PAGE).default(1) });""")
    s.edit("src/routes/adminPayments.ts", """    orderBy: { createdAt: "desc" },
    skip: (page - 1) * 100,""", """    orderBy: [{ createdAt: "desc" }, { id: "desc" }],
    skip: (page - 1) * 100,""")
    s.grep("adminPayments", "src/app.ts:14:import { adminPayments } from \"./routes/adminPayments\";\n"
           "src/app.ts:31:app.use(\"/v1/admin/payments\", adminPayments);\n"
           "tests/adminPayments.test.ts:3:describe(\"GET /v1/admin/payments\", () => {\n", path="src")
    s.read("tests/adminPayments.test.ts", """import { describe, it, expect } from "vitest";
import { adminApi, seedPayments } from "./helpers";
describe("GET /v1/admin/payments", () => {
  it("pages by number", async () => {
    await seedPayments(250);
    const res = await adminApi.get("/v1/admin/payments?page=3");
    expect(res.body.data).toHaveLength(50);
  });
});
""")
    s.edit("tests/adminPayments.test.ts", """    expect(res.body.data).toHaveLength(50);
  });""", """    expect(res.body.data).toHaveLength(50);
  });

  it("rejects pages past the 10k row cap", async () => {
    const res = await adminApi.get("/v1/admin/payments?page=101");
    expect(res.status).toBe(400);
  });""")
    s.bash("npm test -- --run tests/adminPayments.test.ts",
           vitest_ok("payments-api", "0.9.4", [("tests/adminPayments.test.ts", 3)], "1.0"), desc="Run admin tests")
    e_dec_admin = s.stop("Kept offset pages only on /v1/admin/payments, capped at page 100 (10,000 rows) so the "
                         "deep-offset cost stays bounded, and added id as a tie-breaker so pages are deterministic. "
                         "The public /v1/payments stays on cursors.")
    s.prompt("push it")
    s.bash("npm test -- --run", vitest_ok("payments-api", "0.9.4", [("tests/webhooks.test.ts", 2), ("tests/reconcile.test.ts", 1),
           ("tests/payments.test.ts", 2), ("tests/bankClient.test.ts", 1), ("tests/adminPayments.test.ts", 3)], "4.6"),
           desc="Full test suite", secs=9.1)
    commit(s, "admin payments: keep page numbers, cap at 100 pages", ["src/routes/adminPayments.ts", "tests/adminPayments.test.ts"],
           "91f6c3e", 9, 2)
    s.read("CHANGELOG.md", """# Changelog

## Unreleased
- payments: `GET /v1/payments` paginates with `cursor`/`nextCursor` (offset removed)
- payouts: retries with backoff
""")
    s.edit("CHANGELOG.md", """- payouts: retries with backoff
""", """- payouts: retries with backoff
- admin: `GET /v1/admin/payments` keeps `page`, max page 100
""")
    s.bash("git commit -am \"changelog: admin pagination cap\"", "[main 0b3e7d9] changelog: admin pagination cap\n 1 file changed, 1 insertion(+)\n",
           desc="Commit changelog")
    s.bash("git push origin main", "", stderr="To github.com:acme/payments-api.git\n   d0a4b18..0b3e7d9  main -> main\n",
           desc="Push")
    s.stop("Pushed 91f6c3e and the changelog entry (0b3e7d9) to origin/main.")
    s.end()

    # ---- questions
    h.q("fix_location", "Where did we fix Stripe charges being applied twice to the ledger?",
        "duplicate stripe charges",
        "src/webhooks/stripe.ts: the handler inserts the event id into ProcessedEvent (createMany skipDuplicates) "
        "in the ledger transaction and returns early on a duplicate.",
        ["src/webhooks/stripe.ts"], [e_stripe])
    h.q("decision", "Why did we dedupe webhook events in Postgres instead of using Redis?",
        "webhook dedupe redis",
        "So the dedupe record commits atomically with the ledger entry in the same transaction.",
        ["commits atomically"], [e_dec1])
    h.q("failed_command", "What error did the redelivered-webhook test hit on the first try of the idempotency fix?",
        "webhook test error",
        "P2002 unique constraint failure on ProcessedEvent.id (expected 500 to be 200).",
        ["P2002"], [e_fail1])
    h.q("failed_command", "Which typecheck errors did we get after adding the retry helper?",
        "typecheck errors retry",
        "npx tsc --noEmit: TS2322 in src/lib/retry.ts and TS7030 in src/clients/bankClient.ts.",
        ["TS2322", "TS7030"], [e_tsc])
    h.q("knowledge_update", "How many attempts does the bank payout client make now?",
        "payout retries",
        "5 attempts (was 3), 200 ms base backoff capped at 5 s.",
        ["retries: 5"], [e_retry5])
    h.q("decision", "Why did we move the payments list off offset pagination?",
        "offset pagination",
        "Deep offsets scan and discard earlier rows and shift when new payments arrive; a cursor on the unique id is stable.",
        ["nextCursor"], [e_dec_cursor])
    h.q("file_history", "Which files did we change when we switched payments to cursors?",
        "cursor pagination",
        "src/routes/payments.ts, tests/payments.test.ts and docs/openapi.yaml.",
        ["src/routes/payments.ts", "docs/openapi.yaml"], [e_cursor, e_openapi])
    h.q("temporal", "On the day we introduced cursor pagination, which test broke?",
        "pagination test failure",
        "tests/payments.test.ts 'returns the second page' (TypeError reading 'id'), because it still used ?offset=.",
        ["returns the second page"], [e_pagfail])
    h.q("fix_location", "What was the root cause of the flaky webhook test and where was it fixed?",
        "flaky webhook test",
        "Shared charge id ch_test_1 with tests/reconcile.test.ts running in parallel; fixed in tests/webhooks.test.ts "
        "with random ids.",
        ["tests/webhooks.test.ts"], [e_flakyfix])
    h.q("decision", "Why does the admin payments endpoint still use page numbers?",
        "admin export pages",
        "Finance's export needs to jump to page numbers; it stays on offset pages but is capped at 100 pages / 10k rows.",
        ["page numbers"], [e_p_admin, e_dec_admin])

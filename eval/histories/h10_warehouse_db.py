from ._common import checks, commit, orient

MIGRATE = "migrate -path migrations -database \"$WAREHOUSE_DB_URL\""


def build(ds):
    h = ds.history("h10", "claude-code", "/home/dev/src/warehouse-db",
                   "Postgres schema migrations (golang-migrate) for the warehouse DB: a concurrent index, a batched "
                   "backfill, monthly partitioning of events, a reverted column rename, and lock timeouts.",
                   start="2026-04-20T08:00:00Z")
    h.commits = [("e1a04c7", "000041 add shipments.carrier_code"), ("7b93d2f", "000042 orders.status check constraint"),
                 ("c50f8e6", "ci: run migrations against a pg16 container")]

    # ---- s1: concurrent index
    s = h.session("2026-04-20T09:35:10Z", mode="default")
    s.prompt("The customer orders page does a seq scan on orders (180M rows). Add an index on (customer_id, created_at desc) "
             "without locking writes in prod.")
    orient(s)
    s.bash("ls migrations | tail -4", "000041_shipments_carrier_code.down.sql\n000041_shipments_carrier_code.up.sql\n"
           "000042_orders_status_check.down.sql\n000042_orders_status_check.up.sql\n", desc="Latest migrations")
    s.write("migrations/000043_orders_customer_created_idx.up.sql",
            "CREATE INDEX CONCURRENTLY IF NOT EXISTS orders_customer_created_idx\n    ON orders (customer_id, created_at DESC);\n")
    s.write("migrations/000043_orders_customer_created_idx.down.sql", "DROP INDEX CONCURRENTLY IF EXISTS orders_customer_created_idx;\n")
    e_concurrently = s.bash(f"{MIGRATE} up 1", "", code=1, stderr=(
        "error: migration failed: CREATE INDEX CONCURRENTLY cannot run inside a transaction block in line 0: "
        "CREATE INDEX CONCURRENTLY IF NOT EXISTS orders_customer_created_idx\n    ON orders (customer_id, created_at DESC);\n"
        " (details: pq: CREATE INDEX CONCURRENTLY cannot run inside a transaction block)\n"), desc="Apply on the local copy", secs=2.0)
    s.bash(f"{MIGRATE} version", "43 (dirty)\n", desc="Migration version")
    s.web_fetch("https://github.com/golang-migrate/migrate/blob/master/database/postgres/TUTORIAL.md",
                "How do I run CREATE INDEX CONCURRENTLY in a golang-migrate postgres migration?",
                "The postgres driver wraps each migration file in a transaction only when the file contains multiple statements... "
                "For statements that cannot run in a transaction, add `x-multi-statement=true` to the database URL or keep the "
                "file to a single statement; then fix a dirty state with `migrate force <version>`.")
    e_force = s.bash(f"{MIGRATE} force 42 && {MIGRATE}'&x-multi-statement=true' up 1",
                     "43/u orders_customer_created_idx (41m12.771s)\n", desc="Reset the dirty version and apply with multi-statement mode", secs=2472.0)
    s.bash("psql \"$WAREHOUSE_DB_URL\" -c \"SELECT indexrelid::regclass, indisvalid FROM pg_index WHERE indexrelid = 'orders_customer_created_idx'::regclass\"",
           "        indexrelid         | indisvalid \n---------------------------+------------\n orders_customer_created_idx | t\n(1 row)\n", desc="Index is valid")
    s.read("Makefile", """migrate-up:
\tmigrate -path migrations -database "$(WAREHOUSE_DB_URL)" up
""")
    e_mkfile = s.edit("Makefile", """\tmigrate -path migrations -database "$(WAREHOUSE_DB_URL)" up""",
                      """\t# x-multi-statement: run each statement outside a transaction (needed for CREATE INDEX CONCURRENTLY)
\tmigrate -path migrations -database "$(WAREHOUSE_DB_URL)&x-multi-statement=true" up""")
    s.stop("golang-migrate ran the file in a transaction, and CREATE INDEX CONCURRENTLY can't run inside one, so the "
           "first attempt failed and left version 43 dirty. I forced the version back to 42 and applied with "
           "x-multi-statement=true, which the Makefile now always passes. The index took 41 minutes on the local copy and is valid.")
    s.prompt("commit")
    checks(s, "sql")
    commit(s, "000043 orders (customer_id, created_at desc) index, concurrently", ["migrations/000043_orders_customer_created_idx.up.sql",
           "migrations/000043_orders_customer_created_idx.down.sql", "Makefile"], "a8f31d0", 5, 1)
    s.stop("Committed as a8f31d0.")
    s.end()

    # ---- s2: backfill shipped_at
    s = h.session("2026-04-23T13:50:42Z", mode="acceptEdits")
    s.prompt("We added orders.shipped_at last month but it's NULL for old orders. Backfill it from shipments.delivered_at... "
             "no, from the first shipment's created_at. It must not hold long locks, prod is live.")
    orient(s)
    s.bash("psql \"$WAREHOUSE_DB_URL\" -Atc \"SELECT count(*) FROM orders WHERE shipped_at IS NULL AND status IN ('shipped','delivered')\"",
           "62114907\n", desc="Rows to backfill")
    e_backfill = s.write("scripts/backfill_shipped_at.sql", """-- Backfill orders.shipped_at in batches so no statement holds row locks for long.
-- Run with: psql -v batch=5000 -f scripts/backfill_shipped_at.sql
DO $$
DECLARE
  n int;
BEGIN
  LOOP
    WITH batch AS (
      SELECT o.id FROM orders o
      WHERE o.shipped_at IS NULL AND o.status IN ('shipped', 'delivered')
      LIMIT :batch
      FOR UPDATE SKIP LOCKED
    )
    UPDATE orders o SET shipped_at = s.first_created
    FROM batch b
    JOIN LATERAL (SELECT min(created_at) AS first_created FROM shipments WHERE order_id = b.id) s ON true
    WHERE o.id = b.id;
    GET DIAGNOSTICS n = ROW_COUNT;
    EXIT WHEN n = 0;
    COMMIT;
    PERFORM pg_sleep(0.05);
  END LOOP;
END $$;
""")
    e_do_err = s.bash("psql \"$WAREHOUSE_DB_URL\" -v batch=5000 -f scripts/backfill_shipped_at.sql", "", code=3, stderr=(
        "psql:scripts/backfill_shipped_at.sql:23: ERROR:  syntax error at or near \":\"\nLINE 12:       LIMIT :batch\n                    ^\n"), desc="Run the backfill", secs=1.0)
    s.edit("scripts/backfill_shipped_at.sql", """DO $$
DECLARE
  n int;
BEGIN""", """-- psql variables are not interpolated inside DO bodies; use a procedure argument instead.
CREATE OR REPLACE PROCEDURE backfill_shipped_at(batch int) LANGUAGE plpgsql AS $$
DECLARE
  n int;
BEGIN""")
    s.edit("scripts/backfill_shipped_at.sql", "      LIMIT :batch", "      LIMIT batch")
    s.edit("scripts/backfill_shipped_at.sql", """  END LOOP;
END $$;""", """  END LOOP;
END $$;

CALL backfill_shipped_at(:batch);""")
    s.bash("psql \"$WAREHOUSE_DB_URL\" -v batch=5000 -f scripts/backfill_shipped_at.sql", "CREATE PROCEDURE\nCALL\n", desc="Run the backfill (staging)", secs=5520.0)
    s.stop("scripts/backfill_shipped_at.sql backfills shipped_at from the first shipment's created_at in batches of "
           "5000 rows (FOR UPDATE SKIP LOCKED, commit per batch, 50 ms pause). It's a procedure because psql's :batch "
           "variable isn't substituted inside a DO body, which is why the first run hit a syntax error. On staging it "
           "took 1h32m for 62M rows.")
    s.prompt("commit the script")
    commit(s, "Batched backfill for orders.shipped_at", ["scripts/backfill_shipped_at.sql"], "4c2d7e9", 29, 0)
    s.stop("Committed as 4c2d7e9.")
    s.end()

    # ---- s3: partition events
    s = h.session("2026-04-29T10:12:03Z", mode="acceptEdits")
    e_p_part = s.prompt("events is 2.1 TB and the nightly DELETE of rows older than 18 months takes hours and bloats "
                        "everything. Partition it by month so retention becomes DROP PARTITION. Use native declarative "
                        "partitioning with pg_partman for creating future partitions, not a homegrown cron.")
    orient(s)
    s.bash("psql \"$WAREHOUSE_DB_URL\" -c '\\d+ events' | head -12", "                                          Table \"public.events\"\n"
           "   Column    |           Type           | Nullable | Default\n-------------+--------------------------+----------+---------\n"
           " id          | bigint                   | not null | nextval('events_id_seq'::regclass)\n occurred_at | timestamp with time zone | not null |\n"
           " kind        | text                     | not null |\n payload     | jsonb                    |          |\nIndexes:\n    \"events_pkey\" PRIMARY KEY, btree (id)\n",
           desc="Current events table")
    e_part = s.write("migrations/000044_events_partitioned.up.sql", """CREATE EXTENSION IF NOT EXISTS pg_partman SCHEMA partman;

CREATE TABLE events_p (
    id          bigint      NOT NULL DEFAULT nextval('events_id_seq'),
    occurred_at timestamptz NOT NULL,
    kind        text        NOT NULL,
    payload     jsonb,
    PRIMARY KEY (id, occurred_at)
) PARTITION BY RANGE (occurred_at);

SELECT partman.create_parent(
    p_parent_table := 'public.events_p',
    p_control      := 'occurred_at',
    p_interval     := '1 month',
    p_premake      := 3,
    p_start_partition := '2024-10-01'
);

UPDATE partman.part_config
   SET retention = '18 months', retention_keep_table = false
 WHERE parent_table = 'public.events_p';
""")
    s.write("migrations/000044_events_partitioned.down.sql", "SELECT partman.undo_partition('public.events_p', p_keep_table := false);\nDROP TABLE IF EXISTS events_p;\n")
    e_pk_err = s.bash(f"{MIGRATE}'&x-multi-statement=true' up 1", "", code=1, stderr=(
        "error: migration failed in line 3: CREATE TABLE events_p (...) (details: pq: unique constraint on partitioned table must include all partitioning columns)\n"),
        desc="Apply locally", secs=1.0)
    s.bash("grep -n 'PRIMARY KEY' migrations/000044_events_partitioned.up.sql", "8:    PRIMARY KEY (id, occurred_at)\n", desc="Check the PK")
    s.bash("git stash list; psql \"$WAREHOUSE_DB_URL\" -Atc \"SELECT conname FROM pg_constraint WHERE conrelid='events_p'::regclass\"", "", code=1,
           stderr="ERROR:  relation \"events_p\" does not exist\n", desc="Did a half-created table remain")
    s.bash("cat -A migrations/000044_events_partitioned.up.sql | sed -n '3,9p'", "CREATE TABLE events_p ($\n    id          bigint      NOT NULL DEFAULT nextval('events_id_seq'),$\n"
           "    occurred_at timestamptz NOT NULL,$\n    kind        text        NOT NULL,$\n    payload     jsonb,$\n    PRIMARY KEY (id, occurred_at)$\n) PARTITION BY RANGE (occurred_at);$\n",
           desc="Look for stray characters")
    s.bash("psql \"$WAREHOUSE_DB_URL\" -Atc 'SELECT version()'; " + MIGRATE + " version", "PostgreSQL 11.22 on x86_64-pc-linux-gnu\n44 (dirty)\n",
           desc="Server version")
    s.stop("The PK already includes occurred_at, so the error didn't make sense until I checked the server: the local "
           "container is PostgreSQL 11, where that check was stricter with DEFAULT expressions on partitioned tables. "
           "Prod and CI run 16. Version 44 is dirty locally; I need to switch the local container to 16 and force 43.")
    s.prompt("yeah use the pg16 image like CI, then apply")
    s.bash("docker compose down -v && sed -i 's#postgres:11-alpine#postgres:16-alpine#' docker-compose.yml && docker compose up -d db && sleep 5 && make migrate-up",
           "44/u events_partitioned (312.4ms)\n", desc="Recreate the local DB on Postgres 16 and migrate", secs=40.0)
    s.bash("psql \"$WAREHOUSE_DB_URL\" -Atc \"SELECT count(*) FROM pg_inherits WHERE inhparent='events_p'::regclass\"", "23\n", desc="Partitions created")
    s.write("scripts/move_events_to_partitions.md", """# Moving rows into events_p (run by hand, off-peak)

1. `CALL partman.partition_data_proc('public.events_p', p_source_table := 'public.events', p_batch := 200, p_interval := '1 day');`
2. Compare counts per month, then `ALTER TABLE events RENAME TO events_old; ALTER TABLE events_p RENAME TO events;`
3. Drop events_old after a week.
""")
    s.stop("Local DB now uses postgres:16-alpine like CI and migration 44 applies: events_p is range-partitioned by month "
           "on occurred_at, pg_partman premakes 3 months and drops partitions older than 18 months (retention_keep_table "
           "= false), so the nightly DELETE goes away. scripts/move_events_to_partitions.md has the manual data move.")
    s.prompt("commit")
    commit(s, "000044 events partitioned by month (pg_partman, 18 month retention)", ["migrations/000044_events_partitioned.up.sql",
           "migrations/000044_events_partitioned.down.sql", "scripts/move_events_to_partitions.md", "docker-compose.yml"], "3e7b0c5", 36, 1)
    s.stop("Committed as 3e7b0c5.")
    s.end()

    # ---- s4: revert rename
    s = h.session("2026-05-06T08:20:27Z", mode="acceptEdits")
    e_p_revert = s.prompt("Migration 42... no, 45 renamed customers.customer_ref to external_ref yesterday and every Looker "
                          "dashboard on customers broke. BI can't update them this week. Revert the rename with a new "
                          "migration (don't edit 45, it already ran in prod).")
    orient(s)
    s.read("migrations/000045_customers_external_ref.up.sql", "ALTER TABLE customers RENAME COLUMN customer_ref TO external_ref;\n")
    s.grep("external_ref", "migrations/000045_customers_external_ref.up.sql:1:ALTER TABLE customers RENAME COLUMN customer_ref TO external_ref;\n"
           "views/customer_summary.sql:4:    c.external_ref,\n", path=".")
    e_revert = s.write("migrations/000046_revert_customers_external_ref.up.sql",
                       "-- Revert 000045: BI dashboards still read customer_ref. Rename again once Looker is migrated.\n"
                       "ALTER TABLE customers RENAME COLUMN external_ref TO customer_ref;\n\n"
                       "CREATE OR REPLACE VIEW customer_summary AS\nSELECT c.id, c.customer_ref, c.name, count(o.id) AS orders\n"
                       "FROM customers c LEFT JOIN orders o ON o.customer_id = c.id\nGROUP BY c.id;\n")
    s.write("migrations/000046_revert_customers_external_ref.down.sql", "ALTER TABLE customers RENAME COLUMN customer_ref TO external_ref;\n")
    s.bash("make migrate-up && psql \"$WAREHOUSE_DB_URL\" -c '\\d customers' | grep _ref", "46/u revert_customers_external_ref (18.2ms)\n"
           " customer_ref | text                     |           |          |\n", desc="Apply locally")
    s.stop("Added 000046_revert_customers_external_ref which renames external_ref back to customer_ref and recreates "
           "customer_summary with the old column, leaving 000045 untouched since it already ran in prod. The rename "
           "can come back later as a new migration once the Looker models are updated.")
    s.prompt("commit")
    commit(s, "000046 revert customer_ref rename (BI dashboards)", ["migrations/000046_revert_customers_external_ref.up.sql",
           "migrations/000046_revert_customers_external_ref.down.sql"], "91a6f2b", 10, 0)
    s.stop("Committed as 91a6f2b.")
    s.end()

    # ---- s5: lock timeout
    s = h.session("2026-05-12T22:05:50Z", mode="acceptEdits")
    s.prompt("The deploy job failed on migration 47 (add NOT NULL default to orders.channel) with a lock timeout. "
             "What happened and how do we make it safe?")
    orient(s)
    e_locktimeout = s.bash("gh run view 14102233871 --log-failed | tail -4", "migrate\tRun make migrate-up\terror: migration failed in line 1: "
                           "ALTER TABLE orders ADD COLUMN channel text NOT NULL DEFAULT 'web' (details: pq: canceling statement due to lock timeout)\n"
                           "migrate\tRun make migrate-up\tmake: *** [Makefile:2: migrate-up] Error 1\n", desc="Failed deploy log")
    s.bash("psql \"$WAREHOUSE_DB_URL\" -Atc \"SHOW lock_timeout\"; psql \"$WAREHOUSE_DB_URL\" -Atc \"SELECT pid, state, now()-xact_start FROM pg_stat_activity "
           "WHERE query ILIKE '%orders%' AND state <> 'idle' ORDER BY 3 DESC LIMIT 3\"", "2s\n81231|idle in transaction|00:47:12.5521\n", desc="Lock timeout and long transactions")
    s.read("migrations/000047_orders_channel.up.sql", "ALTER TABLE orders ADD COLUMN channel text NOT NULL DEFAULT 'web';\n")
    e_lockfix = s.write("migrations/000047_orders_channel.up.sql", """-- ADD COLUMN with a constant default is metadata-only on PG 11+, but it still needs an
-- ACCESS EXCLUSIVE lock. Wait at most 5s for it and retry instead of queueing behind a long transaction.
SET lock_timeout = '5s';
ALTER TABLE orders ADD COLUMN IF NOT EXISTS channel text NOT NULL DEFAULT 'web';
""")
    s.read("Makefile")
    s.edit("Makefile", """\tmigrate -path migrations -database "$(WAREHOUSE_DB_URL)&x-multi-statement=true" up""",
           """\t# retry a migration that lost the lock race (lock_timeout) up to 5 times
\tfor i in 1 2 3 4 5; do migrate -path migrations -database "$(WAREHOUSE_DB_URL)&x-multi-statement=true" up && exit 0; \\
\t  migrate -path migrations -database "$(WAREHOUSE_DB_URL)" force $$(($$(ls migrations/*.up.sql | wc -l) - 1)); sleep 30; done; exit 1""")
    s.stop("The ALTER needed an ACCESS EXCLUSIVE lock on orders, but an 'idle in transaction' session (pid 81231, 47 "
           "minutes) held a conflicting lock, so it hit the 2 s lock_timeout. Migration 47 now sets lock_timeout = 5s "
           "and is idempotent (IF NOT EXISTS), and make migrate-up retries up to 5 times, 30 s apart. Separately, "
           "that idle-in-transaction session is a bug in the reporting job; idle_in_transaction_session_timeout would catch it.")
    s.prompt("set idle_in_transaction_session_timeout to 10min for the reporting role in a migration too, then commit")
    s.write("migrations/000048_reporting_idle_timeout.up.sql", "ALTER ROLE reporting SET idle_in_transaction_session_timeout = '10min';\n")
    s.write("migrations/000048_reporting_idle_timeout.down.sql", "ALTER ROLE reporting RESET idle_in_transaction_session_timeout;\n")
    commit(s, "000047 lock_timeout + retry; 000048 idle tx timeout for reporting", ["migrations/000047_orders_channel.up.sql", "Makefile",
           "migrations/000048_reporting_idle_timeout.up.sql", "migrations/000048_reporting_idle_timeout.down.sql"], "d2c84a1", 12, 2)
    s.stop("Committed as d2c84a1.")
    s.end()

    h.q("failed_command", "Why did the orders index migration fail the first time?", "index migration failed",
        "CREATE INDEX CONCURRENTLY cannot run inside a transaction block (golang-migrate wrapped it).",
        ["cannot run inside a transaction block"], [e_concurrently])
    h.q("fix_location", "How did we get the concurrent index migration to run?", "concurrent index migration",
        "migrate force 42 then apply with x-multi-statement=true; the Makefile now always passes x-multi-statement=true.",
        ["x-multi-statement=true"], [e_force, e_mkfile])
    h.q("failed_command", "What error did the shipped_at backfill script hit at first?", "backfill script error",
        "syntax error at or near \":\" (LIMIT :batch inside a DO body).", ["syntax error at or near"], [e_do_err])
    h.q("decision", "Why did we partition the events table and with what tooling?", "events partitioning",
        "The nightly 18-month DELETE took hours and bloated the table; monthly declarative partitions with pg_partman make retention a DROP.",
        ["pg_partman"], [e_p_part])
    h.q("temporal", "What went wrong the first time we applied the events partitioning migration locally?", "partition migration error",
        "unique constraint on partitioned table must include all partitioning columns (local container was Postgres 11).",
        ["must include all partitioning columns"], [e_pk_err])
    h.q("decision", "Why was the customer_ref rename rolled back, and how?", "column rename revert",
        "Looker dashboards broke; reverted with a new migration 000046 instead of editing 000045.",
        ["Looker"], [e_p_revert, e_revert])
    h.q("failed_command", "What made the deploy fail on the orders.channel migration?", "deploy migration lock",
        "canceling statement due to lock timeout, behind an idle-in-transaction session.", ["lock timeout"], [e_locktimeout])
    h.q("file_history", "What did we change in migration 47 after the deploy failure?", "migration 47",
        "migrations/000047_orders_channel.up.sql: SET lock_timeout = '5s' and ADD COLUMN IF NOT EXISTS.",
        ["000047_orders_channel.up.sql", "lock_timeout"], [e_lockfix])
    h.q("file_history", "Which script backfills orders.shipped_at?", "shipped_at backfill",
        "scripts/backfill_shipped_at.sql (batches of 5000, FOR UPDATE SKIP LOCKED).", ["scripts/backfill_shipped_at.sql"], [e_backfill])

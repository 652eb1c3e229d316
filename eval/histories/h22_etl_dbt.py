from ._common import checks, commit, orient

STG_ORDERS = """with source as (
    select * from {{ source('shop', 'orders') }}
),

renamed as (
    select
        id as order_id,
        customer_id,
        status,
        total_cents / 100.0 as total,
        created_at,
        updated_at
    from source
)

select * from renamed
"""

FCT_SESSIONS = """{{ config(materialized='incremental', unique_key='session_id') }}

select
    session_id,
    user_id,
    min(event_at) as started_at,
    max(event_at) as ended_at,
    count(*) as events
from {{ ref('stg_events') }}
{% if is_incremental() %}
where event_at > (select max(ended_at) - interval '3 days' from {{ this }})
{% endif %}
group by 1, 2
"""

DIM_CUSTOMERS = """select
    {{ dbt_utils.surrogate_key(['customer_id', 'source_system']) }} as customer_key,
    customer_id,
    source_system,
    email,
    country
from {{ ref('stg_customers') }}
"""


def build(ds):
    h = ds.history("h22", "cursor", "/home/dev/src/etl-dbt",
                   "dbt project on Snowflake: duplicate orders failing the unique test, the incremental lookback for "
                   "sessions, the dbt_utils surrogate_key deprecation, and stale source freshness.",
                   start="2026-03-30T08:00:00Z", model="gpt-5.2")
    h.commits = [("6a2d8e1", "fct_sessions incremental"), ("f3b0c75", "dim_customers"), ("0e9a4d2", "dbt 1.9")]

    # ---- s1: unique test failure
    s = h.session("2026-03-30T09:05:44Z")
    s.prompt("dbt build fails on unique_stg_orders_order_id since this morning. Figure out where the duplicates come from.")
    orient(s)
    e_unique = s.bash("dbt build --select stg_orders+ 2>&1 | grep -E 'FAIL|ERROR' | head -4",
                      "14:02:11  Failure in test unique_stg_orders_order_id (models/staging/schema.yml)\n"
                      "14:02:11    Got 1,284 results, configured to fail if != 0\n"
                      "14:02:11  Done. PASS=41 WARN=0 ERROR=0 SKIP=12 FAIL=1 TOTAL=54\n", code=1, secs=95.0)
    s.read("models/staging/stg_orders.sql", STG_ORDERS)
    s.bash("dbt show --inline \"select order_id, count(*) c, min(updated_at), max(updated_at) from {{ ref('stg_orders') }} group by 1 having count(*) > 1 order by c desc\" --limit 3",
           "| order_id | c | min(updated_at)     | max(updated_at)     |\n| -------- | - | ------------------- | ------------------- |\n"
           "| 8812004  | 3 | 2026-03-29 22:10:41 | 2026-03-30 01:44:09 |\n| 8812117  | 2 | 2026-03-29 23:02:18 | 2026-03-30 00:31:55 |\n", secs=12.0)
    e_dedupe = s.edit("models/staging/stg_orders.sql", """with source as (
    select * from {{ source('shop', 'orders') }}
),""", """with source as (
    select * from {{ source('shop', 'orders') }}
    -- The CDC export (since 2026-03-29) appends a row per update instead of upserting: keep the latest.
    qualify row_number() over (partition by id order by updated_at desc, _loaded_at desc) = 1
),""")
    s.bash("dbt build --select stg_orders+ 2>&1 | tail -1", "14:11:52  Done. PASS=54 WARN=0 ERROR=0 SKIP=0 FAIL=0 TOTAL=54\n", secs=98.0)
    s.stop("The shop's new CDC export appends a row per order update rather than upserting, so updated orders appeared "
           "several times (1,284 duplicated ids). stg_orders now keeps the latest row per id with QUALIFY row_number() "
           "over updated_at desc, _loaded_at desc. stg_orders+ builds clean.")
    s.prompt("commit")
    checks(s, "dbt")
    commit(s, "stg_orders: keep the latest CDC row per order", ["models/staging/stg_orders.sql"], "b1e7f40", 2, 0)
    s.stop("Committed as b1e7f40.")
    s.end()

    # ---- s2: incremental lookback 3 -> 7 days
    s = h.session("2026-04-02T11:20:08Z")
    e_p_lookback = s.prompt("Mobile events arrive up to 6 days late (offline devices sync later), so fct_sessions "
                            "undercounts. The incremental filter only looks back 3 days. Make it 7 and backfill March.",
                            attachments=["models/marts/fct_sessions.sql"])
    orient(s)
    s.read("models/marts/fct_sessions.sql", FCT_SESSIONS)
    e_late = s.bash("dbt show --inline \"select datediff('day', event_at, _loaded_at) as lag_days, count(*) from {{ ref('stg_events') }} "
                    "where _loaded_at >= '2026-03-01' group by 1 order by 1 desc\" --limit 4",
                    "| lag_days | count(*) |\n| -------- | -------- |\n| 6        | 18,331   |\n| 5        | 40,912   |\n| 4        | 77,205   |\n", secs=14.0)
    e_lb7 = s.edit("models/marts/fct_sessions.sql", "where event_at > (select max(ended_at) - interval '3 days' from {{ this }})",
                   "-- offline mobile devices sync up to 6 days late\nwhere event_at > (select max(ended_at) - interval '7 days' from {{ this }})")
    s.bash("dbt run --select fct_sessions --full-refresh --vars '{backfill_from: 2026-03-01}' 2>&1 | tail -2",
           "11:52:40  1 of 1 OK created sql incremental model analytics.fct_sessions ........ [SUCCESS 1 in 412.31s]\n11:52:40  Done. PASS=1 WARN=0 ERROR=0 SKIP=0 TOTAL=1\n", secs=415.0)
    s.stop("fct_sessions' incremental filter re-reads 7 days before the latest ended_at instead of 3; stg_events shows "
           "events landing up to 6 days late. Rebuilt it with --full-refresh so March is correct.")
    s.prompt("commit")
    commit(s, "fct_sessions: 7 day incremental lookback (late mobile events)", ["models/marts/fct_sessions.sql"], "5c8a1f3", 2, 1)
    s.stop("Committed as 5c8a1f3.")
    s.end()

    # ---- s3: surrogate_key deprecation
    s = h.session("2026-04-09T14:44:21Z")
    s.prompt("Upgrading dbt_utils to 1.3 breaks compilation. Fix whatever it complains about.")
    orient(s)
    s.read("packages.yml", "packages:\n  - package: dbt-labs/dbt_utils\n    version: 0.9.6\n")
    s.edit("packages.yml", "    version: 0.9.6", '    version: [">=1.3.0", "<2.0.0"]')
    e_sk_err = s.bash("dbt deps && dbt compile 2>&1 | grep -A3 'Compilation Error' | head -5", "", code=1, stderr=(
        "Compilation Error in model dim_customers (models/marts/dim_customers.sql)\n  Warning: `dbt_utils.surrogate_key` has been replaced by "
        "`dbt_utils.generate_surrogate_key`. The new macro treats null values differently to empty strings. To restore the behaviour of the "
        "original macro, add a global variable in dbt_project.yml called `surrogate_key_treat_nulls_as_empty_strings` to your dbt_project.yml file with a value of True.\n"),
        secs=30.0)
    s.read("models/marts/dim_customers.sql", DIM_CUSTOMERS)
    e_gsk = s.edit("models/marts/dim_customers.sql", "    {{ dbt_utils.surrogate_key(['customer_id', 'source_system']) }} as customer_key,",
                   "    {{ dbt_utils.generate_surrogate_key(['customer_id', 'source_system']) }} as customer_key,")
    s.read("dbt_project.yml", "name: acme_analytics\nversion: '1.0.0'\nprofile: snowflake\n\nmodels:\n  acme_analytics:\n    marts:\n      +materialized: table\n")
    e_nullvar = s.edit("dbt_project.yml", "profile: snowflake\n", "profile: snowflake\n\nvars:\n  # keep customer_key values identical to dbt_utils 0.9 (nulls hashed as '')\n  surrogate_key_treat_nulls_as_empty_strings: true\n")
    s.bash("dbt build --select dim_customers+ 2>&1 | tail -1 && dbt show --inline \"select count(*) from {{ ref('dim_customers') }} d join analytics_prev.dim_customers p using (customer_key)\"",
           "15:10:03  Done. PASS=9 WARN=0 ERROR=0 SKIP=0 FAIL=0 TOTAL=9\n| count(*) |\n| -------- |\n| 2,418,377 |\n", secs=80.0)
    e_dec_sk = s.stop("dbt_utils 1.x removed surrogate_key; dim_customers now uses generate_surrogate_key. Because the new "
                      "macro hashes nulls differently, I set surrogate_key_treat_nulls_as_empty_strings: true in "
                      "dbt_project.yml so existing customer_key values (referenced by downstream facts and dashboards) "
                      "don't change: all 2,418,377 keys match the previous build.")
    s.prompt("commit")
    commit(s, "dbt_utils 1.3: generate_surrogate_key, keep legacy null handling", ["packages.yml", "package-lock.yml",
           "models/marts/dim_customers.sql", "dbt_project.yml"], "e27c9b6", 6, 2)
    s.stop("Committed as e27c9b6.")
    s.end()

    # ---- s4: freshness
    s = h.session("2026-04-16T08:12:55Z")
    s.prompt("The morning run stops at source freshness for shop.payments. Is the loader broken or is our threshold wrong?")
    orient(s)
    e_fresh = s.bash("dbt source freshness --select source:shop.payments", "", code=1, stderr=(
        "08:14:02  1 of 1 ERROR STALE freshness of shop.payments .............................. [ERROR STALE in 2.11s]\n"
        "08:14:02  Done. PASS=0 WARN=0 ERROR=1 SKIP=0 TOTAL=1\n"), secs=6.0)
    s.bash("dbt show --inline \"select max(_loaded_at), max(created_at) from {{ source('shop', 'payments') }}\"",
           "| max(_loaded_at)     | max(created_at)     |\n| ------------------- | ------------------- |\n| 2026-04-16 07:55:10 | 2026-04-15 23:59:58 |\n", secs=8.0)
    s.read("models/staging/sources.yml", """sources:
  - name: shop
    loaded_at_field: created_at
    freshness:
      error_after: {count: 6, period: hour}
    tables:
      - name: orders
      - name: payments
""")
    e_freshfix = s.edit("models/staging/sources.yml", """    loaded_at_field: created_at
    freshness:
      error_after: {count: 6, period: hour}""", """    # created_at is business time (no payments at night); freshness is about the loader.
    loaded_at_field: _loaded_at
    freshness:
      warn_after: {count: 3, period: hour}
      error_after: {count: 6, period: hour}""")
    s.bash("dbt source freshness --select source:shop", "08:20:41  1 of 2 PASS freshness of shop.orders ......................... [PASS in 1.82s]\n"
           "08:20:41  2 of 2 PASS freshness of shop.payments ....................... [PASS in 1.90s]\n", secs=6.0)
    s.stop("The loader is fine (last load 07:55). Freshness used created_at, the payment's business time, and there are "
           "no payments overnight, so at 08:00 the newest row was 8 hours old. sources.yml now measures _loaded_at "
           "(warn after 3 h, error after 6 h).")
    s.prompt("commit")
    commit(s, "sources: freshness on _loaded_at, warn 3h / error 6h", ["models/staging/sources.yml"], "a4f02d9", 3, 1)
    s.stop("Committed as a4f02d9.")
    s.end()

    h.q("fix_location", "Where did we remove the duplicate orders that failed the unique test?", "duplicate orders",
        "models/staging/stg_orders.sql: QUALIFY row_number() keeping the latest CDC row per order id.",
        ["models/staging/stg_orders.sql"], [e_dedupe])
    h.q("failed_command", "Which dbt test failed on the orders staging model?", "dbt test failed",
        "unique_stg_orders_order_id: 1,284 results.", ["unique_stg_orders_order_id"], [e_unique])
    h.q("knowledge_update", "How far back does the fct_sessions incremental run look now?", "incremental lookback window",
        "7 days (was 3).", ["interval '7 days'"], [e_lb7])
    h.q("decision", "Why did we widen the sessions incremental window?", "widen incremental window",
        "Offline mobile devices sync events up to 6 days late, so sessions were undercounted.", ["6 days late"], [e_p_lookback])
    h.q("failed_command", "What did dbt complain about after upgrading dbt_utils?", "dbt_utils upgrade error",
        "Compilation Error: dbt_utils.surrogate_key has been replaced by dbt_utils.generate_surrogate_key.", ["generate_surrogate_key"], [e_sk_err])
    h.q("decision", "Why did we set surrogate_key_treat_nulls_as_empty_strings?", "surrogate key nulls",
        "So customer_key values stay identical to the old macro for downstream facts and dashboards.",
        ["surrogate_key_treat_nulls_as_empty_strings"], [e_dec_sk])
    h.q("file_history", "Which files changed for the dbt_utils 1.3 upgrade?", "dbt utils upgrade",
        "models/marts/dim_customers.sql (generate_surrogate_key) and dbt_project.yml (vars), plus packages.yml.",
        ["models/marts/dim_customers.sql", "dbt_project.yml"], [e_gsk, e_nullvar])
    h.q("fix_location", "How did we fix the stale source freshness error for payments?", "payments freshness stale",
        "models/staging/sources.yml: loaded_at_field _loaded_at instead of created_at; warn 3 h, error 6 h.",
        ["models/staging/sources.yml"], [e_freshfix])
    h.q("temporal", "How late did mobile events arrive when we looked at the lag?", "late events lag",
        "Up to 6 days (18,331 events at 6 days in March).", ["18,331"], [e_late])

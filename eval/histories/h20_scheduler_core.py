from ._common import checks, commit, orient

WORKER_EX = """defmodule Scheduler.Workers.SendDigest do
  use Oban.Worker, queue: :digests, max_attempts: 5

  alias Scheduler.{Accounts, Mailer}

  @impl Oban.Worker
  def perform(%Oban.Job{args: %{"user_id" => user_id}}) do
    user = Accounts.get_user!(user_id)
    Mailer.deliver_digest(user)
  end
end
"""

CONFIG_EXS = """import Config

config :scheduler, Oban,
  repo: Scheduler.Repo,
  queues: [default: 10, digests: 10, webhooks: 5],
  plugins: [
    {Oban.Plugins.Cron, crontab: [{"0 7 * * *", Scheduler.Workers.EnqueueDigests}]}
  ]
"""

TZ_EX = """defmodule Scheduler.Time do
  use Timex

  def next_local_7am(tz) do
    now = Timex.now(tz)
    candidate = Timex.set(now, hour: 7, minute: 0, second: 0)
    if Timex.before?(candidate, now), do: Timex.shift(candidate, days: 1), else: candidate
  end
end
"""


def build(ds):
    h = ds.history("h20", "gemini", "/home/dev/src/scheduler-core",
                   "Elixir/Phoenix job scheduler on Oban: duplicate digest emails across nodes, an Ecto sandbox "
                   "ownership error in tests, queue concurrency tuning, and Timex replaced by the standard library.",
                   start="2026-01-19T08:00:00Z", model="gemini-2.5-pro")
    h.commits = [("a0c3e51", "Daily digest emails via Oban"), ("47d9b2f", "Webhooks queue"), ("e8f1c06", "Elixir 1.18, OTP 27")]

    # ---- s1: duplicate digests
    s = h.session("2026-01-19T09:40:05Z")
    s.prompt("Some users got the daily digest 2 or 3 times this morning. We scaled to 3 nodes yesterday. Look at "
             "the digest worker and the issue from support.")
    orient(s)
    s.mcp("github", "get_issue", {"owner": "acme", "repo": "scheduler-core", "issue_number": 212},
          '{"number": 212, "title": "Duplicate digest emails since scale-out", "state": "open", "body": "About 4% of users received 2-3 identical digests at 07:00 UTC on Jan 19."}')
    s.read("lib/scheduler/workers/send_digest.ex", WORKER_EX)
    s.read("lib/scheduler/workers/enqueue_digests.ex", """defmodule Scheduler.Workers.EnqueueDigests do
  use Oban.Worker, queue: :default

  @impl Oban.Worker
  def perform(_job) do
    Scheduler.Accounts.digest_user_ids()
    |> Enum.map(&Scheduler.Workers.SendDigest.new(%{"user_id" => &1}))
    |> Oban.insert_all()
    :ok
  end
end
""")
    e_dupes = s.bash("psql \"$SCHEDULER_DB_URL\" -Atc \"SELECT args->>'user_id', count(*) FROM oban_jobs WHERE worker='Scheduler.Workers.SendDigest' "
                     "AND inserted_at::date='2026-01-19' GROUP BY 1 HAVING count(*)>1 ORDER BY 2 DESC LIMIT 3\"", "8812|3\n1290|3\n44017|2\n", desc="Duplicate digest jobs")
    s.read("config/config.exs", CONFIG_EXS)
    e_unique = s.edit("lib/scheduler/workers/send_digest.ex", "  use Oban.Worker, queue: :digests, max_attempts: 5",
                      "  # One digest per user per day, even if EnqueueDigests runs on several nodes.\n"
                      "  use Oban.Worker,\n    queue: :digests,\n    max_attempts: 5,\n"
                      "    unique: [period: {23, :hours}, keys: [:user_id], states: [:available, :scheduled, :executing, :retryable, :completed]]")
    e_cronleader = s.edit("config/config.exs", """  plugins: [
    {Oban.Plugins.Cron, crontab: [{"0 7 * * *", Scheduler.Workers.EnqueueDigests}]}
  ]""", """  peer: Oban.Peers.Postgres,
  plugins: [
    # Cron only runs on the leader node (Postgres peer election), so EnqueueDigests fires once.
    {Oban.Plugins.Cron, crontab: [{"0 7 * * *", Scheduler.Workers.EnqueueDigests}]}
  ]""")
    s.bash("mix test test/workers", "Running ExUnit with seed: 412933, max_cases: 16\n\n.......\nFinished in 0.8 seconds (0.2s async, 0.6s sync)\n7 tests, 0 failures\n",
           desc="Worker tests", secs=9.0)
    s.stop("With 3 nodes, the Cron plugin ran EnqueueDigests on every node because peer election wasn't configured "
           "(each node thought it was leader with the default isolated peer), so each user got one SendDigest per node. "
           "Oban now uses Oban.Peers.Postgres so only the leader runs cron, and SendDigest is unique per user_id for 23 "
           "hours as a second guard.")
    s.prompt("commit, reference #212")
    commit(s, "Digests: Postgres peer for cron leader; unique SendDigest per user (#212)", ["config/config.exs",
           "lib/scheduler/workers/send_digest.ex"], "3b1d8f7", 8, 2)
    s.stop("Committed as 3b1d8f7.")
    s.end()

    # ---- s2: ownership error
    s = h.session("2026-01-22T15:22:40Z")
    s.prompt("test/workers/send_digest_test.exs fails randomly with DBConnection.OwnershipError since the unique option. Fix it.")
    orient(s)
    e_owner = s.bash("mix test test/workers/send_digest_test.exs --seed 0", "", code=2, stderr=(
        "  1) test delivers once per user (Scheduler.Workers.SendDigestTest)\n     test/workers/send_digest_test.exs:14\n"
        "     ** (DBConnection.OwnershipError) cannot find ownership process for #PID<0.612.0>.\n\n"
        "     When using ownership, you must manage connections in one\n     of the four ways:\n\n"
        "     * By explicitly checking out a connection\n     * By explicitly allowing a spawned process\n"
        "     * By running the pid in shared mode\n     * By using :caller option with allowed process\n\n"
        "Finished in 0.6 seconds\n3 tests, 1 failure\n"), desc="Run the test", secs=7.0)
    s.read("test/workers/send_digest_test.exs", """defmodule Scheduler.Workers.SendDigestTest do
  use Scheduler.DataCase, async: true

  test "delivers once per user" do
    user = insert(:user)
    Oban.insert!(SendDigest.new(%{"user_id" => user.id}))
    assert %{success: 1} = Oban.drain_queue(queue: :digests)
  end
end
""")
    s.read("config/test.exs", """import Config

config :scheduler, Oban, queues: false, plugins: false
""")
    e_testing = s.edit("config/test.exs", "config :scheduler, Oban, queues: false, plugins: false",
                       "# :manual testing mode runs jobs in the test process (no extra processes needing sandbox access).\n"
                       "config :scheduler, Oban, testing: :manual")
    s.edit("test/workers/send_digest_test.exs", """    Oban.insert!(SendDigest.new(%{"user_id" => user.id}))
    assert %{success: 1} = Oban.drain_queue(queue: :digests)""", """    assert {:ok, _} = perform_job(SendDigest, %{"user_id" => user.id})
    assert_email_sent(subject: "Your daily digest")""")
    s.edit("test/workers/send_digest_test.exs", "  use Scheduler.DataCase, async: true", "  use Scheduler.DataCase, async: true\n  use Oban.Testing, repo: Scheduler.Repo")
    s.bash("for i in $(seq 1 15); do mix test test/workers --seed $i > /dev/null || echo FAIL $i; done; echo done", "done\n", desc="15 seeds", secs=80.0)
    s.stop("drain_queue ran the job in Oban's producer processes, which don't own a sandboxed connection; the unique "
           "check queries the DB from there, hence OwnershipError depending on timing. config/test.exs uses Oban "
           "testing: :manual and the test calls perform_job/2 from Oban.Testing, which runs in the test process. "
           "15 seeds pass.")
    s.prompt("commit")
    checks(s, "elixir")
    commit(s, "Tests: Oban testing :manual, perform_job instead of drain_queue", ["config/test.exs", "test/workers/send_digest_test.exs"], "9c5e0a2", 6, 3)
    s.stop("Committed as 9c5e0a2.")
    s.end()

    # ---- s3: concurrency 10 -> 20
    s = h.session("2026-01-28T07:55:19Z")
    e_p_conc = s.prompt("Digest sending takes 3 hours for 180k users; Mailgun allows way more. Bump the digests queue "
                        "concurrency from 10 to 20 per node and check the DB pool can take it.")
    orient(s)
    s.read("config/config.exs")
    s.read("config/runtime.exs", """config :scheduler, Scheduler.Repo,
  url: System.fetch_env!("DATABASE_URL"),
  pool_size: String.to_integer(System.get_env("POOL_SIZE", "20"))
""")
    e_conc20 = s.edit("config/config.exs", "  queues: [default: 10, digests: 10, webhooks: 5],", "  queues: [default: 10, digests: 20, webhooks: 5],")
    e_pool = s.edit("config/runtime.exs", """  pool_size: String.to_integer(System.get_env("POOL_SIZE", "20"))""",
                    """  # default 10 + digests 20 + webhooks 5 job slots, plus web requests
  pool_size: String.to_integer(System.get_env("POOL_SIZE", "40"))""")
    s.bash("psql \"$SCHEDULER_DB_URL\" -Atc 'SHOW max_connections'", "200\n", desc="Server connection limit")
    s.stop("digests runs 20 jobs per node. Each job holds a DB connection while it runs, so the default POOL_SIZE goes "
           "from 20 to 40 per node (35 job slots plus web); 3 nodes x 40 = 120 of Postgres' 200 max_connections.")
    s.prompt("commit")
    commit(s, "digests queue concurrency 20; pool 40", ["config/config.exs", "config/runtime.exs"], "d4a7b19", 3, 2)
    s.stop("Committed as d4a7b19.")
    s.end()

    # ---- s4: timex removal + concurrency down to 15
    s = h.session("2026-02-04T10:10:33Z")
    e_p_timex = s.prompt("Timex pulls in tzdata's auto-updater which hits the network at boot and it failed in the "
                         "air-gapped staging cluster. Elixir's Calendar + the tz library cover what we use. Drop Timex.")
    orient(s)
    s.grep("Timex", "lib/scheduler/time.ex:2:  use Timex\nlib/scheduler/time.ex:5:    now = Timex.now(tz)\nlib/scheduler/time.ex:6:    candidate = Timex.set(now, hour: 7, minute: 0, second: 0)\n"
           "lib/scheduler/time.ex:7:    if Timex.before?(candidate, now), do: Timex.shift(candidate, days: 1), else: candidate\nmix.exs:41:      {:timex, \"~> 3.7\"},\n")
    e_tzdata = s.bash("kubectl -n staging logs deploy/scheduler-core --previous | grep -m2 -i tzdata", "[error] :tzdata_release_updater: failed to fetch https://data.iana.org/time-zones/tzdata-latest.tar.gz: :nxdomain\n"
                      "[error] GenServer :tzdata_release_updater terminating\n", desc="Staging boot errors")
    s.read("lib/scheduler/time.ex", TZ_EX)
    e_time = s.write("lib/scheduler/time.ex", """defmodule Scheduler.Time do
  @moduledoc "Timezone math with the standard library; the tz database comes from the :tz package (no network updates)."

  def next_local_7am(tz) do
    now = DateTime.now!(tz)
    today = DateTime.new!(DateTime.to_date(now), ~T[07:00:00], tz)
    if DateTime.compare(today, now) == :lt do
      DateTime.new!(Date.add(DateTime.to_date(now), 1), ~T[07:00:00], tz)
    else
      today
    end
  end
end
""")
    s.read("mix.exs", """  defp deps do
    [
      {:phoenix, "~> 1.7"},
      {:oban, "~> 2.18"},
      {:timex, "~> 3.7"},
      {:swoosh, "~> 1.16"}
    ]
  end
""")
    s.edit("mix.exs", '      {:timex, "~> 3.7"},', '      {:tz, "~> 0.28"},')
    s.read("config/config.exs")
    s.edit("config/config.exs", "import Config\n", "import Config\n\nconfig :elixir, :time_zone_database, Tz.TimeZoneDatabase\n")
    e_dst = s.bash("mix deps.get >/dev/null && mix test test/time_test.exs", "", code=2, stderr=(
        "  1) test next 7am across the DST change (Scheduler.TimeTest)\n     test/time_test.exs:18\n"
        "     ** (ArgumentError) cannot build datetime with ~D[2026-03-29] and ~T[02:30:00] because such instant does not exist in time zone Europe/Berlin\n"
        "     code: Scheduler.Time.at_local(~D[2026-03-29], ~T[02:30:00], \"Europe/Berlin\")\n\n4 tests, 1 failure\n"), desc="Time tests", secs=11.0)
    s.bash("grep -n 'def at_local' -A4 lib/scheduler/time_helpers.ex", "3:  def at_local(date, time, tz) do\n4:    DateTime.new!(date, time, tz)\n5:  end\n", desc="at_local")
    h.seed("lib/scheduler/time_helpers.ex", """defmodule Scheduler.TimeHelpers do
  @doc "Local wall-clock time to a DateTime."
  def at_local(date, time, tz) do
    DateTime.new!(date, time, tz)
  end
end
""")
    s.edit("lib/scheduler/time_helpers.ex", """  def at_local(date, time, tz) do
    DateTime.new!(date, time, tz)
  end""", """  def at_local(date, time, tz) do
    # Timex silently shifted nonexistent times (DST gap); keep that: use the first instant after the gap.
    case DateTime.new(date, time, tz) do
      {:ok, dt} -> dt
      {:ambiguous, first, _second} -> first
      {:gap, _before, after_gap} -> after_gap
    end
  end""")
    s.bash("mix test", "Running ExUnit with seed: 90211, max_cases: 16\n\n..............................\nFinished in 2.1 seconds (0.7s async, 1.4s sync)\n30 tests, 0 failures\n",
           desc="All tests", secs=14.0)
    s.stop("Timex is gone: Scheduler.Time uses DateTime/Date from the standard library with Tz.TimeZoneDatabase "
           "(the :tz package ships its data, no boot-time download). DateTime.new!/3 raises on times inside a DST gap "
           "where Timex used to shift silently, so at_local now handles {:gap, _, after} and {:ambiguous, first, _} "
           "explicitly.")
    s.prompt("also the Mailgun 429s started since we went to 20 concurrent digests per node. take it to 15. commit both")
    s.read("config/config.exs")
    e_conc15 = s.edit("config/config.exs", "  queues: [default: 10, digests: 20, webhooks: 5],",
                      "  # 20/node (60 total) tripped Mailgun 429s in Feb 2026\n  queues: [default: 10, digests: 15, webhooks: 5],")
    commit(s, "Replace Timex with stdlib DateTime + tz", ["mix.exs", "mix.lock", "config/config.exs", "lib/scheduler/time.ex",
           "lib/scheduler/time_helpers.ex"], "58e2c0d", 24, 12)
    commit(s, "digests concurrency 15 (Mailgun 429s)", ["config/config.exs"], "0c9f3ab", 2, 1)
    s.stop("Committed 58e2c0d (Timex removal) and 0c9f3ab (digests concurrency 15).")
    s.end()

    h.q("fix_location", "How did we stop users getting the daily digest two or three times?", "duplicate digest emails",
        "config/config.exs: Oban.Peers.Postgres so cron runs only on the leader; SendDigest unique per user_id for 23 hours.",
        ["Oban.Peers.Postgres", "unique:"], [e_cronleader, e_unique])
    h.q("failed_command", "What error did the digest worker test fail with after adding uniqueness?", "digest test error",
        "DBConnection.OwnershipError: cannot find ownership process (jobs ran in Oban's processes via drain_queue).",
        ["OwnershipError"], [e_owner])
    h.q("fix_location", "How did we fix the sandbox ownership error in the worker tests?", "sandbox ownership fix",
        "config/test.exs: Oban testing: :manual, and the test uses perform_job/2 from Oban.Testing.", ["testing: :manual"], [e_testing])
    h.q("knowledge_update", "What is the digests queue concurrency per node now?", "digests queue concurrency",
        "15 (10 -> 20 -> 15 after Mailgun 429s).", ["digests: 15"], [e_conc15])
    h.q("temporal", "What did we first raise the digests concurrency to, and what else changed with it?", "digest concurrency raise",
        "20 per node, with the DB POOL_SIZE default raised from 20 to 40.", ["digests: 20"], [e_conc20, e_pool])
    h.q("decision", "Why did we remove Timex?", "remove timex",
        "Its tzdata auto-updater hit the network at boot and failed in the air-gapped staging cluster.", ["air-gapped"], [e_p_timex])
    h.q("failed_command", "What broke when we replaced Timex with DateTime?", "datetime dst error",
        "ArgumentError: 2026-03-29 02:30 does not exist in Europe/Berlin (DST gap) from DateTime.new!/3.",
        ["such instant does not exist"], [e_dst])
    h.q("file_history", "What did we change in lib/scheduler/time.ex?", "scheduler time module",
        "Rewrote next_local_7am with DateTime.now!/DateTime.new! and Date.add instead of Timex.", ["lib/scheduler/time.ex"], [e_time])
    h.q("temporal", "What did staging log at boot before we dropped Timex?", "staging boot error",
        ":tzdata_release_updater failed to fetch tzdata-latest.tar.gz (:nxdomain).", ["tzdata_release_updater"], [e_tzdata])

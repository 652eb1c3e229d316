from ._common import checks, commit, diffstat, orient, pytest_ok

TRANSFORM = """import pandas as pd

CHUNK_SIZE = 10_000


def parse_events(df: pd.DataFrame) -> pd.DataFrame:
    df = df.copy()
    df["occurred_at"] = pd.to_datetime(df["occurred_at"])
    df["amount"] = df["amount"].astype("float64")
    return df


def dedupe(df: pd.DataFrame) -> pd.DataFrame:
    return df.drop_duplicates()
"""

SINKS = """import csv
from pathlib import Path

import pandas as pd


def write_batch(df: pd.DataFrame, out_dir: Path, batch_id: str) -> Path:
    path = out_dir / f"events-{batch_id}.csv"
    df.to_csv(path, index=False, quoting=csv.QUOTE_MINIMAL)
    return path
"""

DAG = """from datetime import datetime, timedelta

from airflow import DAG
from airflow.operators.python import PythonOperator

from pipeline.run import run_daily

with DAG(
    dag_id="events_ingest",
    start_date=datetime(2026, 1, 1),
    schedule="0 3 * * *",
    catchup=False,
    default_args={"retries": 1, "retry_delay": timedelta(minutes=5)},
) as dag:
    PythonOperator(task_id="ingest", python_callable=run_daily)
"""

TEST_TRANSFORM = """import pandas as pd

from pipeline.transform import parse_events


def test_parse_events_keeps_amount_numeric():
    df = pd.DataFrame({"occurred_at": ["2026-01-05T10:00:00"], "amount": ["12.50"]})
    assert parse_events(df)["amount"].iloc[0] == 12.5
"""


def build(ds):
    h = ds.history("h03", "claude-code", "/home/dev/src/ingest-pipeline",
                   "Python/pandas event ingest pipeline with an Airflow DAG: timezone parsing bug, CSV to Parquet, "
                   "chunk size tuning, dedupe, and a broken DAG import.",
                   start="2026-03-05T08:00:00Z")
    h.commits = [("91c0e3a", "Add events ingest DAG"), ("4ab7d20", "Read partner exports from S3"),
                 ("e02f6b8", "Amounts as float64")]

    # ---- s1: timezone bug
    s = h.session("2026-03-05T10:12:40Z", mode="default")
    s.prompt("The Sydney partner's events land a day off in the daily report. Their export has offsets like "
             "2026-03-04T23:30:00+11:00. I suspect our date parsing. Find it and fix it with a test.")
    s.bash("git status --short --branch", "## main...origin/main\n", desc="Status")
    s.read("pipeline/transform.py", TRANSFORM)
    s.grep("to_datetime", "pipeline/transform.py:8:    df[\"occurred_at\"] = pd.to_datetime(df[\"occurred_at\"])\n"
           "pipeline/report.py:22:    day = pd.to_datetime(row.occurred_at).date()\n"
           "tests/test_report.py:14:    ts = pd.to_datetime(\"2026-01-05\")\n", path="pipeline")
    s.read("pipeline/report.py", """import pandas as pd


def daily_totals(df: pd.DataFrame) -> pd.DataFrame:
    df = df.assign(day=df["occurred_at"].dt.date)
    return df.groupby(["partner", "day"], as_index=False)["amount"].sum()
""")
    s.read("tests/test_transform.py", TEST_TRANSFORM)
    s.edit("tests/test_transform.py", """    assert parse_events(df)["amount"].iloc[0] == 12.5
""", """    assert parse_events(df)["amount"].iloc[0] == 12.5


def test_parse_events_normalises_offsets_to_utc():
    df = pd.DataFrame({"occurred_at": ["2026-03-04T23:30:00+11:00", "2026-03-04T09:00:00-05:00"], "amount": ["1", "2"]})
    out = parse_events(df)["occurred_at"]
    assert str(out.dt.tz) == "UTC"
    assert out.iloc[0].isoformat() == "2026-03-04T12:30:00+00:00"
""")
    e_tzfail = s.bash("python -m pytest tests/test_transform.py -q",
                      ".F                                                                       [100%]\n"
                      "=================================== FAILURES ===================================\n"
                      "__________________ test_parse_events_normalises_offsets_to_utc __________________\n"
                      "    def test_parse_events_normalises_offsets_to_utc():\n"
                      ">       out = parse_events(df)[\"occurred_at\"]\n\n"
                      "pipeline/transform.py:8: in parse_events\n    df[\"occurred_at\"] = pd.to_datetime(df[\"occurred_at\"])\n"
                      "E   ValueError: Mixed timezones detected. Pass utc=True in to_datetime or format='mixed' to silence this warning.\n"
                      "=========================== short test summary info ============================\n"
                      "FAILED tests/test_transform.py::test_parse_events_normalises_offsets_to_utc - ValueError: Mixed timezones detected.\n"
                      "1 failed, 1 passed in 0.88s\n", code=1, desc="Run transform tests")
    e_tzfix = s.edit("pipeline/transform.py", """    df["occurred_at"] = pd.to_datetime(df["occurred_at"])""",
                     """    # Partners send local times with offsets; store everything as UTC.
    df["occurred_at"] = pd.to_datetime(df["occurred_at"], utc=True, format="ISO8601")""")
    s.bash("python -m pytest tests/test_transform.py -q", pytest_ok(2, "0.61"), desc="Run transform tests")
    e_report = s.edit("pipeline/report.py", """    df = df.assign(day=df["occurred_at"].dt.date)""",
                      """    # Report days are partner-local: convert back before taking the date.
    local = df["occurred_at"].dt.tz_convert(df["partner_tz"].iloc[0]) if "partner_tz" in df else df["occurred_at"]
    df = df.assign(day=local.dt.date)""")
    s.bash("python -m pytest -q", pytest_ok(31, "4.02", 2), desc="Full suite", secs=5.1)
    s.stop("parse_events called pd.to_datetime without utc=True, so mixed offsets either failed or kept the "
           "partner's local wall time. It now parses ISO8601 with utc=True, and daily_totals converts to the "
           "partner's timezone before taking the date, so a 23:30+11:00 event lands on the partner's day. "
           "Added test_parse_events_normalises_offsets_to_utc.")
    s.prompt("commit this")
    checks(s, "python", pkg="pipeline", n=11)
    diffstat(s, [("pipeline/report.py", 4, 1), ("pipeline/transform.py", 2, 1), ("tests/test_transform.py", 8, 0)])
    commit(s, "Parse event times as UTC; report days in partner timezone",
           ["pipeline/transform.py", "pipeline/report.py", "tests/test_transform.py"], "5f2e8d1", 14, 2)
    s.stop("Committed as 5f2e8d1.")
    s.end()

    # ---- s2: CSV -> Parquet
    s = h.session("2026-03-09T09:03:15Z")
    e_p_parquet = s.prompt("The nightly CSVs are 4GB and the analysts keep re-parsing zip codes as ints and losing "
                           "leading zeros. Switch the sink to Parquet with an explicit schema (pyarrow). Keep CSV "
                           "behind a flag for one release in case someone still reads them.")
    orient(s)
    s.read("pipeline/sinks.py", SINKS)
    s.bash("pip install 'pyarrow>=15,<18' && pip freeze | grep -i arrow", "Successfully installed pyarrow-17.0.0\npyarrow==17.0.0\n",
           desc="Install pyarrow", secs=11.0)
    e_sinks = s.write("pipeline/sinks.py", """from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

SCHEMA = pa.schema([
    ("event_id", pa.string()),
    ("partner", pa.string()),
    ("occurred_at", pa.timestamp("us", tz="UTC")),
    ("amount", pa.float64()),
    ("zip_code", pa.string()),
])


def write_batch(df: pd.DataFrame, out_dir: Path, batch_id: str, fmt: str = "parquet") -> Path:
    if fmt == "csv":  # deprecated, remove after 2026.04
        path = out_dir / f"events-{batch_id}.csv"
        df.to_csv(path, index=False)
        return path
    path = out_dir / f"events-{batch_id}.parquet"
    table = pa.Table.from_pandas(df, schema=SCHEMA, preserve_index=False)
    pq.write_table(table, path, compression="zstd")
    return path
""")
    e_arrow = s.bash("python -m pipeline.run --date 2026-03-08 --out /tmp/out", "", code=1, stderr=(
        "Traceback (most recent call last):\n  File \"/home/dev/src/ingest-pipeline/pipeline/run.py\", line 41, in main\n"
        "    write_batch(chunk, out, batch_id)\n  File \"/home/dev/src/ingest-pipeline/pipeline/sinks.py\", line 22, in write_batch\n"
        "    table = pa.Table.from_pandas(df, schema=SCHEMA, preserve_index=False)\n"
        "pyarrow.lib.ArrowTypeError: (\"Expected bytes, got a 'int' object\", 'Conversion failed for column zip_code with type object')\n"),
        desc="Run one day end to end", secs=8.4)
    s.grep("zip_code", "pipeline/readers.py:8:        dtype={\"zip_code\": \"object\"},\n", path="pipeline")
    s.read("pipeline/readers.py", """import pandas as pd


def read_partner_export(path: str, chunksize: int):
    return pd.read_csv(
        path,
        chunksize=chunksize,
        dtype={"zip_code": "object"},
    )
""")
    e_zip = s.edit("pipeline/readers.py", """        dtype={"zip_code": "object"},""", """        # "object" still lets pandas hand us ints for all-digit values; force strings so 02134 survives.
        dtype={"zip_code": "string"},
        keep_default_na=False,""")
    s.bash("python -m pipeline.run --date 2026-03-08 --out /tmp/out && ls -lh /tmp/out",
           "total 612M\n-rw-r--r-- 1 dev dev 611M Mar  9 09:41 events-20260308.parquet\n", desc="Run one day end to end", secs=96.0)
    s.bash("python -c \"import pyarrow.parquet as pq; t=pq.read_table('/tmp/out/events-20260308.parquet'); print(t.schema); print(t.column('zip_code')[:3])\"",
           "event_id: string\npartner: string\noccurred_at: timestamp[us, tz=UTC]\namount: double\nzip_code: string\n"
           "[\n  [\n    \"02134\",\n    \"94107\",\n    \"00501\"\n  ]\n]\n", desc="Inspect the Parquet schema")
    e_dec_parquet = s.stop("The sink writes zstd Parquet with an explicit pyarrow schema now (zip_code as string, "
                           "occurred_at as UTC timestamp), and `fmt='csv'` keeps the old output for one release. The "
                           "first run failed with ArrowTypeError on zip_code because the reader's dtype 'object' let "
                           "pandas produce ints; the reader now forces pandas 'string'. One day is 611 MB instead of 4.1 GB.")
    s.prompt("looks good, commit it")
    s.bash("python -m pytest -q", pytest_ok(33, "4.21", 2), desc="Full suite", secs=5.0)
    checks(s, "python", [0, 2], pkg="pipeline", n=11)
    commit(s, "Write Parquet with an explicit schema; zip codes stay strings",
           ["pipeline/sinks.py", "pipeline/readers.py", "requirements.txt"], "c81d4a7", 29, 5)
    s.stop("Committed as c81d4a7.")
    s.end()

    # ---- s3: chunk size and dedupe
    s = h.session("2026-03-13T14:22:09Z")
    s.prompt("The nightly run takes 2h10m now. Profile it. I bet the 10k chunk size is too small with parquet writes")
    orient(s)
    s.bash("python -m cProfile -s cumtime -m pipeline.run --date 2026-03-12 --out /tmp/out 2>&1 | head -12",
           "         48210337 function calls (47110981 primitive calls) in 7811.204 seconds\n\n   Ordered by: cumulative time\n\n"
           "   ncalls  tottime  percall  cumtime  percall filename:lineno(function)\n      1    0.002    0.002 7811.204 7811.204 run.py:1(<module>)\n"
           "   4120    3.911    0.001 4302.771    1.044 sinks.py:15(write_batch)\n   4120  812.330    0.197 2210.402    0.537 transform.py:16(dedupe)\n"
           "   4120   61.207    0.015  688.310    0.167 readers.py:4(read_partner_export)\n", desc="Profile a full day", secs=7811.0)
    s.read("pipeline/transform.py")
    e_chunk50 = s.edit("pipeline/transform.py", "CHUNK_SIZE = 10_000", "CHUNK_SIZE = 50_000  # 4120 tiny parquet files/day -> ~820")
    e_dedupe = s.edit("pipeline/transform.py", """def dedupe(df: pd.DataFrame) -> pd.DataFrame:
    return df.drop_duplicates()""", """def dedupe(df: pd.DataFrame) -> pd.DataFrame:
    # Partners resend corrected rows with the same event_id; the last one wins.
    return df.drop_duplicates(subset=["event_id"], keep="last")""")
    s.bash("python -m pytest -q", pytest_ok(33, "4.40", 2), desc="Full suite", secs=5.2)
    s.bash("/usr/bin/time -v python -m pipeline.run --date 2026-03-12 --out /tmp/out 2>&1 | egrep 'Elapsed|Maximum resident'",
           "\tElapsed (wall clock) time (h:mm:ss or m:ss): 38:12.44\n\tMaximum resident set size (kbytes): 5893120\n",
           desc="Time a full day", secs=2292.0)
    s.read("tests/test_transform.py")
    s.edit("tests/test_transform.py", """from pipeline.transform import parse_events
""", """from pipeline.transform import dedupe, parse_events


def test_dedupe_keeps_last_row_per_event_id():
    df = pd.DataFrame({"event_id": ["e1", "e1", "e2"], "amount": [1.0, 1.5, 2.0]})
    assert dedupe(df)["amount"].tolist() == [1.5, 2.0]
""")
    s.bash("python -m pytest tests/test_transform.py -q", pytest_ok(3, "0.64"), desc="Run transform tests")
    s.stop("Two changes: CHUNK_SIZE 10_000 -> 50_000 (far fewer write_batch calls and parquet files), and dedupe now "
           "drops duplicates on event_id keeping the last row instead of comparing every column (partners resend "
           "corrected rows with the same id). A full day went from 2h10m to 38m; peak RSS is 5.6 GB.")
    s.prompt("ok, commit")
    checks(s, "python", pkg="pipeline", n=11)
    commit(s, "Chunk 50k rows; dedupe on event_id keeping the last", ["pipeline/transform.py"], "0e4b6c9", 3, 2)
    s.stop("Committed as 0e4b6c9.")
    s.end()

    # ---- s4: airflow dag import error
    s = h.session("2026-03-18T08:47:51Z")
    s.prompt("airflow shows a broken DAG for events_ingest after the docker image rebuild. fix it and make the task retry "
             "3 times with a longer delay, the S3 reads sometimes time out at 3am")
    orient(s)
    e_dagerr = s.bash("docker compose exec airflow-scheduler airflow dags list-import-errors",
                      "filepath                           | error\n"
                      "===================================+===========================================================\n"
                      "/opt/airflow/dags/events_ingest.py | Traceback (most recent call last):\n"
                      "                                   |   File \"/opt/airflow/dags/events_ingest.py\", line 6, in <module>\n"
                      "                                   |     from pipeline.run import run_daily\n"
                      "                                   | ModuleNotFoundError: No module named 'pipeline'\n",
                      desc="Show DAG import errors", secs=6.0)
    s.read("dags/events_ingest.py", DAG)
    s.read("docker-compose.yml", """x-airflow: &airflow
  image: ingest-airflow:latest
  environment:
    AIRFLOW__CORE__LOAD_EXAMPLES: "false"
  volumes:
    - ./dags:/opt/airflow/dags

services:
  airflow-scheduler:
    <<: *airflow
    command: scheduler
""")
    e_compose = s.edit("docker-compose.yml", """  volumes:
    - ./dags:/opt/airflow/dags""", """    PYTHONPATH: /opt/airflow/src
  volumes:
    - ./dags:/opt/airflow/dags
    - ./pipeline:/opt/airflow/src/pipeline:ro""")
    e_dagretry = s.edit("dags/events_ingest.py", """default_args={"retries": 1, "retry_delay": timedelta(minutes=5)},""",
                        """default_args={
        "retries": 3,
        "retry_delay": timedelta(minutes=10),
        "retry_exponential_backoff": True,
    },""")
    s.bash("docker compose up -d && sleep 20 && docker compose exec airflow-scheduler airflow dags list-import-errors",
           "No data found\n", desc="Recreate and recheck", secs=31.0)
    s.bash("docker compose exec airflow-scheduler airflow dags test events_ingest 2026-03-17 2>&1 | tail -3",
           "[2026-03-18T08:58:40.102+0000] {taskinstance.py:1225} INFO - Marking task as SUCCESS. dag_id=events_ingest, task_id=ingest\n"
           "[2026-03-18T08:58:40.160+0000] {dagrun.py:854} INFO - DagRun Finished: dag_id=events_ingest, state=success\n", desc="Test the DAG", secs=2410.0)
    s.stop("The rebuilt image no longer had the pipeline package on the path, so the DAG failed with ModuleNotFoundError: "
           "No module named 'pipeline'. docker-compose.yml now mounts ./pipeline into /opt/airflow/src and sets PYTHONPATH. "
           "The ingest task retries 3 times, 10 minutes apart with exponential backoff. `airflow dags test` succeeds.")
    s.prompt("great. commit please")
    checks(s, "python", [0, 1], pkg="pipeline", n=11)
    diffstat(s, [("dags/events_ingest.py", 5, 1), ("docker-compose.yml", 3, 0)])
    commit(s, "DAG: mount pipeline package, retry 3x with backoff", ["docker-compose.yml", "dags/events_ingest.py"], "73aa0fe", 9, 2)
    s.stop("Committed as 73aa0fe.")
    s.end()

    # ---- s5: OOM, chunk size down
    s = h.session("2026-03-26T07:55:30Z")
    s.prompt("The nightly got OOM-killed on the new small worker (4GB limit). Exit code 137. We need to fit. "
             "Don't undo the event_id dedupe.")
    orient(s)
    e_oom = s.bash("kubectl -n data logs job/events-ingest-29053440 --tail=4",
                   "2026-03-26 03:41:12 INFO chunk 212/830 written\n2026-03-26 03:41:19 INFO chunk 213/830 written\n"
                   "Killed\n", desc="Logs of the failed job")
    s.bash("kubectl -n data get pod -l job-name=events-ingest-29053440 -o jsonpath='{.items[0].status.containerStatuses[0].lastState.terminated}'",
           "{\"exitCode\":137,\"reason\":\"OOMKilled\",\"finishedAt\":\"2026-03-26T03:41:20Z\"}\n", desc="Termination reason")
    s.read("pipeline/transform.py")
    e_chunk25 = s.edit("pipeline/transform.py", "CHUNK_SIZE = 50_000  # 4120 tiny parquet files/day -> ~820",
                       "CHUNK_SIZE = 25_000  # 50k peaked at 5.6 GB RSS; the small worker has 4 GB")
    s.bash("/usr/bin/time -v python -m pipeline.run --date 2026-03-25 --out /tmp/out 2>&1 | egrep 'Elapsed|Maximum resident'",
           "\tElapsed (wall clock) time (h:mm:ss or m:ss): 44:51.02\n\tMaximum resident set size (kbytes): 3012440\n",
           desc="Time a full day", secs=2691.0)
    s.bash("python -m pytest -q", pytest_ok(34, "4.37", 2), desc="Full suite", secs=5.0)
    checks(s, "python", [0], pkg="pipeline", n=11)
    s.bash("kubectl -n data describe limitrange default | tail -4", "Type        Resource  Min  Max  Default Request  Default Limit\n"
           "----        --------  ---  ---  ---------------  -------------\nContainer   memory    -    4Gi  1Gi              4Gi\n",
           desc="Check the worker memory limit")
    s.stop("Set CHUNK_SIZE to 25_000: peak RSS drops to 2.9 GB, under the 4 GB limit, and a day takes 45 minutes "
           "(vs 38 at 50k). The event_id dedupe is unchanged.")
    s.prompt("commit and push, we're done for today")
    commit(s, "Chunk 25k rows to fit the 4GB worker", ["pipeline/transform.py"], "a9d31e2", 1, 1)
    s.bash("git push origin main", "", stderr="To github.com:acme/ingest-pipeline.git\n   73aa0fe..a9d31e2  main -> main\n", desc="Push")
    s.stop("Committed and pushed a9d31e2.")
    s.end()

    h.q("fix_location", "Where did we fix the Sydney events landing on the wrong day?", "timezone events wrong day",
        "pipeline/transform.py parse_events: pd.to_datetime(..., utc=True, format='ISO8601'); report.py converts back "
        "to the partner timezone.", ["pipeline/transform.py", "utc=True"], [e_tzfix])
    h.q("failed_command", "What error did the first end-to-end Parquet run fail with?", "parquet run error",
        "pyarrow ArrowTypeError: Expected bytes, got a 'int' object, conversion failed for column zip_code.",
        ["ArrowTypeError"], [e_arrow])
    h.q("decision", "Why did we move the nightly output from CSV to Parquet?", "csv parquet switch",
        "CSVs were 4 GB and analysts re-parsed zip codes as ints losing leading zeros; Parquet has an explicit schema.",
        ["leading zeros"], [e_p_parquet])
    h.q("knowledge_update", "What chunk size does the pipeline use now?", "pipeline chunk size",
        "25_000 rows (lowered from 50_000 to fit the 4 GB worker).", ["CHUNK_SIZE = 25_000"], [e_chunk25])
    h.q("temporal", "What did we first raise the chunk size to when tuning the nightly run?", "chunk size increase",
        "50_000 (from 10_000), after profiling the 2h10m run.", ["CHUNK_SIZE = 50_000"], [e_chunk50])
    h.q("failed_command", "Why was the events_ingest DAG broken after the image rebuild?", "airflow dag error",
        "ModuleNotFoundError: No module named 'pipeline' (package not on PYTHONPATH in the container).",
        ["ModuleNotFoundError"], [e_dagerr])
    h.q("file_history", "Which files did we change to fix the broken Airflow DAG and its retries?", "airflow dag retries",
        "docker-compose.yml (PYTHONPATH and pipeline mount) and dags/events_ingest.py (3 retries, 10 min, exponential).",
        ["docker-compose.yml", "dags/events_ingest.py"], [e_compose, e_dagretry])
    h.q("fix_location", "Where do we force zip codes to stay strings?", "zip code leading zeros",
        "pipeline/readers.py: read_csv dtype zip_code='string' with keep_default_na=False.", ["pipeline/readers.py"], [e_zip])
    h.q("temporal", "What happened to the nightly job on the small worker before we lowered the chunk size?",
        "nightly job killed",
        "It was OOM-killed (exit code 137) at chunk 213/830.", ["Killed"], [e_oom])

#!/usr/bin/env python3
"""Optional smoke check: feed every payload of eval/nmem-eval.json to a running nmemd through
`nmem record` and check that each call exits 0 and that every gold event produced a stored row
(a prompt or an observation) while ignored hooks produced none. It never searches.

    NMEM_HOME=$(mktemp -d) target/.../nmemd &
    NMEM_HOME=... python3 eval/smoke_nmem.py --bin target/x86_64-unknown-linux-gnu/release [--histories h01,h13]

Stdlib only. Row counts come from `nmemctl status --json` (prompts + observations) after each call,
which works because `nmem record` returns once the daemon has committed the event.
"""

import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def rows(bin_dir):
    out = subprocess.run([os.path.join(bin_dir, "nmemctl"), "status", "--json"], capture_output=True, text=True, check=True)
    st = json.loads(out.stdout)
    return st["prompts"] + st["observations"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True, help="folder with nmem and nmemctl")
    ap.add_argument("--data", default=os.path.join(HERE, "nmem-eval.json"))
    ap.add_argument("--histories", default="", help="comma-separated history ids (default: all)")
    args = ap.parse_args()
    if not os.environ.get("NMEM_HOME") and not os.environ.get("NMEM_SOCKET"):
        sys.exit("set NMEM_HOME (or NMEM_SOCKET) to the running nmemd's")
    with open(args.data, encoding="utf-8") as f:
        data = json.load(f)
    wanted = set(filter(None, args.histories.split(",")))
    gold = {g for q in data["questions"] if not wanted or q["history_id"] in wanted for g in q["gold_event_ids"]}
    nmem = os.path.join(args.bin, "nmem")
    env = dict(os.environ, NMEM_NO_AUTOSTART="1")
    failures, not_stored, stored_ignored = [], [], []
    n = 0
    before = rows(args.bin)
    for h in data["histories"]:
        if wanted and h["history_id"] not in wanted:
            continue
        for s in h["sessions"]:
            for e in s["events"]:
                harness = e.get("harness", h["harness"])
                payload = json.dumps(e["payload"], ensure_ascii=False)
                if harness == "codex-notify":
                    p = subprocess.run([nmem, "record", "--harness", harness, payload], capture_output=True, text=True, env=env)
                else:
                    p = subprocess.run([nmem, "record", "--harness", harness], input=payload, capture_output=True, text=True, env=env)
                n += 1
                if p.returncode != 0:
                    failures.append((e["event_id"], p.returncode, p.stderr.strip()[:200]))
                after = rows(args.bin)
                delta, before = after - before, after
                if e["event_id"] in gold and delta < 1:
                    not_stored.append(e["event_id"])
                name = e["payload"].get("hook_event_name", e["payload"].get("type"))
                if delta > 0 and name in ("PreToolUse", "PermissionRequest", "Notification", "SubagentStart", "BeforeTool",
                                          "beforeShellExecution", "beforeReadFile", "beforeMCPExecution"):
                    stored_ignored.append(e["event_id"])
    print(f"events sent: {n}, non-zero exits: {len(failures)}, gold events without a stored row: {len(not_stored)}, "
          f"ignored hooks that stored something: {len(stored_ignored)}")
    for f in failures[:20]:
        print("exit", f)
    for g in not_stored[:50]:
        print("gold not stored:", g)
    for g in stored_ignored[:20]:
        print("ignored but stored:", g)
    sys.exit(1 if failures or not_stored else 0)


if __name__ == "__main__":
    main()

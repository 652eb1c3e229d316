#!/usr/bin/env python3
"""Interleaved timing of `nmem record` (daemon down: it spools) for two builds. Usage: A_BIN B_BIN [N]"""
import json, os, shutil, statistics, subprocess, sys, tempfile, time
a, b = sys.argv[1], sys.argv[2]
n = int(sys.argv[3]) if len(sys.argv) > 3 else 400
payload = json.dumps({"session_id": "bench", "cwd": "/home/dev/projects/acme-api", "hook_event_name": "PostToolUse",
    "tool_name": "Bash", "tool_input": {"command": "npm test -- --runInBand src/routes", "description": "run the tests"},
    "tool_response": {"stdout": "PASS src/routes/invoices.test.ts\n" * 40, "stderr": "", "interrupted": False},
    "tool_use_id": "toolu_bench"}).encode()
homes = {k: tempfile.mkdtemp(prefix=f"nmem-ab-{k}-") for k in "ab"}
times = {"a": [], "b": []}
for i in range(n):
    for k, exe in (("a", a), ("b", b)) if i % 2 == 0 else (("b", b), ("a", a)):
        env = dict(os.environ, NMEM_HOME=homes[k], NMEM_NO_AUTOSTART="1")
        t = time.perf_counter()
        r = subprocess.run([exe, "record", "--harness", "claude-code"], input=payload, env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times[k].append((time.perf_counter() - t) * 1000)
        assert r.returncode == 0
print(f"payload {len(payload)} bytes, {n} interleaved runs each")
for k, exe in (("a", a), ("b", b)):
    t = sorted(times[k])
    print(f"{exe}: median {statistics.median(t):.2f} ms, p90 {t[int(len(t)*0.9)]:.2f} ms, size {os.path.getsize(exe)} bytes")
for h in homes.values():
    shutil.rmtree(h, ignore_errors=True)

#!/usr/bin/env python3
"""What one client exchange costs: process start alone vs. start + one call, against a live nmemd."""
import json, os, shutil, statistics, subprocess, sys, tempfile, time
bind = sys.argv[1]
n = int(sys.argv[2]) if len(sys.argv) > 2 else 100
home = tempfile.mkdtemp(prefix="nmem-cc-")
env = dict(os.environ, NMEM_HOME=home, NMEM_NO_AUTOSTART="1")
d = subprocess.Popen([f"{bind}/nmemd"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
try:
    for _ in range(200):
        if subprocess.run([f"{bind}/nmemctl", "status"], env=env, stdout=subprocess.DEVNULL).returncode == 0: break
        time.sleep(0.05)
    for i in range(300):
        p = json.dumps({"session_id": "cc", "cwd": "/home/dev/projects/acme-api", "hook_event_name": "PostToolUse",
            "tool_name": "Bash", "tool_input": {"command": f"cargo test -p billing case_{i}"},
            "tool_response": {"stdout": f"test case_{i} ... ok\n", "stderr": ""}, "tool_use_id": f"t{i}"}).encode()
        subprocess.run([f"{bind}/nmem", "record", "--harness", "claude-code"], input=p, env=env, stdout=subprocess.DEVNULL)
    cmds = {"nmemctl --version (start only)": [f"{bind}/nmemctl", "--version"],
            "nmemctl status --json (GET /v1/status)": [f"{bind}/nmemctl", "status", "--json"],
            "nmem --version (start only)": [f"{bind}/nmem", "--version"],
            "nmem recent --json (probe + POST /v1/recent)": [f"{bind}/nmem", "recent", "--json"],
            "nmem search cargo --json (probe + POST /v1/search)": [f"{bind}/nmem", "search", "cargo", "--json"]}
    t = {k: [] for k in cmds}
    for _ in range(n):
        for k, c in cmds.items():
            s = time.perf_counter(); r = subprocess.run(c, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            t[k].append((time.perf_counter() - s) * 1000); assert r.returncode in (0,), (k, r.returncode)
    for k in cmds: print(f"{k}: median {statistics.median(t[k]):.2f} ms")
finally:
    d.terminate(); d.wait(); shutil.rmtree(home, ignore_errors=True)

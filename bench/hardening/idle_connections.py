"""Figure for hardening item 7: hooks served while 1,100 idle connections are open.

Starts nmemd from BIN_DIR under `prlimit --nofile=1024:1024` in a temporary NMEM_HOME, opens 1,100
idle Unix-socket connections to it, runs 10 `nmem record` hooks and prints how many were spooled
(0: every hook was stored directly). Compare the previous release's binaries with the new ones.

Usage: python3 bench/hardening/idle_connections.py BIN_DIR
"""
import json, os, resource, socket, subprocess, sys, tempfile, time
if len(sys.argv) != 2 or sys.argv[1] in ('-h', '--help'):
    print(__doc__.strip())
    sys.exit(0 if len(sys.argv) == 2 else 2)
bindir = sys.argv[1]
home = tempfile.mkdtemp(prefix="m7-")
env = dict(os.environ, NMEM_HOME=home, NMEM_NO_AUTOSTART="1")
resource.setrlimit(resource.RLIMIT_NOFILE, (4096, 4096))
d = subprocess.Popen(["prlimit", "--nofile=1024:1024", f"{bindir}/nmemd"], env=env,
                     stdout=subprocess.DEVNULL, stderr=open(home + "/nmemd.err", "w"))
sock = None
for _ in range(200):
    for root, _, files in os.walk(home):
        for f in files:
            if f.endswith(".sock"):
                sock = os.path.join(root, f)
    if sock: break
    time.sleep(0.05)
conns = []
for i in range(1100):
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect(sock); conns.append(s)
    except OSError as e:
        print("connect", i, e); break
time.sleep(1)
t0 = time.time()
for n in range(10):
    p = json.dumps({"session_id": "m7", "cwd": "/tmp", "hook_event_name": "PostToolUse", "tool_name": "Bash",
                    "tool_input": {"command": f"echo {n}"}, "tool_response": {"stdout": str(n), "stderr": ""},
                    "tool_use_id": f"toolu_m7_{n}"})
    subprocess.run([f"{bindir}/nmem", "record", "--harness", "claude-code"], input=p.encode(), env=env,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
el = time.time() - t0
spool_files = []
for root, _, files in os.walk(home):
    if "spool" in root: spool_files += files
print(f"{bindir}: 10 hooks in {el:.1f} s, spool files: {len(spool_files)}, daemon alive: {d.poll() is None}")
for s in conns: s.close()
d.terminate(); d.wait(30)

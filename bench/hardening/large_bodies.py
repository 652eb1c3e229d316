"""Figure for hardening item 8: memory with 16 concurrent 63 MB request bodies.

Starts nmemd from BIN_DIR in a temporary NMEM_HOME, POSTs 16 events of 63 MB each to /v1/events at
once, samples nmemd's VmRSS every 50 ms and prints the peak, the RSS after 5 s idle and the replies.

Usage: python3 bench/hardening/large_bodies.py BIN_DIR
"""
import os, socket, subprocess, sys, tempfile, threading, time
if len(sys.argv) != 2 or sys.argv[1] in ('-h', '--help'):
    print(__doc__.strip())
    sys.exit(0 if len(sys.argv) == 2 else 2)
bindir = sys.argv[1]
home = tempfile.mkdtemp(prefix="m8-")
env = dict(os.environ, NMEM_HOME=home)
d = subprocess.Popen([f"{bindir}/nmemd"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
sock = None
for _ in range(200):
    for root, _, files in os.walk(home):
        for f in files:
            if f.endswith(".sock"): sock = os.path.join(root, f)
    if sock: break
    time.sleep(0.05)
time.sleep(0.5)
def rss():
    for l in open(f"/proc/{d.pid}/status"):
        if l.startswith("VmRSS"): return int(l.split()[1]) // 1024
    return 0
big = b'{"session_id":"m8","cwd":"/tmp","hook_event_name":"PostToolUse","tool_name":"Bash","tool_input":{"command":"x"},"tool_response":{"stdout":"' + b"a" * (63 << 20) + b'"}}'
codes = []
def send(i):
    s = socket.socket(socket.AF_UNIX); s.connect(sock)
    hdr = (f"POST /v1/events HTTP/1.1\r\nhost: nmemd\r\ncontent-type: application/json\r\nx-nmem-harness: claude-code\r\n"
           f"x-nmem-event-id: m8-{i}\r\nx-nmem-received-at: {int(time.time()*1000)}\r\ncontent-length: {len(big)}\r\nconnection: close\r\n\r\n").encode()
    try:
        s.sendall(hdr + big)
        codes.append(s.recv(200).split(b"\r\n")[0].decode())
    except OSError as e:
        codes.append(str(e))
    s.close()
peak = [0]
stop = False
def watch():
    while not stop:
        peak[0] = max(peak[0], rss()); time.sleep(0.05)
w = threading.Thread(target=watch); w.start()
ts = [threading.Thread(target=send, args=(i,)) for i in range(16)]
t0 = time.time()
[t.start() for t in ts]; [t.join() for t in ts]
el = time.time() - t0
time.sleep(5)
stop = True; w.join()
print(f"{bindir}: 16 x 63 MB in {el:.1f} s, peak RSS {peak[0]} MB, after 5 s idle {rss()} MB, replies {sorted(set(codes))}")
d.terminate(); d.wait(30)

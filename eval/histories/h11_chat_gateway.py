from ._common import checks, commit, orient, vitest_ok

SOCKET_TS = """import { EventEmitter } from "eventemitter3";

export class ChatSocket extends EventEmitter {
  private ws?: WebSocket;

  constructor(private url: string) {
    super();
  }

  connect() {
    this.ws = new WebSocket(this.url);
    this.ws.onmessage = (e) => this.emit("message", JSON.parse(e.data));
    this.ws.onclose = () => {
      this.emit("disconnected");
      setTimeout(() => this.connect(), 1000);
    };
  }
}
"""

HEARTBEAT_TS = """import type { WebSocket } from "ws";

export const HEARTBEAT_INTERVAL_MS = 30_000;

export function startHeartbeat(ws: WebSocket) {
  let alive = true;
  ws.on("pong", () => (alive = true));
  const timer = setInterval(() => {
    if (!alive) return ws.terminate();
    alive = false;
    ws.ping();
  }, HEARTBEAT_INTERVAL_MS);
  ws.on("close", () => clearInterval(timer));
}
"""

ROOMS_TS = """import type { WebSocket } from "ws";

const rooms = new Map<string, Set<WebSocket>>();

export function join(room: string, ws: WebSocket) {
  if (!rooms.has(room)) rooms.set(room, new Set());
  rooms.get(room)!.add(ws);
}

export function leave(room: string, ws: WebSocket) {
  rooms.get(room)?.delete(ws);
}

export function broadcast(room: string, data: string) {
  for (const ws of rooms.get(room) ?? []) ws.send(data);
}

export const roomCount = () => rooms.size;
"""

PUBSUB_TS = """import Redis from "ioredis";
import { config } from "./config";

const pub = new Redis(config.redisUrl);
const sub = new Redis(config.redisUrl);

export async function publish(room: string, msg: string) {
  await pub.publish(`room:${room}`, msg);
}

export function onRoomMessage(handler: (room: string, msg: string) => void) {
  sub.psubscribe("room:*");
  sub.on("pmessage", (_pattern, channel, msg) => handler(channel.slice(5), msg));
}
"""


def build(ds):
    h = ds.history("h11", "claude-code", "/home/dev/src/chat-gateway",
                   "TypeScript WebSocket chat gateway and client SDK: reconnect backoff, heartbeat interval changes, "
                   "a room membership leak, and ioredis replaced by node-redis for pub/sub.",
                   start="2026-01-12T08:00:00Z", model="claude-sonnet-4-6")
    h.commits = [("6f20a1c", "server: room broadcast"), ("d93b7e4", "client: typed events"), ("0a8c5f2", "Deploy behind the ALB")]

    # ---- s1: reconnect backoff
    s = h.session("2026-01-12T15:40:33Z", mode="default")
    s.prompt("When we deploy the gateway, every client reconnects exactly 1s later and the new pods fall over from the "
             "thundering herd. Give the client SDK exponential backoff with jitter, capped at 30s, and reset it after a "
             "successful connect.")
    orient(s)
    s.read("packages/client/src/socket.ts", SOCKET_TS)
    e_backoff = s.edit("packages/client/src/socket.ts", """  connect() {
    this.ws = new WebSocket(this.url);
    this.ws.onmessage = (e) => this.emit("message", JSON.parse(e.data));
    this.ws.onclose = () => {
      this.emit("disconnected");
      setTimeout(() => this.connect(), 1000);
    };
  }""", """  private attempt = 0;

  connect() {
    this.ws = new WebSocket(this.url);
    this.ws.onopen = () => {
      this.attempt = 0;
      this.emit("connected");
    };
    this.ws.onmessage = (e) => this.emit("message", JSON.parse(e.data));
    this.ws.onclose = () => {
      this.emit("disconnected");
      setTimeout(() => this.connect(), reconnectDelay(this.attempt++));
    };
  }
}

/** Full jitter: uniform in [0, min(30s, 500ms * 2^attempt)] so a deploy doesn't reconnect everyone at once. */
export function reconnectDelay(attempt: number, random = Math.random): number {
  const cap = Math.min(30_000, 500 * 2 ** attempt);
  return Math.floor(random() * cap);""")
    s.write("packages/client/src/socket.test.ts", """import { describe, it, expect } from "vitest";
import { reconnectDelay } from "./socket";

describe("reconnectDelay", () => {
  it("grows exponentially and caps at 30s", () => {
    expect(reconnectDelay(0, () => 1)).toBe(500);
    expect(reconnectDelay(3, () => 1)).toBe(4000);
    expect(reconnectDelay(10, () => 1)).toBe(30_000);
  });
  it("is jittered", () => {
    expect(reconnectDelay(5, () => 0.25)).toBe(4000);
  });
});
""")
    s.bash("npx vitest --run packages/client", vitest_ok("chat-gateway", "1.8.0", [("packages/client/src/socket.test.ts", 2),
                                                                                 ("packages/client/src/events.test.ts", 6)], "0.8"), desc="Client tests")
    s.stop("The client reconnected after a fixed 1000 ms. reconnectDelay(attempt) now uses full jitter: a uniform "
           "delay in [0, min(30 s, 500 ms x 2^attempt)], and the attempt counter resets in onopen. A deploy spreads "
           "reconnects over seconds instead of one spike.")
    s.prompt("commit")
    checks(s, "node", [0, 1])
    commit(s, "client: jittered exponential reconnect backoff (max 30s)", ["packages/client/src/socket.ts", "packages/client/src/socket.test.ts"],
           "b71e4d9", 31, 4)
    s.stop("Committed as b71e4d9.")
    s.end()

    # ---- s2: heartbeat 30 -> 15
    s = h.session("2026-01-15T10:05:18Z", mode="acceptEdits")
    e_p_hb15 = s.prompt("Mobile users on some carriers get silently disconnected: their NAT drops idle TCP after ~20-25s, "
                        "our ping is every 30s so we never notice. Lower the server heartbeat to 15s.")
    orient(s)
    s.read("packages/server/src/heartbeat.ts", HEARTBEAT_TS)
    e_hb15 = s.edit("packages/server/src/heartbeat.ts", "export const HEARTBEAT_INTERVAL_MS = 30_000;",
                    "// Some mobile carrier NATs drop idle TCP after ~20s; ping well inside that.\nexport const HEARTBEAT_INTERVAL_MS = 15_000;")
    s.grep("HEARTBEAT_INTERVAL_MS", "packages/server/src/heartbeat.ts:4:export const HEARTBEAT_INTERVAL_MS = 15_000;\n"
           "packages/server/src/heartbeat.test.ts:12:    vi.advanceTimersByTime(HEARTBEAT_INTERVAL_MS * 2 + 1);\n", path="packages")
    s.bash("npx vitest --run packages/server/src/heartbeat.test.ts", vitest_ok("chat-gateway", "1.8.0", [("packages/server/src/heartbeat.test.ts", 3)], "0.6"),
           desc="Heartbeat tests")
    s.bash("kubectl -n chat get ingress chat-gateway -o jsonpath='{.metadata.annotations.alb\\.ingress\\.kubernetes\\.io/load-balancer-attributes}'",
           "idle_timeout.timeout_seconds=60\n", desc="ALB idle timeout")
    s.stop("HEARTBEAT_INTERVAL_MS is 15 s now, under the ~20 s NAT idle window, so dead mobile connections are "
           "detected within 30 s (two missed pongs). The ALB idle timeout is 60 s so it's unaffected.")
    s.prompt("commit")
    commit(s, "server: heartbeat every 15s (mobile NAT timeouts)", ["packages/server/src/heartbeat.ts"], "4e0b2aa", 2, 1)
    s.stop("Committed as 4e0b2aa.")
    s.end()

    # ---- s3: room leak
    s = h.session("2026-01-22T14:30:49Z", mode="acceptEdits")
    s.prompt("Gateway pods grow ~200MB a day until OOM. Heap snapshot shows thousands of closed WebSocket objects held "
             "in a Map. Probably rooms.")
    orient(s)
    s.read("packages/server/src/rooms.ts", ROOMS_TS)
    s.grep("leave\\(", "packages/server/src/handlers/leaveRoom.ts:9:  leave(msg.room, ws);\n", path="packages/server/src")
    s.read("packages/server/src/connection.ts", """import { startHeartbeat } from "./heartbeat";
import { handleMessage } from "./handlers";

export function onConnection(ws: WebSocket) {
  startHeartbeat(ws);
  ws.on("message", (raw) => handleMessage(ws, raw));
}
""")
    e_roomfix = s.edit("packages/server/src/rooms.ts", """export function leave(room: string, ws: WebSocket) {
  rooms.get(room)?.delete(ws);
}""", """const memberships = new WeakMap<WebSocket, Set<string>>();

export function leave(room: string, ws: WebSocket) {
  const members = rooms.get(room);
  members?.delete(ws);
  if (members?.size === 0) rooms.delete(room);
  memberships.get(ws)?.delete(room);
}

/** Called on close: a socket that disconnects never sends leaveRoom. */
export function leaveAll(ws: WebSocket) {
  for (const room of memberships.get(ws) ?? []) leave(room, ws);
  memberships.delete(ws);
}""")
    s.edit("packages/server/src/rooms.ts", """  rooms.get(room)!.add(ws);
}""", """  rooms.get(room)!.add(ws);
  if (!memberships.has(ws)) memberships.set(ws, new Set());
  memberships.get(ws)!.add(room);
}""")
    e_connfix = s.edit("packages/server/src/connection.ts", """  ws.on("message", (raw) => handleMessage(ws, raw));""",
                       """  ws.on("message", (raw) => handleMessage(ws, raw));
  ws.on("close", () => leaveAll(ws));""")
    s.edit("packages/server/src/connection.ts", 'import { handleMessage } from "./handlers";', 'import { handleMessage } from "./handlers";\nimport { leaveAll } from "./rooms";')
    e_roomtest = s.bash("npx vitest --run packages/server/src/rooms.test.ts", "\n RUN  v3.2.4 /home/dev/src/chat-gateway\n\n"
                        " \u276f packages/server/src/rooms.test.ts (4 tests | 4 failed) 38ms\n   \u00d7 rooms > broadcasts to members 7ms\n"
                        "     \u2192 TypeError: Invalid value used as weak map key\n     \u276f join packages/server/src/rooms.ts:9:38\n\n"
                        " Test Files  1 failed (1)\n      Tests  4 failed (4)\n",
                        code=1, desc="Room tests")
    s.read("packages/server/src/rooms.test.ts", """import { describe, it, expect } from "vitest";
import { join, leave, broadcast, roomCount } from "./rooms";

const fakeSocket = (id: string) => id as unknown as WebSocket;

describe("rooms", () => {
  it("broadcasts to members", () => {
    const a = fakeSocket("a");
    join("r1", a);
    broadcast("r1", "hi");
  });
});
""")
    s.edit("packages/server/src/rooms.test.ts", """const fakeSocket = (id: string) => id as unknown as WebSocket;""",
           """// Real sockets are objects; the WeakMap in rooms.ts rejects the old string stand-ins.
const fakeSocket = (id: string) => ({ id, send: vi.fn() }) as unknown as WebSocket;""")
    s.edit("packages/server/src/rooms.test.ts", 'import { describe, it, expect } from "vitest";\nimport { join, leave, broadcast, roomCount } from "./rooms";',
           'import { describe, it, expect, vi } from "vitest";\nimport { join, leave, leaveAll, broadcast, roomCount } from "./rooms";')
    s.edit("packages/server/src/rooms.test.ts", """    broadcast("r1", "hi");
  });
});""", """    broadcast("r1", "hi");
  });

  it("removes a closed socket from every room and drops empty rooms", () => {
    const a = fakeSocket("a");
    join("r2", a);
    join("r3", a);
    leaveAll(a);
    expect(roomCount()).toBe(1);
  });
});""")
    s.bash("npx vitest --run packages/server", vitest_ok("chat-gateway", "1.8.0", [("packages/server/src/rooms.test.ts", 5),
                                                                                 ("packages/server/src/heartbeat.test.ts", 3)], "0.9"), desc="Server tests")
    s.stop("Sockets were only removed from a room when the client sent leaveRoom; a disconnect (closed tab, dead "
           "network, heartbeat terminate) left the closed socket in the room's Set forever, and empty rooms were never "
           "deleted. rooms.ts now tracks each socket's rooms in a WeakMap, leaveAll() runs on 'close', and empty rooms "
           "are removed. The room tests first failed because their fake sockets were strings, which a WeakMap can't key on; they're objects now.")
    s.prompt("ship it")
    commit(s, "server: leave all rooms on close; drop empty rooms (memory leak)", ["packages/server/src/rooms.ts",
           "packages/server/src/connection.ts", "packages/server/src/rooms.test.ts"], "e2d5c18", 28, 2)
    s.bash("git push origin main && gh workflow run deploy.yml -f env=prod", "", stderr="To github.com:acme/chat-gateway.git\n   4e0b2aa..e2d5c18  main -> main\n",
           desc="Push and deploy")
    s.stop("Committed e2d5c18, pushed and triggered the prod deploy.")
    s.end()

    # ---- s4: ioredis -> node-redis
    s = h.session("2026-01-29T11:11:11Z", mode="acceptEdits")
    e_p_redis = s.prompt("Platform is standardising on node-redis v4 (they maintain the Sentinel/ACL config for it), "
                         "so replace ioredis in the pub/sub module. Behaviour must stay the same.")
    orient(s)
    s.read("packages/server/src/pubsub.ts", PUBSUB_TS)
    s.bash("npm rm ioredis -w packages/server && npm i redis@4.7 -w packages/server", "\nremoved 7 packages in 1s\n\nadded 6 packages in 2s\n",
           desc="Swap the dependency", secs=3.0)
    e_noderedis = s.write("packages/server/src/pubsub.ts", """import { createClient } from "redis";
import { config } from "./config";

const pub = createClient({ url: config.redisUrl });
// node-redis v4: a client in subscriber mode can't publish, so use a duplicate.
const sub = pub.duplicate();

export async function connectPubSub() {
  await Promise.all([pub.connect(), sub.connect()]);
}

export async function publish(room: string, msg: string) {
  await pub.publish(`room:${room}`, msg);
}

export async function onRoomMessage(handler: (room: string, msg: string) => void) {
  await sub.pSubscribe("room:*", (msg, channel) => handler(channel.slice(5), msg));
}
""")
    e_redis_tsc = s.bash("npx tsc --noEmit -p packages/server", "packages/server/src/index.ts(18,3): error TS2801: This condition will always return true since this 'Promise<void>' is always defined.\n"
                         "packages/server/src/index.ts(21,1): error TS1378: Top-level 'await' expressions are only allowed when the 'module' option is set to 'es2022'...\n",
                         code=2, desc="Type-check", secs=6.0)
    s.read("packages/server/src/index.ts", """import { onRoomMessage } from "./pubsub";
import { broadcast } from "./rooms";
import { server } from "./server";

onRoomMessage((room, msg) => broadcast(room, msg));
server.listen(Number(process.env.PORT ?? 8080));
""")
    s.write("packages/server/src/index.ts", """import { connectPubSub, onRoomMessage } from "./pubsub";
import { broadcast } from "./rooms";
import { server } from "./server";

async function main() {
  await connectPubSub();
  await onRoomMessage((room, msg) => broadcast(room, msg));
  server.listen(Number(process.env.PORT ?? 8080));
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
""")
    s.bash("npx tsc --noEmit -p packages/server && docker compose up -d redis && npx vitest --run packages/server",
           vitest_ok("chat-gateway", "1.9.0", [("packages/server/src/rooms.test.ts", 5), ("packages/server/src/heartbeat.test.ts", 3),
                                               ("packages/server/src/pubsub.int.test.ts", 2)], "2.1"), desc="Type-check and tests", secs=12.0)
    s.stop("pubsub.ts uses node-redis v4: a publisher client plus pub.duplicate() for pSubscribe (a subscribed client "
           "can't publish). Unlike ioredis it doesn't auto-connect, so connectPubSub() is awaited in an async main() "
           "before listening, which fixed the tsc errors. Same channels (room:*), same handler signature.")
    s.prompt("commit")
    commit(s, "server: node-redis v4 instead of ioredis for pub/sub", ["packages/server/package.json", "package-lock.json",
           "packages/server/src/pubsub.ts", "packages/server/src/index.ts"], "7a3f9e0", 24, 12)
    s.stop("Committed as 7a3f9e0.")
    s.end()

    # ---- s5: heartbeat 20s
    s = h.session("2026-02-09T09:44:27Z", mode="acceptEdits")
    s.prompt("Since the 15s heartbeat the gateway CPU went up 18% with 400k sockets, and battery complaints from the "
             "Android app. Carrier data shows the NAT timeout is never below 30s in our markets after all. Set it to 20s.")
    orient(s)
    s.read("packages/server/src/heartbeat.ts")
    e_hb20 = s.edit("packages/server/src/heartbeat.ts", """// Some mobile carrier NATs drop idle TCP after ~20s; ping well inside that.
export const HEARTBEAT_INTERVAL_MS = 15_000;""", """// Carrier NAT idle timeouts are >= 30s in our markets (2026-02 data); 15s cost 18% CPU at 400k sockets.
export const HEARTBEAT_INTERVAL_MS = 20_000;""")
    s.bash("npx vitest --run packages/server/src/heartbeat.test.ts", vitest_ok("chat-gateway", "1.9.1", [("packages/server/src/heartbeat.test.ts", 3)], "0.6"),
           desc="Heartbeat tests")
    s.read("CHANGELOG.md", "# Changelog\n\n## 1.9.0\n- Server: node-redis v4 for pub/sub\n- Server: heartbeat every 15s\n")
    s.edit("CHANGELOG.md", "# Changelog\n", "# Changelog\n\n## 1.9.1\n- Server: heartbeat every 20s (was 15s)\n")
    s.stop("HEARTBEAT_INTERVAL_MS is 20 s: still inside the 30 s NAT minimum, a third fewer pings than 15 s. Changelog "
           "has a 1.9.1 entry.")
    s.prompt("commit")
    commit(s, "server: heartbeat every 20s", ["packages/server/src/heartbeat.ts", "CHANGELOG.md"], "f5b06c3", 5, 2)
    s.stop("Committed as f5b06c3.")
    s.end()

    h.q("fix_location", "Where did we add reconnect backoff to stop the thundering herd after deploys?", "client reconnect backoff",
        "packages/client/src/socket.ts: reconnectDelay with full jitter, capped at 30 s, reset on open.",
        ["packages/client/src/socket.ts"], [e_backoff])
    h.q("knowledge_update", "What is the server heartbeat interval now?", "heartbeat interval",
        "20 seconds (30 s -> 15 s -> 20 s).", ["HEARTBEAT_INTERVAL_MS = 20_000"], [e_hb20])
    h.q("decision", "Why did we lower the heartbeat interval the first time?", "lower heartbeat",
        "Mobile carrier NATs drop idle TCP after ~20-25 s and the 30 s ping never noticed.", ["NAT"], [e_p_hb15])
    h.q("fix_location", "Where was the memory leak that kept closed sockets alive?", "gateway memory growth",
        "packages/server/src/rooms.ts (leaveAll, empty rooms removed) called from packages/server/src/connection.ts on close.",
        ["packages/server/src/rooms.ts"], [e_roomfix, e_connfix])
    h.q("failed_command", "What failed in the room tests while fixing the leak?", "rooms test failure",
        "TypeError: Invalid value used as weak map key (the test's fake sockets were strings).", ["Invalid value used as weak map key"], [e_roomtest])
    h.q("decision", "Why did we replace ioredis?", "replace ioredis",
        "Platform standardised on node-redis v4 and maintains its Sentinel/ACL config.", ["standardising on node-redis"], [e_p_redis])
    h.q("failed_command", "What did the type-check complain about after switching the Redis client?", "redis typecheck error",
        "TS2801 (Promise always defined) and TS1378 top-level await in packages/server/src/index.ts.", ["TS2801"], [e_redis_tsc])
    h.q("temporal", "What heartbeat value did we set before the CPU complaints?", "heartbeat cpu",
        "15 seconds (HEARTBEAT_INTERVAL_MS = 15_000).", ["HEARTBEAT_INTERVAL_MS = 15_000"], [e_hb15])
    h.q("file_history", "What did we change in the pub/sub module?", "pubsub redis",
        "packages/server/src/pubsub.ts rewritten for node-redis v4 (duplicate client for pSubscribe, connectPubSub).",
        ["packages/server/src/pubsub.ts"], [e_noderedis])

from ._common import checks, commit, orient, vitest_ok

USERS_TABLE = """<script setup lang="ts">
import { computed, ref } from "vue";
import type { User } from "@/api/types";

const props = defineProps<{ users: User[] }>();
const sortKey = ref<keyof User>("createdAt");
const sortDir = ref<1 | -1>(-1);

const sorted = computed(() =>
  [...props.users].sort((a, b) => (a[sortKey.value] > b[sortKey.value] ? 1 : -1) * sortDir.value),
);
</script>
"""

CLIENT_TS = """import axios from "axios";

export const api = axios.create({
  baseURL: import.meta.env.VITE_API_URL,
  withCredentials: true,
  timeout: 10_000,
});

api.interceptors.response.use(undefined, (err) => {
  if (err.response?.status === 401) window.location.assign("/login");
  return Promise.reject(err);
});
"""

SESSION_STORE = """import { defineStore } from "pinia";

export const IDLE_WARNING_MS = 15 * 60 * 1000;

export const useSessionStore = defineStore("session", {
  state: () => ({ lastActivity: Date.now(), warned: false }),
  actions: {
    touch() {
      this.lastActivity = Date.now();
      this.warned = false;
    },
  },
});
"""


def build(ds):
    h = ds.history("h19", "gemini", "/home/dev/src/admin-dashboard",
                   "Vue 3 + Pinia admin dashboard: date sorting in the users table, axios replaced by ofetch, a failing "
                   "component test setup, and the idle session warning timeout.",
                   start="2026-04-27T08:00:00Z", model="gemini-2.5-flash")
    h.commits = [("e40b7a2", "Users table with sorting"), ("93c1f6d", "Idle session warning"), ("1bd8e05", "Vite 6, vue-tsc 2")]

    # ---- s1: sort by date
    s = h.session("2026-04-27T10:20:15Z")
    s.prompt("Sorting the users table by 'Created' puts 03/11/2025 after 12/01/2024 in the wrong order... it's "
             "sorting the formatted strings. Fix it in the table component.")
    orient(s)
    s.read("src/components/UsersTable.vue", USERS_TABLE)
    s.grep("createdAt", "src/api/types.ts:7:  createdAt: string; // formatted by the API as MM/DD/YYYY\nsrc/components/UsersTable.vue:6:const sortKey = ref<keyof User>(\"createdAt\");\n",
           path="src")
    e_sortfix = s.edit("src/components/UsersTable.vue", """const sorted = computed(() =>
  [...props.users].sort((a, b) => (a[sortKey.value] > b[sortKey.value] ? 1 : -1) * sortDir.value),
);""", """// createdAt arrives as MM/DD/YYYY text; compare real dates, not strings.
const sortValue = (u: User, key: keyof User) => {
  if (key === "createdAt" || key === "lastLoginAt") {
    const [m, d, y] = String(u[key]).split("/").map(Number);
    return Date.UTC(y, m - 1, d);
  }
  return u[key];
};

const sorted = computed(() =>
  [...props.users].sort((a, b) => {
    const x = sortValue(a, sortKey.value);
    const y = sortValue(b, sortKey.value);
    return (x === y ? 0 : x > y ? 1 : -1) * sortDir.value;
  }),
);""")
    s.write("src/components/UsersTable.spec.ts", """import { mount } from "@vue/test-utils";
import { expect, it } from "vitest";
import UsersTable from "./UsersTable.vue";

it("sorts created dates chronologically", () => {
  const users = [{ id: 1, createdAt: "03/11/2025" }, { id: 2, createdAt: "12/01/2024" }] as any;
  const w = mount(UsersTable, { props: { users } });
  expect(w.findAll("tbody tr")[0].text()).toContain("03/11/2025");
});
""")
    s.noise(cmd="npx vitest --run src/components/UsersTable.spec.ts")
    e_routerlink = s.bash("npx vitest --run src/components/UsersTable.spec.ts", "", code=1, stderr=(
        " FAIL  src/components/UsersTable.spec.ts > sorts created dates chronologically\n"
        "[Vue warn]: Failed to resolve component: RouterLink\nIf this is a native custom element, make sure to exclude it from component resolution via compilerOptions.isCustomElement.\n"
        "TypeError: Cannot read properties of undefined (reading 'resolve')\n \u276f src/components/UsersTable.vue:41:22\n\n Test Files  1 failed (1)\n"), desc="Component test", secs=4.0)
    s.read("vitest.config.ts", """import { defineConfig } from "vitest/config";
import vue from "@vitejs/plugin-vue";

export default defineConfig({
  plugins: [vue()],
  test: { environment: "jsdom" },
});
""")
    s.write("tests/setup.ts", """import { config } from "@vue/test-utils";
import { RouterLinkStub } from "@vue/test-utils";

// Components use <RouterLink>; tests mount them without a router.
config.global.stubs = { RouterLink: RouterLinkStub };
""")
    e_setup = s.edit("vitest.config.ts", """  test: { environment: "jsdom" },""", """  test: { environment: "jsdom", setupFiles: ["tests/setup.ts"] },""")
    s.bash("npx vitest --run", vitest_ok("admin-dashboard", "0.14.0", [("src/components/UsersTable.spec.ts", 1), ("src/stores/session.spec.ts", 4)], "1.6"),
           desc="All unit tests", secs=4.0)
    s.stop("UsersTable compared createdAt as MM/DD/YYYY strings. It now converts createdAt and lastLoginAt to UTC "
           "timestamps before comparing. The new component test first failed on 'Failed to resolve component: "
           "RouterLink'; tests/setup.ts stubs RouterLink globally and vitest.config.ts loads it.")
    s.prompt("commit")
    checks(s, "vue")
    commit(s, "UsersTable: sort dates chronologically; stub RouterLink in tests", ["src/components/UsersTable.vue", "src/components/UsersTable.spec.ts",
           "tests/setup.ts", "vitest.config.ts"], "56a2c1b", 36, 2)
    s.stop("Committed as 56a2c1b.")
    s.end()

    # ---- s2: axios -> ofetch
    s = h.session("2026-04-30T14:02:36Z")
    e_p_ofetch = s.prompt("axios is 13 kB gzipped of our 90 kB entry chunk and we only use get/post with JSON. Replace "
                          "it with ofetch: keep the 10s timeout, credentials, the 401 redirect, and add 2 retries on GET for 502/503/504.")
    orient(s)
    s.read("src/api/client.ts", CLIENT_TS)
    s.grep("api\\.(get|post|put|delete)", "src/api/users.ts:5:  const { data } = await api.get<User[]>(\"/users\", { params });\n"
           "src/api/users.ts:11:  const { data } = await api.post<User>(\"/users\", body);\n"
           "src/api/audit.ts:4:  const { data } = await api.get<AuditEntry[]>(\"/audit\", { params: { since } });\n", path="src")
    s.bash("npm rm axios && npm i ofetch@1.4", "\nremoved 9 packages, and audited 402 packages in 2s\n\nadded 1 package, and audited 403 packages in 1s\n", desc="Swap dependency")
    e_ofetch = s.write("src/api/client.ts", """import { ofetch } from "ofetch";

export const api = ofetch.create({
  baseURL: import.meta.env.VITE_API_URL,
  credentials: "include",
  timeout: 10_000,
  retry: 2, // ofetch only retries idempotent methods (GET/HEAD/...) by default
  retryStatusCodes: [502, 503, 504],
  onResponseError({ response }) {
    if (response.status === 401) window.location.assign("/login");
  },
});
""")
    s.read("src/api/users.ts", """import { api } from "./client";
import type { User, NewUser } from "./types";

export async function listUsers(params: { q?: string; page?: number }) {
  const { data } = await api.get<User[]>("/users", { params });
  return data;
}

export async function createUser(body: NewUser) {
  const { data } = await api.post<User>("/users", body);
  return data;
}
""")
    e_users_api = s.edit("src/api/users.ts", """export async function listUsers(params: { q?: string; page?: number }) {
  const { data } = await api.get<User[]>("/users", { params });
  return data;
}

export async function createUser(body: NewUser) {
  const { data } = await api.post<User>("/users", body);
  return data;
}""", """export function listUsers(query: { q?: string; page?: number }) {
  return api<User[]>("/users", { query });
}

export function createUser(body: NewUser) {
  return api<User>("/users", { method: "POST", body });
}""")
    s.bash("sed -i 's#const { data } = await api.get<AuditEntry\\[\\]>(\"/audit\", { params: { since } });#return api<AuditEntry[]>(\"/audit\", { query: { since } });#' src/api/audit.ts && npx vue-tsc --noEmit",
           "src/api/audit.ts(5,10): error TS2304: Cannot find name 'data'.\n", code=2, desc="Type-check", secs=8.0)
    s.read("src/api/audit.ts", """import { api } from "./client";

export async function listAudit(since: string) {
  return api<AuditEntry[]>("/audit", { query: { since } });
  return data;
}
""")
    s.edit("src/api/audit.ts", """  return api<AuditEntry[]>("/audit", { query: { since } });
  return data;""", """  return api<AuditEntry[]>("/audit", { query: { since } });""")
    e_size = s.bash("npx vue-tsc --noEmit && npx vite build 2>&1 | grep index-", "dist/assets/index-C4mQ0x1e.js   77.31 kB \u2502 gzip: 27.96 kB\n", desc="Type-check and build", secs=14.0)
    s.stop("The API client is ofetch now: same baseURL, 10 s timeout and credentials, the 401 redirect moved to "
           "onResponseError, and 2 retries on 502/503/504 (ofetch retries only idempotent methods, so POSTs are never "
           "repeated). Call sites use api<T>(url, { query | method, body }) and get the parsed body directly. Entry "
           "chunk: 27.96 kB gzip.")
    s.prompt("commit")
    commit(s, "API client: ofetch instead of axios", ["package.json", "package-lock.json", "src/api/client.ts", "src/api/users.ts", "src/api/audit.ts"],
           "b8e03f4", 19, 27)
    s.stop("Committed as b8e03f4.")
    s.end()

    # ---- s3: idle warning 15 -> 30
    s = h.session("2026-05-06T09:10:48Z")
    s.prompt("Support agents keep a ticket open for long stretches and hate the idle warning at 15 minutes. Security "
             "agreed to 30 minutes for the warning; logout stays server-side at 60. Update the store.")
    orient(s)
    s.read("src/stores/session.ts", SESSION_STORE)
    e_idle30 = s.edit("src/stores/session.ts", "export const IDLE_WARNING_MS = 15 * 60 * 1000;",
                      "// Security sign-off 2026-05: warn after 30 min idle; the server still ends sessions at 60.\nexport const IDLE_WARNING_MS = 30 * 60 * 1000;")
    s.read("src/stores/session.spec.ts", """it("warns after 15 minutes idle", () => {
  vi.advanceTimersByTime(15 * 60 * 1000 + 1);
  expect(store.warned).toBe(true);
});
""")
    s.edit("src/stores/session.spec.ts", """it("warns after 15 minutes idle", () => {
  vi.advanceTimersByTime(15 * 60 * 1000 + 1);""", """it("warns after 30 minutes idle", () => {
  vi.advanceTimersByTime(29 * 60 * 1000);
  expect(store.warned).toBe(false);
  vi.advanceTimersByTime(60 * 1000 + 1);""")
    s.bash("npx vitest --run src/stores", vitest_ok("admin-dashboard", "0.15.0", [("src/stores/session.spec.ts", 4)], "0.7"), desc="Store tests")
    s.stop("IDLE_WARNING_MS is 30 minutes; the spec checks nothing at 29 minutes and the warning just after 30.")
    s.prompt("commit")
    commit(s, "Idle warning after 30 minutes", ["src/stores/session.ts", "src/stores/session.spec.ts"], "3f7d9a0", 5, 3)
    s.stop("Committed as 3f7d9a0.")
    s.end()

    # ---- s4: long session, compaction, warning reverted to 20
    s = h.session("2026-05-13T13:30:00Z")
    s.prompt("Audit log page: add filtering by actor and action, and CSV download of the current filter.")
    orient(s)
    s.read("src/views/AuditView.vue", """<script setup lang="ts">
import { ref, onMounted } from "vue";
import { listAudit } from "@/api/audit";

const entries = ref<AuditEntry[]>([]);
onMounted(async () => (entries.value = await listAudit(new Date(Date.now() - 7 * 864e5).toISOString())));
</script>
""")
    e_auditfilter = s.write("src/views/AuditView.vue", """<script setup lang="ts">
import { computed, ref, watch } from "vue";
import { listAudit } from "@/api/audit";
import { toCsv, download } from "@/lib/csv";

const since = ref(new Date(Date.now() - 7 * 864e5).toISOString());
const actor = ref("");
const action = ref<string | null>(null);
const entries = ref<AuditEntry[]>([]);

watch([since, actor, action], async () => {
  entries.value = await listAudit(since.value, { actor: actor.value || undefined, action: action.value ?? undefined });
}, { immediate: true });

const downloadCsv = () => download(`audit-${since.value.slice(0, 10)}.csv`, toCsv(entries.value));
</script>
""")
    s.edit("src/api/audit.ts", """export async function listAudit(since: string) {
  return api<AuditEntry[]>("/audit", { query: { since } });""", """export async function listAudit(since: string, filters: { actor?: string; action?: string } = {}) {
  return api<AuditEntry[]>("/audit", { query: { since, ...filters } });""")
    s.write("src/lib/csv.ts", """export function toCsv(rows: Record<string, unknown>[]): string {
  if (rows.length === 0) return "";
  const cols = Object.keys(rows[0]);
  const esc = (v: unknown) => `"${String(v ?? "").replaceAll('"', '""')}"`;
  return [cols.join(","), ...rows.map((r) => cols.map((c) => esc(r[c])).join(","))].join("\\n");
}

export function download(name: string, text: string) {
  const a = document.createElement("a");
  a.href = URL.createObjectURL(new Blob([text], { type: "text/csv" }));
  a.download = name;
  a.click();
}
""")
    s.bash("npx vue-tsc --noEmit && npx vitest --run", vitest_ok("admin-dashboard", "0.16.0", [("src/components/UsersTable.spec.ts", 1),
           ("src/stores/session.spec.ts", 4), ("src/lib/csv.spec.ts", 3)], "1.9"), desc="Type-check and tests", secs=12.0)
    s.stop("AuditView has actor and action filters (sent as query params to /audit) and a 'Download CSV' of the current "
           "result via src/lib/csv.ts, which quotes every field.")
    s.compact()
    e_p_idle20 = s.prompt("Security came back after the pen test: 30 minutes idle before a warning is too long for admins "
                          "with impersonation rights. Compromise at 20 minutes for everyone.")
    s.read("src/stores/session.ts")
    e_idle20 = s.edit("src/stores/session.ts", """// Security sign-off 2026-05: warn after 30 min idle; the server still ends sessions at 60.
export const IDLE_WARNING_MS = 30 * 60 * 1000;""", """// Pen test follow-up 2026-05-13: 30 min was too long for admins who can impersonate; 20 min for all.
export const IDLE_WARNING_MS = 20 * 60 * 1000;""")
    s.edit("src/stores/session.spec.ts", """it("warns after 30 minutes idle", () => {
  vi.advanceTimersByTime(29 * 60 * 1000);""", """it("warns after 20 minutes idle", () => {
  vi.advanceTimersByTime(19 * 60 * 1000);""")
    s.bash("npx vitest --run src/stores", vitest_ok("admin-dashboard", "0.16.0", [("src/stores/session.spec.ts", 4)], "0.7"), desc="Store tests")
    s.stop("IDLE_WARNING_MS is 20 minutes for everyone now, with the reason in the comment; spec updated.")
    s.prompt("commit both features separately")
    commit(s, "Audit log: actor/action filters and CSV download", ["src/views/AuditView.vue", "src/api/audit.ts", "src/lib/csv.ts", "src/lib/csv.spec.ts"],
           "c91e4b7", 48, 5)
    commit(s, "Idle warning after 20 minutes (pen test)", ["src/stores/session.ts", "src/stores/session.spec.ts"], "7a0f2d6", 3, 3)
    s.stop("Committed c91e4b7 (audit filters) and 7a0f2d6 (idle warning).")
    s.end()

    h.q("fix_location", "Where did we fix the users table sorting dates as text?", "date sorting users",
        "src/components/UsersTable.vue: sortValue converts MM/DD/YYYY to UTC timestamps before comparing.",
        ["src/components/UsersTable.vue"], [e_sortfix])
    h.q("failed_command", "What did the first UsersTable component test fail with?", "component test failure",
        "[Vue warn]: Failed to resolve component: RouterLink (no router in tests); stubbed in tests/setup.ts.",
        ["Failed to resolve component: RouterLink"], [e_routerlink])
    h.q("decision", "Why did we replace axios in the dashboard?", "replace axios",
        "axios was 13 kB gzip of a 90 kB entry chunk and only JSON get/post were used; ofetch with retries on 502/503/504.",
        ["13 kB"], [e_p_ofetch])
    h.q("knowledge_update", "After how long idle does the dashboard show the session warning now?", "idle session warning",
        "20 minutes (15 -> 30 -> 20 after the pen test).", ["IDLE_WARNING_MS = 20 * 60 * 1000"], [e_idle20])
    h.q("temporal", "What idle warning did support get first, before the pen test?", "idle warning support",
        "30 minutes (raised from 15).", ["IDLE_WARNING_MS = 30 * 60 * 1000"], [e_idle30])
    h.q("file_history", "Which API files changed in the HTTP client migration?", "http client migration",
        "src/api/client.ts (ofetch.create) and src/api/users.ts (api<T>() calls), plus src/api/audit.ts.",
        ["src/api/client.ts", "src/api/users.ts"], [e_ofetch, e_users_api])
    h.q("decision", "Why was the idle warning shortened again?", "idle warning shortened",
        "The pen test found 30 minutes too long for admins with impersonation rights; 20 minutes for everyone.",
        ["impersonation"], [e_p_idle20])
    h.q("file_history", "What did we add to the audit log view?", "audit log view",
        "src/views/AuditView.vue: actor/action filters and CSV download via src/lib/csv.ts.", ["src/views/AuditView.vue"], [e_auditfilter])

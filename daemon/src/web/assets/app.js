// nmem's viewer. Plain JavaScript, no dependencies. Every stored string is attacker-influenced
// (tool output, web pages): it is only ever set as textContent, never parsed as HTML.
"use strict";

const $ = (id) => document.getElementById(id);
const el = (tag, cls, text) => {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined && text !== null) e.textContent = String(text);
  return e;
};
const when = (ms) => new Date(ms).toLocaleString();
const preview = (s, n = 160) => {
  const one = String(s || "").replace(/\s+/g, " ").trim();
  return one.length > n ? one.slice(0, n) + "…" : one;
};

async function api(path, opts = {}) {
  const init = { credentials: "same-origin", ...opts };
  if (opts.json !== undefined) {
    init.method = init.method || "POST";
    init.headers = { "content-type": "application/json" };
    init.body = JSON.stringify(opts.json);
  }
  const r = await fetch(path, init);
  const body = await r.json().catch(() => ({}));
  if (!r.ok) throw new Error(body.message || r.status + " " + r.statusText);
  return body;
}

function qs(params) {
  const u = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== "" && v !== undefined && v !== null) u.append(k, v);
  return u.toString();
}

// ---- rows ----

function rowOf(item) {
  const li = el("li");
  const isPrompt = item.kind === "prompt";
  li.dataset.id = item.id;
  li.dataset.kind = isPrompt ? "prompt" : "observation";
  const type = isPrompt ? "prompt (" + (item.source || "user") + ")" : item.obs_type || item.kind;
  li.appendChild(el("span", "type" + (isPrompt ? " prompt" : ""), type));
  const text = el("span", item.is_pinned ? "pinned" : "", preview(item.content || item.content_preview));
  li.appendChild(text);
  li.appendChild(el("span", "meta", (item.project || "") + " · " + when(item.timestamp) + " · #" + item.id));
  if (!item.kind || item.kind === "observation") li.addEventListener("click", () => openDetail(item.id));
  return li;
}

// ---- Live ----

const live = { offset: 0, project: "", seen: new Set() };

async function loadLive(reset) {
  if (reset) {
    live.offset = 0;
    live.seen.clear();
    $("live-list").replaceChildren();
  }
  const page = await api("/api/observations?" + qs({ limit: 50, offset: live.offset, project: live.project }));
  for (const o of page.items) {
    if (live.seen.has(o.id)) continue;
    live.seen.add(o.id);
    $("live-list").appendChild(rowOf(o));
  }
  live.offset += page.items.length;
  $("live-more").classList.toggle("hidden", !page.hasMore);
  $("live-count").textContent = live.seen.size + " shown";
}

function onStored(ev) {
  const d = JSON.parse(ev.data);
  if (!d.row) return;
  if (live.project && d.project !== live.project) return;
  const row = d.kind === "prompt" ? { ...d.row, kind: "prompt" } : d.row;
  if (d.kind !== "prompt") {
    if (live.seen.has(row.id)) return;
    live.seen.add(row.id);
    live.offset += 1;
  }
  const li = rowOf(row);
  li.classList.add("new");
  $("live-list").prepend(li);
  $("live-count").textContent = live.seen.size + " shown";
}

function stream() {
  const es = new EventSource("/api/events");
  es.onopen = () => ($("stream-state").textContent = "live");
  es.onerror = () => ($("stream-state").textContent = "reconnecting…");
  es.addEventListener("observation.stored", onStored);
  es.addEventListener("queue.depth", (ev) => {
    const d = JSON.parse(ev.data);
    $("stream-state").textContent = "live · queue " + d.depth;
  });
  es.addEventListener("queue.failed", (ev) => {
    const d = JSON.parse(ev.data);
    const li = el("li", "error", d.class + ": " + d.message);
    $("failures").prepend(li);
  });
}

// ---- detail and timeline ----

let current = null;

async function openDetail(id) {
  const o = await api("/api/observation/" + id);
  current = o;
  $("detail").classList.remove("hidden");
  $("detail-title").textContent = "#" + o.id + " " + o.obs_type + " · " + o.project;
  $("detail-body").textContent =
    when(o.timestamp) + (o.file_path ? "\n" + o.file_path : "") + (o.tool_name ? "\ntool: " + o.tool_name : "") + "\n\n" + o.content;
  showPin(o.is_pinned);
  const t = await api("/api/timeline?" + qs({ anchor: id, before: 5, after: 5 }));
  const list = $("timeline");
  list.replaceChildren();
  for (const x of t.before) list.appendChild(rowOf(x));
  const a = rowOf(t.anchor);
  a.classList.add("anchor");
  list.appendChild(a);
  for (const x of t.after) list.appendChild(rowOf(x));
}

function showPin(pinned) {
  $("pin-btn").textContent = pinned ? "Unpin" : "Pin";
  $("pin-state").textContent = pinned ? "pinned" : "";
}

async function togglePin() {
  if (!current) return;
  const r = await api("/api/pin", { json: { id: current.id, pinned: !current.is_pinned } });
  current.is_pinned = r.pinned;
  showPin(r.pinned);
}

// ---- Search ----

const search = { offset: 0, params: null };

async function runSearch(more) {
  if (!more) {
    search.offset = 0;
    search.params = {
      query: $("q").value,
      project: $("s-project").value,
      type: $("s-type").value,
      file: $("s-file").value,
      dateStart: $("s-since").value,
      dateEnd: $("s-until").value,
      orderBy: $("s-order").value,
      limit: 20,
    };
    $("search-results").replaceChildren();
  }
  const r = await api("/api/search?" + qs({ ...search.params, offset: search.offset })).catch((e) => {
    $("search-notes").textContent = e.message;
    return null;
  });
  if (!r) return;
  $("search-notes").textContent = [r.mode + " search", ...(r.notes || [])].join(" · ");
  for (const h of r.items) {
    const li = rowOf({ ...h, content: h.content_preview });
    const why = (h.retrieval_sources || [])
      .map((s) => s.source + (s.tier ? " (" + s.tier + ")" : "") + (s.similarity ? " " + s.similarity.toFixed(2) : "") + " #" + s.rank)
      .join(", ");
    li.appendChild(el("span", "why", "why: " + (why || "matched")));
    $("search-results").appendChild(li);
  }
  search.offset += r.items.length;
  $("search-more").classList.toggle("hidden", r.items.length < search.params.limit);
}

// ---- Sessions ----

const sess = { offset: 0 };

async function loadSessions(reset) {
  if (reset) {
    sess.offset = 0;
    document.querySelector("#sessions-table tbody").replaceChildren();
  }
  const p = await api("/api/sessions?" + qs({ limit: 50, offset: sess.offset, project: $("sess-project").value }));
  const body = document.querySelector("#sessions-table tbody");
  for (const s of p.items) {
    const tr = el("tr");
    const sig = s.signature ? Object.entries(s.signature).map(([k, v]) => k + " " + v).join(", ") : "";
    const dur = s.durationMs == null ? "open" : Math.round(s.durationMs / 60000) + " min";
    for (const c of [when(s.startedAt), s.project, s.startSource || "", dur, s.prompts, s.compactions, sig]) tr.appendChild(el("td", "", c));
    tr.addEventListener("click", () => openSession(s.id));
    body.appendChild(tr);
  }
  sess.offset += p.items.length;
  $("sessions-more").classList.toggle("hidden", !p.hasMore);
}

async function openSession(id) {
  const p = await api("/api/session/" + encodeURIComponent(id) + "?limit=500");
  current = null;
  $("detail").classList.remove("hidden");
  $("detail-title").textContent = p.session.project + " · " + when(p.session.startedAt);
  $("detail-body").textContent = "session " + p.session.id + (p.session.title ? "\n" + p.session.title : "");
  $("pin-btn").classList.add("hidden");
  const list = $("timeline");
  list.replaceChildren();
  for (const x of p.items) list.appendChild(rowOf(x));
}

// ---- Health ----

async function loadHealth() {
  const s = await api("/api/stats");
  const st = s.status;
  const cards = [
    ["observations", st.observations],
    ["prompts", st.prompts],
    ["sessions", st.sessions],
    ["queue", st.queue_depth + " of " + st.queue_capacity],
    ["ingest", st.ingest_per_s.toFixed(2) + " events/s"],
    ["spool", st.spool_backlog + " waiting, " + st.spool_corrupt + " quarantined"],
    ["redactions", st.redactions],
    ["database", (st.db_bytes / 1048576).toFixed(1) + " MB"],
    ["version", st.version + " · up " + Math.round(st.uptime_s / 60) + " min"],
    ["last error", st.last_error || "none"],
  ];
  if (st.embedding) cards.push(["embedding", (st.embedding.model || "?") + ": " + st.embedding.embedded + " embedded, " + st.embedding.pending + " waiting"]);
  for (const d of st.degraded || []) cards.push(["degraded", d]);
  $("health-grid").replaceChildren(
    ...cards.map(([k, v]) => {
      const c = el("div", "card");
      c.appendChild(el("span", "muted", k));
      c.appendChild(el("b", "", v));
      return c;
    })
  );
  const t = await api("/api/ops/trends?windowSec=3600&bucketSec=60");
  chart(t.buckets);
  const f = await api("/api/ops/failure-summary?limit=20");
  $("failures").replaceChildren(...f.recent.map((x) => el("li", "error", when(x.atMs) + " " + x.errorClass + ": " + x.message)));
}

function chart(buckets) {
  const NS = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(NS, "svg");
  const W = 600, H = 140, n = buckets.length || 1, bw = W / n;
  svg.setAttribute("viewBox", "0 0 " + W + " " + H);
  svg.setAttribute("preserveAspectRatio", "none");
  const maxE = Math.max(1, ...buckets.map((b) => b.eventCount));
  const maxS = Math.max(1, ...buckets.map((b) => b.searchCount));
  buckets.forEach((b, i) => {
    const h = (b.eventCount / maxE) * (H - 10);
    const r = document.createElementNS(NS, "rect");
    r.setAttribute("x", i * bw);
    r.setAttribute("y", H - h);
    r.setAttribute("width", Math.max(1, bw - 1));
    r.setAttribute("height", h);
    svg.appendChild(r);
  });
  const line = document.createElementNS(NS, "polyline");
  line.setAttribute("points", buckets.map((b, i) => i * bw + bw / 2 + "," + (H - (b.searchCount / maxS) * (H - 10))).join(" "));
  svg.appendChild(line);
  // The writer's deepest queue per bucket, on its own scale.
  const maxQ = Math.max(1, ...buckets.map((b) => b.maxQueueDepth));
  const depth = document.createElementNS(NS, "polyline");
  depth.setAttribute("class", "depth");
  depth.setAttribute("points", buckets.map((b, i) => i * bw + bw / 2 + "," + (H - (b.maxQueueDepth / maxQ) * (H - 10))).join(" "));
  svg.appendChild(depth);
  $("chart").replaceChildren(svg);
}

// ---- Actions ----

async function pinById(pinned) {
  const id = parseInt($("pin-id").value, 10);
  try {
    await api("/api/pin", { json: { id, pinned } });
    $("pin-result").textContent = "#" + id + (pinned ? " pinned" : " unpinned");
  } catch (e) {
    $("pin-result").textContent = e.message;
  }
}

function purgeRequest(apply) {
  const req = { apply };
  if ($("purge-project").value) req.project = $("purge-project").value;
  if ($("purge-session").value) req.session = $("purge-session").value;
  return req;
}

async function purge(apply) {
  try {
    const r = await api("/api/purge", { json: purgeRequest(apply) });
    if (apply) {
      $("purge-result").textContent = "deleted " + r.deleted_observations + " observations";
      $("purge-apply").disabled = true;
    } else {
      $("purge-result").textContent = r.total_candidates + " rows would be deleted";
      $("purge-apply").disabled = r.total_candidates === 0;
    }
  } catch (e) {
    $("purge-result").textContent = e.message;
  }
}

// ---- wiring ----

function show(view) {
  for (const b of document.querySelectorAll(".tab")) b.classList.toggle("active", b.dataset.view === view);
  for (const s of document.querySelectorAll(".view")) s.classList.toggle("hidden", s.id !== "view-" + view);
  if (view === "sessions" && sess.offset === 0) loadSessions(true);
  if (view === "health") loadHealth();
}

async function projects() {
  const p = await api("/api/projects");
  for (const sel of ["live-project", "s-project", "sess-project"]) {
    for (const name of p.projects) {
      const o = el("option", "", name);
      o.value = name;
      $(sel).appendChild(o);
    }
  }
}

document.addEventListener("DOMContentLoaded", () => {
  for (const b of document.querySelectorAll(".tab")) b.addEventListener("click", () => show(b.dataset.view));
  $("live-more").addEventListener("click", () => loadLive(false));
  $("live-project").addEventListener("change", () => {
    live.project = $("live-project").value;
    loadLive(true);
  });
  $("search-form").addEventListener("submit", (e) => {
    e.preventDefault();
    runSearch(false);
  });
  $("search-more").addEventListener("click", () => runSearch(true));
  $("sess-project").addEventListener("change", () => loadSessions(true));
  $("sessions-more").addEventListener("click", () => loadSessions(false));
  $("pin-btn").addEventListener("click", togglePin);
  $("detail-close").addEventListener("click", () => {
    $("detail").classList.add("hidden");
    $("pin-btn").classList.remove("hidden");
  });
  $("pin-form").addEventListener("submit", (e) => {
    e.preventDefault();
    pinById(true);
  });
  $("unpin-do").addEventListener("click", () => pinById(false));
  $("purge-form").addEventListener("submit", (e) => {
    e.preventDefault();
    purge(false);
  });
  $("purge-apply").addEventListener("click", () => {
    if (confirm($("purge-result").textContent + ": delete them?")) purge(true);
  });
  for (const id of ["purge-project", "purge-session"]) $(id).addEventListener("input", () => ($("purge-apply").disabled = true));
  $("export-project").addEventListener("input", () => {
    $("export-link").href = "/api/export?" + qs({ project: $("export-project").value });
  });
  projects().catch(() => {});
  loadLive(true).then(stream, (e) => ($("stream-state").textContent = e.message));
});

"""`nmem serve` driven by a real MCP client we did not write: the official Python SDK.

Starts the real nmemd in a temporary NMEM_HOME, records the Claude Code fixtures with the real
`nmem record`, then speaks MCP over stdio to `nmem serve`: initialize, tools/list, every tool with
normal, edge and error inputs (ADR-006's error table), the parameter names claude-mem and CodexMem
clients send, and the daemon being down. Run by scripts/test; prints `mcp: N passed, M failed`.
"""

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client

BIN = Path(os.environ["NMEM_BIN_DIR"])  # set by scripts/env.sh
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "hooks" / "claude-code"
RESULTS = {"passed": 0, "failed": 0}


def check(name, cond, detail=""):
    if cond:
        RESULTS["passed"] += 1
    else:
        RESULTS["failed"] += 1
        print(f"FAIL {name}: {detail}", file=sys.stderr)


def attr(obj, *names):
    # The SDK's field names changed between versions (serverInfo → server_info, isError → is_error).
    for n in names:
        if hasattr(obj, n):
            return getattr(obj, n)
    raise AttributeError(names)


def is_error(result):
    return bool(attr(result, "is_error", "isError"))


def text(result):
    return "".join(c.text for c in result.content if getattr(c, "type", "") == "text")


def payload(result):
    return json.loads(text(result))


def items(result):
    """A search reply's hits (the reply is {items, mode, query, notes})."""
    return payload(result)["items"]


class Home:
    def __init__(self):
        self.dir = Path(tempfile.mkdtemp(prefix="nmem-mcp-"))
        self.env = dict(os.environ, NMEM_HOME=str(self.dir), NMEM_NO_AUTOSTART="1")
        self.project = self.dir / "acme-api"  # the fixtures' project, as the server's cwd
        self.project.mkdir()
        self.daemon = None

    def start(self):
        self.daemon = subprocess.Popen([BIN / "nmemd"], env=self.env, stderr=subprocess.DEVNULL)
        deadline = time.time() + 20
        while time.time() < deadline:
            r = subprocess.run([BIN / "nmemctl", "status", "--json"], env=self.env, capture_output=True)
            if r.returncode == 0:
                return
            time.sleep(0.02)
        raise RuntimeError("nmemd did not start")

    def stop(self):
        if self.daemon:
            self.daemon.send_signal(signal.SIGTERM)
            self.daemon.wait()
            self.daemon = None

    def record(self, name):
        data = (FIXTURES / name).read_bytes()
        r = subprocess.run([BIN / "nmem", "record"], input=data, env=self.env, capture_output=True)
        assert r.returncode == 0, r

    def server(self, profile=None):
        args = ["serve"] + (["--profile", profile] if profile else [])
        return StdioServerParameters(command=str(BIN / "nmem"), args=args, env=self.env, cwd=str(self.project))


async def with_daemon(home):
    async with stdio_client(home.server()) as (read, write):
        async with ClientSession(read, write) as s:
            init = await s.initialize()
            check("server name", attr(init, 'server_info', 'serverInfo').name == "nmem", attr(init, 'server_info', 'serverInfo'))
            check("server version", attr(init, 'server_info', 'serverInfo').version and attr(init, 'server_info', 'serverInfo').version[0].isdigit(), attr(init, 'server_info', 'serverInfo'))
            check("instructions explain the workflow", "search" in (init.instructions or "") and "timeline" in init.instructions and "get_observations" in init.instructions, init.instructions)

            tools = {t.name: t for t in (await s.list_tools()).tools}
            check("six tools", set(tools) == {"search", "get_observations", "timeline", "recent_context", "save_memory", "__IMPORTANT"}, list(tools))
            r = await s.call_tool("__IMPORTANT", {"ignored": 1})
            check("__IMPORTANT explains the workflow and ignores its arguments", not is_error(r) and "search" in text(r) and "timeline" in text(r) and "get_observations" in text(r), text(r))
            check("search schema names query", "query" in json.dumps(attr(tools["search"], "input_schema", "inputSchema")), attr(tools["search"], "input_schema", "inputSchema"))
            # Documents (`nmem ingest`) came as optional parameters only: the contract stays compatible.
            search_schema = attr(tools["search"], "input_schema", "inputSchema")
            check("search has optional include_docs", "include_docs" in search_schema["properties"] and "include_docs" not in search_schema.get("required", []), search_schema)
            check("search has optional origin", "origin" in search_schema["properties"] and "origin" not in search_schema.get("required", []), search_schema)
            get_schema = attr(tools["get_observations"], "input_schema", "inputSchema")
            check("get_observations has optional doc_ids", "doc_ids" in get_schema["properties"] and "doc_ids" not in get_schema.get("required", []), get_schema)

            # search: normal, path, prompt, aliases, filters, no results, malformed FTS.
            r = await s.call_tool("search", {"query": "src/routes/invoices.ts"})
            hits = items(r)
            check("search by path", not is_error(r) and {h["obs_type"] for h in hits} >= {"file_read", "file_edit"}, hits)
            check("previews are short", all(len(h["content_preview"]) <= 120 for h in hits), hits)
            r = await s.call_tool("search", {"query": "regression test", "type": "user_prompt"})
            hits = items(r)
            check("prompt results carry their text", hits and hits[0]["kind"] == "prompt" and hits[0]["content"].startswith("Issue #482"), hits)
            r = await s.call_tool("search", {"query": "tsc", "obs_type": ["command_error", "command"], "orderBy": "date_desc", "dateStart": "2000-01-01"})
            check("aliases obs_type list, orderBy, dateStart", not is_error(r) and items(r)[0]["obs_type"] == "command_error", text(r))
            r = await s.call_tool("search", {"query": "tsc", "dateEnd": "2001-01-01"})
            check("dateEnd filters", items(r) == [], text(r))
            r = await s.call_tool("search", {"query": "echo", "project": None})
            check("project null means all", len(items(r)) == 1, text(r))
            r = await s.call_tool("search", {"query": "echo"})
            check("project defaults to the server's", items(r) == [], text(r))
            # Sync: every result says where it was captured; nothing here came from a teammate.
            r = await s.call_tool("search", {"query": "echo", "project": None, "origin": "this-device"})
            check("search by origin: this device's rows, each saying so", not is_error(r) and items(r) and all(h["origin"]["kind"] == "this-device" for h in items(r)), text(r))
            r = await s.call_tool("search", {"query": "echo", "project": None, "origin": "team"})
            check("search by origin: no teammate's rows here", not is_error(r) and items(r) == [], text(r))
            r = await s.call_tool("search", {"query": "zebra-unicorn"})
            check("no results is an empty list", not is_error(r) and items(r) == [], text(r))
            r = await s.call_tool("search", {"query": "\"unbalanced"})
            check("malformed FTS is a tool error with SQLite's message", is_error(r) and "unterminated string" in text(r), text(r))
            r = await s.call_tool("search", {"query": "invoices", "files": ["invoices.ts"], "limit": 1, "offset": 0})
            check("files filter and limit", len(items(r)) == 1 and items(r)[0]["file_path"].endswith("invoices.ts"), text(r))
            r = await s.call_tool("search", {})
            check("missing query is a tool error", is_error(r), text(r))
            r = await s.call_tool("search", {"query": "invoices"})
            reply = payload(r)
            check("a search reply says how it searched", reply["mode"] == "lexical" and reply["query"]["syntax"] == "words" and any("no embedding model" in n for n in reply.get("notes", [])), reply)
            check("every hit says how it was found", reply["items"] and all(h["retrieval_sources"] and h["retrieval_sources"][0]["source"] in ("lexical", "context") for h in reply["items"]), reply)
            r = await s.call_tool("search", {"query": "invoices", "mode": "semantic"})
            check("mode semantic without a model is a tool error saying what to do", is_error(r) and "nmemctl model import" in text(r), text(r))
            r = await s.call_tool("search", {"query": "df.to_parquet() ArrowInvalid: invoices.ts"})
            check("incidental punctuation is searched as words", not is_error(r), text(r))

            edit = payload(await s.call_tool("search", {"query": "skip", "type": "file_edit"}))["items"][0]["id"]
            # get_observations.
            r = await s.call_tool("get_observations", {"ids": [edit, 999999]})
            obs = payload(r)
            check("get keeps order, leaves out missing", [o["id"] for o in obs] == [edit], obs)
            r = await s.call_tool("get_observations", {"ids": []})
            check("empty ids is a tool error", is_error(r) and "ids array must not be empty" in text(r), text(r))
            r = await s.call_tool("get_observations", {"ids": [999999]})
            check("all ids missing is an empty list", not is_error(r) and payload(r) == [], text(r))

            # timeline: anchor, query, depth aliases, missing anchor.
            r = await s.call_tool("timeline", {"anchor": edit, "before": 1, "after": 1})
            t = payload(r)
            check("timeline around an anchor", t["anchor"]["id"] == edit and len(t["before"]) == 1 and len(t["after"]) == 1, t)
            r = await s.call_tool("timeline", {"query": "tsc", "depth_before": 0, "depth_after": 2})
            t = payload(r)
            check("timeline by query with depth aliases", t["anchor"]["obs_type"] == "command_error" and len(t["after"]) <= 2, t)
            r = await s.call_tool("timeline", {"anchor": 424242})
            check("missing anchor is a tool error", is_error(r) and "anchor observation not found" in text(r), text(r))
            r = await s.call_tool("timeline", {})
            check("timeline needs anchor or query", is_error(r), text(r))

            # recent_context and save_memory.
            r = await s.call_tool("recent_context", {"limit": 3})
            check("recent_context", len(payload(r)) == 3 and payload(r)[0]["project"] == "acme-api", text(r))
            r = await s.call_tool("recent_context", {"project": "no-such-project"})
            check("recent_context of an unknown project backfills from others", not is_error(r), text(r))
            r = await s.call_tool("save_memory", {"text": "Cursor pages must skip the cursor row", "title": "pagination rule"})
            saved = payload(r)
            check("save_memory returns id and project", saved["project"] == "acme-api" and saved["id"] > 0, saved)
            r = await s.call_tool("search", {"query": "skip the cursor row", "type": "memory"})
            check("a saved memory is searchable", items(r)[0]["id"] == saved["id"], text(r))
            r = await s.call_tool("save_memory", {"text": "  "})
            check("empty memory is a tool error", is_error(r), text(r))

            # format: "text" is one compact line per item; other formats are tool errors.
            r = await s.call_tool("search", {"query": "invoices", "format": "text"})
            lines = [l for l in text(r).splitlines() if not l.startswith("note: ")]
            check("format text: a line per hit", not is_error(r) and len(lines) >= 2 and all(l.startswith(("#", "prompt ")) and "[acme-api]" in l for l in lines), text(r))
            r = await s.call_tool("timeline", {"anchor": edit, "format": "text"})
            check("format text: the timeline marks its anchor", not is_error(r) and f"> #{edit} " in text(r), text(r))
            r = await s.call_tool("search", {"query": "invoices", "format": "xml"})
            check("unknown format is a tool error", is_error(r) and "format must be" in text(r), text(r))

            # Unknown tools are protocol errors.
            try:
                await s.call_tool("no_such_tool", {})
                check("unknown tool raises", False, "no error")
            except Exception:
                check("unknown tool raises", True)


async def knowledge_in_nmem_face(home):
    """The default face: knowledge hits in `search`, read by `get_observations` with knowledge_ids."""
    kid = add_knowledge(home, "Refund webhooks answer within two seconds", "Stripe retries after that", kind="fact")
    async with stdio_client(home.server()) as (read, write):
        async with ClientSession(read, write) as s:
            await s.initialize()
            hits = items(await s.call_tool("search", {"query": "refund webhooks seconds"}))
            hit = next((h for h in hits if h["kind"] == "knowledge"), None)
            check("search finds a knowledge item with its standing", hit and hit["id"] == kid and hit["knowledge"]["status"] == "active"
                  and hit["obs_type"] == "fact", hits)
            r = await s.call_tool("get_observations", {"knowledge_ids": [kid]})
            got = payload(r)
            check("get_observations takes knowledge_ids", not is_error(r) and got[0]["obs_type"] == "knowledge" and got[0]["metadata"]["id"] == kid, got)
            r = await s.call_tool("search", {"query": "refund webhooks seconds", "format": "text"})
            check("the text format labels it", f"knowledge {kid}" in text(r), text(r))
            r = await s.call_tool("search", {"query": "refund", "knowledge_status": "forgotten"})
            check("a bad knowledge_status is an error naming it", is_error(r) and "knowledge_status" in text(r), text(r))


async def with_roots(home):
    root = home.dir / "roots-app"
    root.mkdir()

    async def roots(context):
        return types.ListRootsResult(roots=[types.Root(uri=root.as_uri(), name="app")])

    async with stdio_client(home.server()) as (read, write):
        async with ClientSession(read, write, list_roots_callback=roots) as s:
            await s.initialize()
            r = await s.call_tool("save_memory", {"text": "The client's roots name the project"})
            check("project defaults to the client's first root", not is_error(r) and payload(r)["project"] == "roots-app", text(r))
            r = await s.call_tool("search", {"query": "roots name the project"})
            check("search defaults to the root's project too", len(items(r)) == 1, text(r))


def v1_error(result):
    """A codex-mem v1 error: the tool result is an error whose text is {code, message, details}."""
    if not is_error(result):
        return None
    try:
        e = json.loads(text(result))
    except ValueError:
        return None
    return e.get("code") if set(e) == {"code", "message", "details"} else None


async def codex_mem(home, daemon_up=True):
    """`nmem serve --profile codex-mem`: codex-mem's MCP API v1, exactly."""
    async with stdio_client(home.server("codex-mem")) as (read, write):
        async with ClientSession(read, write) as s:
            await s.initialize()
            tools = {t.name for t in (await s.list_tools()).tools}
            check("codex-mem: the v1 tools", tools == {"save_memory", "search", "timeline", "get_entries", "ingest_docs", "retention_dry_run"}, tools)
            if not daemon_up:
                r = await s.call_tool("search", {"query": "invoices"})
                check("codex-mem: daemon down is STORAGE_FAILURE", v1_error(r) == "STORAGE_FAILURE", text(r))
                r = await s.call_tool("ingest_docs", {})
                check("codex-mem: ingest_docs with the daemon down is STORAGE_FAILURE", v1_error(r) == "STORAGE_FAILURE", text(r))
                return
            r = await s.call_tool("save_memory", {"text": "Refunds are idempotent by refund id", "title": "refund rule",
                                                  "type": "decision", "source_ref": "PR #88", "metadata": {"team": "billing"},
                                                  "unknown_field": True})
            saved = payload(r)
            check("codex-mem: save_memory → {status, id, created_at}", not is_error(r) and saved["status"] == "saved"
                  and isinstance(saved["id"], str) and saved["id"].isdigit() and saved["created_at"].endswith("Z"), text(r))
            r = await s.call_tool("search", {"query": "invoices", "limit": 2})
            page = payload(r)
            check("codex-mem: search → {items, total, limit, offset}", not is_error(r) and set(page) == {"items", "total", "limit", "offset"}
                  and page["limit"] == 2 and page["offset"] == 0 and len(page["items"]) == 2 and page["total"] >= 2, page)
            item = page["items"][0]
            check("codex-mem: EntryIndexItem fields, id a string, snippet ≤ 200", {"id", "title", "entry_type", "project", "created_at", "score"} <= set(item)
                  and isinstance(item["id"], str) and len(item.get("snippet", "")) <= 200 and item["project"] == "acme-api", item)
            r2 = payload(await s.call_tool("search", {"query": "invoices", "limit": 1, "offset": 1}))
            check("codex-mem: offset pages", r2["items"] and r2["items"][0]["id"] == page["items"][1]["id"], (page, r2))
            r = await s.call_tool("search", {"query": "refund", "type": "memory"})
            check("codex-mem: type filters", [i["id"] for i in payload(r)["items"]] == [saved["id"]], text(r))
            for args, name in [({}, "query missing"), ({"query": "x", "limit": 0}, "limit 0"), ({"query": "x", "limit": 101}, "limit 101"),
                               ({"query": "x", "offset": -1}, "offset -1")]:
                check(f"codex-mem: search {name} is INVALID_ARGUMENT", v1_error(await s.call_tool("search", args)) == "INVALID_ARGUMENT", args)
            r = await s.call_tool("get_entries", {"ids": [saved["id"], item["id"], "999999"]})
            got = payload(r)["items"]
            check("codex-mem: get_entries in order, missing left out", [g["id"] for g in got] == [saved["id"], item["id"]], got)
            check("codex-mem: EntryDetailItem keeps type, source_ref, metadata", got[0]["entry_type"] == "decision" and got[0]["source_ref"] == "PR #88"
                  and got[0]["metadata"]["team"] == "billing" and got[0]["title"] == "refund rule" and "idempotent" in got[0]["body"], got[0])
            r = await s.call_tool("get_entries", {"ids": [item["id"]] * 200})
            check("codex-mem: get_entries takes 200 ids", not is_error(r) and len(payload(r)["items"]) == 200, text(r)[:200])
            for ids in [[], [item["id"]] * 201, ["p4"]]:
                check(f"codex-mem: get_entries {len(ids)} ids / bad id is INVALID_ARGUMENT", v1_error(await s.call_tool("get_entries", {"ids": ids})) == "INVALID_ARGUMENT", ids)
            r = await s.call_tool("timeline", {"anchor_id": item["id"], "depth_before": 1, "depth_after": 1})
            t = payload(r)
            check("codex-mem: timeline → {anchor_id, items} around the anchor", t["anchor_id"] == item["id"] and item["id"] in [i["id"] for i in t["items"]]
                  and len(t["items"]) <= 3, t)
            check("codex-mem: timeline missing anchor is ENTRY_NOT_FOUND", v1_error(await s.call_tool("timeline", {"anchor_id": "424242"})) == "ENTRY_NOT_FOUND")
            check("codex-mem: timeline depth 21 is INVALID_ARGUMENT", v1_error(await s.call_tool("timeline", {"anchor_id": item["id"], "depth_before": 21})) == "INVALID_ARGUMENT")
            before = len(payload(await s.call_tool("search", {"query": "invoices", "limit": 100}))["items"])
            r = await s.call_tool("retention_dry_run", {"max_age_days": 1, "now": "2100-01-01T00:00:00Z"})
            dry = payload(r)
            check("codex-mem: retention_dry_run → dry-run counts by reason", not is_error(r) and dry["mode"] == "dry-run" and dry["total_candidates"] > 0
                  and dry["by_reason"].get("age", 0) > 0 and dry["candidate_ids"], dry)
            after = len(payload(await s.call_tool("search", {"query": "invoices", "limit": 100}))["items"])
            check("codex-mem: a dry run deletes nothing", before == after, (before, after))
            r = await s.call_tool("retention_dry_run", {"max_age_days": 1})
            check("codex-mem: nothing is a day old yet", payload(r)["total_candidates"] == 0, text(r))
            for args in [{"max_age_days": 0}, {"max_entries_per_project": -3}, {"now": "yesterday-ish"}]:
                check(f"codex-mem: retention_dry_run {args} is INVALID_ARGUMENT", v1_error(await s.call_tool("retention_dry_run", args)) == "INVALID_ARGUMENT", args)
            check("codex-mem: save_memory without text is INVALID_ARGUMENT", v1_error(await s.call_tool("save_memory", {"title": "t"})) == "INVALID_ARGUMENT")

            # ingest_docs: the folder's Markdown and docs/ by default; unchanged → nothing imported.
            (home.project / "docs").mkdir(exist_ok=True)
            (home.project / "DECISIONS.md").write_text("# Decisions\n\n## Storage\n\nWe keep invoices in the marmalade archive for seven years.\n")
            (home.project / "docs" / "requirements.md").write_text("# Requirements\n\nRefund webhooks must be answered within two seconds.\n\n## Storage\n\nWe keep invoices in the marmalade archive for seven years.\n")
            r = await s.call_tool("ingest_docs", {"unknown_field": 1})
            out = payload(r)
            check("codex-mem: ingest_docs → {processed_sources, imported_entries, duplicate_entries, skipped_sources}", not is_error(r)
                  and set(out) == {"processed_sources", "imported_entries", "duplicate_entries", "skipped_sources"}
                  and out["processed_sources"] == 2 and out["imported_entries"] >= 2 and out["duplicate_entries"] == 1, out)
            out = payload(await s.call_tool("ingest_docs", {}))
            check("codex-mem: ingest_docs of unchanged sources imports nothing", out["imported_entries"] == 0 and out["processed_sources"] == 2, out)
            out = payload(await s.call_tool("ingest_docs", {"sources": ["DECISIONS.md", "missing.md"], "entry_type": "decision"}))
            check("codex-mem: a missing source is skipped, named", out["processed_sources"] == 1 and len(out["skipped_sources"]) == 1
                  and out["skipped_sources"][0].endswith("missing.md"), out)
            for args in [{"sources": "DECISIONS.md"}, {"sources": [3]}, {"entry_type": 5}]:
                check(f"codex-mem: ingest_docs {args} is INVALID_ARGUMENT", v1_error(await s.call_tool("ingest_docs", args)) == "INVALID_ARGUMENT", args)
            page = payload(await s.call_tool("search", {"query": "marmalade archive"}))
            doc = next((i for i in page["items"] if i["id"].startswith("d")), None)
            check("codex-mem: search finds a document entry as d<id>", doc and doc["entry_type"] == "doc" and doc["title"] == "Decisions > Storage"
                  and doc["project"] == "acme-api", page)
            did = doc["id"] if doc else "d1"
            got = payload(await s.call_tool("get_entries", {"ids": [did, saved["id"]]}))["items"]
            check("codex-mem: get_entries takes d<id>, in order", [g["id"] for g in got] == [did, saved["id"]] and "marmalade" in got[0]["body"]
                  and got[0]["source_ref"].endswith("DECISIONS.md") and got[0]["session_id"] is None, got)
            # A document entry's timeline: the chunks around it in its document, in order, ids d<id>.
            (home.project / "docs" / "runbook.md").write_text("# Runbook\n\n## Deploy\n\nShip the quokka build.\n\n## Verify\n\nCheck the quokka health page.\n\n## Roll back\n\nRestore the previous quokka build.\n")
            await s.call_tool("ingest_docs", {"sources": ["docs/runbook.md"]})
            page = payload(await s.call_tool("search", {"query": "quokka health page"}))
            verify = next((i for i in page["items"] if i["id"].startswith("d")), None)
            vid = verify["id"] if verify else "d1"
            r = await s.call_tool("timeline", {"anchor_id": vid, "depth_before": 1, "depth_after": 1})
            t = payload(r)
            titles = [i["title"] for i in t.get("items", [])]
            check("codex-mem: timeline of a document entry → the chunks around it in its document", not is_error(r) and t["anchor_id"] == vid
                  and [i["id"] for i in t["items"]][1] == vid and all(i["id"].startswith("d") and i["entry_type"] == "doc" for i in t["items"])
                  and titles == ["Runbook > Deploy", "Runbook > Verify", "Runbook > Roll back"], t)
            check("codex-mem: timeline of a missing document entry is ENTRY_NOT_FOUND", v1_error(await s.call_tool("timeline", {"anchor_id": "d987654"})) == "ENTRY_NOT_FOUND")

            # Knowledge and work items are entries k<id>: found by search, read by get_entries.
            kid = add_knowledge(home, "Invoices are archived in kumquat storage", "Seven years, then deleted")
            page = payload(await s.call_tool("search", {"query": "kumquat storage"}))
            k = next((i for i in page["items"] if i["id"] == f"k{kid}"), None)
            check("codex-mem: search finds a knowledge entry as k<id>", k and k["entry_type"] == "decision" and k["project"] == "acme-api"
                  and "kumquat" in k["snippet"], page)
            got = payload(await s.call_tool("get_entries", {"ids": [f"k{kid}", saved["id"]]}))["items"]
            check("codex-mem: get_entries takes k<id>", [g["id"] for g in got] == [f"k{kid}", saved["id"]] and "kumquat" in got[0]["body"]
                  and got[0]["entry_type"] == "decision" and got[0]["metadata"]["status"] == "active" and got[0]["session_id"] is None, got)
            check("codex-mem: timeline of a knowledge entry is INVALID_ARGUMENT", v1_error(await s.call_tool("timeline", {"anchor_id": f"k{kid}"})) == "INVALID_ARGUMENT")


def add_knowledge(home, title, summary, kind="decision"):
    """A knowledge item written with the real `nmem knowledge add`; its id."""
    r = subprocess.run([BIN / "nmem", "knowledge", "add", "--kind", kind, "--title", title, "--summary", summary,
                        "--reason", "the auditors asked", "--json"], env=home.env, cwd=home.project, capture_output=True)
    assert r.returncode == 0, r
    return json.loads(r.stdout)["item"]["id"]


def pdf(text):
    """A minimal one-page PDF with `text` in Helvetica, its cross-reference table computed."""
    stream = f"BT /F1 18 Tf 72 700 Td ({text}) Tj ET"
    objects = ["<< /Type /Catalog /Pages 2 0 R >>", "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
               "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>",
               f"<< /Length {len(stream)} >>\nstream\n{stream}\nendstream",
               "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>"]
    out, offsets = b"%PDF-1.4\n", []
    for i, o in enumerate(objects):
        offsets.append(len(out))
        out += f"{i + 1} 0 obj\n{o}\nendobj\n".encode()
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    for off in offsets:
        out += f"{off:010} 00000 n \n".encode()
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return out


def web_page(body):
    """Serve `body` as text/html on a local port until the process ends; returns the URL."""
    import http.server
    import threading

    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{srv.server_address[1]}/runbook.html"


def sub_error(result):
    """A memory-substrate error: a tool error whose text starts with its kind (`ValueError: …`)."""
    return text(result).split(":", 1)[0] if is_error(result) else None


async def substrate(home, daemon_up=True):
    """`nmem serve --profile substrate`: memory-substrate's four tools, resources and prompts."""
    async with stdio_client(home.server("substrate")) as (read, write):
        async with ClientSession(read, write) as s:
            await s.initialize()
            tools = {t.name: t for t in (await s.list_tools()).tools}
            check("substrate: the four tools", set(tools) == {"memory_ingest", "memory_query", "memory_remember", "memory_maintain"}, set(tools))

            async def call(tool, mode, input_data, options=None, **extra):
                args = {"mode": mode, "input_data": input_data}
                if options is not None:
                    args["options"] = options
                return await s.call_tool(tool, {"args": args, **extra})

            if not daemon_up:
                r = await call("memory_query", "search", {"query": "invoices"})
                check("substrate: daemon down is StorageError", sub_error(r) == "StorageError" and "nmemd" in text(r), text(r))
                return
            schema = attr(tools["memory_query"], "inputSchema", "input_schema")
            check("substrate: the schema is the {args: {mode, input_data, options}} envelope",
                  "args" in schema.get("properties", {}) and "args" in schema.get("required", []), schema)
            # Resources and prompts.
            res = {str(r.uri) for r in (await s.list_resources()).resources}
            check("substrate: resources", res == {"memory://policy", "memory://agent-playbook", "memory://mcp-api-summary"}, res)
            for uri, word in [("memory://policy", "memory_remember"), ("memory://agent-playbook", "memory_query"), ("memory://mcp-api-summary", "memory_maintain")]:
                body = "".join(c.text for c in (await s.read_resource(uri)).contents)
                check(f"substrate: {uri} reads", word in body, body[:200])
            prompts = {p.name for p in (await s.list_prompts()).prompts}
            check("substrate: prompts", prompts == {"memory_task_start", "memory_review"}, prompts)
            p = await s.get_prompt("memory_task_start", {"task": "fix refunds"})
            check("substrate: memory_task_start says to query and retry", "fix refunds" in p.messages[0].content.text and "retry" in p.messages[0].content.text, p)
            p = await s.get_prompt("memory_review", {})
            check("substrate: memory_review handles possible_duplicates", "possible_duplicates" in p.messages[0].content.text, p)

            # The envelope, strictly.
            for args, kind, says in [
                ({}, "ValidationError", "args: Field required"),
                ({"args": {"mode": "search"}}, "ValidationError", "input_data: Field required"),
                ({"args": {"mode": "search", "input_data": {"query": "x"}, "root": "/tmp"}}, "ValidationError", "Extra inputs are not permitted"),
                ({"args": {"mode": "search", "input_data": {"query": "x"}}, "root": "/tmp"}, "ValidationError", "Extra inputs are not permitted"),
                ({"args": {"mode": "search", "input_data": {"query": "x", "qurey": "y"}}}, "ValidationError", "input_data.qurey: Extra inputs are not permitted"),
                ({"args": {"mode": "search", "input_data": {"query": "x"}, "options": {"detail": "full"}}}, "ValidationError", "options.detail: Extra"),
                ({"args": {"mode": "explode", "input_data": {}}}, "ValueError", "unsupported memory_query mode"),
            ]:
                r = await s.call_tool("memory_query", args)
                check(f"substrate: envelope {args} → {kind}", sub_error(r) == kind and says in text(r), text(r))

            # memory_ingest: a repository with local agent state, then unchanged, then changed.
            repo = home.dir / "ingest-repo"
            (repo / "docs").mkdir(parents=True)
            (repo / ".codex").mkdir()
            (repo / "node_modules" / "left-pad").mkdir(parents=True)
            (repo / "README.md").write_text("# Ledger service\n\nThe ledger stores balances in Kuzu.\n\n## Deploy\n\nRun `make release` then tag the commit.\n")
            (repo / "docs" / "retries.md").write_text("# Retries\n\nRefund retries back off with quince jitter.\n")
            (repo / "app.py").write_text("def settle(batch):\n    return sum(batch)\n")
            (repo / ".codex" / "session.json").write_text('{"secret_plan": "not documentation"}')
            (repo / "node_modules" / "left-pad" / "index.js").write_text("module.exports = 1\n")
            r = await call("memory_ingest", "repo", {"path": str(repo)})
            out = payload(r)
            check("substrate: repo with agent state → completed_with_pending_decisions", not is_error(r) and out["status"] == "completed_with_pending_decisions"
                  and out["requires_decision"] and out["excluded_by_preflight"] == [".codex"] and out["pending_decisions"][0]["kind"] == "local_agent_state"
                  and out["applied_operations"] > 0 and out["warnings"] and out["result_type"] == "repo_ingest_result", out)
            r = await call("memory_ingest", "repo", {"path": str(repo), "exclude_patterns": [".codex"]})
            out = payload(r)
            check("substrate: the same repo again → noop, nothing pending", out["status"] == "noop" and out["applied_operations"] == 0
                  and out["reason"] == "repo_fingerprint_unchanged" and not out["pending_decisions"], out)
            (repo / "docs" / "retries.md").write_text("# Retries\n\nRefund retries back off with damson jitter.\n")
            out = payload(await call("memory_ingest", "repo", {"path": str(repo), "exclude_patterns": [".codex", "*.py"]}))
            check("substrate: a changed file → completed, only it replaced", out["status"] == "completed" and out["counts"]["updated"] == 1
                  and out["applied_operations"] >= 1 and out["excluded_by_patterns"] == [".codex"], out)
            r = await call("memory_ingest", "repo", {"path": "relative/path"})
            check("substrate: a relative path is a ValidationError", sub_error(r) == "ValidationError" and "absolute" in text(r), text(r))
            r = await call("memory_ingest", "repo", {"path": str(repo / "README.md")})
            check("substrate: repo on a file is a ValueError saying which mode", sub_error(r) == "ValueError" and "mode file" in text(r), text(r))
            r = await call("memory_ingest", "markdown", {"path": str(repo / "README.md")}, {"force": True})
            check("substrate: markdown takes no options.force", sub_error(r) == "ValidationError", text(r))
            (repo.parent / "policy.pdf").write_bytes(pdf("Invoices follow the aubergine retention policy"))
            out = payload(await call("memory_ingest", "pdf", {"path": str(repo.parent / "policy.pdf")}))
            check("substrate: pdf → completed with one source", out["status"] == "completed" and out["source_id"].startswith("src:"), out)
            r = await call("memory_ingest", "pdf", {"path": str(repo / "app.py")})
            check("substrate: pdf mode on a non-PDF is a ValueError", sub_error(r) == "ValueError", text(r))
            url = web_page(b"<html><head><title>x</title></head><body><h1>Runbook</h1><p>Page the heliotrope rotation first.</p></body></html>")
            out = payload(await call("memory_ingest", "web", {"url": url}))
            check("substrate: web (a local page) → completed", out["status"] == "completed", out)
            conv = {"title": "Memory design discussion", "messages": [{"role": "user", "content": "Remember that project X uses Kuzu for the graph."},
                                                                       {"role": "assistant", "content": "Noted: the graph lives in Kuzu."}],
                    "origin": {"host": "codex"}}
            out = payload(await call("memory_ingest", "conversation", conv))
            check("substrate: conversation → completed", out["status"] == "completed" and out["counts"]["chunks"]["added"] >= 1, out)
            out = payload(await call("memory_ingest", "conversation", conv))
            check("substrate: the same conversation again → noop", out["status"] == "noop", out)
            r = await call("memory_ingest", "conversation", {"title": "t"})
            check("substrate: conversation without messages is a ValidationError", sub_error(r) == "ValidationError", text(r))

            # memory_query search finds document chunks, with their locators.
            out = payload(await call("memory_query", "search", {"query": "damson jitter"}))
            hit = next((i for i in out["items"] if i["object_type"] == "source"), None)
            check("substrate: search finds a chunk as doc:<n> with src and lines", hit and hit["object_id"].startswith("doc:")
                  and hit["locator"]["source_id"].startswith("src:") and hit["locator"]["path"].endswith("retries.md")
                  and "normalized_terms" in out and out["query_sanitizer"]["method"] == "passthrough", out)
            out = payload(await call("memory_query", "search", {"query": "quince"}))
            check("substrate: the replaced chunk is gone", not [i for i in out["items"] if i["object_type"] == "source"], out)
            doc_id = hit["object_id"] if hit else "doc:1"
            out = payload(await call("memory_query", "page", {"id": doc_id}))
            check("substrate: page of a chunk", "damson" in out["object"]["excerpt"], out)
            # Knowledge citing a chunk by source and segment; a changed chunk flags it.
            loc = hit["locator"] if hit else {"source_id": "src:1", "segment_id": "1"}
            cite = {"kind": "fact", "title": "Refund retries use damson jitter", "summary": "From the retries document.",
                    "reason": "The document says so.", "memory_source": "user_declared", "scope_refs": ["scope:project"],
                    "evidence_refs": [{"source_id": loc["source_id"], "segment_id": loc["segment_id"]}]}
            r = await call("memory_remember", "knowledge", {**cite, "title": "Refund jitter kind", "evidence_refs": [{**cite["evidence_refs"][0], "hash": "0000000000"}]})
            check("substrate: evidence with a chunk hash that does not match is a ValueError", sub_error(r) == "ValueError" and "does not match" in text(r), text(r))
            kd = payload(await call("memory_remember", "knowledge", cite))
            ev = payload(await call("memory_query", "page", {"id": kd.get("object_id", "know:1")}))["object"]["evidence_refs"]
            check("substrate: knowledge cites a chunk by source and segment", kd.get("status") == "active" and ev
                  and ev[0]["segment_id"] == loc["segment_id"] and ev[0]["source_id"] == loc["source_id"], (kd, ev))
            (repo / "docs" / "retries.md").write_text("# Retries\n\nRefund retries back off with medlar jitter.\n")
            await call("memory_ingest", "repo", {"path": str(repo), "exclude_patterns": [".codex", "*.py"]})
            out = payload(await call("memory_query", "page", {"id": kd.get("object_id", "know:1")}))
            check("substrate: a re-ingest that changes the cited chunk flags the item possibly stale", out["object"]["possibly_stale"] is True, out)

            # memory_remember: governance.
            obs = payload(await s.call_tool("memory_query", {"args": {"mode": "search", "input_data": {"query": "invoices"},
                                                                       "options": {"filters": {"object_type": "activity"}}}}))["items"]
            obs_id = obs[0]["object_id"] if obs else "obs:1"
            gov = {"reason": "It decides where future graph work goes.", "memory_source": "agent_inferred", "scope_refs": ["scope:project"]}
            r = await call("memory_remember", "knowledge", {"kind": "fact", "title": "Graph store is Kuzu", "summary": "The graph lives in Kuzu.",
                                                          "status": "active", "confidence": 0.9, "evidence_refs": [{"source_id": obs_id}], **gov})
            k1 = payload(r)
            check("substrate: agent_inferred active → candidate, id know:<n>", not is_error(r) and k1["status"] == "candidate" and k1["object_id"].startswith("know:")
                  and k1["possible_duplicates"] == [], k1)
            fact = {"kind": "fact", "title": "Ledger database", "summary": "Balances are in Postgres.", "reason": "Affects migrations.",
                    "memory_source": "user_declared", "scope_refs": ["scope:project"],
                    "payload": {"subject": "ledger", "predicate": "database", "value": "postgres"}}
            k2 = payload(await call("memory_remember", "knowledge", fact))
            check("substrate: user_declared structured fact → active", k2["status"] == "active", k2)
            r = await call("memory_remember", "knowledge", fact)
            check("substrate: an exact structured duplicate is refused (ValueError)", sub_error(r) == "ValueError" and "nothing was written" in text(r), text(r))
            k3 = payload(await call("memory_remember", "knowledge", {**fact, "title": "Ledger database (new)", "payload": {"subject": "ledger", "predicate": "database", "value": "sqlite"}}))
            check("substrate: same subject and predicate, other value → contested", k3["contested_with"] == [k2["object_id"]] and k3["status"] == "contested", k3)
            k4 = payload(await call("memory_remember", "knowledge", {"kind": "fact", "title": "Graph store is Kuzu database", "summary": "The graph lives in Kuzu.", **gov}))
            check("substrate: a similar unstructured item → possible_duplicates", [d["object_id"] for d in k4["possible_duplicates"]] == [k1["object_id"]], k4)
            for bad, kind in [({**fact, "reason": None}, "ValidationError"), ({**fact, "memory_source": "rumour"}, "ValueError"),
                              ({**fact, "scope_refs": []}, "ValidationError"), ({**fact, "subject_refs": ["node:x"], "colour": "red"}, "ValidationError"),
                              ({**fact, "evidence_refs": [{"source_id": "obs:99999999"}], "title": "Other"}, "ValueError")]:
                r = await call("memory_remember", "knowledge", bad)
                check(f"substrate: knowledge {sorted(set(bad) - set(fact)) or bad.get('memory_source')} → {kind}", sub_error(r) == kind, text(r))
            w = payload(await call("memory_remember", "work_item", {"kind": "task", "title": "Rotate the ledger keys", "summary": "Before the audit.",
                                                                  "reason": "Outlives this session.", "memory_source": "user_declared", "scope_refs": ["scope:project"]}))
            check("substrate: work_item → work:<n>, open", w["object_id"].startswith("work:") and w["status"] == "open", w)
            a = payload(await call("memory_remember", "activity", {"kind": "research", "title": "Repo walkthrough", "summary": "Captured the ledger layout.", **gov}))
            check("substrate: activity → obs:<n>", a["object_id"].startswith("obs:"), a)
            p1 = payload(await call("memory_remember", "promote", {"knowledge_id": k1["object_id"], "reason": "verified in the code"}))
            check("substrate: promote → active", p1["objects"][0]["status"] == "active", p1)
            sp = payload(await call("memory_remember", "supersede", {"old_knowledge_id": k4["object_id"], "new_knowledge_id": k1["object_id"], "reason": "same fact"}))
            old = next(o for o in sp["objects"] if o["object_id"] == k4["object_id"])
            check("substrate: supersede → old superseded, linked", old["status"] == "superseded" and old["superseded_by"] == k1["object_id"], sp)
            r = await call("memory_remember", "promote", {"knowledge_id": "know:999999", "reason": "x"})
            check("substrate: a missing id is a KeyError naming it", sub_error(r) == "KeyError" and "999999" in text(r), text(r))
            r = await call("memory_remember", "contest", {"knowledge_id": "node:7", "reason": "x"})
            check("substrate: contest of a non-knowledge id is a ValidationError", sub_error(r) == "ValidationError", text(r))
            before = len(payload(await call("memory_query", "recent", {}, {"max_items": 100, "filters": {"object_type": ["knowledge", "work_item"]}}))["items"])
            r = await call("memory_remember", "batch", {"entries": [{"mode": "knowledge", "input_data": {"kind": "fact", "title": "Batch one", "summary": "s", **gov}},
                                                                    {"mode": "knowledge", "input_data": {"kind": "fact", "title": "Batch two"}}]})
            after = len(payload(await call("memory_query", "recent", {}, {"max_items": 100, "filters": {"object_type": ["knowledge", "work_item"]}}))["items"])
            check("substrate: a batch with a bad entry writes nothing", sub_error(r) == "ValidationError" and "entries[1]" in text(r) and before == after, (text(r), before, after))
            out = payload(await call("memory_remember", "batch", {"entries": [{"mode": "knowledge", "input_data": {"kind": "fact", "title": "Batch one", "summary": "s", **gov}},
                                                                            {"mode": "work_item", "input_data": {"kind": "bug", "title": "Batch two", "summary": "s", **gov}}]}))
            check("substrate: a good batch writes each entry", out["count"] == 2 and out["failed"] == 0, out)

            # memory_query over knowledge.
            out = payload(await call("memory_query", "search", {"query": "Kuzu graph"}))
            check("substrate: search finds knowledge first", out["items"] and out["items"][0]["object_id"] == k1["object_id"], out["items"][:2])
            check("substrate: … ranked by the daemon's search", out["items"] and out["items"][0]["retrieval_sources"][0]["tier"] == "all_words"
                  and out["items"][0]["retrieval_ranks"]["nmem"] >= 1, out["items"][:1])
            out = payload(await call("memory_query", "search", {"query": "Kuzu graph"}, {"filters": {"status": "superseded"}}))
            check("substrate: a superseded item is found when its status is asked", [i["object_id"] for i in out["items"] if i["object_type"] == "knowledge"] == [k4["object_id"]], out["items"])
            out = payload(await call("memory_query", "search", {"query": "todo"}, {"filters": {"object_type": "work_item"}}))
            check("substrate: todo expands to work items", "object_type:work_item" in out["inferred_filters"]
                  and w["object_id"] in [i["object_id"] for i in out["items"]], out)
            long_q = ("You are a helpful agent. " * 40) + "\nQuestion: where does the graph live\n"
            out = payload(await call("memory_query", "search", {"query": long_q}))
            check("substrate: a long query is sanitized", out["query_sanitizer"]["was_sanitized"] and out["query_sanitizer"]["method"] == "labeled_line"
                  and out["query"] == "where does the graph live", out["query_sanitizer"])
            out = payload(await call("memory_query", "context", {"task": "change the graph store", "scope": {"object_types": ["knowledge", "work_item"]}}, {"max_items": 12}))
            tiers = out["context_tiers"]
            check("substrate: context → items and tiers", k1["object_id"] in [i["object_id"] for i in out["items"]] and w["object_id"] in tiers["open_work"]["ids"]
                  and {"policy", "active_task", "decisions", "procedures", "evidence", "open_work", "deep_search_hints"} <= set(tiers)
                  and out["context_budget"]["max_items"] == 12, out)
            out = payload(await call("memory_query", "recent", {}, {"filters": {"object_type": "knowledge", "status": "active"}}))
            check("substrate: recent filters by type and status", out["items"] and all(i["object_type"] == "knowledge" and i["status"] == "active" for i in out["items"]), out)
            out = payload(await call("memory_query", "page", {"id": k1["object_id"]}))
            check("substrate: page has the audit trail", any(e["action"] == "promoted" for e in out["object"]["audit"]), out)
            out = payload(await call("memory_query", "expand", {"id": k1["object_id"]}))
            check("substrate: expand brings the cited evidence", [i["object_id"] for i in out["related"]] == [obs_id], out)
            out = payload(await call("memory_query", "graph", {"id": k1["object_id"]}))
            types = {e["type"] for e in out["edges"]}
            check("substrate: graph links evidence and supersedes", {"evidence", "supersedes"} <= types, out["edges"])
            out = payload(await call("memory_query", "graph", {"id": obs_id}))
            check("substrate: graph of an observation links its session and the knowledge citing it", {"session", "evidence"} <= {e["type"] for e in out["edges"]}, out["edges"])
            r = await call("memory_query", "page", {"id": "know:999999"})
            check("substrate: page of a missing id is a KeyError naming it", sub_error(r) == "KeyError" and "know:999999" in text(r), text(r))
            r = await call("memory_query", "page", {"id": "node:abc"})
            check("substrate: a malformed id is a ValidationError", sub_error(r) == "ValidationError", text(r))

            # memory_maintain.
            k5 = payload(await call("memory_remember", "knowledge", {"kind": "procedure", "title": "Release with make release", "summary": "then tag",
                                                                   "confidence": 0.95, "evidence_refs": [{"source_id": obs_id}], **gov}))
            rep = payload(await call("memory_maintain", "report", {"min_confidence": 0.8}))
            check("substrate: report lists the promotable candidate, read-only", k5["object_id"] in rep["promotable_candidates"] and not rep["applied"]
                  and k3["object_id"] in rep["contested"], rep)
            r = await call("memory_maintain", "promote_candidates", {"min_confidence": 0.8})
            check("substrate: a mutating mode without apply is a ValueError", sub_error(r) == "ValueError" and "options.apply=true" in text(r), text(r))
            still = payload(await call("memory_query", "page", {"id": k5["object_id"]}))["object"]["status"]
            check("substrate: … and changed nothing", still == "candidate", still)
            out = payload(await call("memory_maintain", "promote_candidates", {"min_confidence": 0.8}, {"apply": True}))
            now = payload(await call("memory_query", "page", {"id": k5["object_id"]}))["object"]["status"]
            check("substrate: promote_candidates with apply promotes", out["promoted"] == [k5["object_id"]] and now == "active", (out, now))
            out = payload(await call("memory_maintain", "cycle", {"stale_after_days": 1, "reference_time": "2100-01-01T00:00:00Z"}, {"apply": True}))
            check("substrate: cycle decays old candidates", out["decayed"] and all(d.startswith("know:") for d in out["decayed"]), out)
            out = payload(await call("memory_maintain", "audit", {}, {"apply": True}))
            check("substrate: audit lists the trail", any(e["action"] == "superseded" for e in out["audit_events"]), out)
            out = payload(await call("memory_maintain", "reindex", {}, {"apply": True}))
            check("substrate: reindex rebuilds the indexes", out["applied"] and "ok" in out["derived_indexes"]["fts"], out)
            r = await call("memory_maintain", "configure", {"graph_backend": "kuzu"}, {"apply": True})
            check("substrate: configure is an unsupported mode, saying why", sub_error(r) == "ValueError" and "does not implement" in text(r), text(r))


async def without_daemon(home):
    async with stdio_client(home.server()) as (read, write):
        async with ClientSession(read, write) as s:
            await s.initialize()
            tools = (await s.list_tools()).tools
            check("tools listed with the daemon down", len(tools) == 6, tools)
            r = await s.call_tool("search", {"query": "invoices"})
            check("daemon down is a tool error that says what to do", is_error(r) and "nmemd is not running" in text(r) and "Start it" in text(r), text(r))


def main():
    home = Home()
    try:
        home.start()
        for f in ["session_start.startup.json", "user_prompt_submit.json", "post_tool_use.read.json",
                  "post_tool_use.edit.json", "post_tool_use.bash.ok.json", "post_tool_use.bash.error.json",
                  "post_tool_use.grep.json", "stop.json"]:
            home.record(f)
        other = {"session_id": "other", "cwd": "/home/dev/projects/load", "hook_event_name": "PostToolUse",
                 "tool_name": "Bash", "tool_input": {"command": "echo hi"}, "tool_response": {"stdout": "hi"}}
        subprocess.run([BIN / "nmem", "record"], input=json.dumps(other).encode(), env=home.env, check=True)
        asyncio.run(with_daemon(home))
        asyncio.run(with_roots(home))
        asyncio.run(knowledge_in_nmem_face(home))
        asyncio.run(codex_mem(home))
        asyncio.run(substrate(home))
        home.stop()
        asyncio.run(without_daemon(home))
        asyncio.run(codex_mem(home, daemon_up=False))
        asyncio.run(substrate(home, daemon_up=False))
    except Exception:
        traceback.print_exc()
        RESULTS["failed"] += 1
    finally:
        home.stop()
        shutil.rmtree(home.dir, ignore_errors=True)
    print(f"mcp: {RESULTS['passed']} passed, {RESULTS['failed']} failed")
    sys.exit(1 if RESULTS["failed"] else 0)


if __name__ == "__main__":
    main()

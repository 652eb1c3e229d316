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
            check("codex-mem: the v1 tools", tools == {"save_memory", "search", "timeline", "get_entries", "retention_dry_run"}, tools)
            if not daemon_up:
                r = await s.call_tool("search", {"query": "invoices"})
                check("codex-mem: daemon down is STORAGE_FAILURE", v1_error(r) == "STORAGE_FAILURE", text(r))
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
        asyncio.run(codex_mem(home))
        home.stop()
        asyncio.run(without_daemon(home))
        asyncio.run(codex_mem(home, daemon_up=False))
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

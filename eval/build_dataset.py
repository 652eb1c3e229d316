#!/usr/bin/env python3
"""Generate eval/nmem-eval.json: an offline retrieval eval dataset for agent memory systems.

Deterministic (stdlib only, no clock, no unseeded randomness): running it twice writes byte-identical
output. The histories themselves live in eval/histories/hNN_*.py, written in the small authoring DSL
defined here; this file expands that DSL into full hook payloads for Claude Code, Codex CLI, Gemini
CLI and Cursor (shapes copied from the hook fixtures), checks every question against its gold events,
adds the paraphrase set (eval/paraphrases.py, each entry checked with validate.paraphrase_leaks), and
writes the JSON.

    python3 eval/build_dataset.py            # writes eval/nmem-eval.json
    python3 eval/build_dataset.py --check    # exit 1 if the committed file is stale
"""

import sys

sys.dont_write_bytecode = True  # keep eval/histories free of __pycache__

import difflib
import hashlib
import importlib
import json
import os
import random
from datetime import datetime, timedelta, timezone

FORMAT = "nmem-eval/1"
HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "nmem-eval.json")

QUESTION_TYPES = ("fix_location", "failed_command", "decision", "file_history", "knowledge_update", "temporal")
HARNESSES = ("claude-code", "codex", "gemini", "cursor")

# ----------------------------------------------------------------------------------------------
# deterministic ids


def _digest(*parts):
    return hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).digest()


def uuid_like(*parts, version=4):
    h = _digest(*parts).hex()
    variant = "89ab"[int(h[16], 16) % 4]
    return f"{h[0:8]}-{h[8:12]}-{version}{h[13:16]}-{variant}{h[17:20]}-{h[20:32]}"


def uuid7_like(*parts, ms=0):
    """UUIDv7-shaped (Codex thread/turn ids): 48-bit millisecond time, then hash bits."""
    h = _digest(*parts).hex()
    t = f"{ms:012x}"[-12:]
    variant = "89ab"[int(h[0], 16) % 4]
    return f"{t[0:8]}-{t[8:12]}-7{h[1:4]}-{variant}{h[5:8]}-{h[8:20]}"


_B62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def b62(n_chars, *parts):
    v = int.from_bytes(_digest(*parts), "big")
    out = []
    for _ in range(n_chars):
        v, r = divmod(v, 62)
        out.append(_B62[r])
    return "".join(out)


def rfc3339(dt):
    return dt.strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(s):
    return datetime.strptime(s, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)


# ----------------------------------------------------------------------------------------------
# diffs


def _lines(text):
    return text.splitlines()


def hunks(old, new, context=3):
    """Claude Code's structuredPatch: [{oldStart, oldLines, newStart, newLines, lines}]."""
    a, b = _lines(old), _lines(new)
    out = []
    for group in difflib.SequenceMatcher(None, a, b, autojunk=False).get_grouped_opcodes(context):
        i1, i2, j1, j2 = group[0][1], group[-1][2], group[0][3], group[-1][4]
        lines = []
        for tag, a1, a2, b1, b2 in group:
            if tag == "equal":
                lines += [" " + l for l in a[a1:a2]]
            else:
                lines += ["-" + l for l in a[a1:a2]]
                lines += ["+" + l for l in b[b1:b2]]
        out.append({
            "oldStart": i1 + 1 if i2 > i1 else i1,
            "oldLines": i2 - i1,
            "newStart": j1 + 1 if j2 > j1 else j1,
            "newLines": j2 - j1,
            "lines": lines,
        })
    return out


def unified(old, new, context=3):
    """Hunk text (no file header): "@@ -a,b +c,d @@" blocks."""
    out = []
    for h in hunks(old, new, context):
        out.append(f"@@ -{h['oldStart']},{h['oldLines']} +{h['newStart']},{h['newLines']} @@")
        out += h["lines"]
    return "\n".join(out) + "\n"


def count_changes(old, new):
    adds = dels = 0
    for h in hunks(old, new, 0):
        adds += sum(1 for l in h["lines"] if l.startswith("+"))
        dels += sum(1 for l in h["lines"] if l.startswith("-"))
    return adds, dels


def codex_patch(path, old, new):
    """apply_patch text for an update (old is not None) or an added file."""
    if old is None:
        body = "".join("+" + l + "\n" for l in _lines(new))
        return f"*** Begin Patch\n*** Add File: {path}\n{body}*** End Patch\n"
    parts = [f"*** Begin Patch\n*** Update File: {path}\n"]
    for h in hunks(old, new, 2):
        parts.append("@@\n")
        parts.append("".join(l + "\n" for l in h["lines"]))
    parts.append("*** End Patch\n")
    return "".join(parts)


# ----------------------------------------------------------------------------------------------
# the dataset


class Dataset:
    def __init__(self):
        self.histories = []
        self.questions = []

    def history(self, hid, harness, cwd, summary, start, model=None, **opts):
        assert harness in HARNESSES, harness
        assert not any(h.hid == hid for h in self.histories), hid
        cls = {"claude-code": ClaudeSession, "codex": CodexSession, "gemini": GeminiSession,
               "cursor": CursorSession}[harness]
        h = History(self, hid, harness, cwd, summary, parse_time(start), cls, model, opts)
        self.histories.append(h)
        return h

    def to_json(self):
        return {
            "format": FORMAT,
            "description": (
                "Offline retrieval eval for memory layers of AI coding agents. Each history is the "
                "ordered hook traffic (the exact stdin JSON of each hook call, with its time) that a "
                "harness (Claude Code, Codex CLI, Gemini CLI, Cursor) sent while a developer worked on "
                "one project over several sessions. Each question names the events whose stored "
                "record answers it. See eval/README.md."
            ),
            "histories": [h.to_json() for h in self.histories],
            "questions": [q for q in self.questions],
        }


class History:
    def __init__(self, ds, hid, harness, cwd, summary, start, cls, model, opts):
        self.ds = ds
        self.hid = hid
        self.harness = harness
        self.cwd = cwd.rstrip("/")
        self.project = os.path.basename(self.cwd)
        self.summary = summary
        self.clock = start
        self.cls = cls
        self.model = model
        self.opts = opts
        self.rng = random.Random(hid)
        self.files = {}  # relative path -> current content (the project's working tree as the agent saw it)
        self.sessions = []
        self.events = {}  # event_id -> event dict
        self.companions = {}  # primary event id -> further event ids of the same action
        self.nq = 0

    # files the agent will edit without reading first (already known from an earlier, unrecorded look)
    def seed(self, path, content):
        self.files[path] = content

    def session(self, at, source="startup", **opts):
        t = parse_time(at)
        assert t > self.clock, f"{self.hid}: session at {at} is not after {rfc3339(self.clock)}"
        self.clock = t
        s = self.cls(self, len(self.sessions) + 1, opts)
        self.sessions.append(s)
        s.start(source)
        return s

    def q(self, qtype, question, search_query, answer, answer_keys, gold):
        assert qtype in QUESTION_TYPES, qtype
        if isinstance(gold, str):
            gold = [gold]
        if isinstance(answer_keys, str):
            answer_keys = [answer_keys]
        assert 1 <= len(answer_keys) <= 3, (self.hid, question)
        assert 1 <= len(search_query.split()) <= 4, (self.hid, search_query)
        full = []
        for g in gold:
            assert g in self.events, (self.hid, g)
            for x in [g] + self.companions.get(g, []):
                if x not in full:
                    full.append(x)
        texts = [json.dumps(self.events[g]["payload"], ensure_ascii=False).lower() for g in full]
        for k in answer_keys:
            assert any(k.lower() in t for t in texts), f"{self.hid}: answer key {k!r} not in gold {full}"
        self.nq += 1
        self.ds.questions.append({
            "question_id": None,  # numbered at the end
            "set": "main",
            "history_id": self.hid,
            "question_type": qtype,
            "question": question,
            "search_query": search_query,
            "answer": answer,
            "answer_keys": answer_keys,
            "gold_event_ids": full,
        })

    def to_json(self):
        return {
            "history_id": self.hid,
            "harness": self.harness,
            "cwd": self.cwd,
            "project": self.project,
            "summary": self.summary,
            "sessions": [s.to_json() for s in self.sessions],
        }


# ----------------------------------------------------------------------------------------------
# sessions: the harness-neutral authoring verbs


class Session:
    """One harness session. Verbs append hook events and return the id of the event that stores
    the action (the one a gold reference should name)."""

    def __init__(self, h, index, opts):
        self.h = h
        self.index = index
        self.opts = opts
        self.sid = self.make_session_id()
        self.events = []
        self.prompt_text = None
        self.turn = 0
        self.turn_id = None
        self.todos = []
        self.queued = []  # callbacks to run right after the next prompt (e.g. orientation commands)

    in_turn = False

    def need_turn(self):
        assert self.in_turn, (f"{self.h.hid}.s{self.index}: tool call outside a turn (after a turn end and before the "
                              f"next prompt), event {len(self.events) + 1}")

    def after_next_prompt(self, fn):
        self.queued.append(fn)

    def _prompted(self, eid):
        self.in_turn = True
        q, self.queued = self.queued, []
        for fn in q:
            fn(self)
        return eid

    # ---- plumbing

    @property
    def cwd(self):
        return self.h.cwd

    def abs(self, path):
        return path if path.startswith("/") else f"{self.cwd}/{path}"

    def rel(self, path):
        p = self.abs(path)
        return p[len(self.cwd) + 1:] if p.startswith(self.cwd + "/") else p

    def tick(self, lo=4, hi=40):
        self.h.clock += timedelta(seconds=self.h.rng.randint(lo, hi))
        return self.h.clock

    def wait(self, minutes=0, hours=0, days=0):
        self.h.clock += timedelta(minutes=minutes, hours=hours, days=days)

    def emit(self, payload, lo=4, hi=40, harness=None):
        t = self.tick(lo, hi)
        eid = f"{self.h.hid}.s{self.index}.e{len(self.events) + 1:03d}"
        if payload.get("timestamp", 0) is None:  # Gemini: the payload's own clock, with milliseconds
            payload["timestamp"] = t.strftime("%Y-%m-%dT%H:%M:%S") + f".{self.millis():03d}Z"
        ev = {"event_id": eid, "at": rfc3339(t)}
        if harness and harness != self.h.harness:
            ev["harness"] = harness
        ev["payload"] = payload
        self.events.append(ev)
        self.h.events[eid] = ev
        return eid

    def pair(self, primary, *others):
        self.h.companions.setdefault(primary, []).extend(o for o in others if o)
        return primary

    def millis(self):
        return self.h.rng.randint(3, 997)

    def _vfs_edit(self, path, old, new, replace_all=False):
        rel = self.rel(path)
        assert rel in self.h.files, f"{self.h.hid}: edit of unknown file {rel} (read or seed it first)"
        cur = self.h.files[rel]
        n = cur.count(old)
        assert n >= 1, f"{self.h.hid}: edit of {rel}: old text not found: {old!r}"
        assert replace_all or n == 1, f"{self.h.hid}: edit of {rel}: old text not unique: {old!r}"
        upd = cur.replace(old, new) if replace_all else cur.replace(old, new, 1)
        self.h.files[rel] = upd
        return rel, cur, upd

    def _vfs_read(self, path, content):
        rel = self.rel(path)
        if content is None:
            assert rel in self.h.files, f"{self.h.hid}: read of unknown file {rel} without content"
            content = self.h.files[rel]
        else:
            self.h.files[rel] = content
        return rel, content

    def start(self, source):
        raise NotImplementedError

    def to_json(self):
        return {"session_id": self.sid, "events": self.events}

    # ---- verbs every harness renders (some are approximations, see each class)

    def multiedit(self, path, pairs):
        raise NotImplementedError

    def todo(self, items):
        """items: [(content, status)], status in pending/in_progress/completed."""
        return None

    def task(self, description, prompt, result, agent_type="Explore"):
        return None

    def web_search(self, query, titles_urls, summary):
        return None

    def web_fetch(self, url, prompt, result):
        return None

    def compact(self, summary, trigger="auto", instructions=""):
        return None

    def noise(self, kind="notification"):
        return None


# test-output helpers shared by the histories ---------------------------------------------------


def git_commit_out(branch, sha, msg, files, ins, dels):
    return (f"[{branch} {sha}] {msg}\n {files} file{'s' if files != 1 else ''} changed, "
            f"{ins} insertion{'s' if ins != 1 else ''}(+), {dels} deletion{'s' if dels != 1 else ''}(-)\n")


# ----------------------------------------------------------------------------------------------
# Claude Code


class ClaudeSession(Session):
    def make_session_id(self):
        return uuid_like(self.h.hid, "session", self.index)

    @property
    def transcript(self):
        slug = self.cwd.replace("/", "-")
        return f"/home/dev/.claude/projects/{slug}/{self.sid}.jsonl"

    def base(self, event, with_prompt=True, with_mode=True, effort=False):
        p = {"session_id": self.sid}
        if with_prompt and self.prompt_id:
            p["prompt_id"] = self.prompt_id
        p["transcript_path"] = self.transcript
        p["cwd"] = self.cwd
        if with_mode:
            p["permission_mode"] = self.opts.get("mode", "acceptEdits")
        if effort:
            p["effort"] = {"level": self.opts.get("effort", "high")}
        p["hook_event_name"] = event
        return p

    prompt_id = None

    def start(self, source="startup"):
        p = self.base("SessionStart", with_prompt=False, with_mode=False)
        p["source"] = source
        if source != "clear":
            p["model"] = self.h.model or "claude-opus-4-7"
        if self.opts.get("title") and source == "resume":
            p["session_title"] = self.opts["title"]
        return self.emit(p, 1, 3)

    def resume(self, gap_hours=14):
        self.wait(hours=gap_hours)
        p = self.base("SessionStart", with_prompt=False, with_mode=False)
        p["source"] = "resume"
        p["model"] = self.h.model or "claude-opus-4-7"
        if self.opts.get("title"):
            p["session_title"] = self.opts["title"]
        return self.emit(p, 1, 3)

    def prompt(self, text):
        self.turn += 1
        self.prompt_id = uuid_like(self.h.hid, self.index, "prompt", self.turn)
        self.prompt_text = text
        p = self.base("UserPromptSubmit", effort=False)
        p["permission_mode"] = self.opts.get("mode", "acceptEdits")
        p["prompt"] = text
        return self._prompted(self.emit(p, 20, 240))

    def tool(self, name, tool_input, response, lo=3, hi=30, ms=None):
        self.need_turn()
        tid = "toolu_01" + b62(22, self.h.hid, self.index, len(self.events), name)
        if name == "Bash" and self.h.rng.random() < 0.22:
            self.noise_pre(name, tool_input, tid)
        p = self.base("PostToolUse", effort=True)
        p["tool_name"] = name
        p["tool_input"] = tool_input
        p["tool_response"] = response
        p["tool_use_id"] = tid
        p["duration_ms"] = ms if ms is not None else self.h.rng.randint(5, 90)
        return self.emit(p, lo, hi)

    def noise_pre(self, name, tool_input, tid):
        p = self.base("PreToolUse", effort=True)
        p["tool_name"] = name
        p["tool_input"] = tool_input
        p["tool_use_id"] = tid
        self.emit(p, 1, 4)

    def read(self, path, content=None, start=1):
        rel, content = self._vfs_read(path, content)
        n = len(_lines(content))
        return self.tool("Read", {"file_path": self.abs(rel)}, {
            "type": "text",
            "file": {"filePath": self.abs(rel), "content": content, "numLines": n, "startLine": start,
                     "totalLines": n + start - 1},
        }, 2, 15)

    def edit(self, path, old, new, replace_all=False):
        rel, cur, upd = self._vfs_edit(path, old, new, replace_all)
        adds, dels = count_changes(cur, upd)
        sp = hunks(cur, upd)
        resp = {
            "filePath": self.abs(rel), "oldString": old, "newString": new, "originalFile": cur,
            "structuredPatch": sp, "userModified": False, "replaceAll": replace_all,
            "gitDiff": {"filename": rel, "status": "modified", "additions": adds, "deletions": dels,
                        "changes": adds + dels, "patch": unified(cur, upd)},
        }
        return self.tool("Edit", {"file_path": self.abs(rel), "old_string": old, "new_string": new,
                                  "replace_all": replace_all}, resp, 5, 60)

    def multiedit(self, path, pairs):
        rel = self.rel(path)
        orig = self.h.files.get(rel)
        edits = []
        for pr in pairs:
            old, new = pr[0], pr[1]
            ra = len(pr) > 2 and pr[2]
            self._vfs_edit(rel, old, new, ra)
            e = {"old_string": old, "new_string": new}
            if ra:
                e["replace_all"] = True
            edits.append(e)
        upd = self.h.files[rel]
        resp_edits = [dict(e, replace_all=e.get("replace_all", False)) for e in edits]
        return self.tool("MultiEdit", {"file_path": self.abs(rel), "edits": edits}, {
            "filePath": self.abs(rel), "edits": resp_edits, "originalFileContents": orig,
            "structuredPatch": hunks(orig, upd), "userModified": False,
        }, 5, 60)

    def write(self, path, content):
        rel = self.rel(path)
        old = self.h.files.get(rel)
        self.h.files[rel] = content
        if old is None:
            resp = {"type": "create", "filePath": self.abs(rel), "content": content, "structuredPatch": [],
                    "originalFile": None}
        else:
            resp = {"type": "update", "filePath": self.abs(rel), "content": content,
                    "structuredPatch": hunks(old, content), "originalFile": old}
        return self.tool("Write", {"file_path": self.abs(rel), "content": content}, resp, 5, 60)

    def bash(self, cmd, out="", code=0, desc=None, stderr="", secs=None):
        ti = {"command": cmd}
        if desc:
            ti["description"] = desc
        ms = int((secs if secs is not None else self.h.rng.uniform(0.2, 4.0)) * 1000)
        if code == 0:
            return self.tool("Bash", ti, {"stdout": out, "stderr": stderr, "interrupted": False, "isImage": False,
                                          "noOutputExpected": out == "" and stderr == ""},
                             lo=max(2, ms // 1000), hi=max(6, ms // 1000 + 20), ms=ms)
        self.need_turn()
        tid = "toolu_01" + b62(22, self.h.hid, self.index, len(self.events), "Bash")
        p = self.base("PostToolUseFailure", effort=True)
        p["tool_name"] = "Bash"
        p["tool_input"] = ti
        p["tool_use_id"] = tid
        body = out + (("\n" if out and stderr else "") + stderr if stderr else "")
        p["error"] = f"Exit code {code}\n{body}"
        p["is_interrupt"] = False
        p["duration_ms"] = ms
        return self.emit(p, max(2, ms // 1000), max(6, ms // 1000 + 20))

    def grep(self, pattern, content, path=None, glob=None, mode="content"):
        ti = {"pattern": pattern, "path": self.abs(path) if path else self.cwd}
        if glob:
            ti["glob"] = glob
        ti["output_mode"] = mode
        if mode == "content":
            ti["-n"] = True
            resp = {"mode": "content", "numFiles": 0, "filenames": [], "content": content.rstrip("\n"),
                    "numLines": len(_lines(content))}
        else:
            files = [self.abs(f) for f in _lines(content)]
            resp = {"mode": "files_with_matches", "filenames": files, "numFiles": len(files)}
        return self.tool("Grep", ti, resp, 2, 12)

    def glob(self, pattern, files):
        return self.tool("Glob", {"pattern": pattern, "path": self.cwd}, {
            "durationMs": self.h.rng.randint(8, 90), "numFiles": len(files),
            "filenames": [self.abs(f) for f in files], "truncated": False}, 2, 10)

    def todo(self, items):
        new = [{"content": c, "status": s, "activeForm": _active(c)} for c, s in items]
        old = self.todos
        self.todos = new
        return self.tool("TodoWrite", {"todos": new}, {"oldTodos": old, "newTodos": new}, 2, 10)

    def task(self, description, prompt, result, agent_type="Explore"):
        self.need_turn()
        agent_id = b62(16, self.h.hid, self.index, len(self.events), "agent").lower()
        p = self.base("SubagentStart", with_prompt=False, with_mode=False)
        p["agent_id"] = agent_id
        p["agent_type"] = agent_type
        self.emit(p, 2, 6)
        p = self.base("SubagentStop", with_prompt=False)
        p["permission_mode"] = self.opts.get("mode", "acceptEdits")
        p["hook_event_name"] = "SubagentStop"
        p["stop_hook_active"] = False
        p["agent_id"] = agent_id
        p["agent_type"] = agent_type
        p["agent_transcript_path"] = self.transcript[:-6] + f"/subagents/agent-{agent_id}.jsonl"
        p["last_assistant_message"] = result
        p["background_tasks"] = []
        p["session_crons"] = []
        stop_id = self.emit(p, 30, 120)
        dur = self.h.rng.randint(9000, 60000)
        name = self.opts.get("agent_tool", "Agent")
        tid = self.tool(name, {"description": description, "prompt": prompt, "subagent_type": agent_type}, {
            "status": "completed", "agentId": agent_id, "agentType": agent_type,
            "content": [{"type": "text", "text": result}],
            "resolvedModel": "claude-haiku-4-5", "totalToolUseCount": self.h.rng.randint(3, 14),
            "totalDurationMs": dur, "totalTokens": self.h.rng.randint(8000, 40000),
            "prompt": prompt,
        }, 1, 3, ms=dur + 40)
        return self.pair(tid, stop_id)

    def web_search(self, query, titles_urls, summary):
        return self.tool("WebSearch", {"query": query}, {
            "query": query,
            "results": [{"tool_use_id": "srvtoolu_01" + b62(22, self.h.hid, query),
                         "content": [{"title": t, "url": u} for t, u in titles_urls]}, summary],
            "durationSeconds": round(self.h.rng.uniform(1.5, 5.0), 3),
        }, 5, 20)

    def web_fetch(self, url, prompt, result):
        return self.tool("WebFetch", {"url": url, "prompt": prompt}, {
            "bytes": self.h.rng.randint(9000, 90000), "code": 200, "codeText": "OK", "result": result,
            "durationMs": self.h.rng.randint(600, 4000), "url": url}, 5, 20)

    def mcp(self, server, tool, tool_input, text):
        return self.tool(f"mcp__{server}__{tool}", tool_input, [{"type": "text", "text": text}], 3, 12)

    def stop(self, message):
        self.need_turn()
        self.in_turn = False
        p = self.base("Stop", effort=True)
        p["stop_hook_active"] = False
        p["last_assistant_message"] = message
        p["background_tasks"] = []
        p["session_crons"] = []
        eid = self.emit(p, 5, 40)
        if self.h.rng.random() < 0.3:
            n = self.base("Notification", with_prompt=False, with_mode=False)
            n["message"] = "Claude is waiting for your input"
            n["notification_type"] = "idle_prompt"
            self.emit(n, 60, 90)
        return eid

    def compact(self, summary, trigger="auto", instructions=""):
        p = self.base("PreCompact", with_prompt=False, with_mode=False)
        p["trigger"] = trigger
        p["custom_instructions"] = instructions
        self.emit(p, 5, 30)
        p = self.base("PostCompact", with_prompt=False, with_mode=False)
        p["trigger"] = trigger
        p["compact_summary"] = summary
        eid = self.emit(p, 40, 120)
        p = self.base("SessionStart", with_prompt=False, with_mode=False)
        p["source"] = "compact"
        p["model"] = self.h.model or "claude-opus-4-7"
        self.emit(p, 1, 3)
        return eid

    def permission(self, cmd, rule):
        p = self.base("PermissionRequest", with_prompt=False)
        p["tool_name"] = "Bash"
        p["tool_input"] = {"command": cmd}
        p["permission_suggestions"] = [{"type": "addRules", "rules": [{"toolName": "Bash", "ruleContent": rule}],
                                        "behavior": "allow", "destination": "localSettings"}]
        return self.emit(p, 1, 5)

    def end(self, reason="other"):
        p = self.base("SessionEnd", with_prompt=False, with_mode=False)
        p["reason"] = reason
        return self.emit(p, 20, 300)


def _active(content):
    first, _, rest = content.partition(" ")
    verb = first[:-1] if first.endswith("e") and not first.endswith("ee") else first
    return f"{verb}ing {rest}".strip() if first.isalpha() else content


# ----------------------------------------------------------------------------------------------
# Codex CLI (hooks, Claude-compatible; turn ends via Stop, or via the legacy `notify` program)


class CodexSession(Session):
    def make_session_id(self):
        return uuid7_like(self.h.hid, "thread", self.index, ms=int(self.h.clock.timestamp() * 1000))

    @property
    def transcript(self):
        t = self.started
        return (f"/home/dev/.codex/sessions/{t:%Y/%m/%d}/rollout-{t:%Y-%m-%dT%H-%M-%S}-{self.sid}.jsonl")

    def base(self, event, turn=True, mode=True):
        p = {"session_id": self.sid, "transcript_path": self.transcript, "cwd": self.cwd, "hook_event_name": event,
             "model": self.h.model or "gpt-5.5-codex"}
        if turn:
            p["turn_id"] = self.turn_id
        if mode:
            p["permission_mode"] = self.opts.get("mode", "default")
        return p

    def start(self, source="startup"):
        self.started = self.h.clock
        p = self.base("SessionStart", turn=False)
        p["source"] = source
        return self.emit(p, 1, 3)

    def prompt(self, text):
        self.turn += 1
        self.turn_id = uuid7_like(self.h.hid, self.index, "turn", self.turn,
                                  ms=int(self.h.clock.timestamp() * 1000) + 60000)
        self.prompt_text = text
        p = self.base("UserPromptSubmit")
        p["prompt"] = text
        return self._prompted(self.emit(p, 20, 240))

    def tool(self, name, tool_input, response, lo=3, hi=30):
        self.need_turn()
        p = self.base("PostToolUse")
        p["tool_name"] = name
        p["tool_use_id"] = "call_" + b62(24, self.h.hid, self.index, len(self.events), name)
        p["tool_input"] = tool_input
        p["tool_response"] = response
        return self.emit(p, lo, hi)

    def bash(self, cmd, out="", code=0, desc=None, stderr="", secs=None):
        body = out + (("\n" if out and stderr else "") + stderr if stderr else "")
        secs = secs if secs is not None else self.h.rng.uniform(0.2, 4.0)
        if code != 0:
            body = f"Exit code: {code}\nWall time: {secs:.1f} seconds\nOutput:\n{body}"
        s = int(secs)
        return self.tool("Bash", {"command": cmd}, body, max(2, s), max(6, s + 20))

    def read(self, path, content=None, start=1):
        rel, content = self._vfs_read(path, content)
        n = len(_lines(content))
        return self.bash(f"sed -n '{start},{start + max(n, 40) - 1}p' {rel}", content)

    def edit(self, path, old, new, replace_all=False):
        rel, cur, upd = self._vfs_edit(path, old, new, replace_all)
        return self.tool("apply_patch", {"command": codex_patch(rel, cur, upd)},
                         f"Success. Updated the following files:\nM {rel}\n", 5, 60)

    def multiedit(self, path, pairs):
        rel = self.rel(path)
        cur = self.h.files[rel]
        for pr in pairs:
            self._vfs_edit(rel, pr[0], pr[1], len(pr) > 2 and pr[2])
        return self.tool("apply_patch", {"command": codex_patch(rel, cur, self.h.files[rel])},
                         f"Success. Updated the following files:\nM {rel}\n", 5, 60)

    def write(self, path, content):
        rel = self.rel(path)
        old = self.h.files.get(rel)
        self.h.files[rel] = content
        if old is None:
            return self.tool("apply_patch", {"command": codex_patch(rel, None, content)},
                             f"Success. Updated the following files:\nA {rel}\n", 5, 60)
        return self.tool("apply_patch", {"command": codex_patch(rel, old, content)},
                         f"Success. Updated the following files:\nM {rel}\n", 5, 60)

    def grep(self, pattern, content, path=None, glob=None, mode="content"):
        cmd = f"rg -n '{pattern}'" if mode == "content" else f"rg -l '{pattern}'"
        if glob:
            cmd += f" -g '{glob}'"
        cmd += f" {self.rel(path) if path else '.'}"
        return self.bash(cmd, content)

    def glob(self, pattern, files):
        return self.bash(f"rg --files -g '{pattern}'", "".join(f + "\n" for f in files))

    def mcp(self, server, tool, tool_input, text):
        return self.tool(f"mcp__{server}__{tool}", tool_input, [{"type": "text", "text": text}], 3, 12)

    def stop(self, message):
        self.need_turn()
        self.in_turn = False
        if self.opts.get("notify"):
            p = {"type": "agent-turn-complete", "thread-id": self.sid, "turn-id": self.turn_id, "cwd": self.cwd,
                 "input-messages": [self.prompt_text], "last-assistant-message": message}
            return self.emit(p, 5, 40, harness="codex-notify")
        p = self.base("Stop")
        p["stop_hook_active"] = False
        p["last_assistant_message"] = message
        return self.emit(p, 5, 40)

    def compact(self, summary=None, trigger="auto", instructions=""):
        p = self.base("PreCompact", mode=False)
        p["trigger"] = trigger
        return self.emit(p, 5, 30)

    def end(self, reason=None):
        return None  # Codex has no SessionEnd


# ----------------------------------------------------------------------------------------------
# Gemini CLI


class GeminiSession(Session):
    def make_session_id(self):
        return uuid_like(self.h.hid, "gemini-session", self.index)

    @property
    def transcript(self):
        proj = hashlib.sha256(self.cwd.encode()).hexdigest()
        t = self.started
        return f"/home/dev/.gemini/tmp/{proj}/chats/session-{t:%Y-%m-%dT%H-%M}-{self.sid[:8]}.json"

    def emit_g(self, event, fields, lo=4, hi=40):
        p = {"session_id": self.sid, "transcript_path": self.transcript, "cwd": self.cwd, "hook_event_name": event,
             "timestamp": None}
        p.update(fields)
        return self.emit(p, lo, hi)

    def start(self, source="startup"):
        self.started = self.h.clock
        return self.emit_g("SessionStart", {"source": source}, 1, 3)

    def prompt(self, text):
        self.turn += 1
        self.prompt_text = text
        return self._prompted(self.emit_g("BeforeAgent", {"prompt": text}, 20, 240))

    def tool(self, name, tool_input, llm, display, lo=3, hi=30):
        self.need_turn()
        if name == "run_shell_command" and self.h.rng.random() < 0.2:
            self.emit_g("BeforeTool", {"tool_name": name, "tool_input": tool_input}, 1, 3)
        return self.emit_g("AfterTool", {"tool_name": name, "tool_input": tool_input,
                                         "tool_response": {"llmContent": llm, "returnDisplay": display}}, lo, hi)

    def bash(self, cmd, out="", code=0, desc=None, stderr="", secs=None):
        ti = {"command": cmd, "description": desc or ""}
        if not desc:
            del ti["description"]
        body = out + (("\n" if out and stderr else "") + stderr if stderr else "")
        llm = (f"Command: {cmd}\nDirectory: (root)\nOutput: {body if body else '(empty)'}\nError: (none)\n"
               f"Exit Code: {code}\nSignal: (none)\nBackground PIDs: (none)\n"
               f"Process Group PGID: {self.h.rng.randint(20000, 90000)}")
        s = int(secs if secs is not None else self.h.rng.uniform(0.2, 4.0))
        return self.tool("run_shell_command", ti, llm, body, max(2, s), max(6, s + 20))

    def read(self, path, content=None, start=1):
        rel, content = self._vfs_read(path, content)
        return self.tool("read_file", {"file_path": self.abs(rel)}, content, "", 2, 15)

    def _diff(self, rel, cur, upd, label="Proposed"):
        name = os.path.basename(rel)
        return (f"Index: {name}\n===================================================================\n"
                f"--- {name}\t{'Current' if label == 'Proposed' else 'Original'}\n+++ {name}\t{label}\n"
                + unified(cur, upd))

    def edit(self, path, old, new, replace_all=False):
        rel, cur, upd = self._vfs_edit(path, old, new, replace_all)
        n = cur.count(old) if replace_all else 1
        return self.tool("replace", {"file_path": self.abs(rel), "old_string": old, "new_string": new,
                                     "expected_replacements": n},
                         f"Successfully modified file: {self.abs(rel)} ({n} replacements).",
                         {"fileDiff": self._diff(rel, cur, upd), "fileName": os.path.basename(rel)}, 5, 60)

    def multiedit(self, path, pairs):
        last = None
        for pr in pairs:
            last = self.edit(path, pr[0], pr[1], len(pr) > 2 and pr[2])
        return last

    def write(self, path, content):
        rel = self.rel(path)
        old = self.h.files.get(rel)
        self.h.files[rel] = content
        msg = (f"Successfully created and wrote to new file: {self.abs(rel)}." if old is None
               else f"Successfully overwrote file: {self.abs(rel)}.")
        return self.tool("write_file", {"file_path": self.abs(rel), "content": content}, msg,
                         {"fileDiff": self._diff(rel, old or "", content, "Written"),
                          "fileName": os.path.basename(rel)}, 5, 60)

    def grep(self, pattern, content, path=None, glob=None, mode="content"):
        ti = {"pattern": pattern}
        if path:
            ti["path"] = self.rel(path)
        if glob:
            ti["include"] = glob
        by_file = {}
        for line in _lines(content):
            f, _, rest = line.partition(":")
            num, _, text = rest.partition(":")
            by_file.setdefault(f, []).append(f"L{num}: {text}")
        n = sum(len(v) for v in by_file.values())
        llm = f'Found {n} match{"es" if n != 1 else ""} for pattern "{pattern}" in path "{ti.get("path", ".")}":\n---\n'
        for f, ls in by_file.items():
            llm += f"File: {f}\n" + "\n".join(ls) + "\n---\n"
        return self.tool("search_file_content", ti, llm, f"Found {n} matches", 2, 12)

    def glob(self, pattern, files):
        llm = (f'Found {len(files)} file(s) matching "{pattern}" within {self.cwd}, sorted by modification time '
               f"(newest first):\n" + "\n".join(self.abs(f) for f in files))
        return self.tool("glob", {"pattern": pattern}, llm, f"Found {len(files)} matching file(s)", 2, 10)

    def web_search(self, query, titles_urls, summary):
        llm = f'Web search results for "{query}":\n\n{summary}\n\nSources:\n' + "\n".join(
            f"[{i + 1}] {t} ({u})" for i, (t, u) in enumerate(titles_urls))
        return self.tool("google_web_search", {"query": query}, llm, f'Search results for "{query}" returned.', 5, 20)

    def web_fetch(self, url, prompt, result):
        return self.tool("web_fetch", {"prompt": f"{prompt} {url}"}, result, "Content processed from prompt.", 5, 20)

    def todo(self, items):
        todos = [{"description": c, "status": s} for c, s in items]
        return self.tool("write_todos", {"todos": todos}, "Successfully updated the todo list.", "", 2, 8)

    def mcp(self, server, tool, tool_input, text):
        return self.tool(f"mcp__{server}__{tool}", tool_input, [{"text": text}], text[:200], 3, 12)

    def stop(self, message):
        self.need_turn()
        self.in_turn = False
        return self.emit_g("AfterAgent", {"prompt": self.prompt_text, "prompt_response": message,
                                          "stop_hook_active": False}, 5, 40)

    def compact(self, summary=None, trigger="auto", instructions=""):
        return self.emit_g("PreCompress", {"trigger": trigger}, 5, 30)

    def noise(self, kind="notification", cmd="npm test"):
        return self.emit_g("Notification", {
            "notification_type": "ToolPermission", "message": f"Allow execution of: '{cmd}'?",
            "details": {"type": "exec", "title": "Confirm Shell Command", "command": cmd,
                        "rootCommand": cmd.split()[0]}}, 1, 5)

    def end(self, reason="exit"):
        return self.emit_g("SessionEnd", {"reason": reason}, 20, 300)


# ----------------------------------------------------------------------------------------------
# Cursor (camelCase events, conversation_id, workspace_roots; postToolUse fires for every tool in
# addition to the dedicated after* hooks)


class CursorSession(Session):
    def make_session_id(self):
        return uuid_like(self.h.hid, "conversation", self.index)

    @property
    def transcript(self):
        slug = self.cwd.strip("/").replace("/", "-")
        return f"/home/dev/.cursor/projects/{slug}/agent-transcripts/{self.sid}.txt"

    def base(self, event):
        return {"conversation_id": self.sid, "generation_id": self.gen, "model": self.h.model or "claude-4.5-sonnet",
                "hook_event_name": event, "cursor_version": self.opts.get("version", "2.3.35"),
                "workspace_roots": [self.cwd], "user_email": "dev@example.com", "transcript_path": self.transcript}

    gen = None

    def start(self, source="startup"):
        self.gen = uuid_like(self.h.hid, self.index, "gen", 0)
        self.started = self.h.clock
        p = self.base("sessionStart")
        p.update({"session_id": self.sid, "is_background_agent": False, "composer_mode": "agent"})
        return self.emit(p, 1, 3)

    def prompt(self, text, attachments=()):
        self.turn += 1
        self.gen = uuid_like(self.h.hid, self.index, "gen", self.turn)
        self.prompt_text = text
        p = self.base("beforeSubmitPrompt")
        p["prompt"] = text
        p["attachments"] = [{"type": "file", "file_path": self.abs(a)} for a in attachments]
        return self._prompted(self.emit(p, 20, 240))

    def post_tool(self, name, tool_input, output, lo=1, hi=3):
        self.need_turn()
        p = self.base("postToolUse")
        p["tool_name"] = name
        p["tool_input"] = tool_input
        p["tool_output"] = output
        return self.emit(p, lo, hi)

    def bash(self, cmd, out="", code=0, desc=None, stderr="", secs=None):
        self.need_turn()
        secs = secs if secs is not None else self.h.rng.uniform(0.2, 4.0)
        if self.h.rng.random() < 0.3:
            p = self.base("beforeShellExecution")
            p.update({"command": cmd, "cwd": self.cwd})
            self.emit(p, 1, 4)
        body = out + (("\n" if out and stderr else "") + stderr if stderr else "")
        p = self.base("afterShellExecution")
        p.update({"command": cmd, "cwd": self.cwd, "output": body, "duration": int(secs * 1000)})
        s = int(secs)
        a = self.emit(p, max(2, s), max(6, s + 20))
        b = self.post_tool("Shell", {"command": cmd, "cwd": self.cwd},
                           json.dumps({"exitCode": code, "stdout": out, "stderr": stderr}, ensure_ascii=False))
        return self.pair(a, b)

    def read(self, path, content=None, start=1):
        rel, content = self._vfs_read(path, content)
        if self.h.rng.random() < 0.25:
            p = self.base("beforeReadFile")
            p.update({"file_path": self.abs(rel), "content": content, "attachments": []})
            self.emit(p, 1, 4)
        return self.post_tool("Read", {"file_path": self.abs(rel)}, content, 2, 15)

    def edit(self, path, old, new, replace_all=False):
        self.need_turn()
        rel, cur, upd = self._vfs_edit(path, old, new, replace_all)
        p = self.base("afterFileEdit")
        p.update({"file_path": self.abs(rel), "edits": [{"old_string": old, "new_string": new}]})
        a = self.emit(p, 5, 60)
        adds, dels = count_changes(cur, upd)
        b = self.post_tool("StrReplace", {"file_path": self.abs(rel), "old_string": old, "new_string": new},
                           json.dumps({"success": True, "linesAdded": adds, "linesRemoved": dels}))
        return self.pair(a, b)

    def multiedit(self, path, pairs):
        rel = self.rel(path)
        cur = self.h.files[rel]
        for pr in pairs:
            self._vfs_edit(rel, pr[0], pr[1], len(pr) > 2 and pr[2])
        p = self.base("afterFileEdit")
        p.update({"file_path": self.abs(rel), "edits": [{"old_string": pr[0], "new_string": pr[1]} for pr in pairs]})
        a = self.emit(p, 5, 60)
        adds, dels = count_changes(cur, self.h.files[rel])
        b = self.post_tool("MultiStrReplace", {"file_path": self.abs(rel),
                                               "edits": [{"old_string": pr[0], "new_string": pr[1]} for pr in pairs]},
                           json.dumps({"success": True, "linesAdded": adds, "linesRemoved": dels}))
        return self.pair(a, b)

    def write(self, path, content):
        rel = self.rel(path)
        old = self.h.files.get(rel)
        self.h.files[rel] = content
        p = self.base("afterFileEdit")
        p.update({"file_path": self.abs(rel), "edits": [{"old_string": old or "", "new_string": content}]})
        a = self.emit(p, 5, 60)
        b = self.post_tool("Write", {"file_path": self.abs(rel), "contents": content},
                           json.dumps({"success": True, "created": old is None}))
        return self.pair(a, b)

    def grep(self, pattern, content, path=None, glob=None, mode="content"):
        ti = {"pattern": pattern, "path": self.rel(path) if path else "."}
        if glob:
            ti["glob"] = glob
        return self.post_tool("Grep", ti, content, 2, 12)

    def glob(self, pattern, files):
        return self.post_tool("Glob", {"glob_pattern": pattern}, "\n".join(files), 2, 10)

    def mcp(self, server, tool, tool_input, text):
        self.need_turn()
        p = self.base("afterMCPExecution")
        p.update({"tool_name": tool, "tool_input": json.dumps(tool_input, separators=(",", ":")),
                  "result_json": json.dumps({"content": [{"type": "text", "text": text}]}, separators=(",", ":")),
                  "duration": self.h.rng.randint(200, 1500)})
        return self.emit(p, 3, 12)

    def web_search(self, query, titles_urls, summary):
        return self.post_tool("WebSearch", {"search_term": query},
                              summary + "\n" + "\n".join(f"{t} - {u}" for t, u in titles_urls), 5, 20)

    def stop(self, message, status="completed"):
        self.need_turn()
        self.in_turn = False
        p = self.base("afterAgentResponse")
        p["text"] = message
        a = self.emit(p, 5, 40)
        p = self.base("stop")
        p.update({"status": status, "loop_count": 0})
        self.emit(p, 1, 2)
        return a

    def end(self, reason="completed"):
        p = self.base("sessionEnd")
        dur = int((self.h.clock - self.started).total_seconds() * 1000) + 30000
        p.update({"session_id": self.sid, "reason": reason, "duration_ms": dur, "is_background_agent": False,
                  "final_status": "completed"})
        return self.emit(p, 20, 120)


# ----------------------------------------------------------------------------------------------
# output


def dump(data):
    """JSON with one event per line: readable diffs, deterministic bytes."""
    def enc(v):
        return json.dumps(v, ensure_ascii=False, separators=(", ", ": "))

    out = ["{", f' "format": {enc(data["format"])},', f' "description": {enc(data["description"])},',
           ' "histories": [']
    for hi, h in enumerate(data["histories"]):
        out.append("  {")
        for k in ("history_id", "harness", "cwd", "project", "summary"):
            out.append(f'   "{k}": {enc(h[k])},')
        out.append('   "sessions": [')
        for si, s in enumerate(h["sessions"]):
            out.append(f'    {{"session_id": {enc(s["session_id"])}, "events": [')
            for ei, e in enumerate(s["events"]):
                out.append("     " + enc(e) + ("," if ei + 1 < len(s["events"]) else ""))
            out.append("    ]}" + ("," if si + 1 < len(h["sessions"]) else ""))
        out.append("   ]")
        out.append("  }" + ("," if hi + 1 < len(data["histories"]) else ""))
    out.append(" ],")
    out.append(' "questions": [')
    for qi, q in enumerate(data["questions"]):
        out.append("  " + enc(q) + ("," if qi + 1 < len(data["questions"]) else ""))
    out.append(" ]")
    out.append("}")
    return "\n".join(out) + "\n"


def build():
    ds = Dataset()
    hdir = os.path.join(HERE, "histories")
    sys.path.insert(0, HERE)
    mods = sorted(f[:-3] for f in os.listdir(hdir) if f.startswith("h") and f.endswith(".py"))
    for m in mods:
        importlib.import_module(f"histories.{m}").build(ds)
    # number the questions in history order, then in authoring order
    order = {h.hid: i for i, h in enumerate(ds.histories)}
    qs = sorted(enumerate(ds.questions), key=lambda iq: (order[iq[1]["history_id"]], iq[0]))
    ds.questions = []
    for n, (_, q) in enumerate(qs, 1):
        q["question_id"] = f"q{n:03d}"
        ds.questions.append(q)
    ds.questions += paraphrase_questions(ds, order)
    return ds


PARAPHRASE_KINDS = ("symptom", "intent", "concept", "everyday")


def paraphrase_questions(ds, order):
    """The paraphrase set (eval/paraphrases.py): each entry restates a main question in words its gold record
    does not contain, numbered after the main questions (in history order, then in file order). Exits with
    every violation listed when an entry fails validate.paraphrase_leaks."""
    import paraphrases
    import validate

    main = {q["question_id"]: q for q in ds.questions}
    events = {eid: ev for h in ds.histories for eid, ev in h.events.items()}
    rows = sorted(enumerate(paraphrases.PARAPHRASES), key=lambda ir: (order[main[ir[1][0]]["history_id"]], ir[0]))
    out, bad, seen = [], [], set()
    for n, (_, (of, kind, question, search_query)) in enumerate(rows, len(ds.questions) + 1):
        m = main[of]
        assert of not in seen, f"paraphrase of {of} twice"
        seen.add(of)
        assert kind in PARAPHRASE_KINDS, (of, kind)
        assert 1 <= len(search_query.split()) <= 4, (of, search_query)
        leaks = validate.paraphrase_leaks(question, search_query, [events[g]["payload"] for g in m["gold_event_ids"]])
        if leaks:
            bad.append(f"  paraphrase of {of}: {question!r} / {search_query!r} shares {', '.join(leaks)}")
        out.append({
            "question_id": f"q{n:03d}",
            "set": "paraphrase",
            "paraphrase_of": of,
            "paraphrase_kind": kind,
            "history_id": m["history_id"],
            "question_type": m["question_type"],
            "question": question,
            "search_query": search_query,
            "answer": m["answer"],
            "answer_keys": list(m["answer_keys"]),
            "gold_event_ids": list(m["gold_event_ids"]),
        })
    if bad:
        print(f"{len(bad)} paraphrase question(s) use words of their gold record:\n" + "\n".join(bad), file=sys.stderr)
        sys.exit(1)
    return out


def main():
    ds = build()
    text = dump(ds.to_json())
    json.loads(text)  # well-formed
    if "--check" in sys.argv:
        with open(OUT, encoding="utf-8") as f:
            if f.read() != text:
                print("eval/nmem-eval.json is stale: run python3 eval/build_dataset.py", file=sys.stderr)
                sys.exit(1)
        return
    with open(OUT, "w", encoding="utf-8", newline="\n") as f:
        f.write(text)
    nev = sum(len(s.events) for h in ds.histories for s in h.sessions)
    npara = sum(1 for q in ds.questions if q["set"] == "paraphrase")
    print(f"wrote {os.path.relpath(OUT)}: {len(ds.histories)} histories, "
          f"{sum(len(h.sessions) for h in ds.histories)} sessions, {nev} events, {len(ds.questions)} questions "
          f"({len(ds.questions) - npara} main, {npara} paraphrase, all {npara} passed the paraphrase check)")


if __name__ == "__main__":
    main()

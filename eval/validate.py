#!/usr/bin/env python3
"""Check eval/nmem-eval.json (or the file given) against the nmem-eval/1 format, including the paraphrase
set's rule (paraphrase_leaks: no normalised word of a paraphrase question or its search_query in its gold record).

    python3 eval/validate.py [path]

Exit 0 when every check passes (warnings are printed but do not fail), 1 otherwise. Stdlib only.
"""

import json
import os
import re
import sys
from collections import Counter
from datetime import datetime

FORMAT = "nmem-eval/1"
QUESTION_TYPES = ("fix_location", "failed_command", "decision", "file_history", "knowledge_update", "temporal")
HARNESSES = ("claude-code", "codex", "gemini", "cursor")
MIN_PER_TYPE, MIN_HISTORIES, MIN_QUESTIONS, MIN_Q_PER_HISTORY = 12, 20, 100, 3

# hook events whose payload nmem stores (a prompt row or an observation), per effective harness
STORED = {
    "claude-code": {"SessionStart", "UserPromptSubmit", "PostToolUse", "PostToolUseFailure", "PreCompact",
                    "PostCompact", "Stop", "SubagentStop", "StopFailure", "SessionEnd"},
    "codex": {"SessionStart", "UserPromptSubmit", "PostToolUse", "PostToolUseFailure", "PreCompact", "PostCompact",
              "Stop", "SubagentStop", "StopFailure", "SessionEnd"},
    "codex-notify": {"agent-turn-complete"},
    "gemini": {"SessionStart", "BeforeAgent", "AfterTool", "PreCompress", "AfterAgent", "SessionEnd"},
    "cursor": {"sessionStart", "beforeSubmitPrompt", "afterShellExecution", "afterFileEdit", "afterMCPExecution",
               "postToolUse", "afterAgentResponse", "stop", "sessionEnd"},
}
# hook events that may appear as noise but are never stored
IGNORED = {
    "claude-code": {"PreToolUse", "PermissionRequest", "Notification", "SubagentStart", "PostToolBatch"},
    "codex": {"PreToolUse", "PermissionRequest", "SubagentStart"},
    "codex-notify": set(),
    "gemini": {"BeforeTool", "Notification", "BeforeModel", "AfterModel", "BeforeToolSelection"},
    "cursor": {"beforeShellExecution", "beforeReadFile", "beforeMCPExecution"},
}
SESSION_FIELD = {"claude-code": "session_id", "codex": "session_id", "codex-notify": "thread-id",
                 "gemini": "session_id", "cursor": "conversation_id"}
EVENT_FIELD = {"claude-code": "hook_event_name", "codex": "hook_event_name", "codex-notify": "type",
               "gemini": "hook_event_name", "cursor": "hook_event_name"}
EVENT_ID = re.compile(r"^(h\d\d)\.s(\d+)\.e(\d{3})$")
SAFE_SESSION = re.compile(r"^[A-Za-z0-9_.\-]{1,128}$")
TOOL_EVENTS = {"PostToolUse", "PostToolUseFailure", "AfterTool"}

# things that must never be in the dataset (credential formats nmem redacts)
SECRET_PATTERNS = [
    ("private key", r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY"),
    ("anthropic/openai key", r"\bsk-(?:ant-|proj-)?[A-Za-z0-9_\-]{20,}"),
    ("stripe key", r"\b(?:sk|rk|pk|whsec)_(?:live|test)_[A-Za-z0-9]{10,}"),
    ("github token", r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{20,}|\bgithub_pat_[A-Za-z0-9_]{20,}"),
    ("gitlab token", r"\bglpat-[A-Za-z0-9_\-]{20,}"),
    ("slack", r"\bxox[abposre]-[A-Za-z0-9\-]{10,}|hooks\.slack\.com/services/"),
    ("aws key", r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b"),
    ("google key", r"\bAIza[0-9A-Za-z_\-]{35}"),
    ("jwt", r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"),
    ("password in url", r"\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^:/\s@\"]+:[^@\s/\"]+@"),
]
# nmem's `secret_assignment` redaction rule (approximated): a key named like a secret, then a value
ASSIGNMENT = re.compile(
    r"(?i)\b[A-Za-z0-9_.\-]*(?:password|passwd|passphrase|pwd|secret|token|api_?key|apikey|access_?key|private_?key|"
    r"credentials?|auth_?key|signing_?key)[A-Za-z0-9_\-]*[\"']?\s*[:=]\s*"
    r"(?:\"([^\"\n]{4,})\"|'([^'\n]{4,})'|([^\s\"',;&|]{4,}))")
CODE_PREFIXES = ("process.env", "os.environ", "env.", "config.", "settings.", "self.", "this.", "req.", "args.")


# ---- the paraphrase rule (questions with "set": "paraphrase"; see README, "Paraphrase set")
#
# No normalised content word of the question or of its search_query may occur among the normalised
# words of the gold record. Normalisation: split on every character that is not an ASCII letter or digit, split
# identifiers at camelCase and letter/digit boundaries ("parseInvoiceTotal" -> parse invoice total,
# "HTTPServer" -> http server, "utf8" -> utf 8), lowercase, drop STOPWORDS, then stem().

PARAPHRASE_MIN_PER_TYPE = 10
PARAPHRASE_KINDS = ("symptom", "intent", "concept", "everyday")

# function words and question words; nothing else is dropped (every other word counts, whatever its length)
STOPWORDS = frozenset("""
a an the this that these those some any all each every no none both either neither such other another
i me my mine we us our ours you your yours he him his she her hers it its they them their theirs
is am are was were be been being do does did doing done have has had having
will would shall should can could may might must
of to in on at by for with from into onto about as over under after before between through during without
within against up down out off via per
and or but nor if then than so because while though although since until unless
not also just only very too again ever still yet now there here
what which who whom whose why how when where whether
s t d ll re ve m didn doesn isn wasn weren don aren haven hasn hadn couldn wouldn shouldn won
""".split())

# key names whose values are not the work but the call: ids, the harness's paths, the hook event and
# tool names, and harness metadata (model, modes, versions, user, clocks, status flags)
PARAPHRASE_SKIP_KEYS = frozenset({
    "session_id", "conversation_id", "thread-id", "turn-id", "turn_id", "tool_use_id", "prompt_id", "generation_id",
    "agent_id", "cwd", "workspace_roots", "transcript_path", "agent_transcript_path", "hook_event_name", "tool_name",
    "type", "model", "permission_mode", "effort", "cursor_version", "user_email", "timestamp", "composer_mode",
    "final_status", "status", "reason", "source", "notification_type", "agent_type", "trigger",
})

_SPLIT = re.compile(r"[^A-Za-z0-9]+")
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
# tried in this order; see stem()
_SUFFIXES = (("ations", "ate"), ("ation", "ate"), ("ings", ""), ("ions", ""), ("ing", ""), ("ion", ""), ("ers", ""),
             ("ies", "y"), ("ied", "y"), ("er", ""), ("es", ""), ("ed", ""), ("ly", ""), ("s", ""), ("e", ""),
             ("d", ""))


def stem(w):
    """A light suffix stripper (not Porter), applied until nothing changes: the first of _SUFFIXES the word
    ends with is replaced if at least 3 characters remain (a final "s" after "s" stays: class, process; a
    final "d" goes only after "e": used -> use), and a doubled final consonant other than l or s left by
    stripping is undoubled (stopped -> stop). crashed/crashes/crashing -> crash, retries/retried -> retry,
    migration/migrated/migrate -> migrat, workers/worker -> work, caches/cached -> cach."""
    while True:
        for suf, rep in _SUFFIXES:
            if (w.endswith(suf) and len(w) - len(suf) >= 3 and not (suf == "s" and w.endswith("ss"))
                    and not (suf == "d" and not w.endswith("ed"))):
                base = w[: len(w) - len(suf)] + rep
                if rep == "" and len(base) >= 4 and base[-1] == base[-2] and base[-1] not in "aeiouls":
                    base = base[:-1]
                break
        else:
            return w
        if base == w:
            return w
        w = base


def words(text):
    """The normalised content words of a text (stems, stopwords dropped)."""
    out = set()
    for chunk in _SPLIT.split(text):
        for tok in _CAMEL.findall(chunk):
            t = tok.lower()
            if t and t not in STOPWORDS:
                out.add(stem(t))
    return out


def record_strings(v, top=True):
    """Every string value of a payload, except the values of PARAPHRASE_SKIP_KEYS at its top level (and of "cwd"
    at any depth: Cursor repeats it in tool_input). A JSON string that holds JSON (Cursor's tool_output,
    result_json) is read as its text, which includes its values."""
    if isinstance(v, str):
        yield v
    elif isinstance(v, dict):
        for k, x in v.items():
            if k == "cwd" or (top and k in PARAPHRASE_SKIP_KEYS):
                continue
            yield from record_strings(x, False)
    elif isinstance(v, list):
        for x in v:
            yield from record_strings(x, False)


def record_words(payloads):
    out = set()
    for p in payloads:
        for s in record_strings(p):
            out |= words(s)
    return out


PREFIX_MIN = 4


def paraphrase_leaks(question, search_query, payloads):
    """The normalised words of the question or its search_query that the gold payloads share (empty = passes):
    a word leaks if its stem equals a gold stem, or if one stem is a prefix of the other and the shorter has at
    least PREFIX_MIN characters (config ~ configurat, auth ~ authentic: what a prefix query would find)."""
    gold = record_words(payloads)
    long_gold = sorted(g for g in gold if len(g) >= PREFIX_MIN)
    leaks = []
    for w in sorted(words(question) | words(search_query)):
        if w in gold:
            leaks.append(w)
        elif len(w) >= PREFIX_MIN:
            hit = next((g for g in long_gold if g.startswith(w) or w.startswith(g)), None)
            if hit:
                leaks.append(f"{w}~{hit}")
    return leaks


def looks_like_a_value(v):
    """nmem keeps unquoted values that are code referring to a value."""
    low = v.lower()
    if v.startswith(("$", "<", "[REDACTED")) or "(" in v or low.startswith(CODE_PREFIXES):
        return False
    if "." in v and all(seg and all(c.isalpha() or c == "_" for c in seg) for seg in v.split(".")):
        return False
    return low not in ("true", "false", "null", "none", "required", "string", "undefined")


class Report:
    def __init__(self):
        self.errors, self.warnings = [], []

    def err(self, msg):
        self.errors.append(msg)

    def warn(self, msg):
        self.warnings.append(msg)


def parse_at(s):
    if not isinstance(s, str) or not re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z", s):
        return None
    try:
        return datetime.strptime(s[:19], "%Y-%m-%dT%H:%M:%S")
    except ValueError:
        return None


def strings(v):
    if isinstance(v, str):
        yield v
    elif isinstance(v, dict):
        for x in v.values():
            yield from strings(x)
    elif isinstance(v, list):
        for x in v:
            yield from strings(x)


def check_payload(r, eid, harness, p, cwd, sid):
    if not isinstance(p, dict):
        r.err(f"{eid}: payload is not an object")
        return None
    sf, ef = SESSION_FIELD[harness], EVENT_FIELD[harness]
    if harness == "cursor":
        roots = p.get("workspace_roots")
        if not (isinstance(roots, list) and roots and roots[0] == cwd):
            r.err(f"{eid}: cursor payload workspace_roots[0] is not the history cwd")
        if "cwd" in p and p.get("hook_event_name") not in ("beforeShellExecution", "afterShellExecution"):
            r.warn(f"{eid}: cursor payload has a cwd field")
    elif p.get("cwd") != cwd:
        r.err(f"{eid}: payload cwd {p.get('cwd')!r} is not the history cwd {cwd!r}")
    v = p.get(sf)
    if not isinstance(v, str) or not v:
        r.err(f"{eid}: missing {sf}")
    elif not SAFE_SESSION.match(v):
        r.err(f"{eid}: unsafe {sf} {v!r}")
    elif v != sid:
        r.err(f"{eid}: {sf} {v!r} is not the session's id {sid!r}")
    name = p.get(ef)
    if not isinstance(name, str) or not name:
        r.err(f"{eid}: missing {ef}")
        return None
    if name not in STORED[harness] and name not in IGNORED[harness]:
        r.err(f"{eid}: unknown {harness} event {name!r}")
    if harness == "gemini" and parse_at(p.get("timestamp")) is None:
        r.err(f"{eid}: gemini payload without an ISO timestamp")
    if harness == "claude-code" and name in TOOL_EVENTS | {"PreToolUse"}:
        if not isinstance(p.get("tool_use_id"), str):
            r.err(f"{eid}: Claude Code tool event without tool_use_id")
    if harness == "claude-code" and name == "UserPromptSubmit" and not p.get("prompt_id"):
        r.err(f"{eid}: UserPromptSubmit without prompt_id")
    if name in ("PostToolUse", "AfterTool") and "tool_response" not in p:
        r.err(f"{eid}: {name} without tool_response")
    if name == "PostToolUseFailure" and not str(p.get("error", "")).startswith("Exit code "):
        r.warn(f"{eid}: PostToolUseFailure error does not start with 'Exit code N'")
    return name


def validate(data):
    r = Report()
    if data.get("format") != FORMAT:
        r.err(f"format is {data.get('format')!r}, expected {FORMAT!r}")
    if not isinstance(data.get("description"), str) or not data["description"]:
        r.err("description missing")
    hs = data.get("histories") or []
    qs = data.get("questions") or []

    events = {}  # event_id -> (history_id, effective harness, hook event name, payload)
    hist_ids, projects, session_ids = set(), set(), set()
    harness_count = Counter()
    for h in hs:
        hid = h.get("history_id")
        if not isinstance(hid, str) or not re.fullmatch(r"h\d\d", hid):
            r.err(f"bad history_id {hid!r}")
            continue
        if hid in hist_ids:
            r.err(f"duplicate history_id {hid}")
        hist_ids.add(hid)
        harness = h.get("harness")
        if harness not in HARNESSES:
            r.err(f"{hid}: harness {harness!r} not one of {HARNESSES}")
            continue
        harness_count[harness] += 1
        cwd = h.get("cwd")
        if not isinstance(cwd, str) or not cwd.startswith("/") or cwd.endswith("/"):
            r.err(f"{hid}: bad cwd {cwd!r}")
            continue
        if h.get("project") != os.path.basename(cwd):
            r.err(f"{hid}: project {h.get('project')!r} is not basename(cwd)")
        if h.get("project") in projects:
            r.err(f"{hid}: project {h.get('project')!r} is not unique")
        projects.add(h.get("project"))
        if not isinstance(h.get("summary"), str) or not h["summary"]:
            r.err(f"{hid}: summary missing")
        sessions = h.get("sessions") or []
        if not 3 <= len(sessions) <= 8:
            r.warn(f"{hid}: {len(sessions)} sessions (guideline 3-8)")
        last = None
        first_at = last_at = None
        for si, s in enumerate(sessions, 1):
            sid = s.get("session_id")
            if not isinstance(sid, str) or not SAFE_SESSION.match(sid):
                r.err(f"{hid}: bad session_id {sid!r}")
                continue
            if sid in session_ids:
                r.err(f"{hid}: duplicate session_id {sid}")
            session_ids.add(sid)
            evs = s.get("events") or []
            if not 20 <= len(evs) <= 80:
                r.warn(f"{hid}.s{si}: {len(evs)} events (guideline 20-80)")
            names = []
            for ei, e in enumerate(evs, 1):
                eid = e.get("event_id")
                m = EVENT_ID.match(eid or "")
                if not m:
                    r.err(f"{hid}: bad event_id {eid!r}")
                    continue
                if m.group(1) != hid or int(m.group(2)) != si or int(m.group(3)) != ei:
                    r.err(f"{eid}: id does not match its position ({hid}.s{si}.e{ei:03d})")
                if eid in events:
                    r.err(f"duplicate event_id {eid}")
                at = parse_at(e.get("at"))
                if at is None or not e["at"].endswith("Z"):
                    r.err(f"{eid}: bad at {e.get('at')!r}")
                    continue
                if last is not None and at <= last:
                    r.err(f"{eid}: at {e['at']} is not after the previous event")
                last = at
                first_at = first_at or at
                last_at = at
                eh = e.get("harness", harness)
                if eh != harness and not (harness == "codex" and eh == "codex-notify"):
                    r.err(f"{eid}: event harness {eh!r} not allowed in a {harness} history")
                    continue
                extra = set(e) - {"event_id", "at", "payload", "harness"}
                if extra:
                    r.err(f"{eid}: unexpected keys {sorted(extra)}")
                name = check_payload(r, eid, eh, e.get("payload"), cwd, sid)
                names.append(name)
                events[eid] = (hid, eh, name, e.get("payload"))
            if names:
                start_names = {"SessionStart", "sessionStart"}
                if harness != "codex" or True:
                    if names[0] not in start_names:
                        r.warn(f"{hid}.s{si}: does not begin with a session start")
                end_names = {"SessionEnd", "sessionEnd", "Stop", "stop", "AfterAgent", "agent-turn-complete"}
                if names[-1] not in end_names and not (names[-1] in IGNORED.get(harness, ()) and names[-2] in end_names):
                    r.warn(f"{hid}.s{si}: does not end with a turn end or session end ({names[-1]})")
        if first_at and last_at:
            span = (last_at - first_at).days
            if span < 5 or span > 50:
                r.warn(f"{hid}: spans {span} days (guideline 1-6 weeks)")

    if len(hs) < MIN_HISTORIES:
        r.err(f"{len(hs)} histories, need at least {MIN_HISTORIES}")

    qids = set()
    per_type, per_history = Counter(), Counter()
    para_type, para_harness, para_kind, para_history, para_passed = Counter(), Counter(), Counter(), set(), 0
    main_qs = {q.get("question_id"): q for q in qs if q.get("set", "main") == "main"}
    harness_of = {h.get("history_id"): h.get("harness") for h in hs}
    for q in qs:
        qid = q.get("question_id")
        if not isinstance(qid, str) or not re.fullmatch(r"q\d{3,}", qid) or qid in qids:
            r.err(f"bad or duplicate question_id {qid!r}")
        qids.add(qid)
        qset = q.get("set", "main")
        allowed = {"question_id", "set", "history_id", "question_type", "question", "search_query", "answer",
                   "answer_keys", "gold_event_ids"}
        if qset == "paraphrase":
            allowed |= {"paraphrase_of", "paraphrase_kind"}
        elif qset != "main":
            r.err(f"{qid}: set {qset!r} is not main or paraphrase")
        extra = set(q) - allowed
        if extra:
            r.err(f"{qid}: unexpected keys {sorted(extra)}")
        hid = q.get("history_id")
        if hid not in hist_ids:
            r.err(f"{qid}: unknown history {hid!r}")
        qt = q.get("question_type")
        if qt not in QUESTION_TYPES:
            r.err(f"{qid}: question_type {qt!r} not one of {QUESTION_TYPES}")
        if qset == "paraphrase":
            para_type[qt] += 1
            para_harness[harness_of.get(hid)] += 1
            para_kind[q.get("paraphrase_kind")] += 1
            para_history.add(hid)
            of = q.get("paraphrase_of")
            if of is not None:
                m = main_qs.get(of)
                if m is None:
                    r.err(f"{qid}: paraphrase_of {of!r} is not a main question")
                elif any(m.get(f) != q.get(f) for f in ("history_id", "question_type", "gold_event_ids")):
                    r.err(f"{qid}: history, type or gold differ from {of}, which it paraphrases")
            if q.get("paraphrase_kind") not in PARAPHRASE_KINDS:
                r.err(f"{qid}: paraphrase_kind {q.get('paraphrase_kind')!r} not one of {PARAPHRASE_KINDS}")
        else:
            per_type[qt] += 1
            per_history[hid] += 1
        for f in ("question", "search_query", "answer"):
            if not isinstance(q.get(f), str) or not q[f].strip():
                r.err(f"{qid}: {f} missing")
        n = len(str(q.get("search_query", "")).split())
        if not 1 <= n <= 4:
            r.err(f"{qid}: search_query has {n} words (1-4)")
        gold = q.get("gold_event_ids")
        if not isinstance(gold, list) or not gold:
            r.err(f"{qid}: gold_event_ids missing")
            continue
        if len(set(gold)) != len(gold):
            r.err(f"{qid}: duplicate gold ids")
        texts = []
        for g in gold:
            if g not in events:
                r.err(f"{qid}: gold {g!r} is not an event")
                continue
            ghid, gh, name, payload = events[g]
            if ghid != hid:
                r.err(f"{qid}: gold {g} belongs to {ghid}, not {hid}")
            if name not in STORED[gh]:
                r.err(f"{qid}: gold {g} is a {name} event, which nmem does not store")
            texts.append(json.dumps(payload, ensure_ascii=False).lower())
        if len(gold) > 3 and not (len(gold) <= 6 and events.get(gold[0], (0, ""))[1] == "cursor"):
            r.warn(f"{qid}: {len(gold)} gold events")
        keys = q.get("answer_keys")
        if not isinstance(keys, list) or not 1 <= len(keys) <= 3:
            r.err(f"{qid}: answer_keys must be 1-3 strings")
            continue
        for k in keys:
            if not isinstance(k, str) or not k.strip():
                r.err(f"{qid}: empty answer key")
            elif not any(k.lower() in t for t in texts):
                r.err(f"{qid}: answer key {k!r} is not in any gold event's payload")
            else:
                # would nmem's secret_assignment rule hide it? (then a digest could never show it)
                hidden = False
                for g in gold:
                    for s in strings(events[g][3]):
                        for m in ASSIGNMENT.finditer(s):
                            if m.group(3) and not looks_like_a_value(m.group(3)):
                                continue
                            val = m.group(1) or m.group(2) or m.group(3) or ""
                            if k.lower() in val.lower():
                                hidden = True
                if hidden:
                    r.warn(f"{qid}: answer key {k!r} sits in a secret-like assignment and may be redacted by nmem")
        if qset == "paraphrase":
            leaks = paraphrase_leaks(str(q.get("question", "")), str(q.get("search_query", "")),
                                     [events[g][3] for g in gold if g in events])
            if leaks:
                r.err(f"{qid}: paraphrase question or search_query uses words of its gold record: {', '.join(leaks)}")
            else:
                para_passed += 1
        if qt == "knowledge_update" and len(gold) > 1:
            kinds = {events[g][2] for g in gold if g in events}
            if len(kinds) == 1:
                r.warn(f"{qid}: knowledge_update with {len(gold)} gold events of one kind")

    if len(main_qs) < MIN_QUESTIONS:
        r.err(f"{len(main_qs)} main questions, need at least {MIN_QUESTIONS}")
    for t in QUESTION_TYPES:
        if per_type[t] < MIN_PER_TYPE:
            r.err(f"{per_type[t]} main {t} questions, need at least {MIN_PER_TYPE}")
        if para_type[t] < PARAPHRASE_MIN_PER_TYPE:
            r.err(f"{para_type[t]} paraphrase {t} questions, need at least {PARAPHRASE_MIN_PER_TYPE}")
    for hn in HARNESSES:
        if not para_harness[hn]:
            r.err(f"no paraphrase question on a {hn} history")
    for hid in sorted(hist_ids):
        if per_history[hid] < MIN_Q_PER_HISTORY:
            r.err(f"{hid}: {per_history[hid]} questions, need at least {MIN_Q_PER_HISTORY}")

    # no credentials anywhere
    raw = json.dumps(data, ensure_ascii=False)
    for label, pat in SECRET_PATTERNS:
        m = re.search(pat, raw)
        if m:
            r.err(f"secret-like text ({label}) in the dataset: {m.group(0)[:40]!r}")

    stats = {
        "histories": len(hs), "histories_per_harness": dict(sorted(harness_count.items())),
        "sessions": sum(len(h.get("sessions") or []) for h in hs), "events": len(events),
        "questions": len(qs), "main_questions": len(main_qs),
        "main_questions_per_type": {t: per_type[t] for t in QUESTION_TYPES},
        "paraphrase_questions": sum(para_type.values()),
        "paraphrase_per_type": {t: para_type[t] for t in QUESTION_TYPES},
        "paraphrase_per_harness": {hn: para_harness[hn] for hn in HARNESSES},
        "paraphrase_per_kind": {k: para_kind[k] for k in PARAPHRASE_KINDS},
        "paraphrase_histories": len(para_history),
        "paraphrase_passed": para_passed,
    }
    return r, stats


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                              "nmem-eval.json")
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    r, stats = validate(data)
    for w in r.warnings:
        print(f"warning: {w}")
    for e in r.errors:
        print(f"error: {e}")
    print(json.dumps(stats, indent=1))
    print(f"paraphrase check: {stats['paraphrase_passed']} of {stats['paraphrase_questions']} paraphrase questions "
          f"share no normalised word with their gold record")
    if r.errors:
        print(f"FAILED: {len(r.errors)} error(s), {len(r.warnings)} warning(s)")
        sys.exit(1)
    print(f"OK ({len(r.warnings)} warning(s))")


if __name__ == "__main__":
    main()

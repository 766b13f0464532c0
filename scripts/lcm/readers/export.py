"""A session out of the vault: its original transcript lines (jsonl) or markdown a person reads.

Both come as a stream of text pieces, so a long session is never held in memory twice.
Masking is the caller's (lcm_export.py), applied to every piece; markdown also masks each
message before folding it to one line (a cut must not split a secret). Stdlib only.
"""
from __future__ import annotations

import json
from collections.abc import Iterator

import lcm.base.config
import lcm.base.mask
import lcm.readers.sessions
import lcm.vault.store
from lcm.summary.extract import typed_text
from lcm.base.text import content_blocks, one_line

LABEL_CHARS = 120   # a tool call or result folded to one line


def jsonl(conn, session_id: str) -> Iterator[bytes]:
    """Each stored message's original line, byte for byte, with its newline; in vault order."""
    for (raw,) in conn.execute(f"SELECT {lcm.vault.store.LINE} FROM messages WHERE session_id = ? ORDER BY id",
                               (session_id,)):
        yield lcm.vault.store.as_bytes(raw) + b"\n"


def _call_text(block: dict, limit: int = LABEL_CHARS) -> str:
    """`Bash: pytest -q`: a tool call by the input field that says most."""
    data = block.get("input") if isinstance(block.get("input"), dict) else {}
    for key in ("command", "file_path", "notebook_path", "pattern", "url", "query", "description", "prompt", "path"):
        if isinstance(data.get(key), str) and data[key].strip():
            return f"{block.get('name') or 'tool'}: `{one_line(data[key], limit).replace('`', chr(39))}`"
    return f"{block.get('name') or 'tool'}: {one_line(json.dumps(data, ensure_ascii=False), limit)}"


def _call_label(block: dict) -> str:
    return "- " + _call_text(block)


class Calls:
    """Tool calls shown and still waiting for their result. Parallel calls (one assistant turn
    calling several tools) are all listed before any result comes back: each result then names
    its own call, or it would read as the last call's."""

    def __init__(self):
        self.waiting: dict[str, str] = {}  # tool_use_id -> short label
        self.parallel: set[str] = set()    # ids called while another call still waited

    def called(self, block: dict) -> None:
        if isinstance(block.get("id"), str):
            self.waiting[block["id"]] = _call_text(block, 40)
            if len(self.waiting) > 1:
                self.parallel.update(self.waiting)

    def answered(self, block: dict) -> str | None:
        """The call to name in this result's line; None for a lone call's result."""
        ident = block.get("tool_use_id")
        if not isinstance(ident, str) or ident not in self.waiting:
            return None
        label = self.waiting.pop(ident)
        if ident in self.parallel:
            self.parallel.discard(ident)
            return label
        return None


def _result_label(block: dict, of: str | None = None) -> str:
    content = block.get("content")
    if isinstance(content, list):
        content = "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
    text = str(content or "")
    lines = [ln for ln in text.splitlines() if ln.strip()]
    size = f" ({len(lines)} lines)" if len(lines) > 1 else ""
    failed = " (error)" if block.get("is_error") is True else ""
    named = f" of {of}" if of else ""
    return f"  - result{named}{failed}{size}: {one_line(lines[0], LABEL_CHARS) if lines else '(empty)'}"


def _message(entry: dict, row, calls: Calls) -> tuple[str | None, list[str]]:
    """(speaker, markdown lines) of one stored message; speaker None for what is not shown."""
    message = entry.get("message") if isinstance(entry.get("message"), dict) else {}
    blocks = content_blocks(entry)
    if row["type"] == "system":
        if row["subtype"] == "compact_boundary":
            return None, ["", "_(Claude Code compacted the conversation here)_"]
        return None, []
    sub = " (sub-agent)" if row["is_sidechain"] else ""
    speaker = ("User" if row["role"] == "user" else "Assistant") + sub
    out: list[str] = []
    for block in blocks:
        kind = block.get("type")
        if kind == "text":
            text = str(block.get("text") or "")
            if row["role"] == "user":
                text = "" if row["is_meta"] or entry.get("isCompactSummary") else typed_text(text)
            if text.strip():
                out += ["", text.strip()]
        elif kind in ("tool_use", "server_tool_use"):
            calls.called(block)
            out.append(_call_label(block))
        elif kind in ("tool_result", "web_search_tool_result"):
            speaker = "Assistant" + sub  # a result belongs to the assistant's turn, not to what the user said
            out.append(_result_label(block, calls.answered(block)))
        elif kind == "image":
            out += ["", "_(image)_"]
    return (speaker if out else None), out


def _summary_heading(s) -> list[str]:
    span = f"{(s['earliest_at'] or '?')[:16].replace('T', ' ')} .. {(s['latest_at'] or '?')[:16].replace('T', ' ')}"
    what = "condensed summary" if s["kind"] == "condensed" else "summary"
    body = [f"> {line}" if line.strip() else ">" for line in s["content"].strip().splitlines()]
    return ["", f"## {s['id']}: {what}, depth {s['depth']}, {s['descendant_count']} messages, {span}", "", *body]


def markdown(conn, session_id: str, masked: bool = True) -> Iterator[str]:
    """The session as markdown: a header, then the conversation in order; each summary is a
    heading (with its text quoted) placed before the first message it covers; tool calls and
    their results are folded to one line each."""
    row = conn.execute("SELECT * FROM sessions WHERE session_id = ?", (session_id,)).fetchone()
    count = conn.execute("SELECT count(*) FROM messages WHERE session_id = ?", (session_id,)).fetchone()[0]
    summaries: dict[int, list] = {}
    for s in conn.execute("SELECT id, kind, depth, content, descendant_count, earliest_at, latest_at, first_message_id"
                          " FROM summaries WHERE session_id = ? ORDER BY depth DESC", (session_id,)):
        summaries.setdefault(s["first_message_id"], []).append(s)
    title = lcm.readers.sessions.title(conn, session_id, row["title"], count)
    yield "\n".join([
        f"# {title}", "",
        f"- Session: `{session_id}`",
        f"- Project: {row['project'] or 'unknown'}",
        f"- Time: {row['first_at'] or '?'} .. {row['last_at'] or '?'}",
        f"- Messages: {count}; summaries: {sum(len(v) for v in summaries.values())}",
        f"- Exported {lcm.base.config.now_iso()} by lcm_export.py", ""]) + "\n"
    speaker = None
    calls = Calls()
    warmups: set = set()  # sub-agents Claude Code only primed ("Warmup"): no part of the work
    for m in conn.execute(f"SELECT id, {lcm.vault.store.LINE} AS raw, type, role, subtype, is_meta, is_sidechain, agent_id, created_at"
                          " FROM messages WHERE session_id = ? ORDER BY seq", (session_id,)):  # conversation order
        lines = []
        for s in summaries.get(m["id"], ()):
            lines += _summary_heading(s)
            speaker = None
        try:
            entry = json.loads(m["raw"])
        except (ValueError, RecursionError):
            entry = None
        if masked and entry is not None and lcm.base.mask.may_contain(m["raw"]):
            entry = lcm.base.mask.mask_json(entry)
        message = entry.get("message") if isinstance(entry, dict) else None
        if m["is_sidechain"] and isinstance(message, dict) and message.get("content") == lcm.readers.sessions.WARMUP:
            warmups.add(m["agent_id"])
        if m["is_sidechain"] and m["agent_id"] in warmups:
            entry = None
        who, body = _message(entry, m, calls) if isinstance(entry, dict) else (None, [])
        if who is None:
            speaker = None if body else speaker
        elif who != speaker:
            when = (m["created_at"] or "")[:16].replace("T", " ")
            lines += ["", f"**{who}**" + (f" ({when})" if when else "")]
            speaker = who
        lines += body
        if lines:
            yield "\n".join(lines) + "\n"

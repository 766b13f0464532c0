"""Vault and session status: counts, context use against the model's window, index health.

The command is scripts/lcm_status.py; hooks and other commands import this module.
"""
from __future__ import annotations

import json
import os
import sqlite3

import lcm.base.config
import lcm.readers.sessions
import lcm.summary.dag
import lcm.vault.schema
import lcm.vault.store

DEFAULT_WINDOW = 200_000
LARGE_WINDOW = 1_000_000
# model ids served with a 1M-token window when asked for (Claude Code appends "[1m]")
ONE_MILLION_MARKERS = ("[1m]", "-1m", "context-1m")
USAGE_KEYS = ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens", "output_tokens")
RECENT_ASSISTANT_LINES = 50  # how far back to look past synthetic/zero-usage responses
FULL_CHECK_MAX_ROWS = 50_000  # above this, fts_ok is a quick consistency check unless --check-fts


def context_window(model: str | None, tokens: int | None = None) -> int:
    """Claude Code's context window for this model id and the tokens seen in use."""
    return window_and_source(model, tokens)[0]


def window_and_source(model: str | None, tokens: int | None = None) -> tuple[int, str]:
    """(Claude Code's context window, how it was found): LCM_CONTEXT_WINDOW when set; 1,000,000
    for a model id of a 1M variant, or when more than 200,000 tokens were seen in use (no
    smaller window could hold them); else 200,000."""
    setting = lcm.base.config.get("LCM_CONTEXT_WINDOW")
    if setting:
        return setting, "LCM_CONTEXT_WINDOW"
    lowered = (model or "").lower()
    if any(m in lowered for m in ONE_MILLION_MARKERS):
        return LARGE_WINDOW, f"model id {model}"
    if tokens is not None and tokens > DEFAULT_WINDOW:
        return LARGE_WINDOW, f"{tokens} tokens seen in use"
    return DEFAULT_WINDOW, "default (set LCM_CONTEXT_WINDOW if yours differs)"


def _usage_total(usage) -> int:
    if not isinstance(usage, dict):
        return 0
    return sum(v for k in USAGE_KEYS if isinstance(v := usage.get(k), int))


def _latest_usage(conn, session_id: str) -> tuple[int | None, str | None, int]:
    """(context tokens, model, message row id) of the session's latest real assistant response."""
    rows = conn.execute(
        f"SELECT id, {lcm.vault.store.LINE} AS raw, api_message_id FROM messages WHERE session_id = ? AND type = 'assistant'"
        " AND is_sidechain = 0 ORDER BY id DESC LIMIT ?", (session_id, RECENT_ASSISTANT_LINES))
    for row in rows:
        try:
            entry = json.loads(row["raw"])
            message = entry["message"]
        except (ValueError, KeyError, TypeError):
            continue
        # every line of one API response repeats its usage: the newest line stands for all of them
        total = _usage_total(message.get("usage"))
        if total <= 0:  # synthetic error replies carry zero usage
            continue
        model = entry.get("requestedModel") if isinstance(entry.get("requestedModel"), str) else None
        return total, model or message.get("model"), row["id"]
    return None, None, 0


def claude_context_tokens(conn, session_id: str) -> int | None:
    """Tokens in the session's context now, from its latest assistant usage; None if unknown.

    After a compaction newer than that response, the boundary's postTokens (if recorded) is used.
    """
    tokens, _model, at = _latest_usage(conn, session_id)
    boundary = conn.execute(
        f"SELECT id, {lcm.vault.store.LINE} AS raw FROM messages WHERE session_id = ? AND subtype = 'compact_boundary' AND id > ?"
        " ORDER BY id DESC LIMIT 1", (session_id, at)).fetchone()
    if boundary is not None:
        try:
            post = json.loads(boundary["raw"]).get("compactMetadata", {}).get("postTokens")
        except (ValueError, AttributeError):
            post = None
        return post if isinstance(post, int) else None
    return tokens


def fts_ok(conn, full: bool | None = None) -> bool | None:
    """Whether the FTS5 indexes agree with the stored text (None when SQLite has no FTS5).

    full: FTS5's integrity-check against the content (re-tokenizes everything: ~20 s for a
    1M-message vault); the default runs it up to FULL_CHECK_MAX_ROWS messages, and above that
    checks that every row is indexed and that the index answers a query.
    """
    if not lcm.vault.schema.fts_enabled(conn):
        return None
    tables = (("messages_fts", "messages", "id"), ("summaries_fts", "summaries", "rowid"))
    try:
        if full is None:
            full = (conn.execute("SELECT max(id) FROM messages").fetchone()[0] or 0) <= FULL_CHECK_MAX_ROWS
        for fts, table, key in tables:
            if full:
                try:
                    conn.execute(f"INSERT INTO {fts}({fts}, rank) VALUES ('integrity-check', 1)")
                    continue
                except sqlite3.OperationalError as exc:  # a read-only handle cannot run the full check
                    if "readonly" not in str(exc):
                        raise
            indexed = conn.execute(f"SELECT count(*), max(id) FROM {fts}_docsize").fetchone()
            stored = conn.execute(f"SELECT count(*), max({key}) FROM {table}").fetchone()
            if tuple(indexed) != tuple(stored):
                return False
            conn.execute(f"SELECT count(*) FROM {fts} WHERE {fts} MATCH 'lcmstatusprobe'").fetchone()
        return True
    except sqlite3.DatabaseError:
        return False


def _reason(session_id: str | None, given: bool) -> str:
    """Why this session is the one shown (lcm.vault.resolve chose it)."""
    if session_id is None:
        return ""
    if given:
        return "given by --session"
    if session_id == lcm.base.config.current_session_id():
        return "the current session ($LCM_SESSION_ID)"
    return "the newest session of this project: no current session is set (--session ID picks another)"


def status(conn, session_id: str | None = None, check_fts: bool | None = None, given: bool = False) -> dict:
    """The --json document: vault totals plus the chosen session's two context figures.

    context_tokens is Claude Code's own context (its latest response's usage): only Claude
    Code's compaction (/compact, or its automatic one) lowers it. lcm_context_tokens is lcm's
    view of the same session (its summaries plus the messages they do not cover yet): what lcm
    re-injects after a compaction; lcm_compact.py lowers it, Claude Code's figure not at all.
    """
    path = conn.execute("PRAGMA database_list").fetchone()["file"]
    size = sum(os.path.getsize(p) for p in (path, path + "-wal") if os.path.exists(p))
    counts = conn.execute(
        "SELECT (SELECT count(*) FROM sessions), (SELECT count(*) FROM messages),"
        " (SELECT coalesce(sum(token_count), 0) FROM messages),"
        " (SELECT count(*) FROM summaries), (SELECT max(depth) FROM summaries),"
        " (SELECT coalesce(sum(byte_offset), 0) FROM transcripts)").fetchone()
    why = _reason(session_id, given)
    tokens = model = title = lcm_tokens = None
    if session_id:
        tokens = claude_context_tokens(conn, session_id)
        model = _latest_usage(conn, session_id)[1]
        row = conn.execute("SELECT model, title FROM sessions WHERE session_id = ?", (session_id,)).fetchone()
        if row is not None:
            model, title = model or row["model"], row["title"]
        lcm_tokens = lcm.summary.dag.active_context_tokens(conn, session_id)
    window, window_source = window_and_source(model, tokens)
    threshold = int(lcm.base.config.get("LCM_CONTEXT_THRESHOLD") * window)
    return {
        "db": path, "db_bytes": size, "transcript_bytes": counts[5],  # the vault's size against what it holds
        "vault_ratio": round(size / counts[5], 3) if counts[5] else None, "sessions": counts[0], "messages": counts[1],
        "summaries": counts[3], "max_depth": counts[4], "raw_tokens": counts[2],
        "session_id": session_id, "session_reason": why, "session_title": title, "model": model,
        "context_tokens": tokens, "context_window": window, "context_window_source": window_source,
        "threshold": threshold, "compaction_recommended": tokens is not None and tokens >= threshold,
        "lcm_context_tokens": lcm_tokens,
        "fts_ok": fts_ok(conn, check_fts),
        "only_in_vault": lcm.readers.sessions.only_in_vault(conn),
    }

"""PreCompact: ingest everything, compact the session within a time budget, then print plain-text
instructions that Claude Code appends to its own compactor's prompt: keep the lcm summary ids, and
say the full history stays recoverable.
"""
from __future__ import annotations

import hooklib
from hooklib import note

EVENT = "PreCompact"
# Claude Code waits for this hook before compacting (manual and auto); keep the wait bounded.
# hooks.json gives the process a longer timeout so the budget, not the kill, ends the work.
TIME_BUDGET_SECONDS = 60
MAX_IDS_LISTED = 40
INSTRUCTIONS_CHARS = 3000


def summary_ids(conn, sid: str) -> list[str]:
    """Ids of the session's top-level summaries (no parent), oldest first."""
    rows = conn.execute(
        "SELECT s.id FROM summaries s JOIN messages f ON f.id = s.first_message_id"
        " WHERE s.session_id = ? AND s.parent_id IS NULL ORDER BY f.seq",  # conversation order
        (sid,)).fetchall()
    return [row[0] for row in rows]


def instructions(ids: list[str]) -> str:
    if ids:
        shown = ids[-MAX_IDS_LISTED:]
        more = f" (and {len(ids) - len(shown)} older ones)" if len(ids) > len(shown) else ""
        named = ("lcm has already summarised the older part of this conversation as these summary "
                 f"nodes: {', '.join(shown)}{more}. Keep these ids verbatim in your summary next to "
                 "the topics they cover, so they can be expanded later. ")
    else:
        named = ""
    return ("LCM (lossless context management) instructions for this compaction: " + named
            + "Every original message of this session stays stored verbatim in the lcm vault, so the "
            "full history remains recoverable after compaction: say so in the summary, and note that "
            'details can be found again with python3 "$LCM_SCRIPTS/lcm_grep.py" and read back with '
            'lcm_describe.py / lcm_expand_query.py (lcm_expand.py in sub-agents).')[:INSTRUCTIONS_CHARS]


def compact_now(conn, sid: str) -> None:
    """Sweep everything outside the fresh tail (Claude Code is about to drop it from view).

    A background compaction that holds the session lock is not waited for: the summaries it has
    made so far are named, and it finishes on its own.
    """
    if conn.execute("SELECT 1 FROM messages WHERE session_id = ? LIMIT 1", (sid,)).fetchone() is None:
        note("no messages of this session in the vault: nothing to compact")
        return
    import lcm.summary.compact
    import lcm.summary.dag
    from lcm.base.errors import LcmError
    try:
        with lcm.summary.dag.session_lock(sid, blocking=False):
            pass
    except LcmError as exc:  # someone is compacting this session right now
        note(f"compaction skipped: {exc.message}")
        return
    result = lcm.summary.compact.compact(conn, sid, mode="full", time_budget=TIME_BUDGET_SECONDS)
    if isinstance(result, dict) and result.get("stopped") == "time_budget":
        note(f"compaction stopped at its {TIME_BUDGET_SECONDS}s budget; the rest runs on a later Stop")
    if isinstance(result, dict) and result.get("model_failure"):
        note(f"the model failed ({result['model_failure']}): summaries written at level fallback")


def handle(payload: dict):
    sid = hooklib.session_id(payload)
    conn = hooklib.connect()
    hooklib.try_ingest(conn, payload.get("transcript_path"))
    if hooklib.flag("LCM_SUBAGENT"):
        return None
    try:
        compact_now(conn, sid)
    except Exception as exc:  # noqa: BLE001 - the instructions below matter more than this pass
        note(f"compaction before Claude Code's failed: {type(exc).__name__}: {getattr(exc, 'message', exc)}")
    if not hooklib.flag("LCM_INJECT"):
        return None
    # plain text, not JSON: PreCompact has no hookSpecificOutput, stdout joins the custom instructions
    return instructions(summary_ids(conn, sid))


if __name__ == "__main__":
    hooklib.exit_now(hooklib.run_hook(EVENT, handle))

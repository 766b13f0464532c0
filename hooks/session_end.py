"""SessionEnd: final ingest, then detach a checkpoint (kept in the vault only: nothing is written
into the user's project) and a compaction followed by the session's digest (lcm/summary/digest.py).

Claude Code gives all SessionEnd hooks of a plugin a shared 1.5 s, so nothing slow runs here:
the checkpoint and the compaction run in their own processes after the hook has exited.
"""
from __future__ import annotations

import hooklib

EVENT = "SessionEnd"
# a checkpoint of a short exchange is noise; long sessions are what it is for
CHECKPOINT_MIN_MESSAGES = 20


def handle(payload: dict):
    sid = hooklib.session_id(payload)
    conn = hooklib.connect()
    hooklib.try_ingest(conn, payload.get("transcript_path"))
    if hooklib.flag("LCM_SUBAGENT"):
        return None
    count = conn.execute("SELECT count(*) FROM messages WHERE session_id = ?", (sid,)).fetchone()[0]
    if count >= CHECKPOINT_MIN_MESSAGES:
        hooklib.detach("lcm_checkpoint.py", ["--session", sid, "--vault-only"], payload)
    if count:  # the digest follows the compaction, so a model-written one can read its summaries
        hooklib.detach("lcm_compact.py", ["--session", sid, "--digest"], payload)
    return None


if __name__ == "__main__":
    hooklib.exit_now(hooklib.run_hook(EVENT, handle))

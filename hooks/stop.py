"""Stop: ingest the turn that just ended (and any sub-agent lines written after their own
SubagentStop); when compaction, packing stored lines into blocks, or the daily backup of the
vault is due, start it detached.

The compaction process takes the session lock itself, so a second Stop while it runs is harmless.
"""
from __future__ import annotations

import hooklib

EVENT = "Stop"


def handle(payload: dict):
    sid = hooklib.session_id(payload)
    conn = hooklib.connect()
    hooklib.ingest(conn, payload.get("transcript_path"))
    if not hooklib.flag("LCM_SUBAGENT"):
        hooklib.start_compaction(conn, sid, payload)
        hooklib.start_packing(conn, payload)
        hooklib.start_backup(payload)
    return None


if __name__ == "__main__":
    hooklib.exit_now(hooklib.run_hook(EVENT, handle))

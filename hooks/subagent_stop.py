"""SubagentStop: ingest the sub-agent's own transcript (its lines are sidechain messages of the
parent session); when the parent session's compaction is due, start it detached.

Claude Code's own compactor also runs as a fork that reports SubagentStop with an empty
agent_type; its transcript is the compaction prompt, not work, so it is left alone.
"""
from __future__ import annotations

import hooklib

EVENT = "SubagentStop"


def handle(payload: dict):
    if payload.get("agent_type", None) == "":
        return None
    sid = hooklib.session_id(payload)
    conn = hooklib.connect()
    hooklib.ingest(conn, payload.get("agent_transcript_path") or payload.get("transcript_path"))
    if not hooklib.flag("LCM_SUBAGENT"):
        hooklib.start_compaction(conn, sid, payload)
    return None


if __name__ == "__main__":
    hooklib.exit_now(hooklib.run_hook(EVENT, handle))

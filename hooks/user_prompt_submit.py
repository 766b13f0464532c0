"""UserPromptSubmit: ingest the new transcript lines; with LCM_RECALL=1, add a few bounded
recall hits from earlier sessions for a non-trivial prompt. Silent by default.
"""
from __future__ import annotations

import hooklib

EVENT = "UserPromptSubmit"
RECALL_HITS = 3
RECALL_CHARS = 2400          # the whole injection (~600 tokens), far below Claude Code's 10,000-character cap
MIN_RECALL_WORDS = 3         # "yes", "go on", "/compact" are not worth a search


def handle(payload: dict):
    prompt = payload.get("prompt") or ""
    if isinstance(prompt, str) and prompt.lstrip().startswith("<task-notification>"):
        return None  # a background task reporting back, not the user
    conn = hooklib.connect()
    hooklib.try_ingest(conn, payload.get("transcript_path"))
    if hooklib.flag("LCM_SUBAGENT") or not hooklib.flag("LCM_RECALL") or not hooklib.flag("LCM_INJECT"):
        return None
    import lcm.search.recall
    text = lcm.search.recall.recall_text(conn, prompt, payload.get("session_id"), payload.get("cwd"),
                                         hits=RECALL_HITS, max_chars=RECALL_CHARS, min_words=MIN_RECALL_WORDS)
    return hooklib.context_output(EVENT, text) if text else None


if __name__ == "__main__":
    hooklib.exit_now(hooklib.run_hook(EVENT, handle))

"""SessionStart: open (create or upgrade) the vault, export LCM_* to the session's Bash tool,
ingest the transcript, and re-inject context after a compaction, or the checkpoint pointer and the
project's pinned notes on start. In an LCM_EXCLUDE project it only exports the variables.
"""
from __future__ import annotations

import os

import hooklib
from hooklib import note

EVENT = "SessionStart"
# additionalContext above 10,000 characters is moved to a file by Claude Code: stay well under
CONTEXT_CHARS = 6000
DRILL_DOWN = (
    "The summaries above stand in for older messages of this session; every original message is "
    "still in the lcm vault. To get details back: "
    'python3 "$LCM_SCRIPTS/lcm_grep.py" "<words>" to search, '
    'python3 "$LCM_SCRIPTS/lcm_describe.py" <sum_id> to inspect a summary, '
    'python3 "$LCM_SCRIPTS/lcm_expand_query.py" --summary-ids <sum_id> --prompt "<question>" to answer from the originals '
    "(the lcm skill has the details)."
)
OUR_EXPORTS = ("LCM_SCRIPTS", "LCM_SESSION_ID", "LCM_DB")


def shell_quote(value: str) -> str:
    """One shell word on one line, whatever the value holds: the file is rewritten line by line,
    so a newline inside quotes would leave its second half behind as a command of its own."""
    if not any(c < " " or c == "\x7f" for c in value):
        return "'" + value.replace("'", "'\"'\"'") + "'"  # as shlex.quote, without its import
    # ANSI-C quoting (bash, zsh): control characters as escapes, the rest as it is
    escaped = "".join(f"\\x{ord(c):02x}" if c < " " or c == "\x7f" else "\\" + c if c in "\\'" else c
                      for c in value)
    return f"$'{escaped}'"


def write_env_file(path: str, values: dict[str, str]) -> None:
    """Put one `export NAME=value` per variable in the env file, replacing our earlier lines.

    Claude Code reuses the file across startup -> resume -> compact of one session, so a plain
    append would stack duplicates; lines that are not ours are kept as they are.
    """
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        lines = []
    kept = [line for line in lines
            if not any(line.startswith(f"export {name}=") for name in OUR_EXPORTS)]
    kept += [f"export {name}={shell_quote(value)}" for name, value in values.items()]
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = f"{path}.lcm-{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write("\n".join(kept) + "\n")
    os.replace(tmp, path)


def checkpoint_pointer(conn, payload: dict) -> str | None:
    """One line naming this project's latest checkpoint in the vault, and how to resume it."""
    project = hooklib.project_dir(payload)
    row = conn.execute("SELECT id, session_id, created_at FROM checkpoints WHERE project = ? AND session_id != ?"
                       " ORDER BY id DESC LIMIT 1", (project, payload.get("session_id") or "")).fetchone()
    if row is None:
        return None
    return (f"lcm: the vault keeps a checkpoint of earlier work on this project (checkpoint {row['id']} of"
            f" session {row['session_id']}, written {(row['created_at'] or '')[:16].replace('T', ' ')} UTC)."
            f' If the task continues that work, run python3 "$LCM_SCRIPTS/lcm_resume.py" --session'
            f" {row['session_id']} to restore the working state (goals, decisions, open files, next steps)"
            " before starting.")


def compact_context(conn, sid: str) -> str:
    try:
        import lcm.compact
    except ImportError:
        note("lcm/compact.py is missing: only the drill-down pointer injected after compaction")
        body = ""
    else:
        body = lcm.compact.render_context(conn, sid, max_chars=CONTEXT_CHARS).strip()
    if not body:
        return ("lcm: this session was compacted. Its full history stays in the lcm vault. " + DRILL_DOWN)
    return ("lcm: active context of this session after compaction (summaries with their ids):\n"
            + body + "\n\n" + DRILL_DOWN)


def startup_context(conn, payload: dict, pointer: str | None) -> str | None:
    """What a new, resumed or cleared session starts with: the checkpoint pointer (one part,
    kept whole) and the notes pinned for its project, newest first, within lcm.notes.INJECT_CHARS."""
    import lcm.notes
    return lcm.notes.context_text(conn, hooklib.project_dir(payload), pointer)


def export_env(payload: dict) -> None:
    """LCM_SCRIPTS, LCM_SESSION_ID and LCM_DB for the session's Bash tool."""
    import lcm.config
    env_file = os.environ.get("CLAUDE_ENV_FILE")
    if env_file:
        write_env_file(env_file, {
            "LCM_SCRIPTS": hooklib.scripts_dir(),
            "LCM_SESSION_ID": hooklib.session_id(payload),
            "LCM_DB": str(lcm.config.db_path().resolve()),
        })
    else:
        note("CLAUDE_ENV_FILE is not set: LCM_SCRIPTS not exported to the Bash tool")


def handle(payload: dict):
    sid = hooklib.session_id(payload)
    conn = hooklib.connect()
    if hooklib.flag("LCM_SUBAGENT"):
        hooklib.try_ingest(conn, payload.get("transcript_path"))
        return None
    export_env(payload)
    hooklib.try_ingest(conn, payload.get("transcript_path"))
    if not hooklib.flag("LCM_INJECT"):
        return None
    source = payload.get("source")
    if source == "compact":
        text = compact_context(conn, sid)
    elif source in ("startup", "resume", "clear"):
        text = startup_context(conn, payload, checkpoint_pointer(conn, payload))
    elif source == "fork":
        text = checkpoint_pointer(conn, payload)
    else:
        text = None
    return hooklib.context_output(EVENT, text) if text else None


if __name__ == "__main__":
    # in an LCM_EXCLUDE project only the commands are made available: nothing stored or injected
    raise SystemExit(hooklib.run_hook(EVENT, handle, when_excluded=export_env))

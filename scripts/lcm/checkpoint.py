"""Checkpoints: a session's state written as markdown that a later session can resume from.

The command is scripts/lcm_checkpoint.py; hooks and other commands import this module.
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

import lcm.cli
import lcm.config
import lcm.mask
import lcm.worklog
from lcm.errors import LcmError

FILE_NAME = ".lcm-checkpoint.md"
MARKER = "lcm-checkpoint:"
FORMAT_VERSION = 1
NARRATIVE_SYSTEM = (
    "You write the hand-over note a developer leaves before stopping work. From the extracted "
    "session state, write at most 150 words: what was being done, where it stands, and the next "
    "step. Only state what the material supports; do not invent file names or results.")


def workspace_root() -> Path:
    return Path(os.environ.get("CLAUDE_PROJECT_DIR") or os.getcwd())


def foreign_reason(conn, session_id: str) -> str | None:
    """Why the workspace's checkpoint file is not this session's to write, or None when it is:
    the current session ($LCM_SESSION_ID), or one whose directory is the workspace root."""
    current = lcm.config.current_session_id()
    if current == session_id:
        return None
    row = conn.execute("SELECT project FROM sessions WHERE session_id = ?", (session_id,)).fetchone()
    project = row["project"] if row else None
    root = workspace_root()
    if not current and project and os.path.realpath(project) == os.path.realpath(root):
        return None
    if current:
        return f"session {session_id} is not the current session ({current})"
    return f"session {session_id} belongs to {project or 'another project'}, not {root}"


def catch_up(conn, session_id: str) -> None:
    """Ingest the lines of the live transcript that the hooks have not stored yet."""
    row = conn.execute("SELECT transcript_path FROM sessions WHERE session_id = ?", (session_id,)).fetchone()
    path = row and row["transcript_path"]
    if not path or not Path(path).is_file():
        return
    try:
        import lcm.ingest
    except ImportError:
        return
    try:
        lcm.ingest.ingest_file(conn, path)
    except LcmError as exc:  # the stored lines still make a checkpoint
        sys.stderr.write(f"Warning: could not read the newest lines of {path}: {exc.message}\n")


def narrative(conn, session_id: str, body: str) -> str | None:
    """A model-written summary of the state, or None (with a warning) if the model fails."""
    import lcm.llm
    try:
        done = lcm.llm.complete(NARRATIVE_SYSTEM, [{"role": "user", "content": body[:24000]}], max_tokens=400,
                                model=lcm.llm.resolve_model(conn, session_id))
    except LcmError as exc:
        sys.stderr.write(f"Warning: narrative skipped, the model call failed: {exc.message}\n")
        return None
    return done.text.strip() or None


def build(conn, session_id: str, vault: Path, use_llm: bool) -> tuple[dict, str]:
    session = conn.execute("SELECT * FROM sessions WHERE session_id = ?", (session_id,)).fetchone()
    log = lcm.worklog.worklog(conn, session_id)
    top = lcm.worklog.top_summaries(conn, session_id)
    summaries = conn.execute("SELECT count(*) FROM summaries WHERE session_id = ?", (session_id,)).fetchone()[0]
    meta = {"version": FORMAT_VERSION, "session_id": session_id, "vault": str(vault),
            "project": session["project"], "last_message_id": log["last_message_id"],
            "created_at": lcm.config.now_iso()}
    body = lcm.worklog.render(lcm.worklog.sections(log, top))
    story = narrative(conn, session_id, body) if use_llm else None
    head = [
        f"<!-- {MARKER} {json.dumps(meta)} -->",
        f"# lcm checkpoint: {session['title'] or session_id}",
        "",
        f"- Session: `{session_id}` (project {session['project'] or 'unknown'})",
        f"- Written: {meta['created_at']}",
        f"- Vault: {vault} ({log['message_count']} messages in this session, {summaries} summaries,"
        f" last message id {log['last_message_id']})",
        f"- Work seen: {log['request_count']} user requests, {len(log['files_edited'])} files edited,"
        f" {len(log['files_created'])} created, {log['command_count']} commands"
        f" ({log['failed_command_count']} failed), {len(log['open_todos'])} open todos",
    ]
    if story:
        head += ["", "## Narrative (model-written)", story]
    resume = [
        "## How to resume",
        '- `python3 "$LCM_SCRIPTS/lcm_resume.py"` rebuilds this state from the vault and lists what came after it',
        f'- `python3 "$LCM_SCRIPTS/lcm_grep.py" "TERM" --session {session_id}` finds an exact detail',
        '- `python3 "$LCM_SCRIPTS/lcm_describe.py" ID` / `lcm_expand_query.py --prompt "QUESTION" --query "TERM"`'
        " drill into a summary or message id listed above",
    ]
    text = "\n".join(head) + "\n\n" + body + "\n\n" + "\n".join(resume) + "\n"
    # the file lands in the project (easy to commit): masked whole, whatever the vault holds
    return lcm.mask.mask_json({**meta, "title": session["title"], "message_count": log["message_count"],
                               "summary_count": summaries, "narrative": story, "worklog": log,
                               "top_summaries": top}), lcm.mask.mask(text)


def write_atomic(path: Path, text: str) -> str:
    """Write to a temporary file beside `path`; the caller os.replace()s it into place."""
    fd, tmp = tempfile.mkstemp(prefix=".lcm-checkpoint.", suffix=".tmp", dir=path.parent)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    return tmp

"""Write .lcm-checkpoint.md: the working state of a session, for the next session to resume.

The file goes to the workspace root ($CLAUDE_PROJECT_DIR, else the current directory) and is
replaced atomically. Every checkpoint is also stored in the vault, so overwriting the file
loses nothing. The content is extracted deterministically from the vault (latest user
requests, open todos, files created and edited, commands and failures, unresolved errors,
choices stated, the top of the summary DAG); --llm adds a short model-written narrative.

Usage:
  python3 scripts/lcm_checkpoint.py [--session ID] [--output PATH] [--llm] [--json]

Examples:
  python3 "$LCM_SCRIPTS/lcm_checkpoint.py"
  python3 "$LCM_SCRIPTS/lcm_checkpoint.py" --llm
  python3 "$LCM_SCRIPTS/lcm_checkpoint.py" --session 7acd37a8-... --output /tmp/cp.md --json
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

import lcm_db
import lcm_worklog
from lcm_db import LcmError

FILE_NAME = ".lcm-checkpoint.md"
MARKER = "lcm-checkpoint:"
FORMAT_VERSION = 1
NARRATIVE_SYSTEM = (
    "You write the hand-over note a developer leaves before stopping work. From the extracted "
    "session state, write at most 150 words: what was being done, where it stands, and the next "
    "step. Only state what the material supports; do not invent file names or results.")


def workspace_root() -> Path:
    return Path(os.environ.get("CLAUDE_PROJECT_DIR") or os.getcwd())


def resolve_session(conn, explicit: str | None) -> str:
    """--session, else the current session, else the newest session of this project."""
    session_id = explicit or lcm_db.current_session_id()
    if session_id:
        if not conn.execute("SELECT 1 FROM sessions WHERE session_id = ?", (session_id,)).fetchone():
            raise LcmError(f"session {session_id} is not in the vault",
                           "run lcm_ingest.py on its transcript (or --all), or check the id with lcm_status.py")
        return session_id
    project = str(workspace_root())
    row = conn.execute("SELECT session_id FROM sessions WHERE project = ? ORDER BY last_at DESC LIMIT 1",
                       (project,)).fetchone()
    if row is None:
        raise LcmError(f"no current session and no session of project {project} in the vault",
                       "pass --session ID (lcm_status.py lists sessions), or run lcm_ingest.py --all first")
    return row["session_id"]


def catch_up(conn, session_id: str) -> None:
    """Ingest the lines of the live transcript that the hooks have not stored yet."""
    row = conn.execute("SELECT transcript_path FROM sessions WHERE session_id = ?", (session_id,)).fetchone()
    path = row and row["transcript_path"]
    if not path or not Path(path).is_file():
        return
    try:
        import lcm_ingest
    except ImportError:
        return
    try:
        lcm_ingest.ingest_file(conn, path)
    except LcmError as exc:  # the stored lines still make a checkpoint
        sys.stderr.write(f"Warning: could not read the newest lines of {path}: {exc.message}\n")


def narrative(conn, session_id: str, body: str) -> str | None:
    """A model-written summary of the state, or None (with a warning) if the model fails."""
    import lcm_llm
    try:
        done = lcm_llm.complete(NARRATIVE_SYSTEM, [{"role": "user", "content": body[:24000]}], max_tokens=400,
                                model=lcm_llm.resolve_model(conn, session_id))
    except LcmError as exc:
        sys.stderr.write(f"Warning: narrative skipped, the model call failed: {exc.message}\n")
        return None
    return done.text.strip() or None


def build(conn, session_id: str, vault: Path, use_llm: bool) -> tuple[dict, str]:
    session = conn.execute("SELECT * FROM sessions WHERE session_id = ?", (session_id,)).fetchone()
    log = lcm_worklog.worklog(conn, session_id)
    top = lcm_worklog.top_summaries(conn, session_id)
    summaries = conn.execute("SELECT count(*) FROM summaries WHERE session_id = ?", (session_id,)).fetchone()[0]
    meta = {"version": FORMAT_VERSION, "session_id": session_id, "vault": str(vault),
            "project": session["project"], "last_message_id": log["last_message_id"],
            "created_at": lcm_db.now_iso()}
    body = lcm_worklog.render(lcm_worklog.sections(log, top))
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
    return {**meta, "title": session["title"], "message_count": log["message_count"],
            "summary_count": summaries, "narrative": story, "worklog": log,
            "top_summaries": top}, text


def write_atomic(path: Path, text: str) -> str:
    """Write to a temporary file beside `path`; the caller os.replace()s it into place."""
    fd, tmp = tempfile.mkstemp(prefix=".lcm-checkpoint.", suffix=".tmp", dir=path.parent)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    return tmp


def _main(argv):
    p = lcm_db.parser(__doc__)
    lcm_db.add_session_arg(p)
    p.add_argument("--output", metavar="PATH", help=f"file to write (default: {FILE_NAME} at the workspace root)")
    p.add_argument("--llm", action="store_true", help="add a model-written narrative (lcm_llm backend)")
    args = p.parse_args(argv)
    output = Path(args.output).expanduser() if args.output else workspace_root() / FILE_NAME
    if not output.parent.is_dir():
        raise LcmError(f"cannot write {output}: {output.parent} is not a directory", "pass --output PATH in an existing directory")
    conn = lcm_db.connect(args.db, create=False)
    session_id = resolve_session(conn, args.session)
    catch_up(conn, session_id)
    info, text = build(conn, session_id, lcm_db.db_path(args.db).resolve(), args.llm)
    try:
        tmp = write_atomic(output, text)
    except OSError as exc:
        raise LcmError(f"cannot write {output}: {exc.strerror}", "check the directory's permissions or pass --output PATH") from None
    try:
        with lcm_db.transaction(conn):
            cur = conn.execute(
                "INSERT INTO checkpoints (session_id, project, path, content, last_message_id, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (session_id, info["project"], str(output.resolve()), text, info["last_message_id"], info["created_at"]))
            os.replace(tmp, output)  # inside the transaction: a failed rename stores nothing
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    info.update(checkpoint_id=cur.lastrowid, path=str(output.resolve()), tokens=lcm_db.estimate_tokens(text))
    if args.json:
        lcm_db.print_json(info)
    else:
        log = info["worklog"]
        print(f"Checkpoint {info['checkpoint_id']} written to {info['path']} ({info['tokens']} tokens)")
        print(f"session {session_id}: {log['message_count']} messages, {len(log['files_edited'])} files edited,"
              f" {len(log['open_todos'])} open todos")
        print('Resume in a new session with: python3 "$LCM_SCRIPTS/lcm_resume.py"')
    return 0


def main(argv: list[str] | None = None) -> int:
    return lcm_db.run(_main, argv)


if __name__ == "__main__":
    lcm_db.freeze_imports()
    sys.exit(main())

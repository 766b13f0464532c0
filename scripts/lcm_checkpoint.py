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

import os
import sys
from pathlib import Path

import lcm.db
import lcm.checkpoint
from lcm.db import LcmError


def _main(argv):
    p = lcm.db.parser(__doc__)
    lcm.db.add_session_arg(p)
    p.add_argument("--output", metavar="PATH", help=f"file to write (default: {lcm.checkpoint.FILE_NAME} at the workspace root)")
    p.add_argument("--llm", action="store_true", help="add a model-written narrative (LCM_LLM backend)")
    args = p.parse_args(argv)
    output = Path(args.output).expanduser() if args.output else lcm.checkpoint.workspace_root() / lcm.checkpoint.FILE_NAME
    if not output.parent.is_dir():
        raise LcmError(f"cannot write {output}: {output.parent} is not a directory", "pass --output PATH in an existing directory")
    conn = lcm.db.connect(args.db, create=False)
    session_id = lcm.checkpoint.resolve_session(conn, args.session)
    lcm.checkpoint.catch_up(conn, session_id)
    info, text = lcm.checkpoint.build(conn, session_id, lcm.db.db_path(args.db).resolve(), args.llm)
    try:
        tmp = lcm.checkpoint.write_atomic(output, text)
    except OSError as exc:
        raise LcmError(f"cannot write {output}: {exc.strerror}", "check the directory's permissions or pass --output PATH") from None
    try:
        with lcm.db.transaction(conn):
            cur = conn.execute(
                "INSERT INTO checkpoints (session_id, project, path, content, last_message_id, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (session_id, info["project"], str(output.resolve()), text, info["last_message_id"], info["created_at"]))
            os.replace(tmp, output)  # inside the transaction: a failed rename stores nothing
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    info.update(checkpoint_id=cur.lastrowid, path=str(output.resolve()), tokens=lcm.db.estimate_tokens(text))
    if args.json:
        lcm.db.print_json(info)
    else:
        log = info["worklog"]
        print(f"Checkpoint {info['checkpoint_id']} written to {info['path']} ({info['tokens']} tokens)")
        print(f"session {session_id}: {log['message_count']} messages, {len(log['files_edited'])} files edited,"
              f" {len(log['open_todos'])} open todos")
        print('Resume in a new session with: python3 "$LCM_SCRIPTS/lcm_resume.py"')
    return 0


def main(argv: list[str] | None = None) -> int:
    return lcm.db.run(_main, argv)


if __name__ == "__main__":
    lcm.db.freeze_imports()
    sys.exit(main())

"""Write .lcm-checkpoint.md: the working state of a session, for the next session to resume.

Every checkpoint is stored in the vault. The file goes to the workspace root ($CLAUDE_PROJECT_DIR,
else the current directory), replaced atomically, when the session is this project's (the
current session, or one whose directory is the workspace root); a checkpoint of another
session is kept in the vault only unless --output names a file. --output - prints it instead;
--vault-only writes no file (the SessionEnd hook uses it). The content is extracted deterministically from the vault (latest user
requests, open todos, files created and edited, commands and failures, unresolved errors,
choices stated, the top of the summary DAG); --llm adds a short model-written narrative.

Usage:
  python3 scripts/lcm_checkpoint.py [--session ID] [--output PATH | --output - | --vault-only] [--llm] [--json]

Examples:
  python3 "$LCM_SCRIPTS/lcm_checkpoint.py"
  python3 "$LCM_SCRIPTS/lcm_checkpoint.py" --llm
  python3 "$LCM_SCRIPTS/lcm_checkpoint.py" --session 7acd37a8-... --output /tmp/cp.md --json
  python3 "$LCM_SCRIPTS/lcm_checkpoint.py" --output - | less
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import lcm.cli
import lcm.base.config
import lcm.vault.db
import lcm.vault.resolve
import lcm.summary.checkpoint
import lcm.base.shell
from lcm.base.errors import LcmError


def _main(argv):
    p = lcm.cli.parser(__doc__)
    lcm.cli.add_session_arg(p)
    where = p.add_mutually_exclusive_group()
    where.add_argument("--output", metavar="PATH",
                       help=f"file to write, - for stdout (default: {lcm.summary.checkpoint.FILE_NAME} at the workspace root)")
    where.add_argument("--vault-only", action="store_true", help="store the checkpoint in the vault, write no file")
    p.add_argument("--llm", action="store_true", help="add a model-written narrative (LCM_LLM backend)")
    args = p.parse_args(argv)
    to_stdout = args.output == "-"
    output = Path(args.output).expanduser() if args.output and not to_stdout else None
    if output is not None and output.is_dir():
        raise LcmError(f"--output {output} is a directory", f"pass a file path, e.g. {output / lcm.summary.checkpoint.FILE_NAME}")
    if output is not None and output.exists() and not output.is_file():  # a device or FIFO: never replace it
        raise LcmError(f"--output {output} is not a regular file", "pass the path of a file to write, or - for stdout")
    if output is not None and not output.parent.is_dir():
        raise LcmError(f"cannot write {output}: {output.parent} is not a directory", "pass --output PATH in an existing directory")
    conn = lcm.vault.db.connect(args.db, create=False)
    session_id = lcm.vault.resolve.session(conn, args.session, whole=True)
    default_file = lcm.summary.checkpoint.workspace_root() / lcm.summary.checkpoint.FILE_NAME
    skipped = None  # why the default file was not written
    if output is None and not to_stdout and not args.vault_only:
        skipped = lcm.summary.checkpoint.foreign_reason(conn, session_id)
        output = None if skipped else default_file
    lcm.summary.checkpoint.catch_up(conn, session_id)
    info, text = lcm.summary.checkpoint.build(conn, session_id, lcm.base.config.db_path(args.db).resolve(), args.llm)
    tmp = None
    if output is not None:
        try:
            tmp = lcm.summary.checkpoint.write_atomic(output, text)
        except OSError as exc:
            raise (lcm.vault.db.storage_error(exc, str(output), "cannot write") or LcmError(
                f"cannot write {output}: {exc.strerror}", "check the directory's permissions or pass --output PATH")) from None
    path = str(output.resolve()) if output is not None else None
    try:
        with lcm.vault.db.transaction(conn):
            cur = conn.execute(
                "INSERT INTO checkpoints (session_id, project, path, content, last_message_id, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (session_id, info["project"], path, text, info["last_message_id"], info["created_at"]))
            if tmp is not None:
                os.replace(tmp, output)  # inside the transaction: a failed rename stores nothing
        if output is not None and output.name == lcm.summary.checkpoint.FILE_NAME:
            lcm.summary.checkpoint.keep_out_of_git(output)
    finally:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)
    # the resume command for exactly this checkpoint: its file, else the vault's newest of the session
    resume = lcm.base.shell.command_line("lcm_resume.py", *(["--checkpoint", path] if path else ["--session", session_id]))
    info.update(checkpoint_id=cur.lastrowid, path=path, tokens=lcm.base.config.estimate_tokens(text), resume=resume,
                not_written=skipped)
    if args.json:
        lcm.cli.print_json({**info, "content": text} if to_stdout else info)
        return 0
    if to_stdout:
        sys.stdout.write(text)
        return 0
    log = info["worklog"]
    where_to = f"written to {path}" if path else "stored in the vault only"
    print(f"Checkpoint {info['checkpoint_id']} {where_to} ({info['tokens']} tokens)")
    if skipped:
        print(f"Not written to {default_file}: {skipped}; pass --output PATH to write a file")
    print(f"session {session_id}: {log['message_count']} messages, {len(log['files_edited'])} files edited,"
          f" {len(log['open_todos'])} open todos")
    print(f"Resume it in a new session with: {resume}")
    return 0


def main(argv: list[str] | None = None) -> int:
    return lcm.cli.run(_main, argv)


if __name__ == "__main__":
    lcm.cli.freeze_imports()
    sys.exit(main())

"""Export one session from the vault: markdown to read, or its original transcript lines.

Usage:
  python3 scripts/lcm_export.py [--session ID] [--format markdown|jsonl] [--output FILE]
                                [--unmasked] [--json]
  python3 scripts/lcm_export.py [--session ID] --archive DIR [--json]
  python3 scripts/lcm_export.py --bundle FILE (--session ID | --all | --since WHEN) [--unmasked] [--json]

--session is a session id or a unique prefix (lcm_sessions.py lists them), default the current
session ($LCM_SESSION_ID). markdown (the default): the prompts and replies in order, each tool
call and its result folded to one line, the session's summaries as headings where they exist.
jsonl: one line per stored message, the original transcript line. Secrets are masked in both,
as in everything lcm prints; --unmasked writes the exact stored bytes. Without --output the
export goes to stdout; with it, the file is written whole (0600) or not at all, and --json
reports what was written. --archive DIR appends the session's digest (what was done, decided,
found and what failed) to DIR/YYYY-MM-DD.md, the day the session last ran: a dated archive,
append-only, one entry per session (a second run adds nothing).
--bundle FILE writes sessions to take to another vault (another machine, a teammate):
their original transcript lines, masked unless --unmasked, with the uuids purged from them, in
one compressed file; `lcm_ingest.py FILE` merges it there. --all takes every session, --since
those active since WHEN (ISO date/time or 3h 2d 1w); a progress bar shows on a terminal.

Examples:
  python3 "$LCM_SCRIPTS/lcm_export.py" --format markdown --output session.md
  python3 "$LCM_SCRIPTS/lcm_export.py" --session 3f2c1a9b --format jsonl > session.jsonl
  python3 "$LCM_SCRIPTS/lcm_export.py" --session 3f2c1a9b --archive ~/notes/sessions
  python3 "$LCM_SCRIPTS/lcm_export.py" --session 3f2c1a9b --format jsonl --unmasked --output exact.jsonl --json
  python3 "$LCM_SCRIPTS/lcm_export.py" --bundle laptop.lcmb --since 2w
"""
from __future__ import annotations

import os
import sys
import tempfile

import lcm.cli
import lcm.base.config
import lcm.vault.db
import lcm.summary.digest
import lcm.vault.grants
import lcm.vault.resolve
import lcm.readers.bundle
import lcm.readers.export
import lcm.base.mask
import lcm.base.shell
import lcm.readers.sessions
import lcm.search.result_types
from lcm.base.errors import LcmError


def pieces(conn, session_id: str, fmt: str, masked: bool) -> object:
    """The export as a stream of bytes, secrets masked unless masked=False (--unmasked)."""
    if fmt == "jsonl":
        for line in lcm.readers.export.jsonl(conn, session_id):
            yield lcm.base.mask.mask_line(line) if masked else line
    else:
        for text in lcm.readers.export.markdown(conn, session_id, masked=masked):
            yield (lcm.base.mask.mask(text) if masked else text).encode("utf-8", "surrogatepass")


def write_file(path: str, stream) -> int:
    """Write the whole export beside `path` first, then rename it into place; returns its size."""
    directory = os.path.dirname(os.path.abspath(path))
    if os.path.exists(path) and not os.path.isfile(path):  # a device or FIFO: the rename would replace it
        raise LcmError(f"--output {path} is not a regular file", "pass the path of a file to write, or no --output for stdout")
    if not os.path.isdir(directory):
        raise LcmError(f"cannot write {path}: {directory} is not a directory", "pass --output FILE in an existing directory")
    size = 0
    try:
        fd, tmp = tempfile.mkstemp(prefix=".lcm-export.", dir=directory)  # 0600: it holds a whole conversation
    except OSError as exc:
        raise LcmError(f"cannot write {path}: {exc.strerror}", "check the directory's permissions or pass another --output") from None
    try:
        with os.fdopen(fd, "wb") as f:
            for chunk in stream:
                f.write(chunk)
                size += len(chunk)
        os.replace(tmp, path)
    except OSError as exc:
        raise LcmError(f"cannot write {path}: {exc.strerror}", "check the free space and permissions, or pass another --output") from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return size


def _main(argv):
    p = lcm.cli.parser(__doc__)
    lcm.cli.add_session_arg(p)
    p.add_argument("--format", choices=["markdown", "jsonl"], default="markdown", help="default: markdown")
    p.add_argument("--output", metavar="FILE", help="write here instead of stdout")
    p.add_argument("--unmasked", action="store_true", help="the exact stored bytes, secrets included")
    p.add_argument("--archive", metavar="DIR", help="append the session's digest to DIR/YYYY-MM-DD.md instead")
    p.add_argument("--bundle", metavar="FILE", help="write a bundle of sessions for lcm_ingest.py FILE on another vault")
    p.add_argument("--all", action="store_true", help="with --bundle: every session")
    p.add_argument("--since", metavar="WHEN", help="with --bundle: the sessions active since WHEN (ISO date/time or 3h 2d 1w)")
    args = p.parse_args(argv)
    if args.bundle:
        if args.archive or args.output or args.format != "markdown":
            p.error("--bundle FILE is the whole output: no --archive, --output or --format")
        if sum(map(bool, (args.session, args.all, args.since))) > 1:
            p.error("--bundle takes one of --session, --all, --since")
        return _bundle(args)
    if args.all or args.since:
        p.error("--all and --since choose the sessions of a --bundle")
    if args.archive and (args.output or args.unmasked or args.format != "markdown"):
        p.error("--archive writes the session's markdown digest to DIR/YYYY-MM-DD.md: no --output, --unmasked or jsonl")
    if args.json and not (args.output or args.archive):
        p.error("--json reports a written file: give --output FILE (without it the export itself is the output)")
    conn = lcm.vault.db.connect(args.db, create=False, readonly=True)
    if args.unmasked:
        lcm.vault.grants.scope(conn).refuse("--unmasked", "export without --unmasked: secrets stay masked")
    session_id = lcm.vault.resolve.session(conn, args.session, whole=True)
    if args.archive:
        doc = lcm.summary.digest.archive(conn, session_id, args.archive)
        if args.json:
            lcm.cli.print_json(doc)
        else:
            print(f"{'Appended the' if doc['written'] else 'Already archived:'} {doc['level']} digest of session"
                  f" {session_id} {'to' if doc['written'] else 'in'} {doc['archive']}")
        return 0
    stream = pieces(conn, session_id, args.format, not args.unmasked)
    if not args.output:
        # a person's terminal gets text, its control characters shown as symbols (lcm.cli.run);
        # a pipe or a file gets the bytes
        out = sys.stdout if lcm.cli.on_terminal() else sys.stdout.buffer
        try:
            for chunk in stream:
                out.write(chunk.decode("utf-8", "replace") if out is sys.stdout else chunk)
            out.flush()
        except BrokenPipeError:  # `| head`: the reader has what it wanted
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    size = write_file(args.output, stream)
    messages = conn.execute("SELECT count(*) FROM messages WHERE session_id = ?", (session_id,)).fetchone()[0]
    doc = {"session_id": session_id, "format": args.format, "output": os.path.abspath(args.output),
           "messages": messages, "bytes": size, "masked": not args.unmasked}
    if args.json:
        lcm.cli.print_json(doc)
    else:
        print(f"Wrote {doc['output']}: {args.format}, {messages} messages, {size} bytes"
              + (" (unmasked)" if args.unmasked else ""))
    return 0


def _bundle(args) -> int:
    since = lcm.search.result_types.parse_when(args.since, "--since")
    conn = lcm.vault.db.connect(args.db, create=False, readonly=True)
    if args.unmasked:
        lcm.vault.grants.scope(conn).refuse("--unmasked", "write the bundle without --unmasked: secrets stay masked")
    session = lcm.vault.resolve.session(conn, args.session, whole=True) if not (args.all or since) else None
    sessions = lcm.readers.bundle.choose_sessions(conn, session, args.all, since)
    doc = lcm.readers.bundle.write(conn, args.bundle, sessions, masked=not args.unmasked, everything=args.all,
                                   since=since, progress=True)  # on stderr, when a terminal
    if args.json:
        lcm.cli.print_json(doc)
    else:
        print(f"Wrote {doc['bundle']}: {doc['sessions']} sessions, {doc['messages']} messages, {doc['purged']} purged"
              f" uuids, {doc['bytes']} bytes" + (" (unmasked)" if args.unmasked else " (masked)"))
        print("Next: " + lcm.base.shell.command_line("lcm_ingest.py", lcm.base.shell.Positional(doc["bundle"]))
              + " on the other vault")
    return 0


def main(argv: list[str] | None = None) -> int:
    return lcm.cli.run(_main, argv)


if __name__ == "__main__":
    lcm.cli.freeze_imports()
    sys.exit(main())

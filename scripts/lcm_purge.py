"""Forget messages: delete them from the vault for good, with everything built on them.

Usage:
  python3 scripts/lcm_purge.py (--session ID | --message UUID | --match TEXT [--regex]) [--yes] [--json]

Without --yes nothing is removed: it prints what would go (counts and a few examples).
  --session ID    every message of a session (its id or a unique prefix of it)
  --message UUID  one message, by its transcript uuid (as lcm_grep.py prints it)
  --match TEXT    every message whose visible text contains TEXT (case-sensitive substring of
                  the message text, thinking, tool inputs and outputs; never metadata such as
                  gitBranch or cwd), and every summary, checkpoint, pinned note, session title,
                  stored lcm_llm_map prompt or answer and lcm.log line that does; with --hidden,
                  also messages that hold TEXT only in tool data Claude Code keeps but does
                  not show (an edited file's earlier contents); with --regex,
                  TEXT is a Python regular expression (refused when it takes over 2 s on one
                  text). TEXT is never printed back, not even in an error.

With --yes it removes the messages (rows, original lines, search index entries), the summaries
built on them and those summaries' ancestors (the next lcm_compact.py summarises what remains),
their externalised files under $LCM_HOME/files, the checkpoints and session digests that may
quote them, and
leaves no copy in the vault's free pages or its write-ahead log. Purged messages are remembered
by uuid (in the vault and in <vault>.purged beside it, which outlives the vault file), so a
transcript still on disk never imports them again, not even into a rebuilt vault; delete the
transcript itself (under ~/.claude/projects) if it must go too. Every backup lcm_backup.py keeps
(its directory and each other one it wrote to) is rewritten without it. Backups that lcm_doctor.py made
beside the vault, and .lcm-checkpoint.md files in projects, are not touched: the output lists them.

Examples:
  python3 "$LCM_SCRIPTS/lcm_purge.py" --match 'sk-ant-api03-AbC'
  python3 "$LCM_SCRIPTS/lcm_purge.py" --match 'AKIA[0-9A-Z]{16}' --regex --yes
  python3 "$LCM_SCRIPTS/lcm_purge.py" --session 3f2c9a1b --yes
"""
from __future__ import annotations

import sys

import lcm.cli
import lcm.base.shell
import lcm.vault.db
import lcm.vault.grants
import lcm.care.backup
import lcm.care.purge


def _n(count: int, one: str, many: str | None = None) -> str:
    return f"{count} {one if count == 1 else many or one + 's'}"


def _print(doc: dict, done: bool, whole_sessions: bool = False) -> None:
    out = sys.stdout
    verb = "Removed" if done else "Would remove"
    if not any(doc.get(k) for k in ("messages", "summaries", "notes", "titles", "map_items", "log_lines")):
        out.write(f"Nothing to remove: no {doc['what']}.\n")
        _hidden_note(doc, done)
        return
    out.write(f"{verb} {_n(doc['messages'], 'message')} of {_n(len(doc['sessions']), 'session')}, "
              f"{_n(doc['summaries'], 'summary', 'summaries')}, {_n(doc['files'], 'stored file')} and "
              f"{_n(doc['checkpoints'], 'checkpoint')}" + (f", {_n(doc['notes'], 'pinned note')}" if doc["notes"] else "")
              + f" ({doc['what']}).\n")
    extra = [_n(doc.get(k, 0), one) for k, one in (("titles", "session title"), ("map_items", "stored map item"),
                                                    ("log_lines", "lcm.log line")) if doc.get(k)]
    if extra:
        out.write(f"{'Also removed' if done else 'Also'}: {', '.join(extra)}.\n")
    for ex in doc["examples"]:
        when = (ex["created_at"] or "")[:16].replace("T", " ")
        out.write(f"  {ex['uuid']}  {ex['role']}  {when}  session {ex['session_id'][:8]}  {ex['preview']}\n")
    if doc["messages"] > len(doc["examples"]):
        out.write(f"  ... {doc['messages'] - len(doc['examples'])} more\n")
    _hidden_note(doc, done)
    if doc.get("checked_by_text"):
        out.write(f"{_n(doc['checked_by_text'], 'message')} in damaged blocks (their original lines cannot be read)"
                  f" {'was' if doc['checked_by_text'] == 1 else 'were'} matched on their searchable text only:"
                  " lcm_doctor.py --fix restores the lines, then run this purge again to be sure.\n")
    for path in doc["checkpoint_files"]:
        out.write(f"Checkpoint file that may quote them (not deleted): {path}\n")
    if not done:
        out.write("Nothing was removed. Run the same command with --yes to remove it.\n")
        return
    if doc.get("unreadable"):
        out.write(f"{_n(doc['unreadable'], 'of them was', 'of them were')} in a damaged block whose lines could not be"
                  " read: removed all the same, with the whole damaged block"
                  + (f" ({_n(doc['unreadable_kept'], 'other message')} of that block, unreadable already, kept"
                     " their rows: lcm_doctor.py --fix restores their lines from a transcript or backup)"
                     if doc["unreadable_kept"] else "") + ".\n")
    if doc["summaries"] and not whole_sessions:
        # the hooks compact again at the next session's end; this does it now
        again = (lcm.base.shell.command_line("lcm_compact.py", "--session", doc["sessions"][0])
                 if len(doc["sessions"]) == 1 else lcm.base.shell.command_line("lcm_compact.py", "--all"))
        out.write(f"Summaries over the remaining messages are rebuilt at the next compaction; to rebuild them now: {again}\n")
    if not doc["wal_emptied"]:
        out.write("Note: another process has the vault open, so its write-ahead log still holds old pages;"
                  " run the same command again when it is idle.\n")
    for path in doc["backups"]:
        out.write(f"Backup that still holds the purged text (delete it yourself): {path}\n")
    if doc["backups_scrubbed"]:
        out.write(f"Rewrote {_n(len(doc['backups_scrubbed']), 'backup')} without it (lcm_backup.py --list).\n")
    for failed in doc["backups_failed"]:
        out.write(f"Backup not rewritten, it may still hold it: {failed['path']} ({failed['error']})\n")


def _hidden_note(doc: dict, done: bool) -> None:
    count = doc.get("hidden_only")
    if count:
        sys.stdout.write(f"{_n(count, 'more message')} {'holds' if count == 1 else 'hold'} it only in tool data a"
                         " person does not see (an edited file's earlier contents, a todo list) and"
                         f" {'stayed' if done else 'would stay'}: add --hidden to remove them too.\n")


def _main(argv):
    p = lcm.cli.parser(__doc__)
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--session", metavar="ID", help="every message of this session (id or unique prefix)")
    which.add_argument("--message", metavar="UUID", help="one message, by transcript uuid")
    which.add_argument("--match", metavar="TEXT", help="messages whose visible text contains TEXT")
    p.add_argument("--regex", action="store_true", help="--match TEXT is a Python regular expression")
    p.add_argument("--hidden", action="store_true",
                   help="with --match: also messages that hold TEXT only in tool data a person does not see")
    p.add_argument("--yes", action="store_true", help="really remove (without it: only show what would go)")
    args = p.parse_args(argv)
    if (args.regex or args.hidden) and args.match is None:
        p.error("--regex and --hidden go with --match")
    conn = lcm.vault.db.connect(args.db, create=False, readonly=not args.yes)  # a dry run only reads
    lcm.vault.grants.scope(conn).refuse("lcm_purge.py")
    sel = lcm.care.purge.select(conn, session=args.session, message=args.message, match=args.match, regex=args.regex,
                           hidden=args.hidden)
    criterion = {"match": args.match, "regex": args.regex, "hidden": args.hidden} if args.match else {}
    doc = lcm.care.backup.purge_everywhere(conn, sel, criterion) if args.yes else lcm.care.purge.plan(conn, sel)
    doc["removed"] = args.yes
    if args.json:
        lcm.cli.print_json(doc)
    else:
        _print(doc, doc["removed"], whole_sessions=args.session is not None)
    return 0


def main(argv: list[str] | None = None) -> int:
    return lcm.cli.run(_main, argv)


if __name__ == "__main__":
    sys.exit(main())

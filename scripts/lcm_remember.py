"""Pin a note for later sessions: a fact or decision that must outlive this one.

Usage:
  python3 scripts/lcm_remember.py TEXT... [--project DIR | --global] [--json]
  python3 scripts/lcm_remember.py --list [--project DIR | --global | --all] [--limit N] [--json]
  python3 scripts/lcm_remember.py --forget ID [--json]

A note belongs to the current project (the current session's, else $CLAUDE_PROJECT_DIR, else
the working directory) and every directory below it; --project DIR pins it elsewhere, --global
for every project. New and resumed sessions in that project start with its notes, newest first
(LCM_INJECT=0 turns that off); lcm_grep.py finds them as results of type "note". Pinning the
same text twice keeps one note. --list shows the notes that apply here (the project's and the
global ones); --all every note. --forget takes a note id or a unique prefix of it.

Examples:
  python3 "$LCM_SCRIPTS/lcm_remember.py" "releases go through make release-canary, never make release"
  python3 "$LCM_SCRIPTS/lcm_remember.py" --global "the user prefers answers without emoji"
  python3 "$LCM_SCRIPTS/lcm_remember.py" --list
  python3 "$LCM_SCRIPTS/lcm_remember.py" --list --all --json
  python3 "$LCM_SCRIPTS/lcm_remember.py" --forget note_3f2c1a9b
"""
from __future__ import annotations

import sys

import lcm.cli
import lcm.base.config
import lcm.vault.db
import lcm.vault.grants
import lcm.search.notes
import lcm.base.shell



def _where(note: dict) -> str:
    return f"project {note['project']}" if note["project"] else "every project"


def _main(argv):
    p = lcm.cli.parser(__doc__)
    p.add_argument("text", nargs="*", metavar="TEXT", help="the note (several words are joined with spaces)")
    action = p.add_mutually_exclusive_group()
    action.add_argument("--list", action="store_true", help="list the notes that apply here")
    action.add_argument("--forget", metavar="ID", help="delete the note with this id (or unique prefix)")
    scope = p.add_mutually_exclusive_group()
    scope.add_argument("--project", metavar="DIR", help="the project the note belongs to (default: the current one)")
    scope.add_argument("--global", dest="everywhere", action="store_true", help="a note for every project")
    scope.add_argument("--all", action="store_true", help="with --list: every note of every project")
    lcm.cli.add_limit_arg(p)
    args = p.parse_args(argv)
    if (args.list or args.forget) and args.text:
        p.error("TEXT pins a note: leave it out with --list or --forget")
    if not (args.list or args.forget or args.text):
        p.error("give the TEXT to remember, or --list, or --forget ID")
    if args.all and not args.list:
        p.error("--all goes with --list")
    if args.forget and (args.project or args.everywhere):
        p.error("--forget takes only the note's id")
    conn = lcm.vault.db.connect(args.db, create=not (args.list or args.forget), readonly=args.list)
    if not args.list:
        lcm.vault.grants.scope(conn).refuse("pinning or forgetting a note")
    if args.forget:
        note = lcm.search.notes.forget(conn, args.forget)
        if args.json:
            lcm.cli.print_json({"forgotten": note})
        else:
            print(f"Forgot {note['id']} ({_where(note)}): {lcm.search.notes.note_line(note)[2:]}")
        return 0
    if args.list:
        return _list(conn, args)
    project = None if args.everywhere else lcm.search.notes.normalize_project(args.project) if args.project \
        else lcm.search.notes.current_project(conn)
    note, created = lcm.search.notes.add(conn, " ".join(args.text), project, lcm.base.config.current_session_id())
    if args.json:
        lcm.cli.print_json({"note": note, "created": created})
    else:
        print(f"{'Pinned' if created else 'Already pinned'} {note['id']} for {_where(note)}.")
        print(f"New sessions {'there' if note['project'] else 'everywhere'} start with it;"
              f" {lcm.base.shell.command_line('lcm_remember.py', '--list')} shows the notes,"
              f" {lcm.base.shell.command_line('lcm_remember.py', '--forget', note['id'])} removes it.")
    return 0


def _list(conn, args) -> int:
    if args.all or args.everywhere:
        notes, total = lcm.search.notes.every(conn, global_only=args.everywhere, limit=args.limit)
        scope = "global notes" if args.everywhere else "notes of every project"
    else:
        project = lcm.search.notes.normalize_project(args.project) if args.project else lcm.search.notes.current_project(conn)
        notes = lcm.search.notes.for_project(conn, project, limit=lcm.cli.LIMIT_MAX + 1)
        total, notes = len(notes), notes[:args.limit]
        scope = f"notes for {project} (its own and global ones)"
    within = lcm.vault.grants.scope(conn)
    if within.limited:  # a grant covers the notes pinned in its sessions, when it names no narrower ids
        kept = [n for n in notes if not within.nodes and within.allows_session(n["session_id"])]
        notes, total = kept, total - (len(notes) - len(kept))
    if args.json:
        lcm.cli.print_json({"notes": notes, "count": len(notes), "total": total, "has_more": total > len(notes)})
        return 0
    if not notes:
        print(f"No {scope}." + ("" if args.all else " (--all lists every project's)"))
        return 0
    print(f"{len(notes)} of {total} {scope}, newest first:")
    for note in notes:
        print(lcm.search.notes.note_line(note) + (f" [{note['project']}]" if args.all and note["project"] else ""))
    if total > len(notes):
        flags = ["--all"] if args.all else ["--global"] if args.everywhere else \
            ["--project", args.project] if args.project else []
        more = lcm.base.shell.command_line("lcm_remember.py", "--list", *flags, "--limit", str(min(total, lcm.cli.LIMIT_MAX)))
        print(f"... {total - len(notes)} more: {more}")
    return 0


def main(argv: list[str] | None = None) -> int:
    return lcm.cli.run(_main, argv)


if __name__ == "__main__":
    lcm.cli.freeze_imports()
    sys.exit(main())

"""List the sessions the vault holds, newest first, or show one of them. Writes nothing.

Usage:
  python3 scripts/lcm_sessions.py [--project DIR] [--since WHEN] [--limit N] [--json]
  python3 scripts/lcm_sessions.py ID [--json]

A list line: short id, first and last activity, messages, summaries, "checkpoint" when one
was written, project, title. The title is the transcript's own (Claude Code's ai-title or a
custom /rename), else the first prompt a person typed. ID (a full session id or a unique
prefix, 8 characters are printed) shows one session: title, time range, files it edited and
created, commands it ran, its summaries' tree and its digest (what was done, decided, found and
what failed; written when the session ends). WHEN is an ISO date/time or an age: 3h, 2d, 1w.

Examples:
  python3 "$LCM_SCRIPTS/lcm_sessions.py"
  python3 "$LCM_SCRIPTS/lcm_sessions.py" --project . --since 1w
  python3 "$LCM_SCRIPTS/lcm_sessions.py" --limit 200 --json
  python3 "$LCM_SCRIPTS/lcm_sessions.py" "$LCM_SESSION_ID"
"""
from __future__ import annotations

import sys

import lcm.cli
import lcm.vault.db
import lcm.vault.resolve
import lcm.vault.grants
import lcm.search.engine
import lcm.readers.sessions
import lcm.base.shell
import lcm.search.result_types
import lcm.base.text
from lcm.readers.sessions import plural

FILES_SHOWN = 15
COMMANDS_SHOWN = 10
TREE_LINES = 30


def _when(value: str | None) -> str:
    return (value or "?")[:16].replace("T", " ")


def _print_list(sessions: list[dict], total: int, args) -> None:
    if not sessions:
        print("No sessions" + (" match" if args.project or args.since else lcm.base.shell.runnable(" in the vault yet (run lcm_ingest.py --all)")))
        return
    for s in sessions:
        extra = (", checkpoint" if s["has_checkpoint"] else "") + (", only in the vault" if s["only_in_vault"] else "")
        print(f"{s['id'][:8]}  {_when(s['first_at'])} .. {_when(s['last_at'])}  {plural(s['messages'], 'msg')},"
              f" {plural(s['summaries'], 'summary').replace('ys', 'ies')}{extra}  {s['project'] or '?'}  {s['title']}")
    gone = args.only_in_vault
    if gone:
        print(f"{gone} of {total} sessions exist only in the vault now ({lcm.readers.sessions.CLEANUP_NOTE})")
    if total > len(sessions):
        flags = [w for k, v in (("project", args.project), ("since", args.since)) if v for w in (f"--{k}", v)]
        more = lcm.base.shell.command_line("lcm_sessions.py", *flags, "--limit", str(min(total, lcm.cli.LIMIT_MAX)))
        print(f"... {total - len(sessions)} more: {more}")
    print(f"Next: {lcm.base.shell.command_line('lcm_sessions.py', lcm.base.shell.Positional(sessions[0]['id'][:8]))}")


def _tree_lines(nodes: list[dict], indent: int = 0) -> list[str]:
    lines = []
    for n in nodes:
        lines.append(f"{'  ' * indent}- {n['id']} ({n['kind']}, depth {n['depth']}, {n['messages']} messages,"
                     f" {_when(n['earliest_at'])} .. {_when(n['latest_at'])}): {n['head']}")
        lines += _tree_lines(n["children"], indent + 1)
    return lines


def _capped(items: list[str], cap: int, what: str) -> list[str]:
    """The newest `cap` items, with a line saying how many earlier ones were left out."""
    if len(items) <= cap:
        return items
    return [f"  ... {len(items) - cap} earlier {what}"] + items[-cap:]


def _print_one(s: dict) -> None:
    print(f"{s['title']}")
    print(f"Session {s['id']}  project {s['project'] or '?'}")
    print(f"{_when(s['first_at'])} .. {_when(s['last_at'])}: {s['messages']} messages, {s['summaries']} summaries,"
          f" {'a checkpoint' if s['has_checkpoint'] else 'no checkpoint'}"
          + (f", model {s['model']}" if s["model"] else ""))
    print(f"Files edited ({len(s['files_edited'])}):")
    print("\n".join(_capped([f"  {f}" for f in s["files_edited"]], FILES_SHOWN, "files")) or "  none")
    if s["files_created"]:
        print(f"Files created ({len(s['files_created'])}):")
        print("\n".join(_capped([f"  {f}" for f in s["files_created"]], FILES_SHOWN, "files")))
    print(f"Commands ({s['command_count']}, {s['failed_command_count']} failed; newest last):")
    commands = [f"  {'FAILED ' if c['failed'] else ''}{lcm.base.text.one_line(c['command'], 160)}" for c in s["commands"]]
    print("\n".join(_capped(commands, COMMANDS_SHOWN, "commands")) or "  none")
    tree = _tree_lines(s["summary_tree"])
    print(f"Summaries ({s['summaries']}):")
    print("\n".join(f"  {line}" for line in tree[:TREE_LINES]) or "  none yet (nothing compacted)")
    if len(tree) > TREE_LINES or s["summary_tree_truncated"]:
        print(f"  ... more: {lcm.base.shell.command_line('lcm_describe.py', '--session', s['id'])}")
    digest = s["digest"]
    if digest:
        print(f"Digest ({digest['level']}, written {_when(digest['created_at'])}):")
        print("\n".join(f"  {line}" if line else "" for line in digest["text"].splitlines()[1:]).strip("\n"))
    else:
        print("Digest: none yet (written when the session ends, or: "
              + lcm.base.shell.command_line("lcm_compact.py", "--session", s["id"], "--digest") + ")")
    print("Next: " + lcm.base.shell.command_line("lcm_export.py", "--session", s["id"][:8], "--format", "markdown"))
    print("      " + lcm.base.shell.command_line("lcm_describe.py", "--session", s["id"]))


def _main(argv):
    p = lcm.cli.parser(__doc__)
    p.add_argument("session", nargs="?", metavar="ID", help="show this session (id or unique prefix)")
    p.add_argument("--project", metavar="DIR", help="only sessions whose cwd is DIR or below it")
    p.add_argument("--since", metavar="WHEN", help="only sessions active since WHEN (ISO date/time or 3h 2d 1w)")
    lcm.cli.add_limit_arg(p)
    args = p.parse_args(argv)
    if args.session and (args.project or args.since):
        p.error("ID shows one session: --project and --since filter the list")
    conn = lcm.vault.db.connect(args.db, create=False, readonly=True)
    if args.session:
        view = lcm.readers.sessions.session_view(conn, lcm.vault.resolve.session(conn, args.session, whole=True))
        if args.json:
            lcm.cli.print_json(view)
        else:
            _print_one(view)
        return 0
    since = lcm.search.result_types.parse_when(args.since, "--since")
    within = lcm.vault.grants.scope(conn).sessions
    sessions, total = lcm.readers.sessions.list_sessions(conn, project=args.project, since=since, limit=args.limit,
                                                 within=within)
    args.only_in_vault = lcm.readers.sessions.only_in_vault(conn) if within is None and not (args.project or args.since) else 0
    if args.json:
        lcm.cli.print_json({"sessions": sessions, "count": len(sessions), "total": total,
                           "has_more": total > len(sessions), "only_in_vault": args.only_in_vault})
    else:
        _print_list(sessions, total, args)
    return 0


def main(argv: list[str] | None = None) -> int:
    return lcm.cli.run(_main, argv)


if __name__ == "__main__":
    lcm.cli.freeze_imports()
    sys.exit(main())

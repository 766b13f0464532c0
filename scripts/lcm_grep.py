"""Search every stored message and summary, and the pinned notes; each message hit names the
summary that covers it.

Usage:
  python3 scripts/lcm_grep.py QUERY [--mode auto|full_text|regex] [--scope messages|summaries|notes|both]
                              [--session ID | --project DIR | --all-sessions] [--since WHEN]
                              [--before WHEN] [--role ROLE] [--limit N] [--offset N] [--json]

Modes:
  auto       natural language (default): ranked with BM25, "quoted phrases" kept, messages with
             every term first, partial matches still found; any text is safe to pass
  full_text  FTS5 syntax for experts (AND, OR, NOT, NEAR(), prefix*), errors explained
  regex      Python regular expression over the stored text, newest first, time-bounded

Scope: by default the current project (the cwd of $LCM_SESSION_ID's session) when LCM_SESSION_ID
is set, else everything. WHEN is an ISO date/time or a relative age: 30m, 3h, 2d, 1w. Notes
pinned with lcm_remember.py that match are listed first (type "note"; in a project scope, the
notes that apply there and the global ones).

Examples:
  python3 "$LCM_SCRIPTS/lcm_grep.py" "database migration"
  python3 "$LCM_SCRIPTS/lcm_grep.py" "why did the deploy fail" --since 2d
  python3 "$LCM_SCRIPTS/lcm_grep.py" 'timeout NEAR(retry backoff)' --mode full_text --all-sessions
  python3 "$LCM_SCRIPTS/lcm_grep.py" 'sum_[0-9a-f]{16}' --mode regex --scope summaries
"""
from __future__ import annotations

import re
import sys

import lcm.db
from lcm.search import search

# ---------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------

def _shell_quote(text: str) -> str:
    return text if re.fullmatch(r"[\w@%+=:,./-]+", text) and not text.startswith("-") else (
        "'" + text.replace("'", "'\\''") + "'")


def _print_text(doc, argv_tail) -> None:
    out = sys.stdout
    if not doc["results"]:
        out.write(f"No matches for {doc['query']!r}.\n")
    for i, r in enumerate(doc["results"], 1):
        when = (r["created_at"] or "")[:16].replace("T", " ")
        if r["type"] == "message":
            head = f"{r['id']}  {r['role']}  {when}  session {r['session_id'][:8]}"
            if r["covering_summary_id"]:
                head += f"  in {r['covering_summary_id']}"
        elif r["type"] == "note":
            head = f"{r['id']}  note  {when}  {r['project'] or 'all projects'}"
        else:
            head = f"{r['id']}  summary  {when}  session {r['session_id'][:8]}"
        out.write(f"[{i}] {head}\n    {r['snippet']}\n")
    if doc["has_more"]:
        nxt = doc.get("next_offset")
        out.write(f"... more: lcm_grep.py {_shell_quote(doc['query'])}{argv_tail} --offset {nxt}\n")
    first = next((r for r in doc["results"] if r["type"] != "note"), None)
    if first is None and doc["results"]:
        out.write("Next: lcm_remember.py --list --all\n")
    elif first is not None:
        target = first["covering_summary_id"] if first["type"] == "message" and first["covering_summary_id"] else first["id"]
        out.write(f"Next: lcm_describe.py {first['id']}  |  lcm_expand.py {target}\n")


def _main(argv):
    p = lcm.db.parser(__doc__)
    p.add_argument("query", metavar="QUERY")
    p.add_argument("--mode", choices=["auto", "full_text", "regex"], default="auto")
    p.add_argument("--scope", choices=["messages", "summaries", "notes", "both"], default="both",
                   help="what to search (default both: messages, summaries and notes)")
    lcm.db.add_session_arg(p)
    p.add_argument("--project", metavar="DIR", help="only sessions whose cwd is DIR (or below it)")
    p.add_argument("--all-sessions", action="store_true", help="search every session of every project")
    p.add_argument("--since", metavar="WHEN", help="ISO date/time or age: 30m 3h 2d 1w")
    p.add_argument("--before", metavar="WHEN", help="ISO date/time or age")
    p.add_argument("--role", choices=["user", "assistant", "system"], help="only messages of this role")
    lcm.db.add_limit_arg(p)
    p.add_argument("--offset", type=int, default=0, metavar="N", help="skip the first N results")
    args = p.parse_args(argv)
    conn = lcm.db.connect(args.db, create=False, readonly=True)
    doc = search(conn, args.query, mode=args.mode, scope=args.scope, session=args.session,
                 project=args.project, all_sessions=args.all_sessions, since=args.since,
                 before=args.before, role=args.role, limit=args.limit, offset=args.offset)
    if doc.pop("widened", False):
        sys.stderr.write("Note: nothing in this project; these results come from all projects\n")
    if doc.pop("stopped_early", False):
        sys.stderr.write("Note: the scan hit its time limit; results are the newest "
                         "matches only (narrow with --session, --since or --scope)\n")
    if args.json:
        lcm.db.print_json(doc)
        return 0
    tail = "".join(f" --{k.replace('_', '-')} {_shell_quote(str(v))}" for k, v in
                   (("mode", args.mode if args.mode != "auto" else None), ("scope", args.scope if args.scope != "both" else None),
                    ("session", args.session), ("project", args.project), ("since", args.since),
                    ("before", args.before), ("role", args.role),
                    ("limit", args.limit if args.limit != 20 else None)) if v)
    tail += " --all-sessions" if args.all_sessions else ""
    doc["next_offset"] = args.offset + args.limit
    _print_text(doc, tail)
    return 0


def main(argv: list[str] | None = None) -> int:
    return lcm.db.run(_main, argv)


if __name__ == "__main__":
    lcm.db.freeze_imports()
    sys.exit(main())

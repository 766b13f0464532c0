"""Search every stored message and summary, and the pinned notes; each message hit names the
summary that covers it.

Usage:
  python3 scripts/lcm_grep.py QUERY [--mode auto|full_text|regex] [--scope messages|summaries|notes|both]
                              [--session ID | --project DIR | --all-sessions] [--since WHEN]
                              [--before WHEN] [--role ROLE] [--typed] [--limit N] [--offset N] [--json]
  python3 scripts/lcm_grep.py [OPTIONS] -- -QUERY    (a query that starts with "-")

Modes:
  auto       natural language (default): ranked with BM25, "quoted phrases" kept, messages with
             every term first, partial matches still found, and the turns next to the best hits
             (an answer rarely repeats the question's words); any text is safe to pass
  full_text  FTS5 syntax for experts (AND, OR, NOT, NEAR(), prefix*), errors explained
  regex      Python regular expression over the stored text, newest first, time-bounded

Scope: by default the current project (the cwd of $LCM_SESSION_ID's session) when LCM_SESSION_ID
is set, else everything; the first line of the output names it, and a line counts stronger
matches in other projects. --session takes an id or a unique prefix (8 characters are printed).
Under an expansion grant (LCM_GRANT) only the grant's sessions are searched. --typed keeps what
the person typed (tool results are user-role entries too). WHEN is an ISO date/time or a
relative age: 30m, 3h, 2d, 1w. --limit is at most 200. Notes pinned with lcm_remember.py that
match are listed first (type "note"; in a project scope, the notes that apply there and the
global ones).

Examples:
  python3 "$LCM_SCRIPTS/lcm_grep.py" "database migration"
  python3 "$LCM_SCRIPTS/lcm_grep.py" "why did the deploy fail" --since 2d
  python3 "$LCM_SCRIPTS/lcm_grep.py" "which port did I ask for" --typed --all-sessions
  python3 "$LCM_SCRIPTS/lcm_grep.py" 'timeout NEAR(retry backoff)' --mode full_text --all-sessions
  python3 "$LCM_SCRIPTS/lcm_grep.py" 'sum_[0-9a-f]{16}' --mode regex --scope summaries
  python3 "$LCM_SCRIPTS/lcm_grep.py" --all-sessions -- "-rf node_modules"
"""
from __future__ import annotations

import os
import sys

import lcm.cli
import lcm.db
import lcm.errors
import lcm.mask
from lcm.search import search

# ---------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------

def _scope_line(doc, args) -> str:
    scope = doc["scope"]
    if scope["kind"] == "session":
        ids = scope.get("session_ids")
        where = (f"session {scope['session_id'][:8]}" if not ids else
                 f"the {len(ids)} session(s) of expansion grant {args.grant}")
    elif scope["kind"] == "project":
        where = f"project {scope['project']}" + (" (the current one)" if scope.get("default") else "")
    elif scope.get("widened_from"):
        where = f"all projects (nothing in {scope['widened_from']})"
    else:
        where = "all projects"
    return f"Searched {where}.\n"


def _print_text(doc, args, options) -> None:
    out = sys.stdout
    out.write(_scope_line(doc, args))
    if not doc["results"]:
        out.write(f"No matches for {doc['query']!r}.\n")
    for i, r in enumerate(doc["results"], 1):
        when = (r["created_at"] or "")[:16].replace("T", " ")
        if r["type"] == "message":
            head = f"{r['id']}  {r['role']}  {when}  session {r['session_id'][:8]}"
            if r["covering_summary_id"]:
                head += f"  in {r['covering_summary_id']}"
            if r["next_to"]:
                head += f"  (next to {r['next_to'][:8]})"
        elif r["type"] == "note":
            head = f"{r['id']}  note  {when}  {r['project'] or 'all projects'}"
        else:
            head = f"{r['id']}  {r['kind']} summary (depth {r['depth']})  {when}  session {r['session_id'][:8]}"
        out.write(f"[{i}] {head}\n    {r['snippet']}\n")
    query = lcm.cli.Positional(doc["query"])
    if doc["has_more"]:
        out.write("... more: " + lcm.cli.command_line("lcm_grep.py", query, *options, "--offset",
                                                     str(args.offset + args.limit)) + "\n")
    elsewhere = doc["scope"].get("stronger_elsewhere")
    if elsewhere:
        out.write(f"{elsewhere} stronger match(es) in other projects: "
                  + lcm.cli.command_line("lcm_grep.py", query, *options, "--all-sessions") + "\n")
    first = next((r for r in doc["results"] if r["type"] != "note"), None)
    if first is None and doc["results"]:
        out.write("Next: " + lcm.cli.command_line("lcm_remember.py", "--list", "--all") + "\n")
    elif first is not None:
        target = first["covering_summary_id"] if first["type"] == "message" and first["covering_summary_id"] else first["id"]
        out.write("Next: " + lcm.cli.command_line("lcm_describe.py", lcm.cli.Positional(first["id"])) + "\n")
        out.write("      " + lcm.cli.command_line("lcm_expand.py", lcm.cli.Positional(target)) + "\n")


def _grant_sessions(conn, grant_id: str) -> list[str]:
    """The sessions an expansion grant (LCM_GRANT, set for lcm's sub-agents) lets this search."""
    import json

    import lcm.grants
    return json.loads(lcm.grants.load_grant(conn, grant_id)["session_ids"])


def _in_grant(conn, grant_id: str, node_id: str) -> bool:
    import lcm.grants
    try:
        lcm.grants.check_scope(conn, grant_id, node_id)
        return True
    except lcm.errors.LcmError:
        return False


def _main(argv):
    p = lcm.cli.parser(__doc__)
    p.add_argument("query", metavar="QUERY", help="what to look for (one starting with '-' goes after --)")
    p.add_argument("--mode", choices=["auto", "full_text", "regex"], default="auto")
    p.add_argument("--scope", choices=["messages", "summaries", "notes", "both"], default="both",
                   help="what to search (default both: messages, summaries and notes)")
    lcm.cli.add_session_arg(p)
    p.add_argument("--project", metavar="DIR", help="only sessions whose cwd is DIR (or below it)")
    p.add_argument("--all-sessions", action="store_true", help="search every session of every project")
    p.add_argument("--since", metavar="WHEN", help="ISO date/time or age: 30m 3h 2d 1w")
    p.add_argument("--before", metavar="WHEN", help="ISO date/time or age")
    p.add_argument("--role", choices=["user", "assistant", "system"], help="only messages of this role")
    p.add_argument("--typed", action="store_true",
                   help="only what the person typed (not tool results, which are user-role entries too)")
    lcm.cli.add_limit_arg(p)
    p.add_argument("--offset", type=lcm.cli.int_arg(), default=0, metavar="N", help="skip the first N results")
    args = p.parse_args(argv)
    conn = lcm.db.connect(args.db, create=False, readonly=True)
    args.grant = os.environ.get("LCM_GRANT")
    doc = search(conn, args.query, mode=args.mode, scope=args.scope, session=args.session,
                 project=args.project, all_sessions=args.all_sessions, since=args.since,
                 before=args.before, role=args.role, typed=args.typed, limit=args.limit, offset=args.offset,
                 sessions=_grant_sessions(conn, args.grant) if args.grant else None)
    if args.grant:  # a grant naming summaries covers only what lies below them
        doc["results"] = [r for r in doc["results"] if _in_grant(conn, args.grant, r["id"])]
        doc["count"] = len(doc["results"])
    doc["query"] = lcm.mask.mask(doc["query"])  # echoed back: a secret searched for stays masked
    if doc.pop("widened", False):
        sys.stderr.write("Note: nothing in this project; these results come from all projects\n")
    if doc.pop("stopped_early", False):
        sys.stderr.write("Note: the scan hit its time limit; results are the newest "
                         "matches only (narrow with --session, --since or --scope)\n")
    if args.json:
        lcm.cli.print_json(doc)
        return 0
    options = [word for k, v in (("mode", args.mode if args.mode != "auto" else None),
                                 ("scope", args.scope if args.scope != "both" else None),
                                 ("session", args.session), ("project", args.project), ("since", args.since),
                                 ("before", args.before), ("role", args.role),
                                 ("limit", args.limit if args.limit != 20 else None)) if v
               for word in (f"--{k}", str(v))]
    options += ["--typed"] if args.typed else []
    options += ["--all-sessions"] if args.all_sessions else []
    _print_text(doc, args, options)
    return 0


def main(argv: list[str] | None = None) -> int:
    return lcm.cli.run(_main, argv)


if __name__ == "__main__":
    lcm.cli.freeze_imports()
    sys.exit(main())

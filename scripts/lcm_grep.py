"""Search everything lcm keeps: messages, summaries, pinned notes, session titles, checkpoints,
session digests and the text of externalised large files; each message hit names the summary
that covers it.

Usage:
  python3 scripts/lcm_grep.py QUERY [--mode auto|full_text|regex] [--type TYPE[,TYPE]]
                              [--session ID | --project DIR | --all-sessions] [--since WHEN]
                              [--before WHEN] [--role ROLE] [--typed] [--context N] [--limit N]
                              [--offset N] [--json]
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
Under an expansion grant (LCM_GRANT) only what the grant covers is searched. --typed keeps what
the person typed (tool results are user-role entries too). WHEN is an ISO date/time or a
relative age: 30m, 3h, 2d, 1w. --limit is at most 200. Notes pinned with lcm_remember.py that
match are listed first (type "note"; in a project scope, the notes that apply there and the
global ones). Types: message, summary, note, title, checkpoint, digest, file (--scope
messages|summaries|notes is the older spelling of one type). Chinese, Japanese and Korean text
is found by any part of it, and so are Latin words written inside it.

--context N prints the N conversational turns (prompts and replies) before and after each
message hit, from its own session, in conversation order (--json: a `context` of each hit).

Examples:
  python3 "$LCM_SCRIPTS/lcm_grep.py" "database migration"
  python3 "$LCM_SCRIPTS/lcm_grep.py" "flaky auth test" --context 2
  python3 "$LCM_SCRIPTS/lcm_grep.py" "why did the deploy fail" --since 2d
  python3 "$LCM_SCRIPTS/lcm_grep.py" "which port did I ask for" --typed --all-sessions
  python3 "$LCM_SCRIPTS/lcm_grep.py" 'timeout NEAR(retry backoff)' --mode full_text --all-sessions
  python3 "$LCM_SCRIPTS/lcm_grep.py" 'sum_[0-9a-f]{16}' --mode regex --type summary
  python3 "$LCM_SCRIPTS/lcm_grep.py" "parse_config" --type file,digest
  python3 "$LCM_SCRIPTS/lcm_grep.py" --all-sessions -- "-rf node_modules"
"""
from __future__ import annotations

import sys

import lcm.cli
import lcm.vault.db
import lcm.vault.grants
import lcm.base.mask
import lcm.vault.resolve
import lcm.search.conversation
import lcm.search.output
import lcm.search.result_types
from lcm.search.engine import search
from lcm.search.query import Query

def _main(argv):
    p = lcm.cli.parser(__doc__)
    p.add_argument("query", metavar="QUERY", help="what to look for (one starting with '-' goes after --)")
    p.add_argument("--mode", choices=["auto", "full_text", "regex"], default="auto")
    p.add_argument("--scope", choices=["messages", "summaries", "notes", "both"], default="both",
                   help="messages, summaries or notes only (default: every type)")
    p.add_argument("--type", metavar="TYPE[,TYPE]", type=lambda v: [t.strip() for t in v.split(",") if t.strip()],
                   help="only these result types: " + ", ".join(lcm.search.result_types.TYPES))
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
    p.add_argument("--context", type=lcm.cli.int_arg(0, lcm.search.conversation.CONTEXT_MAX), default=0, metavar="N",
                   help="show the N turns before and after each message hit, in its session"
                        f" (at most {lcm.search.conversation.CONTEXT_MAX})")
    args = p.parse_args(argv)
    conn = lcm.vault.db.connect(args.db, create=False, readonly=True)
    within = lcm.vault.grants.scope(conn)
    args.grant = within.grant_id
    if args.session and within.limited:
        within.check_session(lcm.vault.resolve.by_id(conn, args.session))
    # under a grant the scope is part of the query: a page holds only what the grant covers
    doc = search(conn, Query(args.query, mode=args.mode, scope=args.scope, session=args.session,
                             project=args.project, all_sessions=args.all_sessions, since=args.since,
                             before=args.before, role=args.role, typed=args.typed, limit=args.limit,
                             offset=args.offset, types=args.type, sessions=within.sessions,
                             within=within if within.limited else None))
    if args.context:
        lcm.search.conversation.add_context(conn, doc, args.context)
    doc["query"] = lcm.base.mask.mask(doc["query"])  # echoed back: a secret searched for stays masked
    if args.project:  # and so is one pasted as --project DIR (scope line, JSON, the commands printed)
        args.project = lcm.base.mask.mask(args.project)
        doc["scope"] = lcm.base.mask.mask_json(doc["scope"])
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
                                 ("type", ",".join(args.type or []) or None),
                                 ("session", args.session), ("project", args.project), ("since", args.since),
                                 ("before", args.before), ("role", args.role),
                                 ("limit", args.limit if args.limit != 20 else None),
                                 ("context", args.context or None)) if v
               for word in (f"--{k}", str(v))]
    options += ["--typed"] if args.typed else []
    options += ["--all-sessions"] if args.all_sessions else []
    sys.stdout.write(lcm.search.output.report(doc, options, args.offset + args.limit, args.grant))
    return 0


def main(argv: list[str] | None = None) -> int:
    return lcm.cli.run(_main, argv)


if __name__ == "__main__":
    lcm.cli.freeze_imports()
    lcm.cli.exit_now(main())

"""Answer a question from the exact messages behind summaries, read under a bounded expansion grant.

Finds candidates (lcm_grep for --query, or the given ids), opens a grant scoped to them
(cap --max-tokens, default $LCM_MAX_EXPAND_TOKENS = 4000; expires in 5 minutes) and ranks the
messages under them by the question, as lcm_grep ranks. Each message shows the lines that
answer (a failure's key lines first: FAILED, the exception, the assert) with their
neighbours; the cap governs the whole answer, and text past it is never read. With a model,
those excerpts are its first sources (three quarters of the cap) and it answers citing ids,
reading further with its own lcm_expand calls; --max-tokens also caps its answer (1,500 tokens
when not given), and a longer one is cut with a marker. The grant is revoked when the command ends.
Backends (LCM_LLM): anthropic = a bounded tool loop (describe/expand/grep under the grant);
claude = a headless `claude -p` allowed only lcm_expand/describe/grep; none = the gathered
excerpts, ranked and labelled as excerpts (never an invented answer).
The model is the session's main-thread model (LCM_SUMMARY_MODEL overrides it).
For the main agent; inside a sub-agent use lcm_expand.py directly (the delegation guard).

Usage:
  python3 scripts/lcm_expand_query.py --prompt QUESTION (--query TEXT | --summary-ids ID...)
      [--max-tokens N] [--session ID | --all-sessions] [--json]
      [--delegated-scope TEXT --kept-work TEXT]

Examples:
  python3 "$LCM_SCRIPTS/lcm_expand_query.py" --prompt "Which retry delay did we settle on?" --query "retry delay"
  python3 "$LCM_SCRIPTS/lcm_expand_query.py" --prompt "What failed in the migration?" --summary-ids sum_0123456789abcdef
"""
from __future__ import annotations

import sys

import lcm.readers.answer
import lcm.cli
import lcm.base.config
import lcm.vault.db
import lcm.vault.grants
import lcm.base.guard


def _main(argv):
    p = lcm.cli.parser(__doc__)
    p.add_argument("--prompt", required=True, metavar="QUESTION", help="the question to answer")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--query", metavar="TEXT", help="find candidates with lcm_grep")
    what.add_argument("--summary-ids", nargs="+", metavar="ID", help="expand these summary (or message) ids")
    p.add_argument("--max-tokens", type=lcm.cli.int_arg(1), metavar="N",
                   help="caps the answer: the source text it may read (default $LCM_MAX_EXPAND_TOKENS, 4000)"
                        " and a model's answer itself (default 1500)")
    lcm.cli.add_session_arg(p)
    p.add_argument("--all-sessions", action="store_true", help="search every session, not only this project's")
    lcm.base.guard.add_guard_args(p)
    args = p.parse_args(argv)
    lcm.base.guard.check_delegation("lcm_expand_query.py", args.delegated_scope, args.kept_work,
                               instead="use lcm_expand.py ID (with lcm_grep.py / lcm_describe.py to find ids)")
    cap = args.max_tokens if args.max_tokens is not None else lcm.base.config.get("LCM_MAX_EXPAND_TOKENS")
    if cap <= 0:
        p.error("--max-tokens must be a positive integer")
    conn = lcm.vault.db.connect(args.db, create=False)
    # a new grant from inside one would reach past it
    lcm.vault.grants.scope(conn).refuse("lcm_expand_query.py", "use lcm_expand.py ID for the ids the grant names")
    result = lcm.readers.answer.answer(conn, args.prompt, query=args.query, ids=args.summary_ids, session=args.session,
                               all_sessions=args.all_sessions, cap=cap, db_path=lcm.base.config.db_path(args.db).resolve(),
                               warn=lambda text: sys.stderr.write(f"Warning: {text}\n"), answer_tokens=args.max_tokens)
    if args.json:
        lcm.cli.print_json(result)
        return 0
    print(result["answer"])
    excerpts = result["backend"] == "none"
    if not excerpts:
        bad = result["unknown_cited_ids"]
        print(f"\nCited: {', '.join(result['cited_ids']) or 'nothing'}"
              + (f" (ignored unknown ids: {', '.join(bad)})" if bad else ""))
    more = ""
    if result["truncated"]:
        more = ("; cut at the cap (raise --max-tokens to read more)" if excerpts else
                "; the model was shown excerpts of the matching messages and could expand the rest")
    read = f"{len(result['excerpt_ids'])} excerpts of {result['messages_considered']} messages, " if excerpts else ""
    print(f"\nExpanded {result['expanded_summary_count']} summaries: {read}"
          f"{result['total_source_tokens']} source tokens{more}.")
    return 0


def main(argv: list[str] | None = None) -> int:
    return lcm.cli.run(_main, argv)


if __name__ == "__main__":
    lcm.cli.freeze_imports()
    sys.exit(main())

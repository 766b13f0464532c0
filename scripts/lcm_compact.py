"""Compact a session: summarise old messages into a DAG of summaries (nothing is deleted).

Leaf pass: the oldest run of raw messages outside the fresh tail (LCM_FRESH_TAIL_COUNT), at most
LCM_LEAF_CHUNK_TOKENS, never splitting a tool call from its result, becomes one leaf summary.
Condensed pass: at the shallowest depth with enough adjacent summaries without a parent
(LCM_LEAF_MIN_FANOUT leaves at depth 0, LCM_CONDENSED_MIN_FANOUT above), the oldest that many
become one summary a level up; a run without --full condenses no deeper than
LCM_INCREMENTAL_MAX_DEPTH (0: leaves only; -1, the default: no limit). Every node escalates until it is shorter than its
source: 1 = details kept at the target size, 2 = bullets at half the target, 3 = the source cut
to 512 tokens; with LCM_LLM=none the first level is a deterministic extractive summary.
A model that fails (unreachable, refused key, overloaded) never fails the run: its summaries are
written extractively at level "fallback" (one failed call per run, not one per chunk), and a
later run with a working model upgrades them in place, keeping their ids (the text replaced
stays in summary_versions).

Usage:
  python3 scripts/lcm_compact.py [--session ID | --all] [--full | --until-under TOKENS | --upgrade] [--dry-run] [--json]
  python3 scripts/lcm_compact.py --pack [--all] [--vacuum] [--time-budget SECONDS] [--json]

Modes: incremental (default: one leaf pass when the raw tokens outside the fresh tail exceed
LCM_LEAF_CHUNK_TOKENS, then condensation), --full (until nothing is eligible), --until-under
(until the active context is under TOKENS), --upgrade (rewrite extractive and fallback summaries
with the model, keeping their ids), --dry-run (say what would happen, write nothing). --all and
--upgrade show their progress on stderr: a bar on a terminal (with tqdm installed), else a line
per session. --digest
then writes each session's digest (what was done, decided, found and what failed; the SessionEnd
hook asks for it), by the model when one answers, else extractive.

--pack compresses stored lines into blocks (byte for byte back), online and resumably; without
--all a file still being written waits until idle; --vacuum returns freed space to the disk.

Examples:
  python3 "$LCM_SCRIPTS/lcm_compact.py" --json
  python3 "$LCM_SCRIPTS/lcm_compact.py" --session 7acd37a8-2745-4b58-a8a9-46164b22ad9e --full
  LCM_LLM=none python3 "$LCM_SCRIPTS/lcm_compact.py" --all --full --json
  python3 "$LCM_SCRIPTS/lcm_compact.py" --until-under 40000 --dry-run
  python3 "$LCM_SCRIPTS/lcm_compact.py" --pack --all --vacuum
"""
from __future__ import annotations

import sys
import time

import lcm.capture.tokens
import lcm.cli
import lcm.base.config
import lcm.vault.db
import lcm.vault.grants
import lcm.summary.compact
import lcm.summary.digest
import lcm.base.llm
from lcm.base.errors import LcmError


def _main(argv):
    p = lcm.cli.parser(__doc__)
    lcm.cli.add_session_arg(p)
    p.add_argument("--all", action="store_true", help="compact every session in the vault")
    how = p.add_mutually_exclusive_group()
    how.add_argument("--full", action="store_true", help="sweep until nothing is eligible")
    how.add_argument("--until-under", type=lcm.cli.int_arg(1), metavar="TOKENS", help="stop once the active context is under TOKENS")
    how.add_argument("--upgrade", action="store_true", help="rewrite extractive summaries with the model, in place")
    p.add_argument("--dry-run", action="store_true", help="report what would be summarised; write nothing")
    p.add_argument("--time-budget", type=lcm.cli.seconds_arg, metavar="SECONDS", help="start no new summary after this long")
    how.add_argument("--pack", action="store_true", help="compress stored lines into blocks (with --all: every line now)")
    p.add_argument("--vacuum", action="store_true", help="with --pack: give the freed space back to the disk")
    p.add_argument("--digest", action="store_true",
                   help="then write each session's digest (lcm/summary/digest.py; the SessionEnd hook passes it)")
    args = p.parse_args(argv)
    if args.vacuum and not args.pack:
        p.error("--vacuum goes with --pack")
    if args.pack:
        return _pack(args)
    lcm.base.config.validate_config()
    # a dry run writes in a transaction it rolls back, so it opens for writing, but makes no vault
    conn = lcm.vault.db.connect(args.db, create=not args.dry_run)
    lcm.vault.grants.scope(conn).refuse("lcm_compact.py (it writes summaries)")
    sessions = lcm.summary.compact.sessions_to_compact(conn, args.session, every=args.all)
    mode = "full" if args.full else "upgrade" if args.upgrade else "incremental"
    results, calls_left = [], lcm.base.config.get("LCM_MAX_SUMMARY_CALLS")
    breaker = lcm.base.llm.Breaker()  # one failing backend is found once per run, not once per session
    # the long runs (every session, or model rewrites) say how far they are, on stderr
    progress = lcm.summary.compact.Progress(len(sessions)) if args.all or args.upgrade else None
    try:
        for session in sessions:  # one spend guard for the whole run, across sessions
            results.append(lcm.summary.compact.compact(conn, session, mode=mode, until_under=args.until_under,
                                                       dry_run=args.dry_run, time_budget=args.time_budget,
                                                       max_calls=calls_left, breaker=breaker))
            calls_left -= results[-1]["model_calls"]
            if args.digest and not args.dry_run:
                results[-1]["digest"] = lcm.summary.digest.write(conn, session)["level"]
            if progress is not None:
                progress.session_done(results[-1])
            if results[-1]["stopped"] in ("call_limit", "time_budget"):
                break
    finally:
        if progress is not None:
            progress.close()
    if breaker.failure is not None:
        fallback = sum(r["levels"]["fallback"] for r in results)
        done = (f"{fallback} summaries were written without it (level fallback); a later run with a working"
                " model upgrades them" if fallback else "the fallback summaries wait for a run with a working model")
        sys.stderr.write(f"Warning: the model failed ({breaker.failure.message}); {done}\n"
                         f"Hint: {breaker.failure.hint}\n")
    if args.json:
        if args.all:
            total = {k: sum(r[k] for r in results) for k in
                     ("leaf_created", "condensed_created", "upgraded", "model_calls", "tokens_before",
                      "tokens_after")}
            total["levels"] = {k: sum(r["levels"][k] for r in results) for k in lcm.summary.compact.LEVELS}
            lcm.cli.print_json({**total, "sessions": results, "count": len(results),
                                "model_failure": breaker.failure.message if breaker.failure else None})
        else:
            lcm.cli.print_json(results[0])
        return 0
    quiet = [r for r in results if args.all and not (r["leaf_created"] or r["condensed_created"] or r["upgraded"])]
    for r in results:
        if r in quiet:
            continue
        verb = "would create" if r["dry_run"] else "created"
        made = r["would_create"] if r["dry_run"] else {"leaf": r["leaf_created"], "condensed": r["condensed_created"]}
        levels = ", ".join(f"{k} {v}" for k, v in r["levels"].items() if v)
        print(f"{r['session_id']}: {verb} {made['leaf']} leaf + {made['condensed']} condensed summaries"
              f"{' (' + levels + ')' if levels else ''}; context {r['tokens_before']} -> {r['tokens_after']} tokens;"
              f" {r['model_calls']}/{r['max_model_calls']} model calls ({r['backend']})"
              + (f"; upgraded {r['upgraded']}" if r["upgraded"] else "")
              + (f"; stopped: {r['stopped']}" if r["stopped"] else "")
              + (f"; {r['digest']} digest written" if r.get("digest") else ""))
    if quiet:
        print(f"{len(quiet)} more sessions: nothing to do")
    return 0


def _pack(args) -> int:
    import lcm.vault.pack
    if args.session or args.dry_run or args.digest:
        raise LcmError("--pack works on the whole vault", "drop --session, --dry-run and --digest")
    conn = lcm.vault.db.connect(args.db, create=False)  # by hand (no budget): waits for a run the hooks started
    started = time.monotonic()
    doc = lcm.vault.pack.run(conn, everything=args.all, time_budget=args.time_budget, progress=not args.json,
                       then_vacuum=args.vacuum)
    # and the usage of lines stored before the usage table (a converted vault), within the same budget
    deadline = started + args.time_budget if args.time_budget else None
    doc["usage_lines_waiting"] = lcm.capture.tokens.backfill_in_turns(conn, deadline=deadline)
    lcm.capture.tokens.read_later(conn, deadline=deadline)  # and of the lines hooks stored since the last run
    if args.json:
        lcm.cli.print_json(doc)
    else:
        print(lcm.vault.pack.report_text(doc))
    return 0


def main(argv: list[str] | None = None) -> int:
    return lcm.cli.run(_main, argv)


if __name__ == "__main__":
    lcm.cli.freeze_imports()
    sys.exit(main())

"""Show the vault's size and health and how full the current session's context is.

Usage:
  python3 scripts/lcm_status.py [--session ID] [--db PATH] [--json]

The session is --session, else $LCM_SESSION_ID / $CLAUDE_CODE_SESSION_ID, else the most
recently active one. Its context size is the `usage` of its latest assistant response
(input + cache reads + cache writes + output, once per API message id); compaction is
recommended above LCM_CONTEXT_THRESHOLD x the model's context window.

Examples:
  python3 "$LCM_SCRIPTS/lcm_status.py"
  python3 "$LCM_SCRIPTS/lcm_status.py" --session 3f2c... --json
"""
from __future__ import annotations

import sys

import lcm.cli
import lcm.config
import lcm.db
import lcm.resolve
import lcm.status


def _main(argv):
    p = lcm.cli.parser(__doc__)
    lcm.cli.add_session_arg(p)
    p.add_argument("--check-fts", action="store_true",
                   help="full FTS5 integrity check even on a large vault (re-reads all text)")
    args = p.parse_args(argv)
    lcm.config.validate_config()
    conn = lcm.db.connect(args.db, create=False, readonly=True)
    session = lcm.resolve.session(conn, args.session, required=False)
    s = lcm.status.status(conn, session, check_fts=True if args.check_fts else None)
    if args.json:
        lcm.cli.print_json(s)
        return 0
    depth = "-" if s["max_depth"] is None else s["max_depth"]
    print(f"Vault {s['db']} ({s['db_bytes'] / 1e6:.1f} MB): {s['sessions']} sessions, {s['messages']} messages"
          f" (~{s['raw_tokens']} tokens), {s['summaries']} summaries, max depth {depth}")
    if s["session_id"] is None:
        print("Session: none yet (run lcm_ingest.py --all)")
    elif s["context_tokens"] is None:
        print(f"Session {s['session_id']}: context size unknown (no assistant usage recorded)")
    else:
        verdict = "compaction recommended (lcm_compact.py)" if s["compaction_recommended"] else "no compaction needed"
        print(f"Session {s['session_id']}: context {s['context_tokens']} / {s['context_window']} tokens,"
              f" threshold {s['threshold']}: {verdict}")
    fts = {True: "ok", False: "DAMAGED (lcm_doctor.py --fix backs up the vault, then rebuilds it)", None: "unavailable (LIKE search)"}[s["fts_ok"]]
    print(f"Full-text index: {fts}")
    return 0


def main(argv: list[str] | None = None) -> int:
    return lcm.cli.run(_main, argv)


if __name__ == "__main__":
    lcm.cli.freeze_imports()
    sys.exit(main())

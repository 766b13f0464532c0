"""Show the vault's size and health and how full the current session's context is.

Usage:
  python3 scripts/lcm_status.py [--session ID] [--db PATH] [--json]

The session is --session, else $LCM_SESSION_ID / $CLAUDE_CODE_SESSION_ID, else the most
recently active one (the output says which and why). Two figures, two different things:
  Claude Code's context  the `usage` of the session's latest assistant response (input + cache
                         reads + cache writes + output, once per API message id) against the
                         window (LCM_CONTEXT_WINDOW, else 1,000,000 for a 1M model id or when
                         more than 200,000 tokens were in use, else 200,000). Only Claude Code's
                         /compact (or its automatic compaction) lowers it; above
                         LCM_CONTEXT_THRESHOLD of the window, /compact is suggested.
  lcm's view             lcm's summaries of the session plus the messages they do not cover yet:
                         what lcm re-injects after a compaction. lcm_compact.py lowers it.

Examples:
  python3 "$LCM_SCRIPTS/lcm_status.py"
  python3 "$LCM_SCRIPTS/lcm_status.py" --session 3f2c... --json
"""
from __future__ import annotations

import sys

import lcm.cli
import lcm.base.config
import lcm.vault.db
import lcm.vault.resolve
import lcm.base.shell
import lcm.readers.sessions
import lcm.readers.status


def _main(argv):
    p = lcm.cli.parser(__doc__)
    lcm.cli.add_session_arg(p)
    p.add_argument("--check-fts", action="store_true",
                   help="full FTS5 integrity check even on a large vault (re-reads all text)")
    args = p.parse_args(argv)
    lcm.base.config.validate_config()
    conn = lcm.vault.db.connect(args.db, create=False, readonly=True)
    session = lcm.vault.resolve.session(conn, args.session, required=False)
    s = lcm.readers.status.status(conn, session, check_fts=True if args.check_fts else None, given=args.session is not None)
    if args.json:
        lcm.cli.print_json(s)
        return 0
    depth = "-" if s["max_depth"] is None else s["max_depth"]
    fts = {True: "full-text index ok", False: "full-text index DAMAGED: lcm_doctor.py --fix backs up the vault,"
           " then rebuilds it", None: "no full-text index: LIKE search"}[s["fts_ok"]]
    ratio = f", {s['vault_ratio']} of its transcripts" if s["vault_ratio"] else ""
    print(f"Vault {s['db']} ({s['db_bytes'] / 1e6:.1f} MB{ratio}, {fts}): {s['sessions']} sessions, {s['messages']} messages"
          f" (~{s['raw_tokens']} tokens), {s['summaries']} summaries, max depth {depth}")
    if s["only_in_vault"]:
        print(lcm.base.shell.runnable(f"{s['only_in_vault']} of {s['sessions']} sessions exist only in the vault now"
                                      f" ({lcm.readers.sessions.CLEANUP_NOTE}); its backups: lcm_backup.py --list"))
    if s["session_id"] is None:
        if not s["sessions"]:
            print(lcm.base.shell.runnable("Session: none yet: start `claude` in a project (its hooks store every"
                                          " session), or import past sessions with lcm_ingest.py --all"))
        else:  # sessions are stored, none of them this project's: importing again would change nothing
            print(lcm.base.shell.runnable(
                "Session: none here (no current session, and no stored session of this directory);"
                f" {lcm.base.shell.SESSIONS_HINT}, and lcm_status.py --session ID shows one"))
        return 0
    title = f' "{s["session_title"]}"' if s["session_title"] else ""
    print(f"Session {s['session_id']}{title}: {s['session_reason']}")
    if s["context_tokens"] is None:
        print("Claude Code's context: unknown (no assistant usage recorded yet)")
    else:
        share = 100 * s["context_tokens"] / s["context_window"]
        verdict = (f"above {s['threshold']} (LCM_CONTEXT_THRESHOLD): run /compact in Claude Code when it suits you;"
                   " lcm keeps every message" if s["compaction_recommended"] else "nothing to do")
        print(f"Claude Code's context: {s['context_tokens']} of {s['context_window']} tokens ({share:.0f}%;"
              f" window from {s['context_window_source']}). Only Claude Code's /compact lowers it: {verdict}")
    print(f"lcm's view of this session: {s['lcm_context_tokens']} tokens of summaries and not yet summarised"
          f" messages. {lcm.base.shell.command_line('lcm_compact.py', '--session', s['session_id'])} lowers it"
          " (what lcm re-injects after a compaction), not Claude Code's context")
    return 0


def main(argv: list[str] | None = None) -> int:
    return lcm.cli.run(_main, argv)


if __name__ == "__main__":
    lcm.cli.freeze_imports()
    sys.exit(main())

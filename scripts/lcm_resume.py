"""Resume work: rebuild the state a checkpoint recorded, checked against the vault, in a bounded text.

Reads .lcm-checkpoint.md at the workspace root ($CLAUDE_PROJECT_DIR, else the current
directory), or --checkpoint PATH, or the newest checkpoint the vault keeps for --session ID.
The state (latest requests, open todos, files edited, errors, commands) is re-read from the
vault up to the checkpoint's last message; messages stored after it are summarised with a
warning. The output stays under --max-tokens and ends with the commands that drill further.

Usage:
  python3 scripts/lcm_resume.py [--checkpoint PATH | --session ID] [--max-tokens N] [--json]

Examples:
  python3 "$LCM_SCRIPTS/lcm_resume.py"
  python3 "$LCM_SCRIPTS/lcm_resume.py" --session 7acd37a8-... --max-tokens 1000
  python3 "$LCM_SCRIPTS/lcm_resume.py" --checkpoint ../other/.lcm-checkpoint.md --json
"""
from __future__ import annotations

import sys

import lcm.summary.checkpoint
import lcm.cli
import lcm.base.config
import lcm.vault.db
import lcm.vault.resolve
from lcm.summary.checkpoint import FILE_NAME


def _main(argv):
    p = lcm.cli.parser(__doc__)
    which = p.add_mutually_exclusive_group()
    which.add_argument("--checkpoint", metavar="PATH", help=f"checkpoint file (default: {FILE_NAME} at the workspace root)")
    which.add_argument("--session", metavar="ID", help="resume from the newest checkpoint the vault keeps for this session")
    p.add_argument("--max-tokens", type=lcm.cli.int_arg(1), default=2000, metavar="N", help="bound of the reconstruction (default 2000)")
    args = p.parse_args(argv)
    if args.max_tokens < 200:
        p.error("--max-tokens must be at least 200")
    conn = lcm.vault.db.connect(args.db, create=False, readonly=True)
    session = lcm.vault.resolve.session(conn, args.session, whole=True) if args.session else None
    result = lcm.summary.checkpoint.resume(conn, args.checkpoint, session, lcm.base.config.db_path(args.db).resolve(),
                                   args.max_tokens)
    if args.json:
        lcm.cli.print_json(result)
    else:
        sys.stdout.write(result["text"])
    return 0


def main(argv: list[str] | None = None) -> int:
    return lcm.cli.run(_main, argv)


if __name__ == "__main__":
    lcm.cli.freeze_imports()
    sys.exit(main())

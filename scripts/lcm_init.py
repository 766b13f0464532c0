"""Create or upgrade the lcm vault (safe to run any number of times).

Usage:
  python3 scripts/lcm_init.py [--db PATH] [--json]

Prints the vault path, its schema version and the current session id
($LCM_SESSION_ID, else $CLAUDE_CODE_SESSION_ID, else none). Every LCM_* setting is
checked first, so a typo in one is reported before anything is written.

Examples:
  python3 "$LCM_SCRIPTS/lcm_init.py"
  python3 "$LCM_SCRIPTS/lcm_init.py" --db /tmp/scratch.db --json
"""
from __future__ import annotations

import sys

import lcm.cli
import lcm.base.config
import lcm.vault.db


def init(db: str | None = None) -> dict:
    """Create or migrate the vault; returns the --json document."""
    lcm.base.config.validate_config()
    path = lcm.base.config.db_path(db)
    created = not path.exists()
    conn = lcm.vault.db.connect(db)
    try:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
    finally:
        conn.close()
    return {"db": str(path), "schema_version": version,
            "session_id": lcm.base.config.current_session_id(), "created": created}


def _main(argv):
    p = lcm.cli.parser(__doc__)
    args = p.parse_args(argv)
    result = init(args.db)
    if args.json:
        lcm.cli.print_json(result)
        return 0
    state = "created" if result["created"] else "ready"
    print(f"Vault {state}: {result['db']} (schema {result['schema_version']})")
    print(f"Session: {result['session_id'] or 'none (LCM_SESSION_ID is not set)'}")
    return 0


def main(argv: list[str] | None = None) -> int:
    return lcm.cli.run(_main, argv)


if __name__ == "__main__":
    lcm.cli.freeze_imports()
    sys.exit(main())

#!/usr/bin/env python3
"""See your memory in a browser: a local, read-only web view of the vault.

Usage:
  lcm_view.py [--port N] [--no-browser] [--db PATH]

Serves the sessions, each session's conversation (sub-agent runs folded under the call that
started them, tool calls collapsed with their results), its summary DAG drawn as a picture
(click a node for its text and its sources, down to the original lines) and search (the ranking
of lcm_grep.py). It listens on 127.0.0.1 only and prints one URL whose path is a random token;
a request outside that path, or naming another host, is refused, and no cookie is set (another
server on 127.0.0.1 receives nothing that opens it). The vault is opened read-only and everything
shown is masked. Ctrl-C stops it.

Examples:
  python3 "$LCM_SCRIPTS/lcm_view.py"                     # open the viewer in your browser
  python3 "$LCM_SCRIPTS/lcm_view.py" --no-browser --port 8765
"""
from __future__ import annotations

import sys

import lcm.cli
import lcm.base.config
import lcm.vault.grants


def _main(argv):
    p = lcm.cli.parser(__doc__)
    p.add_argument("--port", type=lcm.cli.int_arg(0, 65535), default=0, metavar="N",
                   help="port on 127.0.0.1 (default: a free one)")
    p.add_argument("--no-browser", action="store_true", help="print the URL only; do not open a browser")
    args = p.parse_args(argv)
    if args.json:
        from lcm.base.errors import LcmError
        raise LcmError("lcm_view.py serves pages; it has no JSON output", "run it without --json")
    lcm.vault.grants.refuse("lcm_view.py (it serves the whole vault)")
    from lcm.view import server
    return server.serve(str(lcm.base.config.db_path(args.db)), args.port, open_browser=not args.no_browser)


def main(argv: list[str] | None = None) -> int:
    return lcm.cli.run(_main, argv)


if __name__ == "__main__":
    lcm.cli.freeze_imports()
    sys.exit(main())

"""Import Claude Code transcripts into the lcm vault: every message verbatim, incrementally.

Usage:
  python3 scripts/lcm_ingest.py PATH... [--json] [--db PATH]
  python3 scripts/lcm_ingest.py --all [--json] [--db PATH]
  python3 scripts/lcm_ingest.py BUNDLE... [--json] [--db PATH]

PATH is a transcript (.jsonl) or a directory searched recursively for *.jsonl. --all reads
every transcript under $CLAUDE_CONFIG_DIR/projects, else ~/.claude/projects. Each user,
assistant and system entry is stored with its original line byte for byte, deduplicated on
its uuid; a re-run reads only the bytes added since the last one. Malformed lines, and files
that cannot be read (a dangling symlink, a FIFO, a file deleted meanwhile), are reported on
stderr and skipped, never fatal. Imports of one vault may run in parallel: each waits its turn.
Lines written in projects matching LCM_EXCLUDE (colon-separated path globs; each line's cwd,
symlinks resolved) are left out, and counted in the output. A BUNDLE (lcm_export.py --bundle
FILE, from another vault) is merged: its messages are added by uuid, byte for byte as the bundle
holds them (a second merge adds nothing), and the messages purged there are purged here too and
never imported again; a progress bar shows on a terminal.

Examples:
  python3 "$LCM_SCRIPTS/lcm_ingest.py" --all
  python3 "$LCM_SCRIPTS/lcm_ingest.py" ~/.claude/projects/-home-me-proj --json
  LCM_EXCLUDE="$HOME/clients/*" python3 "$LCM_SCRIPTS/lcm_ingest.py" --all
  python3 "$LCM_SCRIPTS/lcm_ingest.py" ~/Sync/lcm/desktop.lcmb
"""
from __future__ import annotations

import os
import sys

import lcm.cli
import lcm.base.config
import lcm.vault.db
import lcm.capture.bulk
import lcm.capture.ingest
import lcm.readers.bundle

MALFORMED_SHOWN = 20  # malformed lines listed in text mode before "... N more"
BULK_NICENESS = 10  # CPU priority the import lowers itself by (the parser process inherits it)


def _main(argv):
    p = lcm.cli.parser(__doc__)
    p.add_argument("paths", nargs="*", metavar="PATH", help="transcript files or directories")
    p.add_argument("--all", action="store_true", help="every transcript under ~/.claude/projects")
    args = p.parse_args(argv)
    if not args.paths and not args.all:
        p.error("give transcript paths or --all")
    lcm.base.config.validate_config()
    bundles = [p for p in args.paths if os.path.isfile(p) and lcm.readers.bundle.is_bundle(p)]
    paths = [p for p in args.paths if p not in bundles]
    for bundle in bundles:
        lcm.readers.bundle.read_header(bundle)[1].close()  # refuse a bad bundle before anything is written
    root = lcm.capture.ingest.projects_root()
    if args.all:
        if root.is_dir():
            paths.append(root)
        else:
            sys.stderr.write(f"No transcripts yet under {root}\n")
    lcm.capture.bulk.transcript_files(paths)  # refuse a bad path before the vault is even created
    conn = lcm.vault.db.connect(args.db)
    # an empty vault before the import: a line skipped as known repeated one read in this import
    was_empty = conn.execute("SELECT 1 FROM messages LIMIT 1").fetchone() is None
    merged = [lcm.readers.bundle.merge(conn, b, progress=True) for b in bundles]  # on stderr, when a terminal
    if bundles and not paths:
        return _merged(merged, args.json)
    result = lcm.capture.bulk.ingest_paths(conn, paths, progress=not args.json)
    if merged:
        result["bundles"] = merged
    if args.json:
        lcm.cli.print_json(result)
        return 0
    if merged:
        _merged(merged, False)
    for bad in result["malformed"][:MALFORMED_SHOWN]:
        sys.stderr.write(f"malformed line skipped: {bad['path']}:{bad['line']}\n")
    if len(result["malformed"]) > MALFORMED_SHOWN:
        sys.stderr.write(f"... {len(result['malformed']) - MALFORMED_SHOWN} more (--json lists them all)\n")
    for bad in result["skipped_files"][:MALFORMED_SHOWN]:
        sys.stderr.write(f"file skipped: {bad['reason']}\n")
    if len(result["skipped_files"]) > MALFORMED_SHOWN:
        sys.stderr.write(f"... {len(result['skipped_files']) - MALFORMED_SHOWN} more (--json lists them all)\n")
    note = f"; {result['malformed_lines']} malformed lines skipped" if result["malformed_lines"] else ""
    if result["skipped_files"]:
        note += f"; {len(result['skipped_files'])} unreadable files skipped"
    if result["excluded_files"]:
        note += f"; skipped {result['excluded_files']} transcripts of projects in LCM_EXCLUDE"
    partly = result["excluded_lines"] and not result["excluded_files"]
    if partly:  # a session that moved into an excluded project: its lines from there on
        note += f"; left out {result['excluded_lines']} lines written in projects of LCM_EXCLUDE"
    skipped = result["messages_skipped"]
    known = (f" ({skipped} repeated in more than one transcript)" if was_empty else f" ({skipped} already stored)"
             ) if skipped else ""
    print(f"{result['messages_added']} new messages{known} from "
          f"{result['files']} files in {result['seconds']}s; the vault holds {result['vault_sessions']} sessions{note}")
    return 0


def _merged(merged: list[dict], as_json: bool) -> int:
    if as_json:
        lcm.cli.print_json({"bundles": merged, "messages_added": sum(m["messages_added"] for m in merged)})
        return 0
    for m in merged:
        purged = f"; {m['messages_purged']} messages here purged as they were there" if m["messages_purged"] else ""
        print(f"Merged {m['bundle']}: {m['messages_added']} new messages ({m['messages_skipped']} already here),"
              f" {m['sessions']} sessions, {m['purges_recorded']} purges recorded{purged}")
    return 0


def main(argv: list[str] | None = None) -> int:
    return lcm.cli.run(_main, argv)


if __name__ == "__main__":
    if hasattr(os, "nice"):
        # an import is batch work: the session's hooks (and the user) get the CPU first
        os.nice(BULK_NICENESS)
    lcm.cli.freeze_imports()
    sys.exit(main())

"""Drill from a summary back to what it summarises, down to the exact original lines.

Usage:
  python3 scripts/lcm_expand.py ID [--full] [--raw [--unmasked]] [--max-tokens N] [--offset N] [--json]

ID is a summary (sum_...) or a message uuid. A leaf summary gives its source messages in order,
a condensed summary its child summaries; --full goes all the way down to the messages; --raw
prints the original transcript lines (JSONL, implies --full) with secrets masked, and
--raw --unmasked the exact original bytes, secrets included. Output stops near --max-tokens
(default 4000) and names the command for the next page.

With LCM_GRANT set (inside an lcm_expand_query.py sub-agent) only ids in the grant's scope
expand, the tokens printed are charged to the grant, and --unmasked is refused.

Examples:
  python3 "$LCM_SCRIPTS/lcm_expand.py" sum_0123456789abcdef
  python3 "$LCM_SCRIPTS/lcm_expand.py" sum_0123456789abcdef --full --offset 40
  python3 "$LCM_SCRIPTS/lcm_expand.py" sum_0123456789abcdef --raw > original.jsonl
  python3 "$LCM_SCRIPTS/lcm_expand.py" MESSAGE_UUID --raw --unmasked   # exact bytes, secrets included
"""
from __future__ import annotations

import os
import sys

import lcm.cli
import lcm.vault.db
import lcm.readers.expand
import lcm.base.mask
import lcm.base.shell
from lcm.base.errors import LcmError


def _next_command(doc, args) -> str:
    flags = ["--raw"] if args.raw else ["--full"] if args.full else []
    flags += ["--unmasked"] if args.unmasked else []
    flags += ["--max-tokens", str(args.max_tokens)] if args.max_tokens != 4000 else []
    return lcm.base.shell.command_line("lcm_expand.py", lcm.base.shell.Positional(doc["id"]), *flags,
                               "--offset", str(doc["next_offset"]))


def _main(argv):
    p = lcm.cli.parser(__doc__)
    p.add_argument("id", metavar="ID", help="summary id (sum_...) or message uuid")
    p.add_argument("--full", action="store_true", help="go down to the messages")
    p.add_argument("--raw", action="store_true", help="print the original transcript lines (JSONL)")
    p.add_argument("--unmasked", action="store_true",
                   help="with --raw: the exact original bytes, secrets included (never with LCM_GRANT)")
    p.add_argument("--max-tokens", type=lcm.cli.int_arg(1), default=4000, metavar="N", help="page size (default 4000)")
    p.add_argument("--offset", type=lcm.cli.int_arg(), default=0, metavar="N", help="first item of the page")
    args = p.parse_args(argv)
    granted = bool(os.environ.get("LCM_GRANT"))
    if args.unmasked and not args.raw:
        p.error("--unmasked goes with --raw")
    if args.unmasked and granted:
        raise LcmError("--unmasked is refused under an expansion grant (LCM_GRANT): what a sub-agent reads goes to a model",
                       "read the masked lines with --raw, or run --raw --unmasked yourself outside the sub-agent")
    conn = lcm.vault.db.connect(args.db, create=False, readonly=not granted)
    doc = lcm.readers.expand.expand(conn, args.id, full=args.full, max_tokens=args.max_tokens, offset=args.offset, raw=args.raw)
    rows = doc.pop("_rows")
    more = f"... {doc['total'] - doc['offset'] - doc['count']} more: {_next_command(doc, args)}\n" if doc["has_more"] else ""
    if args.raw:
        out = sys.stdout.buffer
        for r in rows:
            out.write((bytes(r["raw"]) if args.unmasked else lcm.base.mask.mask_line(r["raw"])) + b"\n")
        out.flush()
        sys.stderr.write(more)  # stdout stays pure JSONL
        return 0
    if args.json:
        lcm.cli.print_json(doc)
        return 0
    w = sys.stdout.write
    w(f"{doc['id']} ({doc['kind']}): items {doc['offset'] + 1}-{doc['offset'] + doc['count']} of {doc['total']}\n")
    for item in doc["items"]:
        if item["type"] == "message":
            w(f"\n--- {item['uuid']}  {item['role']}  {(item['created_at'] or '')[:19]}\n{item['content']}\n")
        else:
            w(f"\n--- {item['id']} ({item['kind']}, depth {item['depth']}, {item['earliest_at']} .. {item['latest_at']})\n"
              f"{item['content']}\n")
    w(more)
    return 0


def main(argv: list[str] | None = None) -> int:
    return lcm.cli.run(_main, argv)


if __name__ == "__main__":
    lcm.cli.freeze_imports()
    sys.exit(main())

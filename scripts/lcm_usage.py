"""Show what Claude Code used and cost, over every session the vault holds (also those whose
transcripts Claude Code has deleted): tokens and dollars by day, week, month, session, project or model.

Usage:
  python3 scripts/lcm_usage.py [--by day|week|month|session|project|model] [--since DAY] [--until DAY]
                               [--limit N] [--json] [--db PATH]

Tokens are read from the `usage` field each response wrote to its transcript: input, output,
cache writes (of them, those kept an hour) and cache reads. A response written on several
lines counts once, as ccusage counts it, so both agree on the same transcripts. A day is your
local calendar day (set TZ to see another zone's). DAY is YYYY-MM-DD, YYYYMMDD or an age (7d, 2w);
both ends are included. Cost comes from lcm's dated price table (dollars per million tokens,
the date it was taken is printed), which $LCM_HOME/prices.json overrides model by model; a
model in neither is counted in tokens and named, its cost left out.

Examples:
  python3 "$LCM_SCRIPTS/lcm_usage.py"
  python3 "$LCM_SCRIPTS/lcm_usage.py" --by month
  python3 "$LCM_SCRIPTS/lcm_usage.py" --by project --since 2026-01-01 --until 2026-03-31
  python3 "$LCM_SCRIPTS/lcm_usage.py" --by model --json
"""
from __future__ import annotations

import sys

import lcm.cli
import lcm.base.shell
import lcm.vault.db
import lcm.readers.usage


def _row(label: str, g: dict) -> str:
    cost = f"${g['cost_usd']:,.2f}" + ("" if g.get("cost_complete", True) else "+")
    return (f"{label:<28} {g['input_tokens']:>12,} {g['output_tokens']:>12,} {g['cache_write_tokens']:>14,}"
            f" {g['cache_read_tokens']:>15,} {cost:>11}")


def _main(argv):
    p = lcm.cli.parser(__doc__)
    p.add_argument("--by", choices=lcm.readers.usage.BY, default="day", help="how to group (default: day)")
    p.add_argument("--since", metavar="DAY", help="from this local day on (YYYY-MM-DD, YYYYMMDD, 7d)")
    p.add_argument("--until", metavar="DAY", help="up to this local day, included")
    lcm.cli.add_limit_arg(p)
    args = p.parse_args(argv)
    since = lcm.readers.usage.parse_day(args.since, "--since")
    until = lcm.readers.usage.parse_day(args.until, "--until")
    conn = lcm.vault.db.connect(args.db, create=False, readonly=True)
    doc = lcm.readers.usage.report(conn, args.by, since, until)
    if args.json:
        lcm.cli.print_json(doc)
        return 0
    pending = (f"{doc['messages_not_read']} messages stored by an older lcm are not read for usage yet: "
               + lcm.base.shell.command_line("lcm_ingest.py", "--all") + " reads them once") if doc["messages_not_read"] else ""
    if not doc["items"]:
        print(pending or "No usage recorded" + (" in that range" if since or until else
                                                lcm.base.shell.runnable(" yet (run lcm_ingest.py --all)")))
        return 0
    print(f"{args.by:<28} {'input':>12} {'output':>12} {'cache write':>14} {'cache read':>15} {'cost':>11}")
    for g in doc["items"][:args.limit]:
        label = str(g["key"] if g["key"] is not None else "(unknown)")
        print(_row(label if len(label) <= 28 else "..." + label[-25:], g))
    if doc["count"] > args.limit:
        more = ["--by", args.by, "--limit", str(min(lcm.cli.LIMIT_MAX, doc["count"]))]
        more += [w for k in ("since", "until") if getattr(args, k) for w in (f"--{k}", getattr(args, k))]
        print(f"... {doc['count'] - args.limit} more: {lcm.base.shell.command_line('lcm_usage.py', *more)}")
    print(_row("total", {**doc["totals"], "cost_complete": not doc["unpriced_models"]}))
    if doc["unpriced_models"]:
        names = ", ".join(f"{m['model']} ({m['total_tokens']:,} tokens)" for m in doc["unpriced_models"])
        print(f"Not priced (no price in the table; add it to $LCM_HOME/prices.json): {names}")
    override = f", overridden by {doc['prices']['override']}" if doc["prices"]["override"] else ""
    print(f"Prices taken {doc['prices']['taken']}{override}; days in {doc['timezone']} time")
    if pending:
        print(pending)
    return 0


def main(argv: list[str] | None = None) -> int:
    return lcm.cli.run(_main, argv)


if __name__ == "__main__":
    lcm.cli.freeze_imports()
    sys.exit(main())

"""Run one sub-agent per line of a JSONL file: each item gets its own agent that can look at files.

Like lcm_llm_map.py (same input, output, schema, retry, --resume and summary contract), but each
item is worked on by an agent with tools instead of a single call:
  claude backend     a headless `claude -p` per item (the user's Claude Code login), tools limited
                     to Read, Glob, Grep (plus Edit, Write, Bash with --allow-write)
  anthropic backend  a bounded tool loop over the API with read_file, list_dir, search confined to
                     --cwd (plus write_file with --allow-write)
Read-only is the default. Inside a sub-agent it runs only with --delegated-scope and --kept-work.

Usage:
  python3 scripts/lcm_agentic_map.py --input tasks.jsonl --output results.jsonl (--prompt TEXT | --prompt-file F)
      [--schema S.json] [--concurrency 4] [--max-turns 20] [--read-only | --allow-write] [--timeout 600]
      [--cwd DIR] [--model M] [--max-attempts 3] [--resume] [--dry-run]

Examples:
  python3 "$LCM_SCRIPTS/lcm_agentic_map.py" --input modules.jsonl --output audit.jsonl \\
      --prompt "Read this module and list its public functions that lack tests" --schema audit.schema.json
  python3 "$LCM_SCRIPTS/lcm_agentic_map.py" ... --resume   # finish an interrupted run
"""
from __future__ import annotations

import sys
from dataclasses import fields

import lcm.cli
import lcm.base.guard
import lcm.base.llm
from lcm.maps import job
from lcm.maps.run import agentic_map


def _main(argv):
    p = lcm.cli.parser(__doc__)
    job.add_map_args(p, concurrency=4, timeout=600.0)
    p.add_argument("--max-turns", type=job.positive_int, default=20, metavar="N",
                   help="tool-using turns per item before it fails (default 20)")
    access = p.add_mutually_exclusive_group()
    access.add_argument("--read-only", dest="allow_write", action="store_false", default=False,
                        help="agents may only read, list and search files (the default)")
    access.add_argument("--allow-write", dest="allow_write", action="store_true",
                        help="agents may also write files (and, with claude, edit and run Bash)")
    p.add_argument("--cwd", metavar="DIR", default=".", help="directory the agents work in (default: current)")
    p.add_argument("--max-tokens", type=job.positive_int, default=4096, metavar="N",
                   help="answer length cap per model turn (default 4096)")
    p.add_argument("--api-retries", type=lcm.cli.int_arg(0, 20), default=lcm.base.llm.DEFAULT_MAX_RETRIES, metavar="N",
                   help="retries per call on 429, 5xx and connection errors, within --timeout")
    lcm.base.guard.add_guard_args(p)
    args = p.parse_args(argv)

    lcm.base.guard.check_delegation("lcm_agentic_map.py", args.delegated_scope, args.kept_work,
                               instead="read the files with your own tools, or use lcm_llm_map.py for tool-free work")
    result = agentic_map(job.MapOptions(**{f.name: getattr(args, f.name) for f in fields(job.MapOptions)
                                        if hasattr(args, f.name)}))
    lcm.cli.print_json(result)
    return job.dry_run_code(result)


def main(argv: list[str] | None = None) -> int:
    return lcm.cli.run(_main, argv)


if __name__ == "__main__":
    lcm.cli.freeze_imports()
    sys.exit(main())

"""Run one stateless model call per line of a JSONL file, outside the agent's context.

Each input line is one item; the model answers each with exactly one JSON value, checked
against --schema (retried with the error when it is not valid JSON or breaks the schema).
OUT gets one line per item in input order: {"item_index", "ok": true, "result"} or
{"item_index", "ok": false, "error"}. stdout is one JSON summary, never the data.
Run state lives in the vault: --resume finishes an interrupted run without redoing items.
--batch uses the Message Batches API (half the price, results within hours, usually minutes).

Usage:
  python3 scripts/lcm_llm_map.py --input IN.jsonl --output OUT.jsonl (--prompt TEXT | --prompt-file F)
      [--schema S.json] [--concurrency 16] [--model M] [--max-attempts 3] [--max-tokens 1024]
      [--timeout 120] [--resume] [--batch [--poll-interval 10]] [--dry-run]

Examples:
  python3 "$LCM_SCRIPTS/lcm_llm_map.py" --input reviews.jsonl --output labels.jsonl \\
      --prompt "Classify the sentiment of this review" --schema label.schema.json --dry-run
  python3 "$LCM_SCRIPTS/lcm_llm_map.py" --input reviews.jsonl --output labels.jsonl \\
      --prompt "Classify the sentiment of this review" --schema label.schema.json
  python3 "$LCM_SCRIPTS/lcm_llm_map.py" ... --resume        # after a crash or Ctrl-C
  python3 "$LCM_SCRIPTS/lcm_llm_map.py" ... --batch         # large jobs at half the price
"""
from __future__ import annotations

import sys
from dataclasses import fields

import lcm.cli
import lcm.base.llm
from lcm.maps import job
from lcm.maps.run import llm_map


def _main(argv):
    p = lcm.cli.parser(__doc__)
    job.add_map_args(p, concurrency=16, timeout=120.0)
    p.add_argument("--max-tokens", type=job.positive_int, default=1024, metavar="N",
                   help="answer length cap per call (default 1024)")
    p.add_argument("--api-retries", type=lcm.cli.int_arg(0, 20), default=lcm.base.llm.DEFAULT_MAX_RETRIES, metavar="N",
                   help="SDK retries per call on 429, 5xx and timeouts, with backoff "
                        f"(default {lcm.base.llm.DEFAULT_MAX_RETRIES})")
    p.add_argument("--batch", action="store_true", help="use the Message Batches API (anthropic backend only)")
    p.add_argument("--poll-interval", type=lcm.cli.seconds_arg, default=10.0, metavar="S",
                   help="first wait between batch status checks; doubles up to 60 s (default 10)")
    args = p.parse_args(argv)
    result = llm_map(job.MapOptions(**{f.name: getattr(args, f.name) for f in fields(job.MapOptions)
                                        if hasattr(args, f.name)}))
    lcm.cli.print_json(result)
    return job.dry_run_code(result)


def main(argv: list[str] | None = None) -> int:
    return lcm.cli.run(_main, argv)


if __name__ == "__main__":
    lcm.cli.freeze_imports()
    sys.exit(main())

"""Benchmark: what the extractive summaries (LCM_LLM=none) keep of the facts in their source.

Usage:
  python3 bench/fidelity.py [--data DIR] [--keep DIR] [--verbose]

Ingests the shared transcripts (../shared/data/claude-projects, or --data) into a fresh vault,
runs `lcm_compact.py --all --full` with LCM_LLM=none and default settings, then reads every leaf
summary against the messages it covers:
  key_error_lines  failed tool results in the leaf (user rejections aside) whose key line is in
                   the summary. The key line is the one that says what failed: pytest's first
                   `FAILED`, else its first `E ` line; else the exception line closing a traceback;
                   else the first line saying `error:` / `fatal:` / `ERROR`; else a test run's
                   closing `=== ... in 0.4s ===` line; else the first line.
                   Compared on its first 60 characters, whitespace collapsed. Target: >= 80%.
  files_edited     paths passed to Edit/Write/MultiEdit/NotebookEdit in the leaf that the summary
                   names. Target: 100%.
  size             leaf tokens against LCM_LEAF_TARGET_TOKENS (mean, max, how many above it), and
                   against their source (mean ratio).
  leaves_under_min leaves whose source is under LCM_LEAF_MIN_TOKENS (default 2000).
Prints one JSON line. --verbose lists each key line that was lost, on stderr.
The key-line rule is written here independently of lcm's summariser, so it measures it.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = ROOT / "scripts"
EDIT_TOOLS = ("Edit", "Write", "MultiEdit", "NotebookEdit")
REJECTED = "The user doesn't want to"
EXCEPTION = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt)\b:?")
ERROR_WORD = re.compile(r"\b(error|fatal):|^ERROR\b", re.I)
PYTEST_SUMMARY = re.compile(r"^=+ .* in [\d.]+s\b.*=+$")
TAGS = re.compile(r"</?tool_use_error>")
COMPARE_CHARS = 60


def flat(text: str) -> str:
    return " ".join(TAGS.sub(" ", text).split())


def key_line(text: str) -> str:
    """The line of a failed tool result that says what failed (see the module docstring)."""
    lines = [ln.strip() for ln in TAGS.sub("\n", text).splitlines() if ln.strip()]
    if not lines:
        return ""
    for test in (lambda ln: ln.startswith("FAILED "), lambda ln: ln.startswith("E ")):
        hit = next((ln for ln in lines if test(ln)), None)
        if hit:
            return hit
    if any(ln.startswith("Traceback (most recent call last)") for ln in lines):
        hit = next((ln for ln in reversed(lines) if EXCEPTION.match(ln)), None)
        if hit:
            return hit
    hit = next((ln for ln in lines if ERROR_WORD.search(ln)), None)
    if hit:
        return hit
    return next((ln for ln in reversed(lines) if PYTEST_SUMMARY.match(ln)), lines[0])


def result_text(block: dict) -> str:
    content = block.get("content")
    if isinstance(content, list):
        return "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
    return "" if content is None else str(content)


def blocks(raw) -> list[dict]:
    try:
        entry = json.loads(raw)
    except ValueError:
        return []
    message = entry.get("message") if isinstance(entry, dict) else None
    content = message.get("content") if isinstance(message, dict) else None
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def measure(conn, verbose: bool) -> dict:
    target = int(os.environ.get("LCM_LEAF_TARGET_TOKENS") or 1200)
    minimum = int(os.environ.get("LCM_LEAF_MIN_TOKENS") or 2000)
    errors_total = errors_kept = edits_total = edits_kept = 0
    sizes, ratios, under_min = [], [], 0
    leaves = conn.execute("SELECT id, content, token_count, source_token_count FROM summaries"
                          " WHERE kind = 'leaf'").fetchall()
    for leaf in leaves:
        summary = flat(leaf["content"])
        sizes.append(leaf["token_count"])
        ratios.append(leaf["token_count"] / max(leaf["source_token_count"], 1))
        under_min += leaf["source_token_count"] < minimum
        rows = conn.execute("SELECT m.raw FROM summary_sources s JOIN messages m ON m.id = s.message_id"
                            " WHERE s.summary_id = ? ORDER BY s.ord", (leaf["id"],)).fetchall()
        edited: set[str] = set()
        for row in rows:
            for b in blocks(row["raw"]):
                if b.get("type") == "tool_use" and b.get("name") in EDIT_TOOLS:
                    data = b.get("input") if isinstance(b.get("input"), dict) else {}
                    path = data.get("file_path") or data.get("notebook_path")
                    if isinstance(path, str) and path:
                        edited.add(path)
                elif b.get("type") == "tool_result" and b.get("is_error") is True:
                    text = result_text(b)
                    if text.startswith(REJECTED):
                        continue
                    line = flat(key_line(text))[:COMPARE_CHARS]
                    errors_total += 1
                    if line and line in summary:
                        errors_kept += 1
                    elif verbose:
                        sys.stderr.write(f"lost in {leaf['id']}: {line}\n")
        edits_total += len(edited)
        kept = sum(path in summary for path in edited)
        edits_kept += kept
        if verbose and kept < len(edited):
            sys.stderr.write(f"files lost in {leaf['id']}: {sorted(p for p in edited if p not in summary)}\n")
    return {
        "leaves": len(leaves),
        "key_error_lines": {"kept": errors_kept, "total": errors_total,
                            "percent": round(100 * errors_kept / errors_total, 1) if errors_total else None,
                            "target_percent": 80},
        "files_edited": {"kept": edits_kept, "total": edits_total,
                         "percent": round(100 * edits_kept / edits_total, 1) if edits_total else None,
                         "target_percent": 100},
        "size": {"target_tokens": target, "mean_tokens": round(sum(sizes) / len(sizes), 1) if sizes else 0,
                 "max_tokens": max(sizes, default=0), "above_target": sum(s > target for s in sizes),
                 "mean_ratio_to_source": round(sum(ratios) / len(ratios), 3) if ratios else 0},
        "leaves_under_min": under_min,
        "leaf_min_tokens": minimum,
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", default=str(ROOT.parent / "shared" / "data" / "claude-projects"))
    p.add_argument("--keep", help="directory for the vault (default: a temporary one)")
    p.add_argument("--verbose", action="store_true", help="list what was lost on stderr")
    args = p.parse_args()
    if not os.path.isdir(args.data):
        print(json.dumps({"skipped": f"{args.data} is absent"}))
        return 0
    work = Path(args.keep or tempfile.mkdtemp(prefix="lcm-bench-fidelity-"))
    work.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("LCM_")}
    env.update(LCM_HOME=str(work / "home"), LCM_LLM="none")
    vault = work / "home" / "lcm.db"
    if vault.exists():
        vault.unlink()
    started = time.perf_counter()
    for command in (["lcm_ingest.py", args.data, "--json"], ["lcm_compact.py", "--all", "--full", "--json"]):
        subprocess.run([sys.executable, str(SCRIPTS / command[0]), *command[1:]], env=env, check=True,
                       stdout=subprocess.DEVNULL)
    conn = sqlite3.connect(vault)
    conn.row_factory = sqlite3.Row
    result = measure(conn, args.verbose)
    result["seconds"] = round(time.perf_counter() - started, 2)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())

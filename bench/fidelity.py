"""Benchmark: what the extractive summaries (LCM_LLM=none) keep of the facts in their source.

Usage:
  python3 bench/fidelity.py [--data DIR] [--keep DIR] [--verbose]

Ingests the shared transcripts (../shared/data/claude-projects, or --data) into a fresh vault,
runs `lcm_compact.py --all --full` with LCM_LLM=none and default settings, then reads every leaf
summary against the messages it covers:
  key_error_lines  failed tool results in the leaf whose key line is in the summary, leaving out
                   Claude Code's own tool plumbing (user rejections, "File has not been read yet",
                   "String to replace not found", permission prompts: counted under `plumbing`).
                   A key line is any line that says what failed: a line naming an error, a
                   failure, a panic or an exception, a missing thing, a refusal (ANSI codes and
                   warnings aside); a result without one has its first line as key. Compared on
                   its first 60 characters, whitespace collapsed. Target: >= 80%.
  key_error_lines_strict  the same with one key line per result, the old narrow rule: pytest's
                   first `FAILED`, else its first `E ` line; else the exception line closing a
                   traceback; else the first line saying `error:` / `fatal:` / `ERROR`; else a test
                   run's closing `=== ... in 0.4s ===` line; else the first line.
  files_edited     paths passed to Edit/Write/MultiEdit/NotebookEdit in the leaf that the summary
                   names. Target: 100%.
  size             leaf tokens against LCM_LEAF_TARGET_TOKENS (mean, max, how many above it), and
                   against their source (mean ratio).
  leaves_under_min leaves whose source is under LCM_LEAF_MIN_TOKENS (default 2000).
  by_kind          the same count per kind of failure as lcm/summary/failures.py names it (a breakdown
                   only: what is kept is judged by the rule above).
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
ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")
# Claude Code's own refusals and tool-input errors: they say nothing about the person's project
PLUMBING = re.compile(r"^(?:<tool_use_error>)?\s*(?:The user doesn't want to|File has not been read yet|"
                      r"String to replace not found|Found \d+ matches of the string to replace|"
                      r"(?:Error: )?No such tool available|Claude requested permissions|"
                      r"This (?:Bash )?command (?:contains multiple operations|requires approval)|"
                      r"Shell \w+ is not running|InputValidationError|File does not exist|"
                      r"File content \(\d+ tokens\) exceeds|EISDIR|.* was blocked\. For security)")
# words of a line that says what failed (written for this benchmark, not taken from lcm)
FAILURE_WORDS = re.compile(
    r"(?i)\b(?:\w*errors?|fail(?:ed|ure|s)?|fatal|panic(?:ked)?|\w*exception|undefined|undeclared|"
    r"cannot|can't|couldn't|unable|not found|no such|missing|denied|refused|invalid|unknown|"
    r"mismatch|expected|unexpected|assert\w*|too many|exit (?:code|status)|status code|timed? ?out|"
    r"no tests (?:ran|collected)|deselected|ERR!|ERR_\w+|(?-i:[A-Z]{1,4}\d{3,4}))\b|[×✗✘❌●]")
NOT_KEY = re.compile(r"(?i)^(?:warn(?:ing)?\b|info\b|note:|hint:|help:|=+ ?(?:FAILURES|ERRORS) ?=+$|"
                     r"at \S|File \"|\^+$|\||Traceback \(most recent call last\)|Exit code \d+$)")
COMPARE_CHARS = 60


def flat(text: str) -> str:
    return " ".join(ANSI.sub("", TAGS.sub(" ", text)).split())


def key_lines(text: str) -> list[str]:
    """Every line of a failed result that says what failed (see the module docstring)."""
    lines = [ln.strip() for ln in ANSI.sub("", TAGS.sub("\n", text)).splitlines() if ln.strip()]
    keys = [ln for ln in lines if FAILURE_WORDS.search(ln) and not NOT_KEY.match(ln)]
    return keys or lines[:1]


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


def failure_kind(text: str) -> str:
    """The kind lcm's rules give a failure (lcm/summary/failures.py): a breakdown for reading the
    figures, never a part of what counts as kept."""
    sys.path.insert(0, str(SCRIPTS))
    import lcm.summary.failures
    return lcm.summary.failures.classify(text)[0] or "other"


def measure(conn, verbose: bool) -> dict:
    target = int(os.environ.get("LCM_LEAF_TARGET_TOKENS") or 1200)
    minimum = int(os.environ.get("LCM_LEAF_MIN_TOKENS") or 2000)
    errors_total = errors_kept = edits_total = edits_kept = strict_kept = plumbing = plumbing_kept = 0
    sizes, ratios, under_min = [], [], 0
    by_kind: dict[str, list[int]] = {}
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
                    keys = [flat(k)[:COMPARE_CHARS] for k in key_lines(text)]
                    kept = any(k and k in summary for k in keys)
                    if PLUMBING.match(text.strip()):
                        plumbing += 1
                        plumbing_kept += kept
                        continue
                    errors_total += 1
                    errors_kept += kept
                    kind = by_kind.setdefault(failure_kind(text), [0, 0])
                    kind[0] += kept
                    kind[1] += 1
                    strict = flat(key_line(text))[:COMPARE_CHARS]
                    strict_kept += bool(strict) and strict in summary
                    if verbose and not kept:
                        sys.stderr.write(f"lost in {leaf['id']}: {keys[:3]}\n")
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
        "key_error_lines_strict": {"kept": strict_kept, "total": errors_total,
                                   "percent": round(100 * strict_kept / errors_total, 1) if errors_total else None},
        "plumbing": {"kept": plumbing_kept, "total": plumbing},
        "by_kind": {k: {"kept": v[0], "total": v[1]} for k, v in sorted(by_kind.items())},
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

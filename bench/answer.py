"""Deep recall: does lcm_expand_query.py show the line that answers, when it sits inside a long
tool result? Questions are built at run time from the real transcripts in ../shared/data:

  test      a failing pytest test: "Why did test_x fail?"; gold = its `E ...` line (the
            assertion or exception under the test's own header)
  error     a failure line of any other long command output (FAILED, Error:, npm ERR!, ...):
            "What error did <command> give?"; gold = that line
  config    a `name = value` / `name: value` line deep inside a file read with the Read tool:
            "What is <name> set to in <file>?"; gold = that line

The vault is every session ingested and fully compacted without a model (fresh tail 0); each
question is asked with --summary-ids of the top summary that covers the gold message (what an
agent reads in its context), with the default cap (4000 tokens). A hit: the gold line (its first
100 characters, whitespace folded) is in the answer without a model, or in the first prompt a
(fake, local) model receives. Run it on another checkout with --scripts DIR/scripts to compare.

Measured 2026-11-25 (side by side, --scripts on a worktree of main at 77ac32a):
  tuning set, 63 questions (30 config, 25 test, 8 error): before (400-character windows,
  12 excerpts, model prefetch in conversation order) no model 0.381, model prompt 0.286;
  after 1.000 and 1.000. The rules of lcm.readers.answer were tuned on this set.
  holdout (--holdout), 61 questions never used for tuning: before 0.279 / 0.262, after
  0.984 / 0.984 (the miss: a FAILED line of a run whose output the budget cut).

Usage:
  python3 bench/answer.py [--scripts DIR] [--show-misses]
Prints one JSON line.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "data" / "claude-projects"
TEST_HEADER = re.compile(r"^_{3,} (?:\w+\.)?(test\w+)(?:\[[^\]]*\])? _{3,}$")
FAILURE = re.compile(r"^\s*(FAILED|ERROR|npm ERR!|error(\[\w+\]|\s+TS\d+)?:)|^\s*(\w+\.)*\w*(Error|Exception):\s+\S"
                     r"|:\d+(:\d+)?:\s*error\b")
SETTING = re.compile(r"^\s*\d+→\s*[\"']?([A-Za-z_][\w.-]{3,40})[\"']?\s*(=|:)\s*[^\s{\[(]\S*")
PER_KIND = {"test": 25, "error": 15, "config": 30}
MIN_RESULT_CHARS = 1500   # "long": the tool result is more than a screen


def norm(text: str) -> str:
    return " ".join(text.split())


def build_vault(home: Path) -> None:
    os.environ.update(LCM_HOME=str(home), LCM_LLM="none", LCM_FRESH_TAIL_COUNT="0")
    import lcm.summary.compact
    import lcm.vault.db
    import lcm.capture.bulk
    import lcm.capture.ingest
    conn = lcm.vault.db.connect()
    lcm.capture.bulk.ingest_paths(conn, [str(SHARED)])
    for (session,) in conn.execute("SELECT DISTINCT session_id FROM messages").fetchall():
        lcm.summary.compact.compact(conn, session, mode="full")
    conn.close()


def tool_input(conn, parent_uuid: str | None) -> tuple[str, dict]:
    """(tool name, input) of the call a tool result answers (its parent message)."""
    row = conn.execute("SELECT content FROM messages WHERE uuid = ?", (parent_uuid,)).fetchone()
    if not row:
        return "", {}
    name, _, rest = row[0].partition(" ")
    try:
        return name, json.loads(rest)
    except ValueError:
        return name, {}


def questions(conn, holdout: bool = False) -> list[dict]:
    """Questions whose answer is one line inside a long tool result, a few of each kind.

    holdout: other lines of the same outputs, never looked at while tuning lcm.readers.answer: the
    last failure line of a command instead of its first, the third and fourth setting of a file
    instead of its first two, the last E line of a failing test's block."""
    out: list[dict] = []
    seen: set = set()
    rows = conn.execute("SELECT id, uuid, parent_uuid, content FROM messages WHERE role = 'user'"
                        " AND length(content) >= ? ORDER BY id", (MIN_RESULT_CHARS,)).fetchall()
    counts = dict.fromkeys(PER_KIND, 0)

    def add(kind, question, gold, row):
        key = (question, norm(gold))
        if key in seen or counts[kind] >= PER_KIND[kind] or len(norm(gold)) < 12:
            return
        seen.add(key)
        counts[kind] += 1
        out.append({"kind": kind, "question": question, "gold": gold.strip(), "message": row[1]})

    for row in rows:
        lines = row[3].splitlines()
        name, args = tool_input(conn, row[2])
        test = None
        for i, line in enumerate(lines):
            header = TEST_HEADER.match(line.strip())
            if header:
                test = header.group(1)
            elif test and re.match(r"^E\s+\S", line):
                if not holdout:
                    add("test", f"Why did {test} fail?", line, row)
                    test = None
                elif i + 1 < len(lines) and not lines[i + 1].startswith("E"):
                    add("test", f"Why did {test} fail?", line, row)
                    test = None
        if name == "Bash" and args.get("command"):
            command = norm(args["command"])[:60]
            failures = [line for line in lines if FAILURE.search(line) and not line.startswith("E ")]
            if failures:
                add("error", f"What error did `{command}` give?", failures[-1 if holdout else 0], row)
        if name == "Read" and args.get("file_path"):
            base = Path(args["file_path"]).name
            names = [m.group(1) if m else None for m in map(SETTING.match, lines)]
            taken = 0
            for i, (line, key) in enumerate(zip(lines, names)):
                # deep inside the file, a name that appears once in it
                if key and i >= 15 and names.count(key) == 1 and len(line) < 160:
                    if (2 <= taken < 4) if holdout else (taken < 2):
                        add("config", f"What is {key} set to in {base}?", line.split("→", 1)[1], row)
                    taken += 1
    return out


def top_summary(conn, uuid: str) -> str | None:
    row = conn.execute("SELECT s.summary_id FROM summary_sources s JOIN messages m ON m.id = s.message_id"
                       " WHERE m.uuid = ?", (uuid,)).fetchone()
    node = row[0] if row else None
    while node:
        parent = conn.execute("SELECT parent_id FROM summaries WHERE id = ?", (node,)).fetchone()[0]
        if parent is None:
            return node
        node = parent
    return None


def ask(expand_query, question: str, summary: str) -> dict:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = expand_query.main(["--prompt", question, "--summary-ids", summary, "--json"])
    return json.loads(out.getvalue()) if code == 0 else {"answer": ""}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--scripts", default=str(ROOT / "scripts"), help="the scripts directory of the checkout to measure")
    p.add_argument("--show-misses", action="store_true", help="print each miss on stderr")
    p.add_argument("--holdout", action="store_true", help="the questions never used for tuning")
    args = p.parse_args()
    if not SHARED.exists():
        print(json.dumps({"skipped": f"{SHARED} is absent"}))
        return 0
    sys.path[:0] = [str(Path(args.scripts).resolve()), str(ROOT / "tests")]
    for name in [n for n in os.environ if n.startswith(("LCM_", "ANTHROPIC_"))]:
        del os.environ[name]
    with tempfile.TemporaryDirectory() as tmp:
        build_vault(Path(tmp) / "lcm")
        import lcm.vault.db
        import lcm.base.mask
        import lcm_expand_query
        from fake_anthropic import FakeAnthropic
        conn = lcm.vault.db.connect()
        asked = [dict(q, summary=top_summary(conn, q["message"])) for q in questions(conn, args.holdout)]
        asked = [q for q in asked if q["summary"]]
        hits = {"none": 0, "model": 0}
        by_kind: dict = {}
        with FakeAnthropic(default_text="The sources do not say.") as api:
            for q in asked:
                gold = norm(lcm.base.mask.mask(q["gold"]))[:100]
                os.environ["LCM_LLM"] = "none"
                found_none = gold in norm(ask(lcm_expand_query, q["question"], q["summary"])["answer"])
                os.environ.update(LCM_LLM="anthropic", **api.env())
                before = len(api.requests)
                ask(lcm_expand_query, q["question"], q["summary"])
                sent = api.user_text(api.requests[before]) if len(api.requests) > before else ""
                found_model = gold in norm(sent)
                for mode, found in (("none", found_none), ("model", found_model)):
                    hits[mode] += found
                    kind = by_kind.setdefault(q["kind"], {"questions": 0, "none": 0, "model": 0})
                    kind[mode] += found
                    if not found and args.show_misses:
                        sys.stderr.write(f"miss ({mode}) {q['question']!r}: {q['gold'][:100]!r}\n")
                by_kind[q["kind"]]["questions"] += 1
        n = len(asked)
        print(json.dumps({"questions": n, "hit_rate_no_model": round(hits["none"] / n, 3),
                          "hit_rate_model_prompt": round(hits["model"] / n, 3), "by_kind": by_kind,
                          "set": "holdout" if args.holdout else "tuning",
                          "scripts": str(Path(args.scripts).resolve())}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""How far two blind readers agree on a session's decisions, bugs, open questions and unresolved
errors, beside what the digest's rules reach on the same sessions (not a test).

bench/labels/digest_agreement_sealed3.json is a second, independent reading of six sealed3
sessions (its `about` says how it was written). Each reading's item texts are read as printed
lines and scored against the other reading's `any` strings, exactly as bench/digest_quality.py
scores the digest's lines: precision is the share of one reader's items the other also listed,
recall the share of the other's items it found. With the transcripts (`--sealed3 DIR` or
LCM_BENCH_SEALED3) the digest's own figures on those six sessions are printed too, scored against
the first reading (the labels bench/digest_quality.py uses), and against the second.

Usage: python3 bench/label_agreement.py [--sealed3 DIR]
Prints one JSON line.
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import digest_quality  # noqa: E402  (its labels, matching and paths)

SECOND = Path(__file__).resolve().parent / "labels" / "digest_agreement_sealed3.json"


def score(lines_of: dict, labels: dict) -> dict:
    """Per category: precision and recall of printed lines (session -> category -> lines) against
    labelled items (session -> label)."""
    out = {}
    for category in digest_quality.PRINTED:
        labelled = found = printed = correct = 0
        for session, label in labels.items():
            items, lines = label.get(category) or [], lines_of[session].get(category, [])
            labelled += len(items)
            found += sum(any(digest_quality.matches(ln, it) for ln in lines) for it in items)
            printed += len(lines)
            correct += sum(any(digest_quality.matches(ln, it) for it in items) for ln in lines)
        out[category] = {"precision": round(correct / printed, 3) if printed else None,
                         "recall": round(found / labelled, 3) if labelled else None,
                         "printed": printed, "labels": labelled}
    return out


def main() -> int:
    second = {s["session"]: s for s in json.loads(SECOND.read_text())["sessions"]}
    first = {s["session"]: s for s in json.loads(digest_quality.SEALED3_LABELS.read_text())["sessions"]
             if s["session"] in second}
    texts = lambda labels: {sid: {c: [i["text"] for i in s.get(c) or []] for c in digest_quality.PRINTED}  # noqa: E731
                            for sid, s in labels.items()}
    out = {"sessions": len(first),
           "second_reading_against_first": score(texts(second), first),
           "first_reading_against_second": score(texts(first), second)}
    directory = digest_quality.outside_dirs(sys.argv[1:]).get("sealed3")
    if directory and digest_quality.DATA.is_dir():
        with tempfile.TemporaryDirectory() as home:
            os.environ["LCM_HOME"] = home
            os.environ.pop("LCM_DB", None)
            import lcm.summary.worklog
            labels = [{**{k: v for k, v in s.items() if k != "transcript"},
                       "path": str(Path(directory) / s["transcript"])} for s in first.values()]
            where = digest_quality.open_sessions(home, labels)
            printed = {}
            for s in labels:
                log = lcm.summary.worklog.worklog(*where[s["session"]], request_limit=10_000)
                printed[s["session"]] = {c: digest_quality.printed_lines(log, c) for c in digest_quality.PRINTED}
            out["rules_against_first"] = score(printed, first)
            out["rules_against_second"] = score(printed, second)
    else:
        out["skipped"] = "the rules' figures: no --sealed3 DIR nor LCM_BENCH_SEALED3"
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""How well the deterministic digest finds decisions, bugs and open questions (not a test).

Reads the labels in bench/labels/digest_sessions.json (written by reading real sessions of
../shared/data/claude-projects), imports each labelled session into a fresh vault, reads its work
log (lcm.summary.worklog: what digests and resume briefs print) and compares:

  recall     labelled items found by at least one printed line (a line contains one of the
             item's `any` strings)
  precision  printed lines that match a labelled item (an apology, a status line or narration
             printed as a decision counts against it)

per category (decisions, bugs, questions, unresolved errors) and per split (tune: the rules
were first adjusted while reading these; holdout: looked at once after that tuning, since then
development data too; fresh: labelled before the rules of issue 33 were changed and never looked
at while changing them; sealed: sub-agent transcripts labelled blind, without ever seeing the rules'
output, and evaluated once on 2026-11-27 (figures in that session's note), development data since;
sealed2: 11 sessions from public GitHub repositories, labelled blind in
bench/labels/digest_sessions_sealed2.json, scored once on 2026-11-28, development data since;
sealed3: 15 more such sessions, labelled blind by helpers who never saw the rules, in
bench/labels/digest_sessions_sealed3.json, scored once on 2026-11-28 with the rules frozen at c3fdc77,
development data since; sealed4: 6 more, labelled blind the same way, in
bench/labels/digest_sessions_sealed4.json, scored once on 2026-11-28 with the rules frozen at 4f6d84c,
development data since; sealed5: 11 more, labelled blind the same way, in
bench/labels/digest_sessions_sealed5.json, scored once on 2026-11-28 with the rules frozen at aba1fb2,
development data since; sealed6: prefixes of 7 more (a transcript as it stood at an earlier line),
labelled blind the same way, in bench/labels/digest_sessions_sealed6.json, scored once on 2026-11-28 with
the rules frozen at bd55010),
plus `dev` (tune and holdout together). Prints one JSON line.

The sealed sets' transcripts are kept outside the repository (bench/labels/SOURCES_sealedN.md
say where each comes from): name their directories with `--sealed2 DIR` ... `--sealed6 DIR`,
or LCM_BENCH_SEALED2 ... 6. Without one (or when a file is missing)
those sessions are skipped and the JSON's `skipped` says so.

A label with a `transcript` is a sub-agent's transcript read as a session of its own: a copy whose
lines carry a session id of their own and no sidechain mark goes into a second vault (its lines are
in the first one too when its parent session is labelled).

Usage: python3 bench/digest_quality.py [--show] [--split tune,holdout] [--sealed2 DIR] [--sealed3 DIR]
                                      [--sealed4 DIR] [--sealed5 DIR] [--sealed6 DIR]
  --show     every printed line, marked hit or miss, on stderr
  --split    only the sessions of these splits (comma-separated; default: all)
  --sealed2  the directory of sealed2's transcripts (default: $LCM_BENCH_SEALED2; none: skipped)
  --sealed3  the directory of sealed3's transcripts (default: $LCM_BENCH_SEALED3; none: skipped)
  --sealed4  the directory of sealed4's transcripts (default: $LCM_BENCH_SEALED4; none: skipped)
  --sealed5  the directory of sealed5's transcripts (default: $LCM_BENCH_SEALED5; none: skipped)
  --sealed6  the directory of sealed6's transcripts (default: $LCM_BENCH_SEALED6; none: skipped)
"""
from __future__ import annotations

import json
import sys
import tempfile
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
DATA = ROOT.parent / "shared" / "data" / "claude-projects"
LABELS = Path(__file__).resolve().parent / "labels" / "digest_sessions.json"
SEALED2_LABELS = Path(__file__).resolve().parent / "labels" / "digest_sessions_sealed2.json"
SEALED3_LABELS = Path(__file__).resolve().parent / "labels" / "digest_sessions_sealed3.json"
SEALED4_LABELS = Path(__file__).resolve().parent / "labels" / "digest_sessions_sealed4.json"
SEALED5_LABELS = Path(__file__).resolve().parent / "labels" / "digest_sessions_sealed5.json"
SEALED6_LABELS = Path(__file__).resolve().parent / "labels" / "digest_sessions_sealed6.json"
# the work log's key for each labelled category
PRINTED = {"decisions": "decisions", "bugs": "findings", "questions": "open_questions",
           "unresolved": "unresolved_errors"}


def printed_lines(log: dict, category: str) -> list[str]:
    items = log.get(PRINTED[category]) or []
    if category == "unresolved":
        return [f"{e['tool']} {e['target']}: {e['error']}" for e in items]
    return [str(i) for i in items]


def standalone(path: Path, out: Path) -> tuple[str, str]:
    """(copy's path, its session id): a sub-agent's transcript as a main-thread session of its own."""
    sid = str(uuid.uuid5(uuid.NAMESPACE_URL, "lcm-bench:" + path.relative_to(DATA).as_posix()))
    lines = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            lines.append(line)
            continue
        if isinstance(entry, dict):
            entry.update(sessionId=sid, isSidechain=False)
            entry.pop("agentId", None)
        lines.append(json.dumps(entry, ensure_ascii=False))
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{sid}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(out / f"{sid}.jsonl"), sid


# the labelled sets whose transcripts are public GitHub files kept outside the repository:
# name -> (labels, environment variable naming the transcripts' directory)
OUTSIDE = {"sealed2": (SEALED2_LABELS, "LCM_BENCH_SEALED2"), "sealed3": (SEALED3_LABELS, "LCM_BENCH_SEALED3"),
           "sealed4": (SEALED4_LABELS, "LCM_BENCH_SEALED4"), "sealed5": (SEALED5_LABELS, "LCM_BENCH_SEALED5"),
           "sealed6": (SEALED6_LABELS, "LCM_BENCH_SEALED6")}


def outside_dirs(args: list[str]) -> dict:
    """set name -> the directory of its transcripts: --NAME DIR, else $LCM_BENCH_NAME, else ""."""
    import os
    dirs = {}
    for name, (_, variable) in OUTSIDE.items():
        flag = f"--{name}"
        given = args[args.index(flag) + 1] if flag in args and args.index(flag) + 1 < len(args) else ""
        dirs[name] = given or os.environ.get(variable, "")
    return dirs


def load_labels(dirs: dict) -> tuple[list[dict], list[str]]:
    """(labelled sessions whose transcripts are here, what was skipped and why). The label of a set
    kept outside (sealed2, sealed3) gets `path`: its transcript under that set's directory, read as
    the main-thread session it is."""
    labels = json.loads(LABELS.read_text())["sessions"]
    skipped = []
    for name, (label_file, variable) in OUTSIDE.items():
        extra = json.loads(label_file.read_text())["sessions"] if label_file.is_file() else []
        if extra and not dirs.get(name):
            skipped.append(f"{name}: {len(extra)} sessions (no --{name} DIR nor {variable})")
            continue
        for s in extra:
            path = Path(dirs[name]) / s["transcript"]
            if path.is_file():
                labels.append({**{k: v for k, v in s.items() if k != "transcript"}, "path": str(path)})
            else:
                skipped.append(f"{name}: {s['session']} ({path} is absent)")
    return labels, skipped


def open_sessions(home: str, labels: list[dict]) -> dict:
    """session label -> (connection, session id): each labelled session imported into a vault under
    `home` (a sub-agent's transcript as a session of its own, in a second vault)."""
    import lcm.capture.bulk
    import lcm.vault.db
    conn = lcm.vault.db.connect(str(Path(home) / "lcm.db"))
    mains = [s for s in labels if "transcript" not in s]
    paths = [s.get("path") or str(next(DATA.glob(f"*/{s['session']}.jsonl"))) for s in mains]
    if paths:
        lcm.capture.bulk.ingest_paths(conn, paths)
    where = {s["session"]: (conn, s["session"]) for s in mains}
    alone = [s for s in labels if "transcript" in s]
    if alone:
        conn_alone = lcm.vault.db.connect(str(Path(home) / "alone.db"))
        copies = {s["session"]: standalone(DATA / s["transcript"], Path(home) / "alone") for s in alone}
        lcm.capture.bulk.ingest_paths(conn_alone, [path for path, _ in copies.values()])
        where.update((name, (conn_alone, sid)) for name, (_, sid) in copies.items())
    return where


def matches(line: str, item: dict) -> bool:
    low = line.lower()
    return any(s.lower() in low for s in item["any"])


def main() -> int:
    args = sys.argv[1:]
    show = "--show" in args
    wanted = None
    if "--split" in args and args.index("--split") + 1 < len(args):
        wanted = set(args[args.index("--split") + 1].split(","))
    if not DATA.is_dir():
        print(json.dumps({"skipped": f"{DATA} is absent"}))
        return 0
    import os
    with tempfile.TemporaryDirectory() as home:
        os.environ["LCM_HOME"] = home
        os.environ.pop("LCM_DB", None)
        import lcm.summary.worklog
        labels, skipped = load_labels(outside_dirs(args))
        labels = [s for s in labels if wanted is None or s["split"] in wanted]
        where = open_sessions(home, labels)
        totals: dict = {}
        for s in labels:
            log = lcm.summary.worklog.worklog(*where[s["session"]], request_limit=10_000)
            for category in PRINTED:
                lines, items = printed_lines(log, category), s.get(category) or []
                groups = [s["split"]] + (["dev"] if s["split"] in ("tune", "holdout") else [])
                for group in groups:
                    t = totals.setdefault(group, {}).setdefault(
                        category, {"labels": 0, "found": 0, "printed": 0, "correct": 0})
                    t["labels"] += len(items)
                    t["found"] += sum(any(matches(ln, it) for ln in lines) for it in items)
                    t["printed"] += len(lines)
                    t["correct"] += sum(any(matches(ln, it) for it in items) for ln in lines)
                if show:
                    for ln in lines:
                        hit = any(matches(ln, it) for it in items)
                        sys.stderr.write(f"{s['split']:7} {s['session'][:8]} {category:10} {'HIT ' if hit else 'miss'} {ln[:160]}\n")
                    for it in items:
                        if not any(matches(ln, it) for ln in lines):
                            sys.stderr.write(f"{s['split']:7} {s['session'][:8]} {category:10} LOST {it['text']}\n")
    out = {"sessions": {split: sum(s["split"] == split or split == "dev" and s["split"] in ("tune", "holdout")
                                   for s in labels) for split in totals}}
    if skipped:
        out["skipped"] = skipped
    for split, cats in totals.items():
        for category, t in cats.items():
            out[f"{split}_{category}"] = {
                "precision": round(t["correct"] / t["printed"], 3) if t["printed"] else None,
                "recall": round(t["found"] / t["labels"], 3) if t["labels"] else None,
                "printed": t["printed"], "labels": t["labels"]}
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Recall that comes by itself (lcm.search.recall, the UserPromptSubmit hook): does it earn its tokens?

Usage:
  python3 bench/auto_recall.py [--floors 0.5,0.6,0.7,0.8,0.9] [--hits 3]

The vault of bench/recall.py (synthetic chats + ../shared/data when present). Two kinds of prompt:
  answered  a later question whose answer is in the vault (bench/recall.py's personal, holdout,
            persona and coding sets), asked from its own project; "holds" = an injected line is
            a gold message (or the summary/hit naming it), "injected" = anything was injected
  new_work  prompts of new work (NEW_WORK below: coding tasks and everyday requests nobody asked
            before) from a chat and a coding project; "silent" = nothing was injected (target
            >= 0.90: an injection that does not help costs the session tokens and attention)
For each coverage floor (lcm.search.recall.COVERAGE_FLOOR): answered_holds, answered_injected,
precision (injections holding the answer), new_work_silent, and the ms per prompt of the recall
step (searching, not Python's start). Prints one JSON line.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "scripts"), str(ROOT / "tests"), str(ROOT / "hooks"), str(ROOT / "bench")]

# new work: requests a vault of earlier sessions does not answer (written for this bench, not
# drawn from the sets above; some share everyday or coding words with them, as real prompts do)
NEW_WORK = [
    "Add a dark mode toggle to the settings page of the dashboard",
    "Write a Dockerfile for the Flask API with a multi-stage build",
    "Set up GitHub Actions to publish the package to PyPI when a tag is pushed",
    "Refactor the payment service so it uses dependency injection",
    "Create a Rust command line tool that converts CSV files to Parquet",
    "Add rate limiting with Redis to the login endpoint",
    "Implement cursor pagination for the users REST endpoint",
    "Write unit tests for the date parsing helper in utils",
    "Migrate the frontend build from webpack to Vite",
    "Add OpenTelemetry tracing to the gRPC server",
    "Create a Terraform module for an S3 bucket with versioning enabled",
    "Fix the flaky integration test for the email queue worker",
    "Add French and German translations to the mobile app",
    "Write a bash script that rotates the nginx logs every week",
    "Add a GraphQL mutation for updating user avatars",
    "Build a Kubernetes CronJob that backs up Postgres every night",
    "Convert the class components of the admin panel to React hooks",
    "Add a health check endpoint to the Go microservice",
    "Generate TypeScript types from our OpenAPI specification",
    "Profile the image resizing worker and reduce its memory use",
    "Plan a three-day itinerary for Kyoto in the autumn",
    "Suggest a beginner strength training routine for twice a week",
    "Which houseplants grow well in a bathroom without windows?",
    "Help me write a cover letter for a UX designer position",
    "Explain how compound interest works with a worked example",
    "Recommend science fiction novels similar to Dune",
    "How do I get a red wine stain out of a wool carpet?",
    "Draft a polite email declining an invitation to a conference talk",
    "Give me a vegetarian lasagna recipe that serves eight people",
    "What should I pack for a week of hiking in Patagonia?",
    "How can I teach my parrot to stop biting?",
    "Compare index funds and ETFs for a first-time investor",
    "Write a short poem for my colleague's retirement card",
    "What is a good stretching routine after cycling?",
    "How do I descale an espresso machine with citric acid?",
    "Suggest names for a bakery that specialises in sourdough",
    "Explain the difference between HTTP/2 and HTTP/3",
    "Set up a Raspberry Pi as a home media server",
    "How do I negotiate a lower price when buying a used motorcycle?",
    "Write a SQL query for the top five customers by revenue per quarter",
]


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--floors", default="0.5,0.6,0.7,0.8,0.9")
    p.add_argument("--hits", type=int, default=3, help="lines injected at most (hooks/user_prompt_submit.py RECALL_HITS)")
    args = p.parse_args(argv)
    floors = [float(f) for f in args.floors.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["LCM_HOME"] = str(Path(tmp) / "home")
        for name in ("LCM_DB", "LCM_SESSION_ID", "CLAUDE_CODE_SESSION_ID"):
            os.environ.pop(name, None)
        import lcm.vault.db
        import lcm.capture.bulk
        import lcm.capture.ingest
        bench = _load("recall_bench", ROOT / "bench" / "recall.py")
        import lcm.search.recall as hook
        import recall_sets
        projects = Path(tmp) / "projects"
        chat = "/home/me/chat"
        answered = [(q, g, chat) for q, g in bench.build_personal(projects) + bench.build_holdout(projects)]
        answered += [(q, g, proj) for q, g, proj in recall_sets.persona_chats(projects)]
        conn = lcm.vault.db.connect()
        lcm.capture.bulk.ingest_paths(conn, [projects])
        coding_cwd = None
        if bench.SHARED.exists():
            lcm.capture.bulk.ingest_paths(conn, [bench.SHARED])
            for question, passage in bench.CODING:
                golds = bench.gold_sets(conn, [passage])[0]
                cwd = conn.execute("SELECT s.project FROM messages m JOIN sessions s USING (session_id)"
                                   " WHERE m.uuid = ?", (next(iter(golds)),)).fetchone()[0]
                answered.append((question, [passage], cwd))
                coding_cwd = coding_cwd or cwd
        new_work = [(q, chat if i % 2 else (coding_cwd or chat)) for i, q in enumerate(NEW_WORK)]
        report = {"bench": "auto_recall", "answered_prompts": len(answered), "new_work_prompts": len(new_work),
                  "default_floor": hook.COVERAGE_FLOOR}
        for floor in floors:
            holds = injected = 0
            times = []
            for question, golds, cwd in answered:
                gold = set().union(*bench.gold_sets(conn, golds))
                started = time.perf_counter()
                hits = hook.find(conn, question, cwd, floor=floor, hits=args.hits * 2)[:args.hits]
                times.append((time.perf_counter() - started) * 1000)
                injected += bool(hits)
                holds += any(h["id"] in gold or h.get("uuid") in gold for h in hits)
            silent = 0
            for prompt, cwd in new_work:
                started = time.perf_counter()
                silent += not hook.find(conn, prompt, cwd, floor=floor)
                times.append((time.perf_counter() - started) * 1000)
            report[f"floor_{floor}"] = {
                "answered_holds": round(holds / len(answered), 3), "answered_injected": round(injected / len(answered), 3),
                "precision": round(holds / injected, 3) if injected else None,
                "new_work_silent": round(silent / len(new_work), 3), "median_ms": round(statistics.median(times), 1)}
        print(json.dumps(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

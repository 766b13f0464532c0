"""Benchmark lcm_llm_map.py against a fake Messages API on 127.0.0.1 (the real anthropic SDK).

1. Throughput: 1,000 items, the fake answering each call after 200 ms, concurrency 16. The ideal
   is 16 / 0.2 s = 80 items/s; the target is at least 90 % of it. Timed in-process around main()
   with the SDK already imported (its ~1.5 s import is a one-off start-up cost, reported apart).
2. Memory: the script run as a subprocess over growing inputs (default 1,000 / 10,000 / 100,000
   items, instant answers); peak RSS of that process from getrusage(RUSAGE_CHILDREN) in a wrapper.
   Target: flat as the item count grows, under 200 MB at 100,000 items.

The fake runs in its own process so it does not compete with the map for the GIL.
Prints one JSON line.

Usage:
  python bench/map.py [--items 1000] [--delay 0.2] [--concurrency 16] [--memory-sizes 1000,10000,100000]
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "lcm_llm_map.py"
ANSWER = '{"label": "ok"}'

FAKE_SERVER = r"""
import sys
sys.path.insert(0, sys.argv[2])
from fake_anthropic import FakeAnthropic, Reply
delay = float(sys.argv[1])
class Fake(FakeAnthropic):
    def _make_handler(self):
        handler = super()._make_handler()
        # headers and body go out as two writes: without TCP_NODELAY, Nagle + delayed ACK add ~40 ms
        # to every reply, which the real API does not
        handler.disable_nagle_algorithm = True
        return handler
api = Fake(default_text=%r)
api.respond(lambda body: Reply(text=%r, delay=delay))
api.requests = type("Discard", (list,), {"append": lambda self, x: None})()  # keep the fake's memory flat
api.log = api.requests
api.start()
print(api.url, flush=True)
sys.stdin.read()  # serve until the parent closes our stdin
api.stop()
""" % (ANSWER, ANSWER)

MEASURE = ("import resource, subprocess, sys; r = subprocess.run(sys.argv[1:], stdout=subprocess.PIPE); "
           "print(json.dumps({'maxrss_kb': resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, "
           "'code': r.returncode, 'stdout': r.stdout.decode()}))")


@contextlib.contextmanager
def fake_api(delay: float):
    proc = subprocess.Popen([sys.executable, "-c", FAKE_SERVER, str(delay), str(ROOT / "tests")],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        yield proc.stdout.readline().strip()
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)


def write_input(path: Path, count: int) -> None:
    with path.open("w") as out:
        for i in range(count):
            out.write(json.dumps({"id": i, "text": f"review number {i}: the product arrived on time and works"}) + "\n")


def environment(url: str, home: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LCM_", "ANTHROPIC_", "CLAUDE"))}
    env.update({"ANTHROPIC_BASE_URL": url, "ANTHROPIC_API_KEY": "sk-ant-fake", "LCM_LLM": "anthropic",
                "LCM_HOME": str(home)})
    return env


def throughput(work: Path, items: int, delay: float, concurrency: int) -> dict:
    sys.path.insert(0, str(ROOT / "scripts"))
    started = time.perf_counter()
    import anthropic  # noqa: F401  (start-up cost, measured apart)
    import lcm_llm_map
    import_seconds = time.perf_counter() - started
    write_input(work / "tp.jsonl", items)
    with fake_api(delay) as url:
        os.environ.update(environment(url, work / "tp-home"))
        out = io.StringIO()
        started = time.perf_counter()
        with contextlib.redirect_stdout(out):
            code = lcm_llm_map.main(["--input", str(work / "tp.jsonl"), "--output", str(work / "tp.out"),
                                     "--prompt", "Label the review.", "--concurrency", str(concurrency)])
        seconds = time.perf_counter() - started
    summary = json.loads(out.getvalue())
    assert code == 0 and summary["succeeded"] == items, summary
    ideal = concurrency / delay
    rate = items / seconds
    return {"items": items, "delay_s": delay, "concurrency": concurrency, "seconds": round(seconds, 2),
            "items_per_s": round(rate, 1), "ideal_items_per_s": round(ideal, 1),
            "fraction_of_ideal": round(rate / ideal, 3), "target_fraction": 0.9, "pass": rate / ideal >= 0.9,
            "sdk_import_s": round(import_seconds, 2)}


def memory(work: Path, sizes: list[int], concurrency: int) -> dict:
    runs = []
    with fake_api(0.0) as url:
        env = environment(url, work / "mem-home")
        for count in sizes:
            write_input(work / f"mem{count}.jsonl", count)
            started = time.perf_counter()
            done = subprocess.run(
                [sys.executable, "-c", "import json; " + MEASURE, sys.executable, str(SCRIPT),
                 "--input", str(work / f"mem{count}.jsonl"), "--output", str(work / f"mem{count}.out"),
                 "--prompt", "Label the review.", "--concurrency", str(concurrency)],
                env=env, capture_output=True, text=True)
            measured = json.loads(done.stdout)
            summary = json.loads(measured["stdout"])
            assert measured["code"] == 0 and summary["succeeded"] == count, (done.stderr, measured)
            runs.append({"items": count, "peak_rss_mb": round(measured["maxrss_kb"] / 1024, 1),
                         "seconds": round(time.perf_counter() - started, 1)})
            (work / f"mem{count}.jsonl").unlink()
            (work / f"mem{count}.out").unlink()
    peaks = [run["peak_rss_mb"] for run in runs]
    return {"runs": runs, "growth_mb": round(peaks[-1] - peaks[0], 1), "max_peak_rss_mb": max(peaks),
            "target_mb": 200, "pass": max(peaks) < 200}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--items", type=int, default=1000)
    p.add_argument("--delay", type=float, default=0.2)
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--memory-sizes", default="1000,10000,100000")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="lcm-bench-map-") as tmp:
        work = Path(tmp)
        result = {"bench": "map",
                  "throughput": throughput(work, args.items, args.delay, args.concurrency),
                  "memory": memory(work, [int(n) for n in args.memory_sizes.split(",")], args.concurrency)}
    print(json.dumps(result))
    return 0 if result["throughput"]["pass"] and result["memory"]["pass"] else 1


if __name__ == "__main__":
    sys.exit(main())

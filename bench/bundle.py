"""Bundles at scale: write one of a whole vault, merge it into an empty one, merge it again.

Usage:
  python3 bench/bundle.py [--corpus DIR] [--work DIR]

Imports --corpus (bench/gen_corpus.py --messages 100000) into a vault under --work, then runs,
each as its own process with stderr on a pseudo-terminal (so the progress bar shows, as it
would for a person): `lcm_export.py --bundle --all` (masked, the default), the same
`--unmasked`, `lcm_ingest.py BUNDLE` into an empty vault, and that merge again (adds nothing).
Target (issue 34): 100k messages written and merged in under 30 s each. Prints one JSON line:
messages, bundle sizes, seconds of each step (wall, and CPU: user + system of the process and
its children), whether a progress bar was drawn, and the check that the merged vault holds every
message. The bulk import of the same corpus is timed too, for scale.
"""
from __future__ import annotations

import argparse
import fcntl
import json
import os
import pty
import resource
import shutil
import sqlite3
import struct
import subprocess
import sys
import termios
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPTS = os.path.join(ROOT, "scripts")
TARGET_SECONDS = 30.0


def on_terminal(argv: list[str]) -> tuple[float, str, str]:
    """(seconds, stdout, what the command drew on its terminal stderr) of one process; its CPU
    seconds (user + system) in CPU[0]: on a loaded machine the wall clock measures the others."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    master, slave = pty.openpty()
    # a terminal's size, as a person's has (a new pseudo-terminal is 0 columns wide: tqdm draws nothing)
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    started = time.perf_counter()
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=slave)
    os.close(slave)
    drawn = bytearray()
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the command closed its end
            break
        if not chunk:
            break
        drawn += chunk
    out = proc.stdout.read().decode()
    if proc.wait() != 0:
        raise SystemExit(f"{argv} failed: {drawn.decode(errors='replace')}")
    os.close(master)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    CPU[0] = round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 2)
    return time.perf_counter() - started, out, drawn.decode(errors="replace")


CPU = [0.0]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--corpus", default="/tmp/lcm-bench/corpus-100k")
    p.add_argument("--work", default="/tmp/lcm-bench/bundle")
    args = p.parse_args()
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    source, target = os.path.join(args.work, "source.db"), os.path.join(args.work, "merged.db")
    py = sys.executable
    took, _, _ = on_terminal([py, os.path.join(SCRIPTS, "lcm_ingest.py"), "--db", source, args.corpus, "--json"])
    figures: dict = {"ingest_seconds": round(took, 2), "ingest_cpu_seconds": CPU[0]}  # the bulk import, for scale
    masked, exact = os.path.join(args.work, "masked.lcmb"), os.path.join(args.work, "exact.lcmb")
    took, _, drawn = on_terminal([py, os.path.join(SCRIPTS, "lcm_export.py"), "--db", source, "--bundle", masked, "--all"])
    figures.update(write_seconds=round(took, 2), write_cpu_seconds=CPU[0], write_progress="bundle:" in drawn)
    took, _, _ = on_terminal([py, os.path.join(SCRIPTS, "lcm_export.py"), "--db", source, "--bundle", exact, "--all",
                              "--unmasked"])
    figures.update(write_unmasked_seconds=round(took, 2), write_unmasked_cpu_seconds=CPU[0])
    took, out, drawn = on_terminal([py, os.path.join(SCRIPTS, "lcm_ingest.py"), "--db", target, exact, "--json"])
    figures.update(merge_seconds=round(took, 2), merge_cpu_seconds=CPU[0], merge_progress="merge:" in drawn,
                   merged=json.loads(out)["messages_added"])
    took, out, _ = on_terminal([py, os.path.join(SCRIPTS, "lcm_ingest.py"), "--db", target, exact, "--json"])
    figures.update(merge_again_seconds=round(took, 2), merge_again_cpu_seconds=CPU[0],
                   merged_again=json.loads(out)["messages_added"])
    count = lambda db: sqlite3.connect(db).execute("SELECT count(*) FROM messages").fetchone()[0]  # noqa: E731
    figures.update(messages=count(source), merged_vault_messages=count(target),
                   bundle_bytes=os.path.getsize(masked), unmasked_bundle_bytes=os.path.getsize(exact),
                   corpus_bytes=sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(args.corpus) for f in fs),
                   target_seconds=TARGET_SECONDS)
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

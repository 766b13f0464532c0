"""What the process benchmarks share (bench/grep.py, hooks.py, hook_ingest.py)."""
from __future__ import annotations

import shutil
import subprocess
import sys


def real_python() -> str:
    """The interpreter `python3` on PATH really is: the one hooks.json and SKILL.md's commands run.
    A pyenv shim is a shell script whose own start-up (100+ ms) would swamp both sides of a ratio."""
    exe = shutil.which("python3") or sys.executable
    out = subprocess.run([exe, "-c", "import sys; print(sys.executable)"], capture_output=True, text=True)
    return out.stdout.strip() or exe

"""Which Pythons lcm runs on: 3.9 (macOS's own python3) to the newest, and on Windows no POSIX-only
module may be needed just to import it.

The version tests run real interpreters: pyenv's binaries under ~/.pyenv/versions, or pythonX.Y on
PATH when it answers. A pyenv shim that has no such version installed exits 127, so an interpreter
counts only once it has printed its own version; otherwise the test skips and says why.
"""
from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "scripts"
# the oldest Python pyproject.toml accepts, and the newest this suite knows of
OLDEST, NEWEST = (3, 9), (3, 13)


def _answers(path: str, version: tuple[int, int]) -> bool:
    try:
        done = subprocess.run([path, "-S", "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                              capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0 and done.stdout.strip() == "%d.%d" % version


def real_python(version: tuple[int, int]) -> str | None:
    """A Python of this minor version that really runs (not a shim exiting 127), else None. Read
    while HOME is still the real one (each test gets its own): call it at import."""
    minor = "%d.%d" % version
    home = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")
    candidates = sorted(glob.glob(str(home / "versions" / f"{minor}.*" / "bin" / f"python{minor}")), reverse=True)
    on_path = shutil.which(f"python{minor}")
    if on_path:
        candidates.append(on_path)
    return next((c for c in candidates if _answers(c, version)), None)


def installed_pythons() -> dict[tuple[int, int], str]:
    """Every minor version from OLDEST to NEWEST that runs here."""
    found = {}
    for minor in range(OLDEST[1], NEWEST[1] + 1):
        path = real_python((3, minor))
        if path:
            found[(3, minor)] = path
    return found


PYTHONS = installed_pythons()


def python_for(version: tuple[int, int]) -> str:
    path = PYTHONS.get(version)
    if path is None:
        pytest.skip("no Python %d.%d runs here (looked in ~/.pyenv/versions/%d.%d.*/bin and for "
                    "python%d.%d on PATH)" % (version * 4))
    return path


def test_pyproject_accepts_the_oldest_python():
    text = (ROOT / "pyproject.toml").read_text()
    assert 'requires-python = ">=3.9"' in text
    assert "3.9+" in (ROOT / "README.md").read_text()


# A finder that refuses what Windows lacks, installed before anything of lcm is imported; then
# every module of the package, every command and every hook is imported by name.
IMPORT_EVERYTHING = r"""
import importlib, importlib.abc, os, pkgutil, sys
POSIX_ONLY = {"fcntl", "resource", "termios", "pwd", "grp", "tty", "pty"}

class RefusePosixOnly(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in POSIX_ONLY:
            raise ModuleNotFoundError("No module named %r (refused: not on Windows)" % name, name=name)
        return None

for name in POSIX_ONLY:
    sys.modules.pop(name, None)
sys.meta_path.insert(0, RefusePosixOnly())
scripts, hooks = sys.argv[1], sys.argv[2]
sys.path[:0] = [scripts, hooks]
import lcm
names = [m.name for m in pkgutil.walk_packages(lcm.__path__, "lcm.")]
names += sorted(f[:-3] for f in os.listdir(scripts) if f.startswith("lcm_") and f.endswith(".py"))
names += sorted(f[:-3] for f in os.listdir(hooks) if f.endswith(".py"))
failed = {}
for name in names:
    try:
        importlib.import_module(name)
    except Exception as exc:
        failed[name] = repr(exc)
print(len(names), failed)
"""


def test_nothing_posix_only_is_imported_at_load():
    """Windows has no fcntl, resource, termios, pwd or grp: a module that imports one at its top
    cannot even be imported there (lcm.care.installation imported fcntl, and so broke every
    command that loads the doctor). Each is imported inside the function that uses it, with a
    fallback."""
    done = subprocess.run([sys.executable, "-c", IMPORT_EVERYTHING, str(SCRIPTS), str(ROOT / "hooks")],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    count, failed = done.stdout.strip().split(" ", 1)
    assert int(count) > 60, done.stdout  # the whole package, the commands and the hooks
    assert failed == "{}", failed


def test_the_finder_does_refuse_a_posix_only_module():
    """The near miss: the check above would pass vacuously if the finder let fcntl through."""
    probe = IMPORT_EVERYTHING.split("scripts, hooks =")[0] + "import fcntl\n"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "refused: not on Windows" in done.stderr


@pytest.mark.parametrize("version", [(3, m) for m in range(OLDEST[1], NEWEST[1] + 1)],
                         ids=lambda v: "%d.%d" % v)
def test_core_commands_run_on_every_supported_python(tmp_path, version):
    """On each Python from 3.9 to the newest, the core path a person takes with only the standard
    library: import transcripts, search them, read the status, compact without a model."""
    python = python_for(version)
    sys.path.insert(0, str(ROOT / "tests"))
    from transcripts import coding_session
    t = coding_session(tmp_path / "projects", turns=40, session_id="s-py", cwd=str(tmp_path))
    t.write()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LCM_", "CLAUDE", "ANTHROPIC_", "PYTHON"))}
    env.update({"HOME": str(tmp_path), "LCM_HOME": str(tmp_path / "lcm"), "LCM_LLM": "none",
                "LCM_LEAF_CHUNK_TOKENS": "1500", "LCM_LEAF_MIN_TOKENS": "300", "LCM_FRESH_TAIL_COUNT": "4"})

    def run(script: str, *args: str) -> str:
        done = subprocess.run([python, "-S", str(SCRIPTS / f"{script}.py"), *args], env=env, cwd=tmp_path,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0 and "Traceback" not in done.stderr, f"{script}: {done.stderr}"
        return done.stdout

    run("lcm_ingest", str(tmp_path / "projects"))
    found = json.loads(run("lcm_grep", "--json", "--all-sessions", "parser"))
    assert found["count"] > 0
    compacted = json.loads(run("lcm_compact", "--session", "s-py", "--json"))
    assert compacted["leaf_created"] > 0 and compacted["tokens_after"] < compacted["tokens_before"], compacted
    status = json.loads(run("lcm_status", "--json", "--session", "s-py"))
    assert status["messages"] == len(t.entries) and status["summaries"] == compacted["leaf_created"], status

"""Shared fixtures: every test gets its own HOME and vault; nothing touches the network."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = ROOT / "scripts"
SHARED_DATA = ROOT.parent / "shared" / "data"
sys.path.insert(0, str(SCRIPTS))
sys.path.insert(0, str(Path(__file__).resolve().parent))
# tests are filed by subject (tests/<wing>/), and some share helpers across subjects
# (test_hooks.run_hook, test_mask.SAMPLES): every subject folder is importable by module name
sys.path[1:1] = [str(p) for p in sorted(Path(__file__).resolve().parent.iterdir())
                 if p.is_dir() and not p.name.startswith((".", "__"))]

# the fake Messages API and the fake `claude` executable: fixtures fake_api and fake_claude
pytest_plugins = ["fake_anthropic"]
# Commands print `lcm <verb> ...` when an `lcm` is on PATH, else `python3 <scripts>/lcm_<verb>.py`
# (lcm.base.shell.command_prefix). The tests expect the second: an `lcm` installed on this machine must
# not change what they see. Done before any test imports lcm.cli, which decides once.
os.environ["PATH"] = os.pathsep.join(
    d for d in os.environ.get("PATH", "").split(os.pathsep) if not (d and os.path.isfile(os.path.join(d, "lcm"))))

# Hypothesis keeps its examples outside the clone (by default in ./.hypothesis), so installing the
# plugin from a clone that ran the tests does not copy them; read before a test changes HOME
HYPOTHESIS_DIR = Path(os.environ.get("HYPOTHESIS_STORAGE_DIRECTORY")
                      or Path.home() / ".cache" / "lcm" / "hypothesis")
os.environ["HYPOTHESIS_STORAGE_DIRECTORY"] = str(HYPOTHESIS_DIR)
try:
    from hypothesis import settings
    from hypothesis.database import DirectoryBasedExampleDatabase
except ImportError:  # only some tests need it
    pass
else:
    # on top of the profile Hypothesis chose (under CI=true its "ci" one: derandomized, no database)
    database = settings.default.database and DirectoryBasedExampleDatabase(str(HYPOTHESIS_DIR / "examples"))
    settings.register_profile("lcm", parent=settings.default, database=database)
    settings.load_profile("lcm")


def pytest_collection_modifyitems(items):
    """A test that drives a real browser (the `browser` fixture of tests/view) is slow, like the
    kill loops, installs and real-CLI runs marked in their files: `-m "not slow"` leaves it out."""
    for item in items:
        if "browser" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(autouse=True)
def isolated_home(tmp_path, monkeypatch):
    """A private HOME, LCM_HOME and vault; no inherited LCM_* or Claude Code variables; no automatic backups."""
    for name in list(os.environ):
        if name.startswith(("LCM_", "CLAUDE", "ANTHROPIC_")):
            monkeypatch.delenv(name, raising=False)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("LCM_HOME", str(home / ".claude-lcm"))
    # a Stop hook would start a detached backup in every test that runs one: tests/care/test_backup.py
    # turns it on where it is the subject
    monkeypatch.setenv("LCM_BACKUP", "0")
    return home


@pytest.fixture
def vault(isolated_home):
    """Path of this test's vault (created on first connect)."""
    return isolated_home / ".claude-lcm" / "lcm.db"


def command(script: str, *args: str) -> str:
    """How commands print `script ARGS` in these tests (no `lcm` on PATH): python3 and its full path."""
    return " ".join(["python3", str(SCRIPTS / script), *args])


def run(capsys, module, *argv) -> tuple[int, str, str]:
    """Call a command's main() in-process: (exit code, stdout, stderr). `module` is the imported
    script (lcm_grep) or its name ("lcm_grep"); every argument is passed as a string."""
    if isinstance(module, str):
        import importlib
        module = importlib.import_module(module)
    code = module.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def on_terminal(argv: list, env: dict | None = None, stream: str = "stderr", columns: int = 100,
                timeout: float = 120) -> tuple[int, str, str]:
    """Run a command with `stream` (stderr or stdout) on a pseudo-terminal `columns` wide, as a
    person at a terminal sees it, the other stream piped and stdin empty: (exit code, the piped
    stream's text, everything drawn on the terminal)."""
    import fcntl
    import pty
    import struct
    import subprocess
    import termios
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    ends = {"stdout": follower, "stderr": subprocess.PIPE} if stream == "stdout" else \
        {"stdout": subprocess.PIPE, "stderr": follower}
    proc = subprocess.Popen([str(a) for a in argv], env=env, stdin=subprocess.DEVNULL, **ends)
    os.close(follower)
    drawn = b""
    try:
        while True:  # read as it draws: a full pty would block the command
            chunk = os.read(leader, 65536)
            if not chunk:
                break
            drawn += chunk
    except OSError:  # the command closed its end: all read
        pass
    finally:
        os.close(leader)
    piped = (proc.stderr if stream == "stdout" else proc.stdout).read().decode(errors="replace")
    return proc.wait(timeout=timeout), piped, drawn.decode(errors="replace")


def shared_data(*parts: str) -> Path:
    """A path under ../shared/data, or skip the test saying why (a user's clone has no shared/)."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{path} is absent: the shared transcripts ship only beside the development checkout")
    return path


def mount_tmpfs(path: Path, size: str) -> None:
    """Mount a small tmpfs at `path` (a full disk, or remount ro for a read-only one), or skip:
    it needs root, and root ignores file modes, so a tmpfs is how tests make real storage errors.
    The caller unmounts it (umount -l) in a finally."""
    import shutil
    import subprocess
    path.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("needs root to mount a small tmpfs")
    if subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                      capture_output=True).returncode != 0:
        pytest.skip("mount -t tmpfs is not allowed here")


def pytest_configure(config):
    # real transcripts name the models they ran on, some now deprecated; the SDK's notice about
    # that is not a fault of lcm and would bury real warnings
    config.addinivalue_line("filterwarnings", "ignore:The model .* is deprecated:DeprecationWarning")


def one_transcript(home, text: str = "hello world") -> None:
    """One Claude Code transcript of one user line under `home`'s ~/.claude/projects."""
    import json
    project = home / ".claude" / "projects" / "-tmp-x"
    project.mkdir(parents=True)
    line = {"type": "user", "sessionId": "s1", "uuid": "u1", "timestamp": "2026-01-01T00:00:00Z",
            "cwd": "/tmp/x", "message": {"role": "user", "content": text}}
    (project / "s1.jsonl").write_text(json.dumps(line) + "\n")

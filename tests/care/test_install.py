"""The `lcm` command as a person installs it from a clone: `pip install .` into a fresh
virtualenv, `pipx install .` and `uv tool install .`. Each gives `lcm --help`, and `lcm grep`,
`lcm sessions`, `lcm remember --list` print exactly what their scripts print.

The build needs hatchling from a package index (pip's build isolation): PyPI or a local mirror.
Without one these tests skip and say why. pipx and uv are installed once per machine into
~/.cache/lcm/tools-venv when absent from PATH.
"""
from __future__ import annotations

import json
import os
import sqlite3
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from transcripts import coding_session

pytestmark = pytest.mark.slow  # installs into fresh virtualenvs (pip, pipx, uv)

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "scripts"
REAL_HOME = Path.home()  # read before conftest moves HOME: pip's, pipx's and uv's caches live there
TOOLS_VENV = REAL_HOME / ".cache" / "lcm" / "tools-venv"
INSTALL_TIMEOUT = 300


def sh(argv, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=INSTALL_TIMEOUT, **kw)


def installer_env(**extra: str) -> dict:
    """For pip, pipx and uv: the real HOME, so their download caches make a rerun quick."""
    return {**os.environ, "HOME": str(REAL_HOME), **extra}


def plain_env(home: Path, path_head: list[Path] = ()) -> dict:
    """A user's shell: no lcm, Claude Code or test variables; PATH without any other `lcm`."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("LCM_", "CLAUDE", "ANTHROPIC_", "PYTHON", "VIRTUAL_ENV", "PIPX_", "UV_"))}
    path = [p for p in os.environ.get("PATH", "").split(os.pathsep) if p and not (Path(p) / "lcm").exists()]
    env["PATH"] = os.pathsep.join([str(p) for p in path_head] + path)
    env["HOME"] = str(home)
    return env


@pytest.fixture(scope="session")
def source(tmp_path_factory) -> Path:
    """What a clone holds for the build (copied, so the build leaves nothing in the checkout)."""
    src = tmp_path_factory.mktemp("clone")
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(ROOT / name, src / name)
    shutil.copytree(SCRIPTS, src / "scripts", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return src


@pytest.fixture(scope="session")
def pip_lcm(source, tmp_path_factory) -> Path:
    """`pip install .` in a fresh virtualenv: the path of its `lcm`."""
    venv = tmp_path_factory.mktemp("venv")
    made = sh([sys.executable, "-m", "venv", venv])
    assert made.returncode == 0, made.stderr
    pip = sh([venv / "bin" / "python", "-m", "pip", "install", "--disable-pip-version-check", "-q", "."],
             cwd=source, env=installer_env())
    if pip.returncode != 0 and "hatchling" in pip.stderr and ("No matching distribution" in pip.stderr
                                                               or "Could not find" in pip.stderr):
        pytest.skip(f"no package index to fetch hatchling for the build: {pip.stderr.strip()[-300:]}")
    assert pip.returncode == 0, pip.stdout + pip.stderr
    return venv / "bin" / "lcm"


def tool(name: str) -> str:
    """pipx or uv: from PATH, else installed once into ~/.cache/lcm/tools-venv; skip if it cannot be."""
    found = shutil.which(name) or (TOOLS_VENV / "bin" / name if (TOOLS_VENV / "bin" / name).exists() else None)
    if found:
        return str(found)
    if not (TOOLS_VENV / "bin" / "python").exists():
        sh([sys.executable, "-m", "venv", TOOLS_VENV])
    pip = sh([TOOLS_VENV / "bin" / "python", "-m", "pip", "install", "--disable-pip-version-check", "-q", name],
             env=installer_env())
    if pip.returncode != 0:
        pytest.skip(f"{name} is not on PATH and could not be installed: {pip.stderr.strip()[-300:]}")
    return str(TOOLS_VENV / "bin" / name)


@pytest.fixture(scope="session")
def pipx_lcm(source, tmp_path_factory) -> Path:
    where = tmp_path_factory.mktemp("pipx")
    env = installer_env(PIPX_HOME=str(where / "home"), PIPX_BIN_DIR=str(where / "bin"), PIPX_MAN_DIR=str(where / "man"))
    done = sh([tool("pipx"), "install", source], env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    return where / "bin" / "lcm"


@pytest.fixture(scope="session")
def uv_lcm(source, tmp_path_factory) -> Path:
    where = tmp_path_factory.mktemp("uv")
    env = installer_env(UV_TOOL_DIR=str(where / "tools"), UV_TOOL_BIN_DIR=str(where / "bin"))
    done = sh([tool("uv"), "tool", "install", source], env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    return where / "bin" / "lcm"


def script_names() -> list[str]:
    return sorted(p.stem for p in SCRIPTS.glob("lcm_*.py"))


def check_help(lcm: Path, home: Path) -> None:
    shown = sh([lcm, "--help"], env=plain_env(home))
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    for name in script_names():
        verb = name[len("lcm_"):].replace("_", "-")
        listed = [line for line in lines if line.split()[:1] == [verb]]
        assert len(listed) == 1, (verb, shown.stdout)
    # one line each, each a whole sentence (grep's once stopped at "names the")
    grep_line = next(line for line in lines if line.split()[:1] == ["grep"])
    assert grep_line.rstrip().endswith("."), grep_line


@pytest.mark.parametrize("installer", ["pip", "pipx", "uv"])
def test_installed_lcm_lists_every_command(installer, request, tmp_path):
    lcm = request.getfixturevalue(f"{installer}_lcm")
    check_help(lcm, tmp_path)
    one = sh([lcm, "grep", "--help"], env=plain_env(tmp_path))
    assert one.returncode == 0 and one.stdout.startswith("usage: lcm grep"), one.stdout + one.stderr
    unknown = sh([lcm, "grpe", "x"], env=plain_env(tmp_path))
    assert unknown.returncode == 2 and "Error:" in unknown.stderr and "lcm --help" in unknown.stderr


@pytest.fixture
def filled_home(tmp_path) -> Path:
    """A home with a Claude Code project transcript and one pinned note (via the script)."""
    home = tmp_path / "home"
    projects = home / ".claude" / "projects"
    coding_session(projects, turns=30, cwd=str(tmp_path / "proj")).write()
    (tmp_path / "proj").mkdir()
    env = plain_env(home)
    for argv in (["lcm_ingest.py", "--all"], ["lcm_remember.py", "deploys go through the canary first"]):
        done = sh([sys.executable, SCRIPTS / argv[0], *argv[1:]], env=env, cwd=tmp_path / "proj")
        assert done.returncode == 0, done.stderr
    return home


def prog_named(stderr: str, prog: str) -> str:
    """stderr without argparse's usage lines (wrapped to the program name's length), and with
    that name written as PROG in its error line."""
    kept = [line for line in stderr.splitlines() if not line.startswith(("usage:", " "))]
    return "\n".join(kept).replace(f"{prog}: error:", "PROG: error:")


@pytest.mark.parametrize("installer", ["pip", "pipx", "uv"])
def test_lcm_verbs_print_exactly_what_their_scripts_print(installer, request, filled_home, tmp_path):
    lcm = request.getfixturevalue(f"{installer}_lcm")
    # both in the same shell: `lcm` on PATH, so the scripts' Next: lines say `lcm ...` too
    env = plain_env(filled_home, [lcm.parent])
    cases = [["grep", "the"], ["grep", "canary", "--json"], ["grep", "nothing-matches-this"],
             ["sessions"], ["sessions", "--json"], ["remember", "--list"], ["remember", "--list", "--json"],
             ["sessions", "no-such-session"], ["grep", "--limit", "0", "x"]]
    for argv in cases:
        via_lcm = sh([lcm, *argv], env=env, cwd=tmp_path / "proj")
        script = SCRIPTS / f"lcm_{argv[0]}.py"
        via_script = sh([sys.executable, script, *argv[1:]], env=env, cwd=tmp_path / "proj")
        assert (via_lcm.returncode, via_lcm.stdout) == (via_script.returncode, via_script.stdout), argv
        # stderr too, but argparse's usage line names the program it was started as
        assert prog_named(via_lcm.stderr, "lcm " + argv[0]) == prog_named(via_script.stderr, script.name), argv
    listed = sh([lcm, "remember", "--list"], env=env, cwd=tmp_path / "proj")
    assert "deploys go through the canary first" in listed.stdout
    found = sh([lcm, "sessions"], env=env, cwd=tmp_path / "proj")
    assert found.returncode == 0 and found.stdout.strip()


def test_installed_lcm_compacts_with_a_model_from_its_own_prompts(pip_lcm, filled_home, tmp_path):
    """An installed `lcm compact` reads the summariser's prompts from the package it was installed
    as (no clone beside it) and writes model summaries: here through a fake `claude` on PATH, since
    a plain `pip install .` has no anthropic SDK."""
    from fake_anthropic import make_fake_claude
    fake = make_fake_claude(tmp_path / "fake-bin",
                            result="Leaf summary written by the model.\nExpand for details about: the tests.")
    env = {**plain_env(filled_home, [fake.dir]), "LCM_LLM": "claude", "LCM_FRESH_TAIL_COUNT": "4",
           "LCM_LEAF_MIN_TOKENS": "1", "LCM_LEAF_CHUNK_TOKENS": "800"}
    session = sh([pip_lcm, "sessions", "--json"], env=env, cwd=tmp_path / "proj")
    sid = json.loads(session.stdout)["sessions"][0]["id"]
    done = sh([pip_lcm, "compact", "--session", sid, "--json"], env=env, cwd=tmp_path / "proj")
    assert done.returncode == 0, done.stdout + done.stderr
    prompts = [c["prompt"] or c["stdin"] or "" for c in fake.calls()]
    assert prompts and all("Summarise this stretch of a coding session" in p for p in prompts[:1]), prompts[:1]
    db = filled_home / ".claude-lcm" / "lcm.db"
    levels = [r[0] for r in sqlite3.connect(db).execute("SELECT level FROM summaries")]
    assert levels and set(levels) <= {"normal", "aggressive"}, levels  # written by the model, not extracted


def test_plugin_bin_lcm_runs_with_the_plain_python3(filled_home, tmp_path):
    """bin/lcm, which Claude Code puts on the Bash tool's PATH: the clone's scripts, stdlib only."""
    env = plain_env(filled_home)
    check_help(ROOT / "bin" / "lcm", filled_home)
    via_bin = sh([ROOT / "bin" / "lcm", "remember", "--list"], env=env, cwd=tmp_path / "proj")
    via_script = sh([sys.executable, SCRIPTS / "lcm_remember.py", "--list"], env=env, cwd=tmp_path / "proj")
    assert via_bin.returncode == 0 and via_bin.stdout == via_script.stdout


def test_pyproject_installs_every_script_and_matches_the_plugin_version():
    import json
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    included = project["tool"]["hatch"]["build"]["targets"]["wheel"]["only-include"]
    assert sorted(included) == ["scripts/lcm"] + [f"scripts/{name}.py" for name in script_names()]
    plugin = json.loads((ROOT / ".claude-plugin" / "plugin.json").read_text())
    assert project["project"]["version"] == plugin["version"]
    assert project["project"]["scripts"]["lcm"] == "lcm.entry:console"


def readme_install_command() -> str:
    """The first command of the README's block that installs the `lcm` command."""
    import re
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## The `lcm` command", 1)[1].split("\n## ", 1)[0]
    block = re.findall(r"```bash\n(.*?)```", section, flags=re.S)[0]
    return block.splitlines()[0].split("#")[0].strip()


def test_the_readme_install_leaves_the_clone_as_it_was(tmp_path):
    """Installing the plugin from a local clone copies the whole directory, so what the README's
    `pipx install .` writes into the clone travels with it. setuptools left `build/` and
    `scripts/lcm_claude.egg-info/` there; the build must leave no new file."""
    command = readme_install_command()
    assert command == "pipx install ."
    clone = tmp_path / "clone"
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True)
    if tracked.returncode != 0:
        pytest.skip(f"{ROOT} is not a git checkout: a clone is made of its tracked files")
    for name in filter(None, tracked.stdout.split("\0")):
        if (ROOT / name).is_file():
            (clone / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, clone / name)

    def listing() -> set:
        return {str(Path(d, f).relative_to(clone)) for d, dirs, names in os.walk(clone) for f in names + dirs}

    before = listing()
    where = tmp_path / "pipx"
    env = installer_env(PIPX_HOME=str(where / "home"), PIPX_BIN_DIR=str(where / "bin"), PIPX_MAN_DIR=str(where / "man"))
    done = sh([tool("pipx"), *command.split()[1:]], cwd=clone, env=env)
    if done.returncode != 0 and "hatchling" in done.stderr and "No matching distribution" in done.stderr:
        pytest.skip(f"no package index to fetch hatchling for the build: {done.stderr.strip()[-300:]}")
    assert done.returncode == 0, done.stdout + done.stderr
    assert (where / "bin" / "lcm").exists()
    assert listing() - before == set()

"""The README's quick start is exactly two commands, and CI runs the test one verbatim."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from conftest import ROOT


def quick_start_commands() -> list[str]:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```bash\n(.*?)```", section, flags=re.S)
    return [line for block in blocks for line in block.splitlines() if line.strip()]


def test_quick_start_is_two_commands():
    commands = quick_start_commands()
    assert len(commands) == 2
    run, install_and_test = commands
    assert "lcm_ingest.py --all" in run and "lcm_status.py" in run
    assert "requirements-dev.txt" in install_and_test and "pytest" in install_and_test


def test_the_main_job_runs_with_the_standard_library_alone(tmp_path):
    """The first command needs no virtualenv and no pip: a python3 without site-packages runs it."""
    run = quick_start_commands()[0]
    assert "pip" not in run and "venv" not in run
    bare = tmp_path / "bin"
    bare.mkdir()
    (bare / "python3").write_text(f'#!/bin/sh\nexec "{sys.executable}" -S "$@"\n')
    (bare / "python3").chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LCM_", "CLAUDE", "PYTHON"))}
    env.update({"HOME": str(tmp_path), "PATH": f"{bare}{os.pathsep}{os.environ['PATH']}"})
    proc = subprocess.run(["bash", "-c", run], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "Vault " in proc.stdout and (tmp_path / ".claude-lcm" / "lcm.db").is_file()


def test_the_tests_keep_their_environment_and_caches_out_of_the_clone():
    """A plugin install copies the clone's whole directory: no virtualenv or cache may land in it."""
    test_command = quick_start_commands()[1]
    venvs = re.findall(r"-m venv (\S+)", test_command)
    assert venvs and all(v.startswith(("~/", "/", "$")) for v in venvs), venvs
    assert "-p no:cacheprovider" in test_command  # else pytest writes .pytest_cache into the clone
    assert not Path(os.environ["HYPOTHESIS_STORAGE_DIRECTORY"]).resolve().is_relative_to(ROOT)


def test_ci_runs_the_readme_test_command_verbatim():
    test_command = quick_start_commands()[1]
    ci = (ROOT / ".ci" / "run").read_text()
    assert test_command in ci.splitlines()
    assert ci.startswith("#!/usr/bin/env bash") and "set -euo pipefail" in ci
    assert (ROOT / ".ci" / "run").stat().st_mode & 0o111


def test_readme_names_the_plugin_install():
    readme = (ROOT / "README.md").read_text()
    assert "claude plugin install lcm@lcm-tools" in readme
    assert "claude plugin marketplace add" in readme and "--plugin-dir" in readme

"""The README's quick start is exactly two commands, and CI runs the test one verbatim."""
from __future__ import annotations

import re

from conftest import ROOT


def quick_start_commands() -> list[str]:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```bash\n(.*?)```", section, flags=re.S)
    return [line for block in blocks for line in block.splitlines() if line.strip()]


def test_quick_start_is_two_commands():
    commands = quick_start_commands()
    assert len(commands) == 2
    install_and_run, install_and_test = commands
    assert "requirements.txt" in install_and_run and "lcm_ingest.py --all" in install_and_run
    assert "lcm_status.py" in install_and_run
    assert "requirements-dev.txt" in install_and_test and "pytest" in install_and_test


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

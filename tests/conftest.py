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


@pytest.fixture(autouse=True)
def isolated_home(tmp_path, monkeypatch):
    """A private HOME, LCM_HOME and vault; no inherited LCM_* or Claude Code variables."""
    for name in list(os.environ):
        if name.startswith(("LCM_", "CLAUDE", "ANTHROPIC_")):
            monkeypatch.delenv(name, raising=False)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("LCM_HOME", str(home / ".claude-lcm"))
    return home


@pytest.fixture
def vault(isolated_home):
    """Path of this test's vault (created on first connect)."""
    return isolated_home / ".claude-lcm" / "lcm.db"


def shared_data(*parts: str) -> Path:
    """A path under ../shared/data, or skip the test saying why (a user's clone has no shared/)."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{path} is absent: the shared transcripts ship only beside the development checkout")
    return path


def pytest_configure(config):
    # real transcripts name the models they ran on, some now deprecated; the SDK's notice about
    # that is not a fault of lcm and would bury real warnings
    config.addinivalue_line("filterwarnings", "ignore:The model .* is deprecated:DeprecationWarning")

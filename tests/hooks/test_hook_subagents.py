"""Hooks store the older layout's sub-agent transcripts (issue 23.8): Claude Code up to 2.0 wrote
them as `agent-*.jsonl` beside the session file, not under `<session>/subagents/`."""
from __future__ import annotations

import pytest
import json
import sqlite3

import lcm_ingest
from conftest import run, shared_data
from test_hooks import run_hook, stop
from transcripts import Transcript


def _uuids(vault) -> set[str]:
    return {r[0] for r in sqlite3.connect(vault).execute("SELECT uuid FROM messages")}


def _file_uuids(path) -> set[str]:
    found = set()
    for line in path.read_bytes().splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and entry.get("type") in ("user", "assistant", "system") and entry.get("uuid"):
            found.add(entry["uuid"])
    return found


def test_stop_stores_agent_files_beside_the_session(tmp_path, vault):
    projects = tmp_path / "projects"
    t = Transcript(projects)
    t.version = "2.0.37"  # the CLIs that wrote agent files beside the session
    t.user("review the parser")
    t.write()
    agent = Transcript(projects, agent_id="1a2b3c4d", layout="beside", parent=t)
    agent.version = t.version
    agent.user("Look for off-by-one errors in parser.py")
    agent.assistant_text("found one in parse_range")
    agent.write()
    assert run_hook("stop", stop(t), {"LCM_SUBAGENT": "1"}).returncode == 0
    assert _file_uuids(agent.path) <= _uuids(vault)
    agent.assistant_text("and a second one in parse_list")  # written after the hook ran
    agent.write()
    t.assistant_text("the reviewer found two")  # the next turn's hook catches it
    t.write()
    assert run_hook("stop", stop(t), {"LCM_SUBAGENT": "1"}).returncode == 0
    assert _file_uuids(agent.path) <= _uuids(vault)


@pytest.mark.slow  # every shared transcript hook by hook
def test_hooks_store_what_a_manual_import_stores_on_the_shared_data(tmp_path, capsys, vault, monkeypatch):
    data = shared_data("claude-projects")
    sessions = [p for p in sorted(data.glob("*/*.jsonl")) if not p.name.startswith("agent-")]
    agents = [p for p in sorted(data.glob("*/agent-*.jsonl"))]
    assert sessions and agents
    # Stop as Claude Code sends it at the end of each session's last turn (ingest only: no compaction)
    for path in sessions:
        payload = {"session_id": path.stem, "transcript_path": str(path), "cwd": "/tmp",
                   "hook_event_name": "Stop", "stop_hook_active": False}
        assert run_hook("stop", payload, {"LCM_SUBAGENT": "1"}).returncode == 0
    by_hooks = _uuids(vault)
    agent_uuids = set().union(*map(_file_uuids, agents))
    assert agent_uuids and agent_uuids <= by_hooks
    monkeypatch.setenv("LCM_DB", str(tmp_path / "manual.db"))
    assert run(capsys, lcm_ingest, data)[0] == 0
    assert by_hooks == _uuids(tmp_path / "manual.db")

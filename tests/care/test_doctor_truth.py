"""lcm_doctor.py tells the truth: the model backend by a probe that costs nothing, the hooks by
their last runs against the sessions recorded since, the plugin by the directory Claude Code
loads it from. Each failure is a problem whose hint leads somewhere new."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

import lcm_doctor
from conftest import ROOT, SCRIPTS, run

from test_plugin_e2e import require_claude  # found at collection, before a test's HOME and PATH change
from transcripts import coding_session


@pytest.fixture
def vault_ready(isolated_home, monkeypatch, capsys):
    import lcm_init
    assert run(capsys, lcm_init)[0] == 0
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # no real claude on PATH unless a test puts a fake there


def _doctor(capsys) -> dict:
    code, out, err = run(capsys, lcm_doctor, "--json")
    doc = json.loads(out)
    assert code == (1 if doc["problems"] else 0), err
    return doc


def _leads_somewhere_new(hint: str | None) -> None:
    assert hint, "a problem without a hint"
    assert "lcm_doctor.py" not in hint  # not the command that just reported it


# -- the model backend -----------------------------------------------------------

def test_claude_not_logged_in_is_a_problem(vault_ready, fake_claude, capsys):
    fake_claude.log_out()
    doc = _doctor(capsys)
    b = doc["backend"]
    assert b["backend"] == "claude" and b["status"] == "problem" and b["verified"] is False
    assert "not logged in" in b["detail"] and "claude auth login" in b["hint"]
    _leads_somewhere_new(b["hint"])
    assert fake_claude.calls() == []  # probing ran no prompt
    _, out, _ = run(capsys, lcm_doctor)
    assert "PROBLEM  model backend" in out and "Healthy" not in out


def test_the_real_claude_cli_reports_a_missing_login(vault_ready, monkeypatch, capsys):
    """The probe against the real CLI (2.1.197 on CI), in a fresh HOME: `claude auth status` answers
    offline, and no login is a problem, not an OK."""
    real = require_claude()
    monkeypatch.setenv("PATH", f"{os.path.dirname(real)}:/usr/bin:/bin")
    monkeypatch.setenv("DISABLE_AUTOUPDATER", "1")
    monkeypatch.setenv("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
    b = _doctor(capsys)["backend"]
    assert b["backend"] == "claude" and b["status"] == "problem" and "not logged in" in b["detail"], b
    assert "claude auth login" in b["hint"]


def test_claude_logged_in_is_ok(vault_ready, fake_claude, capsys):
    b = _doctor(capsys)["backend"]
    assert b["backend"] == "claude" and b["status"] == "ok" and "logged in" in b["detail"]


def _doctor_in_child(env: dict, *python_flags: str) -> dict:
    proc = subprocess.run([sys.executable, *python_flags, str(SCRIPTS / "lcm_doctor.py"), "--json"],
                          capture_output=True, text=True, env=env, timeout=120)
    assert "Traceback" not in proc.stderr, proc.stderr
    return json.loads(proc.stdout)


def test_key_set_but_anthropic_not_installed(vault_ready):
    """-S leaves site-packages out: the package is missing as on a machine that never installed it."""
    env = {**os.environ, "ANTHROPIC_API_KEY": "sk-ant-some-key"}
    b = _doctor_in_child(env, "-S")["backend"]
    assert b["status"] == "problem" and "not installed" in b["detail"]
    assert "pip install" in b["hint"] and "ANTHROPIC_API_KEY" not in b["hint"].replace("ANTHROPIC_API_KEY is set", "")
    _leads_somewhere_new(b["hint"])


def test_key_set_but_anthropic_cannot_be_imported(vault_ready, tmp_path):
    """A broken install: the package is found but its import fails."""
    shadow = tmp_path / "shadow" / "anthropic"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('broken install: no module named httpx')\n")
    env = {**os.environ, "ANTHROPIC_API_KEY": "sk-ant-some-key", "PYTHONPATH": str(shadow.parent)}
    b = _doctor_in_child(env)["backend"]
    assert b["backend"] == "anthropic" and b["status"] == "problem" and "broken install" in b["detail"]
    assert "pip install" in b["hint"] and "export ANTHROPIC_API_KEY" not in b["hint"]
    _leads_somewhere_new(b["hint"])


def test_a_key_the_api_refuses_is_a_problem(vault_ready, fake_api, capsys):
    fake_api.refused_keys.add("sk-ant-fake-key")
    b = _doctor(capsys)["backend"]
    assert b["backend"] == "anthropic" and b["status"] == "problem" and "refused the key" in b["detail"]
    assert "401" in b["detail"] and "console.anthropic.com" in b["hint"]
    _leads_somewhere_new(b["hint"])
    assert [(r.method, r.path) for r in fake_api.log] == [("GET", "/v1/models")]  # no paid request


def test_an_accepted_key_is_ok_and_costs_nothing(vault_ready, fake_api, capsys):
    b = _doctor(capsys)["backend"]
    assert b["status"] == "ok" and b["verified"] is True and "accepted the key" in b["detail"]
    assert fake_api.requests == []  # no Messages request was made


def test_an_unreachable_api_is_unverified_not_ok(vault_ready, monkeypatch, capsys):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-some-key")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")  # discard port: nothing listens
    b = _doctor(capsys)["backend"]
    assert b["status"] == "warn" and b["verified"] is None and "unverified" in b["detail"]


# -- hooks and the plugin's source ---------------------------------------------------

def _install_plugin(home, clone) -> None:
    """Claude Code's own records of `plugin marketplace add CLONE` + `plugin install lcm@lcm-tools`
    (the shapes 2.1.197 wrote in CLAUDE_CODE.md section 6)."""
    plugins = home / ".claude" / "plugins"
    plugins.mkdir(parents=True, exist_ok=True)
    (home / ".claude" / "settings.json").write_text(json.dumps({"enabledPlugins": {"lcm@lcm-tools": True}}))
    (plugins / "known_marketplaces.json").write_text(json.dumps(
        {"lcm-tools": {"source": {"source": "directory", "path": str(clone)}, "installLocation": str(clone)}}))
    (plugins / "installed_plugins.json").write_text(json.dumps(
        {"version": 2, "plugins": {"lcm@lcm-tools": [{"scope": "user", "installPath": str(clone)}]}}))


def _stamp(event: str, seconds_ago: float) -> None:
    path = os.path.join(os.environ["LCM_HOME"], "last-run", event)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    open(path, "w").close()
    then = time.time() - seconds_ago
    os.utime(path, (then, then))


def test_sessions_no_hook_saw_are_a_problem(vault_ready, isolated_home, monkeypatch, capsys):
    monkeypatch.setenv("LCM_LLM", "none")
    _install_plugin(isolated_home, ROOT)
    _stamp("Stop", 3 * 3600)
    old = coding_session(isolated_home / ".claude" / "projects", turns=1)
    old.write()
    os.utime(old.path, (time.time() - 4 * 3600,) * 2)
    assert _doctor(capsys)["hooks"]["status"] == "ok"  # that session ran while the hooks did
    coding_session(isolated_home / ".claude" / "projects", turns=1).write()  # a session of now
    h = _doctor(capsys)["hooks"]
    assert h["status"] == "problem" and h["unseen_sessions"] == 1
    assert "no lcm hook saw" in h["problem"] and "claude plugin list" in h["hint"]
    _leads_somewhere_new(h["hint"])


def _installed_hours_ago(home, hours: float) -> None:
    then = time.time() - hours * 3600
    for path in (home / ".claude" / "settings.json", home / ".claude" / "plugins" / "installed_plugins.json"):
        os.utime(path, (then, then))


def test_hooks_that_never_ran_since_install_are_a_problem(vault_ready, isolated_home, monkeypatch, capsys):
    monkeypatch.setenv("LCM_LLM", "none")
    _install_plugin(isolated_home, ROOT)
    _installed_hours_ago(isolated_home, 2)
    coding_session(isolated_home / ".claude" / "projects", turns=1).write()    # a session of now
    h = _doctor(capsys)["hooks"]
    assert h["status"] == "problem" and h["unseen_sessions"] == 1
    assert "recorded 1 session since lcm was installed" in h["problem"] and "no lcm hook has run" in h["problem"]


def test_right_after_install_with_history_doctor_says_start_claude(vault_ready, isolated_home, monkeypatch, capsys):
    """The plugin was just installed over a year of history (written before it, sub-agent files
    beside it) and imported: no hook has run, and none should have. Not a problem."""
    monkeypatch.setenv("LCM_LLM", "none")
    projects = isolated_home / ".claude" / "projects"
    for _ in range(3):
        t = coding_session(projects, turns=1)
        t.write()
        (t.path.parent / f"agent-{t.session_id[:8]}.jsonl").write_text("")   # an old CLI's sub-agent file
        os.utime(t.path, (time.time() - 86400 * 30,) * 2)
    _install_plugin(isolated_home, ROOT)
    import lcm_ingest
    import lcm_sessions
    import lcm_status
    assert run(capsys, lcm_ingest, "--all")[0] == 0
    code, out, err = run(capsys, lcm_doctor)
    assert code == 0, out
    assert "start `claude` once" in out and "PROBLEM" not in out and "Healthy." in out
    # every count doctor prints is the one status and sessions print
    status = json.loads(run(capsys, lcm_status, "--json")[1])
    listed = json.loads(run(capsys, lcm_sessions, "--json")[1])
    assert status["sessions"] == listed["total"] == 3
    assert f"({status['sessions']} sessions, {status['messages']} messages, {status['summaries']} summaries)" in out
    code, out, err = run(capsys, lcm_ingest, "--all")                      # a re-import says the same
    assert "the vault holds 3 sessions" in out


def test_doctor_before_any_vault_exists_says_start_claude_once(isolated_home, monkeypatch, capsys):
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    _install_plugin(isolated_home, ROOT)
    coding_session(isolated_home / ".claude" / "projects", turns=1).write()  # history from before the install
    os.utime(isolated_home / ".claude" / "projects", None)
    for p in (isolated_home / ".claude" / "projects").rglob("*.jsonl"):
        os.utime(p, (time.time() - 86400,) * 2)
    code, out, err = run(capsys, lcm_doctor)
    assert code == 0 and err == ""
    assert out.count("\n") == 1 and "start `claude` once" in out and "lcm_ingest.py --all" in out
    assert not (isolated_home / ".claude-lcm" / "lcm.db").exists()          # doctor created nothing
    code, out, err = run(capsys, lcm_doctor, "--json")
    doc = json.loads(out)
    assert code == 0 and doc["fresh"] is True and doc["problems"] == 0
    code, out, err = run(capsys, lcm_doctor, "--fix")
    assert code == 0 and "start `claude` once" in out


def test_plugin_source_directory_gone_is_a_problem(vault_ready, isolated_home, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("LCM_LLM", "none")
    clone = tmp_path / "lcm-clone"
    (clone / "hooks").mkdir(parents=True)
    (clone / "scripts").mkdir()
    (clone / "hooks" / "hooks.json").write_text("{}")
    (clone / "scripts" / "lcm_grep.py").write_text("")
    _install_plugin(isolated_home, clone)
    _stamp("Stop", 10)
    assert _doctor(capsys)["hooks"]["status"] == "ok"
    clone.rename(tmp_path / "moved-clone")
    h = _doctor(capsys)["hooks"]
    assert h["status"] == "problem" and h["missing_sources"] == [str(clone)]
    assert "no longer holds the plugin" in h["problem"] and "claude plugin marketplace add" in h["hint"]
    _leads_somewhere_new(h["hint"])
    _, out, _ = run(capsys, lcm_doctor)
    assert "PROBLEM  hooks" in out and "Healthy" not in out

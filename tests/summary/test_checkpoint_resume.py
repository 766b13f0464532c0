"""Checkpoint and resume: the state of one session carried into the next, bounded, never lost."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

import lcm.summary.checkpoint

import lcm_checkpoint
import lcm.summary.compact
import lcm.base.config
import lcm.vault.db
import lcm.capture.bulk
import lcm.capture.ingest
import lcm_resume
from conftest import run, SCRIPTS, shared_data

from transcripts import Transcript, coding_session

REAL_PROJECT = "-Users-dain-workspace-JSSoundRecorder"
REAL_SESSION = "7acd37a8-2745-4b58-a8a9-46164b22ad9e"   # edits, a todo list left open
OTHER_PROJECT = "-Users-dain-workspace-claude-code-log-sample"
OTHER_SESSION = "326189cf-5676-4237-8cde-1ce80aae4a9f"



@pytest.fixture
def workspace(tmp_path, monkeypatch):
    root = tmp_path / "workspace"
    root.mkdir()
    monkeypatch.setenv("CLAUDE_PROJECT_DIR", str(root))
    return root


def ingest(*paths):
    conn = lcm.vault.db.connect()
    lcm.capture.bulk.ingest_paths(conn, [str(p) for p in paths])
    return conn


def test_checkpoint_then_resume_in_a_new_session_on_real_transcripts(workspace, monkeypatch, capsys):
    """Friday: checkpoint the real JSSoundRecorder session. Monday: another session resumes it."""
    data = shared_data("claude-projects")
    conn = ingest(data / REAL_PROJECT, data / OTHER_PROJECT / f"{OTHER_SESSION}.jsonl")
    assert conn.execute("SELECT count(DISTINCT session_id) FROM messages").fetchone()[0] >= 2

    monkeypatch.setenv("LCM_LLM", "none")
    monkeypatch.setenv("LCM_LEAF_CHUNK_TOKENS", "3000")      # small chunks: enough leaves to condense
    compacted = lcm.summary.compact.compact(conn, REAL_SESSION, mode="full")
    assert compacted["condensed_created"] >= 1
    top = conn.execute("SELECT id, depth FROM summaries WHERE session_id = ? AND parent_id IS NULL"
                       " ORDER BY depth DESC, first_message_id LIMIT 1", (REAL_SESSION,)).fetchone()

    monkeypatch.setenv("LCM_SESSION_ID", REAL_SESSION)
    code, out, err = run(capsys, lcm_checkpoint)
    assert code == 0, err
    checkpoint = (workspace / ".lcm-checkpoint.md").read_text()
    assert checkpoint.startswith("<!-- lcm-checkpoint: ")
    assert "js/lib/recorder.js" in checkpoint
    assert f"- {top['id']} (condensed, depth {top['depth']}," in checkpoint   # the DAG's top, with its id

    monkeypatch.setenv("LCM_SESSION_ID", OTHER_SESSION)       # a new session on Monday
    code, out, err = run(capsys, lcm_resume, "--max-tokens", "1500")
    assert code == 0, err
    assert lcm.base.config.estimate_tokens(out) <= 1500
    assert f"Resuming session {REAL_SESSION}" in out
    for edited in ("js/lib/recorder.js", "js/drone.js", "index.html"):
        assert f"/Users/dain/workspace/JSSoundRecorder/{edited}" in out
    assert "LATEST: Let's also Migrate to AudioWorklet" in out
    assert "[in_progress] Test recording with new AudioWorklet implementation" in out
    assert "[pending] Test drone synth with new AudioWorklet implementation" in out
    assert "WARNING" not in out
    assert "lcm_expand_query.py" in out                     # says how to drill further

    code, out, err = run(capsys, lcm_resume, "--max-tokens", "400", "--json")
    doc = json.loads(out)
    assert code == 0 and doc["tokens"] <= 400 and lcm.base.config.estimate_tokens(doc["text"]) <= 400
    assert doc["session_id"] == REAL_SESSION
    assert doc["top_summaries"][0]["id"] == top["id"]
    assert [t["content"] for t in doc["state"]["open_todos"]] == [
        "Test recording with new AudioWorklet implementation",
        "Test drone synth with new AudioWorklet implementation"]


def coding(tmp_path, turns=4, cwd=None, **kw):
    """A session of the workspace's project (its checkpoint file is this session's to write)."""
    t = coding_session(tmp_path / "projects", turns=turns, session_id="s-friday",
                       cwd=cwd or str(tmp_path / "workspace"), **kw)
    t.write()
    return t


def test_resume_warns_and_summarises_what_came_after_the_checkpoint(tmp_path, workspace, capsys):
    t = coding(tmp_path)
    ingest(t.path)
    assert run(capsys, lcm_checkpoint, "--session", "s-friday")[0] == 0
    t.user("Now rename parser.py to grammar.py and update the imports")
    call = t.tool_use("Write", {"file_path": "/home/user/proj/grammar.py", "content": "x = 1\n"})
    t.tool_result(call, "File created successfully at: /home/user/proj/grammar.py")
    t.write()
    ingest(t.path)
    code, out, err = run(capsys, lcm_resume)
    assert code == 0, err
    assert "WARNING: the vault holds 3 newer messages" in out
    assert "rename parser.py to grammar.py" in out
    assert "/home/user/proj/grammar.py" in out
    # the state itself is the one the checkpoint saw: the last request before it
    assert "LATEST: Step 3: please update module_3.py" in out
    assert "FAILED `pytest tests/test_module_3.py -q`" in out


def test_checkpoint_over_an_existing_one_keeps_the_older_in_the_vault(tmp_path, workspace, capsys):
    t = coding(tmp_path, turns=2)
    conn = ingest(t.path)
    assert run(capsys, lcm_checkpoint, "--session", "s-friday", "--json")[0] == 0
    first = (workspace / ".lcm-checkpoint.md").read_text()
    t.user("also document module_1.py")
    t.write()
    ingest(t.path)
    code, out, err = run(capsys, lcm_checkpoint, "--session", "s-friday", "--json")
    assert code == 0, err
    second = (workspace / ".lcm-checkpoint.md").read_text()
    assert second != first and "also document module_1.py" in second
    assert json.loads(out)["path"] == str((workspace / ".lcm-checkpoint.md").resolve())
    kept = [r["content"] for r in conn.execute("SELECT content FROM checkpoints ORDER BY id")]
    assert kept == [first, second]
    assert not [p for p in workspace.iterdir() if p.name != ".lcm-checkpoint.md"]   # no temp files left

    (workspace / ".lcm-checkpoint.md").unlink()   # the file is gone: the vault still resumes
    code, out, err = run(capsys, lcm_resume, "--session", "s-friday")
    assert code == 0 and "LATEST: also document module_1.py" in out


@pytest.mark.parametrize("content, message", [
    ("# my notes\nnothing to see\n", "is not an lcm checkpoint"),
    ("<!-- lcm-checkpoint: {\"version\": 1, \"session_id\": -->\n", "is corrupt"),
    ("<!-- lcm-checkpoint: {\"version\": 1} -->\n", "is corrupt"),
    ("\x00\x01binary", "is not an lcm checkpoint"),
])
def test_corrupt_checkpoint_file_is_an_error_with_a_hint(tmp_path, workspace, capsys, content, message):
    coding(tmp_path, turns=1)
    ingest(tmp_path / "projects")
    (workspace / ".lcm-checkpoint.md").write_text(content)
    code, out, err = run(capsys, lcm_resume)
    assert code == 1 and out == ""
    assert err.startswith("Error: ") and message in err and "\nHint: " in err


def test_foreign_checkpoint_from_another_vault_is_an_error_with_a_hint(tmp_path, workspace, capsys):
    coding(tmp_path, turns=1)
    ingest(tmp_path / "projects")
    meta = {"version": 1, "session_id": "not-here", "vault": "/elsewhere/lcm.db", "project": "/x",
            "last_message_id": 12, "created_at": "2026-01-01T00:00:00Z"}
    (workspace / ".lcm-checkpoint.md").write_text(f"<!-- lcm-checkpoint: {json.dumps(meta)} -->\n# x\n")
    code, out, err = run(capsys, lcm_resume)
    assert code == 1
    assert "belongs to another vault (/elsewhere/lcm.db)" in err and "Hint: pass --db /elsewhere/lcm.db" in err


def test_checkpoint_needs_a_known_session_and_writes_nothing_otherwise(tmp_path, workspace, capsys):
    coding(tmp_path, turns=1, cwd="/home/user/proj")
    ingest(tmp_path / "projects")
    code, out, err = run(capsys, lcm_checkpoint)      # no LCM_SESSION_ID, workspace has no session
    assert code == 1 and "Error: no current session" in err and "Hint: pass --session ID" in err
    code, out, err = run(capsys, lcm_checkpoint, "--session", "nope")
    assert code == 1 and "no session 'nope' in the vault" in err
    assert list(workspace.iterdir()) == []
    code, out, err = run(capsys, lcm_resume)       # the workspace has no session of its own either
    assert code == 1 and "no checkpoint and no earlier session of" in err
    assert "lcm_checkpoint.py" not in err and "lcm_resume.py --session ID" in err


def test_resume_without_a_checkpoint_gives_the_latest_earlier_sessions_brief(tmp_path, workspace, monkeypatch, capsys):
    """Imported history has no checkpoint: a new session's resume reads the project's latest
    earlier session from the vault (by conversation time), never the new session itself."""
    older = coding_session(tmp_path / "projects", turns=2, session_id="s-older", cwd=str(workspace),
                           start="2026-10-01T09:00:00Z")
    older.write()
    latest = coding_session(tmp_path / "projects", turns=4, session_id="s-latest", cwd=str(workspace / "sub"),
                            start="2026-11-01T09:00:00Z")
    latest.write()
    elsewhere = coding_session(tmp_path / "projects", turns=1, session_id="s-elsewhere", cwd="/other/proj",
                               start="2026-11-20T09:00:00Z")
    elsewhere.write()
    new = Transcript(tmp_path / "projects", session_id="s-new", cwd=str(workspace), start="2026-11-26T09:00:00Z")
    new.user("continue where we left off")
    new.write()
    # ingested newest-first: the order lcm stored them in must not decide
    ingest(new.path, elsewhere.path, latest.path, older.path)
    monkeypatch.setenv("LCM_SESSION_ID", "s-new")
    code, out, err = run(capsys, lcm_resume)
    assert code == 0, err
    assert out.startswith("# Resuming session s-latest")
    assert "No checkpoint was written for it" in out and "last active 2026-11-01" in out
    assert "LATEST: Step 3: please update module_3.py" in out
    assert "/home/user/proj/module_3.py" in out
    assert "WARNING" not in out                              # nothing is "newer than the checkpoint"
    code, out, err = run(capsys, lcm_resume, "--json")
    doc = json.loads(out)
    assert doc["session_id"] == "s-latest" and doc["checkpoint"] is None and "s-latest" in doc["brief"]
    # a named session without a checkpoint: its brief
    code, out, err = run(capsys, lcm_resume, "--session", "s-older")
    assert code == 0, err
    assert out.startswith("# Resuming session s-older") and "LATEST: Step 1" in out


def test_resume_brief_carries_the_stored_digest(tmp_path, workspace, monkeypatch, capsys):
    import lcm.summary.digest
    t = coding_session(tmp_path / "projects", turns=2, session_id="s-dig", cwd=str(workspace))
    t.write()
    conn = ingest(t.path)
    lcm.summary.digest.write(conn, "s-dig", use_model=False)
    monkeypatch.setenv("LCM_SESSION_ID", "s-now")
    code, out, err = run(capsys, lcm_resume)
    assert code == 0, err
    assert "## Digest of the session (stored when it ended)" in out and "## Decisions" in out


def test_checkpoint_defaults_to_the_newest_session_of_the_project(tmp_path, workspace, capsys):
    t = coding_session(tmp_path / "projects", turns=1, session_id="s-here", cwd=str(workspace))
    t.write()
    ingest(t.path)
    code, out, err = run(capsys, lcm_checkpoint, "--json")
    assert code == 0, err
    assert json.loads(out)["session_id"] == "s-here"


def test_worklog_reads_tool_calls_todos_and_skips_harness_text(tmp_path, workspace, capsys):
    t = Transcript(tmp_path / "projects", session_id="s-w", cwd="/p")
    t.user("Please add a --verbose flag to cli.py")
    t.user("<command-name>/clear</command-name>")
    t.user("Skill body injected by the harness", isMeta=True)
    t.user("<task-notification>agent finished</task-notification>")
    todo = t.tool_use("TodoWrite", {"todos": [
        {"content": "Add the flag", "status": "completed", "activeForm": "Adding"},
        {"content": "Document the flag in README", "status": "pending", "activeForm": "Documenting"}]})
    t.tool_result(todo, "Todos have been modified successfully")
    edit = t.tool_use("MultiEdit", {"file_path": "/p/cli.py", "edits": []})
    t.tool_result(edit, "ok")
    bad = t.tool_use("Edit", {"file_path": "/p/README.md", "old_string": "a", "new_string": "b"})
    t.tool_result(bad, "<tool_use_error>String to replace not found in file.</tool_use_error>", is_error=True)
    look = t.tool_use("Read", {"file_path": "/p/missing.py"})
    t.tool_result(look, "File does not exist.", is_error=True)
    lint = t.tool_use("Bash", {"command": "ruff check ."})
    t.tool_result(lint, "E501 line too long", is_error=True)
    again = t.tool_use("Bash", {"command": "source .venv/bin/activate && ruff check ."})
    t.tool_result(again, "All checks passed!")
    t.assistant_text("I decided to keep the flag off by default.")
    t.write()
    ingest(t.path)
    code, out, err = run(capsys, lcm_checkpoint, "--session", "s-w", "--json")
    log = json.loads(out)["worklog"]
    assert [r["text"] for r in log["user_requests"]] == ["Please add a --verbose flag to cli.py"]
    assert log["files_edited"] == ["/p/cli.py"]          # the failed README edit changed nothing
    assert log["open_todos"] == [{"content": "Document the flag in README", "status": "pending"}]
    assert [c["failed"] for c in log["commands"]] == [True, False]
    # the lint failure was fixed by the later run; the README edit error was not; a failed Read is exploration
    assert [(e["tool"], e["target"]) for e in log["unresolved_errors"]] == [("Edit", "/p/README.md")]
    assert "I decided to keep the flag off by default." in log["decisions"]


def test_llm_narrative_comes_from_the_model_seam(tmp_path, workspace, capsys, fake_api, monkeypatch):
    monkeypatch.setenv("LCM_LLM", "anthropic")
    coding(tmp_path, turns=2)
    ingest(tmp_path / "projects")
    fake_api.enqueue(text="We were fixing the parser; case 0 still fails.")
    code, out, err = run(capsys, lcm_checkpoint, "--session", "s-friday", "--llm")
    assert code == 0, err
    text = (workspace / ".lcm-checkpoint.md").read_text()
    assert "## Narrative (model-written)\nWe were fixing the parser; case 0 still fails." in text
    assert "module_1.py" in fake_api.user_text(fake_api.requests[0])
    code, out, err = run(capsys, lcm_resume)
    assert "We were fixing the parser; case 0 still fails." in out


def test_llm_failure_still_writes_the_deterministic_checkpoint(tmp_path, workspace, capsys, monkeypatch):
    monkeypatch.setenv("LCM_LLM", "none")
    coding(tmp_path, turns=1)
    ingest(tmp_path / "projects")
    code, out, err = run(capsys, lcm_checkpoint, "--session", "s-friday", "--llm")
    assert code == 0 and "Warning: narrative skipped" in err
    assert "## Narrative" not in (workspace / ".lcm-checkpoint.md").read_text()


def test_scripts_run_as_commands(tmp_path, workspace):
    t = coding(tmp_path, turns=1)
    ingest(t.path)
    env = {**__import__("os").environ, "LCM_SESSION_ID": "s-friday"}
    done = subprocess.run([sys.executable, str(SCRIPTS / "lcm_checkpoint.py")], cwd=workspace, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    done = subprocess.run([sys.executable, str(SCRIPTS / "lcm_resume.py"), "--max-tokens", "300"], cwd=workspace,
                          env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "Resuming session s-friday" in done.stdout and lcm.base.config.estimate_tokens(done.stdout) <= 300


def test_resume_stays_under_every_budget(tmp_path, workspace, capsys):
    t = coding(tmp_path, turns=40)
    ingest(t.path)
    assert run(capsys, lcm_checkpoint, "--session", "s-friday")[0] == 0
    for budget in (200, 237, 300, 450, 800, 1300, 2000, 5000):
        code, out, err = run(capsys, lcm_resume, "--max-tokens", str(budget))
        assert code == 0, err
        assert lcm.base.config.estimate_tokens(out) <= budget
        assert "Resuming session s-friday" in out and "## Drill further" in out
        assert "LATEST: Step 39" in out
    assert "Not shown for space" in run(capsys, lcm_resume, "--max-tokens", "200")[1]
    with pytest.raises(SystemExit) as usage:
        lcm_resume.main(["--max-tokens", "199"])
    assert usage.value.code == 2 and "at least 200" in capsys.readouterr().err


def test_checkpoint_first_stores_the_lines_the_hooks_have_not_ingested_yet(tmp_path, workspace, capsys):
    t = coding(tmp_path, turns=1)
    ingest(t.path)
    t.user("one last thing: bump the version to 2.0")   # written by Claude Code, not yet ingested
    t.write()
    code, out, err = run(capsys, lcm_checkpoint, "--session", "s-friday")
    assert code == 0, err
    assert "LATEST: one last thing: bump the version to 2.0" in (workspace / ".lcm-checkpoint.md").read_text()

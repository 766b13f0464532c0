"""Session digests: written when a session ends (in the background), one per session, saying
what was done, decided, found and what failed; model-written when a model answers, extractive
otherwise; masked; shown by lcm_sessions.py ID and filed by date with lcm_export.py --archive."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import lcm.base.config
import lcm.vault.db
import lcm.summary.digest
import lcm.summary.worklog
import lcm.capture.bulk
import lcm.capture.ingest
import lcm_compact
import lcm_export
import lcm_sessions
from conftest import ROOT, run, shared_data
from fake_anthropic import FakeAnthropic
from test_hooks import wait_for
from transcripts import Transcript

SECRET = "sk-ant-api03-" + "Zx9" * 14 + "-AA"


def small_session(tmp_path) -> Transcript:
    t = Transcript(tmp_path / "projects")
    t.user("make the invoice tests pass")
    run_ = t.tool_use("Bash", {"command": "pytest -q tests/test_invoice.py"})
    t.tool_result(run_, "\x1b[31mFAILED tests/test_invoice.py::test_tax - AssertionError: assert 0.81 == 0.8\x1b[0m\n"
                        f"env: ANTHROPIC_API_KEY={SECRET}\n1 failed in 0.1s", is_error=True)
    t.assistant_text("The root cause was float rounding in tax(). We'll use Decimal instead of float for money.")
    run_ = t.tool_use("Bash", {"command": "pytest -q tests/test_invoice.py"})
    t.tool_result(run_, "1 passed in 0.1s")
    t.write()
    return t


def digest_of(session_id: str) -> dict:
    return lcm.summary.digest.get(lcm.vault.db.connect(), session_id)


@pytest.mark.slow  # every session of the shared data
def test_every_ended_session_of_the_shared_data_gets_a_digest_that_says_what_failed_and_was_decided(
        capsys, monkeypatch):
    """What the SessionEnd hook detaches (lcm_compact.py --session ID --digest), run for every
    session of the shared data: each gets one digest; the ones with failures and choices say so."""
    monkeypatch.setenv("LCM_LLM", "none")
    conn = lcm.vault.db.connect()
    lcm.capture.bulk.ingest_paths(conn, [str(shared_data("claude-projects"))])
    sessions = [r[0] for r in conn.execute("SELECT DISTINCT session_id FROM messages ORDER BY session_id")]
    assert len(sessions) > 20
    for sid in sessions:
        code, out, err = run(capsys, lcm_compact, "--session", sid, "--digest")
        assert code == 0, err
        assert "extractive digest written" in out
    rows = conn.execute("SELECT session_id, text, level FROM digests").fetchall()
    assert sorted(r["session_id"] for r in rows) == sessions
    for row in rows:
        assert row["level"] == "extractive" and "\x1b" not in row["text"]
        assert all(f"## {name}" in row["text"] for name in lcm.summary.digest.SECTIONS)
    texts = {r["session_id"][:8]: r["text"] for r in rows}
    failed, decided = (texts["cb2e607c"].split("## What failed")[1],
                       texts["cb2e607c"].split("## Decisions")[1].split("## ")[0])
    assert "`cd /tmp && coderabbit-extract --help`: ModuleNotFoundError: No module named " \
           "'extract_coderabbit_feedback'" in failed
    assert "Switched to Hatchling" in decided
    assert "Let's keep the name of the py file but change the pyproject script to reference it" in decided
    assert "`npm install` rejected by the user: use pnpm" in texts["7acd37a8"]
    # a second SessionEnd (a resumed session ending again) rewrites the one digest
    assert run(capsys, lcm_compact, "--session", sessions[0], "--digest")[0] == 0
    assert conn.execute("SELECT count(*) FROM digests").fetchone()[0] == len(sessions)


def test_the_session_end_hook_writes_the_digest_after_it_returns(tmp_path):
    t = small_session(tmp_path)
    env = {**os.environ, "CLAUDE_PLUGIN_ROOT": str(ROOT), "LCM_LLM": "none", "CLAUDE_PROJECT_DIR": str(tmp_path)}
    payload = {"session_id": t.session_id, "transcript_path": str(t.path), "cwd": t.cwd,
               "hook_event_name": "SessionEnd", "reason": "other"}
    proc = subprocess.run([sys.executable, "-S", str(ROOT / "hooks" / "session_end.py")], input=json.dumps(payload),
                          env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout == ""
    vault = lcm.base.config.db_path(None)
    assert wait_for(lambda: vault.exists() and digest_of(t.session_id) is not None), \
        (os.environ["LCM_HOME"], proc.stderr)
    text = digest_of(t.session_id)["text"]
    assert "FAILED tests/test_invoice.py::test_tax - AssertionError: assert 0.81 == 0.8" in text
    assert "We'll use Decimal instead of float for money." in text.split("## Decisions")[1]
    assert "The root cause was float rounding in tax()." in text.split("## Bugs found")[1]


def test_extractive_digest_is_masked_and_clean(tmp_path):
    t = small_session(tmp_path)
    conn = lcm.vault.db.connect()
    lcm.capture.bulk.ingest_paths(conn, [t.path])
    text = lcm.summary.digest.write(conn, t.session_id, use_model=False)["text"]
    assert SECRET not in text and "Zx9Zx9Zx9" not in text and "\x1b" not in text
    assert "Ran 2 commands, 1 failed" in text


def test_a_model_writes_the_digest_when_one_answers_and_a_refusal_falls_back(tmp_path, monkeypatch, fake_api,
                                                                            capsys):
    monkeypatch.setenv("LCM_LLM", "anthropic")
    t = small_session(tmp_path)
    conn = lcm.vault.db.connect()
    lcm.capture.bulk.ingest_paths(conn, [t.path])
    fake_api.enqueue("## What was done\n- Fixed the invoice tests\n## Decisions\n- Decimal for money\n"
                     "## Bugs found\n- float rounding\n## What failed\n- pytest: test_tax\n## Open at the end\n- none")
    code, out, err = run(capsys, lcm_compact, "--session", t.session_id, "--digest", "--json")
    assert code == 0, err
    assert json.loads(out)["digest"] == "model"
    digest = digest_of(t.session_id)
    assert digest["level"] == "model" and "- Decimal for money" in digest["text"]
    assert digest["text"].startswith("# Session digest: make the invoice tests pass")
    sent = FakeAnthropic.user_text(fake_api.requests[-1])
    assert "FAILED tests/test_invoice.py::test_tax" in sent and SECRET not in sent and "\x1b" not in sent
    system = FakeAnthropic.system_text(fake_api.requests[-1])
    # the model is told what the readers count as a decision, and what they never do
    assert "Decisions" in system and "acted on" in system and "status line" in system and "apology" in system
    fake_api.enqueue(status=401)
    code, out, err = run(capsys, lcm_compact, "--session", t.session_id, "--digest")
    assert code == 0 and "extractive digest written" in out and "the model call failed" in err
    assert digest_of(t.session_id)["level"] == "extractive"


def test_sessions_shows_the_digest_and_export_files_it_by_date_once(tmp_path, capsys):
    t = small_session(tmp_path)
    conn = lcm.vault.db.connect()
    lcm.capture.bulk.ingest_paths(conn, [t.path])
    code, out, _ = run(capsys, lcm_sessions, t.session_id[:8])
    assert code == 0 and "Digest: none yet" in out and "--digest" in out
    lcm.summary.digest.write(conn, t.session_id, use_model=False)
    code, out, _ = run(capsys, lcm_sessions, t.session_id[:8])
    assert "Digest (extractive, written " in out and "  ## What failed" in out
    assert json.loads(run(capsys, lcm_sessions, t.session_id, "--json")[1])["digest"]["level"] == "extractive"
    archive = tmp_path / "notes" / "sessions"  # made on first use
    for _ in range(2):  # the archive is append-only: a second run adds nothing
        code, out, err = run(capsys, lcm_export, "--session", t.session_id, "--archive", archive, "--json")
        assert code == 0, err
    doc = json.loads(out)
    day = conn.execute("SELECT last_at FROM sessions").fetchone()[0][:10]
    assert doc["archive"] == str(archive / f"{day}.md") and doc["written"] is False
    text = (archive / f"{day}.md").read_text()
    assert text.startswith(f"# Session archive, {day}\n") and text.count(f"session={t.session_id}") == 1
    assert "We'll use Decimal instead of float for money." in text and SECRET not in text
    assert oct((archive / f"{day}.md").stat().st_mode & 0o777) == "0o600"
    with pytest.raises(SystemExit) as usage:
        run(capsys, lcm_export, "--session", t.session_id, "--archive", archive, "--format", "jsonl")
    assert usage.value.code == 2 and "--archive writes" in capsys.readouterr().err
    (tmp_path / "a-file").write_text("")
    code, _, err = run(capsys, lcm_export, "--session", t.session_id, "--archive", tmp_path / "a-file" / "x")
    assert code == 1 and "Error: --archive" in err and "Hint:" in err


def test_purging_a_message_drops_its_sessions_digest(tmp_path, capsys):
    import lcm_purge
    t = small_session(tmp_path)
    conn = lcm.vault.db.connect()
    lcm.capture.bulk.ingest_paths(conn, [t.path])
    lcm.summary.digest.write(conn, t.session_id, use_model=False)
    assert "float rounding" in digest_of(t.session_id)["text"]
    code, _, err = run(capsys, lcm_purge, "--match", "float rounding", "--yes")
    assert code == 0, err
    assert digest_of(t.session_id) is None


def _section(text: str, name: str) -> list[str]:
    """The bullets under `## name` of a digest or brief."""
    lines = text.split(f"## {name}", 1)[1].split("\n## ", 1)[0].strip().splitlines()
    return [ln[2:] for ln in lines[1:] if ln.startswith("- ")] if lines and not lines[0].startswith("- ") \
        else [ln[2:] for ln in lines if ln.startswith("- ")]


def test_decisions_bugs_and_open_questions_a_person_would_name(tmp_path, vault):
    """An apology, a status line or a lead-in to a list is no decision; what the person says to do
    is one; "I see the issue." is followed by the bug; a push refused with 403 and then pushed is
    a bug got past, no unresolved error (a call the permission settings stopped, never run later, is one); a
    question asked at the end and never answered is left open (an offer to do more is not)."""
    t = Transcript(tmp_path / "projects", session_id="s-judged")
    t.user("the export is slow, can you have a look?")
    t.assistant_text("I apologize for the confusion earlier. The plan is ready. Here is what I will change:")
    t.assistant_text("I see the issue. The cache key ignores the locale, so every request misses the cache.")
    t.user("let's keep the old CSV format for now")
    t.assistant_text("We decided to stream rows instead of building the whole file in memory.")
    push = t.tool_use("Bash", {"command": "cd /home/user/proj && git push -u origin main"})
    t.tool_result(push, "remote: Permission to acme/proj.git denied.\nfatal: unable to access: The requested URL"
                        " returned error: 403", is_error=True)
    push = t.tool_use("Bash", {"command": "git push origin main"})
    t.tool_result(push, "To github.com:acme/proj.git\n   1a2b3c..4d5e6f  main -> main")
    build = t.tool_use("Bash", {"command": "npm run build"})
    t.tool_result(build, "Error: Cannot find module 'vite'", is_error=True)
    denied = t.tool_use("Bash", {"command": "rm -rf build"})
    t.tool_result(denied, "This command requires approval", is_error=True)     # stopped by the settings, never ran
    t.assistant_text("The issue might be a stale lock file instead of the cache.")   # a guess: neither
    t.user("push it and tell me what is left")
    t.assistant_text("Pushed. Should the export keep the header row when the file is empty?"
                     " Would you like me to add a benchmark too?")
    t.write()
    conn = lcm.vault.db.connect()
    lcm.capture.bulk.ingest_paths(conn, [str(t.path)])
    text = lcm.summary.digest.write(conn, "s-judged", use_model=False)["text"]
    decisions = _section(text, "Decisions")
    assert decisions == ["(user) let's keep the old CSV format for now",
                         "We decided to stream rows instead of building the whole file in memory."], decisions
    assert _section(text, "Bugs found") == ["The cache key ignores the locale, so every request misses the cache.",
                                            # a failure a later run got past, named by its error
                                            "fatal: unable to access: The requested URL returned error: 403"]
    assert _section(text, "Open questions") == ["Should the export keep the header row when the file is empty?"]
    failed = _section(text, "What failed")
    assert any("git push -u origin main" in f and "not fixed later" not in f for f in failed), failed
    assert any("npm run build" in f and "(not fixed later)" in f for f in failed), failed
    assert "`rm -rf build` not allowed by the permission settings (not fixed later)" in failed, failed
    log = lcm.summary.worklog.worklog(conn, "s-judged")
    assert [e["target"] for e in log["unresolved_errors"]] == ["npm run build", "rm -rf build"]


def test_a_command_family_is_the_program_and_its_action():
    family = lcm.summary.worklog.command_family
    assert family("cd /repo && git push -u origin main") == "git push"
    assert family("uv run pytest -m browser -v --tb=short") == family("pytest tests/test_x.py") == "pytest"
    assert family("FOO=1 npx vitest run") == "vitest"
    assert family("source .venv/bin/activate && python -m pytest -x") == "pytest"
    assert family("git commit -m 'x'") != family("git push")
    assert family("cd /tmp") is None

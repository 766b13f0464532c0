"""A model that fails never fails compaction (issue 23.1), and the model lcm asks is the
session's main-thread model (23.3). The real SDK talks to a fake Messages API that refuses
every call three ways: nothing listening, a refused key, a persistent overload."""
from __future__ import annotations

import json
import socket
import time

import pytest

import lcm.summary.compact
import lcm.vault.db
import lcm.care.doctor
import lcm.capture.bulk
import lcm.capture.ingest
import lcm.base.llm
from conftest import run, shared_data
from fake_anthropic import FakeAnthropic, Reply
from test_hooks import pre_compact, run_hook
from transcripts import Transcript, coding_session
import lcm.base.config
import lcm.base.mask

REFUSALS = ["connection refused", 401, 529]


def closed_port_url() -> str:
    """A 127.0.0.1 address where nothing listens (connection refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@pytest.fixture
def refusing_api(request, monkeypatch):
    """A Messages API that refuses every call in the way the test's parameter names."""
    with FakeAnthropic() as api:
        url = api.url
        if request.param == "connection refused":
            url = closed_port_url()
        else:
            api.respond(lambda body: Reply(status=request.param))
        monkeypatch.setenv("ANTHROPIC_BASE_URL", url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-fake-key")
        monkeypatch.setenv("LCM_LLM", "anthropic")
        yield api


@pytest.mark.slow  # waits out the SDK's retries and timeouts against a failing fake API
@pytest.mark.parametrize("refusing_api", REFUSALS, indirect=True)
def test_compact_all_falls_back_then_a_working_model_upgrades(vault, refusing_api, monkeypatch, capsys):
    conn = lcm.vault.db.connect()
    lcm.capture.bulk.ingest_paths(conn, [str(shared_data("claude-projects"))])
    code, out, err = run(capsys, "lcm_compact", "--all", "--dry-run", "--json")
    assert code == 0, err
    due = sum(s["would_create"]["leaf"] + s["would_create"]["condensed"] for s in json.loads(out)["sessions"])
    assert due > 10

    started = time.monotonic()
    code, out, err = run(capsys, "lcm_compact", "--all", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["leaf_created"] + doc["condensed_created"] == due == doc["levels"]["fallback"]
    assert doc["model_failure"] and "Warning: the model failed" in err and "Hint:" in err
    # the breaker: one failing call for the whole run (the SDK's own retries included), not one per chunk
    assert len(refusing_api.requests) <= lcm.base.llm.DEFAULT_MAX_RETRIES + 1
    assert time.monotonic() - started < 30
    nodes = conn.execute("SELECT id, content, token_count, source_token_count FROM summaries").fetchall()
    assert len(nodes) == due and all(0 < n["token_count"] < n["source_token_count"] for n in nodes)

    listed = lcm.summary.compact.fallback_summaries(conn)
    assert {s["id"] for s in listed} == {n["id"] for n in nodes}
    report = lcm.care.doctor.fallback_levels(conn, {"backend": "anthropic"})
    assert report["fallback"] == due == report["upgradable"] and report["status"] == "warn"

    shape = conn.execute("SELECT summary_id, ord, message_id, child_id FROM summary_sources ORDER BY 1, 2").fetchall()
    with FakeAnthropic(default_text="A model summary.\nExpand for details about: the rest.") as working:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", working.url)
        code, out, err = run(capsys, "lcm_compact", "--all", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["upgraded"] == due and doc["leaf_created"] == doc["condensed_created"] == 0
    assert not lcm.summary.compact.fallback_summaries(conn)
    after = {r["id"]: r for r in conn.execute("SELECT * FROM summaries")}
    assert set(after) == {n["id"] for n in nodes}                      # same ids, same graph
    assert all(r["level"] == "normal" and r["content"].startswith("A model summary") for r in after.values())
    assert conn.execute("SELECT summary_id, ord, message_id, child_id FROM summary_sources"
                        " ORDER BY 1, 2").fetchall() == shape
    old = dict(conn.execute("SELECT summary_id, content FROM summary_versions").fetchall())
    assert old == {n["id"]: n["content"] for n in nodes}               # the fallback text is kept


@pytest.mark.slow  # waits out the SDK's retries and timeouts against a failing fake API
@pytest.mark.parametrize("refusing_api", REFUSALS, indirect=True)
def test_pre_compact_prints_its_instructions_when_the_model_refuses(tmp_path, vault, refusing_api, monkeypatch):
    session = coding_session(tmp_path / "projects", turns=10, cwd=str(tmp_path))
    session.write()
    env = {"LCM_FRESH_TAIL_COUNT": "4", "LCM_LEAF_MIN_TOKENS": "1", "LCM_LEAF_CHUNK_TOKENS": "200"}
    started = time.monotonic()
    proc = run_hook("pre_compact", pre_compact(session), env, site=True)
    elapsed = time.monotonic() - started
    assert proc.returncode == 0 and proc.stderr == ""
    conn = lcm.vault.db.connect()
    rows = conn.execute("SELECT id, level, parent_id FROM summaries WHERE session_id = ?",
                        (session.session_id,)).fetchall()
    assert len(rows) >= 2 and {r["level"] for r in rows} == {"fallback"}
    assert all(r["id"] in proc.stdout for r in rows if r["parent_id"] is None)
    assert "recoverable" in proc.stdout and "lcm_grep.py" in proc.stdout
    assert elapsed < 60   # hooks.json gives PreCompact 120 s; its own budget is 60 s


def test_pre_compact_prints_its_instructions_when_compaction_itself_breaks(tmp_path, vault):
    session = coding_session(tmp_path / "projects", turns=6, cwd=str(tmp_path))
    session.write()
    # an invalid setting makes compaction raise before it writes anything
    proc = run_hook("pre_compact", pre_compact(session), {"LCM_LEAF_CHUNK_TOKENS": "many"}, site=True)
    assert proc.returncode == 0 and "recoverable" in proc.stdout


# -- the model: the main thread's ------------------------------------------------------

def session_with_a_smaller_subagent(tmp_path) -> tuple:
    """An Opus session whose sub-agent (Haiku) is stored last, as an agent file read after it."""
    main = Transcript(tmp_path / "projects", model="claude-opus-4-1")
    for i in range(8):
        main.user(f"Step {i}: make the retry delay configurable in net/retry_{i}.py " + "detail " * 200)
        main.assistant_text(f"Done with step {i}; RETRY_DELAY stays 750 ms. " + "detail " * 200)
    agent = Transcript(tmp_path / "projects", agent_id="a1", parent=main, model="claude-haiku-4-5")
    agent.user("Find every caller of retry()")
    agent.assistant_text("Three callers, all in net/.")
    main.write()
    agent.write()
    conn = lcm.vault.db.connect()
    lcm.capture.bulk.ingest_paths(conn, [str(main.path)])
    lcm.capture.bulk.ingest_paths(conn, [str(agent.path)])
    last = conn.execute("SELECT model FROM messages WHERE model IS NOT NULL ORDER BY id DESC LIMIT 1").fetchone()[0]
    assert last == "claude-haiku-4-5"   # the trap: the newest stored message is the sub-agent's
    return conn, main


def test_compaction_and_expand_query_ask_the_main_threads_model(tmp_path, vault, fake_api, monkeypatch, capsys):
    monkeypatch.setenv("LCM_LLM", "anthropic")
    monkeypatch.setenv("LCM_FRESH_TAIL_COUNT", "2")
    conn, main = session_with_a_smaller_subagent(tmp_path)
    fake_api.respond(lambda body: "Summary.\nExpand for details about: retries.")
    result = lcm.summary.compact.compact(conn, main.session_id, mode="full")
    assert result["leaf_created"] >= 1 and result["model"] == "claude-opus-4-1"
    assert {body["model"] for body in fake_api.requests} == {"claude-opus-4-1"}

    before = len(fake_api.requests)
    top = conn.execute("SELECT id FROM summaries WHERE parent_id IS NULL LIMIT 1").fetchone()[0]
    code, out, err = run(capsys, "lcm_expand_query", "--prompt", "Which retry delay?", "--summary-ids", top,
                         "--json")
    assert code == 0, err
    assert [body["model"] for body in fake_api.requests[before:]] == ["claude-opus-4-1"]
    monkeypatch.setenv("LCM_SUMMARY_MODEL", "claude-sonnet-4-5")   # the setting still wins
    run(capsys, "lcm_expand_query", "--prompt", "Which retry delay?", "--summary-ids", top, "--json")
    assert fake_api.requests[-1]["model"] == "claude-sonnet-4-5"


def _run_while_the_model_hangs(tmp_path, capsys, fake_api, monkeypatch, budget, script, argv, join):
    """A six-turn session stored and the model accepting each call and never answering, with the
    budget (module, name) set to 2 s: `script`.main(argv) on a thread, joined for `join` seconds.
    Returns (its exit code, None while it still waits; its stderr; seconds it took)."""
    import importlib
    import threading
    import time

    from fake_anthropic import Reply
    from transcripts import coding_session
    monkeypatch.setenv("LCM_LLM", "anthropic")
    coding_session(tmp_path / "projects", turns=6, session_id="s1").write()
    assert run(capsys, "lcm_ingest", tmp_path / "projects")[0] == 0
    monkeypatch.setattr(*budget, 2, raising=False)
    fake_api.respond(lambda _request: Reply(text="late", delay=600))
    done = {}
    worker = threading.Thread(target=lambda: done.setdefault("code", importlib.import_module(script).main(argv)),
                              daemon=True)
    started = time.monotonic()
    worker.start()
    worker.join(join)
    fake_api.release_delays()
    seconds = time.monotonic() - started
    return (None if worker.is_alive() else done.get("code")), capsys.readouterr()[1], seconds


@pytest.mark.slow  # waits out the SDK's retries and timeouts against a failing fake API
def test_expand_query_answers_within_its_budget_when_the_model_hangs(tmp_path, vault, fake_api, monkeypatch, capsys):
    """A model that accepts the call and never answers: expand_query waited 120 s a call, retried
    four times, for up to six calls (an hour), where Claude Code's Bash tool stops a command after
    two minutes and the agent gets nothing. Within its budget it shows the excerpts instead."""
    import lcm.readers.answer
    code, err, seconds = _run_while_the_model_hangs(
        tmp_path, capsys, fake_api, monkeypatch, (lcm.readers.answer, "ANSWER_SECONDS"), "lcm_expand_query",
        ["--query", "parser", "--prompt", "what changed in the parser?"], join=60)
    assert code is not None, "expand_query still waits for the model"
    assert code == 0 and "showing excerpts instead" in err, err
    assert seconds < 30


@pytest.mark.slow  # waits out the SDK's retries and timeouts against a failing fake API
def test_checkpoint_llm_is_written_without_the_narrative_when_the_model_hangs(tmp_path, vault, fake_api, monkeypatch,
                                                                             capsys):
    """The same hang through checkpoint --llm: 120 s a call and four retries (ten minutes) before
    the checkpoint was written without its narrative."""
    import lcm.summary.checkpoint
    code, err, _ = _run_while_the_model_hangs(
        tmp_path, capsys, fake_api, monkeypatch, (lcm.summary.checkpoint, "NARRATIVE_SECONDS"), "lcm_checkpoint",
        ["--session", "s1", "--llm", "--output", str(tmp_path / "cp.md")], join=45)
    assert code is not None, "checkpoint still waits for the model"
    assert code == 0 and "narrative skipped" in err and (tmp_path / "cp.md").exists(), err

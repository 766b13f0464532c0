"""The model seam against a fake Messages API (real anthropic SDK) and a fake `claude` CLI."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

import lcm.base.llm
import lcm.vault.db
import lcm.base.errors
from fake_anthropic import FakeAnthropic
from lcm.base.errors import ModelConfigError, ModelError
from conftest import run


# -- choosing the backend and the model ---------------------------------------------------

def test_backend_auto_prefers_the_api_key(fake_api, fake_claude):
    assert lcm.base.llm.resolve_backend() == "anthropic"


def test_backend_auto_uses_claude_on_path_without_a_key(fake_claude):
    assert lcm.base.llm.resolve_backend() == "claude"


def test_backend_auto_is_none_without_key_or_cli(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert lcm.base.llm.resolve_backend() == "none"


def test_backend_explicit_and_invalid(monkeypatch):
    monkeypatch.setenv("LCM_LLM", "none")
    assert lcm.base.llm.resolve_backend() == "none"
    monkeypatch.setenv("LCM_LLM", "gpt")
    with pytest.raises(lcm.base.errors.LcmError, match="LCM_LLM"):
        lcm.base.llm.resolve_backend()


def test_model_from_setting_then_session_then_default(vault, monkeypatch):
    conn = lcm.vault.db.connect()
    assert lcm.base.llm.resolve_model(conn, "s1") == lcm.base.llm.DEFAULT_MODEL
    conn.execute("INSERT INTO messages (uuid, session_id, type, role, content, token_count, raw, model)"
                 " VALUES ('u1', 's1', 'assistant', 'assistant', 'hi', 1, x'00', 'claude-opus-4-1')")
    conn.execute("INSERT INTO messages (uuid, session_id, type, role, content, token_count, raw, model)"
                 " VALUES ('u2', 's1', 'assistant', 'assistant', 'hi', 1, x'00', '<synthetic>')")
    assert lcm.base.llm.resolve_model(conn, "s1") == "claude-opus-4-1"
    monkeypatch.setenv("LCM_SUMMARY_MODEL", "claude-haiku-4-5")
    assert lcm.base.llm.resolve_model(conn, "s1") == "claude-haiku-4-5"


# -- anthropic backend ---------------------------------------------------------------------

def test_complete_sends_system_and_messages(fake_api):
    fake_api.enqueue("the answer", usage={"input_tokens": 42, "output_tokens": 7})
    done = lcm.base.llm.complete("be brief", "question?", max_tokens=100, model="claude-haiku-4-5")
    assert (done.text, done.input_tokens, done.output_tokens, done.backend) == ("the answer", 42, 7, "anthropic")
    body = fake_api.requests[0]
    assert body["system"] == "be brief" and body["max_tokens"] == 100
    assert FakeAnthropic.user_text(body) == "question?"


@pytest.mark.parametrize("status", [429, 500, 529])
def test_transient_errors_are_retried(fake_api, status):
    fake_api.enqueue(status=status).enqueue(status=status).enqueue("made it")
    done = lcm.base.llm.complete(None, "q", max_tokens=10)
    assert done.text == "made it"
    assert len(fake_api.requests) == 3


def test_retries_are_bounded(fake_api):
    for _ in range(5):
        fake_api.enqueue(status=529)
    with pytest.raises(ModelError, match="529") as err:
        lcm.base.llm.complete(None, "q", max_tokens=10, max_retries=2)
    assert not isinstance(err.value, ModelConfigError)
    assert len(fake_api.requests) == 3


@pytest.mark.parametrize("status", [401, 403])
def test_auth_failure_is_a_config_error_not_retried(fake_api, status):
    fake_api.enqueue(status=status).enqueue("never reached")
    with pytest.raises(ModelConfigError) as err:
        lcm.base.llm.complete(None, "q", max_tokens=10)
    assert "ANTHROPIC_API_KEY" in err.value.hint and "LCM_LLM=none" in err.value.hint
    assert len(fake_api.requests) == 1


def test_unknown_model_names_the_setting(fake_api):
    fake_api.enqueue(status=404, error_message="model: nope")
    with pytest.raises(ModelConfigError, match="nope") as err:
        lcm.base.llm.complete(None, "q", max_tokens=10, model="nope")
    assert "LCM_SUMMARY_MODEL" in err.value.hint


def test_timeout_is_a_model_error(fake_api):
    fake_api.enqueue("slow", delay=60)  # far beyond the bound below: no flake under load
    started = time.monotonic()
    with pytest.raises(ModelError, match="did not answer"):
        lcm.base.llm.complete(None, "q", max_tokens=10, timeout=0.3, max_retries=0)
    assert time.monotonic() - started < 30


def test_missing_key_with_explicit_backend(monkeypatch, tmp_path):
    monkeypatch.setenv("LCM_LLM", "anthropic")
    monkeypatch.setenv("HOME", str(tmp_path))  # no SDK profile to discover either
    with pytest.raises(ModelConfigError) as err:
        lcm.base.llm.complete(None, "q", max_tokens=10)
    assert "ANTHROPIC_API_KEY" in err.value.hint


def test_backend_none_refuses_to_complete(monkeypatch):
    monkeypatch.setenv("LCM_LLM", "none")
    with pytest.raises(ModelConfigError, match="none"):
        lcm.base.llm.complete(None, "q", max_tokens=10)


def test_fake_api_responder_and_tool_use(fake_api):
    fake_api.respond(lambda body: {"text": "echo " + FakeAnthropic.user_text(body)})
    assert lcm.base.llm.complete(None, "ping", max_tokens=10).text == "echo ping"
    fake_api.enqueue(tool_use=[{"name": "record", "input": {"x": 1}}])
    client = lcm.base.llm.anthropic_client()
    message = client.messages.create(model="m", max_tokens=5, messages=[{"role": "user", "content": "q"}])
    assert message.stop_reason == "tool_use" and message.content[0].input == {"x": 1}


# -- claude backend ------------------------------------------------------------------------

def test_complete_uses_claude_without_a_key(fake_claude):
    fake_claude.enqueue("summary from claude")
    done = lcm.base.llm.complete("system words", "the prompt", max_tokens=100, model="haiku")
    assert (done.text, done.backend, done.model) == ("summary from claude", "claude", "haiku")
    call = fake_claude.calls()[0]
    argv = call["argv"]
    assert argv[:2] == ["-p", "--output-format"] and "--no-session-persistence" in argv
    assert argv[argv.index("--setting-sources") + 1] == ""
    assert argv[argv.index("--append-system-prompt") + 1] == "system words"
    assert argv[argv.index("--tools") + 1] == "" and argv[argv.index("--max-turns") + 1] == "1"
    assert call["prompt"] == "the prompt"
    assert call["env"]["LCM_SUBAGENT"] == "1"


def test_run_claude_options_and_structured_output(fake_claude):
    fake_claude.enqueue(structured_output={"ok": True})
    result = lcm.base.llm.run_claude("p", model="sonnet", max_turns=3, tools=["Read", "Bash"],
                                allowed_tools=["Bash(git *)", "Read"], json_schema={"type": "object"})
    assert result["structured_output"] == {"ok": True}
    argv = fake_claude.calls()[0]["argv"]
    assert argv[argv.index("--tools") + 1] == "Read,Bash"
    assert argv[argv.index("--allowedTools") + 1] == "Bash(git *) Read"
    assert json.loads(argv[argv.index("--json-schema") + 1]) == {"type": "object"}
    assert argv[-2:] == ["--", "p"]


def test_run_claude_long_prompt_goes_through_stdin(fake_claude):
    prompt = "x" * (lcm.base.llm.MAX_PROMPT_ARG_BYTES + 10)
    lcm.base.llm.run_claude(prompt)
    call = fake_claude.calls()[0]
    assert call["stdin"] == prompt and "--" not in call["argv"]


def test_run_claude_errors(fake_claude):
    fake_claude.enqueue("something broke", is_error=True)
    with pytest.raises(ModelError, match="something broke"):
        lcm.base.llm.run_claude("p")
    fake_claude.enqueue("Invalid API key · Please run /login", is_error=True)
    with pytest.raises(ModelConfigError, match="login"):
        lcm.base.llm.run_claude("p")
    fake_claude.enqueue(raw_stdout="not json", exit_code=3, stderr="crash")
    with pytest.raises(ModelError, match="exit 3"):
        lcm.base.llm.run_claude("p")


def test_run_claude_timeout_kills_the_child(fake_claude):
    fake_claude.enqueue("late", delay=60)  # far beyond the bound below: no flake under load
    started = time.monotonic()
    with pytest.raises(ModelError, match="killed"):
        lcm.base.llm.run_claude("p", timeout=0.5)
    assert time.monotonic() - started < 30
    pid = fake_claude.calls()[0]["pid"]
    deadline = time.monotonic() + 30  # killed, so gone soon; a fixed 0.1 s pause flaked under load
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_run_claude_missing_cli(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ModelConfigError, match="not on PATH"):
        lcm.base.llm.run_claude("p")


def test_importing_the_seam_does_not_import_anthropic():
    code = "import sys; sys.path.insert(0, 'scripts'); import lcm.base.llm; print('anthropic' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    assert out.stdout.strip() == "False", out.stderr


@pytest.mark.parametrize("body", [
    "<html><body>Sign in to the corporate proxy</body></html>",   # not JSON at all
    {}, {"type": "message", "content": None}, [1, 2],              # JSON of another shape
    {"id": "m", "type": "message", "role": "assistant", "model": "x", "stop_reason": "end_turn",
     "content": [{"type": "text", "text": 5}], "usage": {"input_tokens": 1, "output_tokens": 1}},
    {"id": "m", "type": "message", "role": "assistant", "model": "x", "stop_reason": "end_turn",
     "content": [{"type": "text", "text": "no usage"}]},
])
def test_an_answer_that_is_no_messages_response_falls_back(tmp_path, vault, fake_api, monkeypatch, capsys, body):
    """A proxy or gateway in ANTHROPIC_BASE_URL's place answers 200 with a page of its own, or JSON
    of another shape: the SDK raised JSONDecodeError, or returned a response whose reading raised
    TypeError, past the seam's ModelError, so compaction (the hooks' detached runs too), expand_query
    and checkpoint --llm stopped with a traceback instead of falling back."""
    from fake_anthropic import Reply
    from transcripts import coding_session
    for name, value in {"LCM_LLM": "anthropic", "LCM_LEAF_CHUNK_TOKENS": "1500", "LCM_LEAF_MIN_TOKENS": "300",
                        "LCM_FRESH_TAIL_COUNT": "4"}.items():
        monkeypatch.setenv(name, value)
    coding_session(tmp_path / "projects", turns=30, session_id="s1").write()
    assert run(capsys, "lcm_ingest", tmp_path / "projects")[0] == 0
    fake_api.respond(lambda _request: Reply(body=body))
    code, out, err = run(capsys, "lcm_compact", "--all", "--json")
    assert code == 0, err
    doc = __import__("json").loads(out)
    assert doc["levels"]["fallback"] > 0 and "not a Messages API response" in doc["model_failure"]
    code, out, err = run(capsys, "lcm_expand_query", "--query", "parser", "--prompt", "what changed?")
    assert code == 0 and out.strip(), err
    code, out, err = run(capsys, "lcm_checkpoint", "--session", "s1", "--llm", "--output", tmp_path / "cp.md")
    assert code == 0, err


@pytest.mark.parametrize("backend", ["anthropic", "claude"])
def test_a_lone_surrogate_goes_to_the_model_as_its_escape(tmp_path, vault, monkeypatch, capsys, backend, request):
    """Claude Code writes output bytes that are not UTF-8 as lone surrogates (\\ud800); quoted in
    a prompt they cannot be sent (the request body and argv are UTF-8): an llm_map item holding one
    failed as 'internal error: UnicodeEncodeError' (and again on every --resume), and
    checkpoint --llm over such a session stopped with a traceback."""
    import json
    fake = request.getfixturevalue("fake_api" if backend == "anthropic" else "fake_claude")
    monkeypatch.setenv("LCM_LLM", backend)
    if backend == "claude":
        fake.enqueue(result='{"ok": true}')
    else:
        fake.enqueue(text='{"ok": true}')
    (tmp_path / "in.jsonl").write_text('{"text": "tool output \\ud800 half a pair"}\n')
    code, out, err = run(capsys, "lcm_llm_map", "--input", tmp_path / "in.jsonl", "--output", tmp_path / "out.jsonl",
                         "--prompt", "Summarise")
    assert code == 0, err
    result = json.loads((tmp_path / "out.jsonl").read_text())
    assert result["ok"], result
    sent = json.dumps(fake.requests[-1] if backend == "anthropic" else fake.calls()[-1])
    assert "half a pair" in sent and "\\\\ud800" in sent  # the escape's text, not the character

    from test_odd_lines import odd_transcript
    odd_transcript(tmp_path / "projects")
    assert run(capsys, "lcm_ingest", tmp_path / "projects")[0] == 0
    code, out, err = run(capsys, "lcm_checkpoint", "--session", "s1", "--llm", "--output", tmp_path / "cp.md")
    assert code == 0 and "narrative skipped" not in err, err

"""lcm_agentic_map.py: the API tool loop against the fake Messages API, and `claude -p` via a fake CLI."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import lcm_agentic_map
from fake_anthropic import Reply, make_fake_claude

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "lcm_agentic_map.py"
SCHEMA = {"type": "object", "properties": {"lines": {"type": "integer"}}, "required": ["lines"]}

# A fake `claude` that honours --tools the way the real CLI does: Write exists only when listed.
CLAUDE_THAT_WRITES = r'''
def respond(call):
    tools = (option(call["argv"], "--tools") or "").split(",")
    if "Write" in tools:
        with open(os.path.join(call["cwd"], "written-by-agent.txt"), "w") as f:
            f.write("hello")
        return {"result": '{"lines": 1}'}
    return {"result": '{"lines": 0}', "permission_denials": ["Write"]}
'''


@pytest.fixture
def project(tmp_path):
    root = tmp_path / "project"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("def main():\n    return 42\n")
    (root / "README.md").write_text("# demo\n")
    (tmp_path / "secret.txt").write_text("TOP SECRET")
    (tmp_path / "tasks.jsonl").write_text(json.dumps({"file": "src/app.py"}) + "\n")
    return root


def run_agentic(tmp_path, project, *extra, schema=SCHEMA):
    argv = ["--input", str(tmp_path / "tasks.jsonl"), "--output", str(tmp_path / "out.jsonl"),
            "--prompt", "Count the lines of the file.", "--cwd", str(project)]
    if schema is not None:
        (tmp_path / "schema.json").write_text(json.dumps(schema))
        argv += ["--schema", str(tmp_path / "schema.json")]
    return lcm_agentic_map.main(argv + list(extra))


def output(tmp_path) -> list[dict]:
    return [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]


def tool_results(body: dict) -> list[dict]:
    last = body["messages"][-1]
    return [block for block in last["content"] if isinstance(block, dict) and block.get("type") == "tool_result"]


# -- anthropic backend: the tool loop ------------------------------------------------------------

def test_tool_loop_reads_files_and_returns_a_validated_answer(tmp_path, project, fake_api, capsys):
    fake_api.enqueue(tool_use=[{"name": "list_dir", "input": {"path": "src"}}])
    fake_api.enqueue(tool_use=[{"name": "read_file", "input": {"path": "src/app.py"}},
                               {"name": "search", "input": {"pattern": "return \\d+"}}])
    fake_api.enqueue('{"lines": 2}')
    assert run_agentic(tmp_path, project) == 0
    assert output(tmp_path) == [{"item_index": 0, "ok": True, "result": {"lines": 2}}]
    assert json.loads(capsys.readouterr().out)["succeeded"] == 1
    first, second, third = fake_api.requests
    assert {tool["name"] for tool in first["tools"]} == {"read_file", "list_dir", "search"}
    assert "read-only" in first["system"] and "Count the lines" in first["system"]
    assert tool_results(second)[0]["content"] == "app.py"
    read, search = tool_results(third)
    assert "2\t    return 42" in read["content"] and not read["is_error"]
    assert "src/app.py:2: return 42" in search["content"]


def test_read_only_refuses_writes_and_stays_inside_the_working_directory(tmp_path, project, fake_api, capsys):
    fake_api.enqueue(tool_use=[{"name": "write_file", "input": {"path": "pwned.txt", "content": "x"}},
                               {"name": "read_file", "input": {"path": "../secret.txt"}},
                               {"name": "list_dir", "input": {"path": "/"}}])
    fake_api.enqueue('{"lines": 0}')
    assert run_agentic(tmp_path, project) == 0
    write, escape, root = tool_results(fake_api.requests[1])
    assert write["is_error"] and "read-only" in write["content"]
    assert escape["is_error"] and "outside the working directory" in escape["content"]
    assert root["is_error"] and "TOP SECRET" not in json.dumps(fake_api.requests[1])
    assert not (project / "pwned.txt").exists()
    assert all(tool["name"] != "write_file" for tool in fake_api.requests[0]["tools"])


def test_allow_write_offers_and_runs_the_write_tool(tmp_path, project, fake_api, capsys):
    fake_api.enqueue(tool_use=[{"name": "write_file", "input": {"path": "notes/out.txt", "content": "done"}}])
    fake_api.enqueue('{"lines": 1}')
    assert run_agentic(tmp_path, project, "--allow-write") == 0
    assert (project / "notes" / "out.txt").read_text() == "done"
    assert "write_file" in {tool["name"] for tool in fake_api.requests[0]["tools"]}
    assert not tool_results(fake_api.requests[1])[0]["is_error"]


def test_invalid_answer_goes_back_into_the_items_conversation(tmp_path, project, fake_api, capsys):
    fake_api.enqueue(tool_use=[{"name": "list_dir", "input": {}}])
    fake_api.enqueue('{"lines": "two"}')
    fake_api.enqueue('{"lines": 2}')
    assert run_agentic(tmp_path, project) == 0
    retry = fake_api.requests[2]["messages"]
    assert [m["role"] for m in retry] == ["user", "assistant", "user", "assistant", "user"]
    assert "rejected" in retry[-1]["content"] and "'two' is not of type 'integer'" in retry[-1]["content"]
    assert output(tmp_path)[0]["result"] == {"lines": 2}


@pytest.mark.slow  # waits out per-item timeouts
def test_per_item_timeout_and_turn_limit_hold(tmp_path, project, fake_api, capsys):
    (tmp_path / "tasks.jsonl").write_text("".join(json.dumps({"mode": m}) + "\n" for m in ("hang", "loop", "ok")))

    def answer(body):
        mode = json.loads(body["messages"][0]["content"])["mode"]
        if mode == "hang":
            return Reply(text='{"lines": 1}', delay=60.0)  # far beyond the bound below
        if mode == "loop":
            return Reply(tool_use=[{"name": "list_dir", "input": {}}])
        return '{"lines": 3}'
    fake_api.respond(answer)
    started = time.monotonic()
    assert run_agentic(tmp_path, project, "--timeout", "2", "--max-turns", "2", "--concurrency", "3") == 0
    assert time.monotonic() - started < 30, "the run waited for the hung item"
    hang, loop, ok = output(tmp_path)
    assert not hang["ok"] and "timed out after 2s" in hang["error"]
    assert not loop["ok"] and "--max-turns 2" in loop["error"]
    assert ok == {"item_index": 2, "ok": True, "result": {"lines": 3}}


# -- claude backend: one `claude -p` per item ---------------------------------------------------

def test_claude_backend_runs_a_restricted_headless_agent_per_item(tmp_path, project, fake_claude, capsys):
    fake_claude.enqueue(structured_output={"lines": 2})
    assert run_agentic(tmp_path, project, "--max-turns", "7") == 0
    assert output(tmp_path)[0]["result"] == {"lines": 2}
    call = fake_claude.calls()[0]
    argv = call["argv"]
    value = lambda flag: argv[argv.index(flag) + 1]  # noqa: E731
    assert value("--tools") == "Read,Glob,Grep" and value("--allowedTools") == "Read,Glob,Grep"
    assert value("--max-turns") == "7" and json.loads(value("--json-schema")) == SCHEMA
    assert value("--output-format") == "json" and "--no-session-persistence" in argv
    assert call["cwd"] == str(project) and call["prompt"] == json.dumps({"file": "src/app.py"})
    assert call["env"]["LCM_SUBAGENT"] == "1" and call["env"]["LCM_DELEGATION_DEPTH"] == "1"


def test_claude_read_only_really_forbids_writes(tmp_path, project, monkeypatch, capsys):
    fake = make_fake_claude(tmp_path / "bin", CLAUDE_THAT_WRITES)
    monkeypatch.setenv("PATH", f"{fake.dir}{os.pathsep}{os.environ['PATH']}")
    assert run_agentic(tmp_path, project) == 0
    assert not (project / "written-by-agent.txt").exists()
    assert run_agentic(tmp_path, project, "--allow-write") == 0
    assert (project / "written-by-agent.txt").exists()
    assert "Write" in fake.calls()[-1]["argv"][fake.calls()[-1]["argv"].index("--tools") + 1]


def test_claude_per_item_timeout_kills_the_agent(tmp_path, project, fake_claude, capsys):
    fake_claude.enqueue('{"lines": 1}', delay=60)  # far beyond the bound below: no flake under load
    started = time.monotonic()
    assert run_agentic(tmp_path, project, "--timeout", "1") == 0
    assert time.monotonic() - started < 30
    line = output(tmp_path)[0]
    assert not line["ok"] and "timed out after 1s (the agent was killed)" in line["error"]


def test_claude_schema_failure_is_retried_with_the_error(tmp_path, project, fake_claude, capsys):
    fake_claude.enqueue("I found two lines.")
    fake_claude.enqueue('{"lines": 2}')
    assert run_agentic(tmp_path, project) == 0
    retry = fake_claude.calls()[1]["prompt"]
    assert "I found two lines." in retry and "not valid JSON" in retry
    assert output(tmp_path)[0]["ok"]


# -- the delegation guard and bad input ------------------------------------------------------------

def test_guard_refuses_a_sub_agent_that_does_not_say_what_it_delegates(tmp_path, project, fake_claude,
                                                                       monkeypatch, capsys, vault):
    monkeypatch.setenv("LCM_SUBAGENT", "1")
    monkeypatch.setenv("LCM_DELEGATION_DEPTH", "1")
    assert run_agentic(tmp_path, project) == 1
    err = capsys.readouterr().err
    assert "refused inside a sub-agent" in err and "--delegated-scope" in err
    assert fake_claude.calls() == [] and not (tmp_path / "out.jsonl").exists() and not vault.exists()
    fake_claude.enqueue('{"lines": 2}')
    assert run_agentic(tmp_path, project, "--delegated-scope", "count lines of app.py",
                       "--kept-work", "writing the report") == 0
    assert fake_claude.calls()[0]["env"]["LCM_DELEGATION_DEPTH"] == "2"


@pytest.mark.parametrize("content,expected", [("", "has no items"), ('{"file": 1}\nnope\n', "line 2 is not valid JSON")])
def test_bad_input_fails_before_any_agent_starts(tmp_path, project, fake_api, capsys, vault, content, expected):
    (tmp_path / "tasks.jsonl").write_text(content)
    assert run_agentic(tmp_path, project) == 1
    assert expected in capsys.readouterr().err
    assert fake_api.requests == [] and not (tmp_path / "out.jsonl").exists() and not vault.exists()


def test_invalid_schema_fails_before_any_agent_starts(tmp_path, project, fake_claude, capsys, vault):
    assert run_agentic(tmp_path, project, schema={"type": 12}) == 1
    assert "not a valid JSON Schema" in capsys.readouterr().err
    assert fake_claude.calls() == [] and not vault.exists()


def test_dry_run_shows_the_agent_setup_without_starting_one(tmp_path, project, fake_claude, capsys, vault):
    assert run_agentic(tmp_path, project, "--dry-run") == 0
    report = json.loads(capsys.readouterr().out)
    assert report["total"] == 1 and report["read_only"] and report["tools"] == "Read,Glob,Grep"
    assert report["first_request"]["prompt"] == json.dumps({"file": "src/app.py"})
    assert fake_claude.calls() == [] and not vault.exists() and not (tmp_path / "out.jsonl").exists()


def test_script_runs_as_a_subprocess(tmp_path, project, fake_api):
    fake_api.respond(lambda body: '{"lines": 2}')
    done = subprocess.run([sys.executable, str(SCRIPT), "--input", str(tmp_path / "tasks.jsonl"), "--output",
                           str(tmp_path / "out.jsonl"), "--prompt", "Count.", "--cwd", str(project)],
                          capture_output=True, text=True, env=os.environ.copy(), timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["succeeded"] == 1
    help_run = subprocess.run([sys.executable, "-X", "importtime", str(SCRIPT), "--help"],
                              capture_output=True, text=True, timeout=60)
    assert help_run.returncode == 0 and "--allow-write" in help_run.stdout and "anthropic" not in help_run.stderr

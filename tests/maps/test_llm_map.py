"""lcm_llm_map.py against the fake Messages API (real anthropic SDK) and fake batch endpoints."""
from __future__ import annotations

import json
import re
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

import lcm_llm_map
from fake_anthropic import Reply
from fake_batches import FakeBatches
from conftest import run

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "lcm_llm_map.py"
SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}, "double": {"type": "integer"}},
          "required": ["n", "double"]}


def write_items(path: Path, items) -> Path:
    path.write_text("".join(json.dumps(item) + "\n" for item in items))
    return path


def read_output(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def first_item(body: dict) -> dict:
    return json.loads(body["messages"][0]["content"])


class ScriptedModel:
    """Answers each item by its "mode", counting calls per item (thread-safe)."""

    def __init__(self):
        self.calls: Counter = Counter()
        self.lock = threading.Lock()

    def __call__(self, body: dict):
        item = first_item(body)
        n, mode = item["n"], item.get("mode", "ok")
        with self.lock:
            self.calls[n] += 1
            call = self.calls[n]
        good = json.dumps({"n": n, "double": 2 * n})
        if mode == "429" and call == 1:
            return Reply(status=429)
        if mode == "500":
            return Reply(status=500)
        if mode == "badjson" and call == 1:
            return "Sure! Here it is: {n: " + str(n)
        if mode == "fenced":
            return "```json\n" + good + "\n```"
        if mode == "invalid":
            return json.dumps({"n": "not a number"})
        if mode == "fixlater" and call == 1:
            return json.dumps({"n": n})
        if mode == "hang" and call == 1:  # 60 s: far beyond --timeout, however loaded the machine
            return Reply(text=good, delay=60.0)
        if mode == "hangforever":
            return Reply(text=good, delay=60.0)
        if mode == "slow":
            return Reply(text=good, delay=0.02 * (n % 5))
        return good


def run_map(tmp_path, *extra, items=None, schema=SCHEMA, capsys=None):
    if items is not None:
        write_items(tmp_path / "in.jsonl", items)
    argv = ["--input", str(tmp_path / "in.jsonl"), "--output", str(tmp_path / "out.jsonl"),
            "--prompt", "Double n."]
    if schema is not None:
        (tmp_path / "schema.json").write_text(json.dumps(schema))
        argv += ["--schema", str(tmp_path / "schema.json")]
    code = lcm_llm_map.main(argv + list(extra))
    return code


def vault_rows(vault: Path, sql: str, params=()):
    conn = sqlite3.connect(vault)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


# -- the contract under injected failures ---------------------------------------------------

@pytest.mark.slow  # waits out injected failures and retries
def test_injected_failures_end_every_item_ok_or_with_a_clear_error(tmp_path, fake_api, capsys, vault):
    modes = ["ok", "429", "500", "badjson", "fenced", "invalid", "fixlater", "hang", "hangforever", "slow"]
    items = [{"n": i, "mode": modes[i % len(modes)]} for i in range(40)]
    model = ScriptedModel()
    fake_api.respond(model)
    # --timeout 2: every other answer comes at once from 127.0.0.1, with room to spare under load
    code = run_map(tmp_path, "--concurrency", "8", "--timeout", "2", "--api-retries", "1", items=items)
    assert code == 0
    summary = json.loads(capsys.readouterr().out)
    lines = read_output(tmp_path / "out.jsonl")
    assert [line["item_index"] for line in lines] == list(range(40))  # order holds, none lost or duplicated
    by_mode = {}
    for item, line in zip(items, lines):
        by_mode.setdefault(item["mode"], []).append(line)
        if line["ok"]:
            assert line["result"] == {"n": item["n"], "double": 2 * item["n"]}
            assert set(line) == {"item_index", "ok", "result"}
        else:
            assert set(line) == {"item_index", "ok", "error"} and line["error"]
    for mode in ("ok", "429", "badjson", "fenced", "fixlater", "hang", "slow"):
        assert all(line["ok"] for line in by_mode[mode]), mode
    assert all("API error 500" in line["error"] for line in by_mode["500"])
    assert all("schema" in line["error"] and "3 attempts" in line["error"] for line in by_mode["invalid"])
    assert all("no answer within 2s" in line["error"] for line in by_mode["hangforever"])
    assert summary["total"] == 40 and summary["failed"] == 12 and summary["succeeded"] == 28
    # SKILL.md tells the agent to find failures with grep '"ok": false'
    failed_lines = [ln for ln in (tmp_path / "out.jsonl").read_text().splitlines() if '"ok": false' in ln]
    assert len(failed_lines) == summary["failed"]
    assert summary["output"] == str((tmp_path / "out.jsonl").resolve())
    assert summary["input_tokens"] > 0 and summary["output_tokens"] > 0
    assert set(summary) == {"map_id", "total", "succeeded", "failed", "output", "input_tokens", "output_tokens"}
    # one stateless call per attempt: the invalid items used exactly --max-attempts calls each
    assert all(model.calls[item["n"]] == 3 for item in items if item["mode"] == "invalid")
    rows = vault_rows(vault, "SELECT status, attempts FROM map_items WHERE run_id = ? AND item_index = 3",
                      (summary["map_id"],))
    assert rows == [("ok", 2)]  # badjson: one retry


def test_retry_carries_the_previous_answer_and_the_error(tmp_path, fake_api, capsys):
    fake_api.enqueue(json.dumps({"n": 1}))
    fake_api.enqueue(json.dumps({"n": 1, "double": 2}))
    assert run_map(tmp_path, items=[{"n": 1}]) == 0
    retry = fake_api.requests[1]["messages"]
    assert [m["role"] for m in retry] == ["user", "assistant", "user"]
    assert retry[1]["content"] == json.dumps({"n": 1})
    assert "'double' is a required property" in retry[2]["content"]
    system = fake_api.requests[0]["system"]
    assert "exactly one JSON value" in system and "Double n." in system and '"required"' in system
    assert fake_api.requests[0]["output_config"]["format"]["type"] == "json_schema"


def test_without_schema_any_json_value_is_accepted(tmp_path, fake_api, capsys):
    fake_api.enqueue('"just a string"')
    fake_api.enqueue("not json at all")
    fake_api.enqueue("[1, 2]")
    assert run_map(tmp_path, "--concurrency", "1", items=["first", "second"], schema=None) == 0
    assert [line["result"] for line in read_output(tmp_path / "out.jsonl")] == ["just a string", [1, 2]]
    assert "output_config" not in fake_api.requests[0]
    assert fake_api.requests[0]["messages"][0]["content"] == "first"  # a string item goes in as is


def test_model_refusing_structured_outputs_falls_back_to_the_plain_prompt(tmp_path, fake_api, capsys):
    def answer(body):
        if "output_config" in body:
            return Reply(status=400, error_message="output_config.format: structured outputs are not supported")
        return json.dumps({"n": first_item(body)["n"], "double": 0})
    fake_api.respond(answer)
    assert run_map(tmp_path, "--concurrency", "1", items=[{"n": i} for i in range(3)]) == 0
    assert all(line["ok"] for line in read_output(tmp_path / "out.jsonl"))
    assert "output_config" in fake_api.requests[0]
    assert all("output_config" not in body for body in fake_api.requests[1:])
    assert "refused structured outputs" in capsys.readouterr().err


def test_refused_credentials_stop_the_run_with_an_error(tmp_path, fake_api, capsys):
    fake_api.respond(lambda body: Reply(status=401))
    assert run_map(tmp_path, items=[{"n": i} for i in range(5)]) == 1
    err = capsys.readouterr().err
    assert "Error: the API refused the credentials" in err and "--resume" in err
    assert not (tmp_path / "out.jsonl").exists()


# -- resume ---------------------------------------------------------------------------------

@pytest.mark.slow  # a kill loop
def test_killed_run_finishes_with_resume_without_redoing_finished_items(tmp_path, fake_api, vault):
    total = 100
    write_items(tmp_path / "in.jsonl", [{"n": i} for i in range(total)])
    fake_api.respond(lambda body: Reply(text=json.dumps({"n": first_item(body)["n"], "double": 0}), delay=0.05))
    argv = [sys.executable, str(SCRIPT), "--input", str(tmp_path / "in.jsonl"),
            "--output", str(tmp_path / "out.jsonl"), "--prompt", "Double n.", "--concurrency", "2"]
    child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=os.environ.copy())
    deadline = time.monotonic() + 30
    finished = 0
    while time.monotonic() < deadline and finished < 8:
        time.sleep(0.1)
        if vault.exists():
            try:
                finished = vault_rows(vault, "SELECT COUNT(*) FROM map_items WHERE status = 'ok'")[0][0]
            except sqlite3.OperationalError:
                pass  # tables not created yet
    child.send_signal(signal.SIGKILL)
    child.wait()
    assert not (tmp_path / "out.jsonl").exists()  # no half file that looks complete
    done_before = {row[0] for row in vault_rows(vault, "SELECT item_index FROM map_items WHERE status = 'ok'")}
    assert 8 <= len(done_before) < total
    requests_before = len(fake_api.requests)

    assert lcm_llm_map.main(argv[2:] + ["--resume"]) == 0
    redone = [first_item(body)["n"] for body in fake_api.requests[requests_before:]]
    assert sorted(redone) == sorted(set(range(total)) - done_before)  # each missing item once, no finished one
    lines = read_output(tmp_path / "out.jsonl")
    assert [line["item_index"] for line in lines] == list(range(total)) and all(line["ok"] for line in lines)
    assert vault_rows(vault, "SELECT COUNT(*), MIN(status), MAX(status) FROM map_runs")[0] == (1, "done", "done")


def test_resume_retries_only_the_failed_items(tmp_path, fake_api, capsys):
    items = [{"n": i} for i in range(10)]
    fake_api.respond(lambda body: Reply(status=500) if first_item(body)["n"] in (2, 7)
                     else json.dumps({"n": first_item(body)["n"], "double": 1}))
    assert run_map(tmp_path, "--api-retries", "0", items=items) == 0
    first = json.loads(capsys.readouterr().out)
    assert first["failed"] == 2
    fake_api.respond(lambda body: json.dumps({"n": first_item(body)["n"], "double": 1}))
    seen = len(fake_api.requests)
    assert run_map(tmp_path, "--resume") == 0
    second = json.loads(capsys.readouterr().out)
    assert sorted(first_item(b)["n"] for b in fake_api.requests[seen:]) == [2, 7]
    assert second["map_id"] == first["map_id"] and second["failed"] == 0 and second["succeeded"] == 10


def test_resume_refuses_a_changed_input(tmp_path, fake_api, capsys):
    fake_api.respond(lambda body: json.dumps({"n": 0, "double": 0}))
    assert run_map(tmp_path, items=[{"n": 1}]) == 0
    write_items(tmp_path / "in.jsonl", [{"n": 1}, {"n": 2}])
    assert run_map(tmp_path, "--resume") == 1
    assert "changed since run map_" in capsys.readouterr().err


# -- bad input: Error, exit 1, no model call, nothing written --------------------------------

@pytest.mark.parametrize("case", ["missing", "bad_line", "bad_schema", "schema_not_json", "empty", "blank_only",
                                  "empty_prompt"])
def test_bad_input_fails_before_any_model_call(tmp_path, fake_api, capsys, vault, case):
    inp = write_items(tmp_path / "in.jsonl", [{"n": 1}, {"n": 2}, {"n": 3}])
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps(SCHEMA))
    prompt = "Double n."
    expected = ""
    if case == "missing":
        inp = tmp_path / "nope.jsonl"
        expected = "does not exist"
    elif case == "bad_line":
        inp.write_text('{"n": 1}\n\n{"n": 2\n{"n": 3}\n')
        expected = "line 3 is not valid JSON"
    elif case == "bad_schema":
        schema.write_text(json.dumps({"type": "objekt"}))
        expected = "not a valid JSON Schema"
    elif case == "schema_not_json":
        schema.write_text("{type: object")
        expected = "is not valid JSON"
    elif case == "empty":
        inp.write_text("")
        expected = "has no items"
    elif case == "blank_only":
        inp.write_text("\n  \n")
        expected = "has no items"
    elif case == "empty_prompt":
        prompt = "  "
        expected = "prompt is empty"
    out = tmp_path / "out.jsonl"
    code = lcm_llm_map.main(["--input", str(inp), "--output", str(out), "--prompt", prompt, "--schema", str(schema)])
    err = capsys.readouterr().err
    assert code == 1 and err.startswith("Error: ") and expected in err and "Hint: " in err
    assert fake_api.requests == [] and not out.exists() and not vault.exists()


def test_dry_run_estimates_without_calling_or_writing(tmp_path, fake_api, capsys, vault):
    assert run_map(tmp_path, "--dry-run", "--model", "claude-haiku-4-5", items=[{"n": i} for i in range(25)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["total"] == 25 and report["estimated_input_tokens"] > 25
    assert report["estimated_cost_usd"] > 0 and report["max_cost_usd"] >= report["estimated_cost_usd"]
    assert report["first_request"]["messages"][0]["content"] == json.dumps({"n": 0})
    assert fake_api.requests == [] and not (tmp_path / "out.jsonl").exists() and not vault.exists()


# -- --batch against fake batch endpoints -----------------------------------------------------

def test_batch_submits_polls_collects_and_retries(tmp_path, monkeypatch, capsys, vault):
    with FakeBatches(polls_before_end=2) as api:
        for key, value in api.env().items():
            monkeypatch.setenv(key, value)
        calls: Counter = Counter()

        def answer(body):
            n = first_item(body)["n"]
            calls[n] += 1
            if n == 1 and calls[n] == 1:
                return json.dumps({"n": 1})                    # schema-invalid, fixed on the retry
            if n == 2 and calls[n] == 1:
                return Reply(status=529)                       # errored result: resubmitted
            if n == 3 and calls[n] == 1:
                return Reply(error_type="expired")             # expired: resubmitted
            if n == 4:
                return Reply(status=400, error_message="prompt is too long")  # never fixable
            return "```json\n" + json.dumps({"n": n, "double": 2 * n}) + "\n```"
        api.respond(answer)
        code = run_map(tmp_path, "--batch", "--poll-interval", "0.05", items=[{"n": i} for i in range(6)])
        assert code == 0
        summary = json.loads(capsys.readouterr().out)
        assert summary["succeeded"] == 5 and summary["failed"] == 1
        lines = read_output(tmp_path / "out.jsonl")
        assert [line["item_index"] for line in lines] == list(range(6))
        assert "prompt is too long" in lines[4]["error"]
        assert api.requests == []  # nothing went through the one-call-per-item endpoint
        first, second = api.batches.values()
        assert len(first) == 6 and sorted(first_item(p)["n"] for p in second) == [1, 2, 3]
        retry = next(p for p in second if first_item(p)["n"] == 1)["messages"]
        assert [m["role"] for m in retry] == ["user", "assistant", "user"] and "required" in retry[2]["content"]
        assert all(polls >= 3 for polls in api.batch_polls.values())  # polled until ended
        options = json.loads(vault_rows(vault, "SELECT options FROM map_runs")[0][0])
        assert options["open_batches"] == []


def test_batch_resume_collects_the_open_batch_instead_of_resubmitting(tmp_path, monkeypatch, vault):
    with FakeBatches(polls_before_end=1000) as api:
        for key, value in api.env().items():
            monkeypatch.setenv(key, value)
        api.respond(lambda body: json.dumps({"n": first_item(body)["n"], "double": 0}))
        write_items(tmp_path / "in.jsonl", [{"n": i} for i in range(4)])
        argv = [sys.executable, str(SCRIPT), "--input", str(tmp_path / "in.jsonl"), "--output",
                str(tmp_path / "out.jsonl"), "--prompt", "Double n.", "--batch", "--poll-interval", "0.05"]
        child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=os.environ.copy())
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not any(api.batch_polls.values()):
            time.sleep(0.05)
        child.send_signal(signal.SIGKILL)
        child.wait()
        assert len(api.batches) == 1 and not (tmp_path / "out.jsonl").exists()
        api.polls_before_end = 0
        assert lcm_llm_map.main(argv[2:] + ["--resume"]) == 0
        assert len(api.batches) == 1  # the submitted batch was collected, not paid for twice
        assert all(line["ok"] for line in read_output(tmp_path / "out.jsonl"))


# -- the claude backend and the command line --------------------------------------------------

def test_claude_backend_uses_json_schema_and_structured_output(tmp_path, fake_claude, capsys):
    fake_claude.enqueue(structured_output={"n": 1, "double": 2})
    fake_claude.enqueue(result="```json\n{\"n\": 2, \"double\": 4}\n```")
    assert run_map(tmp_path, "--concurrency", "1", items=[{"n": 1}, {"n": 2}]) == 0
    assert [line["result"]["double"] for line in read_output(tmp_path / "out.jsonl")] == [2, 4]
    call = fake_claude.calls()[0]
    assert json.loads(call["argv"][call["argv"].index("--json-schema") + 1]) == SCHEMA
    assert call["argv"][call["argv"].index("--tools") + 1] == "" and call["env"]["LCM_SUBAGENT"] == "1"


def test_batch_needs_the_api_backend(tmp_path, fake_claude, capsys):
    assert run_map(tmp_path, "--batch", items=[{"n": 1}]) == 1
    assert "--batch needs the anthropic backend" in capsys.readouterr().err
    assert fake_claude.calls() == []


def test_script_runs_as_a_subprocess_and_help_does_not_import_the_sdk(tmp_path, fake_api):
    fake_api.respond(lambda body: json.dumps({"n": first_item(body)["n"], "double": 0}))
    write_items(tmp_path / "in.jsonl", [{"n": 5}])
    done = subprocess.run([sys.executable, str(SCRIPT), "--input", str(tmp_path / "in.jsonl"), "--output",
                           str(tmp_path / "out.jsonl"), "--prompt", "Double n."],
                          capture_output=True, text=True, env=os.environ.copy(), timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["succeeded"] == 1
    help_run = subprocess.run([sys.executable, "-X", "importtime", str(SCRIPT), "--help"],
                              capture_output=True, text=True, timeout=60)
    assert help_run.returncode == 0 and "--batch" in help_run.stdout
    assert "anthropic" not in help_run.stderr and "jsonschema" not in help_run.stderr


def test_prompt_file_and_resuming_a_finished_run_makes_no_call(tmp_path, fake_api, capsys):
    (tmp_path / "prompt.txt").write_text("Label each review.\n")
    write_items(tmp_path / "in.jsonl", ["great", "awful"])
    argv = ["--input", str(tmp_path / "in.jsonl"), "--output", str(tmp_path / "out.jsonl"),
            "--prompt-file", str(tmp_path / "prompt.txt")]
    fake_api.respond(lambda body: '"positive"')
    assert lcm_llm_map.main(argv) == 0
    assert "Label each review." in fake_api.requests[0]["system"]
    first = (tmp_path / "out.jsonl").read_text()
    (tmp_path / "out.jsonl").unlink()
    assert lcm_llm_map.main(argv + ["--resume"]) == 0
    assert len(fake_api.requests) == 2 and (tmp_path / "out.jsonl").read_text() == first
    assert lcm_llm_map.main(argv[:4] + ["--prompt-file", str(tmp_path / "missing.txt")]) == 1
    assert "cannot read prompt file" in capsys.readouterr().err


# -- what a person reads: file modes, errors that show the answer, hints that lead somewhere ------

def test_output_file_is_private_like_every_lcm_file(tmp_path, fake_api, capsys):
    (tmp_path / "out.jsonl").write_text("an older, world-readable result\n")
    os.chmod(tmp_path / "out.jsonl", 0o644)
    fake_api.respond(lambda body: json.dumps({"n": first_item(body)["n"], "double": 0}))
    old_umask = os.umask(0o022)
    try:
        assert run_map(tmp_path, items=[{"n": 1}, {"n": 2}]) == 0
    finally:
        os.umask(old_umask)
    assert (tmp_path / "out.jsonl").stat().st_mode & 0o777 == 0o600
    assert len(read_output(tmp_path / "out.jsonl")) == 2


def test_an_answer_that_is_not_json_is_quoted_in_the_error(tmp_path, fake_api, capsys):
    fake_api.respond(lambda body: "Sure! The double of n is 4, as requested.")
    assert run_map(tmp_path, "--max-attempts", "2", items=[{"n": 2}]) == 0
    error = read_output(tmp_path / "out.jsonl")[0]["error"]
    assert "not valid JSON" in error and '"Sure! The double of n is 4' in error and "2 attempts" in error


def test_a_run_that_failed_before_any_item_is_not_offered_for_resume(tmp_path, fake_api, capsys):
    fake_api.respond(lambda body: Reply(status=401))
    assert run_map(tmp_path, items=[{"n": 1}]) == 1
    capsys.readouterr()
    fake_api.respond(lambda body: json.dumps({"n": 1, "double": 2}))
    assert run_map(tmp_path) == 0
    err = capsys.readouterr().err
    assert "failed before any item was done" in err and "--resume would continue" not in err


def test_a_run_stopped_halfway_is_offered_for_resume_with_its_count(tmp_path, fake_api, capsys, vault):
    fake_api.respond(lambda body: json.dumps({"n": 1, "double": 2}))
    assert run_map(tmp_path, items=[{"n": 1}, {"n": 2}]) == 0
    conn = sqlite3.connect(vault)
    with conn:  # as a crash would leave it: one item done, the run still marked running
        conn.execute("UPDATE map_runs SET status = 'running'")
        conn.execute("DELETE FROM map_items WHERE item_index = 1")
    conn.close()
    capsys.readouterr()
    assert run_map(tmp_path) == 0
    assert "did not finish (1 of 2 items ok); --resume would continue it" in capsys.readouterr().err


@pytest.mark.parametrize("env, expected", [
    ({"LCM_LLM": "none"}, "unset LCM_LLM"),
    ({"ANTHROPIC_API_KEY": "sk-test", "PATH": "/nonexistent"}, None),  # filled in below
    ({"PATH": "/nonexistent"}, "set ANTHROPIC_API_KEY"),
])
def test_without_a_backend_the_hint_leads_to_one_not_back_to_none(tmp_path, monkeypatch, capsys, env, expected):
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    if "ANTHROPIC_API_KEY" in env:
        pytest.importorskip("anthropic")  # with the SDK present the key alone makes a backend
        monkeypatch.setattr(lcm_llm_map.lcm.base.llm, "sdk_available", lambda: False)
        expected = "pip install anthropic"
    assert run_map(tmp_path, items=[{"n": 1}]) == 1
    err = capsys.readouterr().err
    assert "needs a model" in err and expected in err
    assert "LCM_LLM=none" not in err.split("Hint:")[1]
    assert not (tmp_path / "out.jsonl").exists()


def test_dry_run_without_a_backend_says_the_run_would_fail(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("LCM_LLM", "none")
    assert run_map(tmp_path, "--dry-run", items=[{"n": 1}, {"n": 2}]) == 1
    out, err = capsys.readouterr()
    report = json.loads(out)
    assert report["backend"] == "none" and report["ready"] is False and report["total"] == 2
    assert "LCM_LLM=none turns models off" in report["problem"] and "unset LCM_LLM" in report["hint"]
    assert err.startswith("Error: ") and "Hint: unset LCM_LLM" in err


@pytest.mark.parametrize("env, missing, expected", [
    ({"LCM_LLM": "anthropic", "ANTHROPIC_API_KEY": "sk-test"}, True, "pip install anthropic"),
    ({"LCM_LLM": "anthropic"}, False, "export ANTHROPIC_API_KEY"),
    ({"LCM_LLM": "claude", "PATH": "/nonexistent"}, False, "install Claude Code"),
])
def test_dry_run_is_not_ready_when_the_chosen_backend_cannot_start(tmp_path, monkeypatch, capsys, env, missing, expected):
    """The dry run said "ready": true for LCM_LLM=anthropic without the SDK, and the real run's
    hint then offered LCM_LLM=none, which llm_map refuses. Both now name what is missing."""
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    if missing:  # the package absent, as on a machine where it was never installed
        monkeypatch.setattr(lcm_llm_map.lcm.base.llm, "sdk_available", lambda: False)
    assert run_map(tmp_path, "--dry-run", items=[{"n": 1}]) == 1
    out, err = capsys.readouterr()
    report = json.loads(out)
    assert report["ready"] is False and report["backend"] == env["LCM_LLM"] and expected in report["hint"]
    assert run_map(tmp_path, items=[{"n": 1}]) == 1
    err = capsys.readouterr().err
    assert expected in err and "LCM_LLM=none" not in err
    assert not (tmp_path / "out.jsonl").exists()


def test_map_commands_only_parse_and_print():
    """Issue 19: the map scripts parse, call lcm.maps, print; the logic lives in lcm/maps/, one job a
    module, and every model call in lcm/base/llm.py (no map module imports anthropic)."""
    scripts = SCRIPT.parent
    modules = sorted((scripts / "lcm" / "maps").glob("*.py"))
    assert {m.stem for m in modules} >= {"job", "state", "worker", "backends", "batches", "tools", "run"}
    for module in modules + [scripts / "lcm" / "base" / "llm.py"]:
        text = module.read_text()
        if module.name != "llm.py":
            assert not re.search(r"^\s*(import anthropic|from anthropic)", text, re.M), module.name
            assert ".messages." not in text, f"{module.name} calls the SDK itself"


@pytest.mark.parametrize("command", ["lcm_llm_map", "lcm_agentic_map"])
def test_map_tools_never_replace_an_output_that_is_no_regular_file(capsys, tmp_path, fake_api, command):
    """The map tools' output goes through the same rename: a FIFO (or a device) named as
    --output was replaced by the results file."""
    import os
    import stat
    (tmp_path / "in.jsonl").write_text('{"a": 1}\n')
    os.mkfifo(tmp_path / "fifo")
    code, out, err = run(capsys, command, "--input", tmp_path / "in.jsonl", "--output", tmp_path / "fifo",
                         "--prompt", "Sum up")
    assert code == 1 and "not a regular file" in err and "Hint:" in err
    assert stat.S_ISFIFO(os.stat(tmp_path / "fifo").st_mode)

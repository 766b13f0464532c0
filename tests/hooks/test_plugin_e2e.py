"""The plugin inside a real Claude Code, offline.

A fake Messages API on 127.0.0.1 plays the model: asked to "RUNTOOL", it answers with a Bash
tool call that prints $LCM_SCRIPTS. `claude -p --plugin-dir <repo>` then runs our hooks for real:
the session must land in the vault, the Bash call must see LCM_SCRIPTS (from CLAUDE_ENV_FILE), and
a `/compact` of the resumed session must run the PreCompact compaction (summaries in the vault, our
instructions in the compaction request) and the SessionStart(compact) injection.

The CLI comes from `.ci/run` (a pinned @anthropic-ai/claude-code in ~/.cache/lcm-ci/npm) or PATH;
without it these tests skip and say why, unless LCM_TEST_REQUIRE_CLAUDE=1 (set by .ci/run).
"""
from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import sys
import subprocess
from pathlib import Path

import pytest

from fake_anthropic import FakeAnthropic

pytestmark = pytest.mark.slow  # the real claude CLI, installs and clones

ROOT = Path(__file__).resolve().parents[2]
# .ci/run's cached npm prefix (LCM_CI_NPM_PREFIX overrides it there and here)
CI_BIN = Path(os.environ.get("LCM_CI_NPM_PREFIX") or Path.home() / ".cache" / "lcm-ci" / "npm") / "bin"
REQUIRED = os.environ.get("LCM_TEST_REQUIRE_CLAUDE") == "1"  # read before conftest strips LCM_*
CALL_TIMEOUT = 90


def find_claude() -> str | None:
    candidate = CI_BIN / "claude"
    if candidate.is_file() and os.access(candidate, os.X_OK):
        return str(candidate)
    return shutil.which("claude")


CLAUDE = find_claude()


def require_claude() -> str:
    if CLAUDE:
        return CLAUDE
    why = (f"no `claude` CLI in {CI_BIN} or on PATH; .ci/run installs the pinned "
           "@anthropic-ai/claude-code there (npm install -g --prefix ~/.cache/lcm-ci/npm ...)")
    if REQUIRED:
        pytest.fail(why)
    pytest.skip(why)


class StreamingFake(FakeAnthropic):
    """FakeAnthropic that also speaks the SSE stream Claude Code asks for (`"stream": true`)."""

    def handle_messages(self, request):
        reply = super().handle_messages(request)
        if reply.status == 200 and (request.body or {}).get("stream") and isinstance(reply.body, dict):
            reply.body = {"_sse": sse_events(reply.body)}
        return reply

    def _make_handler(self):
        base = super()._make_handler()

        class Handler(base):
            def _send(self, reply):
                if isinstance(reply.body, dict) and "_sse" in reply.body:
                    data = reply.body["_sse"].encode()
                    self.send_response(200)
                    self.send_header("content-type", "text/event-stream")
                    self.send_header("content-length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return
                super()._send(reply)

        return Handler


def sse_events(message: dict) -> str:
    events = []

    def event(name: str, data: dict) -> None:
        events.append(f"event: {name}\ndata: {json.dumps(data)}\n\n")

    event("message_start", {"type": "message_start",
                            "message": dict(message, content=[], stop_reason=None)})
    for index, block in enumerate(message["content"]):
        if block["type"] == "text":
            event("content_block_start", {"type": "content_block_start", "index": index,
                                          "content_block": {"type": "text", "text": ""}})
            delta = {"type": "text_delta", "text": block["text"]}
        else:
            event("content_block_start", {"type": "content_block_start", "index": index,
                                          "content_block": dict(block, input={})})
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        event("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta})
        event("content_block_stop", {"type": "content_block_stop", "index": index})
    event("message_delta", {"type": "message_delta",
                            "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                            "usage": {"output_tokens": message["usage"]["output_tokens"]}})
    event("message_stop", {"type": "message_stop"})
    return "".join(events)


def last_turn(body: dict) -> dict:
    """The last user/assistant message: Claude Code may append a trailing system message."""
    for message in reversed(body.get("messages") or []):
        if message.get("role") in ("user", "assistant"):
            return message
    return {}


def responder(body: dict):
    content = last_turn(body).get("content")
    blocks = content if isinstance(content, list) else []
    if any(isinstance(b, dict) and b.get("type") == "tool_result" for b in blocks):
        return {"text": "The command printed the scripts directory."}
    text = FakeAnthropic.user_text(body)
    if "SUBTASK" in text:  # the sub-agent's own conversation
        return {"text": "hi from the subagent"}
    if "RUNAGENT" in text:
        return {"text": "Delegating.",
                "tool_use": [{"name": "Task", "input": {"description": "probe subagent", "prompt": "SUBTASK say hi",
                                                        "subagent_type": "general-purpose"}}]}
    if "RUNTOOL" in text:
        return {"text": "I'll check the environment.",
                "tool_use": [{"name": "Bash", "input": {"command": "echo LCM=$LCM_SCRIPTS",
                                                        "description": "show LCM_SCRIPTS"}}]}
    if "summary" in text.lower() or "summar" in FakeAnthropic.system_text(body).lower():
        return {"text": "Summary: the user asked to check the environment; LCM_SCRIPTS was printed."}
    return {"text": "ok"}


@pytest.fixture(scope="module")
def claude_run(tmp_path_factory):
    """Two real Claude Code runs: a turn with a Bash call, then `/compact` on the resumed session."""
    claude = require_claude()
    base = tmp_path_factory.mktemp("claude-e2e")
    for name in ("home", "tmp", "proj"):
        (base / name).mkdir()
    with StreamingFake() as api:
        api.respond(responder)
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("CLAUDE", "LCM_", "ANTHROPIC_"))}
        env.update(api.env())
        env.update({
            "HOME": str(base / "home"), "TMPDIR": str(base / "tmp"), "LCM_HOME": str(base / "lcm"),
            "DISABLE_AUTOUPDATER": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            # deterministic summaries, and a session this short still has something to compact
            "LCM_LLM": "none", "LCM_FRESH_TAIL_COUNT": "1", "LCM_LEAF_MIN_TOKENS": "1",
        })

        def claude_p(*args: str) -> list[dict]:
            """The stream-json events of one run: init (skills, plugins) ... result."""
            proc = subprocess.run(
                [claude, "-p", "--plugin-dir", str(ROOT), "--output-format", "stream-json", "--verbose", *args],
                cwd=base / "proj", env=env, capture_output=True, text=True, timeout=CALL_TIMEOUT)
            assert proc.returncode == 0, f"claude failed ({proc.returncode}): {proc.stderr[-2000:]}"
            return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]

        events = claude_p("--allowedTools", "Bash", "--", "RUNTOOL please show where lcm lives")
        init = next(e for e in events if e.get("type") == "system" and e.get("subtype") == "init")
        first = events[-1]
        sid = first["session_id"]
        requests_before_compact = len(api.requests)
        second = claude_p("--resume", sid, "--", "/compact")[-1]
        compaction_requests = api.requests[requests_before_compact:]
    transcripts = list((base / "home" / ".claude" / "projects").glob(f"*/{sid}.jsonl"))
    return {"base": base, "sid": sid, "init": init, "first": first, "second": second,
            "compaction_requests": compaction_requests,
            "transcript": transcripts[0] if transcripts else None,
            "vault": base / "lcm" / "lcm.db", "log": base / "lcm" / "lcm.log"}


def vault_rows(run, sql, *params):
    conn = sqlite3.connect(run["vault"])
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def test_plugin_loads_with_its_skill(claude_run):
    init = claude_run["init"]
    assert "lcm:lcm" in init["skills"]
    # only what matters: newer Claude Code versions add keys to each entry (2.1.330: "version")
    ours = [p for p in init["plugins"] if p.get("name") == "lcm"]
    assert len(ours) == 1, init["plugins"]
    assert ours[0]["path"] == str(ROOT) and ours[0]["source"] == "lcm@inline", ours


def test_session_lands_in_the_vault(claude_run):
    assert claude_run["first"]["result"] == "The command printed the scripts directory."
    rows = vault_rows(claude_run, "SELECT type, content FROM messages WHERE session_id = ? ORDER BY id",
                      claude_run["sid"])
    contents = [content for _type, content in rows]
    assert any("RUNTOOL please show where lcm lives" in c for c in contents)
    assert any("echo LCM=$LCM_SCRIPTS" in c for c in contents), "the tool call is indexed"


def test_lcm_scripts_is_set_inside_the_bash_tool(claude_run):
    expected = f"LCM={ROOT / 'scripts'}"
    rows = vault_rows(claude_run, "SELECT content FROM messages WHERE session_id = ? AND content LIKE 'LCM=%'",
                      claude_run["sid"])
    assert [c for (c,) in rows if c.strip() == expected], (
        f"no tool_result {expected!r} in the vault; log: {read(claude_run['log'])}")


def test_subagent_transcript_is_captured(tmp_path):
    """A Task sub-agent: SubagentStop ingests its own transcript as sidechain messages."""
    claude = require_claude()
    for name in ("cc-home", "cc-tmp", "proj"):
        (tmp_path / name).mkdir()
    with StreamingFake() as api:
        api.respond(responder)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE", "LCM_", "ANTHROPIC_"))}
        env.update(api.env())
        env.update({"HOME": str(tmp_path / "cc-home"), "TMPDIR": str(tmp_path / "cc-tmp"),
                    "LCM_HOME": str(tmp_path / "lcm"), "LCM_LLM": "none",
                    "DISABLE_AUTOUPDATER": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"})
        proc = subprocess.run([claude, "-p", "--plugin-dir", str(ROOT), "--output-format", "json",
                               "--allowedTools", "Task", "--", "RUNAGENT please"], cwd=tmp_path / "proj",
                              env=env, capture_output=True, text=True, timeout=CALL_TIMEOUT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    sid = json.loads(proc.stdout)["session_id"]
    conn = sqlite3.connect(tmp_path / "lcm" / "lcm.db")
    try:
        rows = conn.execute("SELECT content FROM messages WHERE session_id = ? AND is_sidechain = 1"
                            " AND agent_id IS NOT NULL ORDER BY id", (sid,)).fetchall()
    finally:
        conn.close()
    assert [c for (c,) in rows] == ["SUBTASK say hi", "hi from the subagent"]


def test_compact_runs_precompact_compaction(claude_run):
    summaries = vault_rows(claude_run, "SELECT id FROM summaries WHERE session_id = ?", claude_run["sid"])
    assert summaries, f"PreCompact made no summaries; log: {read(claude_run['log'])}"
    ids = {sid for (sid,) in summaries}
    # our plain-text PreCompact output reached Claude Code's own compactor, naming our summaries
    sent = "\n".join(json.dumps(body) for body in claude_run["compaction_requests"])
    assert "LCM (lossless context management) instructions" in sent
    assert any(i in sent for i in ids)
    hook_rows = vault_rows(claude_run, "SELECT trigger, pre_tokens, post_tokens FROM compactions"
                           " WHERE session_id = ? AND source = 'hook'", claude_run["sid"])
    assert len(hook_rows) == 1, "PostCompact recorded the compaction"
    trigger, pre, post = hook_rows[0]
    assert trigger == "manual" and pre > 0 and post > 0, hook_rows


def test_compact_reinjects_the_active_context(claude_run):
    assert claude_run["transcript"] is not None
    injected = [entry for entry in map(json.loads, claude_run["transcript"].read_text().splitlines())
                if entry.get("type") == "attachment"
                and (entry.get("attachment") or {}).get("type") == "hook_additional_context"]
    texts = [json.dumps(entry["attachment"]) for entry in injected]
    assert any("lcm: active context of this session after compaction" in t for t in texts), texts
    assert any("sum_" in t and "lcm_expand_query.py" in t for t in texts)


def read(path: Path) -> str:
    return path.read_text() if path.exists() else "(no log)"


def test_plugin_validate_strict_passes(tmp_path):
    """`claude plugin validate --strict .` (marketplace + plugin manifest) and the manifest alone."""
    claude = require_claude()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE", "ANTHROPIC_"))}
    env.update({"HOME": str(tmp_path), "DISABLE_AUTOUPDATER": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"})
    for target in (".", ".claude-plugin/plugin.json"):
        proc = subprocess.run([claude, "plugin", "validate", "--strict", target], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=CALL_TIMEOUT)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "Validation passed" in proc.stdout
        # newer CLIs also run the plugin directory's checks, whose warnings --strict lets pass
        # (2.1.330: ICON_MISSING without .claude-plugin/icon.png)
        assert "⚠" not in proc.stdout and "warning" not in proc.stdout.lower(), proc.stdout


def test_marketplace_install_then_hooks_run_from_the_installed_plugin(tmp_path):
    """`claude plugin marketplace add <repo>` + `claude plugin install lcm@lcm-tools`, then a session
    with no --plugin-dir: the installed plugin's hooks capture it and export LCM_SCRIPTS."""
    claude = require_claude()
    for name in ("cc-home", "cc-tmp", "proj"):
        (tmp_path / name).mkdir()
    with StreamingFake() as api:
        api.respond(responder)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE", "LCM_", "ANTHROPIC_"))}
        env.update(api.env())
        env.update({"HOME": str(tmp_path / "cc-home"), "TMPDIR": str(tmp_path / "cc-tmp"),
                    "LCM_HOME": str(tmp_path / "lcm"), "LCM_LLM": "none",
                    "DISABLE_AUTOUPDATER": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"})

        def run(*args: str) -> subprocess.CompletedProcess:
            proc = subprocess.run([claude, *args], cwd=tmp_path / "proj", env=env, capture_output=True,
                                  text=True, timeout=CALL_TIMEOUT)
            assert proc.returncode == 0, proc.stdout + proc.stderr
            return proc

        run("plugin", "marketplace", "add", str(ROOT))
        run("plugin", "install", "lcm@lcm-tools")
        listed = run("plugin", "list").stdout
        assert "lcm@lcm-tools" in listed and "0.1.0" in listed
        result = json.loads(run("-p", "--output-format", "json", "--allowedTools", "Bash", "--",
                                "RUNTOOL from the installed plugin").stdout)
    conn = sqlite3.connect(tmp_path / "lcm" / "lcm.db")
    try:
        printed = [c for (c,) in conn.execute(
            "SELECT content FROM messages WHERE session_id = ? AND content LIKE 'LCM=%'", (result["session_id"],))]
    finally:
        conn.close()
    assert len(printed) == 1 and printed[0].strip().endswith("/scripts"), printed
    scripts = Path(printed[0].strip()[len("LCM="):])
    assert (scripts / "lcm_grep.py").is_file()


def test_no_hook_failed_during_the_real_sessions(claude_run):
    """Skips (a transcript not written yet in -p mode) are fine; an error line is not."""
    lines = read(claude_run["log"]).splitlines()
    assert not [line for line in lines if " error: " in line], lines


def test_always_on_cost_is_at_most_150_tokens(tmp_path):
    """What every session pays for lcm before using it, as `claude plugin details` projects it: the
    skill's name and description plus the five slash commands' names and descriptions (2.1.197 and
    2.1.330 both count the commands, `disable-model-invocation` or not). It was 244 tokens on
    2.1.330 with the commands' long descriptions and the skill's 560-character one."""
    claude = require_claude()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE", "LCM_", "ANTHROPIC_"))}
    env.update({"HOME": str(tmp_path), "DISABLE_AUTOUPDATER": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"})
    out = ""
    for args in (("marketplace", "add", str(ROOT)), ("install", "lcm@lcm-tools"), ("details", "lcm@lcm-tools")):
        proc = subprocess.run([claude, "plugin", *args], cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=CALL_TIMEOUT)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        out = proc.stdout
    # every slash command is still a component of the plugin
    assert all(re.search(rf"^\s*{name}\s", out, re.MULTILINE) for name in SLASH_COMMANDS), out
    cost = re.search(r"Always-on:\s*~?([\d,]+)\s*tok", out)
    assert cost, out
    assert int(cost.group(1).replace(",", "")) <= 150, out


INSTALLED_LIMIT = 5 << 20


def test_a_clone_used_as_the_readme_says_installs_small(tmp_path):
    """Installing from a local clone copies its whole directory (all but .git, whatever .gitignore
    says). After the quick start's two commands ran in it, the installed plugin stays under 5 MB:
    their virtualenv and caches live outside the clone."""
    from test_readme import quick_start_commands
    claude = require_claude()
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip(f"{ROOT} is not a git checkout: the clone is made of its tracked files")
    clone, home = tmp_path / "clone", tmp_path / "user"
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True,
                             check=True).stdout.split("\0")
    for name in filter(None, tracked):
        if (ROOT / name).is_file():
            (clone / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, clone / name)
    home.mkdir()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("CLAUDE", "LCM_", "ANTHROPIC_", "HYPOTHESIS_", "PYTHONDONTWRITEBYTECODE"))}
    env.update({"HOME": str(home), "DISABLE_AUTOUPDATER": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"})

    def sh(command: str) -> None:
        proc = subprocess.run(["bash", "-c", command], cwd=clone, env=env, capture_output=True, text=True,
                              timeout=CALL_TIMEOUT)
        assert proc.returncode == 0, f"{command}\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}"

    run, test = quick_start_commands()
    sh(run)
    # the test command as written, but offline: its virtualenv without pip, and a few of the tests
    # (some with Hypothesis) under the python that has pytest
    make_venv, _pip_install, pytest_run = test.split(" && ")
    sh(make_venv + " --without-pip")
    pytest_args = pytest_run.split(" -m pytest", 1)[1]
    sh(f"{sys.executable} -m pytest{pytest_args} tests/readers/test_describe_expand.py")

    def claude_ok(*args: str) -> None:
        proc = subprocess.run([claude, *args], cwd=home, env=env, capture_output=True, text=True,
                              timeout=CALL_TIMEOUT)
        assert proc.returncode == 0, proc.stdout + proc.stderr

    claude_ok("plugin", "marketplace", "add", str(clone))
    claude_ok("plugin", "install", "lcm@lcm-tools")
    installed = json.loads((home / ".claude" / "plugins" / "installed_plugins.json").read_text())
    path = Path(installed["plugins"]["lcm@lcm-tools"][0]["installPath"])
    files = [Path(d) / f for d, _, names in os.walk(path) for f in names]
    size = sum(f.lstat().st_size for f in files)
    assert (path / "hooks" / "hooks.json").is_file() and (path / "scripts" / "lcm_grep.py").is_file()
    assert not [f for f in files if f.name == "pyvenv.cfg" or {".pytest_cache", ".hypothesis"} & set(f.parts)]
    assert size <= INSTALLED_LIMIT, f"installed plugin is {size / 2**20:.1f} MB: {path}"


SLASH_COMMANDS = ("search", "remember", "sessions", "status", "checkpoint")


def test_slash_command_runs_lcm_from_the_installed_plugin(tmp_path):
    """Installed from the local marketplace: the plugin carries commands/ and bin/lcm; `/lcm:status`
    runs `lcm status` (its `!` line, through the PATH Claude Code gives the Bash tool) and its output
    reaches the model; a Bash tool call finds `lcm` on PATH; the commands stay out of the model's
    always-on skill listing."""
    claude = require_claude()
    for name in ("cc-home", "cc-tmp", "proj"):
        (tmp_path / name).mkdir()

    def with_lcm_call(body: dict):
        if "RUNLCM" in FakeAnthropic.user_text(body) and not any(
                isinstance(b, dict) and b.get("type") == "tool_result" for b in last_turn(body).get("content") or []):
            return {"text": "Checking.", "tool_use": [{"name": "Bash", "input": {
                "command": "command -v lcm; lcm sessions --json", "description": "find lcm"}}]}
        return responder(body)

    with StreamingFake() as api:
        api.respond(with_lcm_call)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE", "LCM_", "ANTHROPIC_"))}
        env.update(api.env())
        env.update({"HOME": str(tmp_path / "cc-home"), "TMPDIR": str(tmp_path / "cc-tmp"),
                    "LCM_HOME": str(tmp_path / "lcm"), "LCM_LLM": "none",
                    "DISABLE_AUTOUPDATER": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"})

        def run(*args: str) -> subprocess.CompletedProcess:
            proc = subprocess.run([claude, *args], cwd=tmp_path / "proj", env=env, capture_output=True,
                                  text=True, timeout=CALL_TIMEOUT)
            assert proc.returncode == 0, proc.stdout + proc.stderr
            return proc

        run("plugin", "marketplace", "add", str(ROOT))
        run("plugin", "install", "lcm@lcm-tools")
        installed = json.loads((tmp_path / "cc-home" / ".claude" / "plugins" / "installed_plugins.json").read_text())
        path = Path(installed["plugins"]["lcm@lcm-tools"][0]["installPath"])
        assert all((path / "commands" / f"{name}.md").is_file() for name in SLASH_COMMANDS)
        assert os.access(path / "bin" / "lcm", os.X_OK)

        run("-p", "--output-format", "json", "--", "/lcm:status")
        status_sent = json.dumps(api.requests)
        seen = len(api.requests)
        run("-p", "--output-format", "json", "--allowedTools", "Bash", "--", "RUNLCM where is lcm")
        tool_sent = json.dumps(api.requests[seen:])
    vault = tmp_path / "lcm" / "lcm.db"
    # the `!` line ran: the model was sent lcm status's own report (the vault it opened)
    assert "<command-name>/lcm:status</command-name>" in status_sent
    assert f"Vault {vault}" in status_sent, status_sent[-3000:]
    # the Bash tool found the plugin's bin/lcm on its PATH (2.1.197 puts the marketplace's own
    # directory there, not the cache copy), and it ran: `lcm sessions --json` answered
    results = re.findall(r'"tool_result", "content": "(.{0,2000})', tool_sent)
    assert results, tool_sent[-3000:]
    found = results[0].split("\\n")[0]
    assert found in (f"{path}/bin/lcm", f"{ROOT}/bin/lcm"), results
    assert '\\"count\\": ' in results[0], results
    # the person's commands are not in the model's always-on listing; the skill is
    assert "lcm:lcm" in status_sent
    assert not [name for name in SLASH_COMMANDS if f"- lcm:{name}:" in status_sent]


def test_slash_command_arguments_run_nothing_in_the_real_claude_code(tmp_path):
    """`/lcm:sessions` given `x; touch pwned`, `$(...)` and backticks in Claude Code itself: lcm
    gets them as words and nothing else runs; `/lcm:status --json` still passes its option."""
    claude = require_claude()
    for name in ("cc-home", "cc-tmp", "proj"):
        (tmp_path / name).mkdir()
    with StreamingFake() as api:
        api.respond(responder)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE", "LCM_", "ANTHROPIC_"))}
        env.update(api.env())
        env.update({"HOME": str(tmp_path / "cc-home"), "TMPDIR": str(tmp_path / "cc-tmp"),
                    "LCM_HOME": str(tmp_path / "lcm"), "LCM_LLM": "none",
                    "DISABLE_AUTOUPDATER": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"})

        def run(*args: str) -> subprocess.CompletedProcess:
            proc = subprocess.run([claude, *args], cwd=tmp_path / "proj", env=env, capture_output=True,
                                  text=True, timeout=CALL_TIMEOUT)
            assert proc.returncode == 0, proc.stdout + proc.stderr
            return proc

        run("plugin", "marketplace", "add", str(ROOT))
        run("plugin", "install", "lcm@lcm-tools")
        run("-p", "--output-format", "json", "--", "/lcm:sessions x; touch pwned1 $(touch pwned2) `touch pwned3`")
        seen = len(api.requests)
        run("-p", "--output-format", "json", "--", "/lcm:status --json")
        status_sent = json.dumps(api.requests[seen:])
    assert not list(tmp_path.rglob("pwned*"))
    # lcm got the words as they were typed and refused them (a usage error ends a slash command
    # before the model, as before: Claude Code shows its stderr to the person)
    transcript = "\n".join(p.read_text() for p in (tmp_path / "cc-home" / ".claude" / "projects").rglob("*.jsonl"))
    assert "unrecognized arguments: touch pwned1 $(touch pwned2) `touch pwned3`" in transcript, transcript[-3000:]
    assert '\\"db\\": ' in status_sent and '\\"messages\\": ' in status_sent, status_sent[-3000:]

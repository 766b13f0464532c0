"""Hooks facing hostile or broken surroundings: a session id that tries to inject shell code into
CLAUDE_ENV_FILE, a model that fails under a detached compaction, a cwd that no longer exists."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from fake_anthropic import make_fake_claude
from test_hooks import run_hook, wait_for
from transcripts import coding_session
from test_python_versions import python_for  # at import: it looks under the real HOME

ROOT = Path(__file__).resolve().parents[2]


def log_text() -> str:
    path = Path(os.environ["LCM_HOME"]) / "lcm.log"
    return path.read_text() if path.exists() else ""


HOSTILE_IDS = [
    "x\ntouch {marker}-newline",
    "$(touch {marker}-subst)",
    "`touch {marker}-backtick`",
    "a'; touch {marker}-quote; echo '",
    "b\r\ntouch {marker}-crlf #",
    "c\\\ntouch {marker}-backslash",
]


@pytest.mark.parametrize("hostile", HOSTILE_IDS)
def test_env_file_yields_nothing_but_the_exports(hostile, tmp_path):
    """Bash sources CLAUDE_ENV_FILE before every command: a session id must come back as the exact
    value, and run nothing, on the first SessionStart and after a resume rewrites the file."""
    marker = tmp_path / "ran"
    sid = hostile.format(marker=marker)
    env_file = tmp_path / "env" / "sessionstart-hook-0.sh"
    env_file.parent.mkdir()
    env_file.write_text("export OTHER_TOOL=kept\n")
    project = tmp_path / "proj"
    project.mkdir()
    t = coding_session(tmp_path / "projects", turns=1, cwd=str(project))
    t.write()
    for source, session in (("startup", sid), ("resume", sid), ("resume", "plain-" + sid)):
        payload = {"session_id": session, "transcript_path": str(t.path), "cwd": str(project),
                   "hook_event_name": "SessionStart", "source": source}
        done = run_hook("session_start", payload, {"CLAUDE_ENV_FILE": str(env_file), "CLAUDE_PROJECT_DIR": str(project)})
        assert done.returncode == 0
        shown = subprocess.run(["bash", "-c", f'source "$1" && printf %s "$LCM_SESSION_ID" && printf "\\0%s" "$OTHER_TOOL"'
                                f' "$LCM_SCRIPTS"', "bash", str(env_file)], capture_output=True,
                               cwd=tmp_path, env={"PATH": os.environ["PATH"]})
        assert shown.returncode == 0, shown.stderr
        assert shown.stdout.decode().split("\0") == [session, "kept", str(ROOT / "scripts")]
        assert not list(tmp_path.glob("ran*"))


def compaction_setup(tmp_path):
    """A session big enough that the Stop hook starts a compaction."""
    project = tmp_path / "proj"
    project.mkdir()
    t = coding_session(tmp_path / "projects", turns=12, cwd=str(project))
    t.write()
    env = {"LCM_LEAF_CHUNK_TOKENS": "200", "LCM_FRESH_TAIL_COUNT": "4"}
    payload = {"session_id": t.session_id, "transcript_path": str(t.path), "cwd": str(project),
               "hook_event_name": "Stop", "stop_hook_active": False}
    return t, project, env, payload


def test_a_detached_compaction_whose_model_fails_leaves_a_line_in_the_log(tmp_path, vault):
    t, project, env, payload = compaction_setup(tmp_path)
    fake = make_fake_claude(tmp_path / "bin", "def respond(call):\n"
                            "    return {'is_error': True, 'result': 'model overloaded, try later', 'exit_code': 1}\n")
    env.update(LCM_LLM="claude", PATH=f"{fake.dir}{os.pathsep}{os.environ['PATH']}")
    done = run_hook("stop", payload, env)
    assert done.returncode == 0
    assert wait_for(lambda: "lcm_compact.py" in log_text())
    line = next(x for x in log_text().splitlines() if "lcm_compact.py" in x)
    assert "Stop" in line and t.session_id in line and "model overloaded" in line
    assert fake.calls()


def test_a_payload_cwd_that_no_longer_exists_does_not_stop_the_detach(tmp_path, vault):
    import sqlite3
    t, project, env, payload = compaction_setup(tmp_path)
    payload["cwd"] = str(tmp_path / "deleted-since")
    env.update(LCM_LLM="none")
    done = run_hook("stop", payload, env)
    assert done.returncode == 0

    def summaries() -> int:
        conn = sqlite3.connect(vault)
        try:
            return conn.execute("SELECT count(*) FROM summaries").fetchone()[0]
        finally:
            conn.close()
    assert wait_for(lambda: summaries() > 0), log_text()


# -- lcm.log is a sink like any other: masked as it is written (issue 31.4) --------------------

PLANTED = ["sk-ant-api03-" + "Zq8" * 30 + "AA", "AKIA" + "QX7T2MWB4KRN6PLD", "ghp_" + "k3Jw9" * 8,
           "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz", "glpat-Ab12Cd34Ef56Gh78Ij90",
           "xoxb-123456789012-abcdefABCDEF", "sk_live_4eC39HqLyjWDarjtT1zdp7dc",
           "AIzaSyD-abcdefghijklmnopqrstuvwxyz012345", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJwbGFudGVkIn0.c2lnbmF0dXJlcGxhbnRlZA",
           "hf_AbCdEfGhIjKlMnOpQrStUvWxYz01234567", "npm_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
           "SG.AbCdEfGhIjKlMnOpQrStUv.AbCdEfGhIjKlMnOpQrStUvWxYz0123456789abcdefg", "sk-proj-4bC9xYz012345678901234abcd",
           "rk_test_51Habcdefghij0123456789"]


def assert_no_planted_key(text: str) -> None:
    leaked = [key for key in PLANTED if key in text or key[4:20] in text]
    assert not leaked, (leaked, text)


def test_the_log_holds_no_key_planted_in_session_ids_paths_and_errors(tmp_path):
    """Every hook, given a session id and a transcript path that hold keys (a missing transcript
    is logged with its path), and a setting whose bad value is a key (logged with its value)."""
    hooks = ["session_start", "user_prompt_submit", "stop", "subagent_stop", "pre_compact", "post_compact",
             "session_end"]
    for i, name in enumerate(hooks):
        sid, in_path = PLANTED[i % len(PLANTED)], PLANTED[(i + 7) % len(PLANTED)]
        payload = {"session_id": sid, "transcript_path": str(tmp_path / in_path / "t.jsonl"), "cwd": str(tmp_path),
                   "hook_event_name": name, "agent_transcript_path": str(tmp_path / in_path / "a.jsonl")}
        assert run_hook(name, payload, {"CLAUDE_ENV_FILE": str(tmp_path / "env.sh")}).returncode == 0
    for key in PLANTED[:4]:
        assert run_hook("stop", {"session_id": key}, {"LCM_DISABLE": key}).returncode == 0
    lines = log_text().splitlines()
    assert len(lines) == len(hooks) + 4, lines
    assert sum("does not exist" in line for line in lines) >= 5 and sum("LCM_DISABLE" in line for line in lines) == 4
    assert all("[secret:" in line for line in lines)  # each line still says what happened, the key masked
    assert_no_planted_key(log_text())


def test_a_detached_run_logs_its_failure_masked(tmp_path, vault):
    """A detached compaction whose model fails with keys in its error text (a model echoing a
    prompt, a proxy's error page): the line in the log keeps the failure, not the keys."""
    t, project, env, payload = compaction_setup(tmp_path)
    fake = make_fake_claude(tmp_path / "bin", "def respond(call):\n"
                            f"    return {{'is_error': True, 'result': 'overloaded {PLANTED[0]} {PLANTED[2]} {PLANTED[5]}',"
                            " 'exit_code': 1}\n")
    env.update(LCM_LLM="claude", PATH=f"{fake.dir}{os.pathsep}{os.environ['PATH']}")
    assert run_hook("stop", payload, env).returncode == 0
    assert wait_for(lambda: "lcm_compact.py" in log_text())
    line = next(x for x in log_text().splitlines() if "lcm_compact.py" in x)
    assert "overloaded" in line and t.session_id in line and "[secret:" in line
    assert_no_planted_key(log_text())




@pytest.mark.parametrize("hook", ["session_start", "user_prompt_submit", "stop", "subagent_stop", "pre_compact",
                                  "post_compact", "session_end"])
def test_every_hook_runs_on_python_3_9(tmp_path, vault, hook):
    """Claude Code runs the hooks with whatever `python3` is on PATH; on 3.9 they must at least
    fail open. lcm/base/errors.py, which every hook imports, evaluated `str | None` at import: every
    hook raised TypeError, and again while logging it, so each exited 1 with a traceback, and
    nothing was captured."""
    import json
    import os
    import subprocess

    from test_hooks import HOOKS, PAYLOADS, ROOT
    from transcripts import coding_session
    python = python_for((3, 9))
    t = coding_session(tmp_path / "projects", turns=3, cwd=str(tmp_path))
    t.write()
    done = subprocess.run([python, "-S", str(HOOKS / f"{hook}.py")], input=json.dumps(PAYLOADS[hook](t)).encode(),
                          env={**os.environ, "CLAUDE_PLUGIN_ROOT": str(ROOT), "LCM_LLM": "none"},
                          capture_output=True, timeout=60)
    assert done.returncode == 0 and b"Traceback" not in done.stderr, done.stderr.decode()
    if hook == "stop":
        import sqlite3
        stored = sqlite3.connect(vault).execute("SELECT count(*) FROM messages").fetchone()[0]
        assert stored == len(t.entries)

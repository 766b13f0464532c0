"""Every kind of secret, planted at every place a string can sit in a transcript line and beside
every separator, never leaves the vault: not through a command's output, a hook's injection, a
file lcm writes or a request to the model; `lcm_expand.py --raw --unmasked` still gives back the
exact original bytes. (test_mask.py checks the same grid on the masking functions themselves.)"""
from __future__ import annotations

import json

import pytest

import lcm.base.config
import lcm.vault.db
import lcm_agentic_map
import lcm_checkpoint
import lcm_compact
import lcm_describe
import lcm_expand
import lcm_expand_query
import lcm_export
import lcm_grep
import lcm_ingest
import lcm_llm_map
import lcm_resume
import lcm_sessions

from test_hooks import run_hook, session_start, user_prompt
from test_mask import EDGES, PLACES, SAMPLES, placed
from transcripts import Transcript
import lcm.base.mask
from conftest import one_transcript, run

SECRETS = sorted({secret for _kind, _text, secret in SAMPLES})


def leaks(data) -> list[str]:
    """The planted secrets found in text, bytes or a JSON-able value."""
    if isinstance(data, bytes):
        data = data.decode("utf-8", "replace")
    elif not isinstance(data, str):
        data = json.dumps(data, ensure_ascii=False)
    return [secret for secret in SECRETS if secret in data or json.dumps(secret)[1:-1] in data]


def out_of(capsys, module, *argv) -> str:
    code = module.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert code == 0, err
    return out + err


def planted_grid(projects, project) -> Transcript:
    """One line per (kind, place), each with other characters on either side of its secret, and a
    large tool result per kind (stored as a file of its own)."""
    t = Transcript(projects, session_id="s-grid", cwd=str(project))
    t.user("plantedline: the deploy notes follow")
    n = 0
    for kind, text, _secret in SAMPLES:
        for where in PLACES:
            left, right = EDGES[n % len(EDGES)], EDGES[(n * 7 + 3) % len(EDGES)]
            n += 1
            s = (f"plantedline {kind}" + left if left else "") + text + (right + "next words" if right else "")
            entry = placed(where, s)
            t.entry(entry["type"], entry["message"])
        call = t.tool_use("Read", {"file_path": f"/home/u/proj/{kind}.env"})
        t.tool_result(call, "plantedline large\n" + "SETTING=1\n" * 60 + text + "\n" + "OTHER=2\n" * 60)
    t.assistant_text("plantedline: all read.")
    t.write()
    return t


def test_every_kind_in_every_place_never_leaves_the_vault(tmp_path, capsys, monkeypatch, fake_api):
    project = tmp_path / "proj"
    project.mkdir()
    for name, value in {"CLAUDE_PROJECT_DIR": project, "LCM_FRESH_TAIL_COUNT": 8, "LCM_LEAF_MIN_TOKENS": 50,
                        "LCM_LARGE_FILE_THRESHOLD": 100, "LCM_LLM": "anthropic"}.items():
        monkeypatch.setenv(name, str(value))
    t = planted_grid(tmp_path / "projects", project)
    out = {"ingest": out_of(capsys, lcm_ingest, tmp_path / "projects")}
    out["compact"] = out_of(capsys, lcm_compact, "--session", "s-grid", "--full", "--json")
    conn = lcm.vault.db.connect()
    uuids = [e["uuid"] for e in t.entries]
    summaries = [r[0] for r in conn.execute("SELECT id FROM summaries")]
    assert summaries and conn.execute("SELECT count(*) FROM files").fetchone()[0] == len(SAMPLES)

    out["grep"] = out_of(capsys, lcm_grep, "plantedline", "--all-sessions", "--limit", 200, "--json")
    out["grep regex"] = out_of(capsys, lcm_grep, "sk-|AKIA|ghp_|hf_|npm_|SG\\.|Basic|AccountKey|mysql|curl|BEGIN|<private",
                               "--mode", "regex", "--all-sessions", "--limit", 200)
    for uuid in uuids:
        out[f"expand --raw {uuid}"] = out_of(capsys, lcm_expand, uuid, "--raw")
        out[f"describe {uuid}"] = out_of(capsys, lcm_describe, uuid, "--json")
    for sid in summaries:
        out[f"describe {sid}"] = out_of(capsys, lcm_describe, sid, "--json")
        out[f"expand {sid}"] = out_of(capsys, lcm_expand, sid, "--full", "--json", "--max-tokens", 200000)
    for (file_id,) in conn.execute("SELECT id FROM files"):
        out[f"describe {file_id}"] = out_of(capsys, lcm_describe, file_id, "--content", "--max-tokens", 100000)
    out["describe --session"] = out_of(capsys, lcm_describe, "--session", "s-grid", "--json")

    fake_api.enqueue(tool_use=[{"name": "lcm_expand", "input": {"id": summaries[0]}}])
    fake_api.enqueue(text="Deployed.")
    out["expand_query"] = out_of(capsys, lcm_expand_query, "--prompt", "Which keys?", "--query", "plantedline",
                                 "--all-sessions", "--max-tokens", 20000)
    out["checkpoint"] = out_of(capsys, lcm_checkpoint, "--session", "s-grid", "--llm")
    out["checkpoint file"] = (project / ".lcm-checkpoint.md").read_text()
    out["resume"] = out_of(capsys, lcm_resume, "--json") + out_of(capsys, lcm_resume)
    out["sessions"] = out_of(capsys, lcm_sessions, "s-grid") + out_of(capsys, lcm_sessions, "--json")
    out["export markdown"] = out_of(capsys, lcm_export, "--session", "s-grid")
    out["export jsonl"] = out_of(capsys, lcm_export, "--session", "s-grid", "--format", "jsonl",
                                 "--output", tmp_path / "out.jsonl")
    out["export file"] = (tmp_path / "out.jsonl").read_text()

    items = tmp_path / "items.jsonl"  # the map tools: every planted entry as an item
    items.write_text("".join(json.dumps(e) + "\n" for e in t.entries[:40]))
    fake_api.respond(lambda body: {"text": '{"ok": true}'})
    out["llm_map"] = out_of(capsys, lcm_llm_map, "--input", items, "--output", tmp_path / "m.jsonl", "--prompt", "Sum up")
    (project / "deploy.env").write_text("\n".join(text for _k, text, _s in SAMPLES))
    fake_api.respond(None)
    for _ in range(3):
        fake_api.enqueue(tool_use=[{"name": "read_file", "input": {"path": "deploy.env"}}])
        fake_api.enqueue('{"ok": true}')
    items.write_text("".join(json.dumps(e) + "\n" for e in t.entries[40:43]))
    out["agentic_map"] = out_of(capsys, lcm_agentic_map, "--input", items, "--output", tmp_path / "a.jsonl",
                                "--prompt", "Check the file", "--cwd", project)

    env = {"LCM_RECALL": "1", "LCM_LLM": "none"}
    out["hook SessionStart compact"] = run_hook("session_start", session_start(t, "compact"), env).stdout
    later = Transcript(tmp_path / "projects", session_id="s-later", cwd=str(project))
    later.user("what was in the plantedline notes")
    later.write()
    hook = run_hook("user_prompt_submit", user_prompt(later, "plantedline keys deploy notes"), env)
    assert "lcm recall" in hook.stdout, hook
    out["hook UserPromptSubmit"] = hook.stdout

    for what, text in out.items():
        assert not leaks(text), f"{what} leaks {leaks(text)}:\n{text[:2000]}"
    assert len(fake_api.requests) >= 8
    for body in fake_api.requests:
        assert not leaks(body), f"a request body leaks {leaks(body)}"
    stored = conn.execute("SELECT group_concat(content, ' ') FROM messages").fetchone()[0]
    assert not leaks(stored)
    for path in (lcm.base.config.lcm_home() / "files").rglob("*"):
        assert path.is_dir() or not leaks(path.read_bytes()), path

    # the one way back to the exact bytes
    lines = [line for line in t.path.read_bytes().splitlines() if line]
    for uuid, line in zip(uuids, lines):
        code = lcm_expand.main([uuid, "--raw", "--unmasked"])
        assert code == 0 and capsys.readouterr().out.encode().rstrip(b"\n") == line


K = "sk-ant-api03-" + "a1B2c3D4e5F6g7H8i9J0" * 3


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


@pytest.mark.parametrize("argv", [
    ("lcm_expand", K), ("lcm_describe", K), ("lcm_export", "--session", K), ("lcm_resume", "--session", K),
    ("lcm_purge", "--message", K), ("lcm_grep", "--session", K, "x"), ("lcm_checkpoint", "--session", K),
    ("lcm_grep", "--mode", K, "x"),   # an argparse usage error quotes the bad value
])
def test_errors_do_not_echo_a_secret(capsys, isolated_home, argv):
    """An id or option pasted by mistake is often a secret: the `Error:` that repeats it goes to
    the terminal and, run by Claude, into the transcript and to the model."""
    one_transcript(isolated_home)
    assert run(capsys, "lcm_ingest", "--all")[0] == 0
    with pytest.raises(SystemExit) if argv[1] == "--mode" else _nothing():
        code, out, err = run(capsys, *argv)
        assert code == 1
    out, err = capsys.readouterr() if argv[1] == "--mode" else (out, err)
    assert K not in out + err
    assert "secret:anthropic-key" in out + err


@pytest.mark.parametrize("json_flag", [(), ("--json",)])
def test_grep_without_a_match_does_not_echo_a_secret(capsys, isolated_home, json_flag):
    one_transcript(isolated_home)
    assert run(capsys, "lcm_ingest", "--all")[0] == 0
    code, out, err = run(capsys, "lcm_grep", *json_flag, K)
    assert code == 0
    assert K not in out + err


@pytest.fixture
def fresh_redact():
    lcm.base.mask.reload_user_patterns()
    yield
    lcm.base.mask.reload_user_patterns()


def test_a_bad_redact_line_is_reported_without_repeating_it(capsys, isolated_home, fresh_redact):
    """A redact.txt line is usually the secret itself, typed as a pattern: one that does not
    compile (a stray parenthesis) or matches empty text is reported by line number, never echoed,
    on the stderr of every command and in lcm_doctor.py's report."""
    home = isolated_home / ".claude-lcm"
    home.mkdir()
    (home / "redact.txt").write_text("prod-db-Xq7!pw(\n(?:zz-hunter-77)?\n")
    one_transcript(isolated_home)
    code, out, err = run(capsys, "lcm_ingest", "--all")
    assert code == 0
    code, out2, err2 = run(capsys, "lcm_doctor")
    everything = out + err + out2 + err2
    assert "redact.txt line 1" in everything and "redact.txt line 2" in everything
    assert "prod-db-Xq7!pw" not in everything and "zz-hunter-77" not in everything


@pytest.mark.parametrize("json_flag", [(), ("--json",)])
def test_grep_does_not_echo_a_secret_given_as_its_scope(capsys, isolated_home, json_flag):
    """The query grep repeats was masked, its neighbour was not: `--project DIR` is repeated in
    the scope line (`Searched project ...`), the JSON scope and the commands printed for more."""
    one_transcript(isolated_home, "hello world")
    assert run(capsys, "lcm_ingest", "--all")[0] == 0
    for project in (f"/srv/{K}", "/tmp/x"):
        code, out, err = run(capsys, "lcm_grep", *json_flag, "--project", project, "--limit", 1, "hello")
        assert code == 0, err
        assert K not in out + err


@pytest.mark.slow  # every model-backed command as a process, against a refusing gateway
@pytest.mark.parametrize("argv", [("lcm_compact", "--all", "--json"), ("lcm_compact", "--all"), ("lcm_doctor",),
                                  ("lcm_doctor", "--json"),
                                  ("lcm_expand_query", "--query", "parser", "--prompt", "what changed?")])
def test_a_gateway_password_in_the_base_url_is_not_shown(tmp_path, vault, monkeypatch, capsys, argv):
    """ANTHROPIC_BASE_URL may name a gateway with its credentials (https://user:password@host):
    the errors of a failed call repeated the URL as it was, in compaction's output and JSON,
    doctor's backend line and expand_query's warning (and the hooks' lcm.log, through them)."""
    from test_model_failure import closed_port_url
    from transcripts import coding_session
    for name, value in {"LCM_LLM": "anthropic", "ANTHROPIC_API_KEY": "sk-ant-fake-key", "LCM_LEAF_CHUNK_TOKENS": "1500",
                        "LCM_LEAF_MIN_TOKENS": "300", "LCM_FRESH_TAIL_COUNT": "4",
                        "ANTHROPIC_BASE_URL": closed_port_url().replace("http://", "http://gw-user:Gw-pa55word@")}.items():
        monkeypatch.setenv(name, value)
    coding_session(tmp_path / "projects", turns=30, session_id="s1").write()
    assert run(capsys, "lcm_ingest", tmp_path / "projects")[0] == 0
    code, out, err = run(capsys, *argv)
    assert code in (0, 1) and "Traceback" not in err
    assert "cannot reach" in out + err or "unverified" in out + err
    assert "Gw-pa55word" not in out + err


def test_the_lcm_command_does_not_echo_a_secret_given_as_its_verb(capsys):
    """`lcm KEY` (a key pasted where the command goes) was repeated in clear by the unknown-command
    error, the one error of lcm that did not go through the mask."""
    import lcm.entry
    code = lcm.entry.main([K, "x"])
    out, err = capsys.readouterr()
    assert code == 2 and "no command" in err
    assert K not in out + err and "secret:anthropic-key" in err

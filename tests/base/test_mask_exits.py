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

"""lcm_purge.py: the one delete path. A purge leaves no trace of the text, keeps the vault sound,
and no transcript still on disk brings the purged lines back."""
from __future__ import annotations

import json
import sqlite3

import pytest

import lcm.vault.db
import lcm_checkpoint
import lcm_compact
import lcm_doctor
import lcm_grep
import lcm_ingest
import lcm_purge
import lcm_remember

from transcripts import Transcript
import lcm.base.config
import lcm.base.mask
from conftest import one_transcript, run

SECRET = "sk-ant-api03-PurgeMeQx7Zt41Lk9"  # a key: masked in the searchable text, kept in the raw line
PLACE = "Xylophonequokka Close"  # private, not a secret to the masks: indexed for search as it is
TOKEN = "xylophonequokka"  # how the full-text index holds it (lower case)
TAIL = b"phonequokka"  # the index compresses a term's prefix against its neighbour: look for the rest


@pytest.fixture(autouse=True)
def private_stage_dirs(tmp_path, monkeypatch):
    """lcm_doctor looks for dead imports' stage directories here, not in the machine's /dev/shm
    (where other processes' imports come and go)."""
    import lcm.care.installation
    monkeypatch.setattr(lcm.care.installation, "stage_parents", lambda: [str(tmp_path)])


@pytest.fixture
def env(monkeypatch):
    monkeypatch.setenv("LCM_LLM", "none")
    monkeypatch.setenv("LCM_FRESH_TAIL_COUNT", "2")
    monkeypatch.setenv("LCM_LEAF_CHUNK_TOKENS", "300")
    monkeypatch.setenv("LCM_CONDENSED_MIN_FANOUT", "2")
    monkeypatch.setenv("LCM_LEAF_MIN_FANOUT", "2")
    monkeypatch.setenv("LCM_LARGE_FILE_THRESHOLD", "200")  # tool results above 800 characters go to files/


def _session(projects, sid, secret_turn=None, turns=24):
    t = Transcript(projects, session_id=sid)
    for i in range(turns):
        if i == secret_turn:
            t.user(f"deploy with the key {SECRET} to the office at {PLACE} please")
            call = t.tool_use("Bash", {"command": f"echo '{PLACE}' && ANTHROPIC_API_KEY={SECRET} ./deploy.sh"})
            t.tool_result(call, f"deployed for {PLACE}; log follows\n" + ("ok line\n" * 150) + f"key used: {SECRET}\n")
        else:
            t.user(f"step {i}: tidy the parser module and run the tests again")
            t.assistant_text(f"done with step {i}; " + "the parser now handles edge cases. " * 8)
    t.write()
    return t


@pytest.fixture
def vault_with_secret(env, isolated_home, vault, capsys):
    projects = isolated_home / ".claude" / "projects"
    _session(projects, "aaaa1111-secret-session", secret_turn=6)
    _session(projects, "bbbb2222-other-session")
    assert lcm_ingest.main(["--all"]) == 0
    for sid in ("aaaa1111-secret-session", "bbbb2222-other-session"):
        assert lcm_compact.main(["--session", sid, "--full"]) == 0
    assert lcm_checkpoint.main(["--session", "aaaa1111-secret-session", "--output", str(isolated_home / "cp.md")]) == 0
    capsys.readouterr()
    return vault


def _db(vault):
    """The vault through lcm's own opening (lcm_line and lcm_text read packed lines and compressed text)."""
    return lcm.vault.db.connect(str(vault), create=False)


def _traces(vault) -> list[str]:
    """Files of the vault (and lcm's files/) whose bytes still hold the secret."""
    found = []
    for path in [vault, vault.with_name(vault.name + "-wal"), vault.with_name(vault.name + "-shm"),
                 *(vault.parent / "files").glob("*")]:
        if path.exists():
            data = path.read_bytes()
            if SECRET.encode() in data or TAIL in data.lower() or SECRET.lower().encode()[-10:] in data.lower():
                found.append(path.name)
    return found


def _grep_count(capsys, query, *options) -> int:
    capsys.readouterr()
    assert lcm_grep.main([query, "--all-sessions", "--json", *options]) == 0
    return len(json.loads(capsys.readouterr().out)["results"])


def test_fixture_holds_the_secret_everywhere(vault_with_secret, capsys):
    conn = _db(vault_with_secret)
    assert conn.execute("SELECT count(*) FROM files").fetchone()[0] >= 1
    assert conn.execute("SELECT count(*) FROM summaries WHERE depth > 0").fetchone()[0] >= 1
    assert conn.execute("SELECT count(*) FROM checkpoints").fetchone()[0] >= 1
    assert _traces(vault_with_secret)
    assert _grep_count(capsys, TOKEN) >= 1


def test_without_yes_nothing_is_removed(vault_with_secret, capsys):
    before = _db(vault_with_secret).execute("SELECT count(*) FROM messages").fetchone()[0]
    assert lcm_purge.main(["--match", PLACE]) == 0
    out = capsys.readouterr().out
    assert "Would remove 3 messages" in out and "--yes" in out
    assert PLACE not in out  # the dry run's examples blank the text being forgotten
    assert _db(vault_with_secret).execute("SELECT count(*) FROM messages").fetchone()[0] == before
    assert _grep_count(capsys, TOKEN) >= 1


def test_purge_of_a_session_leaves_no_trace(vault_with_secret, isolated_home, capsys):
    other = _db(vault_with_secret).execute(
        "SELECT count(*) FROM messages WHERE session_id = 'bbbb2222-other-session'").fetchone()[0]
    assert lcm_purge.main(["--session", "aaaa1111", "--yes", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["removed"] and doc["messages"] == 23 * 2 + 3 and doc["sessions"] == ["aaaa1111-secret-session"]
    conn = _db(vault_with_secret)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert conn.execute("SELECT count(*) FROM messages WHERE session_id LIKE 'aaaa%'").fetchone()[0] == 0
    assert conn.execute("SELECT count(*) FROM summaries WHERE session_id LIKE 'aaaa%'").fetchone()[0] == 0
    assert conn.execute("SELECT count(*) FROM checkpoints WHERE session_id LIKE 'aaaa%'").fetchone()[0] == 0
    assert conn.execute("SELECT count(*) FROM files").fetchone()[0] == 0
    assert conn.execute("SELECT count(*) FROM messages WHERE session_id = 'bbbb2222-other-session'"
                        ).fetchone()[0] == other
    conn.close()
    assert _grep_count(capsys, TOKEN) == 0
    assert _grep_count(capsys, "deploy") == 0
    assert _traces(vault_with_secret) == []
    # the transcript is still on disk: neither the next hook's incremental read nor a re-read
    # from the first byte (a lost offset, a copied file) imports the purged lines again
    assert lcm_ingest.main(["--all"]) == 0
    conn = _db(vault_with_secret)
    conn.execute("DELETE FROM transcripts")
    conn.commit()
    conn.close()
    assert lcm_ingest.main(["--all"]) == 0
    assert _grep_count(capsys, TOKEN) == 0
    assert _db(vault_with_secret).execute("SELECT count(*) FROM messages WHERE session_id LIKE 'aaaa%'"
                                          ).fetchone()[0] == 0
    assert lcm_doctor.main([]) == 0, capsys.readouterr().out


def test_purge_by_match_rebuilds_the_dag_from_what_remains(vault_with_secret, capsys):
    conn = _db(vault_with_secret)
    total = conn.execute("SELECT count(*) FROM messages WHERE session_id LIKE 'aaaa%'").fetchone()[0]
    untouched = conn.execute("SELECT count(*) FROM summaries WHERE session_id LIKE 'bbbb%'").fetchone()[0]
    conn.close()
    assert lcm_purge.main(["--match", PLACE, "--yes"]) == 0
    assert "Removed 3 messages of 1 session" in capsys.readouterr().out
    conn = _db(vault_with_secret)
    assert conn.execute("SELECT count(*) FROM messages WHERE session_id LIKE 'aaaa%'").fetchone()[0] == total - 3
    assert conn.execute("SELECT count(*) FROM summaries WHERE session_id LIKE 'bbbb%'").fetchone()[0] == untouched
    conn.close()
    assert _traces(vault_with_secret) == []
    assert lcm_doctor.main([]) == 0, capsys.readouterr().out
    # the next compaction covers every remaining message again
    assert lcm_compact.main(["--session", "aaaa1111-secret-session", "--full"]) == 0
    conn = _db(vault_with_secret)
    uncovered = conn.execute(
        "SELECT count(*) FROM messages m WHERE session_id LIKE 'aaaa%' AND NOT EXISTS"
        " (SELECT 1 FROM summary_sources s WHERE s.message_id = m.id)").fetchone()[0]
    assert uncovered <= 2  # the fresh tail
    assert lcm_doctor.main([]) == 0, capsys.readouterr().out
    assert _grep_count(capsys, "parser") >= 1


def test_purge_one_message_by_uuid(vault_with_secret, capsys):
    conn = _db(vault_with_secret)
    uuid = conn.execute("SELECT uuid FROM messages WHERE content LIKE 'deploy with the key%'").fetchone()[0]
    assert lcm_purge.main(["--message", uuid]) == 0 and "Would remove 1 message " in capsys.readouterr().out
    conn.close()
    assert lcm_purge.main(["--message", uuid, "--yes"]) == 0
    conn = _db(vault_with_secret)
    assert conn.execute("SELECT count(*) FROM messages WHERE uuid = ?", (uuid,)).fetchone()[0] == 0
    assert conn.execute("SELECT count(*) FROM purged WHERE uuid = ?", (uuid,)).fetchone()[0] == 1
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


@pytest.mark.parametrize("argv, message", [
    (["--session", "zzzz"], "no session"),
    (["--session", ""], "--session is empty"),
    (["--message", "not-a-uuid"], "no message"),
    (["--match", "x" * 0], "non-empty"),
    (["--match", ".*", "--regex"], "matches empty text"),
    (["--match", "(", "--regex"], "invalid regular expression"),
])
def test_bad_criteria_are_errors(vault_with_secret, capsys, argv, message):
    assert lcm_purge.main(argv + ["--yes"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("Error: ") and message in err and "Hint: " in err


def test_ambiguous_session_prefix(vault_with_secret, isolated_home, capsys):
    _session(isolated_home / ".claude" / "projects", "aaaa9999-third-session", turns=2)
    assert lcm_ingest.main(["--all"]) == 0
    assert lcm_purge.main(["--session", "aaaa", "--yes"]) == 1
    assert "ambiguous" in capsys.readouterr().err
    assert lcm_purge.main(["--session", "aaaa1111"]) == 0


def test_one_criterion_is_required(vault_with_secret, capsys):
    with pytest.raises(SystemExit) as exc:
        lcm_purge.main(["--yes"])
    assert exc.value.code == 2


def test_doctor_restores_a_lost_purge_guard(vault_with_secret, capsys):
    assert lcm_purge.main(["--match", SECRET, "--yes"]) == 0
    conn = _db(vault_with_secret)
    conn.execute("DROP TRIGGER messages_purged")
    conn.commit()
    conn.close()
    assert lcm_doctor.main([]) == 1
    assert "purged messages" in capsys.readouterr().out
    assert lcm_doctor.main(["--fix"]) == 0
    conn = _db(vault_with_secret)
    conn.execute("DELETE FROM transcripts")
    conn.commit()
    conn.close()
    assert lcm_ingest.main(["--all"]) == 0
    # the purged messages stay out (a checkpoint quoting their command without the key survives
    # a --match of the key: it is searchable as a checkpoint)
    assert _grep_count(capsys, TOKEN, "--scope", "messages") == 0


def test_match_forgets_a_summary_whose_earlier_text_held_it(vault_with_secret, capsys):
    """An upgraded summary keeps the text it replaced (summary_versions): that copy counts."""
    conn = _db(vault_with_secret)
    sid = conn.execute("SELECT id FROM summaries WHERE session_id LIKE 'bbbb%' LIMIT 1").fetchone()[0]
    conn.execute("INSERT INTO summary_versions (summary_id, content, level, model, token_count, written_at,"
                 " replaced_at) VALUES (?, ?, 'extractive', NULL, 5, '2026-11-20', '2026-11-21')",
                 (sid, f"an older summary that named {WORD}"))
    conn.commit()
    conn.close()
    assert lcm_purge.main(["--match", WORD, "--yes"]) == 0
    capsys.readouterr()
    conn = _db(vault_with_secret)
    assert conn.execute("SELECT count(*) FROM summaries WHERE id = ?", (sid,)).fetchone()[0] == 0
    assert conn.execute("SELECT count(*) FROM summary_versions").fetchone()[0] == 0
    conn.close()
    for name, data in _all_bytes(vault_with_secret, vault_with_secret.parent).items():
        assert WORD.encode() not in data, name


def test_match_also_forgets_pinned_notes(vault_with_secret, capsys):
    assert lcm_remember.main([f"the office is at {PLACE}", "--global"]) == 0
    assert lcm_remember.main(["keep this note", "--global"]) == 0
    assert lcm_purge.main(["--match", PLACE, "--yes"]) == 0
    assert "1 pinned note" in capsys.readouterr().out
    notes = [r[0] for r in _db(vault_with_secret).execute("SELECT content FROM notes")]
    assert notes == ["keep this note"]
    assert _traces(vault_with_secret) == []


def test_regex_match(vault_with_secret, capsys):
    assert lcm_purge.main(["--match", r"Xylophone\w+ Clo[s]e", "--regex", "--yes", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["messages"] == 3 and doc["checkpoints"] >= 0
    assert _traces(vault_with_secret) == []
    assert _db(vault_with_secret).execute("PRAGMA integrity_check").fetchone()[0] == "ok"


# --- issue 18.4: every copy of the text goes, and only what a person sees is matched ----------

WORD = "Quetzalbrindle"  # private, not a secret to the masks: stored and printed as it is


def _all_bytes(vault, home) -> dict[str, bytes]:
    """Every file lcm keeps: the vault, its -wal, files/ and the hooks' log."""
    paths = [vault, vault.with_name(vault.name + "-wal"), home / "lcm.log", home / "lcm.log.1",
             *(vault.parent / "files").glob("*")]
    return {p.name: p.read_bytes() for p in paths if p.exists()}


def test_match_forgets_titles_log_lines_and_map_prompts(env, isolated_home, vault, capsys, tmp_path, fake_api,
                                                        monkeypatch):
    import lcm_llm_map
    import lcm_sessions
    projects = isolated_home / ".claude" / "projects"
    t = Transcript(projects, session_id="cccc3333-titled-session")
    t.user(f"plan the {WORD} launch")
    t.assistant_text(f"the {WORD} launch is planned")
    t.user("and something else entirely")
    t.title(f"Planning the {WORD} launch")
    t.raw_line(json.dumps({"type": "summary", "summary": f"{WORD} retro", "leafUuid": "not-stored-yet"}))
    t.write()
    _session(projects, "dddd4444-other-session", turns=3)
    assert lcm_ingest.main(["--all"]) == 0
    home = vault.parent
    with open(home / "lcm.log", "a") as f:  # what a failing hook may have logged
        f.write(f"2026-11-25T10:00:00Z Stop session=cccc3333 error: could not parse {WORD}\n"
                "2026-11-25T10:00:01Z Stop session=dddd4444 error: unrelated\n")
    items = write_items_for_map(tmp_path)
    monkeypatch.setenv("LCM_LLM", "anthropic")
    assert lcm_llm_map.main(["--input", str(items), "--output", str(tmp_path / "out.jsonl"),
                             "--prompt", f"Say whether this is about {WORD}"]) == 0
    capsys.readouterr()
    assert all(WORD.encode() in b for name, b in _all_bytes(vault, home).items() if name in ("lcm.db", "lcm.log"))
    assert lcm_purge.main(["--match", WORD]) == 0
    out = capsys.readouterr().out
    assert "Would remove 2 messages" in out and WORD not in out
    assert lcm_purge.main(["--match", WORD, "--yes", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["titles"] == 2 and doc["log_lines"] == 1 and doc["map_items"] >= 1
    for name, data in _all_bytes(vault, home).items():
        assert WORD.encode() not in data, name
    assert "unrelated" in (home / "lcm.log").read_text()  # other log lines stay
    assert lcm_sessions.main(["--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    titles = [s["title"] for s in listed["sessions"] if s["id"].startswith("cccc")]
    assert titles == ["and something else entirely"]  # the first prompt left stands in
    assert lcm_doctor.main([]) == 0, capsys.readouterr().out


def write_items_for_map(tmp_path):
    path = tmp_path / "items.jsonl"
    path.write_text("".join(json.dumps({"n": i}) + "\n" for i in range(2)))
    return path


def test_match_reads_what_a_person_sees_not_metadata(isolated_home, vault, capsys):
    """Every test transcript line records gitBranch "main"; only visible text counts."""
    t = Transcript(isolated_home / ".claude" / "projects", session_id="eeee5555-branchy")
    t.user("merge the feature into main tonight")                      # text
    call = t.tool_use("Bash", {"command": "git checkout main"})         # tool input
    t.tool_result(call, "Switched to branch 'main'")                    # tool output
    t.thinking("the main risk is the migration")                        # thinking
    t.user("run the tests")                                             # none of these
    t.assistant_text("All 40 tests pass.")
    t.tool_use("Read", {"file_path": "/src/app.py"})
    t.write()
    assert lcm_ingest.main(["--all"]) == 0
    capsys.readouterr()
    assert lcm_purge.main(["--match", "main", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["messages"] == 4
    # a field name is not text either: "command" is the Bash input's key
    assert lcm_purge.main(["--match", "command", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["messages"] == 0


def _visible(entry: dict) -> str:
    """The test's own reading of a line's visible text: message text, thinking, tool input
    values and tool results (not the toolUseResult Claude Code keeps beside them unseen)."""
    def strings(v):
        if isinstance(v, str):
            yield v
        elif isinstance(v, dict):
            for x in v.values():
                yield from strings(x)
        elif isinstance(v, list):
            for x in v:
                yield from strings(x)
    message = entry.get("message")
    content = message.get("content") if isinstance(message, dict) else message
    if message is None:
        content = entry.get("content")
    parts = []
    for block in content if isinstance(content, list) else [content]:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict):
            if block.get("type") in ("tool_use", "server_tool_use"):
                parts += strings(block.get("input"))
            elif block.get("type") in ("tool_result", "web_search_tool_result"):
                inner = block.get("content")
                for b in inner if isinstance(inner, list) else [inner]:
                    parts += [b] if isinstance(b, str) else [b.get("text", "")] if isinstance(b, dict) else []
            else:
                parts += [block[k] for k in ("text", "thinking", "title") if isinstance(block.get(k), str)]
    return "\n".join(parts)


def test_match_main_on_the_shared_data_selects_visible_text_only(capsys, vault):
    from conftest import shared_data
    data = shared_data("claude-projects")
    assert lcm_ingest.main([str(data)]) == 0
    capsys.readouterr()
    assert lcm_purge.main(["--match", "main", "--json"]) == 0
    selected = json.loads(capsys.readouterr().out)["messages"]
    conn = _db(vault)
    visible = metadata = anywhere = 0
    for (raw,) in conn.execute("SELECT lcm_line(raw, block_id, block_pos) FROM messages"):
        entry = json.loads(raw)
        visible += "main" in _visible(entry)
        metadata += entry.get("gitBranch") == "main"
        anywhere += b"main" in bytes(raw)
    assert selected == visible and 0 < visible < metadata < anywhere
    assert lcm_purge.main(["--match", "main", "--hidden", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert visible < doc["messages"] < anywhere  # unseen tool data too, metadata still never


def test_a_pathological_regex_is_refused_cleanly_and_never_echoed(isolated_home, vault, capsys, monkeypatch):
    import time

    import lcm.care.purge
    monkeypatch.setattr(lcm.care.purge, "REGEX_SECONDS", 1.0)
    t = Transcript(isolated_home / ".claude" / "projects", session_id="ffff6666-slow")
    t.user("a" * 40 + "!")
    t.write()
    assert lcm_ingest.main(["--all"]) == 0
    capsys.readouterr()
    pattern = r"(a+)+$"
    started = time.monotonic()
    assert lcm_purge.main(["--match", pattern, "--regex", "--yes"]) == 1
    assert time.monotonic() - started < 30
    out, err = capsys.readouterr()
    assert err.startswith("Error: ") and "Hint: " in err and "(a+)+$" not in err + out
    assert _db(vault).execute("SELECT count(*) FROM messages").fetchone()[0] == 1  # nothing removed


@pytest.mark.parametrize("pattern", ["(unclosed-secret-XYZ", "(?:secret-XYZ)?"])
def test_regex_errors_never_repeat_the_pattern(vault_with_secret, capsys, pattern):
    assert lcm_purge.main(["--match", pattern, "--regex"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("Error: ") and "secret-XYZ" not in err


def test_text_only_in_unseen_tool_data_stays_unless_asked(isolated_home, vault, capsys):
    """An Edit's result keeps the whole earlier file (toolUseResult.originalFile), which the
    person never saw: by default that message stays and the output says so; --hidden takes it."""
    t = Transcript(isolated_home / ".claude" / "projects", session_id="gggg7777-edit")
    call = t.tool_use("Edit", {"file_path": "/src/settings.py", "old_string": "DEBUG = True",
                               "new_string": "DEBUG = False"})
    t.tool_result(call, "The file /src/settings.py has been updated.",
                  toolUseResult={"filePath": "/src/settings.py",
                                 "originalFile": f"DEBUG = True\nTOKEN = '{WORD}'\n"})
    t.user("thanks")
    t.write()
    assert lcm_ingest.main(["--all"]) == 0
    capsys.readouterr()
    assert lcm_purge.main(["--match", WORD, "--yes"]) == 0
    out = capsys.readouterr().out
    assert "1 more message holds it only in tool data" in out and "--hidden" in out and WORD not in out
    assert _db(vault).execute("SELECT count(*) FROM messages").fetchone()[0] == 3
    assert lcm_purge.main(["--match", WORD, "--hidden", "--yes"]) == 0
    capsys.readouterr()
    for name, data in _all_bytes(vault, vault.parent).items():
        assert WORD.encode() not in data, name
    assert _db(vault).execute("SELECT count(*) FROM messages").fetchone()[0] == 2


@pytest.mark.parametrize("odd", ["a#b", "q?x"])
def test_purge_regex_reads_the_vault_in_a_directory_named_with_uri_characters(capsys, isolated_home, tmp_path, odd):
    """purge --regex scans in a child process that opens the vault by a `file:` URI: a `#` or `?`
    in its path, unquoted, opened another file (`/x/a` for `/x/a#b/lcm.db`), found nothing there
    and left a stray empty file behind."""
    import shutil
    import sqlite3

    import lcm.vault.db
    import lcm.care.purge
    one_transcript(isolated_home, "hello world unique-word-42")
    assert run(capsys, "lcm_ingest", "--all")[0] == 0
    (tmp_path / odd).mkdir()
    moved = tmp_path / odd / "lcm.db"
    src = sqlite3.connect(lcm.base.config.db_path_str(None))
    dst = sqlite3.connect(moved)
    src.backup(dst)
    src.close(), dst.close()
    conn = sqlite3.connect(f"file:{str(moved).replace('?', '%3f').replace('#', '%23')}", uri=True)
    sel = lcm.care.purge.select(conn, match="unique-word-4[0-9]", regex=True)
    assert len(sel.message_ids) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["home", odd])
    shutil.rmtree(tmp_path / odd)


@pytest.mark.parametrize("pattern", [r"\b", r"(?=a)", r"\B", r"(?<=o)"])
def test_purge_regex_of_only_zero_width_matches_removes_nothing(capsys, isolated_home, pattern):
    """`x*` (it matches empty text) is refused; a zero-width pattern that needs context (`\\b`, a
    lookahead) matched no text of its own yet selected every message holding a word boundary:
    `--yes` wiped whole sessions while forgetting no text. A hit is a non-empty match."""
    import sqlite3

    import lcm.vault.db
    one_transcript(isolated_home, "hello world, nothing to forget here")
    assert run(capsys, "lcm_ingest", "--all")[0] == 0
    code, out, err = run(capsys, "lcm_purge", "--match", pattern, "--regex", "--yes")
    assert code in (0, 1), out + err
    count = sqlite3.connect(lcm.base.config.db_path_str(None)).execute("SELECT count(*) FROM messages").fetchone()[0]
    assert count == 1

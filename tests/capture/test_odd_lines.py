"""Odd input never costs a message: every line that parses as JSON and is a conversation entry
with a uuid is stored once with its original bytes, whatever its fields hold, by the hooks'
incremental ingest and by the bulk import alike; odd files under the projects tree are reported
and skipped. Ends with a hypothesis test that fuzzes whole transcript lines."""
from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import lcm.vault.db
import lcm.capture.bulk
import lcm.capture.ingest
from conftest import SCRIPTS
from transcripts import Transcript, coding_session

ROOT = Path(__file__).resolve().parents[2]
CONVERSATION = ("user", "assistant", "system")

# Lines Claude Code (or a damaged file) really holds; each must be stored as it is.
ODD_LINES = [
    # non-UTF-8 tool output is logged as a lone surrogate escape
    rb'{"type":"user","uuid":"odd-surrogate","sessionId":"s1","message":{"content":"tool output \ud800 half a pair"}}',
    rb'{"type":"user","uuid":"odd-low-surrogate","sessionId":"s1","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"x\udc80y"}]}}',
    rb'{"type":"assistant","uuid":"odd-text-number","sessionId":"s1","message":{"content":[{"type":"text","text":5}]}}',
    rb'{"type":"assistant","uuid":"odd-text-list","sessionId":"s1","message":{"content":[{"type":"text","text":["a",{"b":1}]}]}}',
    rb'{"type":"assistant","uuid":"odd-thinking-object","sessionId":"s1","message":{"content":[{"type":"thinking","thinking":{"deep":"thought"}}]}}',
    rb'{"type":"system","uuid":"odd-pretokens-object","sessionId":"s1","subtype":"compact_boundary","compactMetadata":{"trigger":"auto","preTokens":{"n":1}}}',
    rb'{"type":"system","uuid":"odd-pretokens-huge","sessionId":"s1","subtype":"compact_boundary","compactMetadata":{"trigger":"auto","preTokens":9223372036854775808,"postTokens":-99999999999999999999}}',
    rb'{"type":"user","uuid":"odd-nul","sessionId":"s1","message":{"content":"before\u0000after"}}',
    rb'{"type":"user","uuid":123456,"sessionId":"s1","message":{"content":"a numeric uuid"}}',
    rb'{"type":"user","uuid":"odd-no-session","message":{"content":"no sessionId at all"}}',
    rb'{"type":"user","uuid":"odd-message-string","sessionId":"s1","message":"just a string"}',
    rb'{"type":"user","uuid":"odd-content-dict","sessionId":"s1","message":{"content":{"type":"text","text":"in a dict"}}}',
    rb'{"type":"assistant","uuid":"odd-wrong-everything","sessionId":7,"parentUuid":[],"timestamp":{},"cwd":1,"isSidechain":"yes","message":{"role":5,"model":[],"id":{},"content":[null,1,"s",[2],{"type":7},{"type":"tool_use","name":{},"input":"x"}]}}',
    rb'{"type":"user","uuid":"odd-surrogate-in-fields","sessionId":"s\ud800","cwd":"/tmp/\udfff","message":{"content":"fields"}}',
    b'{"type":"user","uuid":"odd-cesu","sessionId":"s1","message":{"content":"raw \xed\xa0\x80 bytes"}}',
    # bytes that are not UTF-8 at all (a damaged file, a tool that wrote Latin-1): the uuid is readable
    b'{"type":"user","uuid":"odd-not-utf8","sessionId":"s1","message":{"content":"cut \xe2\x82 short, caf\xe9 \xff\xfe"}}',
    b'{"type":"user","uuid":"odd-deep","sessionId":"s1","message":{"content":' + b"[" * 400 + b'"deep"' + b"]" * 400 + b"}}",
    b'{"type":"user","uuid":"odd-deep-results","sessionId":"s1","message":{"content":'
    + b'[{"type":"tool_result","content":' * 300 + b'"bottom"' + b"}]" * 300 + b"}}",
    b'{"type":"user","uuid":"odd-huge-int","sessionId":"s1","n":' + b"9" * 5000 + b',"message":{"content":"big"}}',
    b'{"type":"user","uuid":"odd-huge-text","sessionId":"s1","message":{"content":"' + b"h" * 300_000 + b'"}}',
    # a sub-agent's call and result whose ids hold lone surrogates (they go to agent_calls)
    rb'{"type":"assistant","uuid":"odd-task-call","sessionId":"s1","message":{"content":[{"type":"tool_use","name":"Task","id":"toolu_\ud800","input":{}}]}}',
    rb'{"type":"user","uuid":"odd-agent-result","sessionId":"s1","toolUseResult":{"agentId":"a\udfff"},"message":{"content":[{"type":"tool_result","tool_use_id":"toolu_\ud800","content":"done"}]}}',
    rb'{"type":["user"],"uuid":"not-stored-type-list"}',
    rb'{"type":{"a":1},"uuid":"not-stored-type-object"}',
]
TOO_DEEP = b'{"type":"user","uuid":"too-deep","message":{"content":' + b"[" * 100_000 + b"]" * 100_000 + b"}}"
ODD_UUIDS = {"odd-surrogate", "odd-low-surrogate", "odd-text-number", "odd-text-list", "odd-thinking-object",
             "odd-pretokens-object", "odd-pretokens-huge", "odd-nul", "123456", "odd-no-session",
             "odd-message-string", "odd-content-dict", "odd-wrong-everything", "odd-surrogate-in-fields",
             "odd-cesu", "odd-not-utf8", "odd-deep", "odd-deep-results", "odd-huge-int", "odd-huge-text", "odd-task-call",
             "odd-agent-result"}


def odd_transcript(projects: Path) -> tuple[Transcript, list[bytes]]:
    """A normal session with every odd line in its middle and a normal turn after them."""
    t = coding_session(projects, turns=2, session_id="s1")
    t.write()
    with open(t.path, "ab") as f:
        for line in ODD_LINES + [TOO_DEEP]:
            f.write(line + b"\n")
    t.user("a normal prompt after the odd lines")
    t.assistant_text("and a normal answer")
    t.write()
    return t, t.path.read_bytes().split(b"\n")[:-1]


def stored(vault) -> dict[str, bytes]:
    conn = lcm.vault.db.connect(str(vault))  # lcm_line(): a bulk import packs lines as it stores them
    try:
        rows = [tuple(r) for r in conn.execute("SELECT uuid, lcm_line(raw, block_id, block_pos) FROM messages")]
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        conn.close()
    uuids = [u for u, _ in rows]
    assert len(uuids) == len(set(uuids))
    return {u: bytes(raw) for u, raw in rows}


def check_odd_session(vault, t: Transcript, lines: list[bytes]) -> None:
    got = stored(vault)
    normal = {e["uuid"] for e in t.entries}
    assert set(got) == normal | ODD_UUIDS
    for line in lines:
        if line.startswith(b'{"type":"user","uuid":123456'):
            assert got["123456"] == line
        elif b'"uuid":"odd-' in line:
            assert got[line.split(b'"uuid":"')[1].split(b'"')[0].decode()] == line
    conn = lcm.vault.db.connect(str(vault))  # lcm_text(): the import compresses text as it stores it
    text = dict(conn.execute("SELECT uuid, lcm_text(content) FROM messages"))
    assert "half a pair" in text["odd-surrogate"] and "tool output" in text["odd-surrogate"]
    assert "5" in text["odd-text-number"] and "deep" in text["odd-deep"] and "bottom" in text["odd-deep-results"]
    assert "just a string" in text["odd-message-string"] and "in a dict" in text["odd-content-dict"]
    hits = [tuple(r) for r in conn.execute("SELECT m.uuid FROM messages_fts f JOIN messages m ON m.id = f.rowid"
                                           " WHERE messages_fts MATCH 'pair'")]
    assert ("odd-surrogate",) in hits
    tokens = dict(conn.execute("SELECT uuid, pre_tokens FROM compactions"))
    assert tokens == {"odd-pretokens-object": None, "odd-pretokens-huge": None}
    offset, size = conn.execute("SELECT byte_offset, size FROM transcripts WHERE path = ?", (str(t.path),)).fetchone()
    assert offset == size == t.path.stat().st_size


def test_bulk_import_stores_every_odd_line_byte_for_byte(tmp_path, vault):
    t, lines = odd_transcript(tmp_path / "projects")
    done = subprocess.run([sys.executable, str(SCRIPTS / "lcm_ingest.py"), str(tmp_path / "projects"), "--json"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["messages_added"] == len(ODD_UUIDS) + len(t.entries)
    too_deep = lines.index(TOO_DEEP) + 1
    assert result["malformed"] == [{"path": str(t.path), "line": too_deep}]
    check_odd_session(vault, t, lines)


def test_stop_hook_stores_odd_lines_and_keeps_capturing_the_session(tmp_path, vault):
    """One odd line used to roll back the hook's whole read, at the same offset on every Stop:
    the session was never captured again."""
    projects = tmp_path / "projects"
    t, lines = odd_transcript(projects)
    payload = {"session_id": "s1", "transcript_path": str(t.path), "cwd": str(tmp_path),
               "hook_event_name": "Stop", "stop_hook_active": False}
    for _ in range(2):
        done = subprocess.run([sys.executable, "-S", str(ROOT / "hooks" / "stop.py")], input=json.dumps(payload),
                              text=True, capture_output=True, timeout=60,
                              env={**os.environ, "CLAUDE_PLUGIN_ROOT": str(ROOT)})
        assert done.returncode == 0 and done.stdout == ""
        check_odd_session(vault, t, lines)
        t.user("one more turn")
        t.write()
        lines = t.path.read_bytes().split(b"\n")[:-1]
    log = Path(os.environ["LCM_HOME"]) / "lcm.log"
    assert "error" not in (log.read_text() if log.exists() else "")


def test_odd_lines_through_the_parser_process_are_stored(tmp_path, vault, monkeypatch):
    """Enough files for the bulk import's parser process and several groups."""
    monkeypatch.setattr(lcm.capture.bulk, "GROUP_BYTES", 50_000)
    projects = tmp_path / "projects"
    t, lines = odd_transcript(projects)
    others = [coding_session(projects, turns=2, cwd=f"/home/u/p{i}") for i in range(lcm.capture.bulk.PARSE_PROCESS_MIN_FILES)]
    for other in others:
        other.write()
    result = lcm.capture.bulk.ingest_paths(lcm.vault.db.connect(), [projects])
    assert result["messages_added"] == len(ODD_UUIDS) + len(t.entries) + sum(len(o.entries) for o in others)
    assert result["malformed_lines"] == 1


# -- odd files under the projects tree ------------------------------------------------------------

def test_dangling_symlink_fifo_and_unreadable_file_are_skipped_not_fatal(tmp_path, vault):
    projects = tmp_path / "claude" / "projects"
    good = [coding_session(projects, turns=1, cwd=f"/home/u/p{i}") for i in range(3)]
    for t in good:
        t.write()
    odd_dir = good[0].path.parent
    (odd_dir / "dangling.jsonl").symlink_to(tmp_path / "gone.jsonl")
    os.mkfifo(odd_dir / "fifo.jsonl")
    (odd_dir / os.fsdecode(b"bad-\xff-name.jsonl")).write_bytes(good[0].path.read_bytes())
    locked = odd_dir / "locked.jsonl"
    locked.write_text("{}\n")
    locked.chmod(0)
    done = subprocess.run([sys.executable, str(SCRIPTS / "lcm_ingest.py"), "--all"], capture_output=True, text=True,
                          timeout=60, env={**os.environ, "CLAUDE_CONFIG_DIR": str(tmp_path / "claude")})
    assert done.returncode == 0, done.stderr
    assert len(stored(vault)) == sum(len(t.entries) for t in good)
    for name in ("dangling.jsonl", "fifo.jsonl", "bad-\\udcff-name.jsonl") + (
            () if os.geteuid() == 0 else ("locked.jsonl",)):
        assert name in done.stderr
    assert "Traceback" not in done.stderr


def test_a_file_that_vanishes_during_the_import_is_skipped(tmp_path, vault, monkeypatch, capsys):
    projects = tmp_path / "projects"
    sessions = [coding_session(projects, turns=1) for _ in range(lcm.capture.bulk.PARSE_PROCESS_MIN_FILES + 1)]
    for t in sessions:
        t.write()
    files = lcm.capture.bulk.transcript_files([projects])
    vanished = files[-1]
    real = lcm.capture.bulk.transcript_files
    monkeypatch.setattr(lcm.capture.bulk, "transcript_files", lambda paths, *a, **kw: real(paths, *a, **kw) and files)
    os.remove(vanished)
    import lcm_ingest
    assert lcm_ingest.main([str(projects)]) == 0
    out, err = capsys.readouterr()
    assert vanished in err
    expected = sum(len(t.entries) for t in sessions if str(t.path) != vanished)
    assert len(stored(vault)) == expected


def test_a_fifo_among_subagent_transcripts_does_not_stop_the_hook(tmp_path, vault):
    projects = tmp_path / "projects"
    t = coding_session(projects, turns=1)
    t.write()
    agent = Transcript(projects, agent_id="zz", parent=t)
    agent.user("SUBTASK")
    agent.write()
    os.mkfifo(agent.path.parent / "agent-aa.jsonl")  # sorts first
    payload = {"session_id": t.session_id, "transcript_path": str(t.path), "cwd": str(tmp_path),
               "hook_event_name": "Stop"}
    done = subprocess.run([sys.executable, "-S", str(ROOT / "hooks" / "stop.py")], input=json.dumps(payload),
                          text=True, capture_output=True, timeout=30,
                          env={**os.environ, "CLAUDE_PLUGIN_ROOT": str(ROOT)})
    assert done.returncode == 0
    assert set(stored(vault)) == {e["uuid"] for e in t.entries + agent.entries}


# -- the fuzz test --------------------------------------------------------------------------------

SURROGATES = st.sampled_from(["\ud800", "\udfff", "a\udc80b", "\ud83d", "\ude00x"])
STRINGS = st.one_of(
    st.text(max_size=12),
    st.text(st.characters(min_codepoint=0, max_codepoint=0xE000, exclude_categories=()), max_size=8),  # NULs, surrogates
    SURROGATES,
    st.sampled_from(["", "\x00", "日本語 テスト", "\ud83d\ude00", "<synthetic>", "compact_boundary"]),
)
SCALARS = st.one_of(
    st.none(), st.booleans(), STRINGS,
    st.integers(min_value=-(2 ** 70), max_value=2 ** 70),
    st.sampled_from([2 ** 63, 2 ** 63 - 1, -(2 ** 63) - 1, 2 ** 64]),
    st.floats(allow_nan=True, allow_infinity=True),
)
WILD = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(STRINGS, inner, max_size=3), max_leaves=6)
BLOCK_TYPES = st.one_of(st.sampled_from(["text", "thinking", "redacted_thinking", "tool_use", "server_tool_use",
                                         "tool_result", "web_search_tool_result", "image", "document",
                                         "tool_reference", "something_new"]), WILD)
BLOCK = st.one_of(
    st.fixed_dictionaries({"type": BLOCK_TYPES}, optional={
        "text": WILD, "thinking": WILD, "name": st.one_of(st.sampled_from(["Task", "Agent", "Bash"]), WILD),
        "input": WILD, "content": WILD, "is_error": WILD, "title": WILD, "tool_name": WILD,
        "id": st.one_of(STRINGS, WILD), "tool_use_id": st.one_of(STRINGS, WILD), "signature": WILD}),
    WILD,
)
MESSAGE = st.one_of(
    st.fixed_dictionaries({}, optional={"role": WILD, "model": WILD, "id": WILD,
                                        "content": st.one_of(STRINGS, st.lists(BLOCK, max_size=4), WILD)}),
    WILD,
)
UUIDS = st.one_of(st.uuids().map(str), st.uuids().map(str), st.uuids().map(str), WILD)
ENTRY = st.fixed_dictionaries(
    {"type": st.one_of(st.sampled_from(CONVERSATION + ("attachment", "summary", "ai-title", "custom-title",
                                                        "file-history-snapshot")), WILD)},
    optional={
        "uuid": UUIDS, "sessionId": st.one_of(st.just("s1"), st.just("s2"), WILD), "message": MESSAGE,
        "content": WILD, "parentUuid": WILD, "timestamp": st.one_of(st.just("2026-11-20T09:00:00.000Z"), WILD),
        "cwd": WILD, "gitBranch": WILD, "isSidechain": WILD, "agentId": WILD, "isMeta": WILD,
        "subtype": st.one_of(st.just("compact_boundary"), WILD), "isCompactSummary": WILD,
        "compactMetadata": st.one_of(st.fixed_dictionaries({}, optional={"trigger": WILD, "preTokens": WILD,
                                                                         "postTokens": WILD}), WILD),
        "toolUseResult": st.one_of(st.fixed_dictionaries({"filePath": WILD, "file": st.fixed_dictionaries(
            {}, optional={"filePath": WILD})}, optional={"agentId": st.one_of(STRINGS, WILD)}), WILD),
        "summary": WILD, "aiTitle": WILD, "customTitle": WILD,
    })


@st.composite
def transcript_line(draw) -> bytes:
    entry = draw(ENTRY)
    shape = draw(st.sampled_from(["ascii", "utf8", "utf8", "deep", "huge", "garbage"]))
    if shape == "huge" and draw(st.booleans()):  # a block over the large-file threshold
        big = "x" * 120_000
        entry["message"] = draw(st.sampled_from([{"content": big}, {"content": [{"type": "text", "text": big}]},
                                                 {"content": [{"type": "tool_result", "content": big}]}]))
    if shape == "garbage":
        return draw(st.sampled_from([b"", b"   ", b"{", b"not json", b'{"type":"user","uuid":"x"', b"[1,2]", b"7",
                                     b'"str"', b"null", b'\x00{"a":1}', b"\xff\xfe{}", b'{"uuid":"\x00"}',
                                     b'{"type":"user","uuid":"u-\xff","message":{"content":"caf\xe9"}}']))
    text = json.dumps(entry, ensure_ascii=shape == "ascii")
    line = text.encode("utf-8", "surrogatepass")  # lone surrogates as raw (CESU-8) bytes, which json accepts
    if shape == "deep":  # nesting far past what the json module can parse, or deep but parsable
        depth = draw(st.sampled_from([30, 300, 100_000]))
        line = line[:-1] + (b", " if len(entry) else b"") + b'"deep":' + b"[" * depth + b"]" * depth + b"}"
    elif shape == "huge" and draw(st.booleans()):  # digits past int()'s default limit
        line = line[:-1] + (b", " if len(entry) else b"") + b'"n":' + b"7" * 4500 + b"}"
    return line


NOT_JSON = object()


def parse(line: bytes):
    """The line's JSON value, or NOT_JSON."""
    try:
        return json.loads(line)
    except RecursionError:
        return NOT_JSON
    except UnicodeDecodeError:  # JSON whose bytes are not all UTF-8: still an entry
        return parse(line.decode("utf-8", "surrogateescape").encode("utf-8", "surrogatepass"))
    except ValueError:
        try:  # valid JSON whose integer has more digits than int() converts by default
            return json.loads(line, parse_int=lambda s: int(s) if len(s) <= 4000 else float(s))
        except (ValueError, RecursionError):
            return NOT_JSON


def expected_rows(lines: list[bytes]) -> tuple[dict[str, bytes], int]:
    """({uuid: first line carrying it} for conversation entries, count of malformed lines)."""
    want: dict[str, bytes] = {}
    malformed = 0
    for line in lines:
        entry = parse(line)
        if entry is NOT_JSON:
            malformed += bool(line.strip())
            continue
        if not isinstance(entry, dict) or entry.get("type") not in CONVERSATION:
            continue
        uuid = entry.get("uuid")
        if isinstance(uuid, bool) or not isinstance(uuid, (str, int, float)) or uuid == "":
            continue
        key = str(uuid).encode("utf-8", "backslashreplace").decode("utf-8")
        want.setdefault(key, line)
    return want, malformed


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(lines=st.lists(transcript_line(), min_size=1, max_size=8), cuts=st.lists(st.integers(0, 10 ** 6), max_size=3))
@pytest.mark.slow  # a fuzzing loop
def test_fuzzed_lines_are_stored_exactly_once_byte_for_byte(lines, cuts):
    """Both ways into the vault: the hook's incremental read (the file growing in arbitrary byte
    chunks, a read after each) and the bulk import (stage file included)."""
    data = b"".join(line + b"\n" for line in lines)
    want, malformed = expected_rows(lines)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp, "projects", "-home-u-p", "s1.jsonl")
        path.parent.mkdir(parents=True)
        hook_conn = lcm.vault.db.connect(os.path.join(tmp, "hook.db"))
        seen_malformed = 0
        for cut in sorted({c % (len(data) + 1) for c in cuts} | {len(data)}):
            path.write_bytes(data[:cut])
            seen_malformed += lcm.capture.ingest.ingest_session(hook_conn, path)["malformed_lines"]
        bulk_conn = lcm.vault.db.connect(os.path.join(tmp, "bulk.db"))
        result = lcm.capture.bulk.ingest_paths(bulk_conn, [path.parent.parent])
        for conn, found in ((hook_conn, seen_malformed), (bulk_conn, result["malformed_lines"])):
            # the bulk import packs lines as it stores them: read back through lcm_line
            rows = conn.execute("SELECT uuid, lcm_line(raw, block_id, block_pos) FROM messages").fetchall()
            assert len(rows) == len(want)
            assert {r[0]: bytes(r[1]) for r in rows} == want
            assert found == malformed
            assert conn.execute("SELECT byte_offset FROM transcripts").fetchone()[0] == len(data)
            assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
            conn.close()


@pytest.mark.parametrize("argv", [
    ("lcm_sessions",), ("lcm_sessions", "s1"), ("lcm_status", "--session", "s1"), ("lcm_export", "--session", "s1"),
    ("lcm_export", "--session", "s1", "--format", "jsonl"), ("lcm_grep", "--all-sessions", "bytes"),
    ("lcm_expand", "odd-not-utf8", "--raw"), ("lcm_describe", "odd-surrogate"), ("lcm_compact", "--all"),
    ("lcm_checkpoint", "--session", "s1", "--output", "cp.md"), ("lcm_purge", "--match", "pair"),
    ("lcm_expand_query", "--query", "half a pair", "--prompt", "what was cut?"), ("lcm_doctor",)])
def test_every_command_reads_the_odd_lines(tmp_path, vault, monkeypatch, argv):
    """The odd lines of test_odd_lines (lone surrogates, bytes that are not UTF-8, numbers where
    text goes, deep nesting, huge integers) are stored as they are; every command that reads,
    summarises or prints them must still answer. A text block holding a number stopped every
    compaction of its session (AttributeError), and a lone surrogate quoted in a summary, a
    checkpoint or printed text made SQLite, the file or stdout refuse it (UnicodeEncodeError)."""
    import subprocess
    import sys

    from conftest import SCRIPTS
    from test_odd_lines import odd_transcript
    for name, value in {"LCM_LLM": "none", "LCM_LEAF_CHUNK_TOKENS": "1500", "LCM_LEAF_MIN_TOKENS": "300",
                        "LCM_FRESH_TAIL_COUNT": "4"}.items():
        monkeypatch.setenv(name, value)
    odd_transcript(tmp_path / "projects")

    def command(*args):
        return subprocess.run([sys.executable, str(SCRIPTS / f"{args[0]}.py"), *args[1:]], cwd=tmp_path,
                              capture_output=True, timeout=300)
    assert command("lcm_ingest", str(tmp_path / "projects")).returncode == 0
    if argv[0] in ("lcm_checkpoint", "lcm_sessions", "lcm_export"):
        assert command("lcm_compact", "--all").returncode == 0  # their summaries quote the odd lines too
    done = command(*argv)
    assert done.returncode == 0 and b"Traceback" not in done.stderr, done.stderr.decode(errors="replace")
    if argv[0] == "lcm_checkpoint":
        done = command("lcm_resume", "--checkpoint", "cp.md")
        assert done.returncode == 0 and b"Traceback" not in done.stderr, done.stderr.decode(errors="replace")

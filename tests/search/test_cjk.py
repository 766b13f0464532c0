"""Every script is findable: a substring of Chinese, Japanese or Korean text, and a Latin word
glued into it, finds its message first, and nothing that lacks the query ranks above it."""
from __future__ import annotations

import json

import pytest

import lcm.vault.db
import lcm.capture.indexes
import lcm.vault.schema
import lcm.capture.bulk
import lcm.capture.ingest
import lcm_grep
from conftest import run
from transcripts import Transcript

# (the message, a substring of it that is no word boundary for unicode61, its script)
TARGETS = [
    ("我们决定使用PostgreSQL作为主数据库，下周开始迁移。", "主数据库", "Chinese"),
    ("明日の会議は東京オフィスで午後三時から始まります。", "東京オフィス", "Japanese"),
    ("데이터베이스마이그레이션은 금요일에 배포합니다.", "마이그레이션", "Korean"),
]
# near misses: the same scripts, some of the same characters, not the query
DISTRACTORS = [
    "数据分析报告已经完成了。", "主要的问题是网络延迟。", "東京に住んでいます。", "オフィスの引っ越しは来月です。",
    "데이터 분석은 끝났습니다.", "이그레이 씨가 전화했어요.", "We use MySQL for the staging database.",
]


@pytest.fixture
def cjk_vault(tmp_path, vault):
    t = Transcript(tmp_path / "projects", session_id="cjk-1", cwd="/home/u/app")
    for text in DISTRACTORS[:4]:
        t.user(text)
        t.assistant_text("OK.")
    for text, _, _ in TARGETS:
        t.user(text)
        t.assistant_text("了解。")
    for text in DISTRACTORS[4:]:
        t.user(text)
        t.assistant_text("OK.")
    t.write()
    conn = lcm.vault.db.connect(str(vault))
    lcm.capture.bulk.ingest_paths(conn, [tmp_path / "projects"])
    return vault


def _results(capsys, vault, query):
    code, out, _ = run(capsys, lcm_grep, query, "--db", vault, "--all-sessions", "--json")
    assert code == 0
    return json.loads(out)["results"]


def _holds(result, needle) -> bool:
    return needle.lower() in result["snippet"].lower()


@pytest.mark.parametrize("message,query,script", TARGETS, ids=[t[2] for t in TARGETS])
def test_a_substring_in_each_script_finds_its_message_first(cjk_vault, capsys, message, query, script):
    results = _results(capsys, cjk_vault, query)
    assert results and results[0]["snippet"].startswith(message[:8]), (script, [r["snippet"] for r in results])
    # nothing lacking the query outranks a message holding it
    holding = [_holds(r, query) for r in results]
    assert holding == sorted(holding, reverse=True)


@pytest.mark.parametrize("query", ["PostgreSQL", "postgresql", "Postgre"])
def test_a_latin_word_inside_cjk_text_is_found(cjk_vault, capsys, query):
    results = _results(capsys, cjk_vault, query)
    assert results and "PostgreSQL作为主数据库" in results[0]["snippet"]
    assert not any("MySQL" in r["snippet"] for r in results[:1])


def test_only_cjk_runs_go_to_the_trigram_index(cjk_vault):
    """English text costs the trigram index nothing; a CJK message adds only its runs."""
    conn = lcm.vault.db.connect(str(cjk_vault), create=False, readonly=True)
    if not lcm.vault.schema.has_trigram(conn):
        pytest.skip("this SQLite has no trigram tokenizer (3.34+): CJK falls back to substring scans")
    runs = [r[0] for r in conn.execute("SELECT runs FROM messages_cjk")]
    assert "我们决定使用PostgreSQL作为主数据库 下周开始迁移" in runs  # runs, not punctuation
    assert not any("MySQL" in r or "OK" in r for r in runs)
    assert len(runs) == 3 + 3 + 6  # the targets, their replies (了解), the CJK distractors


def test_without_trigram_cjk_is_still_found_by_scanning(tmp_path, vault, capsys, monkeypatch):
    """SQLite older than 3.34 (no trigram): the substring scan of before still finds CJK."""
    monkeypatch.setattr(lcm.vault.schema, "has_trigram", lambda conn: False)
    t = Transcript(tmp_path / "projects", session_id="old-sqlite", cwd="/home/u/app")
    t.user("明日の会議は東京オフィスで午後三時から始まります。")
    t.user("東京に住んでいます。")
    t.write()
    conn = lcm.vault.db.connect(str(vault))
    lcm.capture.bulk.ingest_paths(conn, [tmp_path / "projects"])
    assert not conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'messages_cjk'").fetchone()
    results = _results(capsys, vault, "東京オフィス")
    assert results[0]["snippet"].startswith("明日の会議")


def test_a_cjk_code_point_that_is_no_letter_is_indexed_without_failing():
    """U+FADA lies in the compatibility ideographs' range but is unassigned (not a word
    character): Hypothesis found it stopping ingest."""
    assert lcm.capture.indexes.cjk_runs("\ufada x 我们") == "\ufada 我们"


def test_cjk_after_a_nul_or_in_a_hook_is_indexed(tmp_path, vault):
    """The trigram index skips ASCII text before looking (in SQL, by byte and character
    length, which a NUL cuts short) and a hook compiles the CJK class only for text that can
    hold it: neither shortcut may drop a CJK run, whether it is ingested in bulk or by a hook."""
    t = Transcript(tmp_path / "projects", session_id="nul-1", cwd="/home/u/app")
    t.user("plain ascii\x00 then 数据库迁移")
    t.user("only latin-1: café déjà vu")
    t.write()
    conn = lcm.vault.db.connect(str(vault))
    if not lcm.vault.schema.has_trigram(conn):
        pytest.skip("this SQLite has no trigram tokenizer (3.34+)")
    lcm.capture.bulk.ingest_paths(conn, [tmp_path / "projects"])
    t.user("一次钩子写入的消息")
    t.write()
    lcm.capture.ingest.ingest_session(conn, str(t.path), patience=1.0)
    runs = [r[0] for r in conn.execute("SELECT runs FROM messages_cjk")]
    assert "数据库迁移" in runs and "一次钩子写入的消息" in runs
    assert len(runs) == 2


def _cjk_by_uuid(conn) -> dict:
    return dict(conn.execute("SELECT m.uuid, c.runs FROM messages_cjk c JOIN messages m ON m.id = c.rowid").fetchall())


def test_bulk_import_indexes_the_same_cjk_runs_as_hooks(tmp_path, monkeypatch):
    """Bulk import finds CJK runs in its parser process; hooks find them as they store lines.
    Both give the same index: for plain messages, for a repeated line (a resumed copy), and for
    a huge CJK tool result, whose stored text is a file reference (its CJK is in the file)."""
    monkeypatch.setenv("LCM_LARGE_FILE_THRESHOLD", "1000")
    projects = tmp_path / "projects"
    t = Transcript(projects, session_id="mixed", cwd="/home/u/app")
    t.user("请检查 parser.py 的错误")
    t.assistant_text("All tests pass now.")
    call = t.tool_use("Read", {"file_path": "/home/u/app/表格.csv"})
    t.tool_result(call, "编号,名字\n" + "".join(f"{i},名字{i}\n" for i in range(2000)))
    t.user("ありがとう、次はデータベースです")
    t.write()
    copy = projects / "zz-copy" / "resumed.jsonl"  # the same lines again, in the same import
    copy.parent.mkdir(parents=True)
    copy.write_bytes(t.path.read_bytes())
    bulk = lcm.vault.db.connect(str(tmp_path / "bulk.db"))
    if not lcm.vault.schema.has_trigram(bulk):
        pytest.skip("this SQLite has no trigram tokenizer (3.34+)")
    lcm.capture.bulk.ingest_paths(bulk, [projects])
    hooks = lcm.vault.db.connect(str(tmp_path / "hooks.db"))
    for path in (t.path, copy):
        lcm.capture.ingest.ingest_session(hooks, str(path), patience=1.0)
    expected = _cjk_by_uuid(hooks)
    assert _cjk_by_uuid(bulk) == expected
    assert "请检查 的错误" in expected.values() and "ありがとう 次はデータベースです" in expected.values()
    assert not any("名字1999" in runs for runs in expected.values())  # externalised: in files_fts

"""lcm_grep: any text is a safe query, natural questions find the message, filters narrow."""
from __future__ import annotations

import sqlite3
import json
import os
import subprocess
import sys
import time

import pytest

import lcm.base.config
import lcm.vault.db
import lcm.base.errors
import lcm.vault.schema
import lcm_grep
import lcm.capture.bulk
import lcm.capture.ingest
import lcm.search.engine
import lcm.search.query
import lcm.search.rank
import lcm.search.result_types
from conftest import command, run, SCRIPTS
from transcripts import Transcript

PASTE = ("Traceback (most recent call last): File \"app.py\", line 12, in <module> " * 70)[:5000]
ROBUSTNESS_QUERIES = ["foo-bar", "error: timeout", "lcm_grep.py", "AND", "NEAR(", '"unclosed', "*", "(((",
                      "\U0001F680 launch", "数据库迁移", PASTE, "OR NOT", "a:b:c", "-x", "^", "[", "\\", "''"]


@pytest.fixture
def grep_vault(tmp_path, vault):
    """Two projects, three sessions, facts stated in passing among filler."""
    projects = tmp_path / "projects"
    a = Transcript(projects, session_id="sess-a", cwd="/home/u/shop", start="2026-11-01T10:00:00Z")
    a.user("Can you set up the checkout page? We deploy with the foo-bar pipeline.")
    a.assistant_text("Done. The checkout page now validates the postcode before payment.")
    call = a.tool_use("Bash", {"command": "python3 scripts/lcm_grep.py --help"})
    a.tool_result(call, "error: timeout after 30s while connecting to the payments sandbox", is_error=True)
    a.user("By the way, I adopted a cat named Luna last spring, she keeps walking on my keyboard.")
    a.assistant_text("Luna sounds like a great pair programmer. I'll keep the keyboard shortcuts simple.")
    a.user("我们明天进行数据库迁移，请准备好回滚脚本。")
    a.assistant_text("Rollback script ready \U0001F680 launch when you are.")
    a.write()
    b = Transcript(projects, session_id="sess-b", cwd="/home/u/shop", start="2026-11-10T10:00:00Z")
    b.user("The database migration for orders needs an index on created_at.")
    b.assistant_text("Added the index; the migration runs in 2 seconds now.")
    b.user("Use blue for the primary buttons, my favourite colour is teal though.")
    b.assistant_text("Primary buttons are blue now.")
    b.write()
    c = Transcript(projects, session_id="sess-c", cwd="/home/u/blog", start="2026-11-20T10:00:00Z")
    c.user("Write a post about the database migration we did on the blog.")
    c.assistant_text("Draft ready: 'How we migrated the blog database without downtime'.")
    c.write()
    conn = lcm.vault.db.connect(str(vault))
    lcm.capture.bulk.ingest_paths(conn, [projects])
    return conn




def grep_json(capsys, *argv):
    code, out, err = run(capsys, lcm_grep, *argv, "--json")
    assert code == 0, err
    return json.loads(out)


@pytest.mark.parametrize("query", ROBUSTNESS_QUERIES, ids=lambda q: q[:20])
def test_any_query_is_answered_or_explained(grep_vault, capsys, query):
    code, out, err = run(capsys, lcm_grep, "--json", "--", query)  # "--": a query may start with "-"
    assert code == 0, err
    assert set(json.loads(out)) == {"query", "scope", "count", "has_more", "results"}
    for mode in ("full_text", "regex"):
        code, out, err = run(capsys, lcm_grep, "--mode", mode, "--", query)
        if code != 0:
            assert code == 1 and err.startswith("Error: ") and "\nHint: " in err, (mode, err)
            assert "Traceback (most recent call last):\n" not in err and len(err) < 1000


def test_literal_queries_find_their_message(grep_vault, capsys):
    for query, expected in [("foo-bar", "foo-bar pipeline"), ("error: timeout", "error: timeout"),
                            ("lcm_grep.py", "lcm_grep.py --help"), ("数据库迁移", "数据库迁移"),
                            ("\U0001F680", "\U0001F680")]:
        doc = grep_json(capsys, query)
        assert doc["results"] and expected in doc["results"][0]["snippet"], (query, doc)


def test_full_text_and_regex_errors_have_hints(grep_vault, capsys):
    code, _out, err = run(capsys, lcm_grep, "NEAR(", "--mode", "full_text")
    assert code == 1 and "Error: invalid FTS5 expression" in err and "Hint:" in err
    code, _out, err = run(capsys, lcm_grep, "(((", "--mode", "regex")
    assert code == 1 and "Error: invalid regular expression" in err and "Hint:" in err
    doc = grep_json(capsys, "checkout NOT postcode", "--mode", "full_text")
    assert [r["snippet"] for r in doc["results"]] == ["Can you set up the checkout page? We deploy with the foo-bar pipeline."]
    doc = grep_json(capsys, r"time\w+ after \d+s", "--mode", "regex")
    assert doc["count"] == 1


def test_natural_questions_find_facts_stated_in_passing(grep_vault, capsys):
    doc = grep_json(capsys, "what's my cat's name?")
    assert "adopted a cat named Luna" in doc["results"][0]["snippet"]
    doc = grep_json(capsys, "Which colour did I say was my favourite?")
    assert "favourite colour is teal" in doc["results"][0]["snippet"]
    doc = grep_json(capsys, "how fast does the migration run now?")
    assert "2 seconds" in " ".join(r["snippet"] for r in doc["results"][:3])


def test_every_term_ranks_first_but_partial_matches_are_found(grep_vault, capsys):
    doc = grep_json(capsys, "database migration orders index", "--scope", "messages")
    assert "index on created_at" in doc["results"][0]["snippet"]
    snippets = " ".join(r["snippet"] for r in doc["results"])
    assert "migrated the blog database" in snippets  # shares only some of the terms


def test_quoted_phrase_stays_a_phrase(grep_vault, capsys):
    doc = grep_json(capsys, '"primary buttons"')
    assert doc["results"] and all("primary buttons" in r["snippet"].lower() for r in doc["results"])
    doc = grep_json(capsys, '"buttons primary"')
    assert doc["count"] == 0


def test_json_shape_and_covering_summary(grep_vault, capsys):
    with lcm.vault.db.transaction(grep_vault):
        first, last = grep_vault.execute("SELECT min(id), max(id) FROM messages WHERE session_id='sess-b'").fetchone()
        grep_vault.execute(
            "INSERT INTO summaries (id, session_id, kind, depth, content, token_count, source_token_count, level,"
            " first_message_id, last_message_id, created_at) VALUES ('sum_00000000000000bb', 'sess-b', 'leaf', 0,"
            " 'Orders migration got an index; buttons are blue.', 12, 80, 'extractive', ?, ?, 'now')", (first, last))
        for ord_, mid in enumerate(range(first, last + 1)):
            grep_vault.execute("INSERT INTO summary_sources (summary_id, ord, message_id) VALUES (?,?,?)",
                               ("sum_00000000000000bb", ord_, mid))
    doc = grep_json(capsys, "orders index")
    keys = {"type", "id", "session_id", "uuid", "role", "created_at", "snippet", "score", "covering_summary_id",
            "kind", "depth", "next_to", "coverage"}
    assert all(set(r) == keys for r in doc["results"])
    summary = next(r for r in doc["results"] if r["type"] == "summary")
    assert (summary["kind"], summary["depth"]) == ("leaf", 0)
    messages = [r for r in doc["results"] if r["type"] == "message"]
    assert messages[0]["covering_summary_id"] == "sum_00000000000000bb"
    assert messages[0]["id"] == messages[0]["uuid"] and messages[0]["role"] == "user"
    assert any(r["type"] == "summary" and r["id"] == "sum_00000000000000bb" for r in doc["results"])
    doc = grep_json(capsys, "orders index", "--scope", "summaries")
    assert [r["type"] for r in doc["results"]] == ["summary"]
    code, out, _err = run(capsys, lcm_grep, "orders index")
    assert code == 0 and "in sum_00000000000000bb" in out and command("lcm_expand.py", "sum_00000000000000bb") in out


def test_scope_filters(grep_vault, capsys, monkeypatch):
    everywhere = grep_json(capsys, "database migration")
    assert {r["session_id"] for r in everywhere["results"]} == {"sess-b", "sess-c"}
    monkeypatch.setenv("LCM_SESSION_ID", "sess-a")  # current project = /home/u/shop
    assert {r["session_id"] for r in grep_json(capsys, "database migration")["results"]} == {"sess-b"}
    assert {r["session_id"] for r in grep_json(capsys, "database migration", "--all-sessions")["results"]} == {"sess-b", "sess-c"}
    assert {r["session_id"] for r in grep_json(capsys, "database migration", "--project", "/home/u/blog")["results"]} == {"sess-c"}
    assert {r["session_id"] for r in grep_json(capsys, "migration", "--session", "sess-c")["results"]} == {"sess-c"}
    code, out, err = run(capsys, lcm_grep, "blog post without downtime", "--json")  # only in another project
    assert code == 0 and json.loads(out)["results"][0]["session_id"] == "sess-c"
    assert set(json.loads(out)) == {"query", "scope", "count", "has_more", "results"} and "from all projects" in err
    assert {r["role"] for r in grep_json(capsys, "migration", "--all-sessions", "--role", "assistant")["results"]} == {"assistant"}
    late = grep_json(capsys, "migration", "--all-sessions", "--since", "2026-11-15")
    assert {r["session_id"] for r in late["results"]} == {"sess-c"}
    early = grep_json(capsys, "migration", "--all-sessions", "--before", "2026-11-15T00:00")
    assert {r["session_id"] for r in early["results"]} == {"sess-b"}
    assert grep_json(capsys, "migration", "--all-sessions", "--since", "1d")["count"] == 0  # all older than a day


def test_relative_dates_and_bad_dates():
    assert lcm.search.result_types.parse_when("2d", "--since") < lcm.search.result_types.parse_when("3h", "--since") < lcm.base.config.now_iso()
    with pytest.raises(lcm.base.errors.LcmError) as exc:
        lcm.search.result_types.parse_when("yesterday", "--since")
    assert "--since 2d" in exc.value.hint


def test_limit_offset_and_next_command(grep_vault, capsys):
    first = grep_json(capsys, "the", "--limit", "2")
    assert first["count"] == 2 and first["has_more"]
    second = grep_json(capsys, "the", "--limit", "2", "--offset", "2")
    assert {r["id"] for r in first["results"]}.isdisjoint(r["id"] for r in second["results"])
    code, out, _err = run(capsys, lcm_grep, "the", "--limit", "2")
    assert f'... more: {command("lcm_grep.py", "the --limit 2 --offset 2")}' in out


def test_regex_scan_is_bounded_in_time(grep_vault, tmp_path):
    # a message on which (a+)+$ backtracks for minutes: only the time limit ends the scan
    t = Transcript(tmp_path / "more", session_id="sess-d", cwd="/home/u/shop")
    t.user("a" * 30 + "!")
    t.write()
    lcm.capture.bulk.ingest_paths(grep_vault, [tmp_path / "more"])
    start = time.monotonic()
    doc = lcm.search.engine.search(grep_vault, lcm.search.query.Query(r"(a+)+$", mode="regex", all_sessions=True, time_limit=0.3))
    assert time.monotonic() - start < 20  # not the minutes the match alone would take
    assert doc["count"] == 0 and doc.get("stopped_early") is True


def test_regex_scan_stopped_inside_the_text_decoder_says_so(grep_vault, tmp_path, monkeypatch):
    """Regex mode's alarm may land while SQLite runs lcm_text() on a compressed row (SQLite then
    only says a function raised): the scan ends at its time limit and says it stopped early."""
    import lcm.vault.db
    import lcm.vault.pack
    import lcm.vault.squeeze
    for n in range(2):  # two sessions: a dictionary's lines come from two
        t = Transcript(tmp_path / "long", session_id=f"sess-long-{n}", cwd="/home/u/shop")
        for i in range(40):
            t.user(f"turn {i}: the heron parser reads the config file and logs every field it finds\n" * 4)
        t.write()
    lcm.capture.bulk.ingest_paths(grep_vault, [tmp_path / "long"])
    lcm.vault.pack.pack(grep_vault, everything=True)
    assert grep_vault.execute("SELECT count(*) FROM messages WHERE typeof(content) = 'blob'").fetchone()[0] > 40
    plain = lcm.vault.squeeze.Decoder.text

    def slow(self, value):  # every decode takes a while: the alarm lands in one
        time.sleep(0.02)
        return plain(self, value)
    monkeypatch.setattr(lcm.vault.squeeze.Decoder, "text", slow)
    conn = lcm.vault.db.connect(readonly=True)
    doc = lcm.search.engine.search(conn, lcm.search.query.Query(r"zzq[xy]+never", mode="regex", all_sessions=True,
                                                                time_limit=0.3))
    assert doc["count"] == 0 and doc.get("stopped_early") is True


def test_substring_fallback_without_fts5(grep_vault, capsys):
    for statement in ("DROP TRIGGER messages_fts_ai", "DROP TRIGGER messages_fts_ad", "DROP TABLE messages_fts",
                      "DROP TRIGGER summaries_fts_ai", "DROP TRIGGER summaries_fts_ad", "DROP TABLE summaries_fts"):
        grep_vault.execute(statement)
    assert not lcm.vault.schema.fts_enabled(grep_vault)
    doc = grep_json(capsys, "cat named Luna")
    assert "adopted a cat named Luna" in doc["results"][0]["snippet"]
    code, _out, err = run(capsys, lcm_grep, "cat", "--mode", "full_text")
    assert code == 1 and "no FTS5" in err


def test_missing_vault_is_an_error_with_hint(capsys, tmp_path):
    code, _out, err = run(capsys, lcm_grep, "anything", "--db", str(tmp_path / "none.db"))
    assert code == 1 and err.startswith("Error: no vault") and "Hint:" in err


def test_subprocess_smoke_and_cheap_imports(grep_vault, vault):
    env = {k: v for k, v in os.environ.items()}
    proc = subprocess.run([sys.executable, "-X", "importtime", str(SCRIPTS / "lcm_grep.py"), "Luna",
                           "--db", str(vault), "--json"], capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "Luna" in json.loads(proc.stdout)["results"][0]["snippet"]
    imported = {line.split("|")[-1].strip().split(".")[0] for line in proc.stderr.splitlines() if "|" in line}
    assert not imported & {"anthropic", "jsonschema", "tqdm", "httpx", "pydantic"}


def test_big_vault_paths_with_small_budgets(tmp_path, vault, capsys, monkeypatch):
    """The bounds that keep 1M-message vaults fast, exercised on a small vault with tiny budgets:
    a common word is ranked over its newest matches, a rare word still finds old messages."""
    import lcm.search.engine
    t = Transcript(tmp_path / "projects", session_id="big")
    for i in range(60):
        t.user(f"deploy log line {i}: the deploy went fine")
    t.user("the flamingo incident happened during an early deploy")
    for i in range(60):
        t.user(f"deploy log line {60 + i}: the deploy went fine")
    t.write()
    conn = lcm.vault.db.connect(str(vault))
    lcm.capture.bulk.ingest_paths(conn, [tmp_path / "projects"])
    monkeypatch.setattr(lcm.search.rank, "DF_CAP", 11)
    monkeypatch.setattr(lcm.search.rank, "RANK_BUDGET", 10)
    monkeypatch.setattr(lcm.search.rank, "RANK_WINDOW", 5)
    doc = lcm.search.engine.search(conn, lcm.search.query.Query("deploy", limit=3))
    lines = [int(r["snippet"].split(":")[0].rsplit(" ", 1)[1]) for r in doc["results"]]
    assert doc["count"] == 3 and min(lines) >= 115  # ranked among the newest RANK_WINDOW matches
    doc = lcm.search.engine.search(conn, lcm.search.query.Query("deploy flamingo", limit=3))
    assert "flamingo incident" in doc["results"][0]["snippet"]  # the rare word leads, old or not
    doc = lcm.search.engine.search(conn, lcm.search.query.Query("deploy", mode="full_text", limit=3))
    assert doc["count"] == 3
    assert lcm.search.rank.df(conn, lcm.search.result_types.Source(conn, "message", None, None, None, None, None),
                          '"deploy"', 121) >= 100  # estimated past the cap, not stuck at 11


def test_auto_mode_never_fails_on_any_text(grep_vault):
    """Property: whatever the text (operators, quotes, control and astral characters), auto answers."""
    from hypothesis import HealthCheck, given, settings, strategies as st

    alphabet = st.sampled_from(list('abc -_:."*()^{}[]~+\'\\/NEARORNOTAND') + ["数据", "\U0001F680", "\x00", "\n"])

    @settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(st.one_of(st.text(), st.lists(alphabet, max_size=30).map("".join)))
    def check(query):
        doc = lcm.search.engine.search(grep_vault, lcm.search.query.Query(query, all_sessions=True, time_limit=0.5))
        assert doc["count"] == len(doc["results"]) <= 20

    check()


def test_a_word_pattern_finds_exactly_where_the_word_starts_a_word():
    """Property: the query's word patterns (written word-first, for speed) match exactly where the
    plain definition does: the word (its stem and any ending, or a short word whole), not glued
    to a letter or digit before it, case-insensitive, in any script."""
    import re

    import lcm.search.query
    from hypothesis import given, settings, strategies as st

    letters = st.sampled_from(list("aAbB3_-. é\u0130ßK\u212a\n") + ["ab", "3b", "b3"])
    words = st.lists(st.text(alphabet="abAB3é\u0130ßK", min_size=1, max_size=5), min_size=1, max_size=3)

    def plain(ws):  # the definition: a word may not continue a letter or digit before it
        parts = [r"(?<![^\W_])" + re.escape(lcm.search.query.crude_stem(w)) + r"\w*" if len(w) > 2 else
                 r"(?<![^\W_])" + re.escape(w.lower()) + r"(?![^\W_])" for w in ws]
        return "(?i)" + r"[\W_]+".join(parts)

    @settings(max_examples=400, deadline=None)
    @given(words, st.lists(letters, max_size=40).map("".join))
    def check(ws, around):
        text = around[: len(around) // 2] + " ".join(ws) + around[len(around) // 2:] + around
        fast = [m.span() for m in re.finditer(lcm.search.query._word_regex(ws), text)]
        assert fast == [m.span() for m in re.finditer(plain(ws), text)]

    check()


def test_titles_checkpoints_and_digests_are_found_through_their_index_as_substrings_in_any_case(vault):
    """Property: the trigram indexes over the small tables find the rows whose text holds the
    query's words as substrings in any case (Unicode, where the LIKE scan they replace folds ASCII
    only), in any script, glued into other words: those holding every word first, newest first;
    and they stay in step as titles change, digests are rewritten and rows are deleted."""
    import lcm.search.query
    from hypothesis import HealthCheck, given, settings, strategies as st

    conn = lcm.vault.db.connect(str(vault))
    if not lcm.vault.schema.has_trigram(conn):
        pytest.skip(f"SQLite {sqlite3.sqlite_version} has no trigram tokenizer: grep scans these tables")
    pieces = ["Parser", "parser", "PARSEr", "timeout", "数据库迁移", "使用PostgreSQL作为", "café", "CAFÉ", "x", "a b", "_id"]
    texts = st.lists(st.sampled_from(pieces), max_size=6).map(" ".join)

    def found(kind, terms):
        src = lcm.search.result_types.Source(conn, kind, None, None, None, None, None)
        assert src.tri
        rows = {}
        lcm.search.rank._substrings(conn, src, terms, False, 20, time.monotonic() + 5, rows)
        return list(rows)

    def expected(kind, terms):  # the definition, over the table's rows newest first
        rtype = lcm.search.result_types.TYPES[kind]
        texts = conn.execute(f"SELECT t.{rtype.key}, {rtype.text} FROM {rtype.table} t"
                             f" ORDER BY t.{rtype.key} DESC").fetchall()
        holds = [[t.text.lower() in (text or "").lower() for t in terms] for _, text in texts]
        every = [k for (k, _), h in zip(texts, holds) if all(h)]
        if len(every) >= 20 or len(terms) == 1:
            return every[:20]
        return (every + [k for (k, _), h in zip(texts, holds) if any(h) and not all(h)])[:20]

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(st.lists(texts, min_size=1, max_size=8), st.lists(st.sampled_from(
        ["parser", "timeout", "postgresql", "数据库", "café", "a b", "_id", "pars"]), min_size=1, max_size=2, unique=True))
    def check(rows, words):
        with lcm.vault.db.transaction(conn):
            for table in ("digests", "checkpoints", "sessions"):
                conn.execute(f"DELETE FROM {table}")
            for i, text in enumerate(rows):
                conn.execute("INSERT INTO sessions (session_id, title) VALUES (?, ?)", (f"s{i}", text or None))
                conn.execute("INSERT INTO digests (session_id, text, level, created_at) VALUES (?, ?, 'extractive', ?)"
                             " ON CONFLICT(session_id) DO UPDATE SET text = excluded.text", (f"s{i}", text, "2026-11-01"))
                conn.execute("INSERT INTO checkpoints (session_id, content, created_at) VALUES (?, ?, ?)",
                             (f"s{i}", text, "2026-11-01"))
            conn.execute("UPDATE sessions SET title = upper(title) WHERE rowid % 2 = 0")  # titles change
            conn.execute("INSERT INTO digests (session_id, text, level, created_at) VALUES ('s0', 'rewritten timeout',"
                         " 'model', '2026-11-02') ON CONFLICT(session_id) DO UPDATE SET text = excluded.text")
            conn.execute("DELETE FROM checkpoints WHERE id % 3 = 0")
        for index, *_ in lcm.vault.schema.SUBSTRING_INDEXES:  # raises if an index is out of step
            conn.execute(f"INSERT INTO {index}({index}, rank) VALUES ('integrity-check', 1)")
        terms = [t for w in words for t in lcm.search.query.parse_query(w)]
        if all(len(t.text) >= 3 for t in terms):  # (a shorter word: the scan, as before)
            for kind in ("title", "checkpoint", "digest"):
                assert found(kind, terms) == expected(kind, terms), kind

    check()


@pytest.fixture
def context_vault(tmp_path, vault):
    """Two sessions that both mention the hit's words; a tool call between turns."""
    projects = tmp_path / "projects"
    a = Transcript(projects, session_id="ctx-a", cwd="/home/u/app", start="2026-11-02T10:00:00Z")
    for i in range(6):
        a.user(f"prompt {i} about the cache layer")
        if i == 3:
            call = a.tool_use("Bash", {"command": "pytest tests/test_cache.py"})
            a.tool_result(call, "1 failed: test_eviction")
            a.assistant_text("The eviction bug: the quokka counter is never reset after a flush.")
        else:
            a.assistant_text(f"reply {i} on the cache layer")
    a.write()
    b = Transcript(projects, session_id="ctx-b", cwd="/home/u/app", start="2026-11-02T10:00:30Z")
    b.user("unrelated chatter from another session")
    b.assistant_text("Another quokka mention, in another session entirely.")
    b.write()
    conn = lcm.vault.db.connect()
    lcm.capture.bulk.ingest_paths(conn, [str(projects)])
    return conn


def test_context_prints_the_turns_around_each_hit_from_its_own_session(context_vault, capsys):
    code, out, err = run(capsys, lcm_grep, "quokka counter reset", "--all-sessions", "--context", "2", "--json")
    assert code == 0, err
    doc = json.loads(out)
    hit = next(r for r in doc["results"] if r["session_id"] == "ctx-a" and r["type"] == "message")
    ctx = hit["context"]
    # conversation order, the hit's own session, prompts and replies only (not the tool call)
    assert [t["text"] for t in ctx["before"]] == ["reply 2 on the cache layer", "prompt 3 about the cache layer"]
    assert [t["text"] for t in ctx["after"]] == ["prompt 4 about the cache layer", "reply 4 on the cache layer"]
    assert all("quokka" not in t["text"] for t in ctx["before"] + ctx["after"])   # never the other session's turn
    other = next(r for r in doc["results"] if r["session_id"] == "ctx-b")
    assert [t["text"] for t in other["context"]["before"]] == ["unrelated chatter from another session"]
    assert other["context"]["after"] == []

    code, out, err = run(capsys, lcm_grep, "quokka counter reset", "--all-sessions", "--context", "1")
    assert code == 0, err
    lines = out.splitlines()
    at = next(i for i, ln in enumerate(lines) if "session ctx-a" in ln)
    assert lines[at + 2].split()[:2] == ["-1", "user"] and lines[at + 2].endswith("prompt 3 about the cache layer")
    assert lines[at + 3].split()[:2] == ["+1", "user"] and lines[at + 3].endswith("prompt 4 about the cache layer")


def test_context_is_bounded(context_vault, capsys):
    with pytest.raises(SystemExit) as exc:
        run(capsys, lcm_grep, "quokka", "--all-sessions", "--context", "11")
    assert exc.value.code == 2 and "between 0 and 10" in capsys.readouterr().err
    code, out, err = run(capsys, lcm_grep, "cache layer", "--all-sessions", "--context", "10", "--limit", "3", "--json")
    doc = json.loads(out)
    for r in doc["results"]:
        if r["type"] == "message":
            assert len(r["context"]["before"]) <= 10 and len(r["context"]["after"]) <= 10
            assert all(len(t["text"]) <= 300 for t in r["context"]["before"] + r["context"]["after"])

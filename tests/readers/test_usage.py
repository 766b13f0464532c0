"""lcm usage: tokens and cost over the whole vault, counted as ccusage counts them.

The field's reference is ccusage 18.0.11 (npm), installed on first use into a cached prefix the
way .ci/run installs the claude CLI; the test that compares with it skips, saying why, when npm
cannot install it (LCM_TEST_REQUIRE_CCUSAGE=1 makes that a failure)."""
from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

import lcm_ingest
import lcm_purge
import lcm_usage
from conftest import run, shared_data
from transcripts import Transcript

CCUSAGE_VERSION = "18.0.11"  # 20.x needs a native package the registry here does not serve
CCUSAGE_PREFIX = Path(os.environ.get("LCM_CI_CCUSAGE_PREFIX") or Path.home() / ".cache" / "lcm-ci" / "ccusage")
REQUIRED = os.environ.get("LCM_TEST_REQUIRE_CCUSAGE") == "1"  # read before conftest strips LCM_*
ZONE = "America/Los_Angeles"  # days in a zone far from UTC: a late-evening response belongs to the day before
ONE_HOUR_EXTRA = {"claude-opus-4": 30 - 18.75, "claude-opus-4-1": 30 - 18.75, "claude-opus-4-5": 10 - 6.25,
                  "claude-opus-4-6": 10 - 6.25, "claude-opus-4-7": 10 - 6.25, "claude-sonnet-4": 6 - 3.75,
                  "claude-sonnet-4-5": 6 - 3.75, "claude-haiku-4-5": 2 - 1.25}


def ccusage() -> str:
    """The ccusage executable, installed into CCUSAGE_PREFIX when missing; else skip (or fail)."""
    exe = CCUSAGE_PREFIX / "bin" / "ccusage"
    if not exe.exists() and shutil.which("npm"):
        subprocess.run(["npm", "install", "-g", "--prefix", str(CCUSAGE_PREFIX), f"ccusage@{CCUSAGE_VERSION}"],
                       capture_output=True, timeout=300)
    if not exe.exists():
        why = f"ccusage {CCUSAGE_VERSION} is not installed in {CCUSAGE_PREFIX} and npm could not install it"
        if REQUIRED:
            pytest.fail(why)
        pytest.skip(why)
    return str(exe)


@pytest.fixture
def zone(monkeypatch):
    """TZ for this process (SQLite's 'localtime' reads it) and for ccusage."""
    monkeypatch.setenv("TZ", ZONE)
    time.tzset()
    yield ZONE
    monkeypatch.undo()
    time.tzset()


def ccusage_daily(config_dir: Path) -> dict:
    env = {**os.environ, "CLAUDE_CONFIG_DIR": str(config_dir), "TZ": ZONE}
    out = subprocess.run([ccusage(), "daily", "--offline", "--json"], capture_output=True, text=True, env=env,
                         timeout=300, check=True).stdout
    return {(d["date"], m["modelName"]): m for d in json.loads(out)["daily"] for m in d["modelBreakdowns"]}


def lcm_daily(capsys) -> dict:
    code, out, err = run(capsys, lcm_usage, "--json", "--by", "day")
    assert code == 0, err
    return {(d["key"], m["model"]): m for d in json.loads(out)["items"] for m in d["models"]}


def base_model(name: str) -> str:
    return next(k for k in sorted(ONE_HOUR_EXTRA, key=len, reverse=True) if name.startswith(k))


def assert_agrees(ours: dict, theirs: dict) -> None:
    assert set(ours) == set(theirs)
    for key, m in theirs.items():
        mine = ours[key]
        assert (mine["input_tokens"], mine["output_tokens"], mine["cache_write_tokens"], mine["cache_read_tokens"]) == (
            m["inputTokens"], m["outputTokens"], m["cacheCreationTokens"], m["cacheReadTokens"]), key
        # ccusage prices every cache write at the 5-minute rate; lcm prices those kept an hour at
        # theirs (README: "How lcm usage counts")
        extra = mine["cache_write_1h_tokens"] * ONE_HOUR_EXTRA[base_model(key[1])] / 1e6
        assert mine["cost_usd"] == pytest.approx(m["cost"] + extra, rel=0.005), key


def test_usage_agrees_with_ccusage_per_day_and_model_and_after_the_transcripts_are_gone(tmp_path, capsys, zone):
    source = shared_data("claude-projects")
    config = tmp_path / "claude"
    shutil.copytree(source, config / "projects")
    theirs = ccusage_daily(config)
    assert len(theirs) > 10
    assert run(capsys, lcm_ingest, config / "projects")[0] == 0
    ours = lcm_daily(capsys)
    assert_agrees(ours, theirs)
    shutil.rmtree(config / "projects")  # Claude Code's cleanup: only the vault remains
    assert lcm_daily(capsys) == ours


def response(t: Transcript, msg_id: str, request: str, usage: dict, text: str = "x") -> dict:
    message = {"id": msg_id, "type": "message", "role": "assistant", "model": t.model,
               "content": [{"type": "text", "text": text}], "usage": usage}
    return t.entry("assistant", message, requestId=request)


def usage(i: int, o: int, write: int = 0, read: int = 0, hour: int = 0) -> dict:
    return {"input_tokens": i, "output_tokens": o, "cache_creation_input_tokens": write, "cache_read_input_tokens": read,
            "cache_creation": {"ephemeral_5m_input_tokens": write - hour, "ephemeral_1h_input_tokens": hour}}


def test_a_response_written_on_several_lines_counts_once_and_a_purge_leaves_its_other_line(tmp_path, capsys):
    t = Transcript(tmp_path / "projects", model="claude-sonnet-4-5-20250929", start="2026-11-20T09:00:00Z")
    t.user("hello")
    first = response(t, "msg_a", "req_a", usage(10, 5, 1000, 2000), "thinking out loud")  # streamed: partial output
    response(t, "msg_a", "req_a", usage(10, 140, 1000, 2000), "the answer")
    response(t, "msg_b", "req_b", usage(3, 7))
    t.write()
    assert run(capsys, lcm_ingest, t.path)[0] == 0
    doc = json.loads(run(capsys, lcm_usage, "--json", "--by", "model")[1])
    (m,) = doc["items"]
    # the first line of each response, as ccusage (both undercount a streamed response's output)
    assert (m["responses"], m["input_tokens"], m["output_tokens"], m["cache_write_tokens"]) == (2, 13, 12, 1000)
    assert m["cost_usd"] == pytest.approx((13 * 3 + 12 * 15 + 1000 * 3.75 + 2000 * 0.3) / 1e6)
    assert run(capsys, lcm_ingest, t.path)[0] == 0  # read again: nothing twice
    assert json.loads(run(capsys, lcm_usage, "--json")[1])["totals"]["input_tokens"] == 13
    assert run(capsys, lcm_purge, "--message", first["uuid"], "--yes")[0] == 0
    doc = json.loads(run(capsys, lcm_usage, "--json", "--by", "model")[1])
    assert doc["totals"]["output_tokens"] == 140 + 7  # the response's other line counts now


def test_unknown_model_is_counted_in_tokens_and_named_and_a_price_file_prices_it(tmp_path, capsys, isolated_home):
    t = Transcript(tmp_path / "projects", model="claude-future-9", start="2026-11-20T09:00:00Z")
    response(t, "msg_1", "req_1", usage(1000, 2000, 0, 500_000))
    t.model = "claude-opus-4-5-20251101"
    response(t, "msg_2", "req_2", usage(100, 10, 1000, 0, hour=1000))
    t.write()
    run(capsys, lcm_ingest, t.path)
    code, out, _ = run(capsys, lcm_usage, "--by", "model")
    assert code == 0
    assert "Not priced" in out and "claude-future-9 (503,000 tokens)" in out
    doc = json.loads(run(capsys, lcm_usage, "--json", "--by", "model")[1])
    future = next(i for i in doc["items"] if i["key"] == "claude-future-9")
    assert future["cost_usd"] == 0 and future["models"][0]["cost_usd"] is None and not future["cost_complete"]
    opus = next(i for i in doc["items"] if i["key"] == "claude-opus-4-5-20251101")
    assert opus["cost_usd"] == pytest.approx((100 * 5 + 10 * 25 + 1000 * 10) / 1e6)  # an hour's cache write: $10/M
    assert doc["totals"]["total_tokens"] == 503_000 + 1110
    own = isolated_home / ".claude-lcm" / "prices.json"
    own.write_text(json.dumps({"taken": "2030-01-01", "models": {"claude-future": {
        "input": 1, "output": 2, "cache_write_5m": 0, "cache_write_1h": 0, "cache_read": 0.1}}}))
    doc = json.loads(run(capsys, lcm_usage, "--json", "--by", "model")[1])
    future = next(i for i in doc["items"] if i["key"] == "claude-future-9")
    assert future["cost_usd"] == pytest.approx((1000 * 1 + 2000 * 2 + 500_000 * 0.1) / 1e6)
    assert doc["unpriced_models"] == [] and doc["prices"]["taken"] == "2030-01-01"
    own.write_text("{not json")
    code, out, err = run(capsys, lcm_usage)
    assert code == 1 and "Error: cannot read the price table" in err and "Hint:" in err


def test_groups_ranges_and_long_context_rates(tmp_path, capsys, zone):
    a = Transcript(tmp_path / "projects", cwd="/home/u/alpha", model="claude-sonnet-4-5", start="2026-03-01T10:00:00Z")
    response(a, "m1", "r1", usage(300_000, 10))  # past 200k in one field: the long-context rate for the excess
    b = Transcript(tmp_path / "projects", cwd="/home/u/beta", model="claude-haiku-4-5", start="2026-03-10T06:00:00Z")
    response(b, "m2", "r2", usage(50, 5))  # 06:00 UTC is the 9th in Los Angeles
    a.write(), b.write()
    run(capsys, lcm_ingest, tmp_path / "projects")
    by_day = json.loads(run(capsys, lcm_usage, "--json")[1])
    assert [i["key"] for i in by_day["items"]] == ["2026-03-09", "2026-03-01"]
    assert by_day["items"][1]["cost_usd"] == pytest.approx((200_000 * 3 + 100_000 * 6 + 10 * 15) / 1e6)
    month = json.loads(run(capsys, lcm_usage, "--json", "--by", "month")[1])
    assert [(i["key"], i["responses"]) for i in month["items"]] == [("2026-03", 2)]
    week = json.loads(run(capsys, lcm_usage, "--json", "--by", "week")[1])
    assert [i["key"] for i in week["items"]] == ["2026-03-09", "2026-02-23"]  # Mondays
    projects = json.loads(run(capsys, lcm_usage, "--json", "--by", "project")[1])
    assert [i["key"] for i in projects["items"]] == ["/home/u/alpha", "/home/u/beta"]
    sessions = json.loads(run(capsys, lcm_usage, "--json", "--by", "session")[1])
    assert {i["key"] for i in sessions["items"]} == {a.session_id, b.session_id}
    ranged = json.loads(run(capsys, lcm_usage, "--json", "--since", "20260302", "--until", "2026-03-09")[1])
    assert [i["key"] for i in ranged["items"]] == ["2026-03-09"]
    code, _, err = run(capsys, lcm_usage, "--since", "March")
    assert code == 1 and "Error: --since 'March' is not a day" in err and "Hint:" in err


def test_a_vault_filled_before_the_usage_table_is_read_once_by_the_next_import(tmp_path, capsys):
    import lcm.vault.db
    t = Transcript(tmp_path / "projects", model="claude-sonnet-4-5", start="2026-11-20T09:00:00Z")
    response(t, "m1", "r1", usage(10, 20))
    response(t, "m2", "r2", usage(1, 2))
    t.write()
    run(capsys, lcm_ingest, t.path)
    conn = lcm.vault.db.connect()
    # as an older lcm left it: lines stored, their usage not read
    conn.execute("DELETE FROM usage")
    conn.execute("UPDATE vault_meta SET value = (SELECT max(id) + 1 FROM messages) WHERE key = 'usage_backfill_below'")
    conn.close()
    code, out, _ = run(capsys, lcm_usage)
    assert "2 messages stored by an older lcm are not read for usage yet" in out
    run(capsys, lcm_ingest, t.path)
    doc = json.loads(run(capsys, lcm_usage, "--json")[1])
    assert (doc["totals"]["input_tokens"], doc["totals"]["output_tokens"], doc["messages_not_read"]) == (11, 22, 0)


def test_a_hook_leaves_older_lines_usage_to_the_detached_packing_run(tmp_path, capsys):
    """On a vault converted from before the usage table a hook reads none of the older lines (it
    would cost every turn); the Stop hook starts the detached packing run, which reads them all."""
    import lcm.vault.db
    from test_hooks import run_hook, stop, wait_for
    t = Transcript(tmp_path / "projects", model="claude-sonnet-4-5", start="2026-11-20T09:00:00Z")
    response(t, "m1", "r1", usage(10, 20))
    t.write()
    run(capsys, lcm_ingest, t.path)
    conn = lcm.vault.db.connect()
    conn.execute("DELETE FROM usage")  # as an older lcm left it: lines stored, their usage not read
    conn.execute("UPDATE vault_meta SET value = (SELECT max(id) + 1 FROM messages) WHERE key = 'usage_backfill_below'")
    conn.commit()
    response(t, "m2", "r2", usage(1, 2))  # a new turn for the hook
    t.write()
    done = run_hook("stop", stop(t))
    assert done.returncode == 0, done.stderr

    def read() -> tuple:
        doc = json.loads(run(capsys, lcm_usage, "--json")[1])
        return doc["totals"]["input_tokens"], doc["messages_not_read"]
    assert wait_for(lambda: read() == (11, 0)), read()
    conn.close()


def test_turns_the_hooks_stored_are_counted_at_once_and_alike_once_the_packing_run_has_read_them(tmp_path, capsys):
    """A hook leaves its lines' usage to the detached packing run (reading it costs every turn):
    lcm usage counts them meanwhile as it would after, a response cut across two turns or finished
    by an import counts once, its first line, and a purge of that line hands the count on."""
    import lcm_compact
    from test_hooks import run_hook, stop
    t = Transcript(tmp_path / "projects", model="claude-sonnet-4-5-20250929", start="2026-11-20T09:00:00Z")
    t.user("hello")
    response(t, "msg_a", "req_a", usage(10, 5, 1000, 2000), "thinking out loud")
    t.write()
    assert run_hook("stop", stop(t)).returncode == 0
    response(t, "msg_a", "req_a", usage(10, 140, 1000, 2000), "the answer")  # the same response, next turn
    response(t, "msg_b", "req_b", usage(3, 7))
    first_c = response(t, "msg_c", "req_c", usage(100, 50))
    t.write()
    assert run_hook("stop", stop(t)).returncode == 0
    response(t, "msg_c", "req_c", usage(100, 900))  # its last line, stored by an import, not a hook
    t.write()
    assert run(capsys, lcm_ingest, t.path)[0] == 0

    def by_model() -> tuple:
        doc = json.loads(run(capsys, lcm_usage, "--json", "--by", "model")[1])
        (m,) = doc["items"]
        return m["responses"], m["input_tokens"], m["output_tokens"], m["cache_write_tokens"], round(m["cost_usd"], 9)
    counted = (3, 113, 62, 1000, round((113 * 3 + 62 * 15 + 1000 * 3.75 + 2000 * 0.3) / 1e6, 9))
    assert by_model() == counted
    days = json.loads(run(capsys, lcm_usage, "--json", "--by", "day")[1])["items"]
    assert [(d["key"], d["output_tokens"]) for d in days] == [("2026-11-20", 62)]
    assert run(capsys, lcm_compact, "--pack", "--json")[0] == 0  # what the Stop hook detaches
    assert by_model() == counted
    assert run(capsys, lcm_purge, "--message", first_c["uuid"], "--yes")[0] == 0
    assert by_model()[:3] == (3, 113, 62 - 50 + 900)


def test_odd_usage_fields_never_stop_an_ingest(tmp_path, capsys):
    t = Transcript(tmp_path / "projects", model="claude-haiku-4-5", start="2026-11-20T09:00:00Z")
    odd = ({"input_tokens": "12", "output_tokens": 3},             # a string: ccusage skips the line too
           {"input_tokens": 2**70, "output_tokens": 1},            # too large for SQLite
           {"input_tokens": 5.0, "output_tokens": 2, "cache_read_input_tokens": True},
           [1, 2], None)
    for i, u in enumerate(odd):
        t.entry("assistant", {"id": f"m{i}", "model": "claude-haiku-4-5", "content": [], "usage": u}, requestId=f"r{i}")
    t.entry("assistant", {"id": "m9", "model": "claude-ODD", "content": [], "usage": {"input_tokens": 7, "output_tokens": 1}},
            requestId="r9")
    t.pending[-1] = t.pending[-1].replace("ODD", "\udcff")  # a byte that is not UTF-8 in the model's name
    t.path.parent.mkdir(parents=True)
    t.path.write_bytes(b"".join(line.encode("utf-8", "surrogateescape") + b"\n" for line in t.pending))
    code, out, err = run(capsys, lcm_ingest, t.path, "--json")
    assert code == 0 and json.loads(out)["messages_added"] == len(odd) + 1
    doc = json.loads(run(capsys, lcm_usage, "--json", "--by", "model")[1])
    assert doc["totals"]["input_tokens"] == 5 + 7 and doc["totals"]["responses"] == 2


# the usage rows as lcm wrote them before migration 23 (USAGE_TABLE_VERSION): the line's time and session repeated from
# its messages row, the model always, the response key as text (lcm/capture/tokens.py then)
INSERT_BEFORE_SLIM = (
    "INSERT OR IGNORE INTO usage (message_id, at, session_id, model, response, input_tokens, output_tokens,"
    " cache_write_tokens, cache_write_1h_tokens, cache_read_tokens, cost_usd, counted)"
    " SELECT id, created_at, session_id, ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, NOT EXISTS (SELECT 1 FROM usage d"
    " WHERE d.response = ?2 AND d.message_id < messages.id) FROM messages WHERE uuid = ?9")


def reports(capsys) -> list:
    out = [run(capsys, lcm_usage, "--json", "--by", by)[1] for by in ("day", "week", "month", "session", "project", "model")]
    return [json.loads(doc) for doc in out] + [run(capsys, lcm_usage, "--by", "session")[1]]


def test_a_vault_converted_from_the_older_usage_rows_reports_as_a_fresh_one(tmp_path, capsys, zone, monkeypatch):
    """Migration 23 rebuilds the usage table in place (time and session from messages, the
    response key a 64-bit hash): lcm usage says the same as on a vault filled at once, the
    rollup equals the rows' sums, and a purge still hands a response's count to its next line."""
    import lcm.capture.tokens
    import lcm.vault.schema
    for name, model in (("a", "claude-sonnet-4-5-20250929"), ("b", "claude-opus-4-6")):
        t = Transcript(tmp_path / "projects" / name, model=model, start="2026-11-20T07:50:00Z")
        t.user("hello")
        response(t, f"msg_{name}1", "req_1", usage(10, 5, 1000, 2000))  # streamed: two lines, counted once
        response(t, f"msg_{name}1", "req_1", usage(10, 140, 1000, 2000))
        fast = usage(300_000, 7, hour=0)
        fast["speed"] = "fast"  # a '-fast' model of its own
        response(t, f"msg_{name}2", "req_2", fast)
        t.entry("assistant", {"id": f"msg_{name}3", "model": model, "content": [], "usage": usage(3, 4)})  # no requestId
        t.entry("assistant", {"id": f"msg_{name}4", "model": model, "content": [], "usage": usage(5, 6)},
                requestId="req_4", costUSD=0.25)
        t.write()
    fresh, older = tmp_path / "fresh.db", tmp_path / "older.db"
    monkeypatch.setenv("LCM_DB", str(fresh))
    assert run(capsys, lcm_ingest, tmp_path / "projects")[0] == 0
    expected = reports(capsys)
    monkeypatch.setenv("LCM_DB", str(older))
    slim = lcm.vault.schema.USAGE_TABLE_VERSION
    with monkeypatch.context() as m:  # as lcm wrote it at the schema before
        m.setattr(lcm.vault.schema, "MIGRATIONS", lcm.vault.schema.MIGRATIONS[:slim - 1])
        m.setattr(lcm.vault.schema, "SCHEMA_VERSION", slim - 1)
        m.setattr(lcm.vault.schema, "USAGE_TABLE_VERSION", 17)
        m.setattr(lcm.vault.schema, "response_key", lambda text: text)
        m.setattr(lcm.capture.tokens, "INSERT", INSERT_BEFORE_SLIM)
        assert run(capsys, lcm_ingest, tmp_path / "projects")[0] == 0
    raw = sqlite3.connect(older)
    assert raw.execute("PRAGMA user_version").fetchone()[0] == slim - 1
    assert raw.execute("SELECT count(*), count(DISTINCT typeof(response)) FROM usage WHERE response IS NOT NULL"
                       " AND typeof(response) = 'text' AND at IS NOT NULL").fetchone() == (8, 1)
    raw.close()
    assert reports(capsys) == expected  # read as it is (a report does not migrate)
    assert run(capsys, lcm_ingest, tmp_path / "projects")[0] == 0  # converts it; nothing new to store
    assert reports(capsys) == expected
    conn = sqlite3.connect(older)
    assert conn.execute("PRAGMA user_version").fetchone()[0] >= slim
    cols = [r[1] for r in conn.execute("PRAGMA table_info(usage)")]
    assert "at" not in cols and "session_id" not in cols
    assert conn.execute("SELECT DISTINCT typeof(response) FROM usage WHERE response IS NOT NULL").fetchall() == [("integer",)]
    # only the '-fast' responses keep a model of their own
    assert sorted(r[0] for r in conn.execute("SELECT model FROM usage WHERE model IS NOT NULL")) == [
        "claude-opus-4-6-fast", "claude-sonnet-4-5-20250929-fast"]

    def rollup() -> list:
        return conn.execute("SELECT * FROM usage_rollup WHERE responses != 0 ORDER BY 1, 2, 3").fetchall()
    before = rollup()
    conn.execute("BEGIN IMMEDIATE")
    lcm.vault.schema._usage_slim(conn)  # met again: nothing changes
    conn.execute("COMMIT")
    assert rollup() == before and len(before) >= 2
    with conn:  # set back to before the usage table: migrations 17 on meet the new rows again
        conn.execute("PRAGMA user_version = 16")
    conn.close()
    assert run(capsys, lcm_ingest, tmp_path / "projects")[0] == 0
    conn = sqlite3.connect(older)
    assert rollup() == before
    conn.close()
    assert reports(capsys) == expected
    conn = sqlite3.connect(older)
    first = conn.execute("SELECT m.uuid FROM usage u JOIN messages m ON m.id = u.message_id"
                         " WHERE u.response IS NOT NULL ORDER BY u.message_id LIMIT 1").fetchone()[0]
    conn.close()
    assert run(capsys, lcm_purge, "--message", first, "--yes")[0] == 0
    purged = json.loads(run(capsys, lcm_usage, "--json", "--by", "model")[1])
    monkeypatch.setenv("LCM_DB", str(fresh))
    assert run(capsys, lcm_purge, "--message", first, "--yes")[0] == 0
    assert json.loads(run(capsys, lcm_usage, "--json", "--by", "model")[1]) == purged
    assert purged["totals"]["output_tokens"] == expected[5]["totals"]["output_tokens"] - 5 + 140
    for vault in (fresh, older):  # the rollup is the counted rows' sums, after the purge too
        conn = sqlite3.connect(vault)
        sums = conn.execute(f"SELECT {lcm.vault.schema.usage_key('u')}, "
                            + ", ".join(f"sum({v})" for v in lcm.vault.schema._usage_values("u"))
                            + " FROM usage u JOIN messages m ON m.id = u.message_id WHERE u.counted = 1"
                            " GROUP BY 1, 2, 3 ORDER BY 1, 2, 3").fetchall()
        assert sums == rollup() and len(sums) >= 4
        conn.close()

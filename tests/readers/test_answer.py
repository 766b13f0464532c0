"""Deep recall shows the line that answers (issue 23.4): the answer is one line inside a long
tool result (a failing test, a stack trace, a config value), asked without a model and with a
fake one; the messages are ranked by the question and --max-tokens governs the whole answer."""
from __future__ import annotations

import json

import pytest

import lcm.readers.answer
import lcm.summary.compact
import lcm.vault.db
import lcm.capture.bulk
import lcm.capture.ingest
from conftest import run

from transcripts import Transcript

PASSING = "\n".join(f"tests/test_parser.py::test_case_{i} PASSED{' ' * 30}[{i:3d}%]" for i in range(80))
PYTEST_OUTPUT = f"""============================= test session starts ==============================
platform linux -- Python 3.12.3, pytest-8.3.2, pluggy-1.5.0
rootdir: /home/user/shop
collected 81 items

{PASSING}
tests/test_cart.py::test_discount_applies_once FAILED                    [100%]

=================================== FAILURES ===================================
__________________________ test_discount_applies_once __________________________

    def test_discount_applies_once():
        cart = Cart()
        cart.add(Item("book", 20.00))
        cart.apply_discount("SPRING10")
        cart.apply_discount("SPRING10")
>       assert cart.total() == 18.00
E       AssertionError: assert 16.2 == 18.0
E        +  where 16.2 = <bound method Cart.total of <shop.cart.Cart object at 0x7f3a>>()

tests/test_cart.py:41: AssertionError
=========================== short test summary info ============================
FAILED tests/test_cart.py::test_discount_applies_once - AssertionError: assert 16.2 == 18.0
========================= 1 failed, 80 passed in 2.31s ========================="""

MIGRATION_LOG = "\n".join(f"INFO  [alembic.runtime.migration] Running upgrade r{i:03d} -> r{i + 1:03d}, step {i}"
                          for i in range(60)) + """
Traceback (most recent call last):
  File "/home/user/shop/.venv/bin/alembic", line 8, in <module>
    sys.exit(main())
  File "/home/user/shop/.venv/lib/python3.12/site-packages/alembic/config.py", line 636, in main
    CommandLine(prog=prog).main(argv=argv)
  File "/home/user/shop/migrations/versions/r061_orders.py", line 22, in upgrade
    op.execute("UPDATE orders SET region = country_code")
sqlite3.OperationalError: no such column: country_code"""

SETTINGS = "\n".join(f"{i + 1:6d}\u2192" + line for i, line in enumerate(
    ["[server]", 'host = "0.0.0.0"', "port = 8080", "workers = 4", ""]
    + [f"# option {i}: documented in docs/config.md#opt{i}" for i in range(50)]
    + ["[client]", "request_timeout = 45", "retries = 3", 'user_agent = "shop-sync/2.1"']
    + [f"# trailing note {i}" for i in range(30)]))

CASES = [  # (question, the line that answers)
    ("Which test failed and why?", "E       AssertionError: assert 16.2 == 18.0"),
    ("Which test failed and why?", "FAILED tests/test_cart.py::test_discount_applies_once"),
    ("What error did the alembic migration raise?", "sqlite3.OperationalError: no such column: country_code"),
    ("What is request_timeout set to in settings.toml?", "request_timeout = 45"),
]


@pytest.fixture
def session(tmp_path, vault, monkeypatch):
    """A session whose answers sit deep inside three long tool results, among filler turns,
    compacted without a model into one DAG; returns (conn, top summary ids)."""
    t = Transcript(tmp_path / "projects", cwd="/home/user/shop", model="claude-opus-4-1")
    for i in range(6):
        t.user(f"Step {i}: tidy module_{i}.py and keep the public names")
        t.assistant_text(f"Tidied module_{i}.py; nothing else changed. " + "note " * 60)
    for command, output in (("pytest -q", PYTEST_OUTPUT), ("alembic upgrade head", MIGRATION_LOG)):
        call = t.tool_use("Bash", {"command": command})
        t.tool_result(call, output, is_error=True)
        t.assistant_text("Looking into it. " + "note " * 60)
    read = t.tool_use("Read", {"file_path": "/home/user/shop/settings.toml"})
    t.tool_result(read, SETTINGS)
    for i in range(6):
        t.user(f"Later step {i}: rename helper_{i}")
        t.assistant_text(f"Renamed helper_{i}. " + "note " * 60)
    t.write()
    conn = lcm.vault.db.connect()
    lcm.capture.bulk.ingest_paths(conn, [str(t.path)])
    monkeypatch.setenv("LCM_LLM", "none")
    monkeypatch.setenv("LCM_FRESH_TAIL_COUNT", "0")
    monkeypatch.setenv("LCM_LEAF_CHUNK_TOKENS", "3000")
    lcm.summary.compact.compact(conn, t.session_id, mode="full")
    tops = [r[0] for r in conn.execute("SELECT id FROM summaries WHERE parent_id IS NULL")]
    assert tops
    return conn, tops


@pytest.mark.parametrize("question,line", CASES)
def test_the_excerpt_holds_the_line_that_answers(session, question, line, monkeypatch, capsys):
    conn, tops = session
    code, out, err = run(capsys, "lcm_expand_query", "--prompt", question, "--summary-ids", *tops, "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["backend"] == "none" and line in doc["answer"]
    assert doc["total_source_tokens"] <= 4000


@pytest.mark.parametrize("question,line", CASES)
def test_the_models_first_prompt_holds_the_line_that_answers(session, question, line, fake_api, monkeypatch,
                                                            capsys):
    conn, tops = session
    monkeypatch.setenv("LCM_LLM", "anthropic")
    fake_api.enqueue(text="From the sources.")
    code, out, err = run(capsys, "lcm_expand_query", "--prompt", question, "--summary-ids", *tops, "--json")
    assert code == 0, err
    prompt = fake_api.user_text(fake_api.requests[0])
    assert line in prompt
    assert fake_api.requests[0]["model"] == "claude-opus-4-1"    # the session's main-thread model


def test_a_failures_key_lines_come_before_its_passing_noise():
    lines = lcm.readers.answer.excerpt(PYTEST_OUTPUT, [], 600, failure=True)[0]
    assert "E       AssertionError: assert 16.2 == 18.0" in lines and "FAILED tests/test_cart.py" in lines
    assert "test_case_3 PASSED" not in lines and len(lines) <= 600 + 100


def test_max_tokens_governs_the_whole_answer(session, monkeypatch, capsys):
    conn, tops = session
    docs = {}
    for cap in (300, 4000):
        code, out, err = run(capsys, "lcm_expand_query", "--prompt", "Which test failed and why?",
                             "--summary-ids", *tops, "--max-tokens", cap, "--json")
        assert code == 0, err
        docs[cap] = json.loads(out)
        assert docs[cap]["total_source_tokens"] <= cap
        # the key lines come first, so even a small cap shows them
        assert "E       AssertionError: assert 16.2 == 18.0" in docs[cap]["answer"]
    assert docs[300]["truncated"] and not docs[4000]["truncated"]
    # with room, the failure comes with its context: the test's assert and the summary line
    assert ">       assert cart.total() == 18.00" in docs[4000]["answer"]
    assert "FAILED tests/test_cart.py::test_discount_applies_once" in docs[4000]["answer"]
    assert docs[4000]["total_source_tokens"] > docs[300]["total_source_tokens"]


def test_terminal_colours_do_not_reach_the_excerpt():
    coloured = "collected 3 items\n" + "ok\n" * 40 + "\x1b[31mFAILED\x1b[0m tests/test_io.py::test_read - OSError: [Errno 5]\n"
    shown, hits = lcm.readers.answer.excerpt(coloured, [], 800, failure=True)
    assert "FAILED tests/test_io.py::test_read - OSError: [Errno 5]" in shown and "\x1b" not in shown and hits

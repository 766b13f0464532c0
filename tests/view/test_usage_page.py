"""The viewer's usage page: a chart of the cost as inline SVG (no script library), the table,
masked like every page; served at `usage` under the viewer's root (its capability)."""
from __future__ import annotations

import http.client
import re

import pytest

import lcm.capture.bulk
import lcm.vault.db
import lcm.view.pages
from lcm.view.server import Viewer, open_readonly
from transcripts import Transcript

SECRET = "AKIA" + "QX7T2MWB4KRN6PLD"  # in a project's path: a name every usage group shows


def response(t: Transcript, n: int, usage: dict) -> None:
    t.entry("assistant", {"id": f"msg_{t.session_id[:4]}{n}", "type": "message", "role": "assistant", "model": t.model,
                          "content": [{"type": "text", "text": "ok"}], "usage": usage}, requestId=f"req_{t.session_id[:4]}{n}")


@pytest.fixture
def vault(tmp_path):
    projects = tmp_path / "projects"
    for day, cwd, model in ((1, f"/srv/{SECRET}/app", "claude-opus-4-7"), (2, "/srv/web", "claude-sonnet-4-5"),
                            (3, "/srv/web", "claude-made-up-1")):
        t = Transcript(projects, cwd=cwd, model=model, start=f"2026-05-0{day}T12:00:00Z")
        t.user("go")
        response(t, 1, {"input_tokens": 100 * day, "output_tokens": 1000, "cache_read_input_tokens": 5000})
        t.write()
    db = tmp_path / "lcm.db"
    conn = lcm.vault.db.connect(str(db))
    lcm.capture.bulk.ingest_paths(conn, [str(projects)])
    conn.close()
    return db


def test_the_usage_page_draws_one_bar_a_group_in_inline_svg_and_masks_every_name(vault):
    conn = open_readonly(str(vault))
    page = lcm.view.pages.usage_page(conn, {"by": "day"})
    svg = re.search(r"<svg class=usage-chart.*?</svg>", page, re.S).group(0)
    assert len(re.findall(r"<rect class=bar ", svg)) == 3  # three days, one bar each
    assert "<script" not in svg and page.count("<script") == 1  # only the layout's own app.js
    assert "2026-05-01" in svg and "2026-05-03" in svg  # oldest left, newest right
    heights = [float(h) for h in re.findall(r"height='([\d.]+)'", svg)]
    assert heights[0] == max(heights)  # opus on day 1 cost the most
    projects = lcm.view.pages.usage_page(conn, {"by": "project"})
    assert SECRET not in projects and "[secret:aws-key:" in projects
    assert "/srv/web" in projects and "claude-made-up-1" in projects and "Not priced" in projects
    ranged = lcm.view.pages.usage_page(conn, {"by": "day", "since": "2026-05-02", "until": "2026-05-02"})
    assert len(re.findall(r"<rect class=bar ", ranged)) == 1
    empty = lcm.view.pages.usage_page(conn, {"since": "2027-01-01"})
    assert "No usage recorded" in empty and "<svg" not in empty


def test_the_usage_route_needs_the_capability_and_answers_a_bad_grouping_with_an_error_page(vault):
    server = Viewer(str(vault))
    server.start()
    try:
        def get(path, capability=True):
            conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
            conn.request("GET", server.root + path if capability else "/" + path, headers={"Host": f"127.0.0.1:{server.port}"})
            reply = conn.getresponse()
            return reply.status, reply.read().decode()
        assert get("usage", capability=False)[0] == 403
        status, body = get("usage?by=model")
        assert status == 200 and "<svg class=usage-chart" in body and "claude-opus-4-7" in body
        status, body = get("usage?by=colour")
        assert status == 500 and "cannot group usage by" in body
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.slow  # drives a real browser
def test_browser_draws_the_usage_chart_without_a_policy_violation(vault):
    """In a real Chromium: the chart's bars are drawn under the viewer's Content-Security-Policy
    (nothing refused), one a day; a skip says why when no browser is installed."""
    import os
    import shutil
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("playwright is not installed (pip install -r requirements-dev.txt)")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if not chromium:
        if os.environ.get("LCM_TEST_REQUIRE_BROWSER") == "1":
            pytest.fail("no chromium on PATH and LCM_TEST_REQUIRE_BROWSER=1")
        pytest.skip("no Chromium installed (Debian: apt-get install chromium)")
    server = Viewer(str(vault))
    server.start()
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox", "--disable-gpu"])
            page = browser.new_page()
            refused = []
            page.on("console", lambda m: refused.append(m.text) if "Content Security Policy" in m.text else None)
            page.goto(server.url + "usage?by=day")  # under the printed URL's root (its capability)
            bars = page.locator("svg.usage-chart rect.bar")
            assert bars.count() == 3
            box = bars.first.bounding_box()
            assert box and box["height"] > 10 and box["width"] > 10
            assert refused == []
            browser.close()
    finally:
        server.shutdown()
        server.server_close()

"""lcm_view.py: the local web view, driven as a person would in a real headless Chromium, and
attacked as a page on another site would: no token, another Host, a write, a planted secret."""
from __future__ import annotations

import hashlib
import http.client
import http.server
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urljoin, urlsplit

import pytest

import lcm.summary.compact
import lcm.vault.db
import lcm.capture.bulk
import lcm.capture.ingest
import lcm.readers.sessions
from conftest import SHARED_DATA, shared_data
from lcm.view import server as server_module
from lcm.view.server import Viewer
from transcripts import Transcript
import lcm.base.config
import lcm.base.mask
from conftest import one_transcript, run

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
REAL_HOME = Path(os.path.expanduser("~"))  # read before a test changes HOME
SCREENSHOTS = Path(os.environ.get("LCM_SCREENSHOTS") or REAL_HOME / ".cache" / "lcm" / "screenshots")
SECRETS = ("sk-ant-api03-" + "Zq8" * 30 + "AA", "AKIA" + "QX7T2MWB4KRN6PLD", "ghp_" + "k3Jw9" * 8)
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


FEATURES = "7e57c0de-0000-4000-8000-0000000000a1"
MARKDOWN = ("## Plan for the parser\n\nFirst **bold step**, then *a careful one* with `parse_all()`:\n\n"
            "- read the grammar\n- write the tests\n  - unit\n  - property\n\n1. ship\n2. tell people\n\n"
            "```python\ndef parse_all(text):\n    return '<b>not bold</b>'\n```\n\n"
            "See [the docs](https://example.org/parser) and <script>alert(1)</script> never runs.")


def features_session(projects):
    """One session with what the viewer must render well: a Bash call with a description and
    the three hook status lines Claude Code writes around it (two name the call, a Stop summary
    does not), markdown from Claude, and a message whose words test the search marks."""
    t = Transcript(projects, session_id=FEATURES, cwd="/srv/features")
    t.user("Starting the parser work: put the grammar in order")
    call = t.tool_use("Bash", {"command": "cd /private/tmp/build-7731 && make -j4 parser",
                               "description": "Build the parser"})
    t.entry("system", None, content="Running \x1b[1mPostToolUse:Bash\x1b[22m...", isMeta=False, level="info",
            toolUseID=call)
    t.tool_result(call, "built parser in 2.1 s")
    t.entry("system", None, content="\x1b[1mPostToolUse:Bash\x1b[22m [ruff format] completed successfully",
            isMeta=False, level="info", toolUseID=call)
    t.assistant_text(MARKDOWN)
    t.entry("system", None, subtype="stop_hook_summary", hookCount=1,
            hookInfos=[{"command": "uv run pytest", "durationMs": 900}], hookErrors=[],
            preventedContinuation=False, stopReason="", hasOutput=True, level="suggestion",
            toolUseID="5b2f0c55-0000-4000-8000-00000000ffff")
    t.user("Is the grammar loaded in debug mode now?")
    t.assistant_text("Yes: the grammar is loaded in debug mode, starting with the lexer.")
    return t


@pytest.fixture(scope="module")
def vault_dir(tmp_path_factory):
    """The shared transcripts plus one session with planted secrets, compacted deep enough for
    a DAG of several levels (extractive summaries, no model)."""
    if not SHARED_DATA.exists():
        shared_data("claude-projects")  # skips, saying why
    root = tmp_path_factory.mktemp("view")
    projects = root / "projects"
    planted = Transcript(projects, session_id="5ec12e7a-0000-4000-8000-00000000beef", cwd="/srv/planted")
    planted.user(f"Here is my key {SECRETS[0]} and on its own line:\n{SECRETS[1]}")
    call = planted.tool_use("Bash", {"command": f"export GITHUB_TOKEN=\n{SECRETS[2]}\ncurl -H 'x' https://x"})
    planted.tool_result(call, "ok")
    planted.assistant_text("Stored the planted credentials in the environment.")
    planted.write()
    features_session(projects).write()
    env = {"LCM_HOME": str(root / "home"), "LCM_LLM": "none", "LCM_LEAF_CHUNK_TOKENS": "1500",
           "LCM_LEAF_MIN_TOKENS": "300", "LCM_CONDENSED_MIN_FANOUT": "2", "LCM_LEAF_MIN_FANOUT": "2",
           "LCM_FRESH_TAIL_COUNT": "4"}
    with pytest.MonkeyPatch.context() as m:
        for name, value in env.items():
            m.setenv(name, value)
        conn = lcm.vault.db.connect(str(root / "lcm.db"))
        lcm.capture.bulk.ingest_paths(conn, [str(SHARED_DATA / "claude-projects"), str(projects)])
        for (sid,) in conn.execute("SELECT session_id FROM sessions").fetchall():
            lcm.summary.compact.compact(conn, sid, mode="full")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.close()
    return root


@pytest.fixture(scope="module")
def viewer(vault_dir):
    server = Viewer(str(vault_dir / "lcm.db"))
    server.start()
    yield server
    server.shutdown()
    server.server_close()


def get(viewer, path: str, *, host: str | None = None, capability: bool = True, method: str = "GET",
        headers: dict | None = None):
    """GET `path` under the viewer's root (its capability), or as given with capability=False."""
    conn = http.client.HTTPConnection("127.0.0.1", viewer.port, timeout=30)
    sent = {"Host": host or f"127.0.0.1:{viewer.port}", **(headers or {})}
    conn.request(method, viewer.root + path.lstrip("/") if capability else path, headers=sent)
    response = conn.getresponse()
    body = response.read().decode("utf-8", "replace")
    conn.close()
    return response, body


class Links(HTMLParser):
    def __init__(self):
        super().__init__()
        self.links = []
        self.base = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "base":
            self.base = attrs.get("href")
        href = attrs.get("href")
        if tag == "a" and href and not href.startswith("#"):
            self.links.append(href.split("#")[0])


def crawl(viewer, start=("/",), limit=400) -> dict[str, str]:
    """Every page reachable from `start` by the viewer's own links (at most `limit`); every link
    is relative and resolves under the viewer's root (the page's <base>)."""
    seen, queue = {}, list(start)
    while queue and len(seen) < limit:
        path = queue.pop(0)
        if path in seen:
            continue
        response, body = get(viewer, path)
        assert response.status == 200, (path, response.status, body[:300])
        seen[path] = body
        parser = Links()
        parser.feed(body)
        assert parser.base == viewer.root, parser.base
        for link in parser.links:
            link = link.replace("&amp;", "&")
            assert not link.startswith(("/", "http:", "https:", "//")), link  # nothing spells the root
            resolved = urljoin(viewer.url, link)
            assert resolved.startswith(viewer.url), (link, resolved)
            rest = "/" + resolved[len(viewer.url):]
            if rest not in seen:
                queue.append(rest)
    return seen


# -- security ----------------------------------------------------------------------------------

def test_a_request_without_the_capability_is_refused(viewer):
    for path in ("/", "/search?q=key", "/static/app.css", "/s/anything", f"/?token={viewer.token}",
                 f"/x{viewer.token}/", f"/{viewer.token[:-1]}/", f"/{viewer.token}x/", f"/%2F{viewer.token}/",
                 f"/static/{viewer.token}/"):
        response, body = get(viewer, path, capability=False)
        assert response.status == 403 and SECRETS[0] not in body, path
    # the old credential, a cookie, opens nothing
    response, _ = get(viewer, "/", capability=False, headers={"Cookie": f"lcm_view={viewer.token}"})
    assert response.status == 403


def test_the_printed_url_holds_the_capability_and_sets_no_cookie(viewer):
    assert viewer.url == f"http://127.0.0.1:{viewer.port}/{viewer.token}/"
    response, body = get(viewer, "/")
    assert response.status == 200 and response.getheader("Set-Cookie") is None
    assert f"<base href='{viewer.root}'>" in body and response.getheader("Referrer-Policy") == "no-referrer"
    response, _ = get(viewer, f"/{viewer.token}", capability=False)  # the root without its slash
    assert response.status == 301 and response.getheader("Location") == viewer.root


def test_another_host_name_is_refused_even_with_the_token(viewer):
    for host in ("evil.example", f"evil.example:{viewer.port}", f"127.0.0.1:{viewer.port + 1}", "0.0.0.0"):
        response, _ = get(viewer, "/", host=host)
        assert response.status == 403, host
    assert get(viewer, "/", host=f"localhost:{viewer.port}")[0].status == 200


def test_nothing_can_be_written_and_every_response_has_a_strict_policy(viewer):
    for method in ("POST", "PUT", "DELETE", "PATCH"):
        response, _ = get(viewer, "/", method=method)
        assert response.status == 405
    response, _ = get(viewer, "/")
    policy = response.getheader("Content-Security-Policy")
    assert "default-src 'none'" in policy and "script-src 'self'" in policy and "unsafe-inline" not in policy
    assert response.getheader("X-Content-Type-Options") == "nosniff"


def _other_addresses() -> list[str]:
    """This machine's IPv4 addresses that are not loopback."""
    found = set()
    try:
        out = subprocess.run(["ip", "-4", "-o", "addr"], capture_output=True, text=True, timeout=10).stdout
        found.update(re.findall(r"inet (\d+\.\d+\.\d+\.\d+)", out))
    except (OSError, subprocess.SubprocessError):
        pass
    try:
        found.update(info[4][0] for info in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET))
    except OSError:
        pass
    return sorted(a for a in found if not a.startswith("127."))


def test_the_server_listens_on_loopback_only(viewer):
    assert viewer.server_address[0] == "127.0.0.1"
    others = _other_addresses()
    if not others:
        pytest.skip("this machine has no non-loopback IPv4 address to try")
    for address in others:
        with pytest.raises(OSError):
            socket.create_connection((address, viewer.port), timeout=3).close()


def test_a_planted_secret_is_masked_on_every_page_and_the_vault_is_untouched(viewer, vault_dir):
    db = vault_dir / "lcm.db"
    before = (hashlib.sha256(db.read_bytes()).hexdigest(), db.stat().st_mtime_ns)
    conn = lcm.vault.db.connect(str(db), create=False, readonly=True)
    planted = "5ec12e7a-0000-4000-8000-00000000beef"
    nodes = [r[0] for r in conn.execute("SELECT id FROM summaries WHERE session_id = ?", (planted,))]
    conn.close()
    pages = crawl(viewer, start=["/", f"/s/{planted}", f"/s/{planted}/dag", "/search?q=planted+credentials",
                                 *(f"/n/{n}" for n in nodes)])
    assert len(pages) > 50
    shown = "\n".join(pages.values())
    for secret in SECRETS:
        assert secret not in shown
        assert secret[4:20] not in shown
    assert "[secret:" in pages[f"/s/{planted}"]  # the planted message is shown, masked
    assert (hashlib.sha256(db.read_bytes()).hexdigest(), db.stat().st_mtime_ns) == before


# -- in a real browser ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def browser():
    required = os.environ.get("LCM_TEST_REQUIRE_BROWSER") == "1"
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        if required:
            pytest.fail("playwright is not installed (requirements-dev.txt) and LCM_TEST_REQUIRE_BROWSER=1")
        pytest.skip("playwright is not installed (pip install -r requirements-dev.txt)")
    if not CHROMIUM:
        if required:
            pytest.fail("no chromium on PATH and LCM_TEST_REQUIRE_BROWSER=1")
        pytest.skip("no Chromium installed (Debian: apt-get install chromium)")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=[
            "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
            "--disable-component-update", "--disable-sync"])
        yield browser
        browser.close()


@pytest.fixture
def page(browser, viewer):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.goto(viewer.url)  # the printed URL: the capability is the root path
    assert page.url == viewer.url and context.cookies() == []
    yield page
    context.close()


def screenshot(page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"view-{name}.png"))


def test_browser_sessions_list_shows_every_session(page, vault_dir):
    conn = lcm.vault.db.connect(str(vault_dir / "lcm.db"), create=False, readonly=True)
    ids = [r[0] for r in conn.execute("SELECT session_id FROM sessions ORDER BY last_at DESC LIMIT 50")]
    conn.close()
    shown = page.locator("a.session").count()
    assert shown == len(ids)
    text = page.inner_text("main")
    assert all(sid[:8] in text for sid in ids)
    screenshot(page, "sessions")


def test_browser_a_session_page_shows_its_first_prompt(page, vault_dir):
    conn = lcm.vault.db.connect(str(vault_dir / "lcm.db"), create=False, readonly=True)
    sid = conn.execute("SELECT session_id FROM messages WHERE role = 'user' GROUP BY session_id"
                       " ORDER BY count(*) DESC LIMIT 1").fetchone()[0]
    prompt = lcm.readers.sessions.first_prompt(conn, sid)
    conn.close()
    assert prompt
    page.click(f"a.session[href='s/{sid}']")
    page.wait_for_url(f"**/s/{sid}")
    words = " ".join(prompt.split())[:40]
    assert words in " ".join(page.inner_text("main").split())
    screenshot(page, "session")


def test_browser_the_dag_draws_every_summary_and_a_leaf_shows_its_sources(page, viewer, vault_dir):
    conn = lcm.vault.db.connect(str(vault_dir / "lcm.db"), create=False, readonly=True)
    sid, count = conn.execute("SELECT session_id, count(*) FROM summaries GROUP BY session_id"
                              " ORDER BY max(depth) DESC, count(*) DESC LIMIT 1").fetchone()
    leaf = conn.execute("SELECT id FROM summaries WHERE session_id = ? AND kind = 'leaf' ORDER BY first_message_id"
                        " LIMIT 1", (sid,)).fetchone()[0]
    sources = [r[0] for r in conn.execute("SELECT m.uuid FROM summary_sources x JOIN messages m ON m.id = x.message_id"
                                          " WHERE x.summary_id = ?", (leaf,))]
    conn.close()
    page.goto(f"{viewer.url}s/{sid}/dag")
    assert page.locator("svg a.node").count() == count
    assert page.locator("svg a.node.leaf").count() >= 1 and page.locator("svg line").count() >= 1
    page.click(f"svg a.node[data-id='{leaf}']")
    page.wait_for_selector(f"#panel article[id='m-{sources[0]}']")
    assert page.locator("#panel article.msg").count() == len(sources)
    screenshot(page, "dag")


def test_browser_search_finds_a_known_message_and_its_link_lands_on_it(page, vault_dir):
    page.fill("header input[name=q]", "planted credentials")
    page.press("header input[name=q]", "Enter")
    page.wait_for_selector(".hit")
    assert page.locator(".hit mark").count() >= 1
    screenshot(page, "search")
    conn = lcm.vault.db.connect(str(vault_dir / "lcm.db"), create=False, readonly=True)
    uuid = conn.execute("SELECT uuid FROM messages WHERE session_id = '5ec12e7a-0000-4000-8000-00000000beef'"
                        " AND role = 'assistant' ORDER BY id DESC LIMIT 1").fetchone()[0]
    conn.close()
    page.click(f"a.hit-link[href*='{uuid}']")
    page.wait_for_url(f"**#m-{uuid}")
    target = page.locator(f"article[id='m-{uuid}']")
    assert target.is_visible() and "planted credentials" in target.inner_text()
    assert json.loads(page.evaluate("JSON.stringify(location.hash)")) == f"#m-{uuid}"


# -- what a person reads (issue 33, item 9) -------------------------------------------------------

def _features(page, viewer):
    page.goto(f"{viewer.url}s/{FEATURES}")
    return page


def test_browser_hook_status_lines_fold_into_their_tool_call(page, viewer):
    """Claude Code writes several "System" lines per tool call (PostToolUse running, completed, a
    Stop summary); they were a card each and drowned the conversation. The two that name the
    call sit inside its card; the Stop summary is one collapsed line."""
    _features(page, viewer)
    assert page.locator("article.msg.system").count() == 0
    cards = page.locator("article.msg")
    assert cards.count() == 5  # the two prompts, the call, the markdown answer, the last answer
    call = page.locator("details.tool", has_text="Build the parser")
    assert "2 hook messages" in call.locator("summary").inner_text()
    assert not page.get_by_text("completed successfully").is_visible()
    call.locator("summary").click()
    assert page.get_by_text("PostToolUse:Bash [ruff format] completed successfully").is_visible()
    loose = page.locator("details.status")
    assert loose.count() == 1 and "Stop hooks ran: uv run pytest" in loose.inner_text()
    assert loose.evaluate("d => d.open") is False
    screenshot(page, "hooks-folded")


def test_browser_markdown_is_rendered_and_stays_inert(page, viewer):
    _features(page, viewer)
    answer = page.locator("article.msg.assistant .md").first
    assert answer.locator("h4").inner_text() == "Plan for the parser"
    assert answer.locator("strong").inner_text() == "bold step"
    assert answer.locator("em").inner_text() == "a careful one"
    assert answer.locator("p code").first.inner_text() == "parse_all()"
    assert answer.locator(":scope > ul > li").count() == 2 and answer.locator("ul ul > li").count() == 2
    assert answer.locator("ol > li").count() == 2
    assert "return '<b>not bold</b>'" in answer.locator("pre code").inner_text()
    assert answer.locator("b").count() == 0 and page.locator("main script").count() == 0
    # a link is shown as its text and address, never followed from here
    assert "the docs (https://example.org/parser)" in answer.inner_text()
    assert answer.locator("a").count() == 0
    assert "<script>alert(1)</script> never runs" in answer.inner_text()
    screenshot(page, "markdown")


def test_browser_a_bash_call_is_labelled_by_its_description(page, viewer):
    _features(page, viewer)
    label = page.locator("article.msg details.tool > summary").first.inner_text()
    assert label.startswith("Bash Build the parser") and "/private/tmp" not in label


def test_browser_search_marks_whole_words_as_grep_matches_them(page, viewer):
    """"in" lit up inside "Starting": a mark now covers a whole word that is the query's word, or
    shares its stem (grep's index stems: "loaded" finds "load")."""
    page.goto(f"{viewer.url}search?q=grammar+loaded+in")
    page.wait_for_selector(".hit")
    hit = page.locator(".hit", has_text="debug mode, starting with the lexer")
    marks = [m.lower() for m in hit.locator("mark").all_inner_texts()]
    assert sorted(set(marks)) == ["grammar", "in", "loaded"], marks
    text = hit.locator("div").last.inner_text()
    assert "starting" in text  # shown, but no part of it marked
    assert all(re.fullmatch(r"\w+", m) for m in marks)
    screenshot(page, "search-marks")


def test_browser_a_hit_opens_below_the_sticky_header(page, viewer):
    page.goto(f"{viewer.url}search?q=lexer")
    link = page.locator(".hit a.hit-link").first
    href = link.get_attribute("href")
    link.click()
    uuid = href.split("#m-")[1]
    page.wait_for_url(f"**#m-{uuid}")
    page.wait_for_timeout(200)
    header = page.locator("header").bounding_box()
    target = page.locator(f"article[id='m-{uuid}']").bounding_box()
    assert target["y"] >= header["y"] + header["height"], (target, header)


def test_browser_search_names_a_sessions_title_and_message_count(page, viewer, vault_dir):
    """A session showed as "(untitled, 0 messages)" in search whatever it held."""
    conn = lcm.vault.db.connect(str(vault_dir / "lcm.db"), create=False, readonly=True)
    count = conn.execute("SELECT count(*) FROM messages WHERE session_id = ?", (FEATURES,)).fetchone()[0]
    conn.close()
    page.goto(f"{viewer.url}search?q=lexer")
    meta = page.locator(".hit", has_text="starting with the lexer").locator("span.meta").inner_text()
    assert "Starting the parser work: put the grammar in order" in meta
    assert f"{count} messages" in meta and "untitled" not in meta and count > 5


def test_browser_dag_nodes_carry_a_title_of_their_summary(page, viewer, vault_dir):
    from lcm.view.pages import summary_title
    conn = lcm.vault.db.connect(str(vault_dir / "lcm.db"), create=False, readonly=True)
    sid = conn.execute("SELECT session_id FROM summaries GROUP BY session_id ORDER BY max(depth) DESC,"
                       " count(*) DESC LIMIT 1").fetchone()[0]
    contents = dict(conn.execute("SELECT id, content FROM summaries WHERE session_id = ?", (sid,)).fetchall())
    conn.close()
    page.goto(f"{viewer.url}s/{sid}/dag")
    nodes = page.locator("svg a.node")
    assert nodes.count() == len(contents)
    titled = 0
    for i in range(min(nodes.count(), 40)):
        node = nodes.nth(i)
        shown_title = node.locator("text.title").text_content()
        expected = summary_title(contents[node.get_attribute("data-id")])
        assert shown_title.rstrip(".") in expected or expected.startswith(shown_title.rstrip(".")), (shown_title, expected)
        titled += bool(shown_title.strip())
        assert "summary of" not in shown_title and shown_title != "Asked:"  # never the provenance line
    assert titled >= min(nodes.count(), 40) * 0.9
    screenshot(page, "dag-titles")


def test_browser_dates_never_wrap(browser, viewer):
    """In a narrow window the table's date column and a card's time stay on one line."""
    context = browser.new_context(viewport={"width": 700, "height": 900})
    page = context.new_page()
    page.goto(viewer.url)
    page.goto(f"{viewer.url}")
    lines = page.evaluate("""() => Array.from(document.querySelectorAll('.when')).map(e => {
        const r = e.getBoundingClientRect(); const h = parseFloat(getComputedStyle(e).lineHeight) || 20;
        return r.height / h; })""")
    assert lines and max(lines) < 1.5, lines
    page.goto(f"{viewer.url}s/{FEATURES}")
    lines = page.evaluate("() => Array.from(document.querySelectorAll('.msg .when')).map(e => e.getClientRects().length)")
    assert lines and set(lines) == {1}, lines
    screenshot(page, "narrow")
    context.close()


# -- the credential is this viewer's alone (issue 31.3) ------------------------------------------

class Recorder(http.server.ThreadingHTTPServer):
    """A plain server on another 127.0.0.1 port that keeps every request it receives: what any
    other local server (a dev server, another tool) would see of the browser."""

    daemon_threads = True

    def __init__(self):
        self.received = []
        recorder = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                recorder.received.append((self.path, dict(self.headers.items())))
                body = b"<!doctype html><title>other</title><p>another local server</p>"
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format, *args):  # noqa: A002
                pass

        super().__init__(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server_address[1]}/"
        threading.Thread(target=self.serve_forever, daemon=True).start()


def test_browser_another_local_server_receives_nothing_that_opens_the_viewer(browser, viewer):
    """The viewer open in a tab, the browser then visits another server on 127.0.0.1 (from the
    viewer's own page and directly): everything that server received, replayed against the
    viewer, is refused."""
    other = Recorder()
    context = browser.new_context()
    try:
        page = context.new_page()
        page.goto(viewer.url)
        page.click("a.session >> nth=0")
        page.wait_for_selector("article.msg")
        page.evaluate("url => { location.href = url + 'from-the-viewer'; }", other.url)  # a navigation the viewer's page starts
        page.wait_for_url(other.url + "from-the-viewer")
        second = context.new_page()
        second.goto(other.url + "typed")
        fetched = second.evaluate("url => fetch(url, {credentials: 'include'}).then(r => r.status)", other.url + "fetched")
        assert fetched == 200
        assert context.cookies() == []
    finally:
        context.close()
        other.shutdown()
        other.server_close()
    paths = [path for path, _ in other.received]
    assert {"/from-the-viewer", "/typed", "/fetched"} <= set(paths), paths
    for path, headers in other.received:
        assert viewer.token not in path + json.dumps(headers), (path, headers)
        assert "Cookie" not in headers and f":{viewer.port}" not in headers.get("Referer", ""), headers
        replay = {k: v for k, v in headers.items() if k.lower() not in ("host", "content-length")}
        for target in (path, "/", viewer.root):  # its own path, the root, the root's shape without its token
            response, _ = get(viewer, target if target != viewer.root else "/" + "x" * len(viewer.token) + "/",
                              capability=False, headers=replay)
            assert response.status == 403, (target, headers)


def test_browser_two_viewers_open_at_once_both_answer(browser, viewer, vault_dir):
    second = Viewer(str(vault_dir / "lcm.db"))
    second.start()
    context = browser.new_context()
    try:
        first_page, second_page = context.new_page(), context.new_page()
        first_page.goto(viewer.url)
        second_page.goto(second.url)
        for page, server in ((first_page, viewer), (second_page, second), (first_page, viewer)):
            assert page.goto(server.url).status == 200 and page.locator("a.session").count() >= 1
            page.click("a.session >> nth=0")
            page.wait_for_selector("article.msg")
            assert page.url.startswith(server.url)
            response = page.goto(server.url + "search?q=planted+credentials")
            assert response.status == 200 and page.locator(".hit").count() >= 1
    finally:
        context.close()
        second.shutdown()
        second.server_close()


@pytest.mark.slow  # waits out the idle timeout
def test_half_open_connections_are_closed_within_the_idle_timeout(vault_dir):
    """300 connections that send half a request, or nothing, are each closed after the idle
    timeout (2 s here; IDLE_TIMEOUT in use), and the viewer still answers meanwhile."""
    timeout = 2.0
    server = Viewer(str(vault_dir / "lcm.db"), idle_timeout=timeout)
    server.start()
    sockets = []
    try:
        started = time.monotonic()
        for i in range(300):
            s = socket.create_connection(("127.0.0.1", server.port), timeout=10)
            if i % 2:
                s.sendall(f"GET {server.root} HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n".encode())  # no blank line
            sockets.append(s)
        assert get(server, "/")[0].status == 200  # a person's request is served beside them
        closed_at = []
        for s in sockets:
            s.settimeout(max(0.1, started + timeout + 8 - time.monotonic()))
            try:
                data = s.recv(100)
            except ConnectionResetError:
                data = b""
            except socket.timeout:
                data = None
            assert data == b"", "a half-open connection is still held"
            closed_at.append(time.monotonic() - started)
        assert max(closed_at) < timeout + 8 and min(closed_at) >= timeout * 0.9
    finally:
        for s in sockets:
            s.close()
        server.shutdown()
        server.server_close()
    assert server_module.IDLE_TIMEOUT <= 30


# -- the browser is opened without the token on a command line -----------------------------------

OPENER = """#!/usr/bin/env python3
import json, os, sys, time
record = {"argv": sys.argv, "cmdlines": []}
time.sleep(0.5)
for pid in os.listdir("/proc"):
    if pid.isdigit():
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                record["cmdlines"].append(f.read().decode("utf-8", "replace"))
        except OSError:
            pass
with open(os.environ["OPENER_RECORD"], "w") as f:
    json.dump(record, f)
"""


def test_the_browser_is_opened_without_the_token_on_any_command_line(tmp_path, vault_dir):
    """lcm_view.py opens the browser (here a recording opener, as $BROWSER) on a 0600 file that
    redirects to the viewer: the opener's argv, and every process's command line while it
    runs, hold no token; the file is gone once the viewer stops."""
    opener = tmp_path / "opener"
    opener.write_text(OPENER)
    opener.chmod(0o755)
    record = tmp_path / "record.json"
    env = {**os.environ, "BROWSER": str(opener), "OPENER_RECORD": str(record), "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, str(SCRIPTS / "lcm_view.py"), "--db", str(vault_dir / "lcm.db")],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        url = proc.stdout.readline().split("lcm viewer: ", 1)[1].strip()
        token = url.rstrip("/").rsplit("/", 1)[1]
        deadline = time.monotonic() + 30
        while not record.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        seen = json.loads(record.read_text())
        assert len(seen["argv"]) == 2 and seen["argv"][1].startswith("file://"), seen["argv"]
        assert token not in " ".join(seen["argv"])
        assert len(seen["cmdlines"]) > 3 and not [c for c in seen["cmdlines"] if token in c]
        page = Path(unquote(urlsplit(seen["argv"][1]).path))
        assert page.stat().st_mode & 0o777 == 0o600 and page.parent.stat().st_mode & 0o777 == 0o700
        assert url in page.read_text()  # it sends the browser on to the printed URL
    finally:
        proc.send_signal(signal.SIGINT)  # Ctrl-C: the viewer stops and removes the page
        proc.communicate(timeout=30)
    assert proc.returncode == 0 and not page.exists() and not page.parent.exists()


def test_browser_the_opener_page_lands_on_the_viewer(browser, viewer):
    page_file = Path(server_module.opener_page(viewer.url))
    context = browser.new_context()
    try:
        page = context.new_page()
        page.goto(page_file.as_uri())
        page.wait_for_url(viewer.url)
        assert page.locator("a.session").count() >= 1
    finally:
        context.close()
        shutil.rmtree(page_file.parent)


K = "sk-ant-api03-" + "a1B2c3D4e5F6g7H8i9J0" * 3


def test_the_viewer_does_not_echo_a_secret_typed_in_a_box_or_an_address(capsys, isolated_home):
    """A person checks whether a key was stored by searching for it, or follows a link holding one:
    the page repeats what was asked (heading, search box, filter, a not-found message); the viewer
    shows everything masked, and that includes what it echoes."""
    import http.client
    from urllib.parse import quote

    import lcm.vault.db
    from lcm.view.server import Viewer
    one_transcript(isolated_home)
    assert run(capsys, "lcm_ingest", "--all")[0] == 0
    server = Viewer(str(lcm.base.config.db_path_str(None)))
    server.start()
    try:
        for path in (f"/search?q={K}", f"/?q={K}", f"/?project={K}", f"/s/{K}", f"/n/{K}", f"/s/{K}/dag"):
            conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
            conn.request("GET", server.root + path.replace(K, quote(K)).lstrip("/"), headers={
                "Host": f"127.0.0.1:{server.port}"})
            body = conn.getresponse().read().decode()
            conn.close()
            assert K not in body, path
    finally:
        server.shutdown()
        server.server_close()


def test_search_page_lists_a_checkpoint_hit_with_its_session_link(isolated_home, tmp_path):
    """A checkpoint's id is a number: the search page cut it as text and failed with a 500 whenever
    a query found a checkpoint (any word of a session that had one)."""
    import lcm_checkpoint
    from lcm.view import pages
    transcript = Transcript(tmp_path / "projects", cwd=str(tmp_path / "proj"))
    transcript.user("please move the zeppelin scheduler to the new queue")
    transcript.assistant("Moved the zeppelin scheduler; the queue drains in order now.")
    transcript.write()
    conn = lcm.vault.db.connect()
    lcm.capture.ingest.ingest_file(conn, str(transcript.path))
    assert lcm_checkpoint.main(["--session", transcript.session_id, "--vault-only"]) == 0
    html = pages.search_page(conn, {"q": "zeppelin"})
    assert "checkpoint" in html and transcript.session_id in html  # its head line links to the session
    assert html.count("class=hit>") >= 2  # the message and the checkpoint

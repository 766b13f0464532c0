"""The viewer's HTTP server: the standard library's http.server, bound to 127.0.0.1 only.

The credential is a capability in the path: the viewer's root is `/<token>/`
(`http://127.0.0.1:PORT/<token>/`), every page names it once in its <base>, and every link under
it is relative, so no link spells it. A request whose path does not start with the root is refused.
Why the path and not a cookie: cookies are not isolated by port. A cookie set by the viewer on
127.0.0.1 goes with every request the browser makes to any other server on 127.0.0.1 (a dev
server, another tool), and replayed it would open the vault; and a second viewer's cookie of the
same name replaced the first's, which then refused its own tab. A capability in the path is sent
to this origin only, two viewers never share one, and `Referrer-Policy: no-referrer` (with no
link or resource leaving the origin, by the Content-Security-Policy) keeps it out of what a page
sends elsewhere. It stays in the address bar and the browser's history, which are this person's
own; a cookie bound to the port by its name or value would still be sent to every other port.

Every request must also carry a Host header naming the loopback address and this port (a page on
another site cannot reach the viewer through DNS rebinding). Responses carry a strict
Content-Security-Policy, and the vault is opened read-only for each request: no request can change
it. A connection idle for IDLE_TIMEOUT seconds (a half-sent request, a connection opened and left)
is closed, so idle sockets cannot pile up threads.

The browser is opened on a file:// page (0600, in a 0700 directory) that redirects to the root:
the token never reaches a command line (`xdg-open`'s argv is readable by every local user in
/proc). The file is removed when the viewer stops.
"""
from __future__ import annotations

import hmac
import http.server
import os
import secrets
import shutil
import socket
import sqlite3
import sys
import tempfile
import threading
from http import HTTPStatus
from urllib.parse import parse_qsl, unquote, urlsplit

import lcm.vault.db
from lcm.base.errors import LcmError
from lcm.view import assets, pages

IDLE_TIMEOUT = 10.0  # seconds a connection may sit without completing a read or a write; then it is closed
SECURITY_HEADERS = {
    # nothing from elsewhere: our own stylesheet and script, no inline code, no frames, no forms elsewhere
    "Content-Security-Policy": "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self' data:;"
                               " connect-src 'self'; form-action 'self'; base-uri 'self'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
}


class Viewer(http.server.ThreadingHTTPServer):
    """The server, its vault path and its token (the capability its root holds). port=0 takes a
    free port; idle_timeout is IDLE_TIMEOUT unless a test wants it shorter."""

    daemon_threads = True
    request_queue_size = 128  # connections the kernel holds before accept: a page's burst, not 5

    def __init__(self, db_path: str, port: int = 0, token: str | None = None, idle_timeout: float = IDLE_TIMEOUT):
        self.db_path = db_path
        self.token = token or secrets.token_urlsafe(24)
        self.root = f"/{self.token}/"
        self.idle_timeout = idle_timeout
        super().__init__(("127.0.0.1", port), Handler)
        self.port = self.server_address[1]
        self.hosts = {f"127.0.0.1:{self.port}", f"localhost:{self.port}"}

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}{self.root}"

    def handle_error(self, request, client_address):
        """A browser that closed its tab or a connection that timed out mid-write: nothing to
        report. Anything else keeps its traceback on stderr."""
        if not isinstance(sys.exc_info()[1], (ConnectionError, socket.timeout)):  # TimeoutError from 3.10
            super().handle_error(request, client_address)

    def start(self) -> threading.Thread:
        """Serve on a background thread (tests, benchmarks); shutdown() stops it."""
        thread = threading.Thread(target=self.serve_forever, daemon=True)
        thread.start()
        return thread


class Handler(http.server.BaseHTTPRequestHandler):
    server: Viewer
    timeout = IDLE_TIMEOUT  # StreamRequestHandler.setup sets it on the socket (setup below takes the server's)
    server_version = "lcm-view"
    sys_version = ""

    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        pass  # the person's terminal shows the URL, not a line per request

    def do_GET(self):
        self._serve(head=False)

    def do_HEAD(self):
        self._serve(head=True)

    def _refuse(self, status: HTTPStatus, text: str, allow: str | None = None):
        self._send(status, text.encode(), "text/plain; charset=utf-8", extra={"Allow": allow} if allow else None)

    def _not_allowed(self):
        self._refuse(HTTPStatus.METHOD_NOT_ALLOWED, "read-only viewer", "GET, HEAD")

    do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _not_allowed

    def setup(self):
        self.timeout = self.server.idle_timeout  # a read or write that waits longer ends the connection
        super().setup()

    def _serve(self, head: bool):
        if self.headers.get("Host", "") not in self.server.hosts:
            return self._refuse(HTTPStatus.FORBIDDEN, "forbidden: open the viewer at the address it printed")
        parts = urlsplit(self.path)
        given, slash, rest = parts.path[1:].partition("/")
        if not (parts.path.startswith("/") and hmac.compare_digest(given.encode(), self.server.token.encode())):
            return self._refuse(HTTPStatus.FORBIDDEN, "forbidden: open the viewer with the URL it printed")
        if not slash:  # `/<token>`: the root is `/<token>/`, so relative links resolve under it
            return self._send(HTTPStatus.MOVED_PERMANENTLY, b"", "text/plain", extra={"Location": self.server.root},
                              head=head)
        params = dict(parse_qsl(parts.query, keep_blank_values=True))
        path = "/" + unquote(rest)
        root = self.server.root
        if path == "/static/app.css":
            return self._send(HTTPStatus.OK, assets.CSS.encode(), "text/css; charset=utf-8", head=head)
        if path == "/static/app.js":
            return self._send(HTTPStatus.OK, assets.JS.encode(), "text/javascript; charset=utf-8", head=head)
        try:
            body = self._page(path, params)
        except pages.NotFound as exc:
            return self._send(HTTPStatus.NOT_FOUND, pages.layout("Not found", f"<h1>Not found</h1><p>{pages.shown(exc.message)}</p>",
                                                                 root=root).encode(), "text/html; charset=utf-8", head=head)
        except (LcmError, sqlite3.Error) as exc:
            exc = lcm.vault.db.storage_error(exc) or exc  # a damaged block: which session, and the hint
            message = getattr(exc, "message", None) or str(exc)
            hint = getattr(exc, "hint", None)
            text = f"<h1>Error</h1><p>{pages.shown(message)}</p>" + (f"<p class=muted>{pages.shown(hint)}</p>" if hint else "")
            return self._send(HTTPStatus.INTERNAL_SERVER_ERROR, pages.layout("Error", text, root=root).encode(),
                              "text/html; charset=utf-8", head=head)
        if body is None:
            return self._send(HTTPStatus.NOT_FOUND, pages.layout("Not found", "<h1>Not found</h1>", root=root).encode(),
                              "text/html; charset=utf-8", head=head)
        self._send(HTTPStatus.OK, body.encode("utf-8", "replace"), "text/html; charset=utf-8", head=head)

    def _page(self, path: str, params: dict) -> str | None:
        conn = open_readonly(self.server.db_path)
        root = self.server.root
        try:
            if path == "/":
                return pages.sessions_page(conn, params, root=root)
            if path == "/search":
                return pages.search_page(conn, params, root=root)
            if path == "/usage":
                return pages.usage_page(conn, params, root=root)
            if path.startswith("/n/"):
                return pages.node_page(conn, path[3:], params, root=root)
            if path.startswith("/s/"):
                session_id, _, rest = path[3:].partition("/")
                if rest == "dag":
                    return pages.dag_page(conn, session_id, params, root=root)
                if not rest:
                    return pages.session_page(conn, session_id, params, root=root)
            return None
        finally:
            conn.close()

    def _send(self, status: HTTPStatus, body: bytes, ctype: str, *, extra: dict | None = None, head: bool = False):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for name, value in {**SECURITY_HEADERS, **(extra or {})}.items():
            self.send_header(name, value)
        self.end_headers()
        if not head:
            self.wfile.write(body)


def open_readonly(path: str) -> sqlite3.Connection:
    """The vault, read-only: SQLite refuses any write on this connection (mode=ro, query_only)."""
    conn = lcm.vault.db.connect(path, create=False, readonly=True)
    conn.execute("PRAGMA query_only = ON")
    return conn


def opener_page(url: str) -> str:
    """A 0600 HTML file, in a fresh 0700 directory, that sends the browser on to `url`: the browser
    is opened on its file:// address, so the token is on no command line. The caller removes
    its directory."""
    directory = tempfile.mkdtemp(prefix="lcm-view-")  # 0700
    path = os.path.join(directory, "open.html")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    target = pages.esc(url)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(f"<!doctype html><meta charset=utf-8><meta name=referrer content=no-referrer>"
                f"<meta http-equiv=refresh content='0;url={target}'><title>lcm viewer</title>"
                f"<p>Opening the viewer: <a href='{target}' rel=noreferrer>{target}</a></p>\n")
    return path


def serve(db_path: str, port: int = 0, open_browser: bool = True, out=sys.stdout) -> int:
    """Run the viewer until interrupted: print its URL, open the browser unless told not to."""
    open_readonly(db_path).close()  # a vault that cannot be read fails here, before the URL is printed
    server = Viewer(db_path, port)
    out.write(f"lcm viewer: {server.url}\n(read-only, this machine only; Ctrl-C stops it)\n")
    out.flush()
    page = None
    if open_browser:
        import pathlib
        import webbrowser
        page = opener_page(server.url)
        threading.Timer(0.3, webbrowser.open, (pathlib.Path(page).as_uri(),)).start()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        if page:
            shutil.rmtree(os.path.dirname(page), ignore_errors=True)
    return 0

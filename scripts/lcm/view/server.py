"""The viewer's HTTP server: the standard library's http.server, bound to 127.0.0.1 only.

Every request must carry the token printed at start (in the URL once; a cookie after that) and a
Host header naming the loopback address and this port (a page on another site cannot reach the
viewer through DNS rebinding). Responses carry a strict Content-Security-Policy, and the vault is
opened read-only for each request: no request can change it.
"""
from __future__ import annotations

import hmac
import http.server
import secrets
import sqlite3
import sys
import threading
from http import HTTPStatus
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit

import lcm.vault.db
from lcm.base.errors import LcmError
from lcm.view import assets, pages

COOKIE = "lcm_view"
SECURITY_HEADERS = {
    # nothing from elsewhere: our own stylesheet and script, no inline code, no frames, no forms elsewhere
    "Content-Security-Policy": "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self' data:;"
                               " connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
}


class Viewer(http.server.ThreadingHTTPServer):
    """The server, its vault path and its token. port=0 takes a free port."""

    daemon_threads = True

    def __init__(self, db_path: str, port: int = 0, token: str | None = None):
        self.db_path = db_path
        self.token = token or secrets.token_urlsafe(24)
        super().__init__(("127.0.0.1", port), Handler)
        self.port = self.server_address[1]
        self.hosts = {f"127.0.0.1:{self.port}", f"localhost:{self.port}"}

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/?token={self.token}"

    def start(self) -> threading.Thread:
        """Serve on a background thread (tests, benchmarks); shutdown() stops it."""
        thread = threading.Thread(target=self.serve_forever, daemon=True)
        thread.start()
        return thread


class Handler(http.server.BaseHTTPRequestHandler):
    server: Viewer
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

    def _serve(self, head: bool):
        if self.headers.get("Host", "") not in self.server.hosts:
            return self._refuse(HTTPStatus.FORBIDDEN, "forbidden: open the viewer at the address it printed")
        parts = urlsplit(self.path)
        params = dict(parse_qsl(parts.query, keep_blank_values=True))
        given = params.pop("token", None)
        if given is not None and hmac.compare_digest(given.encode(), self.server.token.encode()):
            # the token goes to a cookie and out of the address bar (and its history)
            rest = urlencode([(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != "token"])
            return self._send(HTTPStatus.SEE_OTHER, b"", "text/plain", extra={
                "Location": parts.path + (f"?{rest}" if rest else ""),
                "Set-Cookie": f"{COOKIE}={self.server.token}; HttpOnly; SameSite=Strict; Path=/"}, head=head)
        if not self._cookie_ok():
            return self._refuse(HTTPStatus.FORBIDDEN, "forbidden: open the viewer with the URL it printed (with its token)")
        path = unquote(parts.path)
        if path == "/static/app.css":
            return self._send(HTTPStatus.OK, assets.CSS.encode(), "text/css; charset=utf-8", head=head)
        if path == "/static/app.js":
            return self._send(HTTPStatus.OK, assets.JS.encode(), "text/javascript; charset=utf-8", head=head)
        try:
            body = self._page(path, params)
        except pages.NotFound as exc:
            return self._send(HTTPStatus.NOT_FOUND, pages.layout("Not found", f"<h1>Not found</h1><p>{pages.shown(exc.message)}</p>")
                              .encode(), "text/html; charset=utf-8", head=head)
        except (LcmError, sqlite3.Error) as exc:
            message = getattr(exc, "message", None) or str(exc)
            hint = getattr(exc, "hint", None)
            text = f"<h1>Error</h1><p>{pages.shown(message)}</p>" + (f"<p class=muted>{pages.shown(hint)}</p>" if hint else "")
            return self._send(HTTPStatus.INTERNAL_SERVER_ERROR, pages.layout("Error", text).encode(),
                              "text/html; charset=utf-8", head=head)
        if body is None:
            return self._send(HTTPStatus.NOT_FOUND, pages.layout("Not found", "<h1>Not found</h1>").encode(),
                              "text/html; charset=utf-8", head=head)
        self._send(HTTPStatus.OK, body.encode("utf-8", "replace"), "text/html; charset=utf-8", head=head)

    def _cookie_ok(self) -> bool:
        for part in self.headers.get("Cookie", "").split(";"):
            name, _, value = part.strip().partition("=")
            if name == COOKIE and hmac.compare_digest(value.encode(), self.server.token.encode()):
                return True
        return False

    def _page(self, path: str, params: dict) -> str | None:
        conn = open_readonly(self.server.db_path)
        try:
            if path == "/":
                return pages.sessions_page(conn, params)
            if path == "/search":
                return pages.search_page(conn, params)
            if path == "/usage":
                return pages.usage_page(conn, params)
            if path.startswith("/n/"):
                return pages.node_page(conn, path[3:], params)
            if path.startswith("/s/"):
                session_id, _, rest = path[3:].partition("/")
                if rest == "dag":
                    return pages.dag_page(conn, session_id, params)
                if not rest:
                    return pages.session_page(conn, session_id, params)
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


def serve(db_path: str, port: int = 0, open_browser: bool = True, out=sys.stdout) -> int:
    """Run the viewer until interrupted: print its URL, open the browser unless told not to."""
    open_readonly(db_path).close()  # a vault that cannot be read fails here, before the URL is printed
    server = Viewer(db_path, port)
    out.write(f"lcm viewer: {server.url}\n(read-only, this machine only; Ctrl-C stops it)\n")
    out.flush()
    if open_browser:
        import webbrowser
        threading.Timer(0.3, webbrowser.open, (server.url,)).start()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0

"""One loopback HTTP server for `kflab ui`: the read-only web UI and the KFP v2beta1 API.

Access rules (docs/ui.md):
- it binds 127.0.0.1 only, and answers only a Host of 127.0.0.1:PORT or localhost:PORT
  (a page on another site cannot reach it through DNS rebinding);
- a request carrying an Origin other than the server's own gets 403 (no other site's page
  can call it, with or without a token);
- the UI and its JSON need the token, given as `?token=` (then kept in a SameSite=Strict
  cookie) or as `Authorization: Bearer TOKEN`, as Jupyter does;
- `kflab ui` opens the browser on a file, not on the URL (`launch_file`): a page of mode 0600
  in the state folder that redirects to `/?code=CODE`, a one-time code that the server trades
  once for the cookie, so the token is never on a command line (another local user can read
  any process's argv in /proc) and never in the browser's history; the page's first script
  takes `?token=` or `?code=` out of the address bar with `history.replaceState`;
- the live pages' event stream (`/events`) needs the token too, and serves at most
  watch.MAX_CLIENTS pages at once;
- the KFP API (`/apis/v2beta1/`) also answers a client that sends no Origin and no token
  (a browser always sends Origin on a cross-site call): `kfp.Client(host=...)` code runs
  unchanged, as it does against the lab's port-forwarded KFP API. `api_token=True`
  (`kflab ui --api-token`) requires the token there too (`kfp.Client(existing_token=...)`),
  for hosts shared with other users: a pipeline is code, run as you.
- the UI writes nothing, but for one request: the InferenceService try-it form's POST
  (`/ui-api/inferenceservices/NAME/predict`, local backend only), which needs the token, an
  Origin header that is the server's own, a JSON body, and the CSRF token bound to the page's
  session cookie (`X-Kflab-Csrf`, from `/ui-api/csrf`); it goes to the local model server on
  127.0.0.1 through the backend's `predict` (tryit.py).
"""

from __future__ import annotations

import contextlib
import hmac
import json
import os
import secrets
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from lab.webui import tryit, views
from lab.webui.kfp_api import PREFIX, KfpApi
from lab.webui.watch import Watcher

STATIC = Path(__file__).parent / "static"
TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
         ".css": "text/css; charset=utf-8", ".txt": "text/plain; charset=utf-8"}
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
       "connect-src 'self'; frame-src 'self'; base-uri 'none'; form-action 'none'; "
       "frame-ancestors 'none'")
# A component's HTML artifact: KFP's HTMLViewer frames it with sandbox="allow-scripts" (no
# allow-same-origin), so its own inline scripts run in a unique origin; here too, and also
# without network: its inline scripts, styles and data: images only, no request anywhere
# (the UI's API included), no cookie; only the UI may frame it.
ARTIFACT_CSP = ("sandbox allow-scripts; default-src 'none'; script-src 'unsafe-inline'; "
                "style-src 'unsafe-inline'; img-src data:; frame-ancestors 'self'")
# A rendered Markdown artifact: no script at all.
MARKDOWN_CSP = ("sandbox; default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
                "frame-ancestors 'self'")
MAX_BODY = 32 * 1024 * 1024  # KFP's upload limit
# The page a tab gets without this server's token: a tab kept open across a restart of
# `kflab ui` (a new token), or one from another `kflab ui` that ran on this port.
REFUSED_PAGE = b"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark"><title>kflab ui: token needed</title></head>
<body style="font-family: system-ui, sans-serif; max-width: 40rem; margin: 2rem auto;
padding: 0 1rem; line-height: 1.5">
<h1>kflab ui needs its token</h1>
<p>This address is a <code>kflab ui</code> server, but this tab does not carry the token the
server made when it started. Each start of <code>kflab ui</code> makes a new token, so a tab
kept open across a restart, or one opened without the full URL, lands here.</p>
<p>Open the URL that <code>kflab ui</code> printed in its terminal (the one that ends in
<code>?token=...</code>); this tab then works again.</p>
</body></html>
"""
CODE_TTL = 600.0  # seconds a launch file's one-time code stays good (a browser's cold start)
REQUEST_TIMEOUT = 60.0  # seconds a client may stall mid-request
HEARTBEAT = 15.0  # seconds between an event stream's keep-alive comments


class UiServer:
    """The server and what it serves; `start()` runs it in a thread, `url` has the token."""

    def __init__(self, backend: Any, root: Path, port: int = 0,
                 token: str | None = None, static: Path = STATIC,
                 api_token: bool = False) -> None:
        self.backend = backend
        self.root = Path(root)
        self.static = Path(static)  # the page's files (tests serve a copy with axe-core)
        self.api_token = api_token
        self.token = token or secrets.token_urlsafe(24)
        self.secret = secrets.token_bytes(32)  # signs the pages' CSRF tokens (tryit.csrf_for)
        # the KFP API is the local backend's: a cluster has KFP's own (`kflab open pipelines`)
        local = getattr(backend, "name", "") == "local"
        self.api = KfpApi(root, backend) if local else None
        # live pages: one watch on the state folder (a cluster's objects are not there: a tick)
        self.watcher = Watcher(Path(root) if local else None)
        self.httpd = _Server(("127.0.0.1", port), _handler(self))
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.host = f"http://127.0.0.1:{self.port}"
        self.url = f"{self.host}/?token={self.token}"
        self._thread: threading.Thread | None = None
        self._serving = False  # serve_forever started (in a thread or here)
        self._codes: dict[str, float] = {}  # one-time code -> when it expires (monotonic)
        self._codes_lock = threading.Lock()
        self._launch_files: list[Path] = []

    def one_time_code(self) -> str:
        """A code the server trades once, within CODE_TTL seconds, for the token's cookie."""
        code = secrets.token_urlsafe(24)
        with self._codes_lock:
            self._codes[code] = time.monotonic() + CODE_TTL
        return code

    def redeem(self, code: str) -> bool:
        """Whether `code` is a live one-time code; it is spent either way."""
        with self._codes_lock:
            expires = self._codes.pop(code, None) if code else None
        return expires is not None and time.monotonic() < expires

    def launch_file(self, folder: Path) -> Path:
        """A page (mode 0600, in `folder`, made 0700) that sends the browser to
        `/?code=CODE`: what `kflab ui` hands the browser instead of the token's URL, as
        Jupyter does. Removed when the server stops."""
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        folder.chmod(0o700)
        target = folder / f"open-{self.port}-{secrets.token_hex(4)}.html"
        url = f"{self.host}/?code={self.one_time_code()}"
        page = ("<!doctype html>\n<html><head><meta charset=\"utf-8\">"
                f"<meta http-equiv=\"refresh\" content=\"0;url={url}\">"
                "<meta name=\"referrer\" content=\"no-referrer\"><title>kflab ui</title>"
                f"</head><body><p><a href=\"{url}\">Open kflab ui</a> (this link works "
                "once).</p></body></html>\n")
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                     | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(page)
        self._launch_files.append(target)
        return target

    def start(self) -> UiServer:
        if self.api is not None:
            self.api.start()  # the recurring runs' scheduler
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True,
                                        name="kflab-ui")
        self._serving = True
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        if self.api is not None:
            self.api.start()
        self._serving = True
        self.httpd.serve_forever()

    def wait(self) -> None:
        """Until the server (started with `start`) stops; Ctrl-C interrupts it."""
        while self._thread is not None and self._thread.is_alive():
            self._thread.join(0.5)

    def stop(self) -> None:
        self.watcher.close()  # ends the open event streams
        if self.api is not None:
            self.api.close()
        if self._serving:  # shutdown() waits for serve_forever's loop: never, if none ran
            self.httpd.shutdown()
        self.httpd.server_close()
        for path in self._launch_files:
            with contextlib.suppress(OSError):
                path.unlink()

    def cookie(self, what: str) -> str:
        """A cookie's name, with this server's port in it: browsers keep cookies per host,
        not per port, so two `kflab ui` servers on one machine would overwrite each other's
        (RFC 6265 section 8.5)."""
        return f"kflab_{what}_{self.port}"

    def allowed_hosts(self) -> set[str]:
        return {f"127.0.0.1:{self.port}", f"localhost:{self.port}"}

    def has_token(self, query: dict[str, str], headers: Any) -> bool:
        given = query.get("token") or ""
        auth = headers.get("Authorization") or ""
        if auth.startswith("Bearer "):
            given = given or auth[7:]
        given = given or cookie(headers, self.cookie("token")) or ""
        return bool(given) and hmac.compare_digest(given.encode(), self.token.encode())


class _Server(ThreadingHTTPServer):
    # a page opens several connections at once (and event streams): socketserver's backlog
    # of 5 is small for that on a busy machine (a "Failed to fetch" in a browser test)
    request_queue_size = 64

    def handle_error(self, request: Any, client_address: Any) -> None:
        """One line, not socketserver's traceback dump (a request cut off mid-way)."""
        exc = sys.exc_info()[1]
        if not isinstance(exc, (BrokenPipeError, ConnectionResetError, TimeoutError)):
            sys.stderr.write(f"kflab ui: a request from {client_address[0]} failed: "
                             f"{type(exc).__name__}: {str(exc)[:200]}\n")


def cookie(headers: Any, name: str) -> str | None:
    for part in (headers.get("Cookie") or "").split(";"):
        key, _, value = part.strip().partition("=")
        if key == name:
            return value
    return None


def _handler(ui: UiServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "kflab-ui"

        def log_message(self, format: str, *args: Any) -> None:
            pass  # quiet: the terminal shows the URL, not every poll

        # A client that stops sending (a body shorter than its Content-Length) frees its
        # thread after this many seconds instead of holding it forever.
        timeout = REQUEST_TIMEOUT

        def do_GET(self) -> None:
            self._guarded("GET")

        def do_POST(self) -> None:
            self._guarded("POST")

        def do_DELETE(self) -> None:
            self._guarded("DELETE")

        def _guarded(self, method: str) -> None:
            """Every request gets an answer: bad input a 4xx, a bug a 500 and one line on
            the terminal (never a traceback, never a connection dropped without a reply)."""
            from lab.errors import InputError, LabError

            try:
                self._serve(method)
            except (BrokenPipeError, ConnectionResetError, TimeoutError):
                return  # the client left
            except LabError as exc:  # bad input: 400; the state folder (a corrupt file): 500
                self._reply_error(400 if isinstance(exc, InputError) else 500,
                                  str(exc).splitlines()[0])
            except Exception as exc:
                where = urlsplit(self.path).path[:200]  # not the query: it may hold the token
                sys.stderr.write(f"kflab ui: {method} {where}: unexpected "
                                 f"{type(exc).__name__}: {str(exc)[:200]}\n")
                self._reply_error(500, f"unexpected {type(exc).__name__} (the terminal "
                                       "running `kflab ui` has the details)")

        def _reply_error(self, status: int, message: str) -> None:
            with contextlib.suppress(OSError):  # the client left
                self._json(status, {"code": 13 if status >= 500 else 3,
                                    "message": message, "details": []})

        def _length(self) -> int | None:
            """Content-Length as a number of bytes, or None when it is not one (a negative
            length would read until the client closes)."""
            raw = (self.headers.get("Content-Length") or "0").strip()
            return int(raw) if raw.isascii() and raw.isdigit() and len(raw) < 19 else None

        def _serve(self, method: str) -> None:
            parts = urlsplit(self.path)
            query = dict(parse_qsl(parts.query))
            origin = self.headers.get("Origin")
            if self.headers.get("Host") not in ui.allowed_hosts():
                return self._json(403, {"code": 7, "message": "unknown Host", "details": []})
            if origin is not None and origin not in {f"http://{h}"
                                                     for h in ui.allowed_hosts()}:
                return self._json(403, {"code": 7, "message": "cross-origin request refused",
                                        "details": []})
            token_ok = ui.has_token(query, self.headers)
            if parts.path == "/" and "code" in query and method == "GET":
                if ui.redeem(query["code"]):  # the launch file's one-time code: the cookie
                    return self._file(ui.static / "index.html", set_cookie=True)
                return self._send(403, b"403: this link works once and was used (or is "
                                       b"too old): open the URL that `kflab ui` printed\n",
                                  "text/plain; charset=utf-8")
            if parts.path.startswith(PREFIX + "/"):
                if ui.api is None:
                    return self._json(404, {"code": 5, "details": [], "message":
                                            "the KFP API here is the local backend's; on a "
                                            "cluster use KFP's own (kflab open pipelines)"})
                if (origin is not None or ui.api_token) and not token_ok:
                    return self._json(403, {"code": 7, "message": "token required",
                                            "details": []})
                size = self._length()
                if size is None:
                    return self._json(400, {"code": 3, "message": "Content-Length is not a "
                                            "number of bytes", "details": []})
                if size > MAX_BODY:
                    return self._json(413, {"code": 8, "message": "body over 32 MB",
                                            "details": []})
                body = self.rfile.read(size) if size else b""
                status, out = ui.api.handle(method, parts.path, query,
                                            self.headers.get("Content-Type") or "", body)
                return self._json(status, out)
            if not token_ok:
                if parts.path == "/" and method == "GET":  # a tab opened without the token
                    return self._send(403, REFUSED_PAGE, "text/html; charset=utf-8")
                return self._send(403, b"403: open the URL that `kflab ui` printed (it "
                                       b"carries the token)\n", "text/plain; charset=utf-8")
            if method == "POST" and parts.path.startswith("/ui-api/inferenceservices/") \
                    and parts.path.endswith("/predict"):
                return self._predict(parts.path, query, origin)
            if method != "GET":
                return self._json(405, {"message": "the UI is read-only"})
            if parts.path == "/ui-api/csrf":
                session = cookie(self.headers, ui.cookie("session"))
                if not session:
                    return self._json(403, {"message": "no session: open the URL that "
                                                       "`kflab ui` printed"})
                return self._json(200, {"csrf": tryit.csrf_for(ui.secret, session)})
            if parts.path == "/events":
                return self._events()
            if parts.path == "/":
                return self._file(ui.static / "index.html", set_cookie="token" in query)
            if parts.path.startswith("/static/"):
                name = parts.path[len("/static/"):]
                target = (ui.static / name).resolve()
                if ui.static.resolve() in target.parents and target.is_file():
                    return self._file(target)
                return self._send(404, b"not found\n", "text/plain")
            if parts.path.startswith("/ui-api/"):
                try:
                    found = views.answer(ui.backend, ui.api, parts.path[len("/ui-api/"):],
                                         ui.root, query)
                except views.NotFound as exc:
                    return self._json(404, {"message": str(exc)})
                if isinstance(found, views.Page):  # a component's HTML or Markdown: sandboxed
                    csp = ARTIFACT_CSP if found.scripts else MARKDOWN_CSP
                    extra = {"Content-Security-Policy": csp}
                    if found.download:  # an artifact's file: saved, never shown as a page
                        safe = "".join(c if c.isalnum() or c in "._-" else "_"
                                       for c in found.download)[:100] or "artifact"
                        extra["Content-Disposition"] = f'attachment; filename="{safe}"'
                    return self._send(200, found.body, found.ctype, extra)
                return self._json(200, found)
            return self._send(404, b"not found\n", "text/plain")

        def _predict(self, path: str, query: dict[str, str], origin: str | None) -> None:
            """The try-it form's request: the one write the UI accepts."""
            name = path[len("/ui-api/inferenceservices/"):-len("/predict")]
            if origin is None:  # a browser always sends Origin on a POST
                return self._json(403, {"message": "a POST needs an Origin header"})
            if not tryit.csrf_ok(ui.secret, cookie(self.headers, ui.cookie("session")),
                                 self.headers.get("X-Kflab-Csrf")):
                return self._json(403, {"message": "missing or wrong CSRF token: reload "
                                                   "the page"})
            if (self.headers.get("Content-Type") or "").split(";")[0] != "application/json":
                return self._json(415, {"message": "send application/json"})
            if ui.api is None:
                return self._json(404, {"message": "the try-it form is the local backend's; "
                                                   "on a cluster use `kflab predict`"})
            if "/" in name or not name:
                return self._json(404, {"message": "no such InferenceService"})
            size = self._length()
            if size is None:
                return self._json(400, {"message": "Content-Length is not a number of bytes"})
            if size > tryit.MAX_REQUEST:
                return self._json(413, {"message": "the request is over 1 MiB"})
            status, out = tryit.predict(ui.backend, name, self.rfile.read(size),
                                        query.get("protocol"))
            return self._json(status, out)

        def _events(self) -> None:
            """Server-sent events: `change` whenever the watched records change (the page
            then refetches its view), a comment every HEARTBEAT seconds otherwise."""
            if not ui.watcher.subscribe():
                return self._send(503, b"too many open pages\n", "text/plain",
                                  {"Retry-After": "10"})
            try:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-store")
                self.send_header("X-Content-Type-Options", "nosniff")
                self.send_header("Content-Security-Policy", CSP)
                self.end_headers()
                seen = ui.watcher.version
                self.wfile.write(f"retry: 2000\nevent: ready\ndata: {seen}\n\n".encode())
                self.wfile.flush()
                while True:
                    now = ui.watcher.wait(seen, HEARTBEAT)
                    if now < 0:
                        return  # the server stops
                    if now == seen:
                        self.wfile.write(b": keep-alive\n\n")
                    else:
                        seen = now
                        self.wfile.write(f"event: change\ndata: {now}\n\n".encode())
                    self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                return  # the page was closed
            finally:
                ui.watcher.unsubscribe()

        def _file(self, path: Path, set_cookie: bool = False) -> None:
            extra: dict[str, Any] = {}
            cookies = []
            if set_cookie:
                cookies.append(f"{ui.cookie('token')}={ui.token}; Path=/; HttpOnly; "
                               "SameSite=Strict")
            if path.name == "index.html" and not cookie(self.headers, ui.cookie("session")):
                # the page's session: the try-it form's CSRF token is bound to it
                cookies.append(f"{ui.cookie('session')}={secrets.token_urlsafe(18)}; Path=/; "
                               "HttpOnly; SameSite=Strict")
            if cookies:
                extra["Set-Cookie"] = cookies
            self._send(200, path.read_bytes(), TYPES.get(path.suffix, "text/plain"), extra)

        def _json(self, status: int, data: Any) -> None:
            self._send(status, json.dumps(data, default=str).encode(), "application/json")

        def _send(self, status: int, body: bytes, ctype: str,
                  extra: dict[str, Any] | None = None) -> None:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.send_header("X-Content-Type-Options", "nosniff")
            self.send_header("Referrer-Policy", "no-referrer")
            extra = dict(extra or {})
            self.send_header("Content-Security-Policy", extra.pop("Content-Security-Policy",
                                                                  CSP))
            for key, value in extra.items():
                for one in value if isinstance(value, list) else [value]:
                    self.send_header(key, one)
            self.end_headers()
            self.wfile.write(body)

    return Handler

"""Security headers, escaping and path traversal (issue 9, "headers").

The CSP must allow no inline or eval'd script; pages may be framed only by
their own origin and the origins an operator names; every response carries
nosniff and a referrer policy; template output is escaped; no route serves a
file outside static/ whatever the path's encoding.
"""

from __future__ import annotations

import asyncio
import re
from html.parser import HTMLParser
from urllib.parse import unquote, urlsplit

import pytest
from anyio.from_thread import start_blocking_portal
from fastapi.testclient import TestClient

from labs import LABS
from labs.base import Lab, TryStep
from web.app import create_app
from web.security import FRAME_ANCESTORS_ENV, parse_frame_ancestors

SLIDES = "https://slides.example.org"


def csp(response) -> dict[str, list[str]]:
    """The CSP header as {directive: [sources]}."""
    out = {}
    for part in response.headers["content-security-policy"].split(";"):
        name, *sources = part.split()
        out[name] = sources
    return out


@pytest.mark.parametrize("method, path, body", [
    ("GET", "/", None),
    ("GET", "/labs/roofline", None),
    ("GET", "/api/labs", None),
    ("POST", "/api/labs/roofline", {}),
    ("POST", "/api/labs/roofline", {"batch": 0}),  # 422
    ("GET", "/labs/no-such-lab", None),  # 404
    ("GET", "/static/css/lab.css", None),
    ("GET", "/vendor/plotly.min.js", None),
    ("GET", "/openapi.json", None),
    ("GET", "/healthz", None),
])
def test_every_response_carries_the_headers(client, method, path, body):
    r = client.request(method, path, json=body)
    assert r.headers["x-content-type-options"] == "nosniff"
    assert r.headers["referrer-policy"] == "no-referrer"
    assert r.headers["x-frame-options"] == "SAMEORIGIN"
    policy = csp(r)
    assert policy["script-src"] == ["'self'"]  # no 'unsafe-inline', no 'unsafe-eval', no CDN
    assert policy["default-src"] == ["'self'"]
    assert policy["object-src"] == ["'none'"]
    assert policy["base-uri"] == ["'none'"]
    assert policy["frame-ancestors"] == ["'self'"]
    assert "'unsafe-eval'" not in r.headers["content-security-policy"]


def test_refused_bodies_carry_the_headers_too(client):
    r = client.post("/api/labs/roofline", content=b"x" * 70_000, headers={"content-type": "application/json"})
    assert r.status_code == 413
    assert "script-src 'self'" in r.headers["content-security-policy"]


def test_frame_ancestors_are_configurable():
    with TestClient(create_app(frame_ancestors=[SLIDES])) as c:
        r = c.get("/labs/roofline")
    assert csp(r)["frame-ancestors"] == ["'self'", SLIDES]
    assert "x-frame-options" not in r.headers  # it cannot name another origin; CSP governs


def test_frame_ancestors_come_from_the_environment(monkeypatch):
    monkeypatch.setenv(FRAME_ANCESTORS_ENV, f"{SLIDES} https://lms.example.edu:8443")
    with TestClient(create_app()) as c:
        assert csp(c.get("/"))["frame-ancestors"] == ["'self'", SLIDES, "https://lms.example.edu:8443"]


@pytest.mark.parametrize("bad", [
    "https://x.org; script-src *",  # would inject a directive
    "'unsafe-inline'", "*", "javascript:alert(1)", "https://x.org/path", "ftp://x.org", "https://x.org\r\nX-A: b",
])
def test_frame_ancestors_must_be_origins(bad):
    with pytest.raises(ValueError, match="not an origin"):
        parse_frame_ancestors(bad)
    with pytest.raises(ValueError):
        create_app(frame_ancestors=[bad])


class _Scripts(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.scripts: list[tuple[dict, str]] = []
        self.handlers: list[str] = []
        self._open: dict | None = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.handlers += [f"{tag} {name}" for name in attrs if name.startswith("on")]
        if tag == "script":
            self._open = attrs
            self.scripts.append((attrs, ""))

    def handle_data(self, data):
        if self._open is not None:
            attrs, text = self.scripts[-1]
            self.scripts[-1] = (attrs, text + data)

    def handle_endtag(self, tag):
        if tag == "script":
            self._open = None


@pytest.mark.parametrize("path", ["/", *[f"/labs/{slug}" for slug in LABS]])
def test_pages_have_no_inline_script(client, path):
    """Every script is a same-origin file, or a JSON data block (never run); no on* handlers."""
    parser = _Scripts()
    parser.feed(client.get(path).text)
    if path != "/":
        assert parser.scripts, "a lab page without scripts: did the page change?"
    for attrs, text in parser.scripts:
        if "src" in attrs:
            assert urlsplit(attrs["src"]).netloc in ("", "testserver"), attrs  # this origin only
            assert not text.strip()
        else:
            assert attrs.get("type") == "application/json", attrs
    assert parser.handlers == []


HOSTILE = "</script><script>alert(1)</script><img src=x onerror=alert(2)>"


def test_template_output_is_escaped(client, monkeypatch):
    """Text reaching a page (titles, summaries, try-this steps) is escaped, in HTML and in the JSON block."""
    base = LABS["roofline"]
    evil = Lab(slug="evil", title=HOSTILE, order=99, summary=HOSTILE, params=base.params, run=base.run,
               what_you_see=(HOSTILE,), try_this=(TryStep(HOSTILE, HOSTILE, {"batch": 2}),),
               misconceptions=((HOSTILE, HOSTILE),))
    monkeypatch.setitem(LABS, "evil", evil)
    html = client.get("/labs/evil").text
    assert "<script>alert(1)" not in html
    assert "<img src=x" not in html
    assert "&lt;/script&gt;" in html or "\\u003c/script\\u003e" in html


def test_unknown_lab_is_json_not_html(client):
    r = client.get("/labs/%3Cscript%3Ealert(1)%3C%2Fscript%3E")
    assert r.status_code == 404
    assert r.headers["content-type"].startswith("application/json")


def _raw_get(app, raw_path: bytes) -> tuple[int, bytes]:
    """GET ``raw_path`` exactly as a server would pass it (path = percent-decoded raw path)."""
    sent = {"status": 0, "body": b""}
    requested = False
    done = asyncio.Event()

    async def receive():
        nonlocal requested
        if not requested:
            requested = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await done.wait()  # as a server does: the client disconnects once the answer is complete
        return {"type": "http.disconnect"}

    async def send(message):
        if message["type"] == "http.response.start":
            sent["status"] = message["status"]
        elif message["type"] == "http.response.body":
            sent["body"] += message.get("body", b"")
            if not message.get("more_body", False):
                done.set()

    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET", "scheme": "http",
        "path": unquote(raw_path.decode("latin-1")), "raw_path": raw_path, "root_path": "", "query_string": b"",
        "headers": [(b"host", b"testserver")], "client": ("127.0.0.1", 1), "server": ("testserver", 80),
    }
    with start_blocking_portal() as portal:  # its own loop: the browser tests' Playwright may hold this thread's
        portal.call(app, scope, receive, send)
    return sent["status"], sent["body"]


TRAVERSALS = [
    b"/static/../web/app.py", b"/static/%2e%2e/web/app.py", b"/static/..%2fweb%2fapp.py",
    b"/static/%2e%2e%2f%2e%2e%2fetc%2fpasswd", b"/static/....//web/app.py", b"/static//etc/passwd",
    b"/static/%2fetc%2fpasswd", b"/static/css/..%5c..%5cweb%5capp.py", b"/static/css/../../web/app.py",
    b"/labs/..%2f..%2fweb%2fapp.py", b"/vendor/..%2f..%2fweb%2fapp.py", b"/static/%00../web/app.py",
    b"/static/css/lab.css%00.py", b"/static/../../../../../../etc/passwd",
]


@pytest.mark.parametrize("raw_path", TRAVERSALS, ids=lambda p: p.decode())
def test_no_path_traversal(raw_path):
    app = create_app()
    status, body = _raw_get(app, raw_path)
    assert status in (400, 404, 405), (status, body[:200])
    assert b"def create_app" not in body and b"root:" not in body


def test_static_files_are_still_served():
    """The traversal test above is not vacuous: the same harness reads a real static file."""
    status, body = _raw_get(create_app(), b"/static/css/lab.css")
    assert status == 200 and re.search(rb"[{}]", body)


def test_an_unexpected_error_still_carries_the_security_headers():
    """A bug that raises inside a route answers 500 with the same headers as every other response."""
    from fastapi.testclient import TestClient

    from web.app import create_app

    app = create_app()

    @app.get("/boom")
    def boom():
        raise RuntimeError("a bug")

    with TestClient(app, raise_server_exceptions=False) as client:
        r = client.get("/boom")
    assert r.status_code == 500
    assert r.json() == {"detail": "internal server error"}
    assert "script-src 'self'" in r.headers["content-security-policy"]
    assert r.headers["x-content-type-options"] == "nosniff"

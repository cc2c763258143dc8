"""Security headers on every response: CSP, nosniff, referrer policy, framing.

The Content-Security-Policy allows scripts from this origin only: the pages
load plotly.js (/vendor) and static/js, and carry their data in a
``<script type="application/json">`` block, which is data and never run.
Framing is allowed to this origin and to the origins an operator names
(``pdlab serve --frame-ancestor https://slides.example.org``), so an
instructor can embed a lab in web slides and nobody else can clickjack it.
"""

from __future__ import annotations

import re

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

FRAME_ANCESTORS_ENV = "PDLAB_FRAME_ANCESTORS"  # set by `pdlab serve --frame-ancestor`, read by create_app
_ORIGIN = re.compile(r"^https?://(\*\.)?[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*(:[0-9]{1,5})?$")


def parse_frame_ancestors(value: str) -> list[str]:
    """Origins (space-separated) allowed to frame the pages, besides this one.

    Raises:
        ValueError: an entry is not a bare ``http(s)://host[:port]`` origin; a
            ``;`` or quote would let it inject other CSP directives.
    """
    origins = value.split()
    for origin in origins:
        if not _ORIGIN.match(origin):
            raise ValueError(f"frame ancestor {origin!r} is not an origin like https://slides.example.org")
    return origins


def content_security_policy(frame_ancestors: list[str]) -> str:
    """The CSP header value; ``frame_ancestors`` are extra origins allowed to embed the pages."""
    return "; ".join([
        "default-src 'self'",
        "script-src 'self'",
        # plotly.js writes its own <style> rules at run time (addRelatedStyleRule; plotly.js #2355, and strict
        # CSP regressed again in #7543): under style-src 'self' Chromium blocks them on every lab page
        # ("Applying inline style violates ... style-src 'self'", plotly: "Cannot addRelatedStyleRule,
        # probably due to strict CSP") and the modebar and hover labels lose their styling. Inline styles
        # cannot run code; scripts stay strict. tests/browser/ fail on any CSP violation (console errors).
        "style-src 'self' 'unsafe-inline'",
        "img-src 'self' data: blob:",  # plotly's "download plot as PNG" goes through data: and blob: URLs
        "font-src 'self'",
        "connect-src 'self'",
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors " + " ".join(["'self'", *frame_ancestors]),
    ])


class SecurityHeadersMiddleware:
    """ASGI middleware adding the security headers to every HTTP response.

    A header a route already set wins (``setdefault``), so a route may relax
    one on purpose.

    Args:
        frame_ancestors: extra origins allowed to frame the pages.

    Raises:
        ValueError: see :func:`parse_frame_ancestors`.
    """

    def __init__(self, app: ASGIApp, frame_ancestors: list[str]) -> None:
        self.app = app
        parse_frame_ancestors(" ".join(frame_ancestors))
        self.headers = {
            "content-security-policy": content_security_policy(frame_ancestors),
            "x-content-type-options": "nosniff",
            "referrer-policy": "no-referrer",
            "cross-origin-opener-policy": "same-origin",
            "cross-origin-resource-policy": "same-origin",
        }
        if not frame_ancestors:
            # For browsers without CSP level 2; it cannot express a list of origins, so only when there is none.
            self.headers["x-frame-options"] = "SAMEORIGIN"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        started = False

        async def send_with_headers(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                headers = MutableHeaders(scope=message)
                for name, value in self.headers.items():
                    headers.setdefault(name, value)
            await send(message)

        try:
            await self.app(scope, receive, send_with_headers)
        except Exception:
            # Starlette's own 500 is sent from outside every middleware, without these headers:
            # answer here instead, then re-raise so the server still logs the error.
            if not started:
                await send_with_headers({"type": "http.response.start", "status": 500,
                                         "headers": [(b"content-type", b"application/json")]})
                await send({"type": "http.response.body", "body": b'{"detail":"internal server error"}'})
            raise

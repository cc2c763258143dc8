"""Helpers browser tests share: serving the app, waiting for a re-render, setting a control."""

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import uvicorn

from web.app import create_app


@contextmanager
def serve() -> Iterator[str]:
    """The app on a free loopback port, in a background thread; yields its base URL.

    Raises:
        RuntimeError: uvicorn did not start within 30 s.
    """
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(create_app(), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def wait_for_render(page, previous: int, timeout_ms: int = 15000) -> int:
    """Wait until the figures re-rendered after ``previous`` renders; return the new count."""
    page.wait_for_function(
        "n => Number(document.getElementById('figures').dataset.renderCount || 0) > n",
        arg=previous, timeout=timeout_ms,
    )
    return int(page.eval_on_selector("#figures", "el => el.dataset.renderCount"))


def render_count(page) -> int:
    """How many times the figures have rendered so far."""
    return int(page.eval_on_selector("#figures", "el => el.dataset.renderCount || 0"))


def set_control(page, name: str, value) -> None:
    """Type a value into a control's number box (or pick it in its select) as a user would."""
    locator = page.locator(f"#in-{name}")
    if locator.evaluate("el => el.tagName") == "SELECT":
        locator.select_option(str(value))
    else:
        locator.fill(str(value))
        locator.dispatch_event("input")


def record(page, log) -> None:
    """Send a page's requests and console errors to ``log`` (a conftest ``PageLog``)."""
    page.on("request", lambda r: log.requests.append(r.url))
    page.on("console", lambda m: log.console_errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: log.console_errors.append(str(e)))

"""Browser-test fixtures: the app on a free loopback port, driven by Debian's Chromium.

Playwright's own browser download cannot run here (no internet), so the
tests launch /usr/bin/chromium (Debian's package; .ci/run installs it) with
the flags that keep it from reaching the network. Every request the page
makes is recorded so tests can check that none left the server's origin.
Screenshots land in test-artifacts/ (kept by CI as artifacts).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

playwright_sync = pytest.importorskip("playwright.sync_api")

from tests.browser.ui import record, serve  # noqa: E402 (after the skip when playwright is missing)

CHROMIUM = os.environ.get("PDLAB_CHROMIUM", "/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
    "--disable-sync", "--no-first-run", "--disable-quic", "--enable-unsafe-swiftshader",
]


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/browser" in str(item.fspath):
            item.add_marker(pytest.mark.browser)


@pytest.fixture(scope="session")
def live_server() -> str:
    """Base URL of the app served by uvicorn in a background thread."""
    with serve() as url:
        yield url


@pytest.fixture(scope="session")
def browser():
    """One headless Chromium for the session."""
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} is missing: apt-get install -y chromium")
    with playwright_sync.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


class PageLog:
    """What a page did: every request URL and every console error."""

    def __init__(self) -> None:
        self.requests: list[str] = []
        self.console_errors: list[str] = []


@pytest.fixture
def page_log() -> PageLog:
    return PageLog()


@pytest.fixture
def page(browser, page_log, request):
    """A fresh 1280x720 page; screenshot kept in test-artifacts/ after the test."""
    context = browser.new_context(viewport={"width": 1280, "height": 720})
    page = context.new_page()
    record(page, page_log)
    yield page
    ARTIFACTS.mkdir(exist_ok=True)
    try:
        page.screenshot(path=ARTIFACTS / f"{request.node.name}.png", full_page=True)
    finally:
        context.close()

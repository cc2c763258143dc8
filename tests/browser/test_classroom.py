"""Teaching with the labs, in a real browser: the index's request path and
misconceptions, links, keyboard-only use, labels and focus, contrast, reduced
motion, phones, and staying on the server's origin (halls often have no internet).

The roofline lab stands in for all labs where one is enough; test_every_lab.py
runs the per-lab checks on every installed lab.
"""

from __future__ import annotations

from urllib.parse import parse_qs, urlparse

import pytest

from labs import LABS
from labs.base import params_schema
from tests.browser.lab_page import (  # noqa: F401  (shared_context and tab are fixtures)
    contrast_failures, figures_json, foreign_requests, open_lab, shared_context, status_of, tab, wait_settled,
)
from tests.browser.ui import render_count, wait_for_render

STAGES = ["Tokenise", "Queue", "Prefill", "Decode loop", "Stream tokens", "Free or keep the blocks"]
# The misconceptions of shared/seeds/003 (one row each on the index).
MYTHS = ["lacks compute", "bigger batch", "O(n²)", "GQA", "queries and attention scores", "FlashAttention",
         "Speculative decoding", "prefix cache", "128k"]

pytestmark = pytest.mark.skipif("roofline" not in LABS, reason="the roofline lab is the classroom tests' subject")


def assert_clean(page_log, base: str) -> None:
    assert page_log.console_errors == []
    assert foreign_requests(page_log, base) == []


def test_index_shows_the_request_path_and_misconceptions_linked_to_labs(live_server, tab, page_log):
    page = tab
    page.goto(live_server)
    stages = page.locator("ol.path > li")
    assert [stages.nth(i).locator("h3").inner_text() for i in range(stages.count())] == STAGES
    for i in range(stages.count()):
        # Each stage links to the lab that shows it (or says that lab is not installed).
        assert stages.nth(i).locator("a[href^='/labs/'], .muted").count() >= 1, STAGES[i]
    rows = page.locator("table.myth-table tbody tr")
    assert rows.count() == len(MYTHS)
    for i, myth in enumerate(MYTHS):
        row = rows.nth(i)
        assert myth.lower() in row.locator("td").first.inner_text().lower()
        assert row.locator("td").nth(1).inner_text().strip()
        assert row.locator("td").nth(2).locator("a[href^='/labs/'], .muted").count() == 1

    # Every lab link opens an installed lab in a state its params accept.
    hrefs = page.eval_on_selector_all("a[href^='/labs/']", "els => els.map(a => a.getAttribute('href'))")
    assert any(h.startswith("/labs/roofline") for h in hrefs)
    for href in set(hrefs):
        url = urlparse(href)
        slug = url.path.removeprefix("/labs/")
        assert slug in LABS, href
        schema = {p["name"]: p for p in params_schema(LABS[slug].params)}
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        assert set(query) <= set(schema), href
        body = {k: (int(v) if schema[k]["type"] == "integer" else v) for k, v in query.items()}
        assert status_of(f"{live_server}/api/labs/{slug}", body) == 200, href
        assert status_of(f"{live_server}{href}") == 200, href
    assert contrast_failures(page) == []
    assert_clean(page_log, live_server)


def test_api_docs_fetch_nothing_from_another_origin(live_server, tab, page_log):
    """FastAPI's /docs and /redoc pull Swagger UI / ReDoc from a CDN: they must be dropped or served locally."""
    for path in ("/docs", "/redoc"):
        if status_of(live_server + path) == 200:
            tab.goto(live_server + path)
            tab.wait_for_load_state("networkidle")
    assert status_of(live_server + "/openapi.json") == 200
    assert_clean(page_log, live_server)


def test_keyboard_only_with_labels_visible_focus_and_contrast(live_server, tab, page_log):
    """Skip link; Tab reaches every tool and control, each with a name and a visible focus ring; arrow keys
    move a slider; the guided tour and presentation mode work without a mouse. Every control has a label
    and all text (data tables included) has 4.5:1 contrast."""
    page = tab
    count = open_lab(page, live_server, "roofline")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.className") == "skip"
    page.keyboard.press("Enter")
    assert page.evaluate("document.activeElement.id") == "main"

    visited = []
    for _ in range(60):
        page.keyboard.press("Tab")
        info = page.evaluate(
            """() => {
                const el = document.activeElement;
                const cs = getComputedStyle(el);
                const label = (el.labels && el.labels.length ? el.labels[0].textContent : '')
                    || el.getAttribute('aria-label') || el.textContent || el.title;
                return { id: el.id, tag: el.tagName, name: (label || '').trim(),
                         outline: cs.outlineStyle !== 'none' && parseFloat(cs.outlineWidth) >= 2 };
            }"""
        )
        visited.append(info)
        assert info["name"], f"focusable element without a label: {info}"
        assert info["outline"], f"no visible focus on {info}"
        if info["id"] == "range-batch":
            break
    ids = [v["id"] for v in visited]
    for control in ("copy-link", "present-toggle", "tour-start", "reset", "download-csv", "in-gpu", "in-model",
                    "range-batch"):
        assert control in ids, f"{control} is not reachable with Tab: {ids}"

    page.keyboard.press("ArrowRight")  # the log slider's next 1-2-5 value: 1 -> 2
    count = wait_settled(page, count)
    assert page.locator("#in-batch").input_value() == "2"
    page.keyboard.press("End")
    count = wait_settled(page, count)
    assert page.locator("#in-batch").input_value() == "1024"

    page.locator("#tour-start").focus()
    page.keyboard.press("Enter")
    count = wait_settled(page, count)
    assert page.evaluate("document.activeElement.id") == "tour-next"
    page.keyboard.press("Enter")
    count = wait_settled(page, count)
    assert "step 2 of" in page.locator("#tour-progress").inner_text()
    assert page.locator("#in-history_tokens").input_value() == "200"
    page.keyboard.press("Escape")
    assert page.locator("#tour").is_hidden()
    assert page.evaluate("document.activeElement.id") == "tour-start"

    page.keyboard.press("Shift+Tab")
    assert page.evaluate("document.activeElement.id") == "present-toggle"
    page.keyboard.press("Space")
    count = wait_for_render(page, count)
    assert page.evaluate("document.body.classList.contains('present')")
    page.keyboard.press("Space")
    wait_for_render(page, count)

    page.locator("#share > summary").click()
    page.locator(".chart details.data > summary").first.click()
    page.locator(".chart details.data table").first.wait_for()
    unnamed = page.evaluate(
        """() => [...document.querySelectorAll('input, select, textarea, button, summary, a[href]')]
              .filter(el => el.getClientRects().length)
              .filter(el => !((el.labels && el.labels.length && el.labels[0].textContent.trim())
                              || el.getAttribute('aria-label') || el.getAttribute('aria-labelledby')
                              || el.textContent.trim() || el.title))
              .map(el => el.outerHTML.slice(0, 80))"""
    )
    assert unnamed == []
    assert contrast_failures(page) == []
    assert_clean(page_log, live_server)


def test_presentation_mode_keeps_the_numbers_and_fits_a_1280x720_projector(live_server, tab, page_log):
    """The Presentation button restyles what is drawn, never the numbers; the first figure with its axis
    labels is on screen without scrolling; text keeps its contrast."""
    page = tab
    count = open_lab(page, live_server, "roofline", "batch=32")
    before = figures_json(page)
    page.locator("#present-toggle").click()
    wait_for_render(page, count)
    assert parse_qs(urlparse(page.url).query) == {"batch": ["32"], "present": ["1"]}
    assert figures_json(page) == before
    assert page.evaluate("document.getElementById('fig-roofline')._fullLayout.xaxis.tickfont.size") >= 20
    box = page.locator("#fig-roofline").bounding_box()
    assert box["y"] >= 0 and box["y"] + box["height"] <= 720
    assert box["width"] >= 800
    assert contrast_failures(page) == []
    assert_clean(page_log, live_server)


def test_reduced_motion_is_honoured(live_server, tab, page_log):
    page = tab
    open_lab(page, live_server, "roofline")
    duration = "getComputedStyle(document.getElementById('reset')).transitionDuration"
    assert page.evaluate(duration) != "0s"
    page.emulate_media(reduced_motion="reduce")
    assert page.evaluate(duration) == "0s"
    page.locator("#tour-start").click()  # scrolls the tour into view without smooth scrolling
    assert page.locator("#tour").is_visible()
    assert_clean(page_log, live_server)


def test_hide_controls_by_link_and_by_link_options(live_server, tab, page_log):
    page = tab
    count = open_lab(page, live_server, "roofline", "hide=tp,profile&batch=8")
    assert page.locator(".control[data-param='tp']").is_hidden()
    assert page.locator(".control[data-param='profile']").is_hidden()
    assert page.locator(".control[data-param='batch']").is_visible()
    assert page.locator("#in-batch").input_value() == "8"
    page.locator("#share > summary").click()
    assert page.locator("#hide-tp").is_checked()
    page.locator("#hide-tp").uncheck()
    assert page.locator(".control[data-param='tp']").is_visible()
    assert parse_qs(urlparse(page.url).query)["hide"] == ["profile"]
    assert page.locator("#share-url").input_value() == page.url
    embed = page.locator("#embed-code").input_value()
    assert embed.startswith("<iframe") and "embed=1" in embed and "batch=8" in embed
    assert render_count(page) == count  # hiding a control redraws nothing
    assert_clean(page_log, live_server)


def test_copy_link_puts_this_state_on_the_clipboard(live_server, tab, page_log):
    page = tab
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    count = open_lab(page, live_server, "roofline", "batch=64")
    page.locator("#range-history_tokens").press("PageDown")  # 2,000 / 10
    wait_settled(page, count)
    page.locator("#copy-link").click()
    page.wait_for_function("() => document.getElementById('share-status').textContent.includes('copied')")
    copied = page.evaluate("navigator.clipboard.readText()")
    assert copied == page.url
    assert parse_qs(urlparse(copied).query) == {"batch": ["64"], "history_tokens": ["200"]}
    assert_clean(page_log, live_server)


def test_tour_from_a_link_and_from_a_try_this_button(live_server, tab, page_log):
    """A link with tour=2 shows step 2 and keeps the link's state; a "Try this" button opens the tour at
    its own step and sets that step's controls."""
    page = tab
    count = open_lab(page, live_server, "roofline", "batch=256&history_tokens=200&tour=2")
    assert page.locator("#tour").is_visible()
    assert page.locator("#tour-title").inner_text() == LABS["roofline"].try_this[1].title
    assert page.locator("#in-batch").input_value() == "256"
    assert page.locator("#in-history_tokens").input_value() == "200"
    page.locator(".try-step").nth(2).click()
    wait_settled(page, count)
    assert "step 3 of" in page.locator("#tour-progress").inner_text()
    assert page.locator("#in-batch").input_value() == "1024"
    assert page.locator("#in-history_tokens").input_value() == "2000"
    assert "Does not fit" in page.locator("#notes").inner_text()
    assert parse_qs(urlparse(page.url).query)["tour"] == ["3"]
    assert_clean(page_log, live_server)


def test_phone_layout_has_no_sideways_scroll(live_server, browser):
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    page = context.new_page()
    try:
        count = open_lab(page, live_server, "roofline")
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
        page.locator("#in-batch").fill("16")
        page.locator("#in-batch").dispatch_event("input")
        wait_settled(page, count)
        assert page.locator("#fig-roofline .main-svg").first.is_visible()
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    finally:
        context.close()

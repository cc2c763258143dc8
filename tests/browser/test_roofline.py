"""The roofline page in a real browser: load, move the batch, stay on our origin."""

from __future__ import annotations

from urllib.parse import urlparse

from tests.browser.ui import render_count, set_control, wait_for_render


def decode_x(page) -> float:
    """x (FLOP/byte) of the decode point, read from the drawn figure."""
    return page.evaluate(
        """() => {
            const gd = document.getElementById('fig-roofline');
            const trace = gd.data.find(t => t.name.startsWith('decode (batch'));
            return trace.x[0];
        }"""
    )


def test_batch_1_to_256_moves_decode_point_right(live_server, page, page_log):
    page.goto(f"{live_server}/labs/roofline?batch=1")
    first = wait_for_render(page, 0)
    x_batch_1 = decode_x(page)

    set_control(page, "batch", 256)
    wait_for_render(page, first)
    x_batch_256 = decode_x(page)

    assert x_batch_256 > 10 * x_batch_1
    assert "batch=256" in page.url
    assert page_log.console_errors == []
    origin = urlparse(live_server).netloc
    foreign = [u for u in page_log.requests if urlparse(u).netloc not in (origin, "")]
    assert foreign == []


def test_memory_warning_past_the_limit(live_server, page):
    page.goto(f"{live_server}/labs/roofline?batch=1024&history_tokens=2000")
    wait_for_render(page, 0)
    assert "Does not fit" in page.locator("#notes").inner_text()
    assert page.locator('td[data-metric="memory.fits"]').inner_text() == "no"


def test_try_this_button_sets_controls(live_server, page):
    page.goto(f"{live_server}/labs/roofline")
    first = wait_for_render(page, 0)
    page.get_by_role("button", name="Cut history to 200").click()
    wait_for_render(page, first)
    assert page.locator("#in-history_tokens").input_value() == "200"
    assert page.locator("#in-batch").input_value() == "256"
    assert render_count(page) >= 2


def test_bad_value_shows_field_error(live_server, page):
    page.goto(f"{live_server}/labs/roofline")
    wait_for_render(page, 0)
    set_control(page, "batch", 0)
    page.wait_for_function("() => document.getElementById('err-batch').textContent.length > 0")
    assert "greater than or equal to 1" in page.locator("#err-batch").inner_text()

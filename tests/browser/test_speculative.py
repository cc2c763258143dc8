"""The speculative-decoding page in a real browser: moving alpha and k moves the right markers."""

from __future__ import annotations

import pytest

from tests.browser.ui import render_count, set_control, wait_for_render

pytestmark = pytest.mark.browser

# Llama-3.1-70B on four H100s with Llama-3.2-1B drafting: c ~ 0.06, best k 5 at alpha 0.7, 2 at 0.4.
START = "model=llama-3.1-70b&tp=4&acceptance_rate=0.7&draft_tokens=3"


def marker_x(page, prefix: str) -> int:
    """x of the speed-up figure's trace whose name starts with ``prefix``, as drawn."""
    return page.evaluate(
        """prefix => document.getElementById('fig-speedup').data.find(t => t.name.startsWith(prefix)).x[0]""",
        prefix,
    )


def metric(page, key: str) -> float:
    return float(page.locator(f'td[data-metric="{key}"]').inner_text().replace(",", ""))


def test_alpha_moves_the_best_k_marker_and_k_moves_only_yours(live_server, page):
    page.goto(f"{live_server}/labs/speculative?{START}")
    n = wait_for_render(page, 0)
    best_at_07 = marker_x(page, "best k")
    assert best_at_07 in (5, 6)
    assert marker_x(page, "your k") == 3

    set_control(page, "acceptance_rate", 0.4)
    n = wait_for_render(page, n)
    best_at_04 = marker_x(page, "best k")
    assert best_at_04 < best_at_07
    assert metric(page, "best_k") == best_at_04

    set_control(page, "draft_tokens", 8)
    n = wait_for_render(page, n)
    assert marker_x(page, "your k") == 8
    assert marker_x(page, "best k") == best_at_04  # the best k does not depend on the k you chose
    assert metric(page, "speedup") < metric(page, "best_speedup")

    set_control(page, "acceptance_rate", 0.9)
    wait_for_render(page, n)
    assert marker_x(page, "best k") > best_at_07
    assert "acceptance_rate=0.9" in page.url


def test_raise_the_batch_button_drops_speedup_below_one(live_server, page):
    page.goto(f"{live_server}/labs/speculative")
    first = wait_for_render(page, 0)
    page.get_by_role("button", name="Raise the batch to 256").click()
    wait_for_render(page, first)
    assert page.locator("#in-batch").input_value() == "256"
    assert metric(page, "speedup") < 1
    assert render_count(page) >= 2


def test_a_draft_that_cannot_serve_the_target_is_named(live_server, page):
    page.goto(f"{live_server}/labs/speculative")
    wait_for_render(page, 0)
    set_control(page, "draft_model", "llama-3.1-8b")
    page.wait_for_function("() => document.getElementById('err-draft_model').textContent.length > 0")
    assert "allowed drafts: llama-3.2-1b, llama-3.2-3b" in page.locator("#err-draft_model").inner_text()

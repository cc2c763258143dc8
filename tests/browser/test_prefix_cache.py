"""The prefix-cache page in a real browser: the saving appears, and vanishes under round-robin."""

from __future__ import annotations

import pytest

from tests.browser.ui import set_control, wait_for_render

pytestmark = pytest.mark.browser


def bars(page, figure: str) -> list[float]:
    """y of the first trace of a figure, as drawn (TTFT: miss, hit, mean)."""
    return page.evaluate(f"() => document.getElementById('fig-{figure}').data[0].y")


def metric(page, key: str) -> str:
    return page.locator(f'td[data-metric="{key}"]').inner_text()


def test_preset_hit_rate_and_replicas_move_the_figures(live_server, page, page_log):
    page.goto(f"{live_server}/labs/prefix-cache")
    n = wait_for_render(page, 0)
    chat = bars(page, "ttft")

    set_control(page, "preset", "coding-agent")
    n = wait_for_render(page, n)
    miss, hit, mean = bars(page, "ttft")
    assert miss > 10 * chat[0]  # a 39k-token prompt instead of 1.6k
    assert hit < 0.1 * miss

    set_control(page, "hit_rate", 0.1)
    n = wait_for_render(page, n)
    _, _, mean_at_10 = bars(page, "ttft")
    assert mean_at_10 > 0.85 * miss
    assert "hit_rate=0.1" in page.url
    assert metric(page, "hit_rate_source") == "what-if"

    set_control(page, "hit_rate", "")  # back to the simulated rate
    n = wait_for_render(page, n)
    assert "hit_rate" not in page.url
    assert metric(page, "hit_rate_source") == "simulated"

    set_control(page, "replicas", 8)
    n = wait_for_render(page, n)
    replicas_drawn = page.evaluate("() => document.getElementById('fig-occupancy').data[0].x.length")
    assert replicas_drawn == 8
    rr = float(metric(page, "simulated.hit_rate"))
    set_control(page, "routing", "cache-aware")
    wait_for_render(page, n)
    assert float(metric(page, "simulated.hit_rate")) > rr + 0.5
    assert page_log.console_errors == []


def test_try_this_shared_part_zero_makes_hit_and_miss_equal(live_server, page):
    page.goto(f"{live_server}/labs/prefix-cache")
    n = wait_for_render(page, 0)
    page.get_by_role("button", name="Set the shared part to 0").click()
    wait_for_render(page, n)
    assert page.locator("#in-shared_tokens").input_value() == "0"
    miss, hit, mean = bars(page, "ttft")
    assert miss == hit == mean
    assert metric(page, "prefill_tokens_saved_fraction") == "0"

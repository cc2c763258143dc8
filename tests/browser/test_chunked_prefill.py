"""The chunked-prefill page in Chromium: drag the prompt and chunk sliders, the lanes re-render as they should."""

from __future__ import annotations

import pytest

from tests.browser.ui import render_count, wait_for_render

pytestmark = pytest.mark.browser

# Log sliders map position 0..1000 to min..max in log space: chunk 64..16,384 is 64 x 4^4, so positions 250 and
# 875 are exactly 256 and 8,192; prompt 256..131,072: position 774 is 10^(2.408 + 0.774 x 2.709) ~ 32,000.
CHUNK_256, CHUNK_8192, PROMPT_32K = "250", "875", "774"


def lanes(page) -> dict:
    """The drawn figure's first-token star x (ms) per lane, and the metrics table's chunked-lane stall."""
    return page.evaluate(
        """() => {
            const gd = document.getElementById('fig-timeline');
            const stars = gd.data.filter(t => t.name === 'first token').map(t => t.x[0]);
            const metric = k => Number(document.querySelector(`td[data-metric="${k}"]`).textContent.replace(/,/g, ''));
            return {stars, chunkedStall: metric('lanes.chunked.max_stall_ms'),
                    chunkedSteps: metric('lanes.chunked.steps'),
                    noChunkStall: metric('lanes.no_chunking.max_stall_ms')};
        }"""
    )


def drag(page, name: str, position: str) -> None:
    """Move a slider as a drag does: set its position and fire the input event."""
    page.locator(f"#range-{name}").fill(position)


def test_prompt_and_chunk_sliders_redraw_the_lanes(live_server, page, page_log):
    page.goto(f"{live_server}/labs/chunked-prefill")
    n = wait_for_render(page, 0)
    start = lanes(page)
    assert len(start["stars"]) == 3

    drag(page, "prompt_tokens", PROMPT_32K)
    n = wait_for_render(page, n)
    prompt = int(page.locator("#in-prompt_tokens").input_value())
    assert 31_000 < prompt < 33_000
    longer = lanes(page)
    # 4x the prompt: the one-step prefill (and so the freeze) grows more than 4x; more chunks at 512.
    assert longer["stars"][0] > 4 * start["stars"][0]
    assert longer["noChunkStall"] > 4 * start["noChunkStall"]
    assert longer["chunkedSteps"] == -(-prompt // 512)

    drag(page, "chunk_tokens", CHUNK_256)
    n = wait_for_render(page, n)
    assert page.locator("#in-chunk_tokens").input_value() == "256"
    small = lanes(page)
    drag(page, "chunk_tokens", CHUNK_8192)
    wait_for_render(page, n)
    assert page.locator("#in-chunk_tokens").input_value() == "8192"
    big = lanes(page)
    # Big chunks: the newcomer's first token comes sooner, everyone else stalls longer; other lanes unchanged.
    assert big["stars"][1] < small["stars"][1]
    assert big["chunkedStall"] > 5 * small["chunkedStall"]
    assert big["chunkedSteps"] == -(-prompt // 8192) < small["chunkedSteps"] == -(-prompt // 256)
    for lane in (0, 2):  # equal up to the figure's rounding (1/20,000 of the window, which changed)
        assert big["stars"][lane] == pytest.approx(small["stars"][lane], rel=1e-3)
    assert "chunk_tokens=8192" in page.url
    assert page_log.console_errors == []


def test_try_this_button_sets_prompt_and_chunk(live_server, page):
    page.goto(f"{live_server}/labs/chunked-prefill")
    first = wait_for_render(page, 0)
    page.get_by_role("button", name="Prompt 32,000: freeze vs chunks").click()
    wait_for_render(page, first)
    assert page.locator("#in-prompt_tokens").input_value() == "32000"
    assert page.locator("#in-chunk_tokens").input_value() == "256"
    assert render_count(page) >= 2
    state = lanes(page)
    assert state["noChunkStall"] >= 20 * state["chunkedStall"]

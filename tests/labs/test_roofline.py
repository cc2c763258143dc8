"""Roofline lab: the lab card's three experiments, on Llama-3.1-8B and an H100 SXM."""

import plotly.graph_objects as go
import pytest

from labs import run_lab


def metrics(**params):
    return run_lab("roofline", params)[1].metrics


def test_batch_1_decode_is_memory_bound_near_one_flop_per_byte():
    """Batch 1 reads ~16 GB of weights + 0.26 GB of KV for ~16 GFLOP: ~1 FLOP/byte."""
    m = metrics(batch=1, history_tokens=2000)
    assert 0.8 < m["decode"]["flop_per_byte"] < 1.3
    assert m["decode"]["bound"] == "memory"


def test_short_history_lets_the_same_batch_climb_several_times_higher():
    """Batch 256: 200 tokens of history vs 2,000. KV bytes per sequence fall 10x, so intensity
    rises from ~48 to ~157 FLOP/byte."""
    short = metrics(batch=256, history_tokens=200)["decode"]["flop_per_byte"]
    long = metrics(batch=256, history_tokens=2000)["decode"]["flop_per_byte"]
    assert short > 3 * long


def test_batch_256_at_2000_tokens_does_not_fit_80gb():
    m = metrics(batch=256, history_tokens=2000)
    assert m["memory"]["fits"] is False
    assert m["memory"]["max_batch"] == 213
    assert m["memory"]["capacity_gb"] == 80


def test_decode_climbs_then_stalls():
    """Intensity grows ~linearly at small batch (shared weight read), then flattens as KV reads dominate."""
    ai = [metrics(batch=b, history_tokens=2000)["decode"]["flop_per_byte"] for b in (1, 2, 64, 128, 256)]
    assert ai[1] / ai[0] > 1.9
    assert ai[4] / ai[3] < 1.3


def test_prefill_is_compute_bound_and_intensity_grows_with_prompt():
    short = metrics(prompt_tokens=64)["prefill"]
    long = metrics(prompt_tokens=8192)["prefill"]
    assert long["bound"] == "compute"
    assert long["flop_per_byte"] > 10 * short["flop_per_byte"]


def test_warning_note_when_out_of_memory():
    _, result = run_lab("roofline", {"batch": 1024})
    assert result.notes[0].startswith("Does not fit")
    assert "213" in result.notes[0]


def test_seventy_b_on_one_gpu_is_flagged_and_fits_on_four():
    assert metrics(model="llama-3.1-70b", tp=1)["memory"]["fits"] is False
    assert metrics(model="llama-3.1-70b", tp=4)["memory"]["fits"] is True


@pytest.mark.parametrize("name", ["roofline", "memory", "breakdown"])
def test_figures_are_valid_plotly(name):
    _, result = run_lab("roofline", {"batch": 64})
    go.Figure(result.figures[name])  # raises on an invalid figure


def test_every_try_this_step_runs():
    from labs import LABS

    for step in LABS["roofline"].try_this:
        run_lab("roofline", step.params)

"""Speculative-decoding lab: the lab card's experiments, the metric contract, 422s and determinism."""

import json

import plotly.graph_objects as go
import pytest
from pydantic import ValidationError

from labs import LABS, run_lab

CONTRACT = {"draft_cost_ratio", "expected_tokens_per_step", "speedup", "best_k", "best_speedup",
            "target_step_ms", "draft_step_ms", "verify_step_ms"}


def run(**params):
    return run_lab("speculative", params)[1]


def step(title_start):
    return next(s for s in LABS["speculative"].try_this if s.title.startswith(title_start))


def test_metric_contract_and_sane_defaults():
    """Defaults: Llama-3.1-8B on one H100, Llama-3.2-1B drafting, a = 0.7, k = 4, batch 1.
    E = (1 - 0.7^5) / 0.3 = 2.7731; vLLM's logged rate (E - 1) / 4 = 44.33%."""
    m = run().metrics
    assert CONTRACT <= set(m)
    assert m["expected_tokens_per_step"] == pytest.approx(2.7731, abs=1e-4)
    assert m["acceptance"]["logged_acceptance_pct"] == pytest.approx(44.33, abs=0.01)
    assert m["acceptance"]["mean_accepted_drafts"] == pytest.approx(1.7731, abs=1e-4)
    assert m["draft_step_ms"] < m["target_step_ms"] <= m["verify_step_ms"]
    assert m["speedup"] > 1 and m["verify_bound"] == "memory"
    assert m["memory"]["fits"] is True


def test_speedup_is_e_times_target_over_the_round():
    """S = E t_target / (k t_draft + t_verify), from the reported parts."""
    m = run(acceptance_rate=0.8, draft_tokens=6, batch=8)
    e, k = m.metrics["expected_tokens_per_step"], 6
    parts = k * m.metrics["draft_step_ms"] + m.metrics["verify_step_ms"]
    assert m.metrics["speedup"] == pytest.approx(e * m.metrics["target_step_ms"] / parts)


def test_try_1_best_k_is_5_or_6_at_70_percent():
    m = run(**step("70% acceptance").params).metrics
    assert 0.04 <= m["draft_cost_ratio"] <= 0.065
    assert m["best_k"] in (5, 6)


def test_try_2_lower_acceptance_shrinks_best_k_and_k_8_hurts():
    before = run(**step("70% acceptance").params).metrics
    m = run(**step("Drop acceptance").params).metrics
    assert m["best_k"] < before["best_k"]
    assert m["speedup"] < m["best_speedup"]  # the step sets k = 8


def test_try_3_larger_draft_costs_more_per_guess_and_pays_less():
    small = run(**step("70% acceptance").params).metrics
    large = run(**step("Switch to a larger draft").params).metrics
    assert large["acceptance"]["alpha_per_token"] > small["acceptance"]["alpha_per_token"]
    assert large["draft_cost_ratio"] > small["draft_cost_ratio"]
    assert large["best_speedup"] < small["best_speedup"]


def test_try_4_batch_256_speculation_loses():
    """Issue 5: H100, Llama-3.1-8B, 512 tokens, k = 8, a = 0.6, batch 256: speed-up < 1, verify compute-bound,
    and well under Leviathan's formula, which prices the verify pass as one step."""
    r = run(**step("Raise the batch").params)
    assert r.metrics["speedup"] < 1
    assert r.metrics["verify_bound"] == "compute"
    assert r.metrics["verify_cost_in_target_steps"] > 3
    assert r.metrics["leviathan_speedup"] > 1.5 * r.metrics["speedup"]
    assert any("compute-bound" in n for n in r.notes)


@pytest.mark.parametrize(("body", "field", "words"), [
    ({"model": "llama-3.1-8b", "draft_model": "llama-3.1-8b"}, "draft_model",
     "allowed drafts: llama-3.2-1b, llama-3.2-3b"),
    ({"model": "qwen2.5-7b"}, "draft_model", "llama-3.1-8b, llama-3.1-70b"),
    ({"draft_model": "gpt-2"}, "draft_model", "llama-3.2-1b"),
    ({"acceptance_rate": 1.0}, "acceptance_rate", "less than or equal to 0.99"),
    ({"draft_tokens": 17}, "draft_tokens", "less than or equal to 16"),
    ({"batch": 257}, "batch", "less than or equal to 256"),
])
def test_bad_input_names_the_field(body, field, words):
    with pytest.raises(ValidationError) as err:
        run_lab("speculative", body)
    first = err.value.errors()[0]
    assert first["loc"][-1] == field
    assert words in first["msg"]


def test_seventy_b_on_one_h100_is_refused_with_the_tp_that_fits():
    """70.6e9 x 2 + 1.24e9 x 2 bytes = 143.6 GB of weights > 72 GB usable on one 80 GB H100; two hold 144."""
    with pytest.raises(ValidationError) as err:
        run_lab("speculative", {"model": "llama-3.1-70b", "tp": 1})
    assert "tp >= 2" in str(err.value)
    with pytest.raises(ValidationError, match="tp >= 4"):
        run_lab("speculative", {"model": "llama-3.1-70b", "tp": 2, "draft_model": "llama-3.2-3b"})


def test_kv_cache_overflow_is_a_note_not_a_silent_number():
    r = run(model="llama-3.1-70b", tp=4, batch=256, context_tokens=32768)
    assert r.metrics["memory"]["fits"] is False
    assert r.notes[0].startswith("Does not fit")


def test_same_seed_same_answer_and_another_seed_another_stream():
    a, b, c = (run(seed=s) for s in (3, 3, 4))
    assert json.dumps(a.figures) == json.dumps(b.figures)
    assert a.figures["stream"] != c.figures["stream"]


def test_sampling_metrics_pass_and_fail_as_they_should():
    s = run(acceptance_rate=0.6).metrics["sampling"]
    assert s["beta"] == pytest.approx(0.6)
    assert s["p_value"] > 0.01 and s["p_value_without_residual"] < 1e-6


def test_stream_counts_add_up():
    m = run(acceptance_rate=0.9, draft_tokens=6).metrics["stream"]
    assert m["tokens"] == pytest.approx(m["rounds"] * m["tokens_per_round"])
    assert 1 <= m["tokens_per_round"] <= 7


@pytest.mark.parametrize("name", ["speedup", "round_time", "stream", "sampling"])
def test_figures_are_valid_plotly(name):
    go.Figure(run(acceptance_rate=0.5, draft_tokens=3).figures[name])


def test_best_k_marker_sits_on_the_best_k():
    r = run(acceptance_rate=0.8)
    marker = next(t for t in r.figures["speedup"]["data"] if t["name"].startswith("best k"))
    assert marker["x"] == [r.metrics["best_k"]]


@pytest.mark.parametrize("body", [
    {"acceptance_rate": 0.0, "draft_tokens": 1},
    {"acceptance_rate": 0.99, "draft_tokens": 16, "context_tokens": 1},
    {"model": "llama-3.1-70b", "tp": 8, "draft_model": "llama-3.1-8b", "acceptance_rate": 0.99,
     "draft_tokens": 16, "batch": 256, "context_tokens": 131072},
])
def test_extremes_give_finite_json(body):
    r = run(**body)
    json.dumps({"m": r.metrics, "f": r.figures, "n": r.notes}, allow_nan=False)


def test_every_try_this_step_runs():
    assert len(LABS["speculative"].try_this) == 4
    for s in LABS["speculative"].try_this:
        run_lab("speculative", s.params)


def test_a_larger_draft_works_from_the_default_target():
    """The card's "switch the draft model to a larger one" from the defaults (Llama-3.1-8B target):
    Llama-3.2-3B costs more per guess than Llama-3.2-1B."""
    small = run_lab("speculative", {"draft_model": "llama-3.2-1b"})[1].metrics
    large = run_lab("speculative", {"draft_model": "llama-3.2-3b"})[1].metrics
    assert large["draft_cost_ratio"] > small["draft_cost_ratio"]

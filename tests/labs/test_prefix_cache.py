"""Prefix-cache lab: the issue's "done when" list and the lab card's experiments, on Llama-3.1-8B / H100 SXM."""

import json

import plotly.graph_objects as go
import pytest

from labs import run_lab
from labs.base import params_schema
from labs.prefix_cache import LAB, Params


PRESET_LABELS = {c["value"]: c["label"] for p in params_schema(Params) if p["name"] == "preset" for c in p["choices"]}


def run(**params):
    return run_lab("prefix-cache", params)[1]


def metrics(**params):
    return run(**params).metrics


def test_metric_contract():
    m = metrics()
    assert {"hit_rate", "ttft_ms_miss", "ttft_ms_hit", "ttft_ms_mean", "prefill_tokens_saved_fraction"} <= set(m)
    assert {"hit_rate", "replica_hit_rate", "prefix_tokens_found_fraction"} <= set(m["simulated"])
    assert {"prefill_pflop_saved", "gpu_s_saved"} <= set(m["per_1000_requests"])


def test_coding_agent_hit_saves_most_of_the_prefill():
    """Done when: coding agent with a hit saves >= 0.9 of the prefill tokens, and the hit's TTFT is a
    small fraction of the miss's (1,010 tokens prefilled against 39,186)."""
    m = metrics(preset="coding-agent", hit_rate=1.0)
    assert m["prefill_tokens_saved_fraction"] >= 0.9
    assert m["ttft_ms_hit"] < 0.1 * m["ttft_ms_miss"]
    assert m["ttft_ms_mean"] == m["ttft_ms_hit"]


def test_ten_percent_hits_save_a_tenth_of_a_full_hit():
    """Done when: at h = 0.1 the mean saving is a tenth of the full-hit saving:
    (t_miss - t_mean) / (t_miss - t_hit) = h, and saved fraction(0.1) = 0.1 x saved fraction(1)."""
    full = metrics(preset="coding-agent", hit_rate=1.0)
    tenth = metrics(preset="coding-agent", hit_rate=0.1)
    ratio = (tenth["ttft_ms_miss"] - tenth["ttft_ms_mean"]) / (tenth["ttft_ms_miss"] - tenth["ttft_ms_hit"])
    assert ratio == pytest.approx(0.1)
    assert tenth["prefill_tokens_saved_fraction"] == pytest.approx(0.1 * full["prefill_tokens_saved_fraction"])
    assert tenth["per_1000_requests"]["gpu_s_saved"] == pytest.approx(0.1 * full["per_1000_requests"]["gpu_s_saved"])


@pytest.mark.parametrize("hit_rate", [None, 0.5, 1.0])
def test_shared_part_zero_saves_exactly_nothing(hit_rate):
    m = metrics(preset="coding-agent", shared_tokens=0, hit_rate=hit_rate)
    assert m["prefill_tokens_saved_fraction"] == 0.0
    assert m["ttft_ms_hit"] == m["ttft_ms_miss"] == m["ttft_ms_mean"]
    assert m["per_1000_requests"]["prefill_pflop_saved"] == 0.0
    assert m["prefill_bound_throughput_gain"] == 1.0


def test_the_simulator_sets_the_hit_rate_unless_the_user_asks_what_if():
    sim = metrics(preset="agent-conversation", replicas=10, routing="round-robin")
    assert sim["hit_rate_source"] == "simulated"
    assert sim["hit_rate"] == sim["simulated"]["hit_rate"]
    assert sim["hit_rate"] == pytest.approx(0.1, abs=0.06)  # about 1/N, measured (seed 0)
    what_if = metrics(preset="agent-conversation", replicas=10, routing="round-robin", hit_rate=0.9)
    assert what_if["hit_rate"] == 0.9 and what_if["hit_rate_source"] == "what-if"
    assert what_if["simulated"]["hit_rate"] == sim["hit_rate"]


def test_cache_aware_routing_restores_the_hit_rate():
    rr = metrics(preset="coding-agent", replicas=10, routing="round-robin")
    aware = metrics(preset="coding-agent", replicas=10, routing="cache-aware")
    single = metrics(preset="coding-agent", replicas=1)
    assert aware["hit_rate"] >= 0.95 * single["hit_rate"]
    assert rr["hit_rate"] < 0.3
    assert aware["ttft_ms_mean"] < 0.2 * rr["ttft_ms_mean"]


def test_per_replica_hit_rates_are_measured():
    m = metrics(preset="agent-conversation", replicas=4, routing="round-robin")
    per = m["simulated"]["replica_hit_rate"]
    assert set(per) == {f"replica_{j}" for j in range(1, 5)}
    assert all(0 <= v <= 1 for v in per.values())


def test_sliders_override_the_preset_and_a_note_says_so():
    result = run(preset="rag-shared-document", shared_tokens=2000)
    assert result.metrics["tokens"]["shared"] == 2000
    assert result.metrics["tokens"]["unique"] == 200  # the preset's own
    assert any("is your setting" in n for n in result.notes)


def test_every_preset_names_its_source_or_says_illustration():
    for preset, label in PRESET_LABELS.items():
        note = next(n for n in run(preset=preset).notes if n.startswith(f"{label}: "))
        assert "Illustration" in note or "README" in note or "Manus" in note


def test_no_room_for_a_kv_cache_is_a_note_not_an_error():
    result = run(model="llama-3.1-70b", tp=1)
    assert result.notes[0].startswith("No simulation")
    assert result.metrics["hit_rate"] == 0.0
    assert "replicas" not in result.figures
    json.dumps(result.metrics, allow_nan=False)


@pytest.mark.parametrize("step", LAB.try_this, ids=lambda s: s.title)
def test_try_this_steps_show_their_effect(step):
    m = metrics(**step.params)
    if step.title.startswith("Pick Coding"):
        assert m["hit_rate"] == 1.0 and m["ttft_ms_hit"] < 0.1 * m["ttft_ms_miss"]
    elif step.title.startswith("Drop"):
        assert m["ttft_ms_mean"] > 0.85 * m["ttft_ms_miss"]
        assert m["simulated"]["hit_rate"] == pytest.approx(0.1, abs=0.06)
    elif step.title.startswith("Set the shared"):
        assert m["prefill_tokens_saved_fraction"] == 0.0
    else:
        assert m["hit_rate"] >= 0.95


@pytest.mark.parametrize("name", ["ttft", "tokens", "replicas", "occupancy"])
def test_figures_are_valid_plotly(name):
    fig = run(preset="coding-agent", replicas=4).figures[name]
    go.Figure(fig)


def test_figures_follow_the_controls():
    a = run(preset="coding-agent", hit_rate=1.0).figures
    b = run(preset="coding-agent", hit_rate=0.1).figures
    assert a["ttft"]["data"][0]["y"][2] < b["ttft"]["data"][0]["y"][2]
    four = run(preset="coding-agent", replicas=4).figures["occupancy"]
    eight = run(preset="coding-agent", replicas=8).figures["occupancy"]
    assert len(four["data"][0]["x"]) == 4 and len(eight["data"][0]["x"]) == 8


def test_hit_rate_is_a_nullable_number_in_the_schema():
    p = next(p for p in params_schema(Params) if p["name"] == "hit_rate")
    assert (p["type"], p["min"], p["max"], p["default"], p["nullable"]) == ("number", 0, 1, None, True)


def test_answer_is_small_and_finite():
    result = run(preset="agent-conversation", replicas=16, routing="cache-aware")
    text = json.dumps({"metrics": result.metrics, "figures": result.figures, "notes": result.notes},
                      allow_nan=False)
    assert len(text) < 1_000_000

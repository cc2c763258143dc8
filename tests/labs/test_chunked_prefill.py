"""Chunked-prefill lab: metrics, figures, page text and the lab card's experiments (Llama-3.1-8B, H100 SXM)."""

import json

import plotly.graph_objects as go
import pytest
from fastapi.testclient import TestClient
from pydantic import ValidationError

from engine.timeline import LINKS
from labs import LABS, run_lab
from labs.base import params_schema
from labs.chunked_prefill import LAB, Params
from web.app import create_app

LARGEST = {"users": 256, "history_tokens": 32768, "prompt_tokens": 131072, "chunk_tokens": 64}


def metrics(**params):
    return run_lab("chunked-prefill", params)[1].metrics


def answer_bytes(params: dict) -> int:
    p, result = run_lab("chunked-prefill", params)
    body = {"params": p.model_dump(mode="json"), "metrics": result.metrics, "figures": result.figures,
            "notes": result.notes}
    return len(json.dumps(body, allow_nan=False, separators=(",", ":")))


def test_design_metrics_are_all_there():
    """DESIGN.md: decode_step_ms, and per lane newcomer_ttft_ms, max_stall_ms, existing_tpot_ms, steps."""
    m = metrics()
    assert m["decode_step_ms"] > 0
    for lane in ("no_chunking", "chunked", "disaggregated"):
        assert set(m["lanes"][lane]) >= {"newcomer_ttft_ms", "max_stall_ms", "existing_tpot_ms", "steps"}
    assert {"kv_transfer_gb", "kv_transfer_ms"} <= set(m["lanes"]["disaggregated"])


def test_done_when_prompt_32000():
    """The issue's check at prompt 32,000 with the defaults and chunk 256."""
    m = metrics(prompt_tokens=32000, chunk_tokens=256)
    nc, ch, dg = (m["lanes"][k] for k in ("no_chunking", "chunked", "disaggregated"))
    assert m["prefill_ms"] <= nc["max_stall_ms"] <= 1.02 * m["prefill_ms"]
    assert nc["max_stall_ms"] >= 20 * ch["max_stall_ms"]
    assert dg["max_stall_ms"] <= 1.25 * m["decode_step_ms"]
    assert ch["newcomer_ttft_ms"] >= nc["newcomer_ttft_ms"]
    assert ch["steps"] == 125  # ceil(32,000 / 256)


def test_kv_transfer_metric_by_hand():
    """131,072 bytes per token x 32,000 = 4.194304 GB; over 100 GbE (12.5 GB/s): 335.54 ms."""
    dg = metrics(prompt_tokens=32000, link="ethernet-100g")["lanes"]["disaggregated"]
    assert dg["kv_transfer_gb"] == pytest.approx(4.194304)
    assert dg["kv_transfer_ms"] == pytest.approx(4.194304 / 12.5 * 1e3)


def test_try_this_steps_show_what_they_say():
    first, second, link = (run_lab("chunked-prefill", step.params)[1].metrics["lanes"] for step in LAB.try_this)
    # 1: the freeze against the chunks; the disaggregated lane's users never stall long.
    assert first["no_chunking"]["max_stall_ms"] >= 20 * first["chunked"]["max_stall_ms"]
    assert first["disaggregated"]["max_stall_ms"] < first["chunked"]["max_stall_ms"]
    # 2: chunk 256 -> 8,192: the newcomer's star moves left, everyone else's gaps grow.
    assert second["chunked"]["newcomer_ttft_ms"] < first["chunked"]["newcomer_ttft_ms"]
    assert second["chunked"]["max_stall_ms"] > 5 * first["chunked"]["max_stall_ms"]
    # 3: a slow link delays the newcomer but nobody else.
    assert link["disaggregated"]["kv_transfer_ms"] > 3 * first["disaggregated"]["kv_transfer_ms"]
    assert link["disaggregated"]["newcomer_ttft_ms"] > first["disaggregated"]["newcomer_ttft_ms"]
    assert link["disaggregated"]["max_stall_ms"] < 1.25 * metrics(prompt_tokens=32000)["decode_step_ms"]


def test_page_text_and_misconceptions():
    assert len(LAB.what_you_see) >= 2 and len(LAB.try_this) >= 2
    myths = dict(LAB.misconceptions)
    assert "grows" in myths["Chunked prefill makes the long prompt faster."]
    assert any("queueing" in fact for fact in myths.values())
    for step in LAB.try_this:
        Params.model_validate(step.params)


def test_notes_say_ttft_is_gpu_time_only_and_name_the_link_source():
    _, result = run_lab("chunked-prefill", {"link": "nvlink-4"})
    text = " ".join(result.notes)
    assert "queueing" in text and "tokenisation" in text
    assert LINKS["nvlink-4"].source in text


def test_memory_warning_at_the_largest_setting():
    """256 users x 32,768 tokens x 131,072 bytes = 1,100 GB of KV cache: far beyond 80 GB."""
    p, result = run_lab("chunked-prefill", LARGEST)
    assert result.metrics["memory"]["fits"] is False
    assert result.notes[0].startswith("Does not fit")
    assert metrics()["memory"]["fits"] is True


@pytest.mark.parametrize("params", [{}, {"prompt_tokens": 32000, "chunk_tokens": 256}, LARGEST,
                                    {"users": 1, "history_tokens": 0, "prompt_tokens": 131072, "chunk_tokens": 64,
                                     "model": "llama-3.2-1b", "gpu": "b200", "link": "ethernet-100g"}])
def test_figures_are_valid_and_the_answer_stays_under_1_mb(params):
    _, result = run_lab("chunked-prefill", params)
    for fig in result.figures.values():
        go.Figure(fig)
    assert answer_bytes(params) < 1_000_000


def test_timeline_has_three_lanes_on_one_axis_with_the_first_token_marked():
    """Times in the figure are rounded to 1/20,000 of the window, far below a pixel."""
    p, result = run_lab("chunked-prefill", {"prompt_tokens": 32000, "chunk_tokens": 256})
    fig = result.figures["timeline"]
    stars = [t for t in fig["data"] if t.get("name") == "first token"]
    ttfts = [result.metrics["lanes"][k]["newcomer_ttft_ms"] for k in ("no_chunking", "chunked", "disaggregated")]
    assert [t["yaxis"] for t in stars] == ["y", "y3", "y5"]
    assert [t["x"][0] for t in stars] == pytest.approx(ttfts, abs=result.metrics["window_ms"] / 20000)
    assert all("xaxis" not in t for t in fig["data"])  # every trace on the one shared x axis
    assert fig["layout"]["xaxis"]["range"][1] == pytest.approx(result.metrics["window_ms"], rel=1e-4)


def test_step_strip_shows_the_prefill_step():
    """The no-chunking strip's tallest step is the prefill (ms)."""
    _, result = run_lab("chunked-prefill", {"prompt_tokens": 32000})
    strip = next(t for t in result.figures["timeline"]["data"] if t["yaxis"] == "y2")
    assert max(strip["y"]) == pytest.approx(result.metrics["prefill_ms"], abs=1e-3)


def test_link_select_shows_names():
    schema = {p["name"]: p for p in params_schema(Params)}
    labels = {c["value"]: c["label"] for c in schema["link"]["choices"]}
    assert labels == {k: v.name for k, v in LINKS.items()}
    assert schema["chunk_tokens"]["scale"] == "log"
    assert (schema["chunk_tokens"]["min"], schema["chunk_tokens"]["max"]) == (64, 16384)


@pytest.mark.parametrize("bad", [{"users": 0}, {"users": 257}, {"history_tokens": 32769}, {"prompt_tokens": 255},
                                 {"prompt_tokens": 131073}, {"chunk_tokens": 63}, {"chunk_tokens": 16385},
                                 {"link": "carrier-pigeon"}, {"model": "qwen2.5-7b", "tp": 8}])
def test_bad_params_are_refused(bad):
    with pytest.raises(ValidationError):
        Params.model_validate(bad)


def test_api_answers_422_naming_the_field():
    with TestClient(create_app()) as client:
        response = client.post("/api/labs/chunked-prefill", json={"chunk_tokens": 16385})
        assert response.status_code == 422
        assert "chunk_tokens" in response.text
        assert client.post("/api/labs/chunked-prefill", json={"model": "qwen2.5-7b", "tp": 8}).status_code == 422
        ok = client.post("/api/labs/chunked-prefill", json={})
        assert ok.status_code == 200 and "lanes" in ok.json()["metrics"]


def test_registered():
    assert LABS["chunked-prefill"] is LAB

"""Your model and your GPU over HTTP and the CLI: parse, breakdown, every lab, hostile input, serve files."""

from __future__ import annotations

import json
import os

import pytest

import engine.calibration
import engine.hardware
import engine.models
from engine.models import DEEPSEEK_V3_CONFIG, GEMMA_2_9B_CONFIG
from labs import LABS
from web import cli
from web.catalog_files import GPU_SPECS_ENV, MODEL_CONFIGS_ENV, register_catalog_files

SMALL = {  # a GQA model that is no catalog entry: 24 layers, 4 KV heads of 96
    "_name_or_path": "lab/tiny-gqa", "model_type": "llama", "hidden_size": 1536, "num_hidden_layers": 24,
    "num_attention_heads": 16, "num_key_value_heads": 4, "head_dim": 96, "intermediate_size": 4096,
    "vocab_size": 32000,
}
GPU = {"name": "Lab GPU", "bf16_tflops": 500, "fp8_tflops": 1000, "memory_gb": 96,
       "memory_bandwidth_gb_per_s": 4000, "interconnect_gb_per_s": 200}


def model_param(client, config=SMALL):
    response = client.post("/api/models/parse", json={"config": json.dumps(config)})
    assert response.status_code == 200, response.text
    return response.json()["custom_model"]


def gpu_param(client, figures=GPU):
    response = client.post("/api/gpus/parse", json=figures)
    assert response.status_code == 200, response.text
    return response.json()["custom_gpu"]


def test_parse_answers_breakdown_and_link_encoding(client):
    """KV of the small model: 2 (K, V) x 24 layers x 4 KV heads x 96 head_dim x 2 B = 36,864 B per token;
    at 1,000 tokens 36,864,000 B."""
    body = client.post("/api/models/parse", json={"config": json.dumps(SMALL), "context_tokens": 1000}).json()
    rows = {r["key"]: r for r in body["rows"]}
    assert body["name"] == "tiny-gqa" and body["model"]["id"] == "custom"
    assert rows["kv_bytes_per_token"]["value"] == 36_864
    assert rows["kv_bytes_at_context"]["value"] == 36_864_000
    assert body["custom_model"] and body["config_notes"] == ["tie_word_embeddings absent: false, the llama default"]


def test_catalog_breakdown(client):
    body = client.get("/api/models/deepseek-v3/breakdown", params={"context_tokens": 4096, "batch": 32}).json()
    rows = {r["key"]: r for r in body["rows"]}
    assert rows["kv_bytes_per_token"]["value"] == 70_272
    assert rows["experts_read_per_moe_layer"]["value"] == pytest.approx(163.31, abs=0.01)
    assert client.get("/api/models/nope/breakdown").status_code == 404
    assert client.get("/api/models/gemma-2-9b/breakdown", params={"context_tokens": -1}).status_code == 422


def test_catalog_lists_the_new_models(client):
    ids = {m["id"] for m in client.get("/api/models").json()}
    assert {"deepseek-v3", "gemma-2-9b"} <= ids


def test_gpu_parse_warns_about_sparse_figures(client):
    body = client.post("/api/gpus/parse", json={**GPU, "bf16_tflops": 1979, "fp8_tflops": 3958,
                                                 "memory_bandwidth_gb_per_s": 3350}).json()
    assert len(body["warnings"]) == 2 and "2:4 sparsity" in body["warnings"][0]
    bad = client.post("/api/gpus/parse", json={**GPU, "memory_gb": -1, "bf16_tflops": "fast"})
    assert bad.status_code == 422
    assert {e["loc"][-1] for e in bad.json()["detail"]} == {"memory_gb", "bf16_tflops"}


@pytest.mark.parametrize("slug", sorted(LABS))
def test_every_lab_runs_on_a_custom_model_and_gpu(client, slug):
    """A custom model and GPU run every lab, or are refused with a 422 that says why (never a 500)."""
    params = {"model": "custom", "custom_model": model_param(client), "gpu": "custom", "custom_gpu": gpu_param(client)}
    response = client.post(f"/api/labs/{slug}", json=params)
    assert response.status_code in (200, 422), response.text
    if response.status_code == 422:  # e.g. speculative decoding needs a catalog draft sharing the tokenizer
        assert response.json()["detail"][0]["msg"]
        return
    body = response.json()
    assert body["params"]["model"] == "custom"
    assert any("tiny-gqa" in note for note in body["notes"])


def test_roofline_uses_the_custom_numbers(client):
    """Roofline: kv_bytes_per_token 36,864 (the small model); ridge 500e12 / 4e12 = 125 FLOP/byte (the GPU)."""
    params = {"model": "custom", "custom_model": model_param(client), "gpu": "custom", "custom_gpu": gpu_param(client)}
    metrics = client.post("/api/labs/roofline", json=params).json()["metrics"]
    assert metrics["kv_bytes_per_token"] == 36_864
    assert metrics["ridge_flop_per_byte"] == pytest.approx(125.0)
    assert metrics["memory"]["capacity_gb"] == pytest.approx(96.0)


def test_plain_json_works_as_the_param_too(client):
    response = client.post("/api/labs/roofline", json={"model": "custom", "custom_model": json.dumps(SMALL)})
    assert response.status_code == 200


def test_sparse_gpu_warning_reaches_the_lab_notes(client):
    params = {"gpu": "custom", "custom_gpu": gpu_param(client, {**GPU, "bf16_tflops": 1979, "fp8_tflops": None,
                                                               "memory_bandwidth_gb_per_s": 3350})}
    notes = client.post("/api/labs/roofline", json=params).json()["notes"]
    assert notes[0].startswith("Your GPU (Lab GPU): BF16 1,979.0 TFLOP/s is twice")


@pytest.mark.parametrize(("params", "field", "message"), [
    ({"model": "custom"}, "body", "needs custom_model"),
    ({"gpu": "custom"}, "body", "needs custom_gpu"),
    ({"model": "custom", "custom_model": '{"model_type": "llama"}'}, "custom_model", "missing num_hidden_layers"),
    ({"model": "custom", "custom_model": json.dumps({**SMALL, "hidden_size": -5})}, "custom_model",
     "hidden_size must be an integer from 1"),
    ({"model": "custom", "custom_model": json.dumps({**SMALL, "num_hidden_layers": 10**6})}, "custom_model",
     "num_hidden_layers must be an integer"),
    ({"model": "custom", "custom_model": "%%%"}, "custom_model", "JSON object or its base64url"),
    ({"model": "custom", "custom_model": "A" * 50_000}, "custom_model", "at most"),
    ({"model": "custom", "custom_model": 42}, "custom_model", "valid string"),
    ({"gpu": "custom", "custom_gpu": '{"bf16_tflops": 1}'}, "custom_gpu", "memory_gb: Field required"),
    ({"model": "gpt-5"}, "model", "unknown model"),
])
def test_bad_custom_params_are_a_422_naming_the_field(client, params, field, message):
    response = client.post("/api/labs/roofline", json=params)
    assert response.status_code == 422, response.text
    error = response.json()["detail"][0]
    assert error["loc"][-1] == field
    assert message in error["msg"]


def test_megabytes_and_deep_nesting_never_reach_a_500(client):
    huge = client.post("/api/models/parse", json={"config": "{" + " " * 3_000_000 + "}"})
    assert huge.status_code == 413
    nested = '{"model_type": "llama", "x": ' + "[" * 10_000 + "]" * 10_000 + "}"
    deep = client.post("/api/models/parse", json={"config": nested})
    assert deep.status_code == 422 and "nested too deeply" in deep.json()["detail"][0]["msg"]
    absurd = {**SMALL, "num_hidden_layers": 1024, "hidden_size": 131072, "num_attention_heads": 4096,
              "num_key_value_heads": 4096, "head_dim": 4096, "intermediate_size": 1 << 20, "vocab_size": 1 << 22}
    big = client.post("/api/models/parse", json={"config": json.dumps(absurd)})
    assert big.status_code == 422 and "the limit is 1e+14" in big.json()["detail"][0]["msg"]


def test_labs_schema_marks_the_custom_params_hidden(client):
    for lab in client.get("/api/labs").json():
        hidden = {p["name"] for p in lab["params"] if p["hidden"]}
        assert hidden == {"custom_model", "custom_gpu"}


# ---- pdlab serve --model-config / --gpu-spec -------------------------------------------------------------

@pytest.fixture
def scratch_catalogs():
    """Registration writes to the catalogs (shared dicts); put them back as they were afterwards."""
    catalogs = (engine.models.MODELS, engine.hardware.GPUS, engine.calibration.PROFILES)
    saved = [dict(c) for c in catalogs]
    yield
    for catalog, before in zip(catalogs, saved, strict=True):
        catalog.clear()
        catalog.update(before)


def test_serve_checks_files_then_names_them_for_the_workers(tmp_path, monkeypatch, scratch_catalogs):
    model_file, gpu_file = tmp_path / "config.json", tmp_path / "gpu.json"
    model_file.write_text(json.dumps(SMALL))
    gpu_file.write_text(json.dumps(GPU))
    started = {}
    monkeypatch.setattr("uvicorn.run", lambda *a, **kw: started.update(kw))
    monkeypatch.delenv(MODEL_CONFIGS_ENV, raising=False)
    monkeypatch.delenv(GPU_SPECS_ENV, raising=False)
    assert cli.main(["serve", "--model-config", str(model_file), "--gpu-spec", str(gpu_file)]) == 0
    assert started["factory"] is True
    assert os.environ[MODEL_CONFIGS_ENV] == str(model_file) and os.environ[GPU_SPECS_ENV] == str(gpu_file)
    register_catalog_files()
    register_catalog_files()  # a second worker start in the same process changes nothing
    assert engine.models.MODELS["tiny-gqa"].kv_bytes_per_token() == 36_864
    assert engine.hardware.GPUS["lab-gpu"].bf16_flops_per_s == 5e14


@pytest.mark.parametrize(("content", "message"), [
    ('{"model_type": "llama"}', "missing num_hidden_layers"),
    ("not json", "JSON object"),
    (json.dumps({**GEMMA_2_9B_CONFIG}), "model id 'gemma-2-9b' is already taken"),
])
def test_serve_refuses_bad_model_files(tmp_path, capsys, monkeypatch, content, message, scratch_catalogs):
    monkeypatch.setattr("uvicorn.run", lambda *a, **kw: pytest.fail("the server must not start"))
    path = tmp_path / "config.json"
    path.write_text(content)
    assert cli.main(["serve", "--model-config", str(path)]) == 2
    assert message in capsys.readouterr().err


def test_serve_refuses_bad_gpu_files(tmp_path, capsys, monkeypatch, scratch_catalogs):
    monkeypatch.setattr("uvicorn.run", lambda *a, **kw: pytest.fail("the server must not start"))
    path = tmp_path / "gpu.json"
    path.write_text(json.dumps({**GPU, "bf16_tflops": 0}))
    assert cli.main(["serve", "--gpu-spec", str(path)]) == 2
    assert "bf16_tflops: Input should be greater than or equal to 0.1" in capsys.readouterr().err


def test_registered_model_is_offered_in_the_labs(tmp_path, monkeypatch, scratch_catalogs):
    path = tmp_path / "deepseek.json"
    path.write_text(json.dumps({k: v for k, v in DEEPSEEK_V3_CONFIG.items() if k != "_name_or_path"}))
    monkeypatch.setenv(MODEL_CONFIGS_ENV, str(path))
    from fastapi.testclient import TestClient

    from web.app import create_app

    with TestClient(create_app()) as c:
        response = c.post("/api/labs/roofline", json={"model": "deepseek", "tp": 8})
        assert response.status_code == 200, response.text
        assert response.json()["metrics"]["kv_bytes_per_token"] == 70_272


@pytest.mark.parametrize("field", ["bf16_tflops", "memory_bandwidth_gb_per_s"])
def test_vanishing_gpu_figures_are_a_422_not_a_500(client, field):
    """Found by an adversarial run: 1e-300 TFLOP/s passed the spec (> 0) and broke the derived
    profile's rates. Figures below a tenth of a TFLOP/s or 1 GB/s are refused by field."""
    figures = json.dumps({**GPU, field: 1e-300})
    for slug in LABS:
        r = client.post(f"/api/labs/{slug}", json={"gpu": "custom", "custom_gpu": figures})
        assert r.status_code == 422, slug
        assert field in json.dumps(r.json()["detail"])
    assert client.post("/api/gpus/parse", content=figures, headers={"content-type": "application/json"}).status_code == 422

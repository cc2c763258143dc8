"""The model breakdown: each value worked by hand, and agreeing with the labs' own counting."""

from __future__ import annotations

import pytest

from engine.breakdown import breakdown_json, model_breakdown
from engine.models import MODELS, get_model


def rows(model_id, context_tokens=8192, batch=1):
    return {r.key: r for r in model_breakdown(get_model(model_id), context_tokens, batch)}


def test_llama_31_8b_flops_per_token_by_hand():
    """One decode token after 8,192 cached ones (JAX scaling book, transformers.md: 2 FLOPs per weight;
    4 x heads x head_dim per (query, key) pair).

    projections 2 x 32 x 41,943,040 = 2,684,354,560; MLP 2 x 32 x 176,160,768 = 11,274,289,152;
    LM head 2 x 128,256 x 4,096 = 1,050,673,152; attention 2 x 32 heads x (128 + 128) x 8,193 keys x 32 layers
    = 4,295,491,584 (the new token attends to the 8,192 cached and itself).
    """
    r = rows("llama-3.1-8b")
    assert r["flops_attention_projections"].value == 2_684_354_560
    assert r["flops_mlp"].value == 11_274_289_152
    assert r["flops_lm_head"].value == 1_050_673_152
    assert r["flops_attention_scores"].value == 4_295_491_584
    assert r["flops_per_token"].value == 2_684_354_560 + 11_274_289_152 + 1_050_673_152 + 4_295_491_584
    assert r["kv_bytes_at_context"].value == 8192 * 131_072
    assert "2 (K, V) × 8 KV heads × 128 head_dim" in r["kv_elements_per_token_per_layer"].formula
    assert "params_active" not in r  # a dense model has no separate active count


def test_sliding_layers_cap_keys_in_attention_flops():
    """Gemma-2-9B at 8,192 cached tokens: 21 full layers see 8,193 keys, 21 sliding ones 4,096.

    2 x 16 x (256 + 256) = 16,384 FLOPs a key; 16,384 x (21 x 8,193 + 21 x 4,096) = 4,228,202,496.
    """
    r = rows("gemma-2-9b")
    assert r["flops_attention_scores"].value == 16_384 * 21 * (8_193 + 4_096) == 4_228_202_496
    assert "min(8,192, 4,096)" in r["kv_bytes_at_context"].formula


def test_moe_rows_show_active_parameters_and_experts_read():
    """Mixtral at batch 4: 8 x (1 - 0.75^4) = 5.46875 experts a layer; MLP FLOPs count 2 active experts
    and the router: 2 x 32 x (4,096 x 8 + 2 x 176,160,768) = 22,550,675,456."""
    r = rows("mixtral-8x7b", batch=4)
    assert r["params_active"].value == 12_879_925_248
    assert r["experts_read_per_moe_layer"].value == pytest.approx(5.46875)
    assert r["flops_mlp"].value == 22_550_675_456
    assert r["weight_bytes"].value == 2 * 46_702_792_704


def test_mla_rows_and_notes():
    body = breakdown_json(get_model("deepseek-v3"), 1000)
    r = {row["key"]: row for row in body["rows"]}
    assert r["kv_bytes_per_token"]["value"] == 70_272
    assert "512 + 64" in r["kv_elements_per_token_per_layer"]["formula"]
    assert any("absorb" in note for note in body["notes"])


@pytest.mark.parametrize("model_id", list(MODELS))
@pytest.mark.parametrize("context", [0, 1, 5000, 200_000])
def test_breakdown_agrees_with_the_model(model_id, context):
    model = get_model(model_id)
    r = {x.key: x for x in model_breakdown(model, context, 16)}
    assert r["params_total"].value == model.param_count
    assert r["kv_bytes_at_context"].value == pytest.approx(float(model.kv_cache_bytes(context)))
    parts = ("flops_attention_projections", "flops_mlp", "flops_lm_head", "flops_attention_scores")
    assert r["flops_per_token"].value == pytest.approx(sum(r[k].value for k in parts))
    assert r["flops_mlp"].value + r["flops_attention_projections"].value == 2 * model.linear_params_per_token
    assert all(x.formula for x in r.values())


def test_bad_inputs():
    with pytest.raises(ValueError):
        model_breakdown(get_model("llama-3.1-8b"), -1)
    with pytest.raises(ValueError):
        model_breakdown(get_model("llama-3.1-8b"), 10, batch=0)

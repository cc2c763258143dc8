"""Model catalog: config.json figures, parameter counts, KV bytes."""

import numpy as np
import pytest

from engine.models import MODELS, get_model

GIB = 2**30


@pytest.mark.parametrize("model_id", list(MODELS))
def test_param_count_within_one_percent_of_published(model_id):
    """Counted parameters match the published count (Hugging Face model pages) within 1%."""
    model = get_model(model_id)
    assert model.param_count == pytest.approx(model.published_params, rel=0.01)


def test_llama_31_8b_param_count_by_hand():
    """Llama-3.1-8B (config.json: L=32, d=4096, H=32, K=8, h=128, I=14336, V=128256, untied).

    embeddings + LM head: 2 x 128256 x 4096 = 1,050,673,152
    per layer: q 4096x4096 + k,v 2 x 4096x1024 + o 4096x4096 = 41,943,040
               MLP 3 x 4096 x 14336 = 176,160,768; norms 2 x 4096 = 8,192
    32 layers: 32 x 218,112,000 = 6,979,584,000; final norm 4,096
    total = 8,030,261,248
    """
    assert get_model("llama-3.1-8b").param_count == 8_030_261_248


def test_kv_bytes_per_token_llama_31_8b():
    """2 (K and V) x 32 layers x 8 KV heads x 128 head_dim x 2 bytes = 131,072 (DESIGN.md)."""
    assert get_model("llama-3.1-8b").kv_bytes_per_token() == 2 * 32 * 8 * 128 * 2 == 131_072


def test_kv_cache_llama_31_70b_at_32k_is_10_gib():
    """2 x 80 x 8 x 128 x 2 = 327,680 B/token; x 32,768 tokens = 10,737,418,240 B = 10.0 GiB."""
    assert get_model("llama-3.1-70b").kv_cache_bytes(32 * 1024) / GIB == pytest.approx(10.0)


def test_mha_llama_2_7b_has_four_times_the_kv_of_gqa_llama_31_8b():
    """32 KV heads (MHA) vs 8 (GQA): 524,288 vs 131,072 bytes per token (science.md B)."""
    assert get_model("llama-2-7b").kv_bytes_per_token() == 4 * get_model("llama-3.1-8b").kv_bytes_per_token()


def test_qwen3_head_dim_from_config_not_hidden_over_heads():
    """Qwen3-4B: hidden 2560 / 32 heads = 80, but config.json says head_dim 128.

    KV = 2 x 36 x 8 x 128 x 2 = 147,456 bytes per token (not 92,160 with 80).
    """
    model = get_model("qwen3-4b")
    assert model.head_dim == 128 != model.hidden_size // model.num_heads
    assert model.kv_bytes_per_token() == 147_456


def test_mistral_sliding_window_caps_the_cache():
    """Mistral-7B-v0.1: sliding_window 4096 on every layer, so 10,000 tokens hold 4,096 tokens of KV:
    4096 x 131,072 = 536,870,912 B = 512 MiB (science.md B)."""
    model = get_model("mistral-7b-v0.1")
    assert model.kv_cache_bytes(10_000) == 4096 * 131_072
    assert model.kv_cache_bytes(1_000) == 1000 * 131_072


def test_mixtral_resident_vs_active():
    """Mixtral-8x7B: all 8 experts resident (46.7 B), 2 active per token (12.9 B) (science.md B, H.14).

    Expert = 3 x 4096 x 14336 = 176,160,768; active = total - 32 layers x 6 unused experts
    = 46,702,792,704 - 33,822,867,456 = 12,879,925,248.
    """
    model = get_model("mixtral-8x7b")
    assert model.param_count == 46_702_792_704
    assert model.active_param_count == 46_702_792_704 - 32 * 6 * 176_160_768
    assert model.active_param_count == pytest.approx(12.9e9, rel=0.01)


def test_kv_cache_bytes_broadcasts():
    model = get_model("llama-3.1-8b")
    out = model.kv_cache_bytes(np.array([0, 1, 10]))
    assert out.tolist() == [0, 131_072, 1_310_720]


def test_unknown_model_lists_valid_ids():
    with pytest.raises(KeyError, match="llama-3.1-8b"):
        get_model("gpt-5")


# ---- catalog entries built from config.json by engine.hf_config -------------------------------------------

def test_catalog_deepseek_v3_is_its_config_read_by_the_parser():
    """The catalog entry and a pasted copy of the same config.json are the same architecture."""
    from engine.hf_config import read_hf_config
    from engine.models import DEEPSEEK_V3_CONFIG, GEMMA_2_9B_CONFIG

    for model_id, config in (("deepseek-v3", DEEPSEEK_V3_CONFIG), ("gemma-2-9b", GEMMA_2_9B_CONFIG)):
        fields = read_hf_config(config).fields
        model = get_model(model_id)
        assert {k: getattr(model, k) for k in fields} == fields


def test_deepseek_v3_latent_cache_and_counts():
    """KV per token = 61 layers x (kv_lora_rank 512 + qk_rope_head_dim 64) x 2 B = 70,272 B (science.md B).

    Parameters: 671,026,404,352 total, 37,552,282,624 active (worked term by term in
    tests/engine/test_hf_config.py::test_deepseek_v3_params_total_and_active); published 671 B / 37 B,
    the 14 B multi-token-prediction module excluded as in the DeepSeek-V3 README.
    """
    model = get_model("deepseek-v3")
    assert model.kv_bytes_per_token() == 61 * 576 * 2 == 70_272
    assert model.kv_cache_bytes(1000) == 70_272_000
    assert model.param_count == 671_026_404_352
    assert model.active_param_count == 37_552_282_624
    assert model.active_param_count == pytest.approx(model.published_active_params, rel=0.02)
    assert model.num_moe_layers == 58 and model.num_shared_experts == 1


def test_deepseek_v3_experts_read_per_decode_step():
    """E = 256, k = 8: batch 1 reads 8 experts a layer; batch 32 reads 256 (1 - (31/32)^32).

    (31/32)^32 = exp(32 ln 0.96875) = exp(-1.015934) = 0.362055; 256 x 0.637945 = 163.31.
    Batch 1,000: 256 (1 - (31/32)^1000) = 256 x (1 - 1.6e-14), every expert.
    """
    model = get_model("deepseek-v3")
    assert model.expected_distinct_experts(1) == pytest.approx(8.0)
    assert model.expected_distinct_experts(32) == pytest.approx(163.31, abs=0.01)
    assert model.expected_distinct_experts(1000) == pytest.approx(256.0)
    assert get_model("llama-3.1-8b").expected_distinct_experts(64) == 0.0
    assert get_model("llama-3.1-8b").weights_read_per_step(64) == get_model("llama-3.1-8b").weight_bytes()


def test_gemma_2_9b_counts():
    """Gemma-2-9B (d 3584, 42 layers, 16 heads, 8 KV heads, head_dim 256 != 3584 / 16 = 224, I 14336,
    V 256000, tied, 4 RMSNorms a layer).

    Attention a layer: 3584 x 4096 + 2 x 3584 x 2048 + 4096 x 3584 = 44,040,192; MLP 3 x 3584 x 14336
    = 154,140,672; norms 4 x 3584 = 14,336; 42 x 198,195,200 = 8,324,198,400; + embedding 256,000 x 3,584
    = 917,504,000 + final norm 3,584 = 9,241,705,984 (Hugging Face: 9.24 B).
    KV: 2 x 8 x 256 x 2 = 8,192 B a layer; 42 layers = 344,064 B per token before the windows.
    """
    model = get_model("gemma-2-9b")
    assert model.param_count == 9_241_705_984
    assert model.head_dim == 256 != model.hidden_size // model.num_heads
    assert model.kv_bytes_per_token() == 344_064
    assert model.layer_windows == {4096: 21, None: 21}


def test_register_model_refuses_taken_ids():
    from engine.models import register_model

    new = get_model("llama-3.1-8b").model_copy(update={"id": "my-llama"})
    try:
        register_model(new)
        assert MODELS["my-llama"] is new
        for taken in ("my-llama", "llama-3.1-8b", "custom"):
            with pytest.raises(ValueError, match="taken"):
                register_model(new.model_copy(update={"id": taken}))
    finally:
        MODELS.pop("my-llama", None)

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

"""Reading Hugging Face config.json files: every count worked by hand, every bad input refused by name."""

from __future__ import annotations

import base64
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.hf_config import (
    MAX_CONFIG_BYTES,
    ConfigError,
    decode_json_text,
    encode_json,
    load_model_config,
    parse_hf_config,
    read_hf_config,
)
from engine.models import DEEPSEEK_V3_CONFIG, GEMMA_2_9B_CONFIG

# Architecture fields of published config.json files (science.md B; Hugging Face model repos).
LLAMA_31_8B = {
    "_name_or_path": "meta-llama/Llama-3.1-8B", "architectures": ["LlamaForCausalLM"], "model_type": "llama",
    "hidden_size": 4096, "intermediate_size": 14336, "num_attention_heads": 32, "num_hidden_layers": 32,
    "num_key_value_heads": 8, "vocab_size": 128256, "tie_word_embeddings": False, "attention_bias": False,
    "mlp_bias": False, "rope_theta": 500000.0, "rms_norm_eps": 1e-05, "torch_dtype": "bfloat16",
    "rope_scaling": {"factor": 8.0, "rope_type": "llama3"},
}
QWEN3_4B = {
    "model_type": "qwen3", "hidden_size": 2560, "intermediate_size": 9728, "num_attention_heads": 32,
    "num_hidden_layers": 36, "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 151936,
    "tie_word_embeddings": True, "attention_bias": False, "use_sliding_window": False, "sliding_window": None,
    "max_window_layers": 36,
}
MISTRAL_7B_V01 = {
    "model_type": "mistral", "hidden_size": 4096, "intermediate_size": 14336, "num_attention_heads": 32,
    "num_hidden_layers": 32, "num_key_value_heads": 8, "vocab_size": 32000, "sliding_window": 4096,
    "tie_word_embeddings": False,
}
MIXTRAL_8X7B = {
    "model_type": "mixtral", "hidden_size": 4096, "intermediate_size": 14336, "num_attention_heads": 32,
    "num_hidden_layers": 32, "num_key_value_heads": 8, "vocab_size": 32000, "num_local_experts": 8,
    "num_experts_per_tok": 2, "sliding_window": None, "tie_word_embeddings": False,
}
GEMMA_3_1B = {  # google/gemma-3-1b-it (text only): window 512, 5 sliding layers then 1 full
    "model_type": "gemma3_text", "hidden_size": 1152, "intermediate_size": 6912, "num_attention_heads": 4,
    "num_hidden_layers": 26, "num_key_value_heads": 1, "head_dim": 256, "vocab_size": 262144,
    "sliding_window": 512, "sliding_window_pattern": 6,
}
QWEN3_30B_A3B = {
    "model_type": "qwen3_moe", "hidden_size": 2048, "num_hidden_layers": 48, "num_attention_heads": 32,
    "num_key_value_heads": 4, "head_dim": 128, "intermediate_size": 6144, "moe_intermediate_size": 768,
    "num_experts": 128, "num_experts_per_tok": 8, "decoder_sparse_step": 1, "mlp_only_layers": [],
    "vocab_size": 151936, "tie_word_embeddings": False,
}


def parse(config: dict):
    return parse_hf_config(json.dumps(config)).model


# ---- GQA, head_dim, windows, MoE, MLA: hand-worked values --------------------------------------------

def test_gqa_model_kv_uses_kv_heads_not_query_heads():
    """Llama-3.1-8B (GQA, 8 KV heads for 32 query heads).

    KV per token = 2 (K, V) x 32 layers x 8 KV heads x 128 head_dim x 2 bytes = 131,072 B;
    with the 32 query heads it would be 524,288 B (4x too much).
    Params: embed + head 2 x 128,256 x 4,096 = 1,050,673,152; per layer q 4096x4096 + k,v 2 x 4096x1024
    + o 4096x4096 = 41,943,040, MLP 3 x 4096 x 14336 = 176,160,768, norms 2 x 4096 = 8,192;
    32 x 218,112,000 = 6,979,584,000; + final norm 4,096 = 8,030,261,248.
    """
    model = parse(LLAMA_31_8B)
    assert (model.num_heads, model.num_kv_heads, model.head_dim) == (32, 8, 128)
    assert model.kv_bytes_per_token() == 131_072
    assert model.param_count == 8_030_261_248
    assert model.name == "Llama-3.1-8B"


def test_head_dim_from_config_differs_from_hidden_over_heads():
    """Qwen3-4B: 2560 / 32 = 80, but head_dim is 128.

    KV = 2 x 36 layers x 8 x 128 x 2 = 147,456 B per token (92,160 with the wrong 80).
    Attention per layer: q 2560 x 4096 + k,v 2 x 2560 x 1024 + o 4096 x 2560 + q/k norms 2 x 128
    = 10,485,760 + 5,242,880 + 10,485,760 + 256 = 26,214,656.
    """
    model = parse(QWEN3_4B)
    assert model.head_dim == 128
    assert model.kv_bytes_per_token() == 147_456
    assert model.attention_params_per_layer == 26_214_656


def test_qwen3_without_head_dim_is_refused_not_guessed():
    config = {k: v for k, v in QWEN3_4B.items() if k != "head_dim"}
    with pytest.raises(ConfigError, match=r"missing head_dim \(needed for a qwen3 model\)"):
        parse(config)


def test_llama_family_head_dim_absent_is_hidden_over_heads_and_reported():
    """LlamaConfig computes head_dim = hidden_size // num_attention_heads when absent: 4096 / 32 = 128."""
    hf = read_hf_config(LLAMA_31_8B)
    assert hf.fields["head_dim"] == 128
    assert any("head_dim absent" in n for n in hf.notes)


def test_explicit_head_dim_wins_in_llama_family():
    """Mistral-Nemo style: hidden 5120, 32 heads (5120 / 32 = 160) but head_dim 128; 40 layers, 8 KV heads.

    KV = 2 x 40 x 8 x 128 x 2 = 163,840 B per token.
    """
    config = {**MISTRAL_7B_V01, "hidden_size": 5120, "num_hidden_layers": 40, "head_dim": 128, "sliding_window": None}
    model = parse(config)
    assert model.head_dim == 128
    assert model.kv_bytes_per_token() == 163_840


def test_sliding_window_model_past_its_window():
    """Mistral-7B-v0.1 slides every layer over 4,096 tokens: 131,072 B/token x min(ctx, 4096).

    8,192 tokens hold 4,096 x 131,072 = 536,870,912 B (not 1,073,741,824); 1,000 tokens hold 131,072,000.
    """
    model = parse(MISTRAL_7B_V01)
    assert model.layer_windows == {4096: 32}
    assert model.kv_cache_bytes(8192) == 536_870_912
    assert model.kv_cache_bytes(1000) == 131_072_000


def test_gemma2_interleaved_windows_past_the_window():
    """Gemma-2-9B: 42 layers alternate sliding (4,096) and full, layer 0 sliding: 21 + 21.

    Per layer per token 2 x 8 x 256 x 2 = 8,192 B. At 8,192 tokens:
    21 x 8,192 x 8,192 (full) + 21 x 8,192 x 4,096 (sliding) = 1,409,286,144 + 704,643,072 = 2,113,929,216.
    """
    model = parse(GEMMA_2_9B_CONFIG)
    assert model.sliding_layers[:4] == (True, False, True, False)
    assert model.layer_windows == {4096: 21, None: 21}
    assert model.kv_cache_bytes(8192) == 2_113_929_216
    assert model.kv_cache_bytes(4096) == 42 * 8192 * 4096  # below the window every layer holds everything


def test_gemma3_five_sliding_one_full():
    """Gemma-3-1B: 26 layers, sliding_window_pattern 6: layers 5, 11, 17, 23 are full (4), 22 slide over 512.

    Per layer per token 2 x 1 x 256 x 2 = 1,024 B. At 4,096 tokens:
    22 x 1,024 x 512 + 4 x 1,024 x 4,096 = 11,534,336 + 16,777,216 = 28,311,552 B.
    Tied embeddings (Gemma3TextConfig default), 4 norms a layer, q/k norms.
    """
    model = parse(GEMMA_3_1B)
    assert model.layer_windows == {512: 22, None: 4}
    assert [i for i, s in enumerate(model.sliding_layers) if not s] == [5, 11, 17, 23]
    assert model.kv_cache_bytes(4096) == 28_311_552
    assert model.tie_word_embeddings and model.norms_per_layer == 4 and model.qk_norm


def test_explicit_layer_types_win():
    config = {**GEMMA_3_1B, "num_hidden_layers": 4,
              "layer_types": ["full_attention", "sliding_attention", "sliding_attention", "full_attention"]}
    model = parse(config)
    assert model.sliding_layers == (False, True, True, False)


def test_qwen2_slides_from_max_window_layers_only_when_enabled():
    base = {"model_type": "qwen2", "hidden_size": 896, "intermediate_size": 4864, "num_attention_heads": 14,
            "num_hidden_layers": 4, "num_key_value_heads": 2, "vocab_size": 151936, "sliding_window": 1024,
            "max_window_layers": 2, "use_sliding_window": False}
    assert parse(base).sliding_window is None
    model = parse({**base, "use_sliding_window": True})
    assert model.sliding_layers == (False, False, True, True)
    assert model.attention_bias  # Qwen2's q/k/v projections always carry biases


def test_moe_active_vs_resident_and_distinct_experts_per_decode_step():
    """Mixtral-8x7B: 8 experts of 3 x 4096 x 14336 = 176,160,768 each, 2 per token, 32 layers.

    Resident 46,702,792,704; active = resident - 32 x 6 x 176,160,768 = 12,879,925,248.
    Decode at batch B reads E (1 - (1 - k/E)^B) experts a layer: B=1: 2; B=4: 8 (1 - 0.75^4)
    = 8 x 0.68359375 = 5.46875; weight bytes read at B=4 = (resident - 32 x (8 - 5.46875) x 176,160,768) x 2.
    """
    model = parse(MIXTRAL_8X7B)
    assert model.param_count == 46_702_792_704
    assert model.active_param_count == 12_879_925_248
    assert model.expected_distinct_experts(1) == pytest.approx(2.0)
    assert model.expected_distinct_experts(4) == pytest.approx(5.46875)
    assert model.weights_read_per_step(4) == pytest.approx((46_702_792_704 - 32 * 2.53125 * 176_160_768) * 2)
    assert model.weights_read_per_step(10_000) == pytest.approx(model.weight_bytes(), rel=1e-9)


def test_qwen3_moe_total_and_active():
    """Qwen3-30B-A3B: 48 layers, 128 experts of 3 x 2048 x 768 = 4,718,592, top-8, router 2048 x 128.

    Attention a layer: q 2048 x 4096 + k,v 2 x 2048 x 512 + o 4096 x 2048 + q/k norms 2 x 128
    = 8,388,608 + 2,097,152 + 8,388,608 + 256 = 18,874,624.
    Layer, resident: 18,874,624 + 262,144 + 128 x 4,718,592 + 2 x 2048 = 623,120,640; x 48 = 29,909,790,720;
    + embed, head 2 x 151,936 x 2048 = 622,329,856 + final norm 2,048 = 30,532,122,624 (published 30.5 B).
    Active layer: 18,874,624 + 262,144 + 8 x 4,718,592 + 4,096 = 56,889,600; x 48 + 622,331,904 = 3,353,032,704
    (published 3.3 B).
    """
    model = parse(QWEN3_30B_A3B)
    assert model.param_count == 30_532_122_624
    assert model.active_param_count == 3_353_032_704


def test_deepseek_v3_latent_kv_cache_per_token():
    """MLA caches kv_lora_rank + qk_rope_head_dim = 512 + 64 = 576 elements per layer per token:
    61 x 576 x 2 B = 70,272 B. Per-head K and V would be 61 x 128 x (192 + 128) x 2 = 4,997,120 B (71x).
    """
    model = parse(DEEPSEEK_V3_CONFIG)
    assert model.is_mla
    assert model.kv_elements_per_token_per_layer == 576
    assert model.kv_bytes_per_token() == 70_272
    assert 61 * 128 * (192 + 128) * 2 / model.kv_bytes_per_token() == pytest.approx(71.1, abs=0.05)


def test_deepseek_v3_params_total_and_active():
    """DeepSeek-V3 main model (the 14 B MTP module is not counted; 671 B / 37 B published).

    MLA a layer: 7168 x 1536 + 1536 + 1536 x 128 x 192 + 7168 x 576 + 512 + 512 x 128 x 256 + 128 x 128 x 7168
    = 11,010,048 + 1,536 + 37,748,736 + 4,128,768 + 512 + 16,777,216 + 117,440,512 = 187,107,328.
    Expert 3 x 7168 x 2048 = 44,040,192; router 7168 x 256 = 1,835,008; dense MLP 3 x 7168 x 18432 = 396,361,728.
    Total: 58 x (1,835,008 + 257 x 44,040,192) + 3 x 396,361,728 + 61 x (187,107,328 + 14,336)
    + 2 x 129,280 x 7168 + 7168 = 656,569,532,416 + 1,189,085,184 + 11,414,421,504 + 1,853,358,080 + 7,168
    = 671,026,404,352. Active: 9 experts instead of 257: 58 x 398,196,736 = 23,095,410,688 in place of the
    MoE term: 37,552,282,624.
    """
    model = parse(DEEPSEEK_V3_CONFIG)
    assert model.attention_params_per_layer == 187_107_328
    assert model.param_count == 671_026_404_352
    assert model.active_param_count == 37_552_282_624
    notes = parse_hf_config(json.dumps(DEEPSEEK_V3_CONFIG)).notes
    assert any("multi-token-prediction" in n for n in notes)


def test_multimodal_gemma3_reads_text_config_with_class_defaults_reported():
    """The gemma-3-27b-it config.json leaves vocab_size and sliding_window_pattern to Gemma3TextConfig."""
    text = {"model_type": "gemma3_text", "hidden_size": 5376, "intermediate_size": 21504, "num_attention_heads": 32,
            "num_hidden_layers": 62, "num_key_value_heads": 16, "head_dim": 128, "sliding_window": 1024}
    parsed = parse_hf_config(json.dumps({"model_type": "gemma3", "text_config": text, "vision_config": {}}))
    assert parsed.model.vocab_size == 262_208
    assert parsed.model.layer_windows == {1024: 52, None: 10}
    notes = " ".join(parsed.notes)
    assert "vocab_size absent" in notes and "sliding_window_pattern absent" in notes and "vision" in notes


# ---- the link encoding -------------------------------------------------------------------------------

@pytest.mark.parametrize("config", [LLAMA_31_8B, QWEN3_4B, GEMMA_3_1B, DEEPSEEK_V3_CONFIG, QWEN3_30B_A3B])
def test_normalized_encoding_reads_back_to_the_same_model(config):
    first = parse_hf_config(json.dumps(config))
    again = parse_hf_config(first.encoded)
    assert again.model == first.model
    assert len(first.encoded) < 1200  # fits a link comfortably
    assert "rope_scaling" not in decode_json_text(first.encoded, what="x")  # only the fields that were read


def test_plain_json_and_base64url_are_both_accepted():
    text = json.dumps(LLAMA_31_8B)
    b64 = base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")
    assert parse_hf_config(b64).model == parse_hf_config(text).model == parse_hf_config(encode_json(LLAMA_31_8B)).model


# ---- malformed and hostile configs ---------------------------------------------------------------------

@pytest.mark.parametrize(("text", "message"), [
    ("", "JSON object or its base64url"),
    ("[1, 2]", "JSON object or its base64url"),
    ("{", "not valid JSON"),
    ('{"model_type": "llama", "hidden_size": NaN}', "NaN is not a JSON number"),
    ("{}", "has no model_type"),
    ('{"model_type": "gpt_neox", "hidden_size": 4096}', "gpt_neox.*not an architecture"),
    ('{"model_type": ["llama"]}', "not an architecture"),
    ('{"model_type": "gemma3"}', "needs a text_config"),
    ("not%base64!", "JSON object or its base64url"),
    ("A", "not valid base64url"),
    ("_w", "not valid base64url"),  # decodes to 0xFF, not UTF-8
])
def test_unreadable_documents_are_refused_with_the_reason(text, message):
    with pytest.raises(ConfigError, match=message):
        parse_hf_config(text)


def test_missing_fields_are_all_named():
    with pytest.raises(ConfigError) as exc:
        parse({"model_type": "llama", "hidden_size": 4096})
    msg = str(exc.value)
    for field in ("num_hidden_layers", "num_attention_heads", "num_key_value_heads", "intermediate_size", "vocab_size"):
        assert field in msg
    assert "hidden_size," not in msg.split("missing")[1]


def test_mla_fields_missing_are_named():
    config = {k: v for k, v in DEEPSEEK_V3_CONFIG.items() if k not in ("kv_lora_rank", "n_shared_experts")}
    with pytest.raises(ConfigError, match="missing kv_lora_rank, n_shared_experts"):
        parse(config)


@pytest.mark.parametrize(("field", "value"), [
    ("hidden_size", -4096), ("hidden_size", 0), ("num_hidden_layers", 10**9), ("vocab_size", 4096.0),
    ("num_attention_heads", True), ("num_key_value_heads", "8"), ("intermediate_size", None),
    ("intermediate_size", [14336]),
])
def test_bad_sizes_are_refused_with_field_and_range(field, value):
    with pytest.raises(ConfigError, match=field):
        parse({**LLAMA_31_8B, field: value})


def test_range_is_in_the_message():
    with pytest.raises(ConfigError, match=r"hidden_size must be an integer from 1 to 131,072, got -1"):
        parse({**LLAMA_31_8B, "hidden_size": -1})


def test_absurd_but_in_bounds_sizes_are_refused_by_the_parameter_cap():
    config = {**LLAMA_31_8B, "num_hidden_layers": 1024, "hidden_size": 131072, "num_attention_heads": 4096,
              "num_key_value_heads": 4096, "head_dim": 4096, "intermediate_size": 1 << 20, "vocab_size": 1 << 22}
    with pytest.raises(ConfigError, match="parameters; the limit is 1e\\+14"):
        parse(config)


@pytest.mark.parametrize(("change", "message"), [
    ({"num_key_value_heads": 6}, "num_key_value_heads \\(6\\) must divide num_attention_heads \\(32\\)"),
    ({"hidden_size": 4095}, "head_dim is absent and hidden_size \\(4095\\)"),
    ({"mlp_bias": True}, "mlp_bias"),
    ({"tie_word_embeddings": "yes"}, "tie_word_embeddings must be true or false"),
])
def test_inconsistent_llama_configs(change, message):
    with pytest.raises(ConfigError, match=message):
        parse({**LLAMA_31_8B, **change})


@pytest.mark.parametrize(("change", "message"), [
    ({"num_experts_per_tok": 9}, "num_experts_per_tok must be between 1 and num_experts"),
    ({"first_k_dense_replace": 62}, "cannot exceed num_hidden_layers"),
    ({"moe_layer_freq": 2}, "moe_layer_freq"),
])
def test_inconsistent_moe_configs(change, message):
    config = {**DEEPSEEK_V3_CONFIG, **change}
    if "num_experts_per_tok" in change:
        config = {**MIXTRAL_8X7B, **change}
    with pytest.raises(ConfigError, match=message):
        parse(config)


def test_unmodelled_layouts_are_refused():
    with pytest.raises(ConfigError, match="decoder_sparse_step"):
        parse({**QWEN3_30B_A3B, "decoder_sparse_step": 2})
    with pytest.raises(ConfigError, match="mlp_only_layers"):
        parse({**QWEN3_30B_A3B, "mlp_only_layers": [0]})
    with pytest.raises(ConfigError, match="other attention kinds"):
        parse({**GEMMA_3_1B, "num_hidden_layers": 2, "layer_types": ["chunked_attention", "full_attention"]})
    with pytest.raises(ConfigError, match="layer_types has 3 entries; num_hidden_layers is 26"):
        parse({**GEMMA_3_1B, "layer_types": ["full_attention"] * 3})


def test_megabytes_of_json_are_refused_before_parsing():
    padding = {"model_type": "llama", "junk": "x" * (2 * MAX_CONFIG_BYTES)}
    with pytest.raises(ConfigError, match="the limit is 32,768 bytes"):
        parse_hf_config(json.dumps(padding))
    with pytest.raises(ConfigError, match="characters; the limit"):
        parse_hf_config("{" + " " * 5_000_000 + "}")


def test_deep_nesting_is_refused():
    with pytest.raises(ConfigError, match="nested too deeply|not valid JSON"):
        parse_hf_config('{"a":' + "[" * 15_000 + "]" * 15_000 + "}")


@settings(max_examples=200, deadline=None)
@given(st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=24), children, max_size=6),
    max_leaves=20,
))
def test_any_json_is_read_or_refused_with_config_error(value):
    """Junk never escapes as another exception (which the server would turn into a 500)."""
    for doc in (value, {**LLAMA_31_8B, "hidden_size": value}, {"model_type": "deepseek_v3", "n_routed_experts": value}):
        try:
            parse_hf_config(json.dumps(doc))
        except ConfigError:
            pass


# ---- files for pdlab serve --model-config ------------------------------------------------------------------

def test_load_model_config_takes_its_id_from_name_or_path(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(LLAMA_31_8B))
    model = load_model_config(path)
    assert model.id == "llama-3.1-8b" and model.name == "Llama-3.1-8B"
    assert "config.json" in model.source


def test_load_model_config_without_name_uses_the_folder(tmp_path):
    folder = tmp_path / "My Model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(QWEN3_4B))
    assert load_model_config(folder / "config.json").id == "my-model"


def test_load_model_config_errors(tmp_path):
    with pytest.raises(ConfigError, match="cannot read"):
        load_model_config(tmp_path / "missing.json")
    big = tmp_path / "big.json"
    big.write_text(json.dumps({"model_type": "llama", "x": "y" * 200_000}))
    with pytest.raises(ConfigError, match="limit"):
        load_model_config(big)

"""Cost model: FLOPs, bytes and times of one step, worked by hand from the formulas."""

import numpy as np
import pytest

from engine.calibration import OpRates, resolve_profile
from engine.cost import causal_pairs, kv_heads_fraction, step_cost
from engine.hardware import get_gpu
from engine.models import get_model

H100 = get_gpu("h100-sxm")
PROFILE = resolve_profile("datasheet", H100)
LLAMA8B = get_model("llama-3.1-8b")
# Linear weights one token multiplies by: 32 x (41,943,040 attention + 176,160,768 MLP) = 6,979,321,856.
LLAMA8B_LINEAR = 6_979_321_856
LLAMA8B_HEAD = 128_256 * 4096


def test_causal_pairs_by_hand():
    """q new tokens after c cached ones: query j sees c + j + 1 keys (bottom-right causal)."""
    assert causal_pairs(4, 0) == 1 + 2 + 3 + 4
    assert causal_pairs(3, 5) == 6 + 7 + 8
    assert causal_pairs(1, 2000) == 2001
    assert causal_pairs(3, 5, window=7) == 6 + 7 + 7
    assert causal_pairs(3, 50, window=7) == 7 * 3


def test_llama_8b_linear_params_per_token():
    assert LLAMA8B.linear_params_per_token == LLAMA8B_LINEAR


def test_decode_step_flops_by_hand():
    """One decode token at 2,000 tokens of history, Llama-3.1-8B:

    gemm: 2 x 6,979,321,856 (2N rule) + LM head 2 x 128,256 x 4,096 = 15,009,316,864 FLOPs;
    attention: 2,001 keys x 32 layers x 2 x 32 heads x (128 + 128) = 1,049,100,288 FLOPs.
    """
    cost = step_cost(LLAMA8B, PROFILE, [1], [2000])
    assert float(cost.flops["gemm"]) == 2 * LLAMA8B_LINEAR + 2 * LLAMA8B_HEAD == 15_009_316_864
    assert float(cost.flops["decode_attention"]) == 2001 * 32 * 2 * 32 * 256 == 1_049_100_288
    assert float(cost.flops["prefill_attention"]) == 0


def test_decode_reads_each_sequences_kv():
    """Decode attention bytes: every key's K and V (131,072 B per token over all layers) + Q and O.

    2,001 tokens x 131,072 = 262,275,072; Q + O = 32 layers x 32 heads x 256 x 2 bytes = 524,288.
    """
    cost = step_cost(LLAMA8B, PROFILE, [1], [2000])
    assert float(cost.bytes["decode_attention"]) == 2001 * 131_072 + 32 * 32 * 256 * 2


def test_prefill_flops_scale_with_prompt():
    """A 1,000-token prefill: 2 x 1,000 x linear weights + one sampled LM-head row."""
    cost = step_cost(LLAMA8B, PROFILE, [1000], [0])
    assert float(cost.flops["gemm"]) == 2 * 1000 * LLAMA8B_LINEAR + 2 * LLAMA8B_HEAD
    pairs = 1000 * 1001 / 2
    assert float(cost.flops["prefill_attention"]) == pairs * 32 * 2 * 32 * 256


def test_seq_counts_equal_repeated_sequences():
    many = step_cost(LLAMA8B, PROFILE, np.ones(30), np.full(30, 2000))
    grouped = step_cost(LLAMA8B, PROFILE, [1], [2000], seq_counts=[30])
    assert float(grouped.total_time_s) == pytest.approx(float(many.total_time_s))
    assert float(grouped.total_flops) == pytest.approx(float(many.total_flops))


def test_steps_broadcast_along_leading_axes():
    batch = step_cost(LLAMA8B, PROFILE, np.ones((3, 1)), [[100], [1000], [10000]])
    single = [float(step_cost(LLAMA8B, PROFILE, [1], [c]).total_time_s) for c in (100, 1000, 10000)]
    assert batch.total_time_s.tolist() == pytest.approx(single)


def test_absent_sequences_cost_nothing():
    cost = step_cost(LLAMA8B, PROFILE, [0], [5000])
    assert float(cost.total_time_s) == 0


def test_tensor_parallel_splits_flops_and_adds_all_reduce():
    one = step_cost(LLAMA8B, PROFILE, [1], [2000])
    two = step_cost(LLAMA8B, PROFILE, [1], [2000], tp=2, gpu=H100)
    assert float(two.flops["gemm"]) == pytest.approx(float(one.flops["gemm"]) / 2)
    assert float(two.time_s["all_reduce"]) > 0
    assert "all_reduce" not in one.time_s
    with pytest.raises(ValueError, match="gpu"):
        step_cost(LLAMA8B, PROFILE, [1], [2000], tp=2)
    with pytest.raises(ValueError, match="divide"):
        step_cost(get_model("qwen2.5-7b"), PROFILE, [1], [10], tp=8, gpu=H100)  # 28 heads


def test_kv_heads_fraction_replicates_when_fewer_kv_heads_than_gpus():
    """8 KV heads over 4 GPUs: 2 each (1/4). Qwen2.5-7B's 4 KV heads over 8 GPUs: 1 each (1/4 per GPU)."""
    assert kv_heads_fraction(LLAMA8B, 4) == 0.25
    assert kv_heads_fraction(get_model("qwen2.5-7b"), 8) == 0.25


def test_expected_distinct_experts_by_hand():
    """Mixtral (E = 8, k = 2): 1 token -> 2 experts; 4 tokens -> 8 (1 - 0.75^4) = 5.46875; many -> 8."""
    mixtral = get_model("mixtral-8x7b")
    assert mixtral.expected_distinct_experts(1) == pytest.approx(2)
    assert mixtral.expected_distinct_experts(4) == pytest.approx(5.46875)
    assert mixtral.expected_distinct_experts(1000) == pytest.approx(8)
    assert LLAMA8B.expected_distinct_experts(4) == 0


def test_moe_decode_reads_more_experts_at_larger_batch():
    mixtral = get_model("mixtral-8x7b")
    expert_bytes = mixtral.expert_params * 2 * mixtral.num_moe_layers
    b1 = step_cost(mixtral, PROFILE, [1], [100])
    b4 = step_cost(mixtral, PROFILE, [1], [100], seq_counts=[4])
    growth = float(b4.bytes["gemm"] - b1.bytes["gemm"])  # 3 more tokens' activations are < 0.01%
    assert growth == pytest.approx((5.46875 - 2) * expert_bytes, rel=0.01)


def test_sliding_window_caps_decode_reads():
    mistral = get_model("mistral-7b-v0.1")
    at_window = step_cost(mistral, PROFILE, [1], [4095])
    far_past = step_cost(mistral, PROFILE, [1], [50_000])
    assert float(far_past.bytes["decode_attention"]) == float(at_window.bytes["decode_attention"])


def test_op_time_is_roofline_max_plus_launch():
    """1e12 FLOPs at 1e12 FLOP/s = 1 s; 1e9 bytes at 1e9 B/s = 1 s; max + 3 launches x 1e-6 s."""
    rates = OpRates(flops_per_s=1e12, bytes_per_s=1e9, launch_overhead_s=1e-6)
    assert float(rates.time_s(1e12, 5e8, 3)) == pytest.approx(1 + 3e-6)
    assert float(rates.time_s(1e9, 2e9, 1)) == pytest.approx(2 + 1e-6)
    assert float(rates.time_s(0, 0, 5)) == 0


def test_negative_tokens_refused():
    with pytest.raises(ValueError, match=">= 0"):
        step_cost(LLAMA8B, PROFILE, [-1], [0])

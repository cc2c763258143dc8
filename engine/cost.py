"""FLOPs, bytes and time of one engine step for a mixed batch.

A step runs a batch of sequences through the model once. Sequence i brings
``q_tokens[i]`` new tokens (a prefill chunk, one decode token, or k + 1
tokens to verify) over ``context_tokens[i]`` tokens already in its KV cache.
Arrays broadcast: the last axis is the sequences of one step, any leading
axes are independent steps (the timeline lab costs thousands of steps in one
call). A sequence with q = 0 is absent from the step.

Counted per step, per GPU of a tensor-parallel group of ``tp`` GPUs:

* ``gemm``: the linear layers. FLOPs = 2 x tokens x weights touched (the 2N
  rule; JAX scaling book, transformers.md); bytes = weights read once per
  step (+ inputs and outputs, the matmul rule (MK + KN + MN) x b). An MoE
  layer reads only the experts some token of the step was routed to
  (``ModelConfig.expected_distinct_experts``). The LM head runs for sampled
  positions only.
* ``prefill_attention`` (q > 1) and ``decode_attention`` (q = 1): 2 x heads x
  (qk_dim + v_dim) FLOPs per (query, key) pair per layer, causal and
  bottom-right aligned, so q new tokens over c cached ones form
  q x c + q (q + 1) / 2 pairs (kernels.md 4.7), capped by any sliding window;
  bytes = the K and V (or MLA latent) of every key read once, plus Q and O.
* ``kv_store``: the new tokens' K and V read and written into the cache.
* ``elementwise``: RMSNorms, residual adds, the gated activation.
* all-reduce: two per layer when tp > 1 (after attention and after the MLP),
  ring algorithm: 2 (tp - 1) / tp x message / link bandwidth + latency.

Time per op class is the profile's ``OpRates.time_s`` (roofline max of
compute and memory time, plus launch overheads).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.calibration import OP_CLASSES, Profile
from engine.hardware import GPU
from engine.models import ModelConfig

KERNELS_PER_LAYER = {"gemm": 4, "prefill_attention": 1, "decode_attention": 1, "kv_store": 1, "elementwise": 4}


@dataclass(frozen=True)
class StepCost:
    """Per-op-class FLOPs, bytes and seconds of one or many steps (arrays of the leading shape)."""

    flops: dict[str, np.ndarray]
    bytes: dict[str, np.ndarray]
    time_s: dict[str, np.ndarray]

    @property
    def total_time_s(self) -> np.ndarray:
        """Step time, seconds."""
        return sum(self.time_s.values())

    @property
    def total_flops(self) -> np.ndarray:
        """FLOPs of the step (per GPU)."""
        return sum(self.flops.values())

    @property
    def total_bytes(self) -> np.ndarray:
        """Bytes moved to or from device memory by the step (per GPU)."""
        return sum(self.bytes.values())

    @property
    def flop_per_byte(self) -> np.ndarray:
        """Arithmetic intensity of the whole step, FLOP/byte."""
        return self.total_flops / np.maximum(self.total_bytes, 1.0)


def causal_pairs(q_tokens, context_tokens, window: int | None = None) -> np.ndarray:
    """(query, key) pairs attended by q new tokens after c cached ones, causal.

    Query j (0-based) of the chunk sees c + j + 1 keys, at most ``window``.
    Without a window: q c + q (q + 1) / 2.
    """
    q = np.asarray(q_tokens, dtype=float)
    c = np.asarray(context_tokens, dtype=float)
    if window is None:
        return q * c + q * (q + 1) / 2
    first = c + 1  # keys seen by the first new token
    uncapped = np.clip(window - first + 1, 0, q)  # queries whose count stays <= window
    return uncapped * first + uncapped * (uncapped - 1) / 2 + (q - uncapped) * window


def kv_heads_fraction(model: ModelConfig, tp: int) -> float:
    """Share of the KV cache one GPU holds under tensor parallelism.

    KV heads are split across GPUs; when there are fewer KV heads than GPUs,
    each GPU keeps one replica (vLLM's behaviour). MLA's latent is replicated.
    """
    if model.is_mla:
        return 1.0
    return max(model.num_kv_heads // tp, 1) / model.num_kv_heads


def step_cost(
    model: ModelConfig,
    profile: Profile,
    q_tokens,
    context_tokens,
    *,
    sampled_tokens=None,
    seq_counts=None,
    tp: int = 1,
    gpu: GPU | None = None,
    bytes_per_param: float = 2.0,
    kv_bytes_per_element: float = 2.0,
) -> StepCost:
    """Cost one step (or many, along leading axes) of a mixed prefill/decode batch.

    Args:
        model: the architecture.
        profile: attainable rates per op class.
        q_tokens: new tokens per sequence, shape [..., seqs], >= 0.
        context_tokens: tokens already cached per sequence, same shape, >= 0.
        sampled_tokens: positions needing logits per sequence (default: 1 for
            every present sequence; k + 1 when verifying k drafts).
        seq_counts: how many identical sequences each entry stands for
            (default 1): 30 users at one context length can be one entry.
        tp: tensor-parallel degree; must divide the query heads.
        gpu: the GPU, for its interconnect (needed when tp > 1).
        bytes_per_param, kv_bytes_per_element: 2 for bf16.

    Returns:
        StepCost with arrays of the leading shape ``q_tokens.shape[:-1]``.

    Raises:
        ValueError: negative token counts, or tp that does not divide the heads,
            or tp > 1 without a gpu.
    """
    q = np.asarray(q_tokens, dtype=float)
    c = np.broadcast_to(np.asarray(context_tokens, dtype=float), q.shape)
    if np.any(q < 0) or np.any(c < 0):
        raise ValueError("token counts must be >= 0")
    if model.num_heads % tp:
        raise ValueError(f"tp={tp} must divide the {model.num_heads} query heads")
    if tp > 1 and gpu is None:
        raise ValueError("tp > 1 needs the gpu for its interconnect")
    n = np.ones(q.shape) if seq_counts is None else np.broadcast_to(np.asarray(seq_counts, dtype=float), q.shape)
    present = q > 0
    s = present.astype(float) if sampled_tokens is None else np.asarray(sampled_tokens, dtype=float)
    T = (q * n).sum(axis=-1)
    S = (s * n).sum(axis=-1)
    b, bkv = bytes_per_param, kv_bytes_per_element
    d, L = model.hidden_size, model.num_layers

    flops: dict[str, np.ndarray] = {}
    bytes_: dict[str, np.ndarray] = {}
    launches: dict[str, np.ndarray | float] = {}

    # Linear layers: weights every step touches, plus the experts it routes to.
    shared = model.linear_params_per_token - model.num_moe_layers * model.experts_per_token * model.expert_params
    weights = shared + model.num_moe_layers * model.expected_distinct_experts(T) * model.expert_params
    act = _linear_activation_elements_per_token(model)
    head = model.vocab_size * d
    flops["gemm"] = (2 * T * model.linear_params_per_token + 2 * S * head) / tp
    gemm_bytes = weights * b + T * act * b + np.where(S > 0, head * b, 0.0) + S * (d + model.vocab_size) * b
    bytes_["gemm"] = np.where(T > 0, gemm_bytes, 0.0) / tp
    launches["gemm"] = KERNELS_PER_LAYER["gemm"] * L + 1

    # Attention, split by kernel: prefill (q > 1) and decode (q == 1).
    heads = model.num_heads / tp
    pair_flops = 2 * heads * (model.qk_head_dim + model.attn_v_head_dim)
    kv_frac = kv_heads_fraction(model, tp)
    kv_row_bytes = model.kv_elements_per_token_per_layer * bkv * kv_frac
    qo_bytes = heads * (model.qk_head_dim + model.attn_v_head_dim) * b
    for op, rows in (("prefill_attention", q > 1), ("decode_attention", q == 1)):
        f = np.zeros(q.shape)
        by = np.zeros(q.shape)
        for window, layers in model.layer_windows.items():
            keys = c + q if window is None else np.minimum(c + q, window)
            f = f + layers * pair_flops * causal_pairs(q, c, window)
            by = by + layers * (keys * kv_row_bytes + q * qo_bytes)
        flops[op] = np.where(rows, f * n, 0.0).sum(axis=-1)
        bytes_[op] = np.where(rows, by * n, 0.0).sum(axis=-1)
        launches[op] = KERNELS_PER_LAYER[op] * L

    flops["kv_store"] = np.zeros_like(T)
    bytes_["kv_store"] = 2 * T * L * kv_row_bytes
    launches["kv_store"] = KERNELS_PER_LAYER["kv_store"] * L

    mlp_width = model.intermediate_size
    if model.is_moe:
        mlp_width = (model.experts_per_token + model.num_shared_experts) * (
            model.moe_intermediate_size or model.intermediate_size
        )
    # per layer: 2 RMSNorms (read + write d), 2 residual adds (2 reads + 1 write), SiLU(gate) * up.
    elementwise_elems = 4 * d + 6 * d + 3 * mlp_width
    flops["elementwise"] = np.zeros_like(T)
    bytes_["elementwise"] = T * L * elementwise_elems * b / tp + T * d * b  # + embedding rows gathered
    launches["elementwise"] = KERNELS_PER_LAYER["elementwise"] * L

    time_s = {op: profile.rates(op).time_s(flops[op], bytes_[op], launches[op]) for op in OP_CLASSES}
    if tp > 1:
        message = T * d * b
        per_reduce = profile.fit.all_reduce_latency_s + 2 * (tp - 1) / tp * message / gpu.interconnect_bytes_per_s
        time_s["all_reduce"] = np.where(T > 0, 2 * L * per_reduce, 0.0)
        flops["all_reduce"] = np.zeros_like(T)
        bytes_["all_reduce"] = np.zeros_like(T)
    return StepCost(flops=flops, bytes=bytes_, time_s=time_s)


def _linear_activation_elements_per_token(model: ModelConfig) -> float:
    """Input + output elements of every matmul one token passes through (LM head excluded)."""
    d = model.hidden_size
    if model.is_mla:
        attn = (d + model.num_heads * model.qk_head_dim) + (d + model.kv_lora_rank + model.qk_rope_head_dim)
        attn += model.kv_lora_rank + model.num_heads * (model.qk_nope_head_dim + model.v_head_dim)
        attn += model.num_heads * model.v_head_dim + d
    else:
        q_dim = model.num_heads * model.head_dim
        attn = d + q_dim + 2 * model.num_kv_heads * model.head_dim + q_dim + d
    dense_mlp = 2 * d + 3 * model.intermediate_size  # fused gate+up in: d, out: 2I; down in: I, out: d
    per_expert = 2 * d + 3 * (model.moe_intermediate_size or model.intermediate_size)
    moe_layers = model.num_moe_layers
    mlp = (model.num_layers - moe_layers) * dense_mlp + moe_layers * (
        model.experts_per_token + model.num_shared_experts
    ) * per_expert
    return model.num_layers * attn + mlp

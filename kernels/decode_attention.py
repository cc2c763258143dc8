"""Decode attention: one query token per sequence over a paged KV cache,
split-K (flash-decoding) then a log-sum-exp merge.

Design: Flash-Decoding (Dao, Haziza, Massa, Sizov 2023; kernels.md 4.6) as in
SGLang's two-stage Triton decode kernel (kernels.md 8): stage 1 runs over
``(sequence, kv head x query-head block, split)``; each program packs up to
``_BLOCK_H`` query heads of one KV group into the rows of ``tl.dot`` (which needs
>= 16 rows; kernels.md 7.2), so K/V are read once per group, and folds its
share of the keys into a normalised partial output and its log-sum-exp. A
group larger than ``_BLOCK_H`` takes several head blocks, each within one KV
head (the vllm PR #40792 bug). Stage 2 merges the splits per ``(sequence,
head)``. Empty splits (short sequences) store lse = -inf and weigh 0; a
sequence with no cached tokens gets zeros (kernels.md 7.6, 7.9; CUDA-graph
padding rows have length 0, kernels.md 1.3).
"""

import math

import torch
import triton
import triton.language as tl

from kernels.attention_core import attend_kv_range, interpreting, padded_head_dim, upcast_after_load

_BLOCK_H = 16
_MIN_KEYS_PER_SPLIT = 256
_MAX_SPLITS = 64


@triton.jit
def _decode_split_kernel(
    Q, K, V, Mid_O, Mid_LSE, block_table, cache_seqlens,
    stride_q_seq, stride_q_head,
    stride_kv_block, stride_kv_token, stride_kv_head, stride_table,
    num_heads, qk_scale,
    GROUP: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr,
    BLOCK_H: tl.constexpr, BLOCK_N: tl.constexpr, PAGE_SIZE: tl.constexpr, UPCAST: tl.constexpr,
):
    """Grid ``(sequences, kv heads x head blocks, splits)``: one split's partial output and LSE (log2 units)."""
    seq = tl.program_id(0)
    head_blocks: tl.constexpr = (GROUP + BLOCK_H - 1) // BLOCK_H
    kv_head = tl.program_id(1) // head_blocks
    in_group = (tl.program_id(1) % head_blocks) * BLOCK_H + tl.arange(0, BLOCK_H)
    h_mask = in_group < GROUP
    heads = kv_head * GROUP + in_group
    split = tl.program_id(2)
    num_splits = tl.num_programs(2)

    seqlen = tl.load(cache_seqlens + seq)
    keys_per_split = tl.cdiv(tl.cdiv(seqlen, num_splits), BLOCK_N) * BLOCK_N
    lo = split * keys_per_split
    hi = tl.minimum(lo + keys_per_split, seqlen)

    offs_d = tl.arange(0, BLOCK_D)
    d_mask = offs_d < HEAD_DIM
    seq64 = seq.to(tl.int64)
    q_ptrs = Q + seq64 * stride_q_seq + heads[:, None] * stride_q_head + offs_d[None, :]
    q = tl.load(q_ptrs, mask=h_mask[:, None] & d_mask[None, :], other=0.0)
    if UPCAST:
        q = q.to(tl.float32)

    kv_offset = kv_head * stride_kv_head
    acc = tl.zeros([BLOCK_H, BLOCK_D], dtype=tl.float32)
    m_i = tl.full([BLOCK_H], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_H], dtype=tl.float32)
    last_key = tl.zeros([BLOCK_H], dtype=tl.int32) + hi - 1
    acc, m_i, l_i = attend_kv_range(
        acc, m_i, l_i, q, K + kv_offset, V + kv_offset, 0, block_table + seq64 * stride_table,
        stride_kv_block, stride_kv_token, lo, hi, last_key, offs_d, d_mask, qk_scale,
        BLOCK_N, PAGE_SIZE, True, True, UPCAST)

    # An empty split (lo >= hi) has l_i = 0: it stores o = 0, lse = -inf.
    has_keys = l_i > 0
    out = acc / tl.where(has_keys, l_i, 1.0)[:, None]
    lse = tl.where(has_keys, m_i + tl.math.log2(tl.where(has_keys, l_i, 1.0)), float("-inf"))
    # Mid_O is [batch, heads, splits, HEAD_DIM] and Mid_LSE [batch, heads, splits], both contiguous.
    mid = (seq64 * num_heads + heads) * num_splits + split
    tl.store(Mid_O + mid[:, None] * HEAD_DIM + offs_d[None, :], out, mask=h_mask[:, None] & d_mask[None, :])
    tl.store(Mid_LSE + mid, lse, mask=h_mask)


@triton.jit
def _decode_merge_kernel(
    Mid_O, Mid_LSE, O, stride_o_seq, stride_o_head, num_heads, num_splits,
    HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_S: tl.constexpr,
):
    """Grid ``(sequences, heads)``: the LSE-weighted mean of the splits' partial outputs."""
    seq = tl.program_id(0).to(tl.int64)
    head = tl.program_id(1)
    offs_s = tl.arange(0, BLOCK_S)
    offs_d = tl.arange(0, BLOCK_D)
    d_mask = offs_d < HEAD_DIM
    mid = (seq * num_heads + head) * num_splits + offs_s
    lse = tl.load(Mid_LSE + mid, mask=offs_s < num_splits, other=float("-inf"))
    has_keys = lse > float("-inf")
    part_ptrs = Mid_O + mid[:, None] * HEAD_DIM + offs_d[None, :]
    part = tl.load(part_ptrs, mask=has_keys[:, None] & d_mask[None, :], other=0.0)
    lse_max = tl.max(lse, 0)
    # All splits empty (no cached tokens): weights are all 0 and the output is 0.
    weight = tl.math.exp2(lse - tl.where(lse_max == float("-inf"), 0.0, lse_max))
    total = tl.sum(weight, 0)
    out = tl.sum(weight[:, None] * part, 0) / tl.where(total > 0, total, 1.0)
    tl.store(O + seq * stride_o_seq + head * stride_o_head + offs_d, out.to(O.dtype.element_ty), mask=d_mask)


def default_num_splits(q: torch.Tensor, kv_heads: int, max_context: int) -> int:
    """Splits of the key range per sequence, so that stage 1 fills the device.

    About four programs per streaming multiprocessor (one per CPU "unit" under
    the interpreter, where fewer programs run faster), at least
    ``_MIN_KEYS_PER_SPLIT`` keys per split and at most ``_MAX_SPLITS`` splits.
    ``max_context`` is an upper bound on any sequence's length in tokens (the
    block table's width x block size needs no device sync). Design: SGLang's
    SM-count heuristic (kernels.md 8).
    """
    on_gpu = q.device.type == "cuda" and not interpreting()
    units = torch.cuda.get_device_properties(q.device).multi_processor_count if on_gpu else 1
    programs = q.shape[0] * kv_heads * triton.cdiv(q.shape[1] // kv_heads, _BLOCK_H)
    wanted = triton.cdiv(4 * units, programs)
    return max(1, min(wanted, triton.cdiv(max_context, _MIN_KEYS_PER_SPLIT), _MAX_SPLITS))


def decode_attention(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_table: torch.Tensor,
    cache_seqlens: torch.Tensor,
    softmax_scale: float | None = None,
    num_splits: int | None = None,
) -> torch.Tensor:
    """Attention of one new query token per sequence over its cached keys.

    Args:
        q: [batch, heads, head_dim], fp16/bf16/fp32, head_dim contiguous.
        k_cache, v_cache: [num_blocks, block_size, kv_heads, head_dim], q's
            dtype, equal strides; any block_size >= 1; kv_heads divides heads.
            Slots past a sequence's length and unused blocks are never read
            (they may hold NaN).
        block_table: [batch, max_blocks_per_seq] int32; position p of sequence
            b is slot ``p % block_size`` of block ``block_table[b, p // block_size]``.
        cache_seqlens: [batch] int32 tokens in the cache per sequence (the new
            token's K/V included when it was stored first); 0 gives zeros.
        softmax_scale: defaults to ``1/sqrt(head_dim)``.
        num_splits: key-range splits per sequence; default ``default_num_splits``.

    Returns:
        [batch, heads, head_dim] in q's dtype (fp32 softmax and accumulation).

    Raises:
        ValueError: on mismatched shapes, dtypes, strides or devices, or num_splits < 1.

    Design: Flash-Decoding split-K + LSE merge, SGLang-style GQA head packing
    (kernels.md 4.6, 7.2, 7.9, 8).
    """
    if q.dim() != 3 or k_cache.dim() != 4 or k_cache.shape != v_cache.shape:
        raise ValueError(f"bad shapes: q {tuple(q.shape)}, caches {tuple(k_cache.shape)}, {tuple(v_cache.shape)}")
    batch, heads, head_dim = q.shape
    kv_heads = k_cache.shape[2]
    if k_cache.shape[3] != head_dim or heads % kv_heads:
        raise ValueError(f"kv_heads ({kv_heads}) must divide heads ({heads}) and head dims match")
    if q.dtype not in (torch.float16, torch.bfloat16, torch.float32) or {k_cache.dtype, v_cache.dtype} != {q.dtype}:
        raise ValueError(f"q and caches must share fp16/bf16/fp32, got {q.dtype}, {k_cache.dtype}, {v_cache.dtype}")
    if k_cache.stride() != v_cache.stride() or q.stride(-1) != 1 or k_cache.stride(-1) != 1:
        raise ValueError("caches must share strides, and head_dim must be contiguous")
    if block_table.dtype != torch.int32 or block_table.dim() != 2 or block_table.shape[0] != batch:
        raise ValueError("block_table must be int32 [batch, max_blocks_per_seq]")
    if cache_seqlens.dtype != torch.int32 or cache_seqlens.shape != (batch,):
        raise ValueError("cache_seqlens must be int32 [batch]")
    if len({t.device for t in (q, k_cache, v_cache, block_table, cache_seqlens)}) != 1:
        raise ValueError("all tensors must be on one device")
    if num_splits is None:
        num_splits = default_num_splits(q, kv_heads, block_table.shape[1] * k_cache.shape[1])
    if num_splits < 1:
        raise ValueError(f"num_splits must be >= 1, got {num_splits}")
    out = torch.empty_like(q)
    if batch == 0:
        return out

    scale = softmax_scale if softmax_scale is not None else 1.0 / math.sqrt(head_dim)
    block_d = padded_head_dim(head_dim)
    on_gpu = q.device.type == "cuda"
    mid_o = torch.empty(batch, heads, num_splits, head_dim, dtype=torch.float32, device=q.device)
    mid_lse = torch.empty(batch, heads, num_splits, dtype=torch.float32, device=q.device)
    group = heads // kv_heads
    _decode_split_kernel[(batch, kv_heads * triton.cdiv(group, _BLOCK_H), num_splits)](
        q, k_cache, v_cache, mid_o, mid_lse, block_table, cache_seqlens,
        q.stride(0), q.stride(1),
        k_cache.stride(0), k_cache.stride(1), k_cache.stride(2), block_table.stride(0),
        heads, scale * math.log2(math.e),
        GROUP=group, HEAD_DIM=head_dim, BLOCK_D=block_d, BLOCK_H=_BLOCK_H,
        BLOCK_N=64 if on_gpu else 16, PAGE_SIZE=k_cache.shape[1], UPCAST=upcast_after_load(q.dtype),
        num_warps=4, num_stages=2 if on_gpu else 1,
    )
    _decode_merge_kernel[(batch, heads)](
        mid_o, mid_lse, out, out.stride(0), out.stride(1), heads, num_splits,
        HEAD_DIM=head_dim, BLOCK_D=block_d, BLOCK_S=triton.next_power_of_2(num_splits),
    )
    return out

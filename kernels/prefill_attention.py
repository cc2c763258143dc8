"""Varlen causal prefill attention, with or without earlier context in a
paged KV cache (chunked prefill / prefix-cache hits).

Design: FlashAttention-2 forward (arXiv 2307.08691; kernels.md 4.4) over packed
varlen sequences as flash-attn's ``flash_attn_varlen_func`` takes them (kernels.md
6.1); the grid is ``(query block, head, sequence)`` as in SGLang's extend
kernel, and the key loop has an unmasked off-diagonal stage and a masked
diagonal stage as in the Triton fused-attention tutorial (kernels.md 8). GQA
reads K/V head ``head // (heads / kv_heads)``. The causal mask is aligned
bottom-right, as flash-attn's: new token i of a sequence with ``c`` cached
tokens sees keys ``0 .. c + i`` (kernels.md 7.10).

Chunked prefill takes the new tokens' K/V from the cache: store them first with
``kernels.store_kvcache.store_kvcache`` (as vLLM and nano-vllm do), so that one
block table addresses all ``c + q`` keys.
"""

import math
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from kernels.attention_core import attend_kv_range, padded_head_dim, upcast_after_load


@dataclass(frozen=True)
class _Config:
    block_m: int
    block_n: int
    num_warps: int
    num_stages: int


def _config(device: torch.device, block_d: int) -> _Config:
    """Fixed tile configs: no autotuning (kernels.md 7.12). The CUDA ones are
    the fused-attention tutorial's Hopper choices for head dim <= 128."""
    if device.type != "cuda":
        return _Config(block_m=16, block_n=16, num_warps=1, num_stages=1)
    if block_d <= 128:
        return _Config(block_m=128, block_n=64, num_warps=8, num_stages=3)
    return _Config(block_m=64, block_n=32, num_warps=4, num_stages=2)


@triton.jit
def _prefill_kernel(
    Q, K, V, O, cu_seqlens_q, context_lens, block_table,
    stride_q_token, stride_q_head, stride_o_token, stride_o_head,
    stride_kv_block, stride_kv_token, stride_kv_head, stride_table,
    qk_scale,
    GROUP: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, PAGE_SIZE: tl.constexpr,
    PAGED: tl.constexpr, UPCAST: tl.constexpr,
):
    """Grid ``(query blocks, heads, sequences)``: BLOCK_M new tokens of one head."""
    # Launch the last (most keys) query blocks first: causal work grows with the index.
    pid_m = tl.num_programs(0) - 1 - tl.program_id(0)
    head = tl.program_id(1)
    seq = tl.program_id(2)
    q_start = tl.load(cu_seqlens_q + seq)
    q_len = tl.load(cu_seqlens_q + seq + 1) - q_start
    if pid_m * BLOCK_M >= q_len:
        return
    if PAGED:
        context = tl.load(context_lens + seq)
        block_row = block_table + seq.to(tl.int64) * stride_table
    else:
        context = 0
        block_row = block_table

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    m_mask = offs_m < q_len
    d_mask = offs_d < HEAD_DIM
    tokens = (q_start + offs_m).to(tl.int64)
    q_ptrs = Q + tokens[:, None] * stride_q_token + head * stride_q_head + offs_d[None, :]
    q = tl.load(q_ptrs, mask=m_mask[:, None] & d_mask[None, :], other=0.0)
    if UPCAST:
        q = q.to(tl.float32)

    kv_offset = (head // GROUP) * stride_kv_head
    acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    last_key = context + offs_m
    # Keys below `band` are visible to every row of this block.
    band = context + pid_m * BLOCK_M
    band_tiles_end = (band // BLOCK_N) * BLOCK_N
    hi = tl.minimum(context + q_len, band + BLOCK_M)
    acc, m_i, l_i = attend_kv_range(
        acc, m_i, l_i, q, K + kv_offset, V + kv_offset, q_start, block_row,
        stride_kv_block, stride_kv_token, 0, band_tiles_end, last_key, offs_d, d_mask, qk_scale,
        BLOCK_N, PAGE_SIZE, PAGED, False, UPCAST)
    acc, m_i, l_i = attend_kv_range(
        acc, m_i, l_i, q, K + kv_offset, V + kv_offset, q_start, block_row,
        stride_kv_block, stride_kv_token, band_tiles_end, hi, last_key, offs_d, d_mask, qk_scale,
        BLOCK_N, PAGE_SIZE, PAGED, True, UPCAST)

    # Every row sees at least key 0, so l_i >= 1.
    out = acc / l_i[:, None]
    o_ptrs = O + tokens[:, None] * stride_o_token + head * stride_o_head + offs_d[None, :]
    tl.store(o_ptrs, out.to(O.dtype.element_ty), mask=m_mask[:, None] & d_mask[None, :])


def _check_common(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens: torch.Tensor) -> None:
    if q.dim() != 3 or k.dim() != v.dim() or k.shape != v.shape:
        raise ValueError(f"bad shapes: q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}")
    if q.dtype not in (torch.float16, torch.bfloat16, torch.float32) or k.dtype != q.dtype or v.dtype != q.dtype:
        raise ValueError(f"q, k, v must share one of fp16/bf16/fp32, got {q.dtype}, {k.dtype}, {v.dtype}")
    heads, head_dim = q.shape[1], q.shape[2]
    kv_heads = k.shape[-2]
    if k.shape[-1] != head_dim or heads % kv_heads:
        raise ValueError(f"kv_heads ({kv_heads}) must divide heads ({heads}) and head dims match")
    if k.stride() != v.stride() or q.stride(-1) != 1 or k.stride(-1) != 1:
        raise ValueError("k and v must share strides, and head_dim must be contiguous in q, k, v")
    if cu_seqlens.dtype != torch.int32 or cu_seqlens.dim() != 1:
        raise ValueError("cu_seqlens must be a 1-D int32 tensor")
    if len({t.device for t in (q, k, v, cu_seqlens)}) != 1:
        raise ValueError("all tensors must be on one device")


def _launch(q, k, v, cu_seqlens_q, max_seqlen_q, softmax_scale, context_lens, block_table):
    paged = block_table is not None
    out = torch.empty_like(q)
    batch = cu_seqlens_q.numel() - 1
    heads, head_dim = q.shape[1], q.shape[2]
    if batch == 0 or max_seqlen_q == 0:
        return out
    scale = softmax_scale if softmax_scale is not None else 1.0 / math.sqrt(head_dim)
    block_d = padded_head_dim(head_dim)
    cfg = _config(q.device, block_d)
    grid = (triton.cdiv(max_seqlen_q, cfg.block_m), heads, batch)
    _prefill_kernel[grid](
        q, k, v, out, cu_seqlens_q, context_lens, block_table,
        q.stride(0), q.stride(1), out.stride(0), out.stride(1),
        k.stride(0) if paged else 0, k.stride(-3), k.stride(-2),
        block_table.stride(0) if paged else 0,
        scale * math.log2(math.e),
        GROUP=heads // k.shape[-2], HEAD_DIM=head_dim, BLOCK_D=block_d,
        BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n,
        PAGE_SIZE=k.shape[1] if paged else 1, PAGED=paged,
        UPCAST=upcast_after_load(q.dtype),
        num_warps=cfg.num_warps, num_stages=cfg.num_stages,
    )
    return out


def prefill_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    cu_seqlens: torch.Tensor,
    max_seqlen: int,
    softmax_scale: float | None = None,
) -> torch.Tensor:
    """Causal self-attention over packed variable-length sequences.

    Args:
        q: [total_tokens, heads, head_dim], fp16/bf16/fp32.
        k, v: [total_tokens, kv_heads, head_dim], q's dtype, equal strides;
            kv_heads divides heads (GQA). head_dim is any size (padded to a
            power of two inside the kernel).
        cu_seqlens: [batch + 1] int32, sequence i is rows
            ``cu_seqlens[i]:cu_seqlens[i+1]`` of q, k and v (lengths may be 0).
        max_seqlen: the longest sequence, in tokens (sizes the grid; no sync).
        softmax_scale: defaults to ``1/sqrt(head_dim)``.

    Returns:
        [total_tokens, heads, head_dim] in q's dtype; softmax in fp32 with
        fp32 accumulation.

    Raises:
        ValueError: on mismatched shapes, dtypes, strides or devices.

    Design: FlashAttention-2 forward, varlen as ``flash_attn_varlen_func(...,
    causal=True)`` (kernels.md 4.4, 6.1).
    """
    _check_common(q, k, v, cu_seqlens)
    if k.dim() != 3 or k.shape[0] != q.shape[0]:
        raise ValueError(f"k, v must be [total_tokens, kv_heads, head_dim] like q, got {tuple(k.shape)}")
    return _launch(q, k, v, cu_seqlens, max_seqlen, softmax_scale, None, None)


def chunked_prefill_attention(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    cu_seqlens_q: torch.Tensor,
    max_seqlen_q: int,
    block_table: torch.Tensor,
    context_lens: torch.Tensor,
    softmax_scale: float | None = None,
) -> torch.Tensor:
    """Causal attention of new tokens over cached context plus themselves,
    all read from a paged KV cache (chunked prefill, prefix-cache hits).

    Sequence b has ``c = context_lens[b]`` cached tokens and ``n`` new ones
    (rows ``cu_seqlens_q[b]:cu_seqlens_q[b+1]`` of q). The new tokens' K/V
    must already be in the cache at positions ``c .. c+n-1`` (write them with
    ``store_kvcache`` first). New token i sees positions ``0 .. c+i``
    (bottom-right causal mask, as flash-attn). Cache slots past ``c+n`` and
    unused blocks are never read, so they may hold anything, NaN included.

    Args:
        q: [total_new_tokens, heads, head_dim], fp16/bf16/fp32.
        k_cache, v_cache: [num_blocks, block_size, kv_heads, head_dim], q's
            dtype, equal strides; any block_size >= 1.
        cu_seqlens_q: [batch + 1] int32 offsets of the new tokens.
        max_seqlen_q: the most new tokens of any sequence.
        block_table: [batch, max_blocks_per_seq] int32; position p of
            sequence b is slot ``p % block_size`` of block
            ``block_table[b, p // block_size]``.
        context_lens: [batch] int32 cached tokens per sequence (0 allowed).
        softmax_scale: defaults to ``1/sqrt(head_dim)``.

    Returns:
        [total_new_tokens, heads, head_dim] in q's dtype.

    Raises:
        ValueError: on mismatched shapes, dtypes, strides or devices.

    Design: as ``prefill_attention``, keys addressed through the block table
    as vLLM's prefix-prefill / unified attention and
    ``flash_attn_varlen_func(..., block_table=...)`` (kernels.md 1.2, 6.1, 8).
    """
    _check_common(q, k_cache, v_cache, cu_seqlens_q)
    batch = cu_seqlens_q.numel() - 1
    if k_cache.dim() != 4:
        raise ValueError(f"k_cache must be [num_blocks, block_size, kv_heads, head_dim], got {tuple(k_cache.shape)}")
    if block_table.dtype != torch.int32 or block_table.dim() != 2 or block_table.shape[0] != batch:
        raise ValueError("block_table must be int32 [batch, max_blocks_per_seq]")
    if context_lens.dtype != torch.int32 or context_lens.shape != (batch,):
        raise ValueError("context_lens must be int32 [batch]")
    return _launch(q, k_cache, v_cache, cu_seqlens_q, max_seqlen_q, softmax_scale, context_lens, block_table)

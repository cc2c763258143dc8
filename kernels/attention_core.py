"""The online-softmax loop shared by the prefill and decode kernels, and the
host-side choices both make.

Design: FlashAttention-2's forward loop (Dao 2023, arXiv 2307.08691; kernels.md
4.4): scores in fp32, a running row maximum ``m`` and sum ``l``, the output
accumulated unnormalised in fp32 and rescaled by ``exp2(m_old - m_new)``. K/V
rows are addressed either packed (token-major, as flash-attn's varlen API) or
through a block table (paged KV cache, vLLM / SGLang; kernels.md 1.2, 8).
Pitfalls guarded here: kernels.md 7.1 (padded head dim), 7.3 (exact fp32
dots), 7.4 (bf16 under the interpreter), 7.5 (masked loads with other=0), 7.6
(rows with no visible key), 7.7 (NaN in unused cache), 7.8 (int64 offsets).
"""

import os

import torch
import triton
import triton.language as tl


def interpreting() -> bool:
    """True when Triton runs kernels on the CPU interpreter (TRITON_INTERPRET=1)."""
    return os.environ.get("TRITON_INTERPRET") == "1"


def padded_head_dim(head_dim: int) -> int:
    """The tile width for a head dim: a power of two (tl.arange) and at least
    16 (tl.dot); the extra lanes are masked (kernels.md 7.1, 7.2)."""
    return max(16, triton.next_power_of_2(head_dim))


def upcast_after_load(dtype: torch.dtype) -> bool:
    """Whether kernels must cast loaded tiles to fp32: the interpreter computes
    bf16 on raw bit patterns (kernels.md 7.4); compiled kernels keep bf16."""
    return interpreting() and dtype == torch.bfloat16


@triton.jit
def attend_kv_range(
    acc, m_i, l_i, q,
    k_base, v_base, kv_start, block_row, stride_block, stride_token,
    lo, hi, last_key, offs_d, d_mask, qk_scale,
    BLOCK_N: tl.constexpr, PAGE_SIZE: tl.constexpr, PAGED: tl.constexpr,
    MASKED: tl.constexpr, UPCAST: tl.constexpr,
):
    """Fold keys ``[lo, hi)`` of one sequence and KV head into ``(acc, m_i, l_i)``.

    ``q`` is [ROWS, BLOCK_D]; ``acc`` [ROWS, BLOCK_D] fp32; ``m_i``, ``l_i``
    [ROWS] fp32 in log2 units (``qk_scale`` = softmax scale * log2(e)). Key n
    lives at row ``kv_start + n`` of K/V (packed) or at slot ``n % PAGE_SIZE``
    of block ``block_row[n // PAGE_SIZE]`` (paged); ``stride_token`` and
    ``stride_block`` are element strides, ``k_base``/``v_base`` point at the KV
    head. With ``MASKED``, row r sees only keys ``n <= last_key[r]``; without,
    every key in range is visible to every row (off-diagonal tiles).
    """
    for start_n in range(lo, hi, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        n_mask = offs_n < hi
        if PAGED:
            block = tl.load(block_row + offs_n // PAGE_SIZE, mask=n_mask, other=0).to(tl.int64)
            rows = block * stride_block + (offs_n % PAGE_SIZE) * stride_token
        else:
            rows = (kv_start + offs_n).to(tl.int64) * stride_token
        # K and V both masked with other=0: unused cache slots may hold NaN.
        kv_mask = n_mask[:, None] & d_mask[None, :]
        k = tl.load(k_base + rows[:, None] + offs_d[None, :], mask=kv_mask, other=0.0)
        v = tl.load(v_base + rows[:, None] + offs_d[None, :], mask=kv_mask, other=0.0)
        if UPCAST:
            k = k.to(tl.float32)
            v = v.to(tl.float32)
        qk = tl.dot(q, tl.trans(k), input_precision="ieee") * qk_scale
        if MASKED:
            visible = n_mask[None, :] & (offs_n[None, :] <= last_key[:, None])
            qk = tl.where(visible, qk, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        # A row that has seen no key keeps m = -inf; shift by 0 so that
        # exp2(-inf - -inf) never makes a NaN.
        m_ref = tl.where(m_new == float("-inf"), 0.0, m_new)
        alpha = tl.math.exp2(m_i - m_ref)
        p = tl.math.exp2(qk - m_ref[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None], input_precision="ieee")
        m_i = m_new
    return acc, m_i, l_i

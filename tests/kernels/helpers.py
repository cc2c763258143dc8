"""Inputs for the kernel tests: ragged batches in a NaN-poisoned paged cache, and the tolerance check."""

import itertools
import math
from dataclasses import dataclass

import torch

from kernels import reference

# Relative error ||out - ref|| / ||ref|| and elementwise atol = rtol, per input dtype.
TOLERANCE = {torch.float16: 2e-3, torch.bfloat16: 1.6e-2, torch.float32: 2e-5}


@dataclass
class PagedKV:
    """A paged K/V cache holding ``lengths[b]`` random tokens for sequence b.

    Blocks are shuffled; every slot past a sequence's length, every unused
    block and every unused block-table entry (which points at a spare block)
    holds NaN, so that any read outside the valid range shows in the output.
    ``slots`` are the flat slots of all valid positions, sequence by sequence.
    """

    k_cache: torch.Tensor
    v_cache: torch.Tensor
    block_table: torch.Tensor
    seqlens: torch.Tensor
    slots: torch.Tensor


def cu_seqlens(lengths: list[int]) -> torch.Tensor:
    """[batch + 1] int32 offsets of packed sequences."""
    return torch.tensor([0, *itertools.accumulate(lengths)], dtype=torch.int32)


def randn(gen: torch.Generator, *shape: int, dtype=torch.float16) -> torch.Tensor:
    """Standard normal values drawn in fp32 from ``gen``, then cast."""
    return torch.randn(*shape, generator=gen).to(dtype)


def paged_kv(gen, lengths, block_size, kv_heads, head_dim, dtype=torch.float16, spare_blocks=2) -> PagedKV:
    """A ``PagedKV`` for ``lengths`` tokens per sequence (see the class)."""
    per_seq = [math.ceil(n / block_size) for n in lengths]
    used = sum(per_seq)
    order = torch.randperm(used + spare_blocks, generator=gen)
    shape = (used + spare_blocks, block_size, kv_heads, head_dim)
    k_cache = torch.full(shape, float("nan"), dtype=dtype)
    v_cache = torch.full(shape, float("nan"), dtype=dtype)
    block_table = torch.full((len(lengths), max(per_seq, default=0) + 1), int(order[-1]), dtype=torch.int32)
    slots = []
    start = 0
    for b, (n, blocks) in enumerate(zip(lengths, per_seq)):
        block_table[b, :blocks] = order[start : start + blocks].to(torch.int32)
        start += blocks
        slots += [int(block_table[b, p // block_size]) * block_size + p % block_size for p in range(n)]
    slots = torch.tensor(slots, dtype=torch.int64)
    total = len(slots)
    reference.store_kvcache(
        randn(gen, total, kv_heads, head_dim, dtype=dtype), randn(gen, total, kv_heads, head_dim, dtype=dtype),
        k_cache, v_cache, slots,
    )
    return PagedKV(k_cache, v_cache, block_table, torch.tensor(lengths, dtype=torch.int32), slots)


def assert_matches(out: torch.Tensor, ref: torch.Tensor, dtype: torch.dtype) -> None:
    """``out`` (the kernel's, in ``dtype``) is finite and within ``dtype``'s tolerance of the float64 ``ref``."""
    assert out.dtype == dtype and out.shape == ref.shape
    assert torch.isfinite(out).all(), "non-finite output"
    tol = TOLERANCE[dtype]
    error = (out.double() - ref).norm() / ref.norm().clamp_min(1e-30)
    assert error < tol, f"relative error {error:.2e} >= {tol:.0e}"
    torch.testing.assert_close(out.double(), ref, atol=tol, rtol=tol)

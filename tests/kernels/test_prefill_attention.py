"""Varlen causal prefill and chunked prefill against the float64 reference.

Chunked cases read a NaN-poisoned cache (see helpers.PagedKV), so a read past
a sequence's keys shows as a non-finite output.
"""

import pytest

pytest.importorskip("torch")
pytest.importorskip("triton")

import torch  # noqa: E402

from kernels import reference  # noqa: E402
from kernels.prefill_attention import chunked_prefill_attention, prefill_attention  # noqa: E402
from kernels.store_kvcache import store_kvcache  # noqa: E402
from tests.kernels.helpers import assert_matches, cu_seqlens, paged_kv, randn  # noqa: E402

pytestmark = pytest.mark.kernels


def _packed(gen, lengths, kv_heads, group, head_dim, dtype=torch.float16):
    total = sum(lengths)
    q = randn(gen, total, kv_heads * group, head_dim, dtype=dtype)
    k = randn(gen, total, kv_heads, head_dim, dtype=dtype)
    v = randn(gen, total, kv_heads, head_dim, dtype=dtype)
    return q, k, v, cu_seqlens(lengths), max(lengths)


# (lengths, kv_heads, group, head_dim)
PACKED = [
    ([1, 16, 17, 40], 2, 1, 64),  # length 1, tile boundary 16/17, several tiles
    ([33, 0, 5], 1, 4, 80),  # an empty sequence in the batch, head dim 80
    ([31, 2], 1, 8, 128),
]


@pytest.mark.parametrize(("lengths", "kv_heads", "group", "head_dim"), PACKED)
def test_packed_matches_reference(gen, lengths, kv_heads, group, head_dim):
    args = _packed(gen, lengths, kv_heads, group, head_dim)
    assert_matches(prefill_attention(*args), reference.prefill_attention(*args), torch.float16)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_packed_other_dtypes(gen, dtype):
    args = _packed(gen, [19, 4], 2, 2, 96, dtype)
    assert_matches(prefill_attention(*args), reference.prefill_attention(*args), dtype)


# (context_lens, new_lens, block_size, kv_heads, group, head_dim)
CHUNKED = [
    ([0, 5, 20], [7, 16, 1], 1, 2, 1, 64),  # block size 1, one sequence without context
    ([15, 16, 17], [17, 1, 32], 16, 1, 4, 80),  # context around block / tile boundaries
    ([0, 255], [20, 2], 256, 1, 8, 128),  # block size 256, GQA 8
    ([0, 0], [16, 3], 16, 2, 4, 64),  # no context anywhere: plain causal prefill
]


@pytest.mark.parametrize(("context_lens", "new_lens", "block_size", "kv_heads", "group", "head_dim"), CHUNKED)
def test_chunked_matches_reference(gen, context_lens, new_lens, block_size, kv_heads, group, head_dim):
    kv = paged_kv(gen, [c + n for c, n in zip(context_lens, new_lens)], block_size, kv_heads, head_dim)
    q = randn(gen, sum(new_lens), kv_heads * group, head_dim)
    args = (q, kv.k_cache, kv.v_cache, cu_seqlens(new_lens), max(new_lens), kv.block_table,
            torch.tensor(context_lens, dtype=torch.int32))

    out = chunked_prefill_attention(*args)

    assert_matches(out, reference.chunked_prefill_attention(*args), torch.float16)


def test_chunked_without_context_equals_packed(gen):
    lengths = [9, 23]
    kv = paged_kv(gen, lengths, 16, 1, 64)
    q = randn(gen, sum(lengths), 4, 64)
    k = kv.k_cache.flatten(0, 1)[kv.slots]
    v = kv.v_cache.flatten(0, 1)[kv.slots]
    cu = cu_seqlens(lengths)
    no_context = torch.zeros(2, dtype=torch.int32)
    chunked = chunked_prefill_attention(q, kv.k_cache, kv.v_cache, cu, 23, kv.block_table, no_context)
    torch.testing.assert_close(chunked, prefill_attention(q, k, v, cu, 23), atol=1e-3, rtol=1e-3)


def test_store_then_chunked_prefill(gen):
    """The documented flow: store the chunk's K/V at positions c.., then attend over c + n keys."""
    context_lens, new_lens, block_size = [12, 0], [6, 5], 16
    kv = paged_kv(gen, [c + n for c, n in zip(context_lens, new_lens)], block_size, 1, 64)
    new_slots = kv.slots[12:]  # positions 12..17 of sequence 0, then all of sequence 1
    expected_k = kv.k_cache.flatten(0, 1)[new_slots].clone()
    expected_v = kv.v_cache.flatten(0, 1)[new_slots].clone()
    kv.k_cache.flatten(0, 1)[new_slots] = float("nan")
    kv.v_cache.flatten(0, 1)[new_slots] = float("nan")

    store_kvcache(expected_k, expected_v, kv.k_cache, kv.v_cache, new_slots)
    q = randn(gen, sum(new_lens), 2, 64)
    args = (q, kv.k_cache, kv.v_cache, cu_seqlens(new_lens), 6, kv.block_table,
            torch.tensor(context_lens, dtype=torch.int32))

    assert_matches(chunked_prefill_attention(*args), reference.chunked_prefill_attention(*args), torch.float16)


def test_rejects_int64_cu_seqlens(gen):
    q, k, v, cu, max_len = _packed(gen, [3], 1, 1, 64)
    with pytest.raises(ValueError):
        prefill_attention(q, k, v, cu.long(), max_len)

"""Paged split-K decode attention against the float64 reference.

Every case reads a NaN-poisoned cache (see helpers.PagedKV): a read of an
unused slot, block or block-table entry would show as a non-finite output.
"""

import pytest

pytest.importorskip("torch")
pytest.importorskip("triton")

import torch  # noqa: E402

from kernels import reference  # noqa: E402
from kernels.decode_attention import decode_attention  # noqa: E402
from tests.kernels.helpers import assert_matches, paged_kv, randn  # noqa: E402

pytestmark = pytest.mark.kernels

# (lengths, block_size, kv_heads, group, head_dim, num_splits): num_splits None = the default heuristic.
CASES = [
    ([1, 17, 0, 33], 1, 2, 1, 64, 1),  # block size 1, MHA, an empty sequence
    ([15, 16, 17, 1], 16, 2, 4, 80, 3),  # lengths around a block / tile boundary, head dim 80
    ([1, 48, 100], 16, 1, 8, 128, None),
    ([255, 256, 257], 256, 1, 4, 64, 4),  # block size 256
    ([40, 3], 16, 2, 24, 64, 2),  # group 24 > 16 packed rows, not a multiple of them
    ([5, 70], 16, 1, 1, 64, 8),  # more splits than tiles: empty splits
    ([0, 0], 16, 2, 8, 80, 2),  # nothing cached anywhere
]


@pytest.mark.parametrize(("lengths", "block_size", "kv_heads", "group", "head_dim", "num_splits"), CASES)
def test_matches_reference(gen, lengths, block_size, kv_heads, group, head_dim, num_splits):
    kv = paged_kv(gen, lengths, block_size, kv_heads, head_dim)
    q = randn(gen, len(lengths), kv_heads * group, head_dim)
    args = (q, kv.k_cache, kv.v_cache, kv.block_table, kv.seqlens)

    out = decode_attention(*args, num_splits=num_splits)

    assert_matches(out, reference.decode_attention(*args), torch.float16)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_other_dtypes(gen, dtype):
    kv = paged_kv(gen, [33, 9], 16, 2, 96, dtype=dtype)
    q = randn(gen, 2, 8, 96, dtype=dtype)
    args = (q, kv.k_cache, kv.v_cache, kv.block_table, kv.seqlens)
    assert_matches(decode_attention(*args, num_splits=2), reference.decode_attention(*args), dtype)


def test_empty_context_gives_zeros(gen):
    kv = paged_kv(gen, [0, 20], 16, 1, 64)
    q = randn(gen, 2, 4, 64)
    out = decode_attention(q, kv.k_cache, kv.v_cache, kv.block_table, kv.seqlens, num_splits=3)
    assert torch.equal(out[0], torch.zeros_like(out[0]))
    assert torch.isfinite(out).all()


def test_softmax_scale(gen):
    kv = paged_kv(gen, [21], 16, 1, 64)
    q = randn(gen, 1, 4, 64)
    args = (q, kv.k_cache, kv.v_cache, kv.block_table, kv.seqlens, 0.3)
    assert_matches(decode_attention(*args), reference.decode_attention(*args), torch.float16)


def test_rejects_kv_heads_not_dividing_heads():
    q = torch.zeros(1, 6, 64, dtype=torch.float16)
    cache = torch.zeros(2, 16, 4, 64, dtype=torch.float16)
    with pytest.raises(ValueError):
        decode_attention(q, cache, cache, torch.zeros(1, 2, dtype=torch.int32), torch.ones(1, dtype=torch.int32))

"""The float64 reference against torch's own definitions (SDPA, its bottom-right causal bias)."""

import pytest

pytest.importorskip("torch")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.nn.attention.bias import causal_lower_right  # noqa: E402

from kernels import reference  # noqa: E402
from tests.kernels.helpers import paged_kv, randn  # noqa: E402

pytestmark = pytest.mark.kernels


def _sdpa(q, k, v, **kwargs):
    """SDPA (math, float64) on [L, H, D] tensors."""
    batched = (t.double().transpose(0, 1)[None] for t in (q, k, v))
    out = F.scaled_dot_product_attention(*batched, enable_gqa=True, **kwargs)
    return out[0].transpose(0, 1)


def test_causal_with_as_many_keys_as_queries_is_sdpa_causal(gen):
    q, k, v = randn(gen, 9, 8, 32), randn(gen, 9, 2, 32), randn(gen, 9, 2, 32)
    torch.testing.assert_close(reference.attention(q, k, v, 32**-0.5, causal=True), _sdpa(q, k, v, is_causal=True))


def test_causal_over_context_is_bottom_right(gen):
    q, k, v = randn(gen, 5, 4, 32), randn(gen, 12, 2, 32), randn(gen, 12, 2, 32)
    expected = _sdpa(q, k, v, attn_mask=causal_lower_right(5, 12))
    torch.testing.assert_close(reference.attention(q, k, v, 32**-0.5, causal=True), expected)


def test_no_keys_gives_zeros(gen):
    q = randn(gen, 1, 4, 32)
    empty = torch.zeros(0, 1, 32, dtype=torch.float16)
    out = reference.attention(q, empty, empty, 1.0, causal=False)
    assert torch.equal(out, torch.zeros(1, 4, 32, dtype=torch.float64))


def test_gather_paged_follows_the_block_table(gen):
    kv = paged_kv(gen, [5, 20], 4, 1, 8)
    gathered = reference.gather_paged(kv.k_cache, kv.block_table[1], 20)
    assert torch.equal(gathered, kv.k_cache.flatten(0, 1)[kv.slots[5:]])


def test_store_skips_negative_slots():
    key = torch.arange(6, dtype=torch.float32).view(3, 1, 2)
    k_cache = torch.zeros(2, 2, 1, 2)
    v_cache = torch.zeros(2, 2, 1, 2)
    reference.store_kvcache(key, key, k_cache, v_cache, torch.tensor([3, -1, 0]))
    assert k_cache.flatten().tolist() == [4, 5, 0, 0, 0, 0, 0, 1]

"""store_kvcache against the reference: bit-exact copies, -1 skips, any row width, strided inputs."""

import pytest

pytest.importorskip("torch")
pytest.importorskip("triton")

import torch  # noqa: E402

from kernels import reference  # noqa: E402
from kernels.store_kvcache import store_kvcache  # noqa: E402
from tests.kernels.helpers import randn  # noqa: E402

pytestmark = pytest.mark.kernels


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.view({2: torch.int16, 4: torch.int32}[t.element_size()])


def _check(gen, key, value, block_size, slot_dtype=torch.int64):
    num_tokens, kv_heads, head_dim = key.shape
    num_blocks = 2 * num_tokens // block_size + 2
    slots = torch.randperm(num_blocks * block_size, generator=gen)[:num_tokens].to(slot_dtype)
    slots[torch.rand(num_tokens, generator=gen) < 0.3] = -1
    k_cache = torch.full((num_blocks, block_size, kv_heads, head_dim), float("nan"), dtype=key.dtype)
    v_cache = torch.full_like(k_cache, float("nan"))
    k_ref, v_ref = k_cache.clone(), v_cache.clone()

    store_kvcache(key, value, k_cache, v_cache, slots)
    reference.store_kvcache(key, value, k_ref, v_ref, slots)

    assert torch.equal(_bits(k_cache), _bits(k_ref))
    assert torch.equal(_bits(v_cache), _bits(v_ref))


@pytest.mark.parametrize(
    ("num_tokens", "kv_heads", "head_dim", "block_size", "dtype"),
    [
        (7, 1, 64, 1, torch.float16),
        (20, 2, 80, 16, torch.float16),  # row of 160: not a power of two
        (9, 3, 40, 16, torch.bfloat16),  # row of 120; bf16 is copied bit-exactly
        (5, 8, 128, 256, torch.float32),
        (3, 12, 128, 16, torch.float16),  # row of 1536: two parts
    ],
)
def test_matches_reference(gen, num_tokens, kv_heads, head_dim, block_size, dtype):
    key = randn(gen, num_tokens, kv_heads, head_dim, dtype=dtype)
    value = randn(gen, num_tokens, kv_heads, head_dim, dtype=dtype)
    _check(gen, key, value, block_size)


def test_strided_views_of_fused_qkv_and_int32_slots(gen):
    heads, kv_heads, head_dim = 4, 2, 48
    qkv = randn(gen, 11, heads + 2 * kv_heads, head_dim)
    key, value = qkv[:, heads : heads + kv_heads], qkv[:, heads + kv_heads :]
    _check(gen, key, value, block_size=16, slot_dtype=torch.int32)


def test_rejects_mismatched_rows():
    key = torch.zeros(3, 2, 64, dtype=torch.float16)
    cache = torch.zeros(4, 16, 2, 32, dtype=torch.float16)
    with pytest.raises(ValueError):
        store_kvcache(key, key, cache, cache.clone(), torch.zeros(3, dtype=torch.int64))

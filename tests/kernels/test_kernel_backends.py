"""Backends: which are listed on a device, and that each wrapper computes the reference's function."""

import sys
import types

import pytest

pytest.importorskip("torch")
pytest.importorskip("triton")

import torch  # noqa: E402

from kernels import backends, reference  # noqa: E402
from tests.kernels.helpers import assert_matches, cu_seqlens, paged_kv, randn  # noqa: E402

pytestmark = pytest.mark.kernels


def test_cpu_lists_triton_under_the_interpreter_then_the_reference():
    assert [b.name for b in backends.available_backends("cpu")] == ["triton", "torch"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is present")
def test_cuda_without_a_gpu_lists_nothing():
    assert backends.available_backends("cuda") == []


def test_torch_backend_returns_the_input_dtype(gen):
    kv = paged_kv(gen, [7], 16, 1, 32)
    q = randn(gen, 1, 2, 32)
    out = backends.TORCH.decode(q, kv.k_cache, kv.v_cache, kv.block_table, kv.seqlens)
    assert out.dtype == torch.float16


@pytest.mark.parametrize("lengths", [[6, 6], [6, 0, 3]])
def test_sdpa_flash_prefill(gen, lengths):
    """SDPA's flash backend also runs on the CPU, which lets its wrapper be checked here."""
    total = sum(lengths)
    q, k, v = randn(gen, total, 4, 32), randn(gen, total, 2, 32), randn(gen, total, 2, 32)
    args = (q, k, v, cu_seqlens(lengths), max(lengths))
    assert_matches(backends.sdpa_flash_prefill(*args), reference.prefill_attention(*args), torch.float16)


@pytest.mark.parametrize("lengths", [[9, 9], [9, 0, 4]])
def test_sdpa_flash_decode(gen, lengths):
    kv = paged_kv(gen, lengths, 4, 2, 32)
    q = randn(gen, len(lengths), 4, 32)
    args = (q, kv.k_cache, kv.v_cache, kv.block_table, kv.seqlens)
    assert_matches(backends.sdpa_flash_decode(*args), reference.decode_attention(*args), torch.float16)


def _fake_flash_attn() -> types.ModuleType:
    """flash-attn's two entry points as kernels.md 6.1 specifies them, computed by the reference."""

    def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                               softmax_scale=None, causal=False, block_table=None):
        out = torch.empty_like(q)
        for b in range(len(cu_seqlens_q) - 1):
            q_lo, q_hi = int(cu_seqlens_q[b]), int(cu_seqlens_q[b + 1])
            k_lo, k_hi = int(cu_seqlens_k[b]), int(cu_seqlens_k[b + 1])
            assert q_hi - q_lo <= max_seqlen_q and k_hi - k_lo <= max_seqlen_k
            if block_table is None:
                keys, values = k[k_lo:k_hi], v[k_lo:k_hi]
            else:
                keys, values = (reference.gather_paged(c, block_table[b], k_hi - k_lo) for c in (k, v))
            out[q_lo:q_hi] = reference.attention(q[q_lo:q_hi], keys, values, softmax_scale, causal)
        return out

    def flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=None, block_table=None, softmax_scale=None):
        out = reference.decode_attention(q[:, 0], k_cache, v_cache, block_table, cache_seqlens, softmax_scale)
        return out[:, None].to(q.dtype)

    module = types.ModuleType("flash_attn")
    module.flash_attn_varlen_func = flash_attn_varlen_func
    module.flash_attn_with_kvcache = flash_attn_with_kvcache
    return module


def test_flash_attn_backend_absent_is_none(monkeypatch):
    monkeypatch.setitem(sys.modules, "flash_attn", None)
    assert backends.flash_attn_backend() is None


def test_flash_attn_backend_passes_the_right_arguments(gen, monkeypatch):
    monkeypatch.setitem(sys.modules, "flash_attn", _fake_flash_attn())
    fa = backends.flash_attn_backend()
    context_lens, new_lens, scale = [5, 0], [3, 4], 0.25
    kv = paged_kv(gen, [c + n for c, n in zip(context_lens, new_lens)], 4, 1, 32)
    q = randn(gen, 7, 2, 32)
    chunked = (q, kv.k_cache, kv.v_cache, cu_seqlens(new_lens), 4, kv.block_table,
               torch.tensor(context_lens, dtype=torch.int32), scale)
    assert_matches(fa.chunked_prefill(*chunked), reference.chunked_prefill_attention(*chunked), torch.float16)
    decode = (q[:2], kv.k_cache, kv.v_cache, kv.block_table, kv.seqlens, scale)
    assert_matches(fa.decode(*decode), reference.decode_attention(*decode), torch.float16)
    k, v = randn(gen, 7, 1, 32), randn(gen, 7, 1, 32)
    packed = (q, k, v, cu_seqlens(new_lens), 4, scale)
    assert_matches(fa.prefill(*packed), reference.prefill_attention(*packed), torch.float16)

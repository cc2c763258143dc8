"""Attention implementations behind one interface, and which are available on a device.

A ``Backend`` bundles three callables with the signatures of our Triton
wrappers (shapes and semantics: ``kernels.prefill_attention`` and
``kernels.decode_attention``):

- ``prefill(q, k, v, cu_seqlens, max_seqlen, softmax_scale=None)``: packed
  varlen causal self-attention;
- ``chunked_prefill(q, k_cache, v_cache, cu_seqlens_q, max_seqlen_q,
  block_table, context_lens, softmax_scale=None)``: new tokens over cached
  context plus themselves, all K/V in the paged cache, bottom-right causal;
- ``decode(q, k_cache, v_cache, block_table, cache_seqlens, softmax_scale=None)``.

An implementation that lacks one has ``None`` there. Names are the
calibration profile's implementation labels (DESIGN.md): ``triton`` (ours),
``flash_attn`` (kernels.md 6.1), ``torch_sdpa_flash`` (kernels.md 6.2) and
``torch`` (the float64 reference, ``kernels.reference``).
"""

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from kernels import reference
from kernels.attention_core import interpreting
from kernels.decode_attention import decode_attention
from kernels.prefill_attention import chunked_prefill_attention, prefill_attention


@dataclass(frozen=True)
class Backend:
    """One attention implementation: its profile label and its three entry points (None = unsupported)."""

    name: str
    prefill: Callable[..., torch.Tensor] | None
    chunked_prefill: Callable[..., torch.Tensor] | None
    decode: Callable[..., torch.Tensor] | None


TRITON = Backend("triton", prefill_attention, chunked_prefill_attention, decode_attention)

TORCH = Backend(
    "torch",
    lambda q, *args, **kwargs: reference.prefill_attention(q, *args, **kwargs).to(q.dtype),
    lambda q, *args, **kwargs: reference.chunked_prefill_attention(q, *args, **kwargs).to(q.dtype),
    lambda q, *args, **kwargs: reference.decode_attention(q, *args, **kwargs).to(q.dtype),
)


def _sdpa_flash(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, scale: float | None) -> torch.Tensor:
    """SDPA restricted to its flash backend; q [B, Lq, H, D], k/v [B, Lk, Hkv, D] -> [B, Lq, H, D]."""
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        out = F.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=causal, scale=scale, enable_gqa=True
        )
    return out.transpose(1, 2)


def sdpa_flash_prefill(q, k, v, cu_seqlens, max_seqlen, softmax_scale=None) -> torch.Tensor:
    """``prefill`` through torch SDPA's flash backend: one batched call when all
    sequences have one length, else one call per sequence (reads
    ``cu_seqlens`` on the host). With as many keys as queries SDPA's top-left
    causal mask equals the bottom-right one. Raises RuntimeError where SDPA has
    no flash kernel for the inputs."""
    lengths = cu_seqlens.diff().tolist()
    if lengths and len(set(lengths)) == 1:
        batched = (t.unflatten(0, (len(lengths), lengths[0])) for t in (q, k, v))
        return _sdpa_flash(*batched, causal=True, scale=softmax_scale).flatten(0, 1)
    out = torch.empty_like(q)
    bounds = cu_seqlens.tolist()
    for start, end in zip(bounds[:-1], bounds[1:]):
        if end > start:
            rows = slice(start, end)
            out[rows] = _sdpa_flash(q[None, rows], k[None, rows], v[None, rows], True, softmax_scale)[0]
    return out


def sdpa_flash_decode(q, k_cache, v_cache, block_table, cache_seqlens, softmax_scale=None) -> torch.Tensor:
    """``decode`` through torch SDPA's flash backend. SDPA has no paged input,
    so each call first gathers the cache into dense K/V: its time includes
    that copy. Batched when all lengths are equal, else per sequence; a
    sequence with no cached tokens gives zeros."""
    lengths = cache_seqlens.tolist()
    block_size = k_cache.shape[1]
    if lengths and len(set(lengths)) == 1 and lengths[0] > 0:
        blocks = block_table[:, : -(-lengths[0] // block_size)].long()
        k, v = (cache[blocks].flatten(1, 2)[:, : lengths[0]] for cache in (k_cache, v_cache))
        return _sdpa_flash(q[:, None], k, v, False, softmax_scale)[:, 0]
    out = torch.zeros_like(q)
    for b, length in enumerate(lengths):
        if length > 0:
            k = reference.gather_paged(k_cache, block_table[b], length)
            v = reference.gather_paged(v_cache, block_table[b], length)
            out[b] = _sdpa_flash(q[None, b : b + 1], k[None], v[None], False, softmax_scale)[0, 0]
    return out


SDPA_FLASH = Backend("torch_sdpa_flash", sdpa_flash_prefill, None, sdpa_flash_decode)


def flash_attn_backend() -> Backend | None:
    """The ``flash_attn`` package's kernels (kernels.md 6.1), or None when it
    is not importable.

    ``chunked_prefill`` calls ``flash_attn_varlen_func`` with the block table
    and ``cu_seqlens_k`` built from ``context_lens`` + new tokens;
    ``max_seqlen_k`` is passed as the block table's capacity (an upper bound
    that needs no device sync). FA2's paged kernels require block sizes that
    are multiples of 256 (kernels.md 7.11) and raise otherwise.
    """
    try:
        from flash_attn import flash_attn_varlen_func, flash_attn_with_kvcache
    except ImportError:
        return None

    def prefill(q, k, v, cu_seqlens, max_seqlen, softmax_scale=None):
        return flash_attn_varlen_func(
            q, k, v, cu_seqlens, cu_seqlens, max_seqlen, max_seqlen, softmax_scale=softmax_scale, causal=True
        )

    def chunked_prefill(q, k_cache, v_cache, cu_seqlens_q, max_seqlen_q, block_table, context_lens, softmax_scale=None):
        seqlens_k = context_lens + cu_seqlens_q.diff()
        cu_seqlens_k = F.pad(seqlens_k.cumsum(0, dtype=torch.int32), (1, 0))
        return flash_attn_varlen_func(
            q, k_cache, v_cache, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, block_table.shape[1] * k_cache.shape[1],
            softmax_scale=softmax_scale, causal=True, block_table=block_table,
        )

    def decode(q, k_cache, v_cache, block_table, cache_seqlens, softmax_scale=None):
        return flash_attn_with_kvcache(
            q[:, None], k_cache, v_cache, cache_seqlens=cache_seqlens, block_table=block_table,
            softmax_scale=softmax_scale,
        )[:, 0]

    return Backend("flash_attn", prefill, chunked_prefill, decode)


def available_backends(device: str | torch.device) -> list[Backend]:
    """The backends that can run on ``device``, ours first.

    CUDA (when torch sees a GPU): triton, flash_attn (if importable),
    torch_sdpa_flash. CPU: triton only under ``TRITON_INTERPRET=1`` (slow:
    tests and smoke runs), then the torch reference. Other devices: none.
    """
    device = torch.device(device)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            return []
        return [b for b in (TRITON, flash_attn_backend(), SDPA_FLASH) if b is not None]
    if device.type == "cpu":
        return [TRITON, TORCH] if interpreting() else [TORCH]
    return []

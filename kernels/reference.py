"""Plain torch implementations of the kernels, computed in float64, for tests
and as the CPU backend.

Everything is a per-sequence loop with explicit masks: clarity over speed. The
causal mask is built by hand and aligned bottom-right (query i of q new tokens
over k keys sees keys ``j <= i + k - q``), as flash-attn's; SDPA's
``is_causal`` is top-left and would be wrong whenever k > q (kernels.md 6.2,
7.10). Attention over zero keys is defined as zeros.
"""

import math

import torch


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float, causal: bool) -> torch.Tensor:
    """Attention of one sequence, in float64.

    Args:
        q: [q_len, heads, head_dim]; k, v: [k_len, kv_heads, head_dim], kv_heads
            dividing heads (GQA: query head h reads KV head ``h // (heads / kv_heads)``).
        scale: softmax scale.
        causal: bottom-right causal mask (needs k_len >= q_len for every row
            to see a key).

    Returns:
        [q_len, heads, head_dim] float64; rows that see no key are zeros.
    """
    group = q.shape[1] // k.shape[1]
    q, k, v = (t.double().transpose(0, 1) for t in (q, k, v))
    k = k.repeat_interleave(group, dim=0)
    v = v.repeat_interleave(group, dim=0)
    scores = (q @ k.transpose(1, 2)) * scale
    if causal:
        q_len, k_len = q.shape[1], k.shape[1]
        rows = torch.arange(q_len).unsqueeze(1)
        cols = torch.arange(k_len).unsqueeze(0)
        hidden = cols > rows + (k_len - q_len)
        scores = scores.masked_fill(hidden, float("-inf"))
        probs = torch.softmax(scores, dim=-1).masked_fill(hidden.all(dim=-1, keepdim=True), 0.0)
    else:
        probs = torch.softmax(scores, dim=-1)
    return (probs @ v).transpose(0, 1)


def gather_paged(cache: torch.Tensor, block_table_row: torch.Tensor, length: int) -> torch.Tensor:
    """The first ``length`` positions of one sequence from a paged cache.

    Args:
        cache: [num_blocks, block_size, kv_heads, head_dim].
        block_table_row: [max_blocks] integer block ids of the sequence.
        length: positions to read.

    Returns:
        [length, kv_heads, head_dim], cache's dtype.
    """
    block_size = cache.shape[1]
    blocks = block_table_row[: math.ceil(length / block_size)].long()
    return cache[blocks].flatten(0, 1)[:length]


def _default_scale(q: torch.Tensor, softmax_scale: float | None) -> float:
    return softmax_scale if softmax_scale is not None else 1.0 / math.sqrt(q.shape[-1])


def prefill_attention(q, k, v, cu_seqlens, max_seqlen=None, softmax_scale=None) -> torch.Tensor:
    """Reference for ``kernels.prefill_attention.prefill_attention`` (same
    arguments; ``max_seqlen`` is ignored). Returns float64 [total_tokens, heads, head_dim]."""
    scale = _default_scale(q, softmax_scale)
    out = torch.zeros(q.shape, dtype=torch.float64, device=q.device)
    bounds = cu_seqlens.tolist()
    for start, end in zip(bounds[:-1], bounds[1:]):
        out[start:end] = attention(q[start:end], k[start:end], v[start:end], scale, causal=True)
    return out


def chunked_prefill_attention(
    q, k_cache, v_cache, cu_seqlens_q, max_seqlen_q, block_table, context_lens, softmax_scale=None
) -> torch.Tensor:
    """Reference for ``kernels.prefill_attention.chunked_prefill_attention``
    (same arguments; the new tokens' K/V are read from the cache). Returns
    float64 [total_new_tokens, heads, head_dim]."""
    scale = _default_scale(q, softmax_scale)
    out = torch.zeros(q.shape, dtype=torch.float64, device=q.device)
    bounds = cu_seqlens_q.tolist()
    for b, (start, end) in enumerate(zip(bounds[:-1], bounds[1:])):
        length = int(context_lens[b]) + end - start
        k = gather_paged(k_cache, block_table[b], length)
        v = gather_paged(v_cache, block_table[b], length)
        out[start:end] = attention(q[start:end], k, v, scale, causal=True)
    return out


def decode_attention(
    q, k_cache, v_cache, block_table, cache_seqlens, softmax_scale=None, num_splits=None
) -> torch.Tensor:
    """Reference for ``kernels.decode_attention.decode_attention`` (same
    arguments; ``num_splits`` is ignored). A sequence with no cached tokens
    gives zeros. Returns float64 [batch, heads, head_dim]."""
    scale = _default_scale(q, softmax_scale)
    out = torch.zeros(q.shape, dtype=torch.float64, device=q.device)
    for b, length in enumerate(cache_seqlens.tolist()):
        k = gather_paged(k_cache, block_table[b], length)
        v = gather_paged(v_cache, block_table[b], length)
        out[b] = attention(q[b : b + 1], k, v, scale, causal=False)[0]
    return out


def store_kvcache(key, value, k_cache, v_cache, slot_mapping) -> None:
    """Reference for ``kernels.store_kvcache.store_kvcache``: token i's
    [kv_heads, head_dim] rows go to flat slot ``slot_mapping[i]`` of the caches
    (in place; the caches must be contiguous); slot -1 skips the token."""
    keep = slot_mapping >= 0
    slots = slot_mapping[keep].long()
    k_cache.view(-1, *k_cache.shape[2:])[slots] = key[keep]
    v_cache.view(-1, *v_cache.shape[2:])[slots] = value[keep]

"""Write new tokens' K and V into a paged KV cache by slot mapping.

Design: nano-vllm's ``store_kvcache_kernel`` (kernels.md 1.2): one program per
token, slot -1 skips it (padding rows of CUDA graphs). Unlike that kernel, a
row of any ``kv_heads * head_dim`` is handled (masked, split into parts of at
most ``_MAX_BLOCK`` elements; kernels.md 7.1), inputs may be strided views (e.g.
k and v sliced out of a fused qkv projection), and offsets are int64
(kernels.md 7.8).
"""

import torch
import triton
import triton.language as tl

_MAX_BLOCK = 1024


@triton.jit
def _store_kvcache_kernel(
    key, value, k_cache, v_cache, slot_mapping, page_size,
    stride_key_token, stride_key_head, stride_value_token, stride_value_head,
    stride_cache_block, stride_cache_slot, stride_cache_head,
    HEAD_DIM: tl.constexpr, ROW: tl.constexpr, BLOCK: tl.constexpr,
):
    """Grid ``(tokens, row parts)``: BLOCK elements of one token's kv_heads x head_dim row."""
    token = tl.program_id(0).to(tl.int64)
    slot = tl.load(slot_mapping + token).to(tl.int64)
    if slot < 0:
        return
    offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < ROW
    head = offs // HEAD_DIM
    dim = offs % HEAD_DIM
    dst = (slot // page_size) * stride_cache_block + (slot % page_size) * stride_cache_slot
    dst = dst + head * stride_cache_head + dim
    k = tl.load(key + token * stride_key_token + head * stride_key_head + dim, mask=mask, other=0.0)
    v = tl.load(value + token * stride_value_token + head * stride_value_head + dim, mask=mask, other=0.0)
    tl.store(k_cache + dst, k, mask=mask)
    tl.store(v_cache + dst, v, mask=mask)


def store_kvcache(
    key: torch.Tensor,
    value: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    slot_mapping: torch.Tensor,
) -> None:
    """Copy token i's K and V into flat slot ``slot_mapping[i]`` of the caches, in place.

    Flat slot s is position ``s % block_size`` of block ``s // block_size``.

    Args:
        key, value: [num_tokens, kv_heads, head_dim], any dtype the caches
            have (the copy is bit-exact); head_dim contiguous, other strides free.
        k_cache, v_cache: [num_blocks, block_size, kv_heads, head_dim], equal
            strides, head_dim contiguous.
        slot_mapping: [num_tokens] int32 or int64; -1 (any negative) skips the token.

    Raises:
        ValueError: on mismatched shapes, dtypes, strides or devices.

    Design: nano-vllm store_kvcache (kernels.md 1.2), guarded per kernels.md 7.1, 7.8.
    """
    if key.dim() != 3 or value.shape != key.shape or k_cache.dim() != 4 or k_cache.shape != v_cache.shape:
        shapes = [tuple(t.shape) for t in (key, value, k_cache, v_cache)]
        raise ValueError(f"bad shapes (key, value, k_cache, v_cache): {shapes}")
    num_tokens, kv_heads, head_dim = key.shape
    if k_cache.shape[2:] != (kv_heads, head_dim):
        raise ValueError(f"cache rows {tuple(k_cache.shape[2:])} do not match key rows {(kv_heads, head_dim)}")
    if len({key.dtype, value.dtype, k_cache.dtype, v_cache.dtype}) != 1:
        raise ValueError("key, value and caches must share one dtype")
    if slot_mapping.shape != (num_tokens,) or slot_mapping.dtype not in (torch.int32, torch.int64):
        raise ValueError("slot_mapping must be int32/int64 [num_tokens]")
    if k_cache.stride() != v_cache.stride() or any(t.stride(-1) != 1 for t in (key, value, k_cache)):
        raise ValueError("caches must share strides, and head_dim must be contiguous everywhere")
    if len({t.device for t in (key, value, k_cache, v_cache, slot_mapping)}) != 1:
        raise ValueError("all tensors must be on one device")
    if num_tokens == 0:
        return
    row = kv_heads * head_dim
    block = min(triton.next_power_of_2(row), _MAX_BLOCK)
    _store_kvcache_kernel[(num_tokens, triton.cdiv(row, block))](
        key, value, k_cache, v_cache, slot_mapping, k_cache.shape[1],
        key.stride(0), key.stride(1), value.stride(0), value.stride(1),
        k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        HEAD_DIM=head_dim, ROW=row, BLOCK=block,
    )

"""Device memory: do the weights and the batch's KV cache fit?

The usable share of memory is vLLM's default ``gpu_memory_utilization`` of
0.9 (vLLM docs, engine arguments); the rest is left for activations, the
CUDA context and fragmentation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from engine.cost import kv_heads_fraction
from engine.hardware import GPU
from engine.models import ModelConfig

GPU_MEMORY_UTILIZATION = 0.9


@dataclass(frozen=True)
class MemoryBudget:
    """Memory of a tensor-parallel group of GPUs, all in bytes (summed over the group).

    Attributes:
        weights_bytes: resident weights (every expert).
        kv_cache_bytes: the batch's KV cache (replicas included when kv heads < tp).
        required_bytes: weights + KV cache.
        capacity_bytes: datasheet memory of the group.
        usable_bytes: capacity x GPU_MEMORY_UTILIZATION.
        fits: required <= usable.
        max_batch: most sequences of this context that fit (0 if the weights alone do not).
    """

    weights_bytes: float
    kv_cache_bytes: float
    required_bytes: float
    capacity_bytes: float
    usable_bytes: float
    fits: bool
    max_batch: int


def memory_budget(
    model: ModelConfig, gpu: GPU, tp: int, batch: int, context_tokens: int,
    bytes_per_param: float = 2.0, kv_bytes_per_element: float = 2.0,
) -> MemoryBudget:
    """Weights and KV cache of ``batch`` sequences of ``context_tokens`` on ``tp`` GPUs.

    Sliding-window layers hold at most their window (``ModelConfig.kv_cache_bytes``).

    Raises:
        ValueError: context_tokens < 1 (a sequence always holds its current token).
    """
    if context_tokens < 1:
        raise ValueError("context_tokens must be >= 1")
    weights = model.weight_bytes(bytes_per_param)
    replicas = kv_heads_fraction(model, tp) * tp
    per_seq = float(model.kv_cache_bytes(context_tokens, kv_bytes_per_element)) * replicas
    kv = batch * per_seq
    capacity = gpu.memory_bytes * tp
    usable = capacity * GPU_MEMORY_UTILIZATION
    free = usable - weights
    max_batch = max(math.floor(free / per_seq), 0)
    return MemoryBudget(
        weights_bytes=weights, kv_cache_bytes=kv, required_bytes=weights + kv,
        capacity_bytes=capacity, usable_bytes=usable, fits=weights + kv <= usable, max_batch=max_batch,
    )

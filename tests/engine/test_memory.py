"""Memory budget: weights + KV cache against 90% of device memory."""

import pytest

from engine.hardware import get_gpu
from engine.memory import memory_budget
from engine.models import get_model


def test_llama_8b_batch_256_at_2000_tokens_does_not_fit_h100():
    """Weights 8,030,261,248 x 2 = 16,060,522,496 B; KV 256 x 2,000 x 131,072 = 67,108,864,000 B;
    required 83,169,386,496 B > usable 0.9 x 80e9 = 72e9 B.
    max batch = floor((72e9 - 16,060,522,496) / (2,000 x 131,072)) = floor(213.39) = 213.
    """
    mem = memory_budget(get_model("llama-3.1-8b"), get_gpu("h100-sxm"), 1, 256, 2000)
    assert mem.weights_bytes == 16_060_522_496
    assert mem.kv_cache_bytes == 67_108_864_000
    assert mem.required_bytes == 83_169_386_496
    assert not mem.fits
    assert mem.max_batch == 213


def test_llama_70b_needs_more_than_one_80gb_gpu():
    model, gpu = get_model("llama-3.1-70b"), get_gpu("h100-sxm")
    assert not memory_budget(model, gpu, 1, 1, 2000).fits
    assert memory_budget(model, gpu, 1, 1, 2000).max_batch == 0
    assert memory_budget(model, gpu, 4, 32, 2000).fits


def test_context_must_be_positive():
    with pytest.raises(ValueError):
        memory_budget(get_model("llama-3.1-8b"), get_gpu("h100-sxm"), 1, 1, 0)

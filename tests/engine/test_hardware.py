"""GPU catalog: dense figures, ridge points, and the dense/sparse trap."""

import pytest

from engine.hardware import GPUS, get_gpu

REQUIRED = ["h100-sxm", "h100-pcie", "h200", "b200", "a100-80gb", "a100-40gb", "l40s", "l4", "rtx-4090", "mi300x"]


def test_catalog_has_the_required_gpus_with_sources():
    for gpu_id in REQUIRED:
        gpu = get_gpu(gpu_id)
        assert gpu.source and gpu.bf16_flops_per_s > 0 and gpu.memory_bandwidth_bytes_per_s > 0


def test_h100_sxm_ridge_is_dense_not_sparse():
    """Ridge = 989.4e12 / 3.35e12 = 295.3 FLOP/byte (scaling book roofline.md Problem 5: ~298).

    With the with-sparsity 1,979 TFLOP/s it would be ~590: the trap this guards.
    """
    ridge = get_gpu("h100-sxm").ridge_flop_per_byte
    assert ridge == pytest.approx(295.3, abs=0.5)
    assert ridge < 400


@pytest.mark.parametrize(
    ("gpu_id", "ridge"),
    [
        ("h200", 989.4 / 4.8),  # 206 (science.md A.1)
        ("a100-80gb", 312 / 2.039),  # 153
        ("a100-40gb", 312 / 1.555),  # 201
        ("b200", 2250 / 8.0),  # 281
        ("mi300x", 1307.4 / 5.3),  # 247
    ],
)
def test_ridge_points(gpu_id, ridge):
    """Ridge = dense bf16 TFLOP/s / memory TB/s, from the datasheet table in science.md A.1."""
    assert get_gpu(gpu_id).ridge_flop_per_byte == pytest.approx(ridge, rel=1e-3)


def test_fp8_is_twice_bf16_where_it_exists():
    """Hopper, Blackwell, Ada and CDNA3 run dense FP8 at about twice dense BF16 (datasheets).

    The L40S sheet rounds the two differently (362 vs 733 TFLOP/s: 2.02x), hence 3%.
    """
    for gpu in GPUS.values():
        if gpu.fp8_flops_per_s is not None:
            assert gpu.fp8_flops_per_s == pytest.approx(2 * gpu.bf16_flops_per_s, rel=0.03)


def test_unknown_gpu_lists_valid_ids():
    with pytest.raises(KeyError, match="h100-sxm"):
        get_gpu("h100")

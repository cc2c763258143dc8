"""A GPU from the user's figures, and the with-sparsity warning (science.md A.1, H.15)."""

from __future__ import annotations

import json

import pytest

import engine.calibration
from engine.gpu_spec import (
    MAX_GPU_SPEC_BYTES,
    GpuFigures,
    custom_datasheet_profile,
    load_gpu_spec,
    parse_gpu_spec,
    register_gpu,
    sparsity_warnings,
)
from engine.hardware import GPUS
from engine.hf_config import ConfigError

H100 = {"bf16_tflops": 989.4, "fp8_tflops": 1978.9, "memory_gb": 80, "memory_bandwidth_gb_per_s": 3350,
        "interconnect_gb_per_s": 450, "name": "H100 SXM"}


def gpu(**figures):
    return GpuFigures(**{**H100, **figures}).to_gpu()


def test_figures_become_si_units():
    """989.4 TFLOP/s = 9.894e14 FLOP/s; 80 GB = 8e10 B; 3,350 GB/s = 3.35e12 B/s; ridge 9.894e14 / 3.35e12 = 295.3."""
    g = gpu()
    assert (g.id, g.bf16_flops_per_s, g.memory_bytes) == ("custom", 9.894e14, 8e10)
    assert g.memory_bandwidth_bytes_per_s == 3.35e12
    assert g.interconnect_bytes_per_s == 4.5e11
    assert g.ridge_flop_per_byte == pytest.approx(295.34, abs=0.01)
    assert "you entered" in g.source


@pytest.mark.parametrize("gpu_id", list(GPUS))
def test_no_catalog_gpu_is_flagged(gpu_id):
    """Every dense datasheet figure we list passes both rules (the rules' false-positive check)."""
    assert sparsity_warnings(GPUS[gpu_id].model_copy(update={"id": "custom"})) == []


def test_twice_a_known_dense_figure_is_flagged():
    """H100 SXM datasheet prints 1,979 BF16 and 3,958 FP8 "with sparsity": 2 x 989.4 and 2 x 1,978.9."""
    warnings = sparsity_warnings(gpu(bf16_tflops=1979, fp8_tflops=3958))
    assert len(warnings) == 2
    assert "BF16 1,979.0 TFLOP/s is twice the dense BF16 figure of the NVIDIA H100 SXM5 80GB (989.4)" in warnings[0]
    assert "FP8 3,958.0" in warnings[1] and "2:4 sparsity" in warnings[1]


def test_match_tolerance_is_two_percent():
    """2 x 989.4 = 1,978.8; 1,978.8 x 1.02 = 2,018.4 is flagged, 2,030 (2.6 % off) is not; neither ridge
    (2,018 / 3.35 = 602; 2,030 / 3.35 = 606) is above 1.6 x 419 = 670."""
    assert sparsity_warnings(gpu(bf16_tflops=2018, fp8_tflops=None))
    assert sparsity_warnings(gpu(bf16_tflops=2030, fp8_tflops=None)) == []


def test_ridge_far_above_any_catalog_gpu_is_flagged():
    """Highest catalog ridge: L40S 362 / 0.864 = 418.98 FLOP/byte; x 1.6 = 670.4.

    700 TFLOP/s over 1,000 GB/s = 700 FLOP/byte: flagged (and 700 is not within 2 % of twice any dense
    BF16 figure: nearest 2 x 362 = 724 is 3.3 % away). 660 over 1,000 = 660: not flagged.
    H100 PCIe with its sparse figure, 1,513 / 2,000 = 756.5: flagged by both rules.
    """
    flagged = sparsity_warnings(gpu(bf16_tflops=700, fp8_tflops=None, memory_bandwidth_gb_per_s=1000))
    assert len(flagged) == 1 and "ridge point 700 FLOP/byte" in flagged[0] and "NVIDIA L40S, 419" in flagged[0]
    assert sparsity_warnings(gpu(bf16_tflops=660, fp8_tflops=None, memory_bandwidth_gb_per_s=1000)) == []
    pcie = sparsity_warnings(gpu(bf16_tflops=1513, fp8_tflops=None, memory_bandwidth_gb_per_s=2000))
    assert len(pcie) == 2


def test_fp8_more_than_twice_bf16_is_flagged():
    """Dense FP8 is about 2 x dense BF16 on every catalog part; 5,000 FP8 next to 989.4 BF16 is 5.05x."""
    warnings = sparsity_warnings(gpu(fp8_tflops=5000))
    assert any("more than twice BF16" in w for w in warnings)


@pytest.mark.parametrize(("figures", "message"), [
    ({**H100, "bf16_tflops": -1}, "bf16_tflops: Input should be greater than or equal to 0.1"),
    ({**H100, "bf16_tflops": 1e-300}, "bf16_tflops: Input should be greater than or equal to 0.1"),
    ({**H100, "memory_bandwidth_gb_per_s": 1e-300}, "memory_bandwidth_gb_per_s: Input should be greater than or equal to 1"),
    ({**H100, "bf16_tflops": "989"}, "bf16_tflops: Input should be a valid number"),
    ({**H100, "memory_gb": True}, "memory_gb"),
    ({**H100, "memory_bandwidth_gb_per_s": 1e9}, "memory_bandwidth_gb_per_s: Input should be less than or equal"),
    ({k: v for k, v in H100.items() if k != "memory_gb"}, "memory_gb: Field required"),
    ({**H100, "sparse": True}, "sparse: Extra inputs are not permitted"),
    ({**H100, "name": "<script>"}, "name: String should match pattern"),
])
def test_bad_figures_are_refused_by_field(figures, message):
    with pytest.raises(ConfigError, match=message):
        parse_gpu_spec(json.dumps(figures))


def test_size_limit_and_non_json():
    with pytest.raises(ConfigError, match="limit"):
        parse_gpu_spec(json.dumps({**H100, "name": "x" * MAX_GPU_SPEC_BYTES}))
    with pytest.raises(ConfigError, match="not valid JSON"):
        parse_gpu_spec('{"bf16_tflops": 1e999')
    with pytest.raises(ConfigError, match="Infinity is not a JSON number"):
        parse_gpu_spec('{"bf16_tflops": Infinity}')


def test_encoding_reads_back():
    parsed = parse_gpu_spec(json.dumps(H100))
    assert parse_gpu_spec(parsed.encoded).gpu == parsed.gpu


def test_custom_gpu_gets_its_own_datasheet_profile():
    """The datasheet profile of user figures applies the same efficiency factors to its own peaks."""
    profile = custom_datasheet_profile(gpu(bf16_tflops=500, memory_bandwidth_gb_per_s=2000))
    assert profile.id == "custom-datasheet" and profile.provenance == "datasheet"
    assert profile.device.peak_flops_per_s == 5e14
    assert profile.rates("gemm").flops_per_s == pytest.approx(5e14 * 794.5 / 989.4)


def test_gpu_spec_file_and_registration(tmp_path):
    path = tmp_path / "gpu.json"
    path.write_text(json.dumps({**H100, "name": "Lab GPU 2"}))
    parsed = load_gpu_spec(path)
    assert parsed.gpu.id == "lab-gpu-2"
    try:
        register_gpu(parsed.gpu)
        assert GPUS["lab-gpu-2"] is parsed.gpu
        assert engine.calibration.PROFILES["lab-gpu-2-datasheet"].device.gpu_id == "lab-gpu-2"
        with pytest.raises(ValueError, match="taken"):
            register_gpu(parsed.gpu)
    finally:
        GPUS.pop("lab-gpu-2", None)
        engine.calibration.PROFILES.pop("lab-gpu-2-datasheet", None)
    with pytest.raises(ConfigError, match="cannot read"):
        load_gpu_spec(tmp_path / "nope.json")

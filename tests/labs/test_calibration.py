"""Calibration page and the roofline's measured points, on a profile built from known rates.

The profile here is synthetic (times computed from chosen rates, so every
prediction is exact): it tests the page's drawing, not a device. The real
measurement runs in tests/kernels/test_calibrate_cpu.py.
"""

import plotly.graph_objects as go
import pytest

from engine.calibration import PROFILES, DeviceInfo, Measurement, OpRates, measured_profile, register_profile
from labs import run_lab

RATES = OpRates(flops_per_s=6e14, bytes_per_s=3e12, launch_overhead_s=3e-6)


def _case(op, impl, flops, bytes_, held_out, **shape):
    t = float(RATES.time_s(flops, bytes_, 1))
    return Measurement(op=op, implementation=impl, shape=shape, dtype="bfloat16", flops=flops, bytes=bytes_,
                       median_s=t, spread_s=t / 50, runs=30, held_out=held_out)


@pytest.fixture(scope="module")
def profile():
    ms = [_case("gemm", "torch", 2 * t * 4096 * 4096, (2 * t * 4096 + 4096 * 4096) * 2, i % 2 == 1, tokens=t)
          for i, t in enumerate(2 ** k for k in range(15))]
    ms += [_case("prefill_attention", impl, 4 * 32 * 128 * n * (n + 1) / 2, n * 6 * 8 * 128 * 2, i % 2 == 1, tokens=n)
           for impl in ("flash_attn", "triton") for i, n in enumerate([512, 1024, 2048, 4096, 8192])]
    ms += [_case("kv_store", "triton", 0.0, t * 8192.0, i % 2 == 1, tokens=t) for i, t in enumerate([64, 256, 1024, 4096, 16384])]
    ms.append(Measurement(op="copy", implementation="torch", shape={"bytes": 2**31}, dtype="uint8", flops=0,
                          bytes=2.0**32, median_s=2.0**32 / 3e12, spread_s=1e-5, runs=30))
    device = DeviceInfo(name="NVIDIA H100 80GB HBM3", kind="cuda", gpu_id="h100-sxm", peak_flops_per_s=989.4e12,
                        peak_bytes_per_s=3.35e12, measured_copy_bytes_per_s=3e12, measured_gemm_flops_per_s=7e14)
    p = measured_profile(profile_id="synthetic-h100-measured", description="synthetic test profile", device=device,
                         software={"torch": "test"}, measurements=ms)
    register_profile(p)
    yield p
    PROFILES.pop(p.id, None)


def test_page_plots_every_case_against_y_equals_x(profile):
    _, result = run_lab("calibration", {"profile": profile.id})
    fig = result.figures["predicted_vs_measured"]
    go.Figure(fig)
    cases = [t for t in fig["data"] if t.get("mode") == "markers"]
    assert sum(len(t["x"]) for t in cases) == 15 + 10 + 5
    for trace in cases:  # synthetic times are exactly the fitted model's: every point on y = x
        assert trace["y"] == pytest.approx(trace["x"], rel=1e-6)
    assert all(t["marker"]["symbol"].endswith("-open") for t in cases if "held out" in t["name"])
    band = [t for t in fig["data"] if t.get("fill") == "tonexty"]
    assert len(band) == 1 and band[0]["y"] == pytest.approx([1.1 * x for x in band[0]["x"]])
    assert result.metrics["error"]["prefill_attention"]["implementation"] == "flash_attn"
    assert result.metrics["error"]["gemm"]["median_abs_pct"] == pytest.approx(0.0, abs=1e-6)
    table = result.figures["error_table"]["data"][0]["cells"]["values"]
    assert "triton" in table[1] and "no" in table[2]  # the alternative implementation is listed, not used


def test_page_compares_ceilings_with_the_datasheet(profile):
    _, result = run_lab("calibration", {"profile": profile.id})
    assert result.metrics["ceilings"] == pytest.approx({
        "datasheet_gb_per_s": 3350.0, "datasheet_bf16_tflops": 989.4,
        "measured_copy_gb_per_s": 3000.0, "measured_gemm_tflops": 700.0})
    bars = result.figures["ceilings"]["data"]
    assert "measured copy" in bars[0]["y"] and "measured large GEMM" in bars[1]["y"]
    assert any("elementwise" in n and "from the ceilings" in n for n in bars[0]["y"])


def test_page_says_how_the_profile_was_made_and_warns_on_another_gpu(profile):
    _, result = run_lab("calibration", {"profile": profile.id, "gpu": "h200"})
    text = " ".join(result.notes)
    assert "synthetic test profile" in text and "not the selected NVIDIA H200" in text
    assert "least squares" in text


def test_roofline_draws_the_measured_kernels_on_one_gpu_only(profile):
    _, one = run_lab("roofline", {"profile": profile.id})
    measured = [t for t in one.figures["roofline"]["data"] if t["name"].startswith("measured ")]
    assert {t["name"].split(" (")[0] for t in measured} == {"measured gemm", "measured prefill attention"}
    gemm = next(t for t in measured if "gemm" in t["name"])
    # x = FLOPs / bytes; y = FLOPs / time in TFLOP/s: 16,384 tokens of 4096 x 4096 run at 600 TFLOP/s (+3 us).
    assert max(gemm["y"]) == pytest.approx(600, rel=0.01)
    _, two = run_lab("roofline", {"profile": profile.id, "tp": 2})
    assert not [t for t in two.figures["roofline"]["data"] if t["name"].startswith("measured ")]
    _, datasheet = run_lab("roofline", {})
    assert not [t for t in datasheet.figures["roofline"]["data"] if t["name"].startswith("measured ")]

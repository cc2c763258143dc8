"""The timing harness on the CPU: statistics, rotation, ceilings."""

import pytest

pytest.importorskip("torch")

from kernels import timing  # noqa: E402

pytestmark = pytest.mark.kernels


def test_summarize_median_and_interquartile_range():
    assert timing.summarize([5.0, 1.0, 3.0, 2.0, 4.0]) == timing.Timing(median_s=3.0, spread_s=2.0, runs=5)
    assert timing.summarize([0.5]) == timing.Timing(median_s=0.5, spread_s=0.0, runs=1)
    with pytest.raises(ValueError):
        timing.summarize([])


def test_time_fn_warms_up_then_rotates_inputs():
    seen = []
    result = timing.time_fn(seen.append, ["a", "b", "c"], "cpu", warmup=2, runs=4)
    assert seen == ["a", "b", "a", "b", "c", "a"]
    assert result.runs == 4 and result.median_s >= 0 and result.spread_s >= 0


def test_rotation_copies_cover_twice_the_cache():
    assert timing.rotation_copies(2**40, "cpu") == 1
    assert timing.rotation_copies(16 * 2**20, "cpu") == 4
    assert timing.rotation_copies(1, "cpu") == 64


def test_ceilings_on_cpu():
    copy = timing.measure_copy_bandwidth("cpu", nbytes=2**20, runs=3)
    assert copy.bytes_moved == 2 * 2**20 and copy.bytes_per_s > 0 and copy.timing.runs == 3
    gemm = timing.measure_gemm_rate("cpu", n=64, runs=3)
    assert gemm.flops == 2 * 64**3 and gemm.flop_per_s > 0 and gemm.dtype == "float32"

"""A small timing harness, and the device ceilings timings are read against.

Method (kernels.md 4.2, 4.3, 8): warm up first; time every run (CUDA events
on a GPU, ``time.perf_counter`` on the CPU); report the median and the
interquartile range; rotate across several input copies so that a working set
smaller than the L2 cache is not served from it. Ceilings: a
large device-to-device copy, counting bytes read plus bytes written (as
nvbandwidth does, kernels.md 4.3), and a large GEMM on random data (bf16 on
CUDA, fp32 on the CPU; the MAMF-finder's measure, kernels.md 4.2).
"""

import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import torch

T = TypeVar("T")

_CPU_CACHE_BYTES = 32 * 2**20


@dataclass(frozen=True)
class Timing:
    """Statistics of repeated runs: ``median_s`` and ``spread_s`` (the
    interquartile range) in seconds, over ``runs`` timed runs."""

    median_s: float
    spread_s: float
    runs: int


@dataclass(frozen=True)
class CopyCeiling:
    """Device copy bandwidth: ``bytes_per_s`` counts bytes read plus bytes
    written; ``bytes_moved`` is that count for one copy."""

    bytes_per_s: float
    bytes_moved: int
    timing: Timing


@dataclass(frozen=True)
class GemmCeiling:
    """Large square GEMM rate: ``flop_per_s`` at ``flops`` = 2 n^3 per product, in ``dtype``."""

    flop_per_s: float
    flops: int
    dtype: str
    timing: Timing


def summarize(times_s: Sequence[float]) -> Timing:
    """Median and interquartile range of per-run times in seconds.

    Raises:
        ValueError: if ``times_s`` is empty.
    """
    if not times_s:
        raise ValueError("no runs to summarize")
    if len(times_s) == 1:
        return Timing(median_s=times_s[0], spread_s=0.0, runs=1)
    q1, median, q3 = statistics.quantiles(times_s, n=4, method="inclusive")
    return Timing(median_s=median, spread_s=q3 - q1, runs=len(times_s))


def rotation_copies(bytes_per_copy: int, device: str | torch.device) -> int:
    """How many input copies to rotate so that their total is at least twice
    the last-level cache (the GPU's L2; an assumed 32 MiB on the CPU), capped at 64."""
    device = torch.device(device)
    if device.type == "cuda":
        cache_bytes = torch.cuda.get_device_properties(device).L2_cache_size
    else:
        cache_bytes = _CPU_CACHE_BYTES
    return max(1, min(64, math.ceil(2 * cache_bytes / max(bytes_per_copy, 1))))


def time_fn(
    fn: Callable[[T], Any],
    inputs: Sequence[T],
    device: str | torch.device,
    *,
    warmup: int = 5,
    runs: int = 30,
) -> Timing:
    """Time ``fn(inputs[i % len(inputs)])`` over ``runs`` runs after ``warmup`` untimed ones.

    Args:
        fn: the work; its return value is ignored.
        inputs: one or more equivalent inputs, used in turn (see ``rotation_copies``).
        device: where the work runs: CUDA is timed with events around each
            run (device time, launch gaps included), anything else with
            ``time.perf_counter``.
        warmup, runs: counts (runs >= 1).

    Returns:
        Timing of the runs in seconds.

    Raises:
        ValueError: if ``inputs`` is empty or ``runs`` < 1.
    """
    if not inputs or runs < 1:
        raise ValueError("need at least one input and one run")
    for i in range(warmup):
        fn(inputs[i % len(inputs)])
    if torch.device(device).type != "cuda":
        times = []
        for i in range(runs):
            start = time.perf_counter()
            fn(inputs[i % len(inputs)])
            times.append(time.perf_counter() - start)
        return summarize(times)
    torch.cuda.synchronize(device)
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(runs)]
    for i, (start, end) in enumerate(events):
        start.record()
        fn(inputs[i % len(inputs)])
        end.record()
    torch.cuda.synchronize(device)
    return summarize([start.elapsed_time(end) / 1e3 for start, end in events])


def measure_copy_bandwidth(device: str | torch.device, nbytes: int | None = None, runs: int = 20) -> CopyCeiling:
    """Copy bandwidth of ``dst.copy_(src)`` over ``nbytes`` (default 2 GiB on
    CUDA, far beyond L2; 64 MiB on the CPU), counting read + write bytes."""
    device = torch.device(device)
    nbytes = nbytes or (2 * 2**30 if device.type == "cuda" else 64 * 2**20)
    src = torch.empty(nbytes, dtype=torch.uint8, device=device).random_()
    dst = torch.empty_like(src)
    timing = time_fn(dst.copy_, [src], device, warmup=3, runs=runs)
    return CopyCeiling(bytes_per_s=2 * nbytes / timing.median_s, bytes_moved=2 * nbytes, timing=timing)


def measure_gemm_rate(device: str | torch.device, n: int | None = None, runs: int = 20) -> GemmCeiling:
    """Rate of an n x n x n GEMM on random data: bf16 with n = 8192 on CUDA,
    fp32 with n = 512 on the CPU, unless ``n`` is given."""
    device = torch.device(device)
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    n = n or (8192 if device.type == "cuda" else 512)
    a = torch.randn(n, n, dtype=dtype, device=device)
    b = torch.randn(n, n, dtype=dtype, device=device)
    timing = time_fn(lambda x: x @ b, [a], device, warmup=3, runs=runs)
    flops = 2 * n**3
    dtype_name = str(dtype).removeprefix("torch.")
    return GemmCeiling(flop_per_s=flops / timing.median_s, flops=flops, dtype=dtype_name, timing=timing)

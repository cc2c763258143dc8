"""The calibration run: time a model's ops on one device and write a measured profile.

What is timed (issue 7; DESIGN.md, "Calibration profile"), each case counted
with the cost model's formulas (``engine.cost``) for one layer:

* ``gemm``: the model's four projection shapes (q/k/v, o, gate+up, down) over
  a range of token counts, ``torch.matmul`` (cuBLAS on CUDA, oneDNN/MKL on CPU);
* ``prefill_attention``: one causal sequence over a range of lengths; on CUDA
  our Triton kernel, flash-attn (when importable) and torch SDPA's flash
  backend; on the CPU torch SDPA;
* ``decode_attention``: batch x context grids of one query token per
  sequence; on CUDA our paged Triton kernel and flash-attn's paged kernel
  (block size 256, its requirement, kernels.md 6.1); on the CPU torch SDPA over
  a dense cache;
* ``kv_store``: new tokens' K and V into scattered cache slots (Triton on
  CUDA, ``index_copy_`` on the CPU);
* the device's ceilings, from ``kernels.timing``: a large copy (read + write
  bytes) and a large GEMM (bf16 on CUDA, fp32 on the CPU).

Every other size of each series (alternate token counts; a checkerboard over
decode's batch x context grid) is held out of the fit, so that the profile's
error is measured on sizes the fit never saw.

Timing (``kernels.timing.time_fn``): on CUDA each case is built, warmed up
(Triton compiles there), captured in a CUDA graph whose replays are timed
with CUDA events (device time without Python's launch cost, as in a serving
engine's captured steps), then freed. On the CPU
every case is built first and then timed one run per round, round after round
across all cases, so that load from other processes spreads over all sizes
instead of skewing a few; ``torch.set_num_threads`` is fixed for the whole run.
On CUDA inputs rotate over copies large enough to defeat the L2 cache
(``kernels.timing.rotation_copies``); on the CPU a buffer twice the
last-level cache is written before every run instead.

The CUDA path has not yet run on a GPU in this project's sessions (none was
available); the CPU path runs in the test suite.
"""

from __future__ import annotations

import datetime as dt
import math
import os
import platform
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from engine.calibration import (
    CEILING_OPS,
    DeviceInfo,
    Measurement,
    Profile,
    gpu_id_for_device_name,
    measured_profile,
)
from engine.cost import causal_pairs
from engine.hardware import GPUS
from engine.models import ModelConfig, get_model
from kernels import timing

DEFAULT_MODEL = {"cuda": "llama-3.1-8b", "cpu": "llama-3.2-1b"}
DTYPE = {"cuda": torch.bfloat16, "cpu": torch.float32}
DECODE_PAGE = {"triton": 16, "flash_attn": 256}  # vLLM's default block; FA2's paged minimum


@dataclass(frozen=True)
class Sizes:
    """The sweep of one calibration run (token counts, lengths, batches, contexts) and its run counts."""

    gemm_tokens: tuple[int, ...]
    prefill_lengths: tuple[int, ...]
    decode_batches: tuple[int, ...]
    decode_contexts: tuple[int, ...]
    decode_max_tokens: int  # batch x context cap (memory)
    store_tokens: tuple[int, ...]
    warmup: int
    runs: int
    copy_bytes: int  # the copy ceiling's buffer
    gemm_n: int  # the GEMM ceiling's n x n x n


def _geometric(lo: int, hi: int, per_octave: float) -> tuple[int, ...]:
    """Sizes from lo to hi, ``per_octave`` of them per doubling, rounded to distinct integers;
    an odd number of them (the largest is dropped if needed: see :func:`sizes_for`)."""
    steps = round(math.log2(hi / lo) * per_octave)
    sizes = tuple(sorted({round(lo * 2 ** (i / per_octave)) for i in range(steps + 1)}))
    return sizes if len(sizes) % 2 else sizes[:-1]


def sizes_for(device: str, quick: bool) -> Sizes:
    """The sizes timed on a device kind (``cuda`` or ``cpu``), full or ``quick``.

    Every sweep has an odd number of sizes (and decode's grid an odd number of
    batches and of contexts), so that with every other size held out the
    smallest and largest are fitted and the held-out ones lie between fitted
    ones. CPU sizes keep every case well above the timer's resolution (>= ~0.3
    ms) and the quick pack under a minute on two cores. CPU GEMMs start at 64
    tokens: below that, one CPU thread runs the model's four projection shapes
    at efficiencies up to ~1.5x apart for the same FLOPs and bytes (measured on
    the project's machine: gate+up slowest), which no per-op-class rate can
    follow. CPU prefill starts at 1,024 tokens: below, torch's CPU attention
    climbs from ~25 to ~42 GFLOP/s in steps (measured there) that Hockney's
    curve cannot follow. The GPU packs span 1..16k tokens and 128..32k lengths.
    """
    if device == "cuda":
        return Sizes(
            gemm_tokens=_geometric(1, 16384, 1 if quick else 2),
            prefill_lengths=_geometric(128, 32768, 1) if quick else _geometric(128, 16384, 2),
            decode_batches=(1, 4, 16, 64, 256) if quick else (1, 2, 4, 8, 16, 32, 64, 128, 256),
            decode_contexts=_geometric(256, 65536, 0.5) if quick else _geometric(256, 65536, 1),
            decode_max_tokens=2**21,
            store_tokens=_geometric(1, 65536, 1),
            warmup=3 if quick else 5,
            runs=10 if quick else 30,
            copy_bytes=2 * 2**30,  # far beyond any L2
            gemm_n=8192,
        )
    return Sizes(
        gemm_tokens=(64, 96, 128, 192, 256) if quick else _geometric(64, 1024, 2),
        prefill_lengths=_geometric(1024, 2048, 4) if quick else _geometric(1024, 4096, 3),
        decode_batches=(1, 2, 4, 8, 16),
        decode_contexts=_geometric(512, 8192, 1) if quick else _geometric(256, 16384, 1),
        decode_max_tokens=2**16 if quick else 2**17,
        store_tokens=_geometric(256, 16384, 2) if quick else _geometric(256, 65536, 2),
        warmup=2,
        runs=7 if quick else 15,
        copy_bytes=128 * 2**20,
        gemm_n=1024,
    )


# ---- counting: the cost model's formulas for one layer ---------------------------


def gemm_counts(tokens: int, k: int, n: int, elem_bytes: int) -> tuple[float, float]:
    """FLOPs and bytes of [tokens, k] @ [k, n]: 2 T k n, and (T k + k n + T n) x bytes (engine.cost, gemm)."""
    return 2.0 * tokens * k * n, float((tokens * k + k * n + tokens * n) * elem_bytes)


def attention_counts(
    q_tokens: int, context_tokens: int, seqs: int, heads: int, kv_heads: int, head_dim: int, elem_bytes: int
) -> tuple[float, float]:
    """FLOPs and bytes of attention of ``seqs`` sequences, each q new tokens after c cached ones.

    As ``engine.cost`` for one layer: 2 x heads x (d_qk + d_v) FLOPs per causal
    (query, key) pair (``causal_pairs``), and the K and V of every key plus Q and O read or written once.
    """
    pairs = float(causal_pairs(q_tokens, context_tokens))
    flops = 2.0 * heads * (2 * head_dim) * pairs
    keys = context_tokens + q_tokens
    nbytes = keys * 2 * kv_heads * head_dim * elem_bytes + q_tokens * heads * 2 * head_dim * elem_bytes
    return seqs * flops, float(seqs * nbytes)


def kv_store_counts(tokens: int, kv_heads: int, head_dim: int, elem_bytes: int) -> tuple[float, float]:
    """Bytes of storing ``tokens`` tokens' K and V: read once and written once (engine.cost, kv_store)."""
    return 0.0, float(2 * tokens * 2 * kv_heads * head_dim * elem_bytes)


def projection_shapes(model: ModelConfig) -> dict[str, tuple[int, int]]:
    """(in, out) features of each projection GEMM of one layer: qkv, o, gate_up, down.

    An MoE model's MLP shapes are one expert's.

    Raises:
        ValueError: for multi-head latent attention (our kernels time standard GQA attention only).
    """
    if model.is_mla:
        raise ValueError(f"{model.id} uses multi-head latent attention; calibration times GQA models only")
    d, D = model.hidden_size, model.head_dim
    mlp = (model.moe_intermediate_size or model.intermediate_size) if model.is_moe else model.intermediate_size
    return {
        "qkv": (d, (model.num_heads + 2 * model.num_kv_heads) * D),
        "o": (model.num_heads * D, d),
        "gate_up": (d, 2 * mlp),
        "down": (mlp, d),
    }


# ---- the plan ------------------------------------------------------------------------


class Buffers:
    """Random inputs of the cases, as contiguous views of flat buffers shared per (role, copy).

    Filling CPU memory with random numbers runs at a few hundred MB/s, so on
    the CPU all cases share one buffer per role: set up largest first, each
    role is filled once. On CUDA each case gets fresh Buffers, freed after it
    is timed. ``copies(nbytes)``: how many input copies a case rotates
    through: on CUDA enough to defeat the L2 cache (``timing.rotation_copies``);
    on the CPU one, because the runner flushes the cache before every run.
    """

    def __init__(self, device: str, dtype: torch.dtype):
        self.device, self.dtype = device, dtype
        self._flat: dict[tuple[str, int], torch.Tensor] = {}

    def copies(self, nbytes: float) -> int:
        """Input copies a case of ``nbytes`` should rotate through."""
        return timing.rotation_copies(int(nbytes), self.device) if self.device == "cuda" else 1

    def randn(self, role: str, *shape: int, copy: int = 0) -> torch.Tensor:
        """A [shape] tensor of standard normal values (shared with other cases of this role)."""
        n = math.prod(shape)
        flat = self._flat.get((role, copy))
        if flat is None or flat.numel() < n:
            flat = torch.randn(n, device=self.device, dtype=self.dtype)
            self._flat[(role, copy)] = flat
        return flat[:n].view(shape)


Setup = Callable[[Buffers], tuple[Callable[[Any], Any], list[Any]]]


@dataclass(frozen=True)
class Case:
    """One timed case: what the profile records, and how to build it on the device.

    ``setup(buffers)`` returns ``(fn, inputs)`` for ``timing.time_fn``.
    """

    op: str
    implementation: str
    shape: dict[str, int]
    dtype: str
    flops: float
    bytes: float
    held_out: bool
    setup: Setup = field(repr=False, compare=False)


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _gemm_case(k: int, n: int, tokens: int, held_out: bool, dtype: torch.dtype) -> Case:
    """x [tokens, k] times a weight stored as ``nn.Linear`` stores it, [n, k] (x @ W^T), into a preallocated y."""
    flops, nbytes = gemm_counts(tokens, k, n, dtype.itemsize)

    def setup(buf: Buffers):
        inputs = [(buf.randn("x", tokens, k, copy=i), buf.randn(f"w{n}x{k}", n, k, copy=i),
                   buf.randn("y", tokens, n, copy=i)) for i in range(buf.copies(nbytes))]
        return (lambda a: torch.matmul(a[0], a[1].t(), out=a[2])), inputs

    return Case("gemm", "torch", {"tokens": tokens, "in_features": k, "out_features": n}, _dtype_name(dtype),
                flops, nbytes, held_out, setup)


def _prefill_case(backend, model: ModelConfig, length: int, held_out: bool, dtype: torch.dtype) -> Case:
    """One causal sequence of ``length`` tokens: a Backend's packed varlen call, or (backend None) CPU SDPA."""
    H, Hkv, D = model.num_heads, model.num_kv_heads, model.head_dim
    flops, nbytes = attention_counts(length, 0, 1, H, Hkv, D, dtype.itemsize)

    def setup(buf: Buffers):
        if backend is None or backend.name == "torch_sdpa_flash":  # dense [1, heads, tokens, head_dim]
            # Called directly, not through backends.sdpa_flash_prefill, which reads cu_seqlens on the host.
            def make(i):
                return (buf.randn("q", 1, H, length, D, copy=i), buf.randn("k", 1, Hkv, length, D, copy=i),
                        buf.randn("v", 1, Hkv, length, D, copy=i))

            def fn(a):
                if backend is None:
                    return F.scaled_dot_product_attention(*a, is_causal=True, enable_gqa=True)
                with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                    return F.scaled_dot_product_attention(*a, is_causal=True, enable_gqa=True)
        else:
            cu = torch.tensor([0, length], dtype=torch.int32, device=buf.device)

            def make(i):
                return (buf.randn("q", length, H, D, copy=i), buf.randn("k", length, Hkv, D, copy=i),
                        buf.randn("v", length, Hkv, D, copy=i))

            fn = lambda a: backend.prefill(*a, cu, length)  # noqa: E731
        return fn, [make(i) for i in range(buf.copies(nbytes))]

    shape = {"seqs": 1, "tokens": length, "heads": H, "kv_heads": Hkv, "head_dim": D}
    impl = "torch" if backend is None else backend.name
    return Case("prefill_attention", impl, shape, _dtype_name(dtype), flops, nbytes, held_out, setup)


def _decode_case(backend, model: ModelConfig, batch: int, context: int, held_out: bool, dtype: torch.dtype) -> Case:
    """One query token per sequence over ``context`` cached tokens: a Backend's paged kernel
    (block table a random permutation of the blocks), or (backend None) CPU SDPA over a dense cache."""
    H, Hkv, D = model.num_heads, model.num_kv_heads, model.head_dim
    flops, nbytes = attention_counts(1, context - 1, batch, H, Hkv, D, dtype.itemsize)
    page = DECODE_PAGE.get(backend.name, 16) if backend is not None else 0

    def setup(buf: Buffers):
        if backend is None:
            def make(i):
                return (buf.randn("q", batch, H, 1, D, copy=i), buf.randn("k", batch, Hkv, context, D, copy=i),
                        buf.randn("v", batch, Hkv, context, D, copy=i))

            fn = lambda a: F.scaled_dot_product_attention(*a, enable_gqa=True)  # noqa: E731
        else:
            per_seq = -(-context // page)
            blocks = batch * per_seq
            seqlens = torch.full((batch,), context, dtype=torch.int32, device=buf.device)

            def make(i):
                table = torch.randperm(blocks, device=buf.device).to(torch.int32).view(batch, per_seq)
                return (buf.randn("q", batch, H, D, copy=i), buf.randn("k", blocks, page, Hkv, D, copy=i),
                        buf.randn("v", blocks, page, Hkv, D, copy=i), table)

            fn = lambda a: backend.decode(*a, seqlens)  # noqa: E731
        return fn, [make(i) for i in range(buf.copies(nbytes))]

    shape = {"batch": batch, "context": context, "heads": H, "kv_heads": Hkv, "head_dim": D}
    if page:
        shape["page_size"] = page
    impl = "torch" if backend is None else backend.name
    return Case("decode_attention", impl, shape, _dtype_name(dtype), flops, nbytes, held_out, setup)


def _store_case(model: ModelConfig, tokens: int, held_out: bool, dtype: torch.dtype, use_triton: bool) -> Case:
    """``tokens`` tokens' K and V into random distinct slots of a paged cache twice their number:
    our Triton ``store_kvcache`` (CUDA), or ``index_copy_`` (CPU)."""
    Hkv, D = model.num_kv_heads, model.head_dim
    flops, nbytes = kv_store_counts(tokens, Hkv, D, dtype.itemsize)
    page = 16
    slots_total = page * -(-2 * tokens // page)  # whole blocks, at least twice the tokens

    def setup(buf: Buffers):
        def make(i):
            slots = torch.randperm(slots_total, device=buf.device)[:tokens]
            return (buf.randn("sk", tokens, Hkv, D, copy=i), buf.randn("sv", tokens, Hkv, D, copy=i),
                    buf.randn("kc", slots_total // page, page, Hkv, D, copy=i),
                    buf.randn("vc", slots_total // page, page, Hkv, D, copy=i), slots)

        if use_triton:
            from kernels.store_kvcache import store_kvcache

            fn = lambda a: store_kvcache(*a)  # noqa: E731
        else:
            def fn(a):
                key, value, k_cache, v_cache, slots = a
                k_cache.view(-1, Hkv, D).index_copy_(0, slots, key)
                v_cache.view(-1, Hkv, D).index_copy_(0, slots, value)
        return fn, [make(i) for i in range(buf.copies(nbytes))]

    impl = "triton" if use_triton else "torch"
    shape = {"tokens": tokens, "kv_heads": Hkv, "head_dim": D, "page_size": page}
    return Case("kv_store", impl, shape, _dtype_name(dtype), flops, nbytes, held_out, setup)


def _attention_backends(device: str) -> list:
    from kernels import backends

    return [b for b in backends.available_backends(device) if b.name != "torch"]


def plan(device: str, model: ModelConfig, sizes: Sizes) -> list[Case]:
    """Every case of a calibration run, held-out ones marked (alternate sizes of each series).

    Raises:
        ValueError: an MLA model (see :func:`projection_shapes`) or an unknown device kind.
    """
    if device not in DTYPE:
        raise ValueError(f"unknown device {device!r}; valid: cuda, cpu")
    dtype = DTYPE[device]
    cases: list[Case] = []
    for k, n in projection_shapes(model).values():
        cases += [_gemm_case(k, n, t, i % 2 == 1, dtype) for i, t in enumerate(sizes.gemm_tokens)]
    grid = [(i, j, b, c) for i, b in enumerate(sizes.decode_batches) for j, c in enumerate(sizes.decode_contexts)
            if b * c <= sizes.decode_max_tokens]
    # CUDA: our Triton kernels and flash-attn / SDPA flash; SDPA's decode is left out (it would time a gather).
    backends = _attention_backends(device) if device == "cuda" else [None]
    for backend in backends:
        if backend is None or backend.prefill is not None:
            cases += [_prefill_case(backend, model, n, i % 2 == 1, dtype) for i, n in enumerate(sizes.prefill_lengths)]
        if backend is None or (backend.decode is not None and backend.name in DECODE_PAGE):
            cases += [_decode_case(backend, model, b, c, (i + j) % 2 == 1, dtype) for i, j, b, c in grid]
    cases += [_store_case(model, t, i % 2 == 1, dtype, device == "cuda") for i, t in enumerate(sizes.store_tokens)]
    return cases


# ---- running -------------------------------------------------------------------------


def _measurement(case: Case, t: timing.Timing) -> Measurement:
    return Measurement(op=case.op, implementation=case.implementation, shape=case.shape, dtype=case.dtype,
                       flops=case.flops, bytes=case.bytes, median_s=t.median_s, spread_s=t.spread_s,
                       runs=t.runs, held_out=case.held_out)


GRAPH_REPLAY_S = 1e-3  # kernels per timed graph replay: about this long, so its launch is negligible
MAX_CALLS_PER_GRAPH = 256


def _time_cuda_case(fn: Callable[[Any], Any], inputs: list[Any], sizes: Sizes) -> tuple[timing.Timing, bool]:
    """Device time of one call, and whether it was measured inside a CUDA graph.

    As a serving engine runs its steps (vLLM captures CUDA graphs), the calls
    are captured in a graph, enough of them (rotating over the input copies)
    to run about ``GRAPH_REPLAY_S``, and each replay is timed with CUDA events
    (``timing.time_fn``); per call = replay time / calls. Python's launch cost
    is thus left out and the fitted launch overhead is the GPU's own. Where
    capture fails, the calls are timed eagerly, launch gaps included.
    """
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm up (Triton compiles) off the default stream, as capture requires
        for i in range(max(sizes.warmup, len(inputs))):
            fn(inputs[i % len(inputs)])
    torch.cuda.current_stream().wait_stream(side)
    eager = timing.time_fn(fn, inputs, "cuda", warmup=0, runs=len(inputs))
    rounds = math.ceil(GRAPH_REPLAY_S / max(eager.median_s, 1e-7) / len(inputs))
    calls = len(inputs) * max(1, min(rounds, MAX_CALLS_PER_GRAPH // len(inputs)))
    try:
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for i in range(calls):
                fn(inputs[i % len(inputs)])
    except RuntimeError:
        torch.cuda.synchronize()
        return timing.time_fn(fn, inputs, "cuda", warmup=1, runs=sizes.runs), False
    replay = timing.time_fn(lambda _, g=graph: g.replay(), [None], "cuda", warmup=2, runs=sizes.runs)
    del graph
    return timing.Timing(median_s=replay.median_s / calls, spread_s=replay.spread_s / calls, runs=replay.runs), True


def _time_cuda(cases: list[Case], sizes: Sizes, advance: Callable[[str], None]) -> tuple[list[Measurement], dict]:
    """Time each case on its own (built, timed, freed).

    Returns the measurements and notes for the profile's ``software``: how
    many cases could not be captured in a CUDA graph (timed eagerly instead),
    and which implementations refused some shapes (e.g. an SDPA backend
    without a kernel for them) or ran out of memory; those cases are left
    out. A CUDA error (the device is then unusable) aborts the run.
    """
    out, eager, refused = [], 0, {}
    for case in cases:
        advance(f"{case.op} {case.implementation}")
        try:
            fn, inputs = case.setup(Buffers("cuda", DTYPE["cuda"]))
            t, captured = _time_cuda_case(fn, inputs, sizes)
        except torch.cuda.OutOfMemoryError:
            torch.cuda.empty_cache()
            refused.setdefault(f"{case.op}/{case.implementation}", "out of memory at some sizes")
            continue
        except RuntimeError as exc:
            if "CUDA error" in str(exc):
                raise
            refused.setdefault(f"{case.op}/{case.implementation}", str(exc).splitlines()[0][:200])
            continue
        out.append(_measurement(case, t))
        eager += not captured
        del fn, inputs
        torch.cuda.empty_cache()  # the next case may need the memory this one's KV cache held
    notes = {"cuda_timing": "CUDA graph replays timed with CUDA events"
             + (f"; {eager} cases could not be captured and were timed eagerly" if eager else "")}
    if refused:
        notes["cuda_refused"] = "; ".join(f"{key}: {msg}" for key, msg in refused.items())
    return out, notes


def _cuda_ceilings(sizes: Sizes) -> list[Measurement]:
    """The device's ceilings from ``kernels.timing``: a large copy and a large bf16 GEMM."""
    copy = timing.measure_copy_bandwidth("cuda", sizes.copy_bytes, runs=sizes.runs)
    gemm = timing.measure_gemm_rate("cuda", sizes.gemm_n, runs=sizes.runs)
    n = sizes.gemm_n
    return [
        Measurement(op="copy", implementation="torch", shape={"bytes": copy.bytes_moved // 2}, dtype="uint8",
                    flops=0.0, bytes=float(copy.bytes_moved), median_s=copy.timing.median_s,
                    spread_s=copy.timing.spread_s, runs=copy.timing.runs),
        Measurement(op="peak_gemm", implementation="torch", shape={"m": n, "n": n, "k": n}, dtype=gemm.dtype,
                    flops=float(gemm.flops), bytes=float(3 * n * n * 2), median_s=gemm.timing.median_s,
                    spread_s=gemm.timing.spread_s, runs=gemm.timing.runs),
    ]


def _cpu_ceiling_cases(sizes: Sizes) -> list[Case]:
    """Copy (read + write bytes counted, kernels.md 4.3) and a large fp32 GEMM, timed with the other CPU cases."""
    nbytes, n = sizes.copy_bytes, sizes.gemm_n

    def copy_setup(buf: Buffers):
        src = torch.empty(nbytes, dtype=torch.uint8).fill_(1)
        return (lambda a: a[1].copy_(a[0])), [(src, torch.empty_like(src).fill_(0))]

    def gemm_setup(buf: Buffers):
        return (lambda a: torch.matmul(a[0], a[1], out=a[2])), [
            (buf.randn("x", n, n), buf.randn("w_peak", n, n), buf.randn("y", n, n))]

    return [
        Case("copy", "torch", {"bytes": nbytes}, "uint8", 0.0, 2.0 * nbytes, False, copy_setup),
        Case("peak_gemm", "torch", {"m": n, "n": n, "k": n}, "float32", 2.0 * n**3, 3.0 * n * n * 4, False,
             gemm_setup),
    ]


def _cpu_cache_bytes() -> int:
    """The last-level cache size as the C library reports it, at least 32 MiB."""
    try:
        reported = os.sysconf("SC_LEVEL3_CACHE_SIZE")
    except (ValueError, OSError):
        reported = 0
    return max(int(reported or 0), 32 * 2**20)


def cpu_clock(threads: int) -> tuple[Callable[[], float], str]:
    """The clock CPU runs are timed with, and its name.

    With one thread, the process's CPU time (CLOCK_PROCESS_CPUTIME_ID): equal
    to wall time on an idle machine, and not inflated while other processes
    hold the core, so a calibration on a shared machine stays repeatable. With
    more threads CPU time sums the threads (and their spin-waits), so wall time.
    """
    return (time.process_time, "process_time") if threads == 1 else (time.perf_counter, "perf_counter")


def _time_cpu_rounds(cases: list[Case], sizes: Sizes, advance: Callable[[str], None]) -> list[Measurement]:
    """Build every case (largest first, so each shared buffer is filled once), warm each up, then
    time one run of every case per round, flushing the cache before each run."""
    clock, _ = cpu_clock(torch.get_num_threads())
    buffers = Buffers("cpu", DTYPE["cpu"])
    built: dict[int, tuple] = {}
    for i in sorted(range(len(cases)), key=lambda i: -cases[i].bytes):
        advance(f"warm-up {cases[i].op}")
        fn, inputs = cases[i].setup(buffers)
        for w in range(sizes.warmup):
            fn(inputs[w % len(inputs)])
        built[i] = fn, inputs
    flush = torch.empty(2 * _cpu_cache_bytes(), dtype=torch.uint8)
    samples: list[list[float]] = [[] for _ in cases]
    for r in range(sizes.runs):
        advance(f"round {r + 1} of {sizes.runs}")
        for i, times in enumerate(samples):
            fn, inputs = built[i]
            flush.fill_(r)  # evict the previous case's data: every run starts from memory, as on a GPU
            start = clock()
            fn(inputs[r % len(inputs)])
            times.append(max(clock() - start, 1e-9))
    return [_measurement(case, timing.summarize(times)) for case, times in zip(cases, samples)]


def _software(device: str) -> dict[str, str]:
    versions = {"python": platform.python_version(), "torch": torch.__version__, "numpy": np.__version__}
    try:
        import triton

        versions["triton"] = triton.__version__
    except ImportError:
        pass
    try:
        import flash_attn

        versions["flash_attn"] = flash_attn.__version__
    except ImportError:
        pass
    if device == "cuda":
        versions["cuda"] = str(torch.version.cuda)
        try:
            out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                 capture_output=True, text=True, timeout=10, check=True)
            versions["driver"] = out.stdout.strip().splitlines()[0]
        except (OSError, subprocess.SubprocessError, IndexError):
            pass
    else:
        versions["torch_num_threads"] = str(torch.get_num_threads())
        versions["cpu_clock"] = cpu_clock(torch.get_num_threads())[1]
    return versions


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "CPU"


def _device_info(device: str, ceilings: list[Measurement]) -> DeviceInfo:
    rates = {m.op: (m.flops if m.op == "peak_gemm" else m.bytes) / m.median_s for m in ceilings}
    measured = {"measured_copy_bytes_per_s": rates["copy"], "measured_gemm_flops_per_s": rates["peak_gemm"]}
    if device == "cpu":
        threads = torch.get_num_threads()
        return DeviceInfo(name=f"{_cpu_name()} ({threads} thread{'s' if threads > 1 else ''})", kind="cpu",
                          **measured)
    name = torch.cuda.get_device_name()
    gpu_id = gpu_id_for_device_name(name)
    peaks = {}
    if gpu_id is not None:
        gpu = GPUS[gpu_id]
        peaks = {"peak_flops_per_s": gpu.bf16_flops_per_s, "peak_bytes_per_s": gpu.memory_bandwidth_bytes_per_s}
    return DeviceInfo(name=name, kind="cuda", gpu_id=gpu_id, **peaks, **measured)


def calibrate(
    device: str = "cpu",
    model_id: str | None = None,
    *,
    quick: bool = False,
    threads: int | None = None,
    profile_id: str | None = None,
    progress: bool = True,
) -> Profile:
    """Time the plan on ``device``, fit the cost model to it, and return the measured profile.

    Args:
        device: ``cuda`` (the current CUDA device) or ``cpu``.
        model_id: catalog model whose shapes are timed (default: llama-3.1-8b on
            CUDA, llama-3.2-1b on the CPU).
        quick: the smaller pack (CPU: under a minute on two cores).
        threads: CPU only: ``torch.set_num_threads`` for the whole run (default: torch's).
        profile_id: the profile's id (default ``<gpu id>-measured``, ``cpu-measured``).
        progress: draw a progress bar on stderr.

    Raises:
        ValueError: unknown device or model, an MLA model, or CUDA requested without a GPU.
    """
    if device not in DTYPE:
        raise ValueError(f"unknown device {device!r}; valid: cuda, cpu")
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda: torch sees no CUDA GPU (use --device cpu for the CPU pipeline)")
    if device == "cuda" and os.environ.get("TRITON_INTERPRET") == "1":
        raise ValueError("TRITON_INTERPRET=1 is set: timings would measure Triton's interpreter; unset it")
    model = get_model(model_id or DEFAULT_MODEL[device])
    previous_threads = torch.get_num_threads()
    if device == "cpu" and threads is not None:
        torch.set_num_threads(threads)
    try:
        torch.manual_seed(0)
        sizes = sizes_for(device, quick)
        cases = plan(device, model, sizes) + (_cpu_ceiling_cases(sizes) if device == "cpu" else [])
        steps = len(cases) + (sizes.runs if device == "cpu" else 1)
        with _Progress(progress, steps, f"calibrating {device}") as advance:
            software = _software(device)
            if device == "cuda":
                timed, notes = _time_cuda(cases, sizes, advance)
                software.update(notes)
                advance("ceilings: copy and large GEMM")
                timed += _cuda_ceilings(sizes)
            else:
                timed = _time_cpu_rounds(cases, sizes, advance)
        info = _device_info(device, [m for m in timed if m.op in CEILING_OPS])
        created = dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat()
        pack = "quick" if quick else "full"
        return measured_profile(
            profile_id=profile_id or f"{info.gpu_id or device}-measured",
            description=(f"Measured by pdlab calibrate ({pack} pack) on {info.name}: {model.name} shapes, "
                         f"{_dtype_name(DTYPE[device])}; rates fitted by least squares on half the sizes, "
                         "error on the other half."),
            device=info, software=software, measurements=timed, created=created,
        )
    finally:
        torch.set_num_threads(previous_threads)


class _Progress:
    """A rich progress bar on stderr (or nothing); ``advance(label)`` steps it."""

    def __init__(self, enabled: bool, total: int, title: str):
        self.enabled, self.total, self.title = enabled, total, title

    def __enter__(self) -> Callable[[str], None]:
        if not self.enabled:
            return lambda label: None
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                            TimeElapsedColumn(), console=Console(stderr=True), transient=False)
        self.bar.start()
        task = self.bar.add_task(self.title, total=self.total)

        def advance(label: str) -> None:
            self.bar.update(task, advance=1, description=f"{self.title}: {label}")

        return advance

    def __exit__(self, *exc) -> None:
        if self.enabled:
            self.bar.stop()


def print_error_table(profile: Profile) -> None:
    """Print the fit's held-out error per op class and implementation (a rich table on stdout)."""
    from rich.console import Console
    from rich.table import Table

    from engine.calibration import error_rows

    table = Table(title=f"{profile.id}: |error| on sizes held out of the fit")
    for name in ("op class", "implementation", "sizes", "median %", "worst %"):
        table.add_column(name, justify="left" if name in ("op class", "implementation") else "right")
    for row in error_rows(profile):
        pct = (lambda v: "-" if v is None else f"{v:.1f}")
        impl = row["implementation"] + ("" if row["in_use"] else " (not used)")
        table.add_row(row["op"], impl, str(row["cases"]), pct(row["median_abs_pct"]), pct(row["worst_abs_pct"]))
    Console().print(table)

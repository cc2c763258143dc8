"""Time the attention and KV-store kernels at representative shapes, next to
the device's measured ceilings.

    python bench/kernels.py [--device cuda|cpu] [--out bench/results]

CUDA: our Triton kernels, and flash-attn where installed (torch SDPA's flash
backend otherwise), on Llama-3.1-8B-like attention (32 heads, 8 KV heads, head
dim 128, bf16, block size 256): prefill of one sequence of 1k-16k tokens, one
chunked-prefill step (2k new tokens over 6k cached), decode at batch 1-64 x
context 1k-8k, and a 4k-token KV store. Fixed kernel configs: a run takes
well under a minute on an H100/H200. ``--device cpu`` is a smoke run at tiny
shapes (Triton under its interpreter, against the torch reference); without
CUDA and without ``--device cpu`` the script says so and exits 0.

Counts (kernels.md 4.7): prefill FLOPs ``4 H D (q c + q (q+1) / 2)`` per
sequence; decode FLOPs ``4 H D L`` per sequence; bytes = K and V read once +
q read + output written (+ K and V written for the store). Times: median and
interquartile range of CUDA-event-timed runs, inputs rotated past the L2 cache
(``kernels.timing``).
"""

import argparse
import datetime
import importlib.metadata
import json
import os
import platform
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path

import torch

# As `python bench/kernels.py`, this file's folder comes first on sys.path and
# this module would shadow the `kernels` package.
_ROOT = Path(__file__).resolve().parents[1]
sys.path[:] = [str(_ROOT)] + [p for p in sys.path if Path(p or ".").resolve() != _ROOT / "bench"]


@dataclass(frozen=True)
class Shapes:
    """The benchmark's sizes (tokens, heads) and run counts for one device kind."""

    heads: int
    kv_heads: int
    head_dim: int
    block_size: int
    prefill_tokens: tuple[int, ...]
    chunk: tuple[int, int]  # (new tokens, cached tokens)
    decode_batches: tuple[int, ...]
    decode_contexts: tuple[int, ...]
    store_tokens: int
    warmup: int
    runs: int


CUDA_SHAPES = Shapes(
    heads=32, kv_heads=8, head_dim=128, block_size=256, prefill_tokens=(1024, 4096, 8192, 16384), chunk=(2048, 6144),
    decode_batches=(1, 8, 32, 64), decode_contexts=(1024, 4096, 8192), store_tokens=4096, warmup=5, runs=30,
)
CPU_SHAPES = Shapes(
    heads=8, kv_heads=2, head_dim=64, block_size=16, prefill_tokens=(32,), chunk=(16, 24),
    decode_batches=(1, 2), decode_contexts=(16, 40), store_tokens=16, warmup=1, runs=2,
)


@dataclass(frozen=True)
class Case:
    """One timed call: its op class, a shape label, FLOPs and bytes per call, and its inputs' maker."""

    op: str  # calibration op class (engine.calibration.OP_CLASSES)
    shape: str
    flops: float
    bytes_: float
    entry: str  # the Backend attribute to call, or "store" for the KV store
    make: Callable[[], tuple]  # one fresh input copy (the call's arguments)


@dataclass(frozen=True)
class Row:
    """One result: median and IQR in ms, achieved TFLOP/s and GB/s (1e9 bytes/s)."""

    op: str
    shape: str
    impl: str
    median_ms: float
    spread_ms: float
    tflops: float
    gb_per_s: float


def _paged_cache(seqlens: list[int], s: Shapes, dtype, device):
    """Random K/V caches with each sequence in shuffled blocks, and the block table."""
    per_seq = [-(-n // s.block_size) for n in seqlens]
    k_cache = torch.randn(sum(per_seq), s.block_size, s.kv_heads, s.head_dim, dtype=dtype, device=device)
    v_cache = torch.randn_like(k_cache)
    order = torch.randperm(sum(per_seq), device=device).to(torch.int32)
    block_table = torch.zeros(len(seqlens), max(per_seq), dtype=torch.int32, device=device)
    start = 0
    for b, n in enumerate(per_seq):
        block_table[b, :n] = order[start : start + n]
        start += n
    return k_cache, v_cache, block_table


def _prefill_inputs(n: int, s: Shapes, dtype, device) -> tuple:
    q = torch.randn(n, s.heads, s.head_dim, dtype=dtype, device=device)
    k, v = (torch.randn(n, s.kv_heads, s.head_dim, dtype=dtype, device=device) for _ in range(2))
    return q, k, v, torch.tensor([0, n], dtype=torch.int32, device=device), n


def _chunked_inputs(s: Shapes, dtype, device) -> tuple:
    q_len, ctx = s.chunk
    q = torch.randn(q_len, s.heads, s.head_dim, dtype=dtype, device=device)
    k_cache, v_cache, block_table = _paged_cache([ctx + q_len], s, dtype, device)
    cu_seqlens = torch.tensor([0, q_len], dtype=torch.int32, device=device)
    return q, k_cache, v_cache, cu_seqlens, q_len, block_table, torch.tensor([ctx], dtype=torch.int32, device=device)


def _decode_inputs(batch: int, ctx: int, s: Shapes, dtype, device) -> tuple:
    q = torch.randn(batch, s.heads, s.head_dim, dtype=dtype, device=device)
    k_cache, v_cache, block_table = _paged_cache([ctx] * batch, s, dtype, device)
    return q, k_cache, v_cache, block_table, torch.full((batch,), ctx, dtype=torch.int32, device=device)


def _store_inputs(n: int, s: Shapes, dtype, device) -> tuple:
    key, value = (torch.randn(n, s.kv_heads, s.head_dim, dtype=dtype, device=device) for _ in range(2))
    k_cache, v_cache = (
        torch.empty(-(-n // s.block_size), s.block_size, s.kv_heads, s.head_dim, dtype=dtype, device=device)
        for _ in range(2)
    )
    return key, value, k_cache, v_cache, torch.randperm(n, device=device)


def cases(s: Shapes, dtype, device) -> list[Case]:
    """The timed cases, with FLOP and byte counts per call (see the module docstring)."""
    h, hkv, d = s.heads, s.kv_heads, s.head_dim
    el = torch.empty(0, dtype=dtype).element_size()
    out = [
        Case("prefill_attention", f"q={n} c=0", 4 * h * d * n * (n + 1) / 2, 2 * n * (h + hkv) * d * el,
             "prefill", partial(_prefill_inputs, n, s, dtype, device))
        for n in s.prefill_tokens
    ]
    q_len, ctx = s.chunk
    out.append(Case(
        "prefill_attention", f"q={q_len} c={ctx}", 4 * h * d * (q_len * ctx + q_len * (q_len + 1) / 2),
        (2 * q_len * h + 2 * (q_len + ctx) * hkv) * d * el, "chunked_prefill",
        partial(_chunked_inputs, s, dtype, device),
    ))
    out += [
        Case("decode_attention", f"batch={b} L={ctx}", 4 * h * d * ctx * b, 2 * b * (ctx * hkv + h) * d * el,
             "decode", partial(_decode_inputs, b, ctx, s, dtype, device))
        for b in s.decode_batches
        for ctx in s.decode_contexts
    ]
    n = s.store_tokens
    out.append(Case("kv_store", f"tokens={n}", 0.0, 4 * n * hkv * d * el, "store",
                    partial(_store_inputs, n, s, dtype, device)))
    return out


def _driver_version() -> str:
    try:
        result = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=30, check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return result.stdout.strip().splitlines()[0] if result.stdout.strip() else "unknown"


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "absent"


def environment(device: torch.device) -> dict[str, str]:
    """Date, device, driver and software versions for the results file."""
    on_cuda = device.type == "cuda"
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "device": torch.cuda.get_device_name(device) if on_cuda else platform.processor() or platform.machine(),
        "driver": _driver_version() if on_cuda else "n/a",
        "cuda": torch.version.cuda or "n/a",
        "torch": torch.__version__,
        "triton": _version("triton"),
        "flash-attn": _version("flash-attn"),
        "python": platform.python_version(),
    }


def run_cases(device: torch.device, shapes: Shapes, dtype) -> list[Row]:
    """Time every case on every backend of ``device`` that supports it."""
    from kernels.backends import available_backends
    from kernels.store_kvcache import store_kvcache
    from kernels.timing import rotation_copies, time_fn

    backends = available_backends(device)
    rows = []
    for case in cases(shapes, dtype, device):
        if case.entry == "store":
            impls = [("triton", store_kvcache)]
        else:
            impls = [(b.name, getattr(b, case.entry)) for b in backends if getattr(b, case.entry) is not None]
        inputs = [case.make() for _ in range(rotation_copies(int(case.bytes_), device))]
        for name, fn in impls:
            t = time_fn(lambda args: fn(*args), inputs, device, warmup=shapes.warmup, runs=shapes.runs)
            rows.append(Row(case.op, case.shape, name, t.median_s * 1e3, t.spread_s * 1e3,
                            case.flops / t.median_s / 1e12, case.bytes_ / t.median_s / 1e9))
        del inputs
    return rows


def render(rows: list[Row], env: dict[str, str], copy_gb_per_s: float, gemm_tflops: float, gemm_dtype: str):
    """The results table (rich), with each rate as a share of the measured ceiling."""
    from rich.table import Table

    title = (f"{env['device']}: copy {copy_gb_per_s:,.0f} GB/s (read+write), "
             f"{gemm_dtype} GEMM {gemm_tflops:,.1f} TFLOP/s")
    table = Table(title=title)
    for col in ("op", "shape", "impl", "median ms", "IQR ms", "TFLOP/s", "% GEMM", "GB/s", "% copy"):
        table.add_column(col, justify="left" if col in ("op", "shape", "impl") else "right")
    for r in rows:
        table.add_row(
            r.op, r.shape, r.impl, f"{r.median_ms:.4f}", f"{r.spread_ms:.4f}",
            f"{r.tflops:.4g}" if r.tflops else "-", f"{100 * r.tflops / gemm_tflops:.0f}%" if r.tflops else "-",
            f"{r.gb_per_s:.4g}", f"{100 * r.gb_per_s / copy_gb_per_s:.0f}%",
        )
    return table


def main(argv: list[str] | None = None) -> int:
    """Parse the command line, time everything, print the table, write it under --out. Returns the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                        help="cuda (default) or cpu: a smoke run at tiny shapes under the Triton interpreter")
    parser.add_argument("--out", type=Path, help="folder to write the table and environment into (e.g. bench/results)")
    args = parser.parse_args(argv)

    from rich.console import Console

    console = Console(record=True, width=120)
    if args.device == "cuda" and not torch.cuda.is_available():
        console.print("No CUDA device: nothing to benchmark. (Use --device cpu for a smoke run of the CPU path.)")
        return 0
    if args.device == "cpu":
        os.environ["TRITON_INTERPRET"] = "1"  # before anything imports triton
    from kernels.timing import measure_copy_bandwidth, measure_gemm_rate

    device = torch.device(args.device)
    shapes, dtype = (CUDA_SHAPES, torch.bfloat16) if device.type == "cuda" else (CPU_SHAPES, torch.float16)
    env = environment(device)
    copy = measure_copy_bandwidth(device)
    gemm = measure_gemm_rate(device)
    rows = run_cases(device, shapes, dtype)
    table = render(rows, env, copy.bytes_per_s / 1e9, gemm.flop_per_s / 1e12, gemm.dtype)
    console.print(table)
    console.print(" ".join(f"{k}={v}" for k, v in env.items()))

    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        stamp = datetime.datetime.fromisoformat(env["date"]).strftime("%Y%m%d-%H%M")
        stem = args.out / f"kernels-{stamp}-{re.sub(r'[^a-z0-9]+', '-', env['device'].lower()).strip('-')}"
        header = "\n".join(f"- {k}: {v}" for k, v in env.items())
        stem.with_suffix(".md").write_text(f"# Kernel benchmark\n\n{header}\n\n```\n{console.export_text()}```\n")
        stem.with_suffix(".json").write_text(json.dumps({
            "environment": env,
            "ceilings": {"copy_gb_per_s": copy.bytes_per_s / 1e9, "gemm_tflops": gemm.flop_per_s / 1e12,
                         "gemm_dtype": gemm.dtype},
            "rows": [asdict(r) for r in rows],
        }, indent=2) + "\n")
        console.print(f"wrote {stem}.md and {stem}.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Calibration profiles: the attainable rates the cost model runs on.

A profile says, per op class, how fast this device really runs FLOPs and
moves bytes. Two kinds exist (DESIGN.md, "Calibration profile"):

* ``datasheet``: the catalog GPU's peaks times efficiency factors quoted
  from named public measurements (below). Never presented as measured.
* ``measured``: written by ``pdlab calibrate`` from kernels timed on a device.

Time of one op (Hockney's r-infinity / n-half form plus a launch cost)::

    t = launches * launch_overhead_s
        + max((flops + n_half_flops) / flops_per_s, (bytes + n_half_bytes) / bytes_per_s)

for ops that do any work, and 0 for ops that do none.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from engine.hardware import GPU, GPUS

OP_CLASSES = ("gemm", "prefill_attention", "decode_attention", "kv_store", "elementwise")
OpClass = Literal["gemm", "prefill_attention", "decode_attention", "kv_store", "elementwise"]

# Efficiency factors of the datasheet profiles, each with its public source.
GEMM_FLOPS_EFFICIENCY = 794.5 / 989.4
GEMM_FLOPS_SOURCE = (
    "best measured bf16 GEMM on H100 SXM, 794.5 of 989.4 TFLOP/s (80.3%): "
    "stas00/ml-engineering, compute/accelerator/README.md (mamf-finder)"
)
MEMORY_EFFICIENCY = 2.8 / 3.35
MEMORY_SOURCE = "coalesced loads at ~2.8 of 3.35 TB/s (84%) on H100 SXM: mikamirai.com blog"
PREFILL_ATTENTION_EFFICIENCY = 370 / 989.4
PREFILL_ATTENTION_SOURCE = (
    "FlashAttention-2 forward at ~370 TFLOP/s, head dim 128, 8k-16k tokens on H100 SXM: "
    "FlashAttention-3 paper (arXiv 2407.08608), attention forward speed figure"
)
DECODE_ATTENTION_EFFICIENCY = 0.779
DECODE_ATTENTION_SOURCE = (
    "paged decode attention at 77.9% of peak bandwidth (64 seqs x 512 tokens): "
    "microsoft/onnxruntime PR #21414"
)
LAUNCH_OVERHEAD_S = 1.28e-6
LAUNCH_OVERHEAD_SOURCE = "1.28 us per kernel launched inside a CUDA graph (H100 NVL report, kernels.md 4.3)"
ALL_REDUCE_LATENCY_S = 20e-6
ALL_REDUCE_LATENCY_SOURCE = "nccl_cpu_launch_overhead_ms = 0.02 in microsoft/vidur's profiling config"


class OpRates(BaseModel):
    """Attainable rates of one op class (see the module docstring for the time formula).

    Attributes:
        flops_per_s: attainable FLOP/s at large sizes (Hockney's r-infinity).
        bytes_per_s: attainable memory bytes/s at large sizes.
        n_half_flops: FLOPs at which half of flops_per_s is reached.
        n_half_bytes: bytes at which half of bytes_per_s is reached.
        launch_overhead_s: fixed cost per kernel launch, seconds.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    flops_per_s: float = Field(gt=1e6, le=1e18)
    bytes_per_s: float = Field(gt=1e6, le=1e16)
    n_half_flops: float = Field(default=0.0, ge=0, le=1e15)
    n_half_bytes: float = Field(default=0.0, ge=0, le=1e13)
    launch_overhead_s: float = Field(default=0.0, ge=0, le=1.0)

    def time_s(self, flops, bytes_, launches=1.0):
        """Seconds for ops of ``flops`` FLOPs moving ``bytes_`` bytes (numpy-broadcastable).

        Ops with no work take 0 s (no launch either).
        """
        flops = np.asarray(flops, dtype=float)
        bytes_ = np.asarray(bytes_, dtype=float)
        busy = np.maximum(
            (flops + self.n_half_flops) / self.flops_per_s,
            (bytes_ + self.n_half_bytes) / self.bytes_per_s,
        )
        return np.where((flops > 0) | (bytes_ > 0), busy + launches * self.launch_overhead_s, 0.0)


class DeviceInfo(BaseModel):
    """The device a profile describes.

    Attributes:
        name: as the driver reports it (or the catalog name for datasheet profiles).
        kind: ``cuda`` or ``cpu``.
        gpu_id: the catalog GPU this device is, when it is one.
        peak_flops_per_s: the dense bf16 peak used (datasheet), FLOP/s.
        peak_bytes_per_s: the datasheet memory bandwidth, bytes/s.
        measured_copy_bytes_per_s: a large device copy, read + write bytes counted.
        measured_gemm_flops_per_s: a large bf16 GEMM (fp32 on CPUs).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(max_length=200)
    kind: Literal["cuda", "cpu"]
    gpu_id: str | None = Field(default=None, max_length=64)
    peak_flops_per_s: float | None = Field(default=None, gt=0, le=1e18)
    peak_bytes_per_s: float | None = Field(default=None, gt=0, le=1e16)
    measured_copy_bytes_per_s: float | None = Field(default=None, gt=0, le=1e16)
    measured_gemm_flops_per_s: float | None = Field(default=None, gt=0, le=1e18)


class Measurement(BaseModel):
    """One timed case: an op run by one implementation at one shape.

    Attributes:
        op: the op class (``gemm``, ``prefill_attention``, ...) or ``copy`` for ceilings.
        implementation: ``triton``, ``flash_attn``, ``torch_sdpa_flash`` or ``torch``.
        shape: named sizes (tokens, batch, context, heads, head_dim, ...).
        dtype: element type, e.g. ``bfloat16``.
        flops: FLOPs the case performs; bytes: bytes it must move (model-level count).
        median_s: median time of the runs, seconds; spread_s: their interquartile range.
        runs: how many timed runs.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    op: str = Field(max_length=64)
    implementation: str = Field(max_length=64)
    shape: dict[str, int] = Field(max_length=16)
    dtype: str = Field(max_length=32)
    flops: float = Field(ge=0, le=1e20)
    bytes: float = Field(ge=0, le=1e16)
    median_s: float = Field(gt=0, le=3600)
    spread_s: float = Field(ge=0, le=3600)
    runs: int = Field(ge=1, le=1_000_000)


class FitError(BaseModel):
    """Absolute percentage error of the fit on sizes held out of it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    median_abs_pct: float = Field(ge=0, le=1e6)
    worst_abs_pct: float = Field(ge=0, le=1e6)
    cases: int = Field(ge=0)


class Fit(BaseModel):
    """The cost model's constants per op class, and how well they fit."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    ops: dict[OpClass, OpRates]
    all_reduce_latency_s: float = Field(default=ALL_REDUCE_LATENCY_S, ge=0, le=1.0)
    error: dict[str, FitError] = Field(default_factory=dict)


class Profile(BaseModel):
    """A calibration profile (DESIGN.md, "Calibration profile").

    Raises:
        pydantic.ValidationError: on construction from a malformed document.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9._-]{0,63}$")
    provenance: Literal["measured", "datasheet"]
    description: str = Field(max_length=2000)
    created: str = Field(default="", max_length=64)
    device: DeviceInfo
    software: dict[str, str] = Field(default_factory=dict, max_length=32)
    measurements: list[Measurement] = Field(default_factory=list, max_length=20_000)
    fit: Fit

    def rates(self, op: OpClass) -> OpRates:
        """The fitted rates of one op class."""
        return self.fit.ops[op]


def datasheet_profile(gpu: GPU) -> Profile:
    """The datasheet profile of a catalog GPU: peaks x quoted efficiency factors.

    Every factor was measured on an H100 and is applied to every GPU's own
    datasheet peaks; the profile's description lists the sources.
    """
    flops, bw = gpu.bf16_flops_per_s, gpu.memory_bandwidth_bytes_per_s
    mem = MEMORY_EFFICIENCY * bw

    def rates(flops_eff: float, bytes_per_s: float) -> OpRates:
        return OpRates(
            flops_per_s=flops_eff * flops, bytes_per_s=bytes_per_s, launch_overhead_s=LAUNCH_OVERHEAD_S
        )

    ops = {
        "gemm": rates(GEMM_FLOPS_EFFICIENCY, mem),
        "prefill_attention": rates(PREFILL_ATTENTION_EFFICIENCY, mem),
        "decode_attention": rates(PREFILL_ATTENTION_EFFICIENCY, DECODE_ATTENTION_EFFICIENCY * bw),
        "kv_store": rates(GEMM_FLOPS_EFFICIENCY, mem),
        "elementwise": rates(GEMM_FLOPS_EFFICIENCY, mem),
    }
    sources = [
        f"{gpu.name}: {gpu.source}",
        f"GEMM: {GEMM_FLOPS_SOURCE}",
        f"memory: {MEMORY_SOURCE}",
        f"prefill attention: {PREFILL_ATTENTION_SOURCE}",
        f"decode attention: {DECODE_ATTENTION_SOURCE}",
        f"launch: {LAUNCH_OVERHEAD_SOURCE}",
        f"all-reduce: {ALL_REDUCE_LATENCY_SOURCE}",
    ]
    return Profile(
        id=f"{gpu.id}-datasheet",
        provenance="datasheet",
        description="Datasheet peaks x efficiency factors measured on H100 by others. " + "; ".join(sources),
        device=DeviceInfo(
            name=gpu.name, kind="cuda", gpu_id=gpu.id,
            peak_flops_per_s=flops, peak_bytes_per_s=bw,
        ),
        fit=Fit(ops=ops),
    )


class ProfileError(ValueError):
    """A profile file could not be read or is not a valid profile."""


MAX_PROFILE_BYTES = 4 * 1024 * 1024


def parse_profile(text: str | bytes) -> Profile:
    """Validate a profile document.

    Raises:
        ProfileError: too large, not JSON, or not a profile; the message names
            the offending fields.
    """
    if len(text) > MAX_PROFILE_BYTES:
        raise ProfileError(f"profile is {len(text)} bytes; the limit is {MAX_PROFILE_BYTES}")
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise ProfileError(f"profile is not valid JSON: {exc}") from None
    try:
        return Profile.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '(document)'}: {e['msg']}" for e in exc.errors()[:10]
        )
        raise ProfileError(f"not a calibration profile: {problems}") from None


def load_profile(path: str | Path) -> Profile:
    """Read and validate a profile file.

    Raises:
        ProfileError: unreadable file, or see :func:`parse_profile`.
    """
    try:
        text = Path(path).read_bytes()
    except OSError as exc:
        raise ProfileError(f"cannot read profile {path}: {exc.strerror}") from None
    return parse_profile(text)


PROFILES_DIR = Path(__file__).parent / "profiles"

PROFILES: dict[str, Profile] = {f"{g.id}-datasheet": datasheet_profile(g) for g in GPUS.values()}
PROFILES.update({p.id: p for p in (load_profile(f) for f in sorted(PROFILES_DIR.glob("*.json")))})


def register_profile(profile: Profile) -> None:
    """Make a profile selectable by its id in every lab (``serve --profile``)."""
    PROFILES[profile.id] = profile


def resolve_profile(profile_id: str, gpu: GPU) -> Profile:
    """The profile a lab should use: ``datasheet`` means the GPU's own datasheet profile.

    Raises:
        KeyError: unknown profile id; the message lists the valid ids.
    """
    if profile_id == "datasheet":
        return PROFILES[f"{gpu.id}-datasheet"]
    try:
        return PROFILES[profile_id]
    except KeyError:
        raise KeyError(f"unknown profile {profile_id!r}; valid: datasheet, {', '.join(PROFILES)}") from None

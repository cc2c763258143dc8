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

A measured profile's rates are fitted here (numpy least squares, see
:func:`fit_op_rates`) to the raw timings the calibrate command records; the
fit's error is measured on sizes held out of the fit (:func:`fit_measurements`).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Annotated, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError, field_validator, model_validator

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
        held_out: True when the case was kept out of the fit to measure its error.
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
    held_out: bool = False


class FitError(BaseModel):
    """Absolute percentage error of the fit on sizes held out of it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    median_abs_pct: float = Field(ge=0, le=1e6)
    worst_abs_pct: float = Field(ge=0, le=1e6)
    cases: int = Field(ge=0)


class Fit(BaseModel):
    """The cost model's constants per op class, and how well they fit.

    Attributes:
        ops: the rates the cost model uses, per op class.
        all_reduce_latency_s: fixed cost of one all-reduce (not measured by calibrate).
        error: held-out error per op class (the implementation in ``ops``), and
            per ``"op/implementation"`` for every implementation fitted.
        sources: per op class, where its rates come from (which measurements, or
            which ceiling when nothing of that class was timed).
        implementations: per op class, the implementation whose timings ``ops`` was fitted to.
        alternatives: rates fitted to the other implementations timed, keyed
            ``"op/implementation"`` (shown on the calibration page, unused by labs).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    ops: dict[OpClass, OpRates]
    all_reduce_latency_s: float = Field(default=ALL_REDUCE_LATENCY_S, ge=0, le=1.0)
    error: dict[str, FitError] = Field(default_factory=dict)
    sources: dict[str, str] = Field(default_factory=dict)
    implementations: dict[str, str] = Field(default_factory=dict)
    # Keys are split on "/" by the calibration page: an uploaded profile must not break that.
    alternatives: dict[Annotated[str, StringConstraints(pattern=r"^[^/]+/.+$", max_length=130)], OpRates] = Field(
        default_factory=dict)

    @field_validator("ops")
    @classmethod
    def _every_op_class(cls, ops: dict[str, OpRates]) -> dict[str, OpRates]:
        missing = [op for op in OP_CLASSES if op not in ops]
        if missing:
            raise ValueError(f"no rates for {', '.join(missing)}; every lab needs all of {', '.join(OP_CLASSES)}")
        return ops


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

    @model_validator(mode="after")
    def _measured_has_measurements(self) -> Profile:
        if self.provenance == "measured" and not self.measurements:
            raise ValueError("a measured profile must carry the measurements it was fitted to")
        return self

    def rates(self, op: OpClass) -> OpRates:
        """The fitted rates of one op class."""
        return self.fit.ops[op]

    def rates_for(self, op: str, implementation: str) -> OpRates | None:
        """The rates fitted to one implementation of an op class, or None if it was not fitted."""
        key = f"{op}/{implementation}"
        if key in self.fit.alternatives:
            return self.fit.alternatives[key]
        if op in self.fit.ops and self.fit.implementations.get(op) == implementation:
            return self.fit.ops[op]
        return None


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


# ---- fitting a measured profile ---------------------------------------------

PREFERRED_IMPLEMENTATIONS = ("flash_attn", "torch_sdpa_flash", "triton", "torch")
"""Which timed implementation an op class's rates come from, first found wins:
the labs model a serving engine, which runs FlashAttention where it can (vLLM's
default on NVIDIA GPUs); our Triton kernels otherwise; torch on a CPU."""

CEILING_OPS = ("copy", "peak_gemm")
"""Measurement ops that record the device's ceilings rather than a cost-model op class."""

_INTENSITY_GAP = 1.05  # split candidates only between intensities at least 5% apart
_TIE = 0.02  # fits within 2% of the least squared error are equally good


def _line_fit(x: np.ndarray, t: np.ndarray) -> tuple[float, float] | None:
    """(s, c) minimising sum(((s x + c) - t) / t)^2 with s > 0, c >= 0; None if x is all 0.

    The unconstrained 2-parameter solution is used when it is feasible;
    otherwise the best line through the origin (c = 0), which is the
    constrained optimum whenever the unconstrained intercept came out negative.
    """
    w = 1.0 / t
    if x.size >= 2 and np.ptp(x) > 0:
        (s, c), *_ = np.linalg.lstsq(np.column_stack([x * w, w]), np.ones_like(t), rcond=None)
        if s > 0 and c >= 0:
            return float(s), float(c)
    xw = x * w
    if not np.any(xw > 0):
        return None
    return float(xw.sum() / (xw @ xw)), 0.0


def _predict(params: tuple[float, float, float, float], F, B) -> np.ndarray:
    a, cF, b, cB = params
    return np.maximum(a * F + cF, b * B + cB)


def _objective(params, F, B, t) -> float:
    r = _predict(params, F, B) / t - 1.0
    return float(r @ r)


def _fit_split(F, B, t, compute: np.ndarray, ceiling: OpRates):
    """Fit the compute line to the ``compute`` points and the memory line to the rest.

    A side with no points (or no FLOPs, as a KV store) takes its slope from the
    ceiling and the other side's intercept. Returns ``(params, utilisation)``,
    utilisation being the largest fraction of its ceiling a fitted side reaches,
    or None when neither side can be fitted.
    """
    comp = _line_fit(F[compute], t[compute]) if compute.any() else None
    mem = _line_fit(B[~compute], t[~compute]) if (~compute).any() else None
    if comp is None and mem is None:
        return None
    util = max((1.0 / comp[0]) / ceiling.flops_per_s if comp else 0.0,
               (1.0 / mem[0]) / ceiling.bytes_per_s if mem else 0.0)
    if comp is None:
        comp = (1.0 / ceiling.flops_per_s, mem[1])
    if mem is None:
        mem = (1.0 / ceiling.bytes_per_s, comp[1])
    return (comp[0], comp[1], mem[0], mem[1]), util


def fit_op_rates(flops, bytes_, seconds, ceiling: OpRates) -> OpRates:
    """Fit one op class's :class:`OpRates` to timed cases, by least squares in numpy.

    The model of one launch is ``t = max(a F + cF, b B + cB)`` with
    a = 1 / flops_per_s, b = 1 / bytes_per_s and intercepts cF, cB >= 0; it is
    exactly ``OpRates.time_s(F, B, 1)`` once the shared part of the intercepts
    becomes the launch overhead, L = min(cF, cB), and the rest Hockney's
    n-half: n_half_flops = (cF - L) / a, n_half_bytes = (cB - L) / b (Hockney,
    "The science of computer benchmarking", 1996: t = (n + n_half) / r_inf).

    The max() is not linear, so the fit searches the classification of points
    into compute- and memory-dominated sets: for a fixed classification both
    lines are linear least squares in relative error (weights 1 / t), solved
    with ``numpy.linalg.lstsq``. Starting classifications: all memory, all
    compute, the ceilings' ridge point, and every split of the points sorted by
    arithmetic intensity F / B (between intensities >= 5% apart). From each, the
    points are reclassified by which term the current fit makes larger and
    refitted, until the classification is stable (at most 50 rounds). The fit
    with the least sum of squared relative errors wins. A side no point
    dominates takes its rate from ``ceiling`` (a device's measured large-GEMM
    and copy rates), so an op that never does FLOPs (a KV store) is still valid.
    Fits within 2% of the least error are ties (when every case has about the
    same arithmetic intensity, as decode attention, a compute-bound and a
    memory-bound reading explain the times alike): the one whose fitted rate
    is the larger fraction of its ceiling wins, since the resource nearest its
    limit is the one that binds.

    Args:
        flops, bytes_, seconds: 1-D arrays of equal length n >= 1: each case's
            FLOPs, bytes moved (the cost model's counts) and median time, s > 0.
        ceiling: rates used for a side the measurements do not determine.

    Returns:
        OpRates with ``time_s(flops, bytes_, 1)`` the fitted prediction
        (rates clipped into the schema's bounds).

    Raises:
        ValueError: empty or mismatched arrays, or non-positive times.
    """
    F = np.asarray(flops, dtype=float)
    B = np.asarray(bytes_, dtype=float)
    t = np.asarray(seconds, dtype=float)
    if not (F.ndim == B.ndim == t.ndim == 1 and F.size == B.size == t.size >= 1):
        raise ValueError("flops, bytes_ and seconds must be 1-D arrays of one length >= 1")
    if np.any(t <= 0) or np.any(F < 0) or np.any(B < 0) or not np.all(np.isfinite(t)):
        raise ValueError("times must be positive and finite, flops and bytes >= 0")

    intensity = F / np.maximum(B, 1e-30)
    starts = [np.zeros(F.size, bool), np.ones(F.size, bool),
              intensity >= ceiling.flops_per_s / ceiling.bytes_per_s]
    levels = np.unique(intensity)
    starts += [intensity >= hi for lo, hi in zip(levels[:-1], levels[1:]) if hi >= _INTENSITY_GAP * lo]

    candidates = []  # (objective, utilisation, params)
    for compute in starts:
        fitted = _fit_split(F, B, t, compute, ceiling)
        for _ in range(50):
            if fitted is None:
                break
            params, util = fitted
            candidates.append((_objective(params, F, B, t), util, params))
            a, cF, b, cB = params
            nxt = a * F + cF >= b * B + cB
            if np.array_equal(nxt, compute):
                break
            compute = nxt
            fitted = _fit_split(F, B, t, compute, ceiling)
    if not candidates:  # no FLOPs and no bytes anywhere: time is all fixed cost
        return OpRates(flops_per_s=ceiling.flops_per_s, bytes_per_s=ceiling.bytes_per_s,
                       launch_overhead_s=float(min(np.median(t), 1.0)))
    least = min(obj for obj, _, _ in candidates)
    tied = [c for c in candidates if c[0] <= least * (1 + _TIE) + 1e-12]
    a, cF, b, cB = max(tied, key=lambda c: c[1])[2]
    launch = min(cF, cB)
    flops_per_s = float(np.clip(1.0 / a, 1.01e6, 1e18))
    bytes_per_s = float(np.clip(1.0 / b, 1.01e6, 1e16))
    return OpRates(
        flops_per_s=flops_per_s,
        bytes_per_s=bytes_per_s,
        n_half_flops=float(min((cF - launch) * flops_per_s, 1e15)),
        n_half_bytes=float(min((cB - launch) * bytes_per_s, 1e13)),
        launch_overhead_s=float(min(launch, 1.0)),
    )


def abs_pct_errors(rates: OpRates, measurements: list[Measurement]) -> np.ndarray:
    """|predicted - measured| / measured x 100 for each measurement (one launch each)."""
    if not measurements:
        return np.zeros(0)
    F = np.array([m.flops for m in measurements])
    B = np.array([m.bytes for m in measurements])
    t = np.array([m.median_s for m in measurements])
    return np.abs(rates.time_s(F, B, 1) / t - 1.0) * 100


def _error(ape: np.ndarray) -> FitError:
    return FitError(median_abs_pct=float(np.median(ape)), worst_abs_pct=float(ape.max()), cases=int(ape.size))


def ceiling_rates(device: DeviceInfo) -> OpRates:
    """The device's measured ceilings as rates: large bf16 GEMM FLOP/s and copy bytes/s.

    Raises:
        ValueError: the device has no measured ceilings.
    """
    if device.measured_gemm_flops_per_s is None or device.measured_copy_bytes_per_s is None:
        raise ValueError("the device has no measured ceilings (copy bandwidth and large GEMM rate)")
    return OpRates(flops_per_s=device.measured_gemm_flops_per_s, bytes_per_s=device.measured_copy_bytes_per_s)


def _implementation_order(impl: str) -> tuple[int, str]:
    rank = PREFERRED_IMPLEMENTATIONS.index(impl) if impl in PREFERRED_IMPLEMENTATIONS else len(PREFERRED_IMPLEMENTATIONS)
    return rank, impl


def fit_measurements(measurements: list[Measurement], ceiling: OpRates) -> Fit:
    """Fit every timed (op class, implementation) and assemble the cost model's constants.

    For each op class of :data:`OP_CLASSES` and each implementation timed, the
    rates are fitted (:func:`fit_op_rates`) to the measurements not held out;
    the error (median and worst absolute percentage) is measured on the held-out
    ones. An op class's rates in ``Fit.ops`` come from the first implementation
    of :data:`PREFERRED_IMPLEMENTATIONS` timed; the others go to
    ``Fit.alternatives``. An op class nothing was timed for (``elementwise``
    always) takes ``ceiling``'s rates and the KV store's launch overhead (the
    timed kernel most like it; else the smallest fitted one), as its source says.

    Args:
        measurements: timed cases; ceiling ops (:data:`CEILING_OPS`) and unknown ops are ignored.
        ceiling: the device's measured ceilings (:func:`ceiling_rates`).
    """
    groups: dict[tuple[str, str], list[Measurement]] = {}
    for m in measurements:
        if m.op in OP_CLASSES:
            groups.setdefault((m.op, m.implementation), []).append(m)
    ops: dict[str, OpRates] = {}
    error: dict[str, FitError] = {}
    sources: dict[str, str] = {}
    implementations: dict[str, str] = {}
    alternatives: dict[str, OpRates] = {}
    for op in OP_CLASSES:
        impls = sorted((i for o, i in groups if o == op), key=_implementation_order)
        for impl in impls:
            cases = groups[(op, impl)]
            train = [m for m in cases if not m.held_out]
            test = [m for m in cases if m.held_out]
            if not train:
                continue
            rates = fit_op_rates([m.flops for m in train], [m.bytes for m in train],
                                 [m.median_s for m in train], ceiling)
            key = f"{op}/{impl}"
            if test:
                error[key] = _error(abs_pct_errors(rates, test))
            if op in ops:
                alternatives[key] = rates
                continue
            ops[op], implementations[op] = rates, impl
            if test:
                error[op] = error[key]
            sources[op] = (f"least-squares fit to {len(train)} timings of {impl}; "
                           f"error measured on {len(test)} sizes held out of the fit")
    fitted_launch = [r.launch_overhead_s for r in ops.values()]
    launch = ops["kv_store"].launch_overhead_s if "kv_store" in ops else min(fitted_launch, default=0.0)
    launch_from = "the KV store's fitted" if "kv_store" in ops else "the smallest fitted" if fitted_launch else "no"
    for op in OP_CLASSES:
        if op not in ops:
            ops[op] = ceiling.model_copy(update={"launch_overhead_s": launch})
            sources[op] = (f"not timed: FLOP/s of the measured large GEMM ({ceiling.flops_per_s / 1e12:.3g} TFLOP/s), "
                           f"bytes/s of the measured copy ({ceiling.bytes_per_s / 1e9:.3g} GB/s), "
                           f"{launch_from} launch overhead")
    return Fit(ops=ops, error=error, sources=sources, implementations=implementations, alternatives=alternatives)


def measured_profile(
    *,
    profile_id: str,
    description: str,
    device: DeviceInfo,
    software: dict[str, str],
    measurements: list[Measurement],
    created: str = "",
) -> Profile:
    """A measured profile: the raw measurements and the fit made from them.

    Raises:
        ValueError: the device has no measured ceilings.
        pydantic.ValidationError: an invalid id or field.
    """
    fit = fit_measurements(measurements, ceiling_rates(device))
    return Profile(id=profile_id, provenance="measured", description=description, created=created,
                   device=device, software=software, measurements=measurements, fit=fit)


def predicted_s(profile: Profile, measurement: Measurement) -> float | None:
    """The profile's prediction of one timed case (its implementation's fit), or None if none fits it."""
    rates = profile.rates_for(measurement.op, measurement.implementation)
    if rates is None:
        return None
    return float(rates.time_s(measurement.flops, measurement.bytes, 1))


def gpu_id_for_device_name(name: str) -> str | None:
    """The catalog GPU a driver-reported name denotes (``NVIDIA H100 80GB HBM3`` -> ``h100-sxm``), or None.

    Parts that are not in the catalog (GH200, H100 NVL, L40 without S) map to None.
    """
    tokens = set(re.split(r"[^a-z0-9]+", name.lower()))
    gpu = None
    if "gh200" in tokens:
        gpu = None
    elif "h200" in tokens:
        gpu = "h200"
    elif "h100" in tokens:
        gpu = None if "nvl" in tokens else "h100-pcie" if "pcie" in tokens else "h100-sxm"
    elif "b200" in tokens:
        gpu = "b200"
    elif "a100" in tokens:
        gpu = "a100-40gb" if "40gb" in tokens else "a100-80gb"
    elif "l40s" in tokens:
        gpu = "l40s"
    elif "l4" in tokens:
        gpu = "l4"
    elif "4090" in tokens:
        gpu = "rtx-4090"
    elif "mi300x" in tokens:
        gpu = "mi300x"
    return gpu if gpu in GPUS else None


def profile_notes(profile: Profile, gpu: GPU) -> list[str]:
    """What a lab page says about the profile its numbers come from, and any device mismatch."""
    if profile.provenance == "datasheet":
        notes = [f"Times from profile {profile.id} (datasheet): peaks times efficiency factors measured "
                 "by others; see /api/profiles."]
    else:
        when = f" on {profile.created}" if profile.created else ""
        notes = [f"Times from profile {profile.id} (measured on {profile.device.name}{when}); "
                 "its fit error is on the calibration page."]
    mismatch = profile_mismatch_note(profile, gpu)
    return notes + ([mismatch] if mismatch else [])


def profile_mismatch_note(profile: Profile, gpu: GPU) -> str | None:
    """A warning when the profile describes another device than the selected GPU, else None."""
    if profile.device.kind == "cpu":
        return (f"Profile {profile.id} was measured on a CPU ({profile.device.name}): a smoke test of "
                f"the calibration pipeline, not the {gpu.name}'s speed.")
    if profile.device.gpu_id is not None and profile.device.gpu_id != gpu.id:
        other = GPUS[profile.device.gpu_id].name if profile.device.gpu_id in GPUS else profile.device.gpu_id
        return (f"Profile {profile.id} describes the {other}, not the selected {gpu.name}: "
                "times are that device's, memory capacity and ridge are the selected GPU's.")
    return None


def error_rows(profile: Profile) -> list[dict[str, object]]:
    """The fit's error table: one row per fitted (op class, implementation), the rates in use first.

    Each row: ``op``, ``implementation``, ``in_use`` (its rates are the op
    class's in ``fit.ops``), ``median_abs_pct``, ``worst_abs_pct`` and
    ``cases`` (held-out sizes), or None for the errors when nothing was held out.
    """
    keys = [(f"{op}/{impl}", True) for op, impl in profile.fit.implementations.items()]
    keys += [(key, False) for key in profile.fit.alternatives]
    rows = []
    for key, in_use in keys:
        op, impl = key.split("/", 1)
        err = profile.fit.error.get(key)
        rows.append({
            "op": op, "implementation": impl, "in_use": in_use,
            "median_abs_pct": None if err is None else err.median_abs_pct,
            "worst_abs_pct": None if err is None else err.worst_abs_pct,
            "cases": 0 if err is None else err.cases,
        })
    return rows

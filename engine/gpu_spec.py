"""A GPU from the user's own figures, and a warning when they look like a with-sparsity datasheet.

NVIDIA datasheets print Tensor Core FLOP/s *with 2:4 structured sparsity*:
twice the dense rate a matmul can reach (H100 SXM: 1,979 printed, 989.4
dense; JAX scaling book, roofline.md, Problem 5; science.md H.15). Copying
the printed figure doubles the ridge point and halves every compute-bound
time. Two rules flag it (:func:`sparsity_warnings`); both warn, neither
refuses, because a new part may legitimately have such figures:

1. **Twice a known dense figure.** The BF16 (or FP8) figure is within 2 % of
   twice the dense BF16 (FP8) figure of a catalog GPU: exactly what halving
   was forgotten on. No catalog GPU's own dense figure is within 2 % of twice
   another's, so the rule is silent on every real dense figure we know.
2. **A ridge point far above any known one.** Dense BF16 FLOP/s / memory
   bandwidth above 1.6x the highest ridge in the catalog (L40S, about 419
   FLOP/byte, so above about 670). A custom part has no known generation, so
   the catalog as a whole stands in for it. A sparse figure doubles a ridge;
   the catalog's dense ridges span 153 to 419, and the largest jump between
   generations in it (A100 80GB 153 to H100 SXM 295) is under 2x. The 1.6x
   margin leaves a new part room for a higher ridge than any we list and
   still catches a doubled ridge of the parts with the highest ones (H100
   PCIe sparse: 756; L40S sparse: 848; L4 sparse: 807). The same rule is
   applied to FP8 against the highest catalog FP8 ridge.

A third check: dense FP8 is at most about twice dense BF16 on every part in
the catalog; an FP8 figure above that is likely a sparse FP8 next to a dense
BF16 one.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from engine.calibration import PROFILES, Profile, datasheet_profile
from engine.hardware import GIGA, GPU, GPUS, TERA
from engine.hf_config import ConfigError, decode_json_text, encode_json

CUSTOM_GPU_ID = "custom"
MAX_GPU_SPEC_BYTES = 2048
MAX_GPU_SPEC_CHARS = 4 * -(-MAX_GPU_SPEC_BYTES // 3)
SPARSITY_FACTOR = 2.0
MATCH_TOLERANCE = 0.02
RIDGE_FACTOR = 1.6
# The datasheet GPUs the rules compare with (taken before any --gpu-spec registration).
DATASHEET_GPUS: tuple[GPU, ...] = tuple(GPUS.values())


class GpuFigures(BaseModel):
    """A GPU's figures as a person types them, units in the names (the form and ``--gpu-spec`` file).

    Attributes:
        name: what to call it (letters, digits, spaces and ``._+(),/-``).
        bf16_tflops: dense BF16 Tensor Core peak, TFLOP/s (1e12), NOT the with-sparsity figure.
        fp8_tflops: dense FP8 peak, TFLOP/s, or None where the part has no FP8.
        memory_gb: device memory, GB (1e9 bytes).
        memory_bandwidth_gb_per_s: device memory bandwidth, GB/s.
        interconnect_gb_per_s: GPU-to-GPU link per GPU, one direction, GB/s (used when tp > 1).
        interconnect: the link's name.
        id: catalog id for ``--gpu-spec`` files (lowercase, hyphenated); the page's GPU is ``custom``.

    Raises:
        pydantic.ValidationError: a figure missing, not a number, not positive, or absurd.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)

    name: str = Field("Custom GPU", min_length=1, max_length=80, pattern=r"^[A-Za-z0-9 ._+(),/-]+$")
    bf16_tflops: float = Field(ge=0.1, le=100_000, description="dense BF16 TFLOP/s (half a with-sparsity figure)")
    fp8_tflops: float | None = Field(None, ge=0.1, le=200_000, description="dense FP8 TFLOP/s, or null")
    memory_gb: float = Field(ge=0.1, le=100_000, description="device memory, GB (1e9 bytes)")
    memory_bandwidth_gb_per_s: float = Field(ge=1, le=1_000_000, description="memory bandwidth, GB/s")
    interconnect_gb_per_s: float = Field(ge=0.1, le=100_000, description="GPU-to-GPU link, one direction, GB/s")
    interconnect: str = Field("custom link", min_length=1, max_length=80, pattern=r"^[A-Za-z0-9 ._+()/,-]+$")
    id: str | None = Field(None, pattern=r"^[a-z0-9][a-z0-9.-]{0,47}$")

    def to_gpu(self, gpu_id: str | None = None) -> GPU:
        """The GPU in SI units; its source says the figures are the user's."""
        return GPU(
            id=gpu_id or self.id or CUSTOM_GPU_ID, name=self.name,
            bf16_flops_per_s=self.bf16_tflops * TERA,
            fp8_flops_per_s=None if self.fp8_tflops is None else self.fp8_tflops * TERA,
            memory_bytes=self.memory_gb * GIGA, memory_bandwidth_bytes_per_s=self.memory_bandwidth_gb_per_s * GIGA,
            interconnect=self.interconnect, interconnect_bytes_per_s=self.interconnect_gb_per_s * GIGA,
            source="figures you entered (not checked against a datasheet)",
        )


def _max_ridge(flops_of) -> tuple[float, GPU]:
    return max(((flops_of(g) / g.memory_bandwidth_bytes_per_s, g) for g in DATASHEET_GPUS if flops_of(g)),
               key=lambda pair: pair[0])


def sparsity_warnings(gpu: GPU) -> list[str]:
    """Sentences warning that ``gpu``'s FLOP/s look like with-sparsity figures (empty when they do not).

    The rules and their reasons are in the module docstring. Compared with
    ``DATASHEET_GPUS``; a catalog GPU is never compared with itself.
    """
    warnings: list[str] = []
    others = [g for g in DATASHEET_GPUS if g.id != gpu.id]
    for label, attr in (("BF16", "bf16_flops_per_s"), ("FP8", "fp8_flops_per_s")):
        value = getattr(gpu, attr)
        if value is None:
            continue
        for known in others:
            dense = getattr(known, attr)
            if dense and abs(value / (SPARSITY_FACTOR * dense) - 1) <= MATCH_TOLERANCE:
                warnings.append(
                    f"{label} {value / TERA:,.1f} TFLOP/s is twice the dense {label} figure of the "
                    f"{known.name} ({dense / TERA:,.1f}): datasheets print Tensor Core FLOP/s with 2:4 "
                    f"sparsity, twice what a dense matmul can reach. Enter the dense figure (half) unless "
                    f"you know this one is dense."
                )
                break
        ridge = value / gpu.memory_bandwidth_bytes_per_s
        top, top_gpu = _max_ridge(lambda g, a=attr: getattr(g, a))
        if ridge > RIDGE_FACTOR * top:
            warnings.append(
                f"{label} ridge point {ridge:,.0f} FLOP/byte (FLOP/s / memory bandwidth) is more than "
                f"{RIDGE_FACTOR}x the highest of any GPU we list ({top_gpu.name}, {top:,.0f}): a with-sparsity "
                f"FLOP/s figure doubles the ridge. Check that the {label} figure is dense."
            )
    if gpu.fp8_flops_per_s and gpu.fp8_flops_per_s > SPARSITY_FACTOR * gpu.bf16_flops_per_s * (1 + MATCH_TOLERANCE):
        warnings.append(
            f"FP8 {gpu.fp8_flops_per_s / TERA:,.1f} TFLOP/s is more than twice BF16 "
            f"({gpu.bf16_flops_per_s / TERA:,.1f}); dense FP8 is at most about twice dense BF16 on every GPU "
            f"we list, so the FP8 figure may include sparsity (or the BF16 one may be too low)."
        )
    return warnings


@dataclass(frozen=True)
class ParsedGpu:
    """A user's GPU figures, checked.

    Attributes:
        gpu: the GPU (id ``custom`` unless the figures name one).
        figures: the figures as given.
        warnings: :func:`sparsity_warnings` of the GPU.
        encoded: base64url of the figures' compact JSON (what links carry).
    """

    gpu: GPU
    figures: GpuFigures
    warnings: tuple[str, ...]
    encoded: str


def check_gpu_figures(figures: GpuFigures, gpu_id: str | None = None) -> ParsedGpu:
    """The GPU of validated figures, with its warnings and link encoding."""
    gpu = figures.to_gpu(gpu_id)
    data = figures.model_dump(mode="json", exclude_none=True, exclude_defaults=True)
    return ParsedGpu(gpu=gpu, figures=figures, warnings=tuple(sparsity_warnings(gpu)), encoded=encode_json(data))


def parse_gpu_spec(value: str | bytes, gpu_id: str | None = CUSTOM_GPU_ID) -> ParsedGpu:
    """Read GPU figures given as JSON text or its base64url encoding.

    Raises:
        ConfigError: too large, not JSON, or figures missing, not numbers,
            not positive or absurd; the message names each field and its bounds.
    """
    data = decode_json_text(value, what="GPU figures", limit=MAX_GPU_SPEC_BYTES)
    try:
        figures = GpuFigures.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '(document)'}: {e['msg']}" for e in exc.errors()[:10]
        )
        raise ConfigError(f"GPU figures: {problems}") from None
    return check_gpu_figures(figures, gpu_id)


@lru_cache(maxsize=256)
def parse_custom_gpu(value: str) -> ParsedGpu:
    """:func:`parse_gpu_spec` with id ``custom``, cached (every slider move re-sends the same figures)."""
    return parse_gpu_spec(value)


@lru_cache(maxsize=256)
def custom_datasheet_profile(gpu: GPU) -> Profile:
    """The datasheet profile of a GPU outside the catalog (its figures x the usual efficiency factors)."""
    return datasheet_profile(gpu)


def load_gpu_spec(path: str | Path) -> ParsedGpu:
    """Read a GPU figures file for ``pdlab serve --gpu-spec``; its id is the file's ``id`` or its name.

    Raises:
        ConfigError: unreadable, or see :func:`parse_gpu_spec`.
    """
    path = Path(path)
    try:
        with path.open("rb") as f:
            text = f.read(2 * MAX_GPU_SPEC_BYTES)
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from None
    parsed = parse_gpu_spec(text, gpu_id=None)
    if parsed.figures.id is None:
        slug = "".join(c if c.isalnum() else "-" for c in parsed.figures.name.lower()).strip("-")[:48] or "gpu"
        parsed = check_gpu_figures(parsed.figures, slug)
    return parsed


def register_gpu(gpu: GPU) -> None:
    """Add a GPU, and its datasheet profile, to the catalogs (``serve --gpu-spec``).

    Raises:
        ValueError: the id is already taken (a catalog entry is never replaced).
    """
    if gpu.id in GPUS or gpu.id == CUSTOM_GPU_ID:
        raise ValueError(f"gpu id {gpu.id!r} is taken; taken ids: {CUSTOM_GPU_ID}, {', '.join(GPUS)}")
    GPUS[gpu.id] = gpu
    PROFILES[f"{gpu.id}-datasheet"] = datasheet_profile(gpu)

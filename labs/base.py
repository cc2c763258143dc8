"""What every lab is made of: validated params, a run, figures and page text.

A lab module defines ``LAB = Lab(...)``; ``labs.LABS`` finds it. A lab's
``Params`` subclasses :class:`LabParams`, declaring each control with
:func:`param` so the page and ``GET /api/labs`` can build the control from
the schema: type, default, bounds, step, unit, label and help.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from engine.calibration import PROFILES, Profile, resolve_profile
from engine.hardware import GPU, GPUS, get_gpu
from engine.models import MODELS, ModelConfig, get_model


def param(
    default: Any,
    *,
    label: str,
    help: str,
    unit: str = "",
    ge: float | None = None,
    le: float | None = None,
    step: float | None = None,
    scale: Literal["linear", "log"] = "linear",
    essential: bool = False,
) -> Any:
    """A lab control: a pydantic Field carrying what the page needs to draw it.

    Args:
        default: starting value.
        label: short name shown beside the control.
        help: one sentence on what it changes.
        unit: unit shown after the value ("tokens", "sequences", ...).
        ge, le: inclusive bounds (422 outside them).
        step: slider step.
        scale: ``log`` draws a slider in log space (value = 10^position).
        essential: kept in presentation mode, where other controls hide.
    """
    extra = {"label": label, "help": help, "unit": unit, "scale": scale, "essential": essential}
    if step is not None:
        extra["step"] = step
    return Field(default, ge=ge, le=le, description=help, json_schema_extra=extra)


class LabParams(BaseModel):
    """Params every lab takes: the GPU, the model, tensor parallelism and the profile.

    Unknown fields are refused (422), as are unknown catalog ids; the error
    lists the valid ids.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    gpu: str = param("h100-sxm", label="GPU", help="Which accelerator's figures to use.", essential=True)
    model: str = param("llama-3.1-8b", label="Model", help="Which model's config.json to use.", essential=True)
    tp: Literal[1, 2, 4, 8] = param(
        1, label="Tensor parallel", unit="GPUs", help="GPUs that split every layer's weights and KV heads."
    )
    profile: str = param(
        "datasheet", label="Profile",
        help="Where the attainable rates come from: the GPU's datasheet profile or a measured one.",
    )

    @field_validator("gpu")
    @classmethod
    def _known_gpu(cls, v: str) -> str:
        if v not in GPUS:
            raise ValueError(f"unknown gpu {v!r}; valid: {', '.join(GPUS)}")
        return v

    @field_validator("model")
    @classmethod
    def _known_model(cls, v: str) -> str:
        if v not in MODELS:
            raise ValueError(f"unknown model {v!r}; valid: {', '.join(MODELS)}")
        return v

    @field_validator("profile")
    @classmethod
    def _known_profile(cls, v: str) -> str:
        if v != "datasheet" and v not in PROFILES:
            raise ValueError(f"unknown profile {v!r}; valid: datasheet, {', '.join(PROFILES)}")
        return v

    @property
    def gpu_spec(self) -> GPU:
        """The catalog GPU."""
        return get_gpu(self.gpu)

    @property
    def model_spec(self) -> ModelConfig:
        """The catalog model."""
        return get_model(self.model)

    @property
    def profile_spec(self) -> Profile:
        """The calibration profile in force (``datasheet`` = the GPU's own)."""
        return resolve_profile(self.profile, self.gpu_spec)


def choices(name: str) -> list[dict[str, str]] | None:
    """The allowed values of a catalog param, for the page's select boxes."""
    if name == "gpu":
        return [{"value": g.id, "label": g.name} for g in GPUS.values()]
    if name == "model":
        return [{"value": m.id, "label": m.name} for m in MODELS.values()]
    if name == "profile":
        return [{"value": "datasheet", "label": "Datasheet (the GPU's own)"}] + [
            {"value": p.id, "label": f"{p.id} ({p.provenance})"} for p in PROFILES.values()
        ]
    return None


def params_schema(params_cls: type[LabParams]) -> list[dict[str, Any]]:
    """One dict per param: name, type, default, min, max, step, unit, label, help, scale, choices."""
    schema = params_cls.model_json_schema()
    out = []
    for name, prop in schema["properties"].items():
        options = choices(name)
        if options is None and "enum" in prop:
            options = [{"value": v, "label": str(v)} for v in prop["enum"]]
        out.append({
            "name": name,
            "type": prop.get("type", "string"),
            "default": prop.get("default"),
            "min": prop.get("minimum"),
            "max": prop.get("maximum"),
            "step": prop.get("step"),
            "unit": prop.get("unit", ""),
            "label": prop.get("label", name),
            "help": prop.get("help", ""),
            "scale": prop.get("scale", "linear"),
            "essential": prop.get("essential", False),
            "choices": options,
        })
    return out


@dataclass(frozen=True)
class TryStep:
    """One "Try this" step: a title, what to look for, and the params it sets."""

    title: str
    look_for: str
    params: dict[str, Any]


@dataclass(frozen=True)
class LabResult:
    """What a run returns: metrics (units in the names), figures (Plotly JSON dicts), notes."""

    metrics: dict[str, Any]
    figures: dict[str, dict[str, Any]]
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Lab:
    """A lab: its slug, title, params model, run function and page text."""

    slug: str
    title: str
    order: int
    summary: str
    params: type[LabParams]
    run: Callable[[Any], LabResult]
    what_you_see: tuple[str, ...]
    try_this: tuple[TryStep, ...]
    misconceptions: tuple[tuple[str, str], ...] = ()

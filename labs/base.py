"""What every lab is made of: validated params, a run, figures and page text.

A lab module defines ``LAB = Lab(...)``; ``labs.LABS`` finds it. A lab's
``Params`` subclasses :class:`LabParams`, declaring each control with
:func:`param` so the page and ``GET /api/labs`` can build the control from
the schema: type, default, bounds, step, unit, label and help.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from engine.calibration import PROFILES, Profile, profile_mismatch_note, resolve_profile
from engine.gpu_spec import CUSTOM_GPU_ID, MAX_GPU_SPEC_CHARS, custom_datasheet_profile, parse_custom_gpu
from engine.hardware import GPU, GPUS, get_gpu
from engine.hf_config import CUSTOM_MODEL_ID, MAX_ENCODED_CHARS, ConfigError, parse_custom_model
from engine.models import MODELS, ModelConfig, get_model

UPLOADED_PROFILE = "uploaded"
_NEEDS_CUSTOM_MODEL = "model 'custom' needs custom_model: your config.json (see POST /api/models/parse)"
_NEEDS_CUSTOM_GPU = "gpu 'custom' needs custom_gpu: your GPU's figures (see POST /api/gpus/parse)"
_uploaded_profile: ContextVar[Profile | None] = ContextVar("uploaded_profile", default=None)


@contextmanager
def uploaded_profile(profile: Profile) -> Iterator[None]:
    """Within the block, ``profile="uploaded"`` in any lab's params means ``profile``.

    The profile of one request, sent by the browser that uploaded it; it is
    never stored (``POST /api/labs/{slug}/with-profile``). A context variable
    keeps concurrent requests apart.
    """
    token = _uploaded_profile.set(profile)
    try:
        yield
    finally:
        _uploaded_profile.reset(token)


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
    choice_labels: dict[str, str] | None = None,
    only: tuple[str, ...] | None = None,
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
        choice_labels: for a Literal param, what to show for each value (default: the value).
        only: for a catalog param (gpu, model), the ids this lab offers in its select box.
    """
    extra = {"label": label, "help": help, "unit": unit, "scale": scale, "essential": essential}
    if choice_labels is not None:
        extra["choice_labels"] = choice_labels
    if only is not None:
        extra["only"] = list(only)
    if step is not None:
        extra["step"] = step
    return Field(default, ge=ge, le=le, description=help, json_schema_extra=extra)


class LabParams(BaseModel):
    """Params every lab takes: the GPU, the model, tensor parallelism and the profile.

    Unknown fields are refused (422), as are unknown catalog ids; the error
    lists the valid ids. ``model="custom"`` with ``custom_model`` (a config.json)
    and ``gpu="custom"`` with ``custom_gpu`` (the GPU's figures) run any lab on
    the user's own model and GPU; both are checked and size-limited here.
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
    # model=custom / gpu=custom: the user's config.json and GPU figures travel in the params (and the
    # page's link), never stored on the server. "hidden": the page keeps them out of the visible controls.
    custom_model: str | None = Field(
        None, max_length=MAX_ENCODED_CHARS,
        description="With model=custom: a Hugging Face config.json, as JSON text or base64url-encoded JSON.",
        json_schema_extra={"label": "Custom model", "help": "Your config.json (used when model is custom).",
                           "unit": "", "scale": "linear", "essential": False, "hidden": True},
    )
    custom_gpu: str | None = Field(
        None, max_length=MAX_GPU_SPEC_CHARS,
        description="With gpu=custom: JSON (or base64url JSON) of bf16_tflops, fp8_tflops, memory_gb, "
        "memory_bandwidth_gb_per_s, interconnect_gb_per_s and name (POST /api/gpus/parse checks it).",
        json_schema_extra={"label": "Custom GPU", "help": "Your GPU's figures (used when gpu is custom).",
                           "unit": "", "scale": "linear", "essential": False, "hidden": True},
    )

    @field_validator("gpu")
    @classmethod
    def _known_gpu(cls, v: str) -> str:
        if v != CUSTOM_GPU_ID and v not in GPUS:
            raise ValueError(f"unknown gpu {v!r}; valid: {', '.join(GPUS)}, or custom with custom_gpu")
        return v

    @field_validator("model")
    @classmethod
    def _known_model(cls, v: str) -> str:
        if v != CUSTOM_MODEL_ID and v not in MODELS:
            raise ValueError(f"unknown model {v!r}; valid: {', '.join(MODELS)}, or custom with custom_model")
        return v

    @field_validator("custom_model")
    @classmethod
    def _readable_model(cls, v: str | None) -> str | None:
        if v is not None:
            try:
                parse_custom_model(v)
            except ConfigError as exc:
                raise ValueError(str(exc)) from None
        return v

    @field_validator("custom_gpu")
    @classmethod
    def _readable_gpu(cls, v: str | None) -> str | None:
        if v is not None:
            try:
                parse_custom_gpu(v)
            except ConfigError as exc:
                raise ValueError(str(exc)) from None
        return v

    @model_validator(mode="after")
    def _custom_inputs_given(self) -> LabParams:
        if self.model == CUSTOM_MODEL_ID and self.custom_model is None:
            raise ValueError(_NEEDS_CUSTOM_MODEL)
        if self.gpu == CUSTOM_GPU_ID and self.custom_gpu is None:
            raise ValueError(_NEEDS_CUSTOM_GPU)
        return self

    @model_validator(mode="after")
    def _tp_divides_heads(self) -> LabParams:
        # engine.cost splits the query heads over the tp GPUs and raises (a 500) when they do not divide.
        heads = self.model_spec.num_heads
        if heads % self.tp:
            raise ValueError(f"tp={self.tp} must divide the {heads} query heads of {self.model}")
        return self

    @field_validator("profile")
    @classmethod
    def _known_profile(cls, v: str) -> str:
        if v == UPLOADED_PROFILE and _uploaded_profile.get() is not None:
            return v
        if v != "datasheet" and v not in PROFILES:
            raise ValueError(f"unknown profile {v!r}; valid: datasheet, {', '.join(PROFILES)}")
        return v

    @property
    def gpu_spec(self) -> GPU:
        """The catalog GPU, or the user's (``gpu=custom``).

        Raises:
            ValueError: gpu is custom but custom_gpu is missing (a 422 inside validation).
        """
        if self.gpu == CUSTOM_GPU_ID:
            if self.custom_gpu is None:
                raise ValueError(_NEEDS_CUSTOM_GPU)
            return parse_custom_gpu(self.custom_gpu).gpu
        return get_gpu(self.gpu)

    @property
    def model_spec(self) -> ModelConfig:
        """The catalog model, or the user's config.json (``model=custom``).

        Raises:
            ValueError: model is custom but custom_model is missing (a 422 inside validation).
        """
        if self.model == CUSTOM_MODEL_ID:
            if self.custom_model is None:
                raise ValueError(_NEEDS_CUSTOM_MODEL)
            return parse_custom_model(self.custom_model).model
        return get_model(self.model)

    def source_notes(self) -> list[str]:
        """Where an answer's numbers come from: the profile in force (and a warning when it
        describes another device than the selected GPU), the GPU's and the model's figures."""
        profile, gpu, model = self.profile_spec, self.gpu_spec, self.model_spec
        notes = [
            f"Times from profile {profile.id} ({profile.provenance}). "
            + ("Peaks are datasheet figures times efficiency factors measured by others; see /api/profiles."
               if profile.provenance == "datasheet" else "Rates were measured on the device it names.")
        ]
        if mismatch := profile_mismatch_note(profile, gpu):
            notes.append(mismatch)
        return [*notes, f"{gpu.name}: {gpu.source}.", f"{model.name}: {model.source}."]

    def custom_notes(self) -> tuple[list[str], list[str]]:
        """Notes on the user's own model and GPU: (warnings to show first, facts to show last)."""
        warnings: list[str] = []
        facts: list[str] = []
        if self.gpu == CUSTOM_GPU_ID and self.custom_gpu is not None:
            gpu = parse_custom_gpu(self.custom_gpu)
            warnings += [f"Your GPU ({gpu.gpu.name}): {w}" for w in gpu.warnings]
        if self.model == CUSTOM_MODEL_ID and self.custom_model is not None:
            parsed = parse_custom_model(self.custom_model)
            facts.append(f"Your model ({parsed.model.name}) was read from its config.json"
                         + (f"; note: {'; '.join(parsed.notes)}." if parsed.notes else "."))
        return warnings, facts

    @property
    def profile_spec(self) -> Profile:
        """The calibration profile in force (``datasheet`` = the GPU's own).

        Raises:
            KeyError: ``uploaded`` outside :func:`uploaded_profile`.
        """
        if self.profile == UPLOADED_PROFILE:
            uploaded = _uploaded_profile.get()
            if uploaded is None:
                raise KeyError("profile 'uploaded' is only valid while a request carries one")
            return uploaded
        if self.profile == "datasheet" and self.gpu == CUSTOM_GPU_ID:
            return custom_datasheet_profile(self.gpu_spec)
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
    """One dict per param: name, type, default, min, max, step, unit, label, help, scale, choices.

    ``nullable``: the param may be null (sent as JSON null; the page shows an empty box), e.g. an
    override whose absence means "computed"; its type and bounds are those of the non-null value.
    """
    schema = params_cls.model_json_schema()
    out = []
    for name, prop in schema["properties"].items():
        nullable = False
        if "anyOf" in prop:  # an optional param (X | None): describe X, and say that empty (null) is allowed
            branches = [b for b in prop["anyOf"] if b.get("type") != "null"]
            nullable = len(branches) < len(prop["anyOf"])
            if len(branches) == 1:
                prop = {**branches[0], **{k: v for k, v in prop.items() if k != "anyOf"}}
        options = choices(name)
        if options is not None and "only" in prop:
            options = [o for o in options if o["value"] in prop["only"]]
        if options is None and "enum" in prop:
            labels = prop.get("choice_labels", {})
            options = [{"value": v, "label": labels.get(str(v), str(v))} for v in prop["enum"]]
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
            "hidden": prop.get("hidden", False),
            "nullable": nullable,
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

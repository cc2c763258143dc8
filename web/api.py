"""The JSON API (DESIGN.md, "HTTP API"): labs, catalogs and profiles.

One ``POST /api/labs/{slug}`` route is generated per lab, with that lab's
params model as the body, so OpenAPI documents every lab's bounds and
FastAPI answers bad input with a 422 naming the field.

The user's own model and GPU: ``POST /api/models/parse`` checks a config.json
and ``POST /api/gpus/parse`` a GPU's figures; each answers the encoding a lab
takes as ``model=custom&custom_model=...`` / ``gpu=custom&custom_gpu=...``.
``GET /api/models/{id}/breakdown`` is a catalog model's sizes with formulas.
"""


import json
from typing import Annotated, Any

from fastapi import APIRouter, Body, HTTPException, Query
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field, field_validator

from engine.breakdown import breakdown_json
from engine.calibration import PROFILES
from engine.gpu_spec import CUSTOM_GPU_ID, GpuFigures, check_gpu_figures
from engine.hardware import GPUS
from engine.hf_config import MAX_ENCODED_CHARS, ConfigError, parse_custom_model
from engine.models import MODELS
from labs import LABS
from labs.base import Lab, LabParams, params_schema
from web.cache import RESULTS

router = APIRouter(prefix="/api", tags=["api"])


class StrictJSONResponse(JSONResponse):
    """JSON that refuses NaN and infinity instead of sending them to a browser.

    A JSONResponse subclass, so OpenAPI documents the routes' JSON answers by their models.
    """

    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return json.dumps(content, allow_nan=False, separators=(",", ":")).encode()


class PlotlyFigure(BaseModel):
    """A plain Plotly figure dict."""

    data: list[dict[str, Any]]
    layout: dict[str, Any]


class LabAnswer(BaseModel):
    """The answer of a lab run (documents the 200 response in OpenAPI)."""

    params: dict[str, Any]
    metrics: dict[str, Any]
    figures: dict[str, PlotlyFigure]
    notes: list[str]


def render_lab(lab: Lab, params: LabParams) -> bytes:
    """Run ``lab`` on validated ``params``; the answer as JSON bytes.

    Raises:
        ValueError: the answer holds NaN or infinity (a bug in the lab; never sent).
    """
    result = lab.run(params)
    warnings, facts = params.custom_notes()  # the user's own GPU and model, if any
    return StrictJSONResponse({
        "params": params.model_dump(mode="json"),
        "metrics": result.metrics,
        "figures": result.figures,
        "notes": [*warnings, *result.notes, *facts],
    }).body


def warm_up() -> None:
    """Answer every lab once at its defaults, into this worker's result cache.

    Run at start-up, so the room opening a link at the start of a lecture is
    answered from the cache rather than by a cold worker.
    """
    for lab in LABS.values():
        params = lab.params()
        RESULTS.get(lab.slug, params, lambda: render_lab(lab, params))  # noqa: B023 (called at once)


@router.get("/labs")
def list_labs() -> list[dict[str, Any]]:
    """Every lab: slug, title, summary and its params schema."""
    return [
        {"slug": lab.slug, "title": lab.title, "summary": lab.summary, "params": params_schema(lab.params)}
        for lab in LABS.values()
    ]


def _add_lab_route(lab: Lab) -> None:
    Params = lab.params

    def run(params: Annotated[Params | None, Body()] = None) -> Response:
        params = params or Params()
        body = RESULTS.get(lab.slug, params, lambda: render_lab(lab, params))
        return Response(body, media_type="application/json")

    run.__doc__ = f"Run the {lab.title} lab. Missing params take their defaults; unknown ones are a 422."
    router.add_api_route(
        f"/labs/{lab.slug}", run, methods=["POST"], name=f"run_{lab.slug.replace('-', '_')}",
        response_class=StrictJSONResponse, responses={200: {"model": LabAnswer}},
    )


for _lab in LABS.values():
    _add_lab_route(_lab)


@router.get("/gpus")
def list_gpus() -> list[dict[str, Any]]:
    """The GPU catalog: dense datasheet figures with their source."""
    return [
        {
            "id": g.id, "name": g.name,
            "bf16_tflops": g.bf16_flops_per_s / 1e12,
            "fp8_tflops": None if g.fp8_flops_per_s is None else g.fp8_flops_per_s / 1e12,
            "memory_gb": g.memory_bytes / 1e9,
            "memory_bandwidth_gb_per_s": g.memory_bandwidth_bytes_per_s / 1e9,
            "ridge_flop_per_byte": g.ridge_flop_per_byte,
            "interconnect": g.interconnect,
            "interconnect_gb_per_s": g.interconnect_bytes_per_s / 1e9,
            "source": g.source,
        }
        for g in GPUS.values()
    ]


@router.get("/models")
def list_models() -> list[dict[str, Any]]:
    """The model catalog: config.json figures, derived sizes and their source."""
    return [
        {
            **m.model_dump(exclude={"source", "published_params", "published_active_params"}),
            "params": m.param_count,
            "active_params": m.active_param_count,
            "published_params": m.published_params,
            "weights_gb": m.weight_bytes() / 1e9,
            "kv_bytes_per_token": m.kv_bytes_per_token(),
            "source": m.source,
        }
        for m in MODELS.values()
    ]


@router.get("/profiles")
def list_profiles() -> list[dict[str, Any]]:
    """Every selectable calibration profile (raw measurements left out; see the calibration page)."""
    return [p.model_dump(mode="json", exclude={"measurements"}) for p in PROFILES.values()]


# ---- the user's own model and GPU (model=custom, gpu=custom) ---------------------------------------

class ModelParseRequest(BaseModel):
    """A config.json to check, and the context and batch its breakdown is worked at."""

    model_config = ConfigDict(extra="forbid")

    config: str = Field(max_length=MAX_ENCODED_CHARS,
                        description="the Hugging Face config.json: JSON text, or base64url-encoded JSON")
    context_tokens: int = Field(8192, ge=0, le=10_000_000, description="tokens already cached")
    batch: int = Field(1, ge=1, le=65_536, description="sequences decoding together (MoE expert reads)")

    @field_validator("config")
    @classmethod
    def _readable(cls, v: str) -> str:
        try:
            parse_custom_model(v)
        except ConfigError as exc:
            raise ValueError(str(exc)) from None
        return v


@router.post("/models/parse")
def parse_model(request: ModelParseRequest) -> dict[str, Any]:
    """Check a config.json; answer its breakdown, ``config_notes`` (values it does not state, parts not
    counted) and ``custom_model``, the encoding for ``model=custom&custom_model=...`` in links and lab
    requests. Nothing is stored. A config that cannot be read is a 422 naming every missing or bad field."""
    parsed = parse_custom_model(request.config)
    body = breakdown_json(parsed.model, request.context_tokens, request.batch)
    return {**body, "name": parsed.model.name, "custom_model": parsed.encoded, "config_notes": list(parsed.notes)}


@router.get("/models/{model_id}/breakdown", responses={404: {"description": "Not a catalog model id."}})
def model_breakdown(
    model_id: str,
    context_tokens: Annotated[int, Query(ge=0, le=10_000_000, description="tokens already cached")] = 8192,
    batch: Annotated[int, Query(ge=1, le=65_536, description="sequences decoding together")] = 1,
) -> dict[str, Any]:
    """A catalog model's parameters, bytes, KV cache and FLOPs per token, each with its formula."""
    model = MODELS.get(model_id)
    if model is None:
        raise HTTPException(404, f"unknown model {model_id[:64]!r}; valid: {', '.join(MODELS)} "
                                 "(a custom model: POST /api/models/parse)")
    return breakdown_json(model, context_tokens, batch)


@router.post("/gpus/parse")
def parse_gpu(figures: GpuFigures) -> dict[str, Any]:
    """Check a GPU's figures; answer the GPU, its ridge point, any with-sparsity warnings, and the
    encoding for ``gpu=custom&custom_gpu=...``. Nothing is stored."""
    parsed = check_gpu_figures(figures, CUSTOM_GPU_ID)
    g = parsed.gpu
    return {
        "id": g.id, "name": g.name, "custom_gpu": parsed.encoded, "warnings": list(parsed.warnings),
        "bf16_tflops": g.bf16_flops_per_s / 1e12,
        "fp8_tflops": None if g.fp8_flops_per_s is None else g.fp8_flops_per_s / 1e12,
        "memory_gb": g.memory_bytes / 1e9, "memory_bandwidth_gb_per_s": g.memory_bandwidth_bytes_per_s / 1e9,
        "ridge_flop_per_byte": g.ridge_flop_per_byte, "interconnect": g.interconnect,
        "interconnect_gb_per_s": g.interconnect_bytes_per_s / 1e9, "source": g.source,
    }

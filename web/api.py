"""The JSON API (DESIGN.md, "HTTP API"): labs, catalogs and profiles.

One ``POST /api/labs/{slug}`` route is generated per lab, with that lab's
params model as the body, so OpenAPI documents every lab's bounds and
FastAPI answers bad input with a 422 naming the field.
"""


import json
from typing import Annotated, Any

from fastapi import APIRouter, Body
from fastapi.responses import Response

from engine.calibration import PROFILES
from engine.hardware import GPUS
from engine.models import MODELS
from labs import LABS
from labs.base import Lab, params_schema

router = APIRouter(prefix="/api", tags=["api"])


class StrictJSONResponse(Response):
    """JSON that refuses NaN and infinity instead of sending them to a browser."""

    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return json.dumps(content, allow_nan=False, separators=(",", ":")).encode()


@router.get("/labs")
def list_labs() -> list[dict[str, Any]]:
    """Every lab: slug, title, summary and its params schema."""
    return [
        {"slug": lab.slug, "title": lab.title, "summary": lab.summary, "params": params_schema(lab.params)}
        for lab in LABS.values()
    ]


def _add_lab_route(lab: Lab) -> None:
    Params = lab.params

    def run(params: Annotated[Params | None, Body()] = None) -> StrictJSONResponse:
        params = params or Params()
        result = lab.run(params)
        return StrictJSONResponse({
            "params": params.model_dump(mode="json"),
            "metrics": result.metrics,
            "figures": result.figures,
            "notes": result.notes,
        })

    run.__doc__ = f"Run the {lab.title} lab. Missing params take their defaults; unknown ones are a 422."
    router.add_api_route(
        f"/labs/{lab.slug}", run, methods=["POST"], name=f"run_{lab.slug.replace('-', '_')}",
        response_class=StrictJSONResponse,
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

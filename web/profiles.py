"""Profiles from users: validated, used for one request, never stored.

A researcher's browser uploads a calibration profile once to
``POST /api/profiles/validate``, keeps the normalised profile it gets back
(localStorage), and sends it with every request of a lab that should use it:
``POST /api/labs/{slug}/with-profile`` with ``{"params": {...}, "profile":
{...}}``. The server holds nothing between requests, so any worker can answer
any request, and a profile exists on the server only while the request that
carries it is served. The document is parsed as JSON (web/guard.py refuses
oversized, malformed, deeply nested or non-finite bodies first) and validated
by pydantic; nothing in it is ever evaluated or written to disk.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from engine.calibration import Profile
from labs import LABS
from labs.base import UPLOADED_PROFILE, Lab, uploaded_profile
from web.api import LabAnswer, StrictJSONResponse, render_lab

router = APIRouter(prefix="/api", tags=["profiles"])


class ProfileCheck(BaseModel):
    """The answer of ``POST /api/profiles/validate``."""

    profile: dict[str, Any] = Field(description="the profile, normalised: keep it and send it with lab requests")
    summary: str = Field(description="one line for the page: id, provenance, device, measurements")


class ProfiledRun(BaseModel):
    """The body of ``POST /api/labs/{slug}/with-profile``."""

    model_config = ConfigDict(extra="forbid")

    params: dict[str, Any] = Field(
        default_factory=dict,
        description="the lab's params, as for POST /api/labs/{slug}; `profile` must be 'uploaded' or left out",
    )
    profile: Profile


def _refuse(loc: tuple[str | int, ...], msg: str, value: Any = None) -> RequestValidationError:
    return RequestValidationError([{"type": "value_error", "loc": loc, "msg": msg, "input": value}])


@router.post("/profiles/validate")
def validate_profile(profile: Profile) -> ProfileCheck:
    """Check an uploaded calibration profile; answer it normalised, or 422 naming what is wrong.

    Nothing is stored: the browser keeps the profile and sends it with each
    ``POST /api/labs/{slug}/with-profile``.
    """
    return ProfileCheck(
        profile=profile.model_dump(mode="json"),
        summary=(f"{profile.id}: {profile.provenance} profile of {profile.device.name} "
                 f"({profile.device.kind}), {len(profile.measurements)} measurements"),
    )


def _add_profiled_route(lab: Lab) -> None:
    def run(body: ProfiledRun) -> Response:
        params = dict(body.params)
        if params.setdefault("profile", UPLOADED_PROFILE) != UPLOADED_PROFILE:
            raise _refuse(("body", "params", "profile"),
                          f"with an uploaded profile, profile must be {UPLOADED_PROFILE!r} or left out",
                          params["profile"])
        with uploaded_profile(body.profile):
            try:
                validated = lab.params.model_validate(params)
            except ValidationError as exc:
                raise RequestValidationError([
                    {**e, "loc": ("body", "params", *e["loc"])} for e in exc.errors(include_url=False)
                ]) from None
            return Response(render_lab(lab, validated), media_type="application/json")

    run.__doc__ = (f"Run the {lab.title} lab under an uploaded profile (sent with the request, never stored). "
                   "Answers as POST /api/labs/{slug}.")
    router.add_api_route(
        f"/labs/{lab.slug}/with-profile", run, methods=["POST"],
        name=f"run_{lab.slug.replace('-', '_')}_with_profile",
        response_class=StrictJSONResponse, responses={200: {"model": LabAnswer}},
    )


for _lab in LABS.values():
    _add_profiled_route(_lab)


def upload_paths() -> list[str]:
    """The routes whose bodies carry a whole profile (they get the upload size limit)."""
    return ["/api/profiles/validate", *(f"/api/labs/{slug}/with-profile" for slug in LABS)]

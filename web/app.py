"""The FastAPI application factory.

``create_app()`` wires the routers, static files and plotly.js (served from
the installed plotly package, never a CDN, so the labs work offline).
"""

from __future__ import annotations

import os
from pathlib import Path

import plotly
from fastapi import FastAPI
from fastapi.middleware.gzip import GZipMiddleware
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles

from engine.calibration import load_profile, register_profile
from web import api, pages
from web.paths import STATIC_DIR

PLOTLY_JS = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"


def create_app(profile_paths: list[str] | None = None) -> FastAPI:
    """Build the app: pages, the JSON API, /healthz and static assets.

    Args:
        profile_paths: calibration profiles to register; by default those named
            in $PDLAB_PROFILES (set by ``pdlab serve --profile``, so that every
            worker process loads them).

    Raises:
        engine.calibration.ProfileError: a profile file is unreadable or invalid.
    """
    if profile_paths is None:
        profile_paths = [p for p in os.environ.get("PDLAB_PROFILES", "").split(os.pathsep) if p]
    for path in profile_paths:
        register_profile(load_profile(path))
    app = FastAPI(
        title="Prefill & Decode Lab",
        summary="Browser labs on how LLM inference servers spend their time.",
        version="0.1.0",
        docs_url=None,  # the default docs pull Swagger UI from a CDN; the labs must work offline
        redoc_url=None,
    )
    app.add_middleware(GZipMiddleware, minimum_size=1000)
    app.include_router(api.router)
    app.include_router(pages.router)
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")

    @app.get("/vendor/plotly.min.js", include_in_schema=False)
    def plotly_js() -> FileResponse:
        return FileResponse(PLOTLY_JS, media_type="text/javascript", headers={"Cache-Control": "max-age=86400"})

    @app.get("/healthz", tags=["meta"])
    def healthz() -> dict[str, str]:
        """Liveness: the app is up and its labs are loaded."""
        return {"status": "ok"}

    return app

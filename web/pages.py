"""HTML pages: the index and one page per lab, from Jinja2 templates."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import HTMLResponse
from fastapi.templating import Jinja2Templates

from labs import LABS
from labs.base import params_schema
from web.paths import TEMPLATES_DIR

router = APIRouter(include_in_schema=False)
templates = Jinja2Templates(directory=TEMPLATES_DIR)


@router.get("/", response_class=HTMLResponse)
def index(request: Request) -> HTMLResponse:
    """The four labs and the path of one request through a server."""
    return templates.TemplateResponse(request, "index.html", {"labs": list(LABS.values())})


@router.get("/labs/{slug}", response_class=HTMLResponse)
def lab_page(request: Request, slug: str) -> HTMLResponse:
    """One lab's page; its controls are built from the lab's params schema."""
    lab = LABS.get(slug)
    if lab is None:
        raise HTTPException(404, f"no lab {slug!r}; labs: {', '.join(LABS)}")
    return templates.TemplateResponse(
        request, "lab.html",
        {"lab": lab, "labs": list(LABS.values()), "schema": params_schema(lab.params)},
    )

"""The labs: each module here that defines ``LAB`` is served, in ``LAB.order``.

``run_lab(slug, body)`` validates a request body against the lab's params
and runs it; it is the one entry point the web layer uses.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

from labs.base import Lab, LabResult


def _discover() -> dict[str, Lab]:
    found = []
    for info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{info.name}")
        if isinstance(getattr(module, "LAB", None), Lab):
            found.append(module.LAB)
    return {lab.slug: lab for lab in sorted(found, key=lambda lab: lab.order)}


LABS: dict[str, Lab] = _discover()


def run_lab(slug: str, body: dict[str, Any]) -> tuple[Any, LabResult]:
    """Validate ``body`` against the lab's params (missing ones take defaults) and run it.

    Raises:
        KeyError: unknown slug.
        pydantic.ValidationError: bad params (the web layer answers 422).
    """
    lab = LABS[slug]
    params = lab.params.model_validate(body)
    return params, lab.run(params)

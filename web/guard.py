"""Request guard: bodies are bounded in size and, when JSON, well formed and finite.

Runs before any route. Two kinds of request are refused here, with a message
a person can act on, instead of reaching FastAPI's parser:

* a body larger than its route's limit: 413 (checked on Content-Length, and
  again while reading, for chunked bodies);
* a JSON body that is malformed, nested too deeply, has a number too large
  for a float (``1e999``, which Python reads as infinity), an integer with
  more than ``MAX_INT_DIGITS`` digits, or the non-standard constants
  ``NaN``/``Infinity`` that Python's json accepts: 422 in FastAPI's
  validation-error shape, so no NaN or infinity can ever reach a lab.
"""

from __future__ import annotations

import json
import math

from pydantic import BaseModel
from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

MAX_BODY_BYTES = 64 * 1024
MAX_UPLOAD_BYTES = 1024 * 1024  # a whole profile with its measurement rows (web/profiles.py routes)
MAX_INT_DIGITS = 30  # no param or profile field allows an integer anywhere near 10^30


class TooLarge(BaseModel):
    """The answer to a body over its route's limit."""

    detail: str


# For include_router(responses=...): documents the 413 every route may answer.
TOO_LARGE_RESPONSE = {413: {"model": TooLarge, "description": "The request body is over the route's size limit."}}


class BadJSON(ValueError):
    """A JSON body the guard refuses; the message says why."""


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise BadJSON(f"number {text[:40]} is too large for a 64-bit float")
    return value


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise BadJSON(f"integer {text[:20]}... has {len(text.lstrip('-'))} digits; at most {MAX_INT_DIGITS}")
    return int(text)


def _no_constants(name: str) -> float:
    raise BadJSON(f"{name} is not a JSON number")


def check_json(body: bytes) -> None:
    """Parse ``body`` as standard, finite JSON.

    Raises:
        BadJSON: not JSON, nested beyond Python's recursion limit, or holding
            a number that is not finite or an integer of too many digits.
    """
    try:
        json.loads(body, parse_float=_finite_float, parse_int=_bounded_int, parse_constant=_no_constants)
    except BadJSON:
        raise
    except json.JSONDecodeError as exc:
        raise BadJSON(f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except RecursionError:
        raise BadJSON("JSON nested too deeply") from None
    except ValueError as exc:  # bytes that are not UTF-8, among others
        raise BadJSON(f"not valid JSON: {exc}") from None


def _is_json(headers: Headers) -> bool:
    # The same rule FastAPI uses to decide to parse a body as JSON.
    media = headers.get("content-type", "").split(";")[0].strip().lower()
    return media == "application/json" or (media.startswith("application/") and media.endswith("+json"))


class RequestGuardMiddleware:
    """ASGI middleware: reads the (bounded) body, checks it, then replays it to the app.

    Args:
        limits: body limit in bytes by exact path; other paths get ``default``.
        default: the body limit of every other path, bytes.
    """

    def __init__(self, app: ASGIApp, limits: dict[str, int] | None = None, default: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self.limits = limits or {}
        self.default = default

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.limits.get(scope["path"], self.default)
        headers = Headers(scope=scope)

        async def too_large() -> None:
            detail = f"request body too large: {scope['method']} {scope['path'][:100]} accepts at most {limit:,} bytes"
            await JSONResponse({"detail": detail}, status_code=413)(scope, receive, send)

        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            await too_large()
            return
        chunks, size, more = [], 0, True
        while more:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                return
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if size > limit:
                await too_large()
                return
            more = message.get("more_body", False)
        body = b"".join(chunks)
        if body and _is_json(headers):
            try:
                check_json(body)
            except BadJSON as exc:
                error = {"type": "json_invalid", "loc": ["body"], "msg": str(exc)}
                await JSONResponse({"detail": [error]}, status_code=422)(scope, receive, send)
                return

        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)

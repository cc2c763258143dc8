"""Structured access logs: one JSON line per HTTP request on the ``pdlab.access`` logger.

Each line has ``ts`` (UTC, ISO 8601), ``pid`` (which worker), ``method``,
``path`` (no query string, at most ``MAX_PATH_CHARS``), ``status``,
``bytes`` (response body as sent, after compression) and ``duration_ms``.
Client addresses are not logged: nothing here needs them. The path is
encoded by ``json.dumps``, so a crafted URL cannot forge log lines.
``pdlab serve`` turns uvicorn's own access log off and routes this logger to
stdout (:func:`log_config`).
"""

from __future__ import annotations

import copy
import json
import logging
import os
import time
from datetime import datetime, timezone
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

logger = logging.getLogger("pdlab.access")
MAX_PATH_CHARS = 200


class AccessLogMiddleware:
    """ASGI middleware writing one JSON line per HTTP request, exceptions included (status 500)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not logger.isEnabledFor(logging.INFO):
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status, sent = 500, 0

        async def send_counting(message: Message) -> None:
            nonlocal status, sent
            if message["type"] == "http.response.start":
                status = message["status"]
            elif message["type"] == "http.response.body":
                sent += len(message.get("body", b""))
            await send(message)

        try:
            await self.app(scope, receive, send_counting)
        finally:
            logger.info(json.dumps({
                "ts": datetime.now(timezone.utc).isoformat(timespec="milliseconds"),
                "pid": os.getpid(),
                "method": scope["method"],
                "path": scope["path"][:MAX_PATH_CHARS],
                "status": status,
                "bytes": sent,
                "duration_ms": round((time.perf_counter() - start) * 1e3, 3),
            }))


def log_config(level: str = "info") -> dict[str, Any]:
    """uvicorn's logging config plus ``pdlab.access`` as bare JSON lines on stdout.

    Args:
        level: ``pdlab serve --log-level``; above ``info`` the access log is silent.
    """
    from uvicorn.config import LOGGING_CONFIG

    config = copy.deepcopy(LOGGING_CONFIG)
    config["formatters"]["json_lines"] = {"format": "%(message)s"}
    config["handlers"]["pdlab_access"] = {
        "formatter": "json_lines", "class": "logging.StreamHandler", "stream": "ext://sys.stdout",
    }
    config["loggers"]["pdlab.access"] = {"handlers": ["pdlab_access"], "level": level.upper(), "propagate": False}
    return config

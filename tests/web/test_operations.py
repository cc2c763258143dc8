"""Operations (issue 9): structured access logs, /healthz, graceful shutdown of `pdlab serve`."""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_access_log_is_one_json_line_per_request(client, caplog):
    caplog.set_level(logging.INFO, logger="pdlab.access")
    client.post("/api/labs/roofline?secret=1", json={"batch": 0})
    client.get("/labs/evil%0A%7B%22status%22%3A200%7D")  # a newline and a forged record in the path
    first, second = (json.loads(r.getMessage()) for r in caplog.records if r.name == "pdlab.access")
    assert first["method"] == "POST" and first["path"] == "/api/labs/roofline" and first["status"] == 422
    assert first["duration_ms"] > 0 and first["bytes"] > 0 and first["pid"] == os.getpid()
    assert "secret" not in caplog.text  # query strings are not logged
    assert second["status"] == 404 and second["path"] == '/labs/evil\n{"status":200}'
    assert all("\n" not in r.getMessage() for r in caplog.records if r.name == "pdlab.access")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _pdlab(*args: str) -> list[str]:
    return [sys.executable, "-m", "web.cli", *args]


def test_serve_logs_json_and_shuts_down_gracefully(tmp_path):
    """`pdlab serve --workers 2`: answers, writes JSON access lines to stdout, exits 0 on SIGTERM."""
    port = _free_port()
    out, err = tmp_path / "out", tmp_path / "err"
    with open(out, "wb") as o, open(err, "wb") as e:
        server = subprocess.Popen(_pdlab("serve", "--port", str(port), "--workers", "2"), cwd=ROOT, stdout=o, stderr=e)
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).json() == {"status": "ok"}:
                        break
                except httpx.TransportError:
                    pass
                assert server.poll() is None and time.monotonic() < deadline, err.read_text()
                time.sleep(0.2)
            assert httpx.post(f"http://127.0.0.1:{port}/api/labs/roofline", json={}).status_code == 200
            server.send_signal(signal.SIGTERM)
            assert server.wait(20) == 0
        finally:
            if server.poll() is None:
                server.kill()
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert {(a["method"], a["path"], a["status"]) for a in lines} >= {("POST", "/api/labs/roofline", 200)}
    assert "Finished server process" in err.read_text()  # uvicorn's own log of a clean worker exit
    assert '"GET /healthz' not in err.read_text() + out.read_text()  # uvicorn's access log is off


@pytest.mark.parametrize("origin", ["https://x.org; script-src *", "*"])
def test_serve_refuses_a_bad_frame_ancestor(origin):
    r = subprocess.run(_pdlab("serve", "--frame-ancestor", origin), cwd=ROOT, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 2 and "not an origin" in r.stderr

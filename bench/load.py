"""A lecture's worth of students on one server: `pdlab serve --workers 2` under concurrent slider drags.

    .venv/bin/python bench/load.py [--students 200] [--arrival 10] [--drags 4] [--duration 90] [--workers 2]

Starts ``pdlab serve --workers N`` on a free loopback port (127.0.0.1 only),
waits for /healthz, and runs ``--students`` simulated students at once, each
on its own keep-alive connection, as a browser tab is. The labs are dealt
round-robin, so every lab gets its share. A student:

1. opens the lab's link at a random moment in the first ``--arrival`` seconds
   (everyone clicks when the link is projected): the page, then what a fresh
   browser loads from it (css, plotly.js, the lab's js), then the answer at
   the defaults;
2. reads for 1-4 s, then does ``--drags`` slider drags with 1-4 s of reading
   after each. A drag is what the page's JS sends while a slider moves (on a lab
   without sliders, the GPU picker): 3-6 requests for values further and
   further along the slider (log sliders move in log space), each sent 120 ms
   (the page's debounce) plus 0-400 ms after the previous answer.

While dragging a student asks about three times a second; over a session,
about once a second, so 200 students ask about 200 times a second, and apart
from the defaults every setting is new.

Bounded in count (students x drags) and time (no request starts after
``--duration`` s). Prints, for page loads, for each lab's answers and for all
requests: count, throughput, median, p99 and max latency (request sent to
last byte, gzipped as a browser asks), and errors (any non-200 answer, no
answer within 10 s, or a connection error). It also prints the time spent
inside the app (from the JSON access log) and the CPU used by the server and by
this generator. Then it stops the server with SIGINT and reports whether the
server shut down cleanly. The generator shares the machine's two cores with the
server; real students' browsers would not.

Targets (the issue): zero errors, median <= 50 ms, p99 <= 250 ms with 200 students.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import math
import os
import random
import re
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import json

import httpx
from rich import box
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
HOST = "127.0.0.1"  # loopback only
DEBOUNCE_S = 0.12  # static/js/lab.js DEBOUNCE_MS
TIMEOUT_S = 10.0  # a request not answered by then counts as an error
PAGE = "page loads (html, css, js)"
ASSET = re.compile(r'(?:src|href)="(?:https?://[^/"]+)?(/(?:static|vendor)/[^"?#]+)')
MEDIAN_TARGET_MS, P99_TARGET_MS = 50.0, 250.0


@dataclass
class Tally:
    """Latencies (s) and errors of one lab's requests."""

    latencies: list[float] = field(default_factory=list)
    errors: dict[str, int] = field(default_factory=dict)

    def error(self, kind: str) -> None:
        self.errors[kind] = self.errors.get(kind, 0) + 1


def pdlab_command() -> list[str]:
    """``.venv/bin/pdlab`` when installed, else ``python -m web.cli``."""
    installed = Path(sys.executable).parent / "pdlab"
    return [str(installed)] if installed.exists() else [sys.executable, "-m", "web.cli"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def wait_healthy(base: str, server: subprocess.Popen, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"pdlab serve exited with {server.returncode}")
        try:
            if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise RuntimeError("pdlab serve did not answer /healthz in time")


def sliders(lab: dict) -> list[dict]:
    """The lab's numeric range params (what a student drags)."""
    return [p for p in lab["params"] if p["type"] in ("integer", "number") and not p["choices"]
            and p["min"] is not None and p["max"] is not None and not p.get("hidden")]


def drag_values(p: dict, current: float | None, steps: int, rng: random.Random) -> list[float]:
    """Values a slider passes through from ``current`` to a random target, as the page sends them."""
    lo, hi = p["min"], p["max"]
    log = p["scale"] == "log"
    to_pos = (lambda v: math.log10(max(v, 1))) if log else (lambda v: v)
    from_pos = (lambda x: 10 ** x) if log else (lambda x: x)
    origin = p["default"] if current is None else current
    end = rng.uniform(to_pos(lo), to_pos(hi))
    start = end if origin is None else to_pos(origin)  # a slider left empty (None) starts where it is set
    values = []
    for i in range(1, steps + 1):
        v = min(hi, max(lo, from_pos(start + (end - start) * i / steps)))
        values.append(round(v) if p["type"] == "integer" else round(v, 4))
    return values


class Tab:
    """One student's browser tab: a keep-alive HTTP/1.1 connection, with just the HTTP this server speaks.

    Much lighter than httpx (~0.4 vs ~4 ms of CPU a request here), which matters: the load
    generator shares the server's two cores, and real students' browsers do not.
    """

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def request(self, method: str, path: str, body: bytes | None = None) -> tuple[int, bytes]:
        """Send one request, read the whole answer (left gzipped, as sent); its status and body.

        Raises:
            ConnectionError: the server closed the connection; ValueError: an answer of unknown length.
        """
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        head = f"{method} {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\nAccept-Encoding: gzip\r\n"
        if body is not None:
            head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        self.writer.write(head.encode() + b"\r\n" + (body or b""))
        status_line = await self.reader.readline()
        if not status_line:
            raise ConnectionError("server closed the connection")
        length, chunked, close = None, False, False
        while (line := await self.reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.partition(b":")
            name, value = name.strip().lower(), value.strip().lower()
            if name == b"content-length":
                length = int(value)
            elif name == b"transfer-encoding":
                chunked = value == b"chunked"
            elif name == b"connection":
                close = value == b"close"
        if chunked:
            chunks = []
            while size := int((await self.reader.readline()).split(b";")[0], 16):
                chunks.append((await self.reader.readexactly(size + 2))[:-2])
            await self.reader.readline()
            answer = b"".join(chunks)
        elif length is not None:
            answer = await self.reader.readexactly(length)
        else:
            raise ValueError("answer with neither Content-Length nor chunks")
        if close:
            self.close()
        return int(status_line.split()[1]), answer

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None


async def student(i: int, host: str, port: int, labs: list[dict], drags: int, arrival_s: float,
                  deadline: float, tallies: dict[str, Tally]) -> None:
    rng = random.Random(i)
    lab = labs[i % len(labs)]
    slug = lab["slug"]
    state: dict = {}
    tab = Tab(host, port)

    async def ask(method: str, path: str, body: dict | None = None, tally: Tally = tallies[slug]) -> bytes:
        start = time.perf_counter()
        try:
            status, answer = await asyncio.wait_for(
                tab.request(method, path, None if body is None else json.dumps(body).encode()), TIMEOUT_S)
            tally.latencies.append(time.perf_counter() - start)
            if status != 200:
                tally.error(f"HTTP {status}")
            return answer
        except (asyncio.TimeoutError, OSError, ValueError, asyncio.IncompleteReadError) as exc:
            tally.error("timeout" if isinstance(exc, asyncio.TimeoutError) else type(exc).__name__)
            tab.close()
            return b""

    await asyncio.sleep(rng.uniform(0, arrival_s))  # students open the projected link over the first seconds
    # The page, what it loads (a fresh browser: css, plotly.js, the lab's js), then the defaults' answer.
    html = gzip.decompress(page) if (page := await ask("GET", f"/labs/{slug}", tally=tallies[PAGE]))[:2] == b"\x1f\x8b" \
        else page
    for asset in dict.fromkeys(ASSET.findall(html.decode(errors="replace"))):
        await ask("GET", asset, tally=tallies[PAGE])
    await ask("POST", f"/api/labs/{slug}", {})
    await asyncio.sleep(rng.uniform(1, 4))  # reading the page before touching a slider
    controls = sliders(lab)
    gpus = [c["value"] for p in lab["params"] if p["name"] == "gpu" for c in p["choices"]]
    for _ in range(drags):
        if controls:
            p = rng.choice(controls)
            moves = [(p["name"], v) for v in drag_values(p, state.get(p["name"]), rng.randint(3, 6), rng)]
        else:  # a lab without sliders (calibration): the student flips through the GPU picker instead
            moves = [("gpu", rng.choice(gpus)) for _ in range(rng.randint(3, 6))]
        for name, value in moves:
            await asyncio.sleep(DEBOUNCE_S + rng.uniform(0, 0.4))
            if time.monotonic() > deadline:
                return
            state[name] = value
            await ask("POST", f"/api/labs/{slug}", dict(state))
        await asyncio.sleep(rng.uniform(1, 4))
    tab.close()


async def drive(port: int, students: int, drags: int, arrival_s: float,
                duration_s: float) -> tuple[dict[str, Tally], float]:
    labs = httpx.get(f"http://{HOST}:{port}/api/labs").json()
    tallies = {PAGE: Tally(), **{lab["slug"]: Tally() for lab in labs}}
    start = time.monotonic()
    await asyncio.gather(*(student(i, HOST, port, labs, drags, arrival_s, start + duration_s, tallies)
                           for i in range(students)))
    return tallies, time.monotonic() - start


def stop(server: subprocess.Popen, timeout_s: float = 20) -> str:
    """SIGINT (as Ctrl-C), then wait: uvicorn drains in-flight requests and exits."""
    server.send_signal(signal.SIGINT)
    try:
        code = server.wait(timeout_s)
        return f"exit code {code}"
    except subprocess.TimeoutExpired:
        server.kill()
        return f"did not stop within {timeout_s:.0f} s (killed)"


def report(tallies: dict[str, Tally], elapsed: float, markdown: bool) -> bool:
    table = Table(title=f"Load: {elapsed:.0f} s of simulated students (latency: request to last byte)",
                  box=box.MARKDOWN if markdown else box.SIMPLE_HEAD)
    for column in ("lab", "requests", "req/s", "median ms", "p99 ms", "max ms", "errors"):
        table.add_column(column, justify="left" if column == "lab" else "right")
    everything = Tally()
    for slug, t in [*tallies.items(), ("all", everything)]:
        if slug != "all":
            everything.latencies += t.latencies
            for kind, n in t.errors.items():
                everything.errors[kind] = everything.errors.get(kind, 0) + n
        ms = sorted(x * 1e3 for x in t.latencies) or [math.nan]
        p99 = ms[min(len(ms) - 1, math.ceil(0.99 * len(ms)) - 1)]
        errors = ", ".join(f"{k}: {n}" for k, n in t.errors.items()) or "0"
        table.add_row(slug, f"{len(t.latencies):,}", f"{len(t.latencies) / elapsed:.0f}",
                      f"{statistics.median(ms):.1f}", f"{p99:.1f}", f"{ms[-1]:.0f}", errors)
    Console(width=160).print(table)
    ms = sorted(x * 1e3 for x in everything.latencies)
    p99 = ms[math.ceil(0.99 * len(ms)) - 1]
    return not everything.errors and statistics.median(ms) <= MEDIAN_TARGET_MS and p99 <= P99_TARGET_MS


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--students", type=int, default=200)
    parser.add_argument("--drags", type=int, default=4, help="slider drags per student")
    parser.add_argument("--arrival", type=float, default=10.0,
                        help="students open the link at random times over this many seconds")
    parser.add_argument("--duration", type=float, default=90.0, help="no request starts after this many seconds")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--markdown", action="store_true", help="print the table as Markdown (for docs/)")
    args = parser.parse_args(argv)

    port = free_port()
    base = f"http://{HOST}:{port}"
    logs = Path(tempfile.mkdtemp(prefix="pdlab-load-"))
    command = [*pdlab_command(), "serve", "--host", HOST, "--port", str(port), "--workers", str(args.workers)]
    print(f"$ {' '.join(command)}   (load average before: {', '.join(f'{x:.1f}' for x in os.getloadavg())}; "
          f"{os.cpu_count()} CPUs)")
    with open(logs / "stdout", "wb") as out, open(logs / "stderr", "wb") as err:
        server = subprocess.Popen(command, cwd=ROOT, stdout=out, stderr=err)
        try:
            wait_healthy(base, server)
            client_cpu = resource.getrusage(resource.RUSAGE_SELF)
            tallies, elapsed = asyncio.run(drive(port, args.students, args.drags, args.arrival, args.duration))
            client_cpu_s = sum(getattr(resource.getrusage(resource.RUSAGE_SELF), f) - getattr(client_cpu, f)
                               for f in ("ru_utime", "ru_stime"))
        finally:
            stopped = stop(server)
    server_cpu_s = sum(getattr(resource.getrusage(resource.RUSAGE_CHILDREN), f) for f in ("ru_utime", "ru_stime"))
    access = [json.loads(line) for line in (logs / "stdout").read_text().splitlines()]
    passed = report(tallies, elapsed, args.markdown)
    served = sorted(a["duration_ms"] for a in access if a["path"].startswith("/api/labs/"))
    print(f"server: {args.workers} workers; shutdown on SIGINT: {stopped}; {len(access):,} JSON access-log lines; "
          f"time inside the app per lab request (access log): median {statistics.median(served):.1f} ms, "
          f"p99 {served[math.ceil(0.99 * len(served)) - 1]:.1f} ms")
    print(f"CPU over {elapsed:.0f} s: server {server_cpu_s:.0f} s (start-up included), "
          f"this load generator {client_cpu_s:.0f} s, of {elapsed * os.cpu_count():.0f} core-seconds")
    shutil.rmtree(logs)
    print(f"targets (0 errors, median <= {MEDIAN_TARGET_MS:.0f} ms, p99 <= {P99_TARGET_MS:.0f} ms): "
          + ("met" if passed else "NOT met"))
    return 0 if passed else 1


if __name__ == "__main__":
    raise SystemExit(main())

"""How long each lab takes to answer, at its defaults and at its most expensive setting.

    .venv/bin/python bench/labs.py [--repeats 15] [--samples 60] [--markdown]

For every lab in ``labs.LABS`` it finds the most expensive setting by search
(every corner of the numeric params at min / default / max, plus random
log-uniform draws, then each value of each choice param tried on the slowest
setting found; each candidate timed on its first run) and prints, at the
defaults and at that setting:

* first run: ``lab.run(params)`` the first time this process sees the setting
  (some labs memoise their simulations, so later runs can be much faster);
* compute: ``lab.run(params)`` repeated, median;
* answer: the whole HTTP request served in-process (httpx's ASGITransport:
  middleware, validation, run, JSON, gzip) with the result cache off, median;
* new answer: answer + (first run - compute), the answer for a setting the
  lab has not seen before, which is what a slider move asks for;
* cached: the same request answered from the result cache, median;
* raw / gzip: the answer's size in bytes, as rendered and as sent to a browser.

Targets (the issue): answer and new answer <= 20 ms at the defaults and <= 150 ms
at the most expensive setting; answers <= 1 MB.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import math
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

# Run as `python bench/labs.py`, this file's folder comes first on sys.path and `import labs` would import
# this very file; put the repository root there instead.
ROOT = Path(__file__).resolve().parent.parent
sys.path[:] = [str(ROOT)] + [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]

import httpx  # noqa: E402 (after the sys.path fix above)
from pydantic import ValidationError
from rich import box
from rich.console import Console
from rich.table import Table

from labs import LABS
from labs.base import Lab, params_schema
from web.app import create_app
from web.cache import RESULTS

DEFAULT_TARGET_MS = 20.0
EXPENSIVE_TARGET_MS = 150.0
SIZE_TARGET_BYTES = 1_000_000


def _validate(lab: Lab, values: dict[str, Any]):
    try:
        return lab.params.model_validate(values)
    except ValidationError:
        return None


def _compute_ms(lab: Lab, params, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        lab.run(params)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def _random_value(p: dict[str, Any], rng: random.Random) -> Any:
    lo, hi = p["min"], p["max"]
    if p["scale"] == "log" and lo >= 1:
        return round(10 ** rng.uniform(math.log10(lo), math.log10(hi)))
    value = rng.uniform(lo, hi)
    return round(value) if p["type"] == "integer" else value


def most_expensive(lab: Lab, samples: int, seed: int = 0) -> tuple[dict[str, Any], float]:
    """Params (as a dict) of the slowest first ``lab.run`` found by the search, and that run's ms.

    Each candidate is timed once, on its first run in this process: some labs
    memoise their simulations, so a repeat would time the memo, not the work a
    new slider position costs.
    """
    schema = params_schema(lab.params)
    defaults = {p["name"]: p["default"] for p in schema}
    numeric = [p for p in schema if not p["choices"] and not p.get("hidden") and p["type"] in ("integer", "number")
               and p["min"] is not None and p["max"] is not None]
    choice = [p for p in schema if p["choices"]]
    candidates = [
        {**defaults, **{p["name"]: v for p, v in zip(numeric, corner)}}
        for corner in itertools.product(*[sorted({p["min"], p["default"], p["max"]} - {None}) for p in numeric])
    ]
    failures: list[str] = []
    rng = random.Random(seed)
    candidates += [{**defaults, **{p["name"]: _random_value(p, rng) for p in numeric}} for _ in range(samples)]

    def first_run_ms(params) -> float:
        try:
            return _compute_ms(lab, params, 1)
        except Exception as exc:  # a lab bug (the property tests report it); the search goes on
            failures.append(f"{type(exc).__name__}: {exc}")
            return -1.0

    def slowest(options: list[dict[str, Any]]) -> tuple[float, dict[str, Any]]:
        seen = {json.dumps(v, sort_keys=True): v for v in options}.values()
        return max(((first_run_ms(params), values) for values in seen
                    if (params := _validate(lab, values)) is not None), key=lambda t: t[0], default=(-1.0, {}))

    best_ms, best = slowest(candidates)
    for p in choice:
        ms, values = slowest([{**best, p["name"]: c["value"]} for c in p["choices"] if c["value"] != best[p["name"]]])
        if ms > best_ms:
            best_ms, best = ms, values
    if failures:
        print(f"{lab.slug}: {len(failures)} settings raised during the search, e.g. {failures[0]}")
    return best, best_ms


async def _answer_ms(client: httpx.AsyncClient, slug: str, body: dict[str, Any], repeats: int) -> tuple[float, int, int]:
    times, raw, sent = [], 0, 0
    for _ in range(repeats):
        start = time.perf_counter()
        response = await client.post(f"/api/labs/{slug}", json=body, headers={"accept-encoding": "gzip"})
        times.append(time.perf_counter() - start)
        response.raise_for_status()
        raw = len(response.content)
        sent = int(response.headers.get("content-length", raw))
    return statistics.median(times) * 1e3, raw, sent


async def measure(repeats: int, samples: int) -> list[dict[str, Any]]:
    """One row per lab and setting: first-run and repeat compute, answer and cached ms, raw and gzip bytes."""
    app = create_app()
    rows = []
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://bench") as client:
        for lab in LABS.values():
            defaults = {p["name"]: p["default"] for p in params_schema(lab.params)}
            first_default_ms = _compute_ms(lab, lab.params(), 1)
            for setting, (values, first_ms) in (("defaults", (defaults, first_default_ms)),
                                                ("most expensive", most_expensive(lab, samples))):
                params = lab.params.model_validate(values)
                body = params.model_dump(mode="json")
                entries, RESULTS.entries = RESULTS.entries, 0
                answer_ms, raw, sent = await _answer_ms(client, lab.slug, body, repeats)
                RESULTS.entries = entries
                await client.post(f"/api/labs/{lab.slug}", json=body)  # fill the cache
                cached_ms, _, _ = await _answer_ms(client, lab.slug, body, repeats)
                compute_ms = _compute_ms(lab, params, repeats)
                changed = {k: v for k, v in body.items() if v != defaults.get(k)}
                rows.append({
                    "lab": lab.slug, "setting": setting,
                    "params": json.dumps(changed, separators=(",", ":")) if changed else "",
                    "first_ms": first_ms, "compute_ms": compute_ms, "answer_ms": answer_ms,
                    # a setting the lab has not seen: the request's overhead on top of the first run
                    "new_answer_ms": answer_ms + max(0.0, first_ms - compute_ms),
                    "cached_ms": cached_ms, "raw_bytes": raw, "gzip_bytes": sent,
                    "target_ms": DEFAULT_TARGET_MS if setting == "defaults" else EXPENSIVE_TARGET_MS,
                })
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=15, help="timed runs per measurement (median kept)")
    parser.add_argument("--samples", type=int, default=60, help="random settings tried in the search")
    parser.add_argument("--markdown", action="store_true", help="print the table as Markdown (for docs/)")
    args = parser.parse_args(argv)
    rows = asyncio.run(measure(args.repeats, args.samples))
    table = Table(title="Lab answer times (median, in-process, this machine)",
                  box=box.MARKDOWN if args.markdown else box.SIMPLE_HEAD)
    for column in ("lab", "setting", "params changed", "first run ms", "compute ms", "answer ms", "new answer ms",
                   "target ms", "cached ms", "raw bytes", "gzip bytes", "ok"):
        table.add_column(column, justify="left" if column in ("lab", "setting", "params changed") else "right",
                         overflow="fold", no_wrap=args.markdown)  # Markdown rows must stay on one line
    failed = False
    for r in rows:
        ok = max(r["answer_ms"], r["new_answer_ms"]) <= r["target_ms"] and r["raw_bytes"] <= SIZE_TARGET_BYTES
        failed |= not ok
        table.add_row(r["lab"], r["setting"], r["params"], f"{r['first_ms']:.1f}", f"{r['compute_ms']:.1f}",
                      f"{r['answer_ms']:.1f}", f"{r['new_answer_ms']:.1f}", f"{r['target_ms']:.0f}",
                      f"{r['cached_ms']:.1f}", f"{r['raw_bytes']:,}", f"{r['gzip_bytes']:,}", "yes" if ok else "NO")
    Console(width=400 if args.markdown else 200).print(table)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Chunked-prefill timeline lab: compute time and answer size at its defaults and its most expensive settings.

    .venv/bin/python bench/timeline.py [--repeats 21]

Rows:

* defaults;
* the issue's check: prompt 32,000 tokens, chunk 256, other params default;
* the most expensive setting found by search: every corner of users,
  history, prompt and chunk at (min, default, max) on the default model and
  GPU; then, from the costliest corner, every model x GPU pair, every link and
  every tensor-parallel degree, keeping the costliest each time; then the
  corners again on what was found. Cost here = steps simulated, which the
  compute time grows with, so the search does not depend on timing noise.

Columns: steps simulated (three lanes together); ``simulate``: the engine's
three lanes alone, median ms; ``run``: the lab's whole answer (simulation,
metrics, figures), median ms; ``json``: the answer's size as the API sends it
(before gzip). Targets: run <= 20 ms at defaults, <= 150 ms at the most
expensive setting, json <= 1 MB.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

# Run as `python bench/timeline.py`, this file's folder would come first on sys.path; put the root there.
ROOT = Path(__file__).resolve().parent.parent
sys.path[:] = [str(ROOT)] + [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]

from pydantic import ValidationError  # noqa: E402 (after the sys.path fix above)
from rich import box  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from engine.hardware import GPUS  # noqa: E402
from engine.models import MODELS  # noqa: E402
from engine.timeline import LINKS, simulate  # noqa: E402
from labs.chunked_prefill import Params, run  # noqa: E402

DEFAULT_TARGET_MS = 20.0
EXPENSIVE_TARGET_MS = 150.0
SIZE_TARGET_BYTES = 1_000_000
NUMERIC = ("users", "history_tokens", "prompt_tokens", "chunk_tokens")


def _params(values: dict[str, Any]) -> Params | None:
    try:
        return Params.model_validate(values)
    except ValidationError:
        return None


def _simulate(p: Params):
    return simulate(p.model_spec, p.profile_spec, users=p.users, history_tokens=p.history_tokens,
                    prompt_tokens=p.prompt_tokens, chunk_tokens=p.chunk_tokens, link=LINKS[p.link],
                    tp=p.tp, gpu=p.gpu_spec)


def _median_ms(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def _json_bytes(p: Params) -> int:
    result = run(p)
    body = {"params": p.model_dump(mode="json"), "metrics": result.metrics, "figures": result.figures,
            "notes": result.notes}
    return len(json.dumps(body, allow_nan=False, separators=(",", ":")).encode())


def _steps(p: Params) -> int:
    """Steps the three lanes simulate: what the compute time grows with (and, unlike a timing, free of noise)."""
    return sum(lane.step_s.size for lane in _simulate(p).lanes.values())


def most_expensive() -> Params:
    """The slowest setting the search finds (see the module docstring)."""
    fields = Params.model_fields
    levels = {name: (fields[name].metadata[0].ge, fields[name].default, fields[name].metadata[1].le)
              for name in NUMERIC}

    def slowest(candidates) -> Params:
        valid = [p for p in (_params(c) for c in candidates) if p is not None]
        return max(valid, key=_steps)

    def corners(base: dict) -> list[dict]:
        return [{**base, **dict(zip(NUMERIC, combo))} for combo in itertools.product(*levels.values())]

    best = slowest(corners({}))
    best = slowest({**best.model_dump(), "model": m, "gpu": g} for m in MODELS for g in GPUS)
    for name, choices in (("link", LINKS), ("tp", (1, 2, 4, 8))):
        best = slowest({**best.model_dump(), name: value} for value in choices)
    return slowest(corners(best.model_dump()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=21)
    args = parser.parse_args()

    run(Params())  # warm imports and caches once
    rows = [("defaults", Params(), DEFAULT_TARGET_MS),
            ("prompt 32,000, chunk 256", Params(prompt_tokens=32000, chunk_tokens=256), EXPENSIVE_TARGET_MS)]
    expensive = most_expensive()
    rows.append(("most expensive found", expensive, EXPENSIVE_TARGET_MS))

    table = Table(title="chunked-prefill lab: compute time (median) and answer size", box=box.SIMPLE_HEAVY)
    for column in ("setting", "steps", "simulate ms", "run ms", "target ms", "json bytes", "ok"):
        table.add_column(column, justify="left" if column == "setting" else "right")
    for label, p, target in rows:
        steps = _steps(p)
        sim_ms = _median_ms(lambda: _simulate(p), args.repeats)
        run_ms = _median_ms(lambda: run(p), args.repeats)
        size = _json_bytes(p)
        ok = run_ms <= target and size <= SIZE_TARGET_BYTES
        table.add_row(label, f"{steps:,}", f"{sim_ms:.1f}", f"{run_ms:.1f}", f"{target:.0f}", f"{size:,}",
                      "yes" if ok else "NO")
    console = Console()
    console.print(table)
    changed = {k: v for k, v in expensive.model_dump().items() if v != Params.model_fields[k].default}
    console.print(f"most expensive found: {changed}")


if __name__ == "__main__":
    main()

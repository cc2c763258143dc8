"""Time the prefix-cache lab: one run and its JSON, at the defaults and the costliest settings.

    python bench/prefix_cache.py [--repeats 20]

Budget (brief): a lab's default answer under 20 ms, its most expensive under
150 ms on the 2-core development machine, and under 1 MB. The simulations
are memoised (``engine.prefix_cache.simulate`` keeps an LRU cache, so moving the
hit rate, the replicas or the routing reuses the replica sweep), so each case
is timed twice: **cold**, with that cache emptied before every run (what the
first request with new token counts costs), and **warm** (what a later
request with the same workload costs). The table gives the median and the
slowest of ``repeats`` runs of ``run(params)`` + ``json.dumps``, the cold
runs' median CPU time (``time.process_time``: on a shared machine it shows
the work when the wall clock shows the queue), the answer's size, and how
many replica simulations one run makes.
"""

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path[:] = [str(Path(__file__).resolve().parents[1])] + [
    p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent
]

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from engine.prefix_cache import PRESETS, clear_simulation_cache, simulation_cache_size  # noqa: E402
from labs.prefix_cache import LAB, Params  # noqa: E402

CASES = {
    "default": {},
    **{f"try: {s.title}": s.params for s in LAB.try_this},
    # 15 replicas cost most: the sweep (1, 2, 4, 8, 16 replicas, both routings) plus 15 more replicas.
    **{f"largest: {pid}, 15 replicas, cache-aware": {"preset": pid, "replicas": 15, "routing": "cache-aware"}
       for pid in PRESETS},
    "largest: 131k shared + 32k unique, 15 replicas": {
        "preset": "agent-conversation", "shared_tokens": 131072, "unique_tokens": 32768, "replicas": 15,
        "routing": "cache-aware"},
}


def _once(params: Params, cold: bool) -> tuple[float, float, int]:
    """Wall and CPU seconds of one run + JSON, and the answer's size."""
    if cold:
        clear_simulation_cache()
    t0, c0 = time.perf_counter(), time.process_time()
    result = LAB.run(params)
    text = json.dumps({"metrics": result.metrics, "figures": result.figures, "notes": result.notes},
                      allow_nan=False, separators=(",", ":"))
    return time.perf_counter() - t0, time.process_time() - c0, len(text)


def time_case(body: dict, repeats: int) -> dict:
    """Cold and warm median / worst seconds of run + JSON, the answer's size, simulations per run."""
    params = Params(**body)
    cold_wall, cold_cpu, _ = zip(*(_once(params, cold=True) for _ in range(repeats)))
    sims = simulation_cache_size()
    warm, _, size = zip(*(_once(params, cold=False) for _ in range(repeats)))
    return {"cold": (statistics.median(cold_wall), max(cold_wall)), "cold_cpu": statistics.median(cold_cpu),
            "warm": (statistics.median(warm), max(warm)), "size": size[0], "sims": sims}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    load = os.getloadavg()[0]
    table = Table(title=f"Prefix-cache lab: run + JSON, {args.repeats} runs each (ms); "
                        f"{os.cpu_count()} CPUs, load average {load:.1f} at the start")
    for col in ("case", "cold median", "cold worst", "cold CPU", "warm median", "warm worst", "sims", "answer KB"):
        table.add_column(col, justify="left" if col == "case" else "right")
    for name, body in CASES.items():
        r = time_case(body, args.repeats)
        table.add_row(name, f"{r['cold'][0] * 1e3:.1f}", f"{r['cold'][1] * 1e3:.1f}", f"{r['cold_cpu'] * 1e3:.1f}",
                      f"{r['warm'][0] * 1e3:.1f}", f"{r['warm'][1] * 1e3:.1f}", str(r["sims"]),
                      f"{r['size'] / 1e3:.1f}")
    Console(width=160).print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())

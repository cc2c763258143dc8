"""Time the speculative-decoding lab: one run and its JSON, at the default and the costliest settings.

    python bench/speculative.py [--repeats 50]

Budget (brief): a lab's default answer under 20 ms, its most expensive under
150 ms on the 2-core development machine, and under 1 MB. Each case is run
``repeats`` times after one warm-up; the table gives the median and the
slowest run of ``run(params)`` + ``json.dumps`` of the answer, and its size.
"""

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from labs.speculative import LAB, Params  # noqa: E402

CASES = {
    "default": {},
    **{f"try: {s.title}": s.params for s in LAB.try_this},
    "largest stream (alpha 0.99, k 16, 70B + 1B, tp 8)": {
        "model": "llama-3.1-70b", "tp": 8, "draft_model": "llama-3.2-1b", "acceptance_rate": 0.99,
        "draft_tokens": 16, "batch": 1, "context_tokens": 1},
    "largest step (batch 256, 131k context, 70B + 8B)": {
        "model": "llama-3.1-70b", "tp": 8, "draft_model": "llama-3.1-8b", "acceptance_rate": 0.99,
        "draft_tokens": 16, "batch": 256, "context_tokens": 131072},
}


def time_case(body: dict, repeats: int) -> tuple[float, float, int]:
    """Median and worst seconds of run + JSON, and the answer's size in bytes."""
    params = Params(**body)
    LAB.run(params)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = LAB.run(params)
        text = json.dumps({"metrics": result.metrics, "figures": result.figures, "notes": result.notes},
                          allow_nan=False, separators=(",", ":"))
        times.append(time.perf_counter() - t0)
    return statistics.median(times), max(times), len(text)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=50)
    args = parser.parse_args()
    table = Table(title=f"Speculative lab: run + JSON, {args.repeats} runs each")
    for col in ("case", "median ms", "worst ms", "answer KB"):
        table.add_column(col, justify="left" if col == "case" else "right")
    for name, body in CASES.items():
        median, worst, size = time_case(body, args.repeats)
        table.add_row(name, f"{median * 1e3:.1f}", f"{worst * 1e3:.1f}", f"{size / 1e3:.1f}")
    Console().print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())

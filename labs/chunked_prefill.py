"""Chunked-prefill timeline lab: who writes tokens when a long prompt arrives.

``engine.timeline.simulate`` runs three schedulers on one decode GPU (no
chunking, chunked prefill, disaggregated prefill); this module turns its
steps into one figure (a row per user, a mark per token written, the three
lanes stacked on one time axis, a strip of step durations under each) and a
table of the lanes' metrics.

Marks are aggregated so the figure stays small and fluid at every setting:
all existing users write their tokens at the same instants, so each token
instant is one vertical mark across all their rows (white lines between
rows make it read as one mark per user), and instants closer than
1/``MARK_BINS`` of the axis merge into one band.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np

from engine.cost import kv_heads_fraction
from engine.memory import GPU_MEMORY_UTILIZATION, memory_budget
from engine.timeline import LANES, LINKS, TAIL_FRACTION, TAIL_STEPS, Lane, Timeline, simulate
from labs import theme
from labs.base import Lab, LabParams, LabResult, TryStep, param

GB = 1e9
MS = 1e3
MARK_BINS = 800  # about one pixel of a wide plot: marks closer than this merge into a band
SEPARATED_ROWS = 60  # up to this many users, white lines split the rows (rows of >= ~3 px)
LANE_NAMES = {"no_chunking": "No chunking", "chunked": "Chunked prefill", "disaggregated": "Disaggregated"}

LinkId = Literal[tuple(LINKS)]


class Params(LabParams):
    """Chunked-prefill timeline controls."""

    users: int = param(30, ge=1, le=256, step=1, unit="users", label="Streaming users",
                       help="Users already decoding when the newcomer arrives; each writes one token per step.",
                       essential=True)
    history_tokens: int = param(2000, ge=0, le=32768, scale="log", unit="tokens", label="History",
                                help="Tokens already in each streaming user's KV cache.")
    prompt_tokens: int = param(8000, ge=256, le=131072, scale="log", unit="tokens", label="Newcomer's prompt",
                               help="Length of the new user's prompt, prefilled before its first token.",
                               essential=True)
    # 512: vLLM V0's default token budget, "the best ITL on A100 in the initial benchmark" (vLLM PR #4580).
    chunk_tokens: int = param(512, ge=64, le=16384, scale="log", unit="tokens", label="Chunk size",
                              help="Prompt tokens per step on the chunked lane (vLLM's token budget, "
                                   "max_num_batched_tokens, also counts the decode tokens).", essential=True)
    link: LinkId = param("ib-400g", label="KV link (disaggregated)",
                         help="What carries the prompt's KV cache from the prefill GPU to the decode GPU.",
                         choice_labels={k: v.name for k, v in LINKS.items()})


def run(p: Params) -> LabResult:
    """Simulate the three lanes; return the metrics, the timeline figure and the table."""
    gpu, model, profile, link = p.gpu_spec, p.model_spec, p.profile_spec, LINKS[p.link]
    tl = simulate(model, profile, users=p.users, history_tokens=p.history_tokens,
                  prompt_tokens=p.prompt_tokens, chunk_tokens=p.chunk_tokens, link=link, tp=p.tp, gpu=gpu)
    users_mem = memory_budget(model, gpu, p.tp, p.users, max(p.history_tokens, 1))
    newcomer_mem = memory_budget(model, gpu, p.tp, 1, p.prompt_tokens)
    required = users_mem.required_bytes + newcomer_mem.kv_cache_bytes
    fits = required <= users_mem.usable_bytes

    lanes = {name: _lane_metrics(lane) for name, lane in tl.lanes.items()}
    lanes["disaggregated"].update({
        "prefill_ms": tl.prefill_s * MS,
        "kv_transfer_gb": tl.kv_transfer_bytes / GB,
        "kv_transfer_ms": tl.kv_transfer_s * MS,
        "link_gb_per_s": link.bytes_per_s / GB,
    })
    metrics = {
        "decode_step_ms": tl.decode_step_s * MS,
        "prefill_ms": tl.prefill_s * MS,
        "kv_bytes_per_token": model.kv_bytes_per_token(),
        "window_ms": tl.end_s * MS,
        "lanes": lanes,
        "memory": {"required_gb": required / GB, "usable_gb": users_mem.usable_bytes / GB, "fits": fits},
        "profile": {"id": profile.id, "provenance": profile.provenance},
    }
    notes = [
        "TTFT here is the GPU part only: a real server adds queueing, tokenisation and network time.",
        "The prompt arrives at a step boundary. No chunking runs it next, alone (prefill-first, as vLLM V0 "
        "did by default); chunked prefill cuts it into ceil(P / C) equal chunks of at most C tokens (Sarathi, "
        "arXiv 2308.16369) and adds one to every step (Sarathi-Serve, arXiv 2403.02310); "
        "disaggregated prefill runs it on a second GPU of the same type and the newcomer joins the decode "
        "batch at the first step boundary after its KV cache has arrived.",
        f"KV transfer: {tl.kv_transfer_bytes / GB:.2f} GB ({model.kv_bytes_per_token():,.0f} bytes per token x "
        f"{p.prompt_tokens:,} tokens"
        + (", sliding-window layers holding at most their window" if model.sliding_window else "")
        + f") over {link.name}: {tl.kv_transfer_s * MS:,.1f} ms"
        + (f" (each of the {p.tp} GPUs sends the {kv_heads_fraction(model, p.tp):.0%} it holds, in parallel)"
           if p.tp > 1 else "")
        + ". Bandwidth only, not overlapped with the prefill (Splitwise and Mooncake overlap it layer by "
        f"layer). Link: {link.source}.",
        f"Each lane runs until the latest first token plus max({TAIL_STEPS} decode steps, "
        f"{TAIL_FRACTION:.0%} of it).",
        *p.source_notes(),
    ]
    if not fits:
        notes.insert(0, (
            f"Does not fit: {p.users} users x {p.history_tokens:,} tokens plus the {p.prompt_tokens:,}-token "
            f"prompt need {required / GB:.1f} GB with the weights, more than the {users_mem.usable_bytes / GB:.1f} "
            f"GB usable ({GPU_MEMORY_UTILIZATION:.0%} of {users_mem.capacity_bytes / GB:.0f} GB). The timings "
            "below assume it did fit."
        ))
    figures = {"timeline": _timeline_figure(p, tl), "lanes": _table_figure(p, tl)}
    return LabResult(metrics=metrics, figures=figures, notes=notes)


def _lane_metrics(lane: Lane) -> dict:
    return {
        "newcomer_ttft_ms": lane.ttft_s * MS,
        "max_stall_ms": lane.max_stall_s * MS,
        "existing_tpot_ms": lane.existing_tpot_s * MS,
        "steps": lane.prefill_steps,
    }


# ---- figures ----------------------------------------------------------------


def _duration(seconds: float) -> str:
    """A time for a title or hover: ms below 20 s, else s."""
    return f"{seconds * MS:,.1f} ms" if seconds < 20 else f"{seconds:,.1f} s"


def _rounder(end: float):
    """Round times to ~1/20,000 of the axis (far below a pixel) so the JSON stays short."""
    decimals = max(0, math.ceil(-math.log10(end / 20000)))
    return lambda a: np.round(np.asarray(a, dtype=float), decimals)


def _json_list(a: np.ndarray) -> list:
    return [None if v != v else v for v in a.tolist()]  # NaN (a gap between segments) -> null


def _runs(t: np.ndarray, gap: float) -> tuple[np.ndarray, np.ndarray]:
    """Split sorted times into runs whose consecutive gaps are < gap: (first, last) of each run."""
    if t.size == 0:
        return t, t
    breaks = np.flatnonzero(np.diff(t) >= gap)
    return t[np.r_[0, breaks + 1]], t[np.r_[breaks, t.size - 1]]


def _marks(t: np.ndarray, gap: float, y0: float, y1: float, r) -> tuple[list, list]:
    """x, y of vertical marks at times ``t`` spanning y0..y1: a line per lone mark, a filled box per run."""
    first, last = _runs(t, gap)
    lone = first == last
    a, b = r(first[~lone]), r(last[~lone])
    nan = np.full(a.size, np.nan)
    x = np.concatenate([np.stack([r(first[lone])] * 2 + [np.full(lone.sum(), np.nan)], 1).ravel(),
                        np.stack([a, b, b, a, a, nan], 1).ravel()])
    y = np.concatenate([np.tile([y0, y1, np.nan], int(lone.sum())), np.tile([y0, y0, y1, y1, y0, np.nan], a.size)])
    return _json_list(x), _json_list(y)


def _segments(x0, x1, y: float, r) -> tuple[list, list]:
    """x, y of horizontal segments [x0_i, x1_i] at height y."""
    x0, x1 = np.atleast_1d(x0), np.atleast_1d(x1)
    x = np.stack([r(x0), r(x1), np.full(x0.size, np.nan)], 1).ravel()
    return _json_list(x), _json_list(np.tile([y, y, np.nan], x0.size))


def _stairs(lane: Lane, end_s: float, per_s: float, r) -> tuple[list, list]:
    """Step durations (ms) as a stair line; more steps than MARK_BINS keep each bin's longest step."""
    starts, d = lane.step_start_s, lane.step_s
    if starts.size > MARK_BINS:
        bins = np.floor(starts / (end_s / MARK_BINS)).astype(int)
        first = np.flatnonzero(np.r_[True, np.diff(bins) > 0])
        starts, d = starts[first], np.maximum.reduceat(d, first)
    x = np.r_[starts, lane.step_start_s[-1] + lane.step_s[-1]] * per_s
    return r(x).tolist(), np.round(np.r_[d, d[-1]] * MS, 3).tolist()


def _log_ticks(lo_ms: float, hi_ms: float) -> list[float]:
    """Tick values 1-2-5 x 10^e between lo and hi; decades only when that gives more than four."""
    decades = range(math.floor(math.log10(lo_ms)), math.ceil(math.log10(hi_ms)) + 1)
    ticks = [m * 10.0 ** e for e in decades for m in (1, 2, 5) if lo_ms <= m * 10.0 ** e <= hi_ms]
    return ticks if len(ticks) <= 4 else [v for v in ticks if math.log10(v).is_integer()]


def _lane_title(name: str, p: Params, lane: Lane) -> str:
    chunks = lane.prefill_steps
    what = {
        "no_chunking": f"the {p.prompt_tokens:,}-token prefill runs as one step",
        "chunked": f"{chunks:,} chunk{'s' * (chunks > 1)} of at most {p.chunk_tokens:,} tokens, one per step",
        "disaggregated": f"a prefill GPU, then the KV cache over {LINKS[p.link].short}",
    }[name]
    return (f"<b>{LANE_NAMES[name]}</b>: {what} · first token {_duration(lane.ttft_s)} · "
            f"longest stall {_duration(lane.max_stall_s)}")


def _timeline_figure(p: Params, tl: Timeline) -> dict:
    U = p.users
    unit, per_s = ("ms", MS) if tl.end_s < 20 else ("s", 1.0)
    end = tl.end_s * per_s
    r = _rounder(end)
    gap = end / MARK_BINS
    # The newcomer's row sits above the U user rows, 1/6 of them tall (at least one row) so it stays visible.
    new_h = max(1.0, U / 6)
    row_new, new_lo, new_hi = U + 0.5 + new_h / 2, U + 0.5 + 0.15 * new_h, U + 0.5 + 0.85 * new_h
    block, marks_h, strip_h = 1 / 3, 0.19, 0.075
    traces: list[dict] = []
    layout_axes: dict[str, dict] = {}
    annotations: list[dict] = []
    shapes: list[dict] = []
    shown: set[str] = set()
    steps_ms = np.concatenate([lane.step_s for lane in tl.lanes.values()]) * MS
    lo_ms, hi_ms = steps_ms.min() / 1.5, steps_ms.max() * 1.5
    strip_ticks = _log_ticks(lo_ms, hi_ms)

    def add(trace: dict, group: str) -> None:
        trace.update(legendgroup=group, name=group, showlegend=group not in shown)
        shown.add(group)
        traces.append(trace)

    for k, name in enumerate(LANES):
        lane = tl.lanes[name]
        bottom = (2 - k) * block
        ym, ys = ("y" if k == 0 else f"y{2 * k + 1}"), f"y{2 * k + 2}"
        marks_dom = [bottom + strip_h + 0.05, bottom + strip_h + 0.05 + marks_h]
        layout_axes["yaxis" + ym[1:]] = {
            "domain": marks_dom, "anchor": "x", "range": [0.5, U + 0.5 + new_h], "fixedrange": True,
            "showgrid": False, "zeroline": False, "showline": True, "linecolor": "#444", "mirror": True,
            "tickvals": [1, U, row_new] if U > 1 else [1, row_new],
            "ticktext": ["user 1", f"user {U}", "newcomer"] if U > 1 else ["user 1", "newcomer"],
        }
        layout_axes["yaxis" + ys[1:]] = {
            "domain": [bottom + 0.02, bottom + 0.02 + strip_h], "anchor": "x", "type": "log",
            "range": [math.log10(lo_ms), math.log10(hi_ms)], "fixedrange": True,
            "tickvals": strip_ticks, "ticktext": [f"{v:g}" for v in strip_ticks],
            "title": {"text": "step ms", "font": {"size": 12}},
            "showline": True, "linecolor": "#444", "mirror": True,
        }
        annotations.append({"x": 0, "xref": "paper", "y": marks_dom[1], "yref": "paper", "yanchor": "bottom",
                            "xanchor": "left", "showarrow": False, "align": "left", "font": {"size": 13},
                            "text": _lane_title(name, p, lane)})
        shapes.append({"type": "rect", "xref": "paper", "x0": 0, "x1": 1, "yref": ym, "y0": U + 0.5,
                       "y1": U + 0.5 + new_h, "fillcolor": theme.YELLOW, "opacity": 0.3, "line": {"width": 0},
                       "layer": "below"})

        x, y = _marks(lane.existing_token_s * per_s, gap, 0.5, U + 0.5, r)
        add({"type": "scatter", "x": x, "y": y, "yaxis": ym, "mode": "lines", "fill": "toself",
             "fillcolor": theme.DECODE, "line": {"color": theme.DECODE, "width": 1.5}, "hoverinfo": "skip"},
            "streaming users' tokens")
        # The newcomer's prefill work, on its own row.
        if name == "disaggregated":
            x, y = _segments(0.0, tl.prefill_s * per_s, row_new, r)
            add(_bar(x, y, ym, theme.PREFILL, f"prefill on the prefill GPU: {_duration(tl.prefill_s)}"),
                "newcomer's prefill")
            x, y = _segments(tl.prefill_s * per_s, (tl.prefill_s + tl.kv_transfer_s) * per_s, row_new, r)
            add(_bar(x, y, ym, theme.SKY_BLUE, f"KV transfer: {tl.kv_transfer_bytes / GB:.2f} GB in "
                     f"{_duration(tl.kv_transfer_s)}"), "KV transfer")
        else:
            pre = lane.prefill_tokens > 0
            s, d = lane.step_start_s[pre] * per_s, lane.step_s[pre] * per_s
            if s.size > 1 and (s.size > 400 or np.median(d) < 4 * gap):
                s, d = s[:1], np.array([s[-1] + d[-1] - s[0]])  # too fine to show chunk by chunk
            inset = 0.1 * d * (s.size > 1)
            x, y = _segments(s + inset, s + d - inset, row_new, r)
            add(_bar(x, y, ym, theme.PREFILL, f"prefill: {lane.prefill_steps:,} step(s) on this GPU"),
                "newcomer's prefill")
        x, y = _marks(lane.newcomer_token_s[1:] * per_s, gap, new_lo, new_hi, r)
        add({"type": "scatter", "x": x, "y": y, "yaxis": ym, "mode": "lines", "fill": "toself",
             "fillcolor": theme.BLUE, "line": {"color": theme.BLUE, "width": 1.5}, "hoverinfo": "skip"},
            "newcomer's tokens")
        add({"type": "scatter", "x": r([lane.ttft_s * per_s]).tolist(), "y": [row_new], "yaxis": ym,
             "mode": "markers", "marker": {"symbol": "star", "size": 16, "color": theme.VERMILLION,
                                           "line": {"color": theme.BLACK, "width": 1}},
             "hovertemplate": f"first token at {_duration(lane.ttft_s)}<extra></extra>"}, "first token")
        # White lines between rows make each token instant read as one mark per user.
        rows = np.r_[np.arange(1, U) + 0.5 if U <= SEPARATED_ROWS else [], U + 0.5]
        x = _json_list(np.tile([0.0, r(end), np.nan], rows.size))
        y = _json_list((rows[:, None] + np.array([0, 0, np.nan])).ravel())
        traces.append({"type": "scatter", "x": x, "y": y, "yaxis": ym, "mode": "lines", "showlegend": False,
                       "line": {"color": "#ffffff", "width": 1.5}, "hoverinfo": "skip"})
        x, y = _stairs(lane, tl.end_s, per_s, r)
        add({"type": "scatter", "x": x, "y": y, "yaxis": ys, "mode": "lines",
             "line": {"shape": "hv", "color": theme.GREY, "width": 1.5},
             "hovertemplate": f"step from %{{x:,.1f}} {unit}: %{{y:,.2f}} ms<extra></extra>"}, "step duration")

    layout = theme.layout(
        "Tokens written per user: three ways to serve a long new prompt",
        f"time since the newcomer's prompt arrived ({unit})", "",
        height=1000,
        margin={"l": 90, "r": 20, "t": 50, "b": 110},
        legend={"orientation": "h", "x": 0, "y": -0.06, "yanchor": "top", "xanchor": "left"},
        xaxis={"anchor": "y6", "range": [0, float(r(end))], "domain": [0, 1], "mirror": False},
        annotations=annotations,
        shapes=shapes,
        **layout_axes,
    )
    return {"data": traces, "layout": layout}


def _bar(x: list, y: list, yaxis: str, color: str, hover: str) -> dict:
    return {"type": "scatter", "x": x, "y": y, "yaxis": yaxis, "mode": "lines",
            "line": {"color": color, "width": 8}, "hovertemplate": hover + "<extra></extra>"}


def _table_figure(p: Params, tl: Timeline) -> dict:
    lanes = [tl.lanes[name] for name in LANES]

    def ms(v: float) -> str:
        return f"{v * MS:,.1f}"

    rows = [
        ("Newcomer's TTFT (ms)", [ms(lane.ttft_s) for lane in lanes]),
        ("Longest stall of a streaming user (ms)", [ms(lane.max_stall_s) for lane in lanes]),
        ("Streaming users' mean gap while it prefills (ms)", [ms(lane.existing_tpot_s) for lane in lanes]),
        ("Decode-GPU steps until its first token", [f"{lane.prefill_steps:,}" for lane in lanes]),
        ("KV transfer (GB / ms)", ["none", "none",
                                   f"{tl.kv_transfer_bytes / GB:.2f} / {tl.kv_transfer_s * MS:,.1f}"]),
    ]
    header = ["", "No chunking", f"Chunked ({p.chunk_tokens:,})", "Disaggregated"]
    trace = {
        "type": "table", "columnwidth": [2.2, 1, 1, 1],
        "header": {"values": [f"<b>{h}</b>" for h in header], "align": ["left", "right"],
                   "fill": {"color": "#f5f6f8"}, "font": {"size": 14}},
        "cells": {"values": [[label for label, _ in rows]] + [[v[i] for _, v in rows] for i in range(3)],
                  "align": ["left", "right"], "font": {"size": 14}, "height": 28},
    }
    title = f"Decode step without the newcomer: {tl.decode_step_s * MS:,.2f} ms"
    layout = theme.layout(title, "", "", height=260, margin={"l": 10, "r": 10, "t": 50, "b": 10})
    return {"data": [trace], "layout": layout}


LAB = Lab(
    slug="chunked-prefill",
    title="Chunked prefill timeline",
    order=1,
    summary="Users are streaming when a long prompt arrives: everyone freezes, one chunk rides along per step, "
            "or separate prefill GPUs take it.",
    params=Params,
    run=run,
    what_you_see=(
        "30 users are already streaming answers, each with 2,000 tokens of history. In each lane a row is one "
        "user and each black mark is one token written for them; the highlighted top row is a new user whose "
        "long prompt arrives at time 0, and the star is its first token. The three lanes share one time axis.",
        "No chunking: the next step prefills the whole prompt and carries no decode tokens, so every row goes "
        "blank until it is done: everyone freezes. Chunked prefill: every step carries all the decode tokens "
        "plus one chunk of the prompt, so marks keep coming, a little further apart. Disaggregated: a separate "
        "prefill GPU runs the prompt and sends its KV cache over the chosen link; the decode GPU never sees the "
        "prefill, and the newcomer joins its batch when the KV has arrived.",
        "Under each lane a strip shows how long each step of the decode GPU took (log scale). The table lists "
        "the newcomer's TTFT, the longest stall of a streaming user and their mean gap while the newcomer is "
        "being prefilled. Only GPU time is modelled: a real TTFT also includes queueing, tokenisation and network.",
    ),
    try_this=(
        TryStep("Prompt 32,000: freeze vs chunks",
                "Without chunking every row goes blank for the whole prefill: the longest stall is about the "
                "prefill time. With 256-token chunks the marks keep coming at short, even intervals, and the "
                "disaggregated lane's marks do not change while the prompt is prefilled elsewhere.",
                {"prompt_tokens": 32000, "chunk_tokens": 256, "users": 30, "history_tokens": 2000}),
        TryStep("Chunk 256 → 8,192",
                "Press the first button, then this one. With big chunks the chunked lane takes a few long steps: "
                "the newcomer's star moves left (a sooner first token) while everyone else's gaps, and the "
                "longest stall in the table, grow. Small chunks keep each step short but take more steps.",
                {"prompt_tokens": 32000, "chunk_tokens": 8192, "users": 30, "history_tokens": 2000}),
        TryStep("A slow link for the KV cache",
                "Over 100 Gb Ethernet the disaggregated lane's blue KV-transfer bar grows and the newcomer's "
                "first token comes later; the streaming users still never stall.",
                {"prompt_tokens": 32000, "link": "ethernet-100g"}),
    ),
    misconceptions=(
        ("Chunked prefill makes the long prompt faster.",
         "It bounds how long everyone else stalls. The long prompt's own TTFT grows, because every chunk shares "
         "its step with the decode batch and re-reads the weights and the earlier chunks' KV; the smaller the "
         "chunk, the more it grows (vLLM docs: smaller budgets give better ITL, larger ones better TTFT)."),
        ("Chunking is free.",
         "The linear-layer FLOPs are unchanged, but every chunk re-reads all the weights and the KV cache of "
         "the earlier chunks (about KV bytes x P^2 / (2C) in all), and a step far below the ridge point wastes "
         "the GPU's compute."),
        ("TTFT is the prefill time.",
         "TTFT also holds queueing, tokenisation and network time; this lab shows only the GPU's part."),
        ("Disaggregation is always a win.",
         "It removes the interference, but the KV cache must cross a link (try 100 Gb Ethernet) and the prefill "
         "GPUs are a separate pool to pay for."),
    ),
)

"""Calibration lab: how far the cost model is from the kernels it was fitted to.

For the selected profile: every timed case's predicted time (its op class's
fitted ``OpRates``, ``engine.calibration.predicted_s``) against its measured
median on log-log axes, with y = x and a +-10% band; held-out sizes drawn
open. The device's measured ceilings (large copy, large GEMM) and each op
class's fitted rates stand beside the datasheet peaks, and the error table
(median and worst absolute percentage error on held-out sizes) comes from the
profile's fit. A datasheet profile has no measurements: the page says so.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from engine.calibration import (
    OP_CLASSES,
    PROFILES,
    Profile,
    error_rows,
    predicted_s,
    profile_notes,
)
from engine.hardware import GPUS
from labs import theme
from labs.base import Lab, LabParams, LabResult, TryStep

BAND = 0.10  # the +-10% band around y = x
OP_COLOURS = {
    "gemm": theme.BLUE,
    "prefill_attention": theme.PREFILL,
    "decode_attention": theme.DECODE,
    "kv_store": theme.GREEN,
    "elementwise": theme.PURPLE,
}
BANDWIDTH_BARS = ("gemm", "decode_attention", "kv_store", "elementwise")  # ops whose bytes/s matter
COMPUTE_BARS = ("gemm", "prefill_attention")  # ops whose FLOP/s matter
IMPL_SYMBOLS = {"triton": "circle", "flash_attn": "diamond", "torch_sdpa_flash": "square", "torch": "triangle-up"}


class Params(LabParams):
    """Calibration page controls: the profile to inspect, and the GPU whose datasheet it is compared with."""


def run(p: Params) -> LabResult:
    """Predicted vs measured per timed case, ceilings vs datasheet, the error table, the profile's making."""
    profile, gpu = p.profile_spec, p.gpu_spec
    peak_gpu = GPUS.get(profile.device.gpu_id or "", gpu)
    rows = error_rows(profile)
    metrics: dict[str, Any] = {
        "profile": {"id": profile.id, "provenance": profile.provenance, "device": profile.device.name,
                    "measurements": len(profile.measurements)},
        "ceilings": _ceiling_metrics(profile, peak_gpu),
        "error": {r["op"]: {k: r[k] for k in ("implementation", "median_abs_pct", "worst_abs_pct", "cases")}
                  for r in rows if r["in_use"] and r["cases"]},
    }
    figures = {
        "predicted_vs_measured": _scatter_figure(profile),
        "ceilings": _ceilings_figure(profile, peak_gpu),
        "error_table": _error_table_figure(profile, rows),
    }
    return LabResult(metrics=metrics, figures=figures, notes=_notes(profile, gpu, peak_gpu))


def _ceiling_metrics(profile: Profile, peak_gpu) -> dict[str, Any]:
    """Datasheet peaks (GPUs only) and measured ceilings (measured profiles only); absent ones are left out."""
    d = profile.device
    out: dict[str, float] = {}
    if d.kind == "cuda":
        out["datasheet_gb_per_s"] = peak_gpu.memory_bandwidth_bytes_per_s / 1e9
        out["datasheet_bf16_tflops"] = peak_gpu.bf16_flops_per_s / 1e12
    if d.measured_copy_bytes_per_s is not None:
        out["measured_copy_gb_per_s"] = d.measured_copy_bytes_per_s / 1e9
    if d.measured_gemm_flops_per_s is not None:
        out["measured_gemm_tflops"] = d.measured_gemm_flops_per_s / 1e12
    return out


def _case_label(m) -> str:
    shape = ", ".join(f"{k} {v:,}" for k, v in m.shape.items())
    return f"{m.op} ({m.implementation}): {shape}"


def _scatter_figure(profile: Profile) -> dict:
    groups: dict[tuple[str, str, bool], list] = {}
    for m in profile.measurements:
        pred = predicted_s(profile, m)
        if pred is not None and pred > 0:
            groups.setdefault((m.op, m.implementation, m.held_out), []).append((m, pred))
    traces = []
    all_ms = [v for pts in groups.values() for m, pred in pts for v in (m.median_s * 1e3, pred * 1e3)]
    lo, hi = (min(all_ms) / 1.5, max(all_ms) * 1.5) if all_ms else (1e-3, 1e3)
    line = np.geomspace(lo, hi, 2).tolist()
    traces.append({"type": "scatter", "x": line, "y": [v * (1 - BAND) for v in line], "mode": "lines",
                   "line": {"width": 0}, "hoverinfo": "skip", "showlegend": False})
    traces.append({"type": "scatter", "x": line, "y": [v * (1 + BAND) for v in line], "mode": "lines",
                   "line": {"width": 0}, "fill": "tonexty", "fillcolor": "rgba(107,107,107,0.15)",
                   "name": f"±{BAND:.0%}", "hoverinfo": "skip"})
    traces.append({"type": "scatter", "x": line, "y": line, "mode": "lines", "name": "predicted = measured",
                   "line": {"color": theme.GREY, "width": 1, "dash": "dash"}, "hoverinfo": "skip"})
    for (op, impl, held_out), pts in sorted(groups.items(), key=lambda kv: (OP_CLASSES.index(kv[0][0]), kv[0][1:])):
        colour = OP_COLOURS.get(op, theme.GREY)
        symbol = IMPL_SYMBOLS.get(impl, "circle") + ("-open" if held_out else "")
        traces.append({
            "type": "scatter", "mode": "markers",
            "name": f"{op.replace('_', ' ')} · {impl}" + (" · held out" if held_out else " · fitted"),
            "x": [m.median_s * 1e3 for m, _ in pts], "y": [pred * 1e3 for _, pred in pts],
            "text": [f"{_case_label(m)}<br>error {(pred / m.median_s - 1) * 100:+.1f}%" for m, pred in pts],
            "marker": {"color": colour, "symbol": symbol, "size": 8, "line": {"color": colour, "width": 1.5}},
            "hovertemplate": "%{text}<br>measured %{x:.3g} ms<br>predicted %{y:.3g} ms<extra></extra>",
        })
    layout = theme.layout(
        f"Predicted vs measured time: {profile.id}", "Measured (ms, log)", "Predicted (ms, log)",
        xaxis={"type": "log"}, yaxis={"type": "log"}, height=520,
    )
    if not groups:
        layout["annotations"] = [{"text": "No measurements: a datasheet profile. Run pdlab calibrate, then "
                                          "pdlab serve --profile FILE.", "xref": "paper", "yref": "paper",
                                  "x": 0.5, "y": 0.5, "showarrow": False}]
    return {"data": traces, "layout": layout}


def _ceilings_figure(profile: Profile, peak_gpu) -> dict:
    d = profile.device
    bw: list[tuple[str, float, str]] = []
    fl: list[tuple[str, float, str]] = []
    if d.kind == "cuda":
        bw.append((f"datasheet ({peak_gpu.name})", peak_gpu.memory_bandwidth_bytes_per_s / 1e9, theme.GREY))
        fl.append((f"datasheet ({peak_gpu.name})", peak_gpu.bf16_flops_per_s / 1e12, theme.GREY))
    if d.measured_copy_bytes_per_s is not None:
        bw.append(("measured copy", d.measured_copy_bytes_per_s / 1e9, theme.SKY_BLUE))
    if d.measured_gemm_flops_per_s is not None:
        fl.append(("measured large GEMM", d.measured_gemm_flops_per_s / 1e12, theme.SKY_BLUE))
    for op in OP_CLASSES:
        rates = profile.rates(op)
        how = "fitted" if op in profile.fit.implementations else "from the ceilings"
        label = f"{op.replace('_', ' ')} ({how})" if profile.provenance == "measured" else op.replace("_", " ")
        if op in BANDWIDTH_BARS:
            bw.append((label, rates.bytes_per_s / 1e9, OP_COLOURS[op]))
        if op in COMPUTE_BARS:
            fl.append((label, rates.flops_per_s / 1e12, OP_COLOURS[op]))
    traces = [
        {"type": "bar", "x": [v for _, v, _ in bw], "y": [n for n, _, _ in bw], "orientation": "h",
         "marker": {"color": [c for _, _, c in bw]}, "name": "bandwidth (GB/s)", "xaxis": "x", "yaxis": "y",
         "hovertemplate": "%{y}: %{x:.4g} GB/s<extra></extra>"},
        {"type": "bar", "x": [v for _, v, _ in fl], "y": [n for n, _, _ in fl], "orientation": "h",
         "marker": {"color": [c for _, _, c in fl]}, "name": "compute (TFLOP/s)", "xaxis": "x2", "yaxis": "y2",
         "hovertemplate": "%{y}: %{x:.4g} TFLOP/s<extra></extra>"},
    ]
    rows = len(bw) + len(fl)
    split = len(fl) / max(rows, 1)  # each panel's height in proportion to its bars
    axis = {"showline": True, "linecolor": "#444", "mirror": True, "automargin": True}
    layout = theme.layout(
        "Ceilings and fitted rates vs the datasheet", "Memory bandwidth (GB/s)", "",
        height=160 + 34 * rows, showlegend=False, margin={"l": 20, "r": 20, "t": 50, "b": 50},
        xaxis={"anchor": "y", "automargin": True},
        yaxis={"domain": [split + 0.2, 1], **axis},
        xaxis2={"anchor": "y2", "title": {"text": "Compute (TFLOP/s)"}, **axis},
        yaxis2={"domain": [0, max(split - 0.04, 0.05)], "anchor": "x2", **axis},
    )
    return {"data": traces, "layout": layout}


def _fmt(v: float | None) -> str:
    return "–" if v is None else f"{v:.1f}"


def _error_table_figure(profile: Profile, rows: list[dict[str, Any]]) -> dict:
    header = ["op class", "implementation", "used by labs", "held-out sizes", "median |error| %", "worst |error| %"]
    cells = [
        [r["op"].replace("_", " ") for r in rows],
        [r["implementation"] for r in rows],
        ["yes" if r["in_use"] else "no" for r in rows],
        [r["cases"] for r in rows],
        [_fmt(r["median_abs_pct"]) for r in rows],
        [_fmt(r["worst_abs_pct"]) for r in rows],
    ]
    table = {"type": "table", "header": {"values": header, "align": "left", "fill": {"color": "#eeeeee"}},
             "cells": {"values": cells, "align": "left", "height": 28}}
    layout = theme.layout(f"Fit error on sizes held out of the fit: {profile.id}", "", "",
                          height=120 + 30 * max(len(rows), 1), margin={"l": 10, "r": 10, "t": 50, "b": 10})
    return {"data": [table], "layout": layout}


def _notes(profile: Profile, gpu, peak_gpu) -> list[str]:
    notes = profile_notes(profile, gpu)
    if profile.provenance == "datasheet":
        measured = list(_measured_profiles())
        notes.append("A datasheet profile has nothing measured, so there is no error to show. "
                     + (f"Measured profiles available: {', '.join(measured)}." if measured
                        else "Make one with `pdlab calibrate --out FILE`, then `pdlab serve --profile FILE`."))
        return notes
    d = profile.device
    software = ", ".join(f"{k} {v}" for k, v in sorted(profile.software.items()))
    notes.append(f"How it was made: {profile.description}")
    if software:
        notes.append(f"Software: {software}.")
    notes.append("Each op class's rates are fitted by least squares (relative error) to the time model "
                 "t = launch + max((FLOPs + n½) / FLOP/s, (bytes + n½) / bytes/s) on every other size of each "
                 "sweep; the open markers are the sizes held out of the fit, and the error table is theirs.")
    for op in OP_CLASSES:
        if op in profile.fit.sources:
            notes.append(f"{op.replace('_', ' ')}: {profile.fit.sources[op]}.")
    if d.kind == "cuda" and d.gpu_id is None:
        notes.append(f"{d.name} is not in the GPU catalog; its measured ceilings are compared with the "
                     f"selected {gpu.name}'s datasheet.")
    return notes


def _measured_profiles() -> dict[str, Profile]:
    return {pid: prof for pid, prof in PROFILES.items() if prof.provenance == "measured"}


def measured_kernel_traces(profile: Profile) -> list[dict]:
    """Roofline traces of a measured profile's timed kernels: x = FLOP/byte, y = achieved TFLOP/s.

    One trace per op class (ops without FLOPs, as KV stores, cannot sit on a log axis and are left out);
    none for a datasheet profile.
    """
    traces = []
    for op in OP_CLASSES:
        pts = [m for m in profile.measurements if m.op == op and m.flops > 0 and m.bytes > 0]
        if not pts:
            continue
        traces.append({
            "type": "scatter", "mode": "markers", "name": f"measured {op.replace('_', ' ')} ({profile.id})",
            "x": [m.flops / m.bytes for m in pts], "y": [m.flops / m.median_s / 1e12 for m in pts],
            "text": [_case_label(m) for m in pts],
            "marker": {"color": OP_COLOURS[op], "size": 6, "opacity": 0.6, "symbol": "x-thin-open",
                       "line": {"color": OP_COLOURS[op], "width": 1.5}},
            "hovertemplate": "%{text}<br>%{x:.3g} FLOP/byte<br>%{y:.3g} TFLOP/s<extra></extra>",
        })
    return traces


LAB = Lab(
    slug="calibration",
    title="Calibration",
    order=5,
    summary="How far the model is from the measured kernels: predicted vs measured time per op, "
            "the device's ceilings against its datasheet, and the fit's error per op class.",
    params=Params,
    run=run,
    what_you_see=(
        "Every dot is one kernel timed by `pdlab calibrate` on the profile's device: across, its measured "
        "time; up, the time the cost model predicts for it from the fitted rates. On the dashed line the "
        "model is exact; inside the grey band it is within 10%. Filled markers were used to fit the rates, "
        "open ones were held out and show the error on sizes the fit never saw.",
        "The bars put the device's measured ceilings (a large copy, a large GEMM) and each op class's fitted "
        "rate beside the datasheet peaks: the gap is what a roofline calculator that trusts the datasheet gets wrong.",
        "The table is the fit's median and worst absolute error per op class, on the held-out sizes; every "
        "other lab's times inherit these errors when this profile is selected.",
    ),
    try_this=(
        TryStep("A datasheet profile",
                "Nothing was measured, so nothing is plotted: its rates are peaks times factors measured by others.",
                {"profile": "datasheet"}),
    ),
    misconceptions=(
        ("A roofline calculator's times are what the GPU does.",
         "They assume the datasheet peak; real kernels reach a size-dependent fraction of it, which this fit measures."),
    ),
)

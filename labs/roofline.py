"""Roofline lab: prefill and decode as points by arithmetic intensity.

One decode step of ``batch`` sequences, each with ``history_tokens`` of KV
cache, and the prefill of one ``prompt_tokens`` prompt, are costed by
``engine.cost`` and placed on the GPU's roofline (Williams, Waterman &
Patterson, CACM 2009): x = FLOPs per byte moved, y = FLOP/s achieved.
"""

from __future__ import annotations

import numpy as np

from engine.cost import StepCost, step_cost
from engine.memory import GPU_MEMORY_UTILIZATION, memory_budget
from labs import theme
from labs.base import Lab, LabParams, LabResult, TryStep, param
from labs.calibration import measured_kernel_traces

GB = 1e9
BATCH_SWEEP = 2 ** np.arange(11)  # 1 .. 1024


class Params(LabParams):
    """Roofline controls."""

    batch: int = param(1, ge=1, le=1024, scale="log", unit="sequences", label="Decode batch",
                       help="Sequences decoding together; each adds one token per step.", essential=True)
    history_tokens: int = param(2000, ge=0, le=131072, scale="log", unit="tokens", label="History",
                                help="Tokens already in each sequence's KV cache.", essential=True)
    prompt_tokens: int = param(2000, ge=1, le=131072, scale="log", unit="tokens", label="Prompt",
                               help="Length of one prompt being prefilled.")


def _bound(cost: StepCost, ridge: float) -> str:
    return "compute" if float(cost.flop_per_byte) >= ridge else "memory"


def run(p: Params) -> LabResult:
    """Cost the decode step and the prefill; place them on the roofline; check memory."""
    gpu, model, profile = p.gpu_spec, p.model_spec, p.profile_spec
    gemm = profile.rates("gemm")
    attainable_ridge = gemm.flops_per_s / gemm.bytes_per_s
    kw = dict(tp=p.tp, gpu=gpu)

    decode = step_cost(model, profile, [1], [p.history_tokens], seq_counts=[p.batch], **kw)
    prefill = step_cost(model, profile, [p.prompt_tokens], [0], **kw)
    sweep = step_cost(model, profile, np.ones((BATCH_SWEEP.size, 1)), [[p.history_tokens]],
                      seq_counts=BATCH_SWEEP[:, None], **kw)
    mem = memory_budget(model, gpu, p.tp, p.batch, max(p.history_tokens, 1))
    sweep_fits = BATCH_SWEEP <= mem.max_batch

    decode_s = float(decode.total_time_s)
    prefill_s = float(prefill.total_time_s)
    metrics = {
        "ridge_flop_per_byte": gpu.ridge_flop_per_byte,
        "attainable_ridge_flop_per_byte": attainable_ridge,
        "kv_bytes_per_token": model.kv_bytes_per_token(),
        "decode": {
            "flop_per_byte": float(decode.flop_per_byte),
            "step_ms": decode_s * 1e3,
            "tokens_per_s": p.batch / decode_s,
            "achieved_tflops": float(decode.total_flops) / decode_s / 1e12,
            "bound": _bound(decode, attainable_ridge),
        },
        "prefill": {
            "flop_per_byte": float(prefill.flop_per_byte),
            "time_ms": prefill_s * 1e3,
            "tokens_per_s": p.prompt_tokens / prefill_s,
            "achieved_tflops": float(prefill.total_flops) / prefill_s / 1e12,
            "bound": _bound(prefill, attainable_ridge),
        },
        "memory": {
            "weights_gb": mem.weights_bytes / GB,
            "kv_cache_gb": mem.kv_cache_bytes / GB,
            "required_gb": mem.required_bytes / GB,
            "usable_gb": mem.usable_bytes / GB,
            "capacity_gb": mem.capacity_bytes / GB,
            "fits": mem.fits,
            "max_batch": mem.max_batch,
        },
        "profile": {"id": profile.id, "provenance": profile.provenance},
    }
    notes = p.source_notes()
    if not mem.fits:
        notes.insert(0, (
            f"Does not fit: {p.batch} sequences x {p.history_tokens:,} tokens need "
            f"{mem.kv_cache_bytes / GB:.1f} GB of KV cache on top of "
            f"{mem.weights_bytes / GB:.1f} GB of weights = {mem.required_bytes / GB:.1f} GB, more than the "
            f"{mem.usable_bytes / GB:.1f} GB usable ({GPU_MEMORY_UTILIZATION:.0%} of {mem.capacity_bytes / GB:.0f} GB). "
            f"At most {mem.max_batch} sequences of this length fit."
        ))
    figures = {
        "roofline": _roofline_figure(p, decode, prefill, sweep, sweep_fits, attainable_ridge),
        "memory": _memory_figure(mem),
        "breakdown": _breakdown_figure(decode, prefill),
    }
    return LabResult(metrics=metrics, figures=figures, notes=notes)


def _roofline_figure(p: Params, decode, prefill, sweep, sweep_fits, attainable_ridge) -> dict:
    gpu, profile = p.gpu_spec, p.profile_spec
    gemm = profile.rates("gemm")
    x = np.logspace(-1, 5, 61)
    peak = np.minimum(gpu.bf16_flops_per_s, x * gpu.memory_bandwidth_bytes_per_s) * p.tp / 1e12
    attain = np.minimum(gemm.flops_per_s, x * gemm.bytes_per_s) * p.tp / 1e12

    def point(cost: StepCost, seconds: float) -> tuple[float, float]:
        return float(cost.flop_per_byte), float(cost.total_flops) / seconds * p.tp / 1e12

    dx, dy = point(decode, float(decode.total_time_s))
    px, py = point(prefill, float(prefill.total_time_s))
    sx = sweep.flop_per_byte
    sy = sweep.total_flops / sweep.total_time_s * p.tp / 1e12
    traces = [
        {"type": "scatter", "x": x.tolist(), "y": peak.tolist(), "mode": "lines", "name": "datasheet roof",
         "line": {"color": theme.GREY, "width": 2}},
        {"type": "scatter", "x": x.tolist(), "y": attain.tolist(), "mode": "lines",
         "name": f"attainable roof ({profile.provenance})", "line": {"color": theme.BLUE, "width": 2, "dash": "dash"}},
        {"type": "scatter", "x": sx[sweep_fits].tolist(), "y": sy[sweep_fits].tolist(), "mode": "lines+markers",
         "name": "decode, batch 1..1024", "line": {"color": theme.DECODE, "width": 1, "dash": "dot"},
         "marker": {"size": 5, "color": theme.DECODE}, "text": [f"batch {b}" for b in BATCH_SWEEP[sweep_fits]],
         "hovertemplate": "%{text}<br>%{x:.1f} FLOP/byte<br>%{y:.1f} TFLOP/s<extra></extra>"},
        {"type": "scatter", "x": sx[~sweep_fits].tolist(), "y": sy[~sweep_fits].tolist(), "mode": "markers",
         "name": "decode, does not fit in memory",
         "marker": {"size": 7, "color": theme.GREY, "symbol": "x"},
         "text": [f"batch {b}: out of memory" for b in BATCH_SWEEP[~sweep_fits]],
         "hovertemplate": "%{text}<extra></extra>"},
        {"type": "scatter", "x": [dx], "y": [dy], "mode": "markers+text", "name": f"decode (batch {p.batch})",
         "marker": {"size": 16, "color": theme.DECODE, "symbol": "circle"},
         "text": ["decode"], "textposition": "top left",
         "hovertemplate": "decode<br>%{x:.2f} FLOP/byte<br>%{y:.1f} TFLOP/s<extra></extra>"},
        {"type": "scatter", "x": [px], "y": [py], "mode": "markers+text",
         "name": f"prefill ({p.prompt_tokens:,} tokens)",
         "marker": {"size": 16, "color": theme.PREFILL, "symbol": "diamond"},
         "text": ["prefill"], "textposition": "top left",
         "hovertemplate": "prefill<br>%{x:.0f} FLOP/byte<br>%{y:.1f} TFLOP/s<extra></extra>"},
    ]
    if p.tp == 1 and profile.device.kind == "cuda":  # a measured profile's kernels, timed on one GPU
        traces[2:2] = measured_kernel_traces(profile)
    ridge = gpu.ridge_flop_per_byte
    layout = theme.layout(
        f"Roofline: {gpu.name}" + (f" x{p.tp}" if p.tp > 1 else ""),
        "Arithmetic intensity (FLOP/byte, log)", "Performance (TFLOP/s, log)",
        xaxis={"type": "log", "range": [-1, 5]},
        yaxis={"type": "log"},
        height=520,
        shapes=[{"type": "line", "x0": ridge, "x1": ridge, "yref": "paper", "y0": 0, "y1": 1,
                 "line": {"color": theme.GREY, "width": 1, "dash": "dot"}}],
        annotations=[{"x": np.log10(ridge), "y": 1, "yref": "paper", "text": f"ridge {ridge:.0f}",
                      "showarrow": False, "yanchor": "bottom"}],
    )
    return {"data": traces, "layout": layout}


def _memory_figure(mem) -> dict:
    free = max(mem.usable_bytes - mem.required_bytes, 0.0)
    parts = [("weights", mem.weights_bytes, theme.BLUE), ("KV cache", mem.kv_cache_bytes, theme.ORANGE),
             ("free", free, "#DDDDDD")]
    traces = [
        {"type": "bar", "orientation": "h", "y": ["memory"], "x": [v / GB], "name": name,
         "marker": {"color": color}, "hovertemplate": f"{name}: %{{x:.1f}} GB<extra></extra>"}
        for name, v, color in parts
    ]
    layout = theme.layout(
        "Memory: weights + KV cache vs usable", "GB", "", barmode="stack", height=220,
        shapes=[{"type": "line", "x0": mem.usable_bytes / GB, "x1": mem.usable_bytes / GB, "yref": "paper",
                 "y0": 0, "y1": 1, "line": {"color": theme.VERMILLION, "width": 3}}],
        annotations=[{"x": mem.usable_bytes / GB, "y": 1, "yref": "paper", "showarrow": False,
                      "yanchor": "bottom", "text": f"usable {mem.usable_bytes / GB:.0f} GB"}],
    )
    return {"data": traces, "layout": layout}


def _breakdown_figure(decode: StepCost, prefill: StepCost) -> dict:
    ops = [op for op in decode.time_s if float(decode.time_s[op]) + float(prefill.time_s[op]) > 0]
    colors = [theme.BLUE, theme.VERMILLION, theme.BLACK, theme.GREEN, theme.ORANGE, theme.PURPLE]
    traces = [
        {"type": "bar", "orientation": "h", "y": ["decode step", "prefill"], "name": op.replace("_", " "),
         "x": [float(decode.time_s[op]) * 1e3, float(prefill.time_s[op]) * 1e3],
         "marker": {"color": colors[i % len(colors)]}, "hovertemplate": f"{op}: %{{x:.3f}} ms<extra></extra>"}
        for i, op in enumerate(ops)
    ]
    return {"data": traces, "layout": theme.layout("Where the time goes", "ms (log)", "", barmode="stack",
                                                  height=260, xaxis={"type": "log"})}


LAB = Lab(
    slug="roofline",
    title="Roofline",
    order=2,
    summary="Prefill and decode as points on the GPU's roofline: batch, history and memory move them.",
    params=Params,
    run=run,
    what_you_see=(
        "A roofline of the chosen GPU. Across: arithmetic intensity, the FLOPs a step does for each byte "
        "it moves to or from memory. Up: the FLOP/s it achieves. Left of the ridge the sloped roof, memory "
        "bandwidth, caps the speed; right of it the flat roof, compute, does.",
        "The vermillion diamond is the prefill of one prompt: every weight read is used by every prompt token, "
        "so it does roughly as many FLOPs per byte as the prompt has tokens and sits under the flat roof. "
        "The black dot is one decode step: each sequence brings one token, so the weights are shared by "
        "batch-many tokens, and each sequence's KV cache is read for about one FLOP per byte.",
        "The dotted line is the decode step at batch 1, 2, 4 ... 1024; crosses mark batches whose KV cache "
        "no longer fits in memory. The bar below shows weights, KV cache and what is left.",
    ),
    try_this=(
        TryStep("Batch 1 to 256",
                "The decode point climbs the slope as the weight read is shared, then stalls: at 2,000 tokens "
                "of history each new sequence adds as many KV bytes as FLOPs. Mind the note: on an 80 GB GPU "
                "the KV cache of 256 such sequences no longer fits (crosses mark those batches; max batch is "
                "in the metrics).",
                {"batch": 256, "history_tokens": 2000}),
        TryStep("Cut history to 200",
                "With a tenth of the KV cache to read per sequence, the same batch climbs much higher.",
                {"batch": 256, "history_tokens": 200}),
        TryStep("Past the memory limit",
                "At batch 1,024 with 2,000 tokens each, the KV cache alone outgrows the GPU: read the warning.",
                {"batch": 1024, "history_tokens": 2000}),
    ),
    misconceptions=(
        ("Decode is slow because the GPU lacks compute.",
         "It lacks bandwidth: decode reads every weight and the KV cache for about one FLOP per byte per sequence."),
        ("Decode does not scale with batch size.",
         "Batching shares the weight read, so throughput grows almost linearly until KV reads or compute take over."),
    ),
)

"""Prefix-cache lab: the prefill a cached shared prefix saves, and how often requests find it.

``engine.prefix_cache`` costs one request's prefill on a miss and on a hit
(``engine.cost.step_cost``), and simulates a seeded request stream on N
replicas, each with a vLLM-style block cache, routed round-robin or
cache-aware. The measured hit rate (or the user's what-if rate) sets the
mean TTFT and the savings.
"""

from __future__ import annotations

from typing import Literal

from engine.block_cache import BLOCK_TOKENS
from engine.cost import kv_heads_fraction
from engine.prefix_cache import (
    PRESETS, PrefillSaving, SimResult, Workload, kv_capacity_blocks, prefill_saving, simulate,
)
from labs import theme
from labs.base import Lab, LabParams, LabResult, TryStep, param

GB = 1e9
SWEEP_REPLICAS = (1, 2, 4, 8, 16)
ROUTINGS = ("round-robin", "cache-aware")
PresetId = Literal["chat-system-prompt", "coding-agent", "rag-shared-document", "agent-conversation",
                   "nothing-shared"]
TAG_COLORS = {"shared prefix": theme.BLUE, "conversation": theme.SKY_BLUE, "request's own": theme.ORANGE}


class Params(LabParams):
    """Prefix-cache controls (the common gpu/model/tp/profile come first)."""

    preset: PresetId = param(
        "chat-system-prompt", label="Workload", essential=True,
        choice_labels={k: v.label for k, v in PRESETS.items()},
        help="What requests share, with its token counts; the sliders below override them.")
    shared_tokens: int | None = param(
        None, ge=0, le=131072, scale="log", unit="tokens", label="Shared prefix", essential=True,
        help="Tokens at the start of every prompt that other requests also send. Empty: the workload's own.")
    unique_tokens: int | None = param(
        None, ge=1, le=32768, scale="log", unit="tokens", label="Unique tokens",
        help="Prompt tokens after the shared prefix, new in each request. Empty: the workload's own.")
    hit_rate: float | None = param(
        None, ge=0, le=1, step=0.01, label="Hit rate (what if)", essential=True,
        help="Share of requests that find their prefix cached. Empty: the rate the simulated replicas measure.")
    replicas: int = param(
        4, ge=1, le=16, unit="replicas", label="Replicas", essential=True,
        help="Copies of the model serving the stream, each with its own KV cache.")
    routing: Literal["round-robin", "cache-aware"] = param(
        "round-robin", label="Routing", essential=True,
        help="Round-robin ignores the caches; cache-aware sends a request to the replica holding the longest "
             "part of its prefix, unless that replica is overloaded.")


def workload_of(p: Params) -> Workload:
    """The preset's workload with the user's token counts where given."""
    base = PRESETS[p.preset].workload
    return Workload(
        shared_tokens=base.shared_tokens if p.shared_tokens is None else p.shared_tokens,
        unique_tokens=base.unique_tokens if p.unique_tokens is None else p.unique_tokens,
        output_tokens=base.output_tokens, scope=base.scope,
    )


def run(p: Params) -> LabResult:
    """Cost a hit and a miss, simulate the replicas, and mix the two at the hit rate in force."""
    model, gpu, profile = p.model_spec, p.gpu_spec, p.profile_spec
    work = workload_of(p)
    saving = prefill_saving(model, profile, work.shared_tokens, work.unique_tokens, tp=p.tp, gpu=gpu)
    capacity = kv_capacity_blocks(model, gpu, p.tp)
    kv_per_token = model.kv_bytes_per_token() * kv_heads_fraction(model, p.tp) * p.tp
    sim, sweep, why_not = None, {}, ""
    try:
        sim = simulate(work, p.replicas, p.routing, capacity)
        sweep = {r: [simulate(work, n, r, capacity) for n in SWEEP_REPLICAS] for r in ROUTINGS}
    except ValueError as exc:
        why_not = str(exc)
    if p.hit_rate is not None:
        h, source = p.hit_rate, "what-if"
    elif sim is not None:
        h, source = sim.hit_rate, "simulated"
    else:
        h, source = 0.0, "none: the simulation could not run"

    metrics = {
        "hit_rate": h,
        "hit_rate_source": source,
        "ttft_ms_miss": saving.miss_s * 1e3,
        "ttft_ms_hit": saving.hit_s * 1e3,
        "ttft_ms_mean": saving.mean_s(h) * 1e3,
        "prefill_tokens_saved_fraction": saving.saved_fraction(h),
        "prefill_tokens_saved_fraction_on_hit": saving.saved_fraction_on_hit,
        "prefill_bound_throughput_gain": saving.throughput_gain(h),
        "tokens": {
            "shared": work.shared_tokens, "unique": work.unique_tokens, "prompt": saving.prompt_tokens,
            "reused_on_hit": saving.cached_tokens, "output": work.output_tokens,
        },
        "per_1000_requests": {
            "prefill_pflop_saved": saving.flops_saved(h) / 1e15,
            "gpu_s_saved": saving.gpu_s_saved(h),
            "gpu_s_prefill_without_cache": 1000 * saving.miss_s * saving.gpus,
        },
        "kv_cache": {
            "capacity_gb_per_replica": capacity * BLOCK_TOKENS * kv_per_token / GB,
            "capacity_blocks_per_replica": capacity,
            "kv_bytes_per_token": kv_per_token,
        },
        "profile": {"id": profile.id, "provenance": profile.provenance},
    }
    if sim is not None:
        metrics["simulated"] = _sim_metrics(sim)
    notes = _notes(p, work, saving, sim, h, source, why_not, capacity, kv_per_token)
    figures = {
        "ttft": _ttft_figure(saving, h, source),
        "tokens": _tokens_figure(saving, h),
    }
    if sim is not None:
        figures["replicas"] = _replicas_figure(p, sweep, sim, work)
        figures["occupancy"] = _occupancy_figure(sim, kv_per_token)
    return LabResult(metrics=metrics, figures=figures, notes=notes)


def _sim_metrics(sim: SimResult) -> dict:
    per_replica = {
        f"replica_{j + 1}": hits / n for j, (n, hits) in enumerate(zip(sim.replica_requests, sim.replica_hits)) if n
    }
    return {
        "hit_rate": sim.hit_rate,
        "prefix_tokens_found_fraction": sim.token_hit_rate,
        "replica_hit_rate": per_replica,
        "replicas": sim.replicas,
        "routing": sim.routing,
        "requests": sim.requests,
        "requests_counted": sim.counted,
        "conversations": sim.sessions,
        "blocks_evicted": sim.evictions,
        "spilled_requests": sim.spills,
        "tokens_per_simulated_block": sim.shape.block_tokens,
    }


def _notes(p: Params, work: Workload, saving: PrefillSaving, sim: SimResult | None, h: float, source: str,
           why_not: str, capacity: int, kv_per_token: float) -> list[str]:
    preset = PRESETS[p.preset]
    notes = []
    if why_not:
        notes.append(f"No simulation: {why_not}. The hit rate is {'yours' if p.hit_rate is not None else '0'}.")
    if work.shared_tokens < BLOCK_TOKENS:
        notes.append(
            f"With {work.shared_tokens} shared tokens there is no full {BLOCK_TOKENS}-token block to cache: "
            "a hit costs exactly what a miss does, and nothing is saved at any hit rate.")
    if source == "what-if" and sim is not None:
        notes.append(
            f"Hit rate {h:.0%} is your what-if. The simulated {sim.replicas} replica(s) with {sim.routing} "
            f"routing measured {sim.hit_rate:.0%}; clear the box to use it.")
    elif sim is not None:
        notes.append(
            f"Hit rate {h:.0%}, measured: {sim.counted} requests over {sim.replicas} simulated replica(s), "
            f"{sim.routing} routing. A hit means the whole shared prefix was found; requests that found only "
            f"part of it count as misses (prefix tokens found, partial finds included: {sim.token_hit_rate:.0%}).")
    notes.append(
        "TTFT here is the prefill step alone: a miss prefills all "
        f"{saving.prompt_tokens:,} prompt tokens; a hit reuses {saving.cached_tokens:,} "
        f"(the shared prefix's full {BLOCK_TOKENS}-token blocks) and prefills the other "
        f"{saving.prompt_tokens - saving.cached_tokens:,}, which still attend to all of them. Queueing, "
        "tokenisation and the network, also part of a measured TTFT, are not modelled. The output is the same "
        "either way: only the prompt's K and V are reused.")
    for name, given, own in (("Shared prefix", p.shared_tokens, preset.workload.shared_tokens),
                             ("Unique tokens", p.unique_tokens, preset.workload.unique_tokens)):
        if given is not None and given != own:
            notes.append(f"{name} {given:,} tokens is your setting; {preset.label.lower()} has {own:,} "
                         "(clear the box to use it).")
    notes.append(f"{preset.label}: {preset.source}")
    if sim is not None:
        notes.append(_stream_note(sim, work, capacity, kv_per_token))
    notes.extend(p.source_notes())
    return notes


def _stream_note(sim: SimResult, work: Workload, capacity: int, kv_per_token: float) -> str:
    shape = sim.shape
    if shape.turns:
        stream = (f"{sim.sessions} conversations ({sim.sessions // sim.replicas} per replica), each playing a "
                  f"warm-up turn and then {shape.turns} counted turn{'s' if shape.turns > 1 else ''}; a turn's prompt is the previous turn's "
                  f"prompt and output plus its new tokens (mean shared prefix {shape.mean_shared_tokens:,.0f} "
                  "tokens")
        if shape.mean_shared_tokens > 1.25 * work.shared_tokens:
            stream += (f", more than your {work.shared_tokens:,}: a turn always shares at least the previous "
                       f"turn's {work.unique_tokens + work.output_tokens:,} tokens")
        stream += ")"
    else:
        stream = f"{sim.requests} requests ({sim.requests // sim.replicas} per replica), all counted"
    return (
        f"The simulated stream (seeded): {stream}; {sim.inflight} request(s) per replica run "
        f"at once. Each replica caches {capacity:,} blocks of {BLOCK_TOKENS} tokens "
        f"({capacity * BLOCK_TOKENS * kv_per_token / GB:.1f} GB: 90% of GPU memory less the weights). "
        f"It is a scale model: every length and the cache are divided by {shape.scale}, so one simulated block "
        f"stands for {shape.scale} blocks ({shape.block_tokens:,} tokens) and a request is at most "
        f"{shape.longest_request_blocks} simulated blocks."
    )


def _ttft_figure(saving: PrefillSaving, h: float, source: str) -> dict:
    names = ["miss", "hit", f"mean at {h:.0%} hits"]
    values = [saving.miss_s * 1e3, saving.hit_s * 1e3, saving.mean_s(h) * 1e3]
    trace = {
        "type": "bar", "x": names, "y": values, "marker": {"color": [theme.PREFILL, theme.BLUE, theme.ORANGE]},
        "text": [f"{v:,.1f} ms" for v in values], "textposition": "outside", "showlegend": False,
        "hovertemplate": "%{x}: %{y:,.2f} ms<extra></extra>",
    }
    layout = theme.layout(
        f"TTFT (prefill only) of a {saving.prompt_tokens:,}-token prompt; hit rate {source}",
        "", "ms", yaxis={"rangemode": "tozero"}, height=340,
    )
    return {"data": [trace], "layout": layout}


def _tokens_figure(saving: PrefillSaving, h: float) -> dict:
    names = ["miss", "hit", f"mean at {h:.0%} hits"]
    reused = [0.0, float(saving.cached_tokens), h * saving.cached_tokens]
    computed = [saving.prompt_tokens - r for r in reused]
    traces = [
        {"type": "bar", "x": names, "y": computed, "name": "prefilled (computed)",
         "marker": {"color": theme.PREFILL}, "hovertemplate": "%{x}: %{y:,.0f} tokens computed<extra></extra>"},
        {"type": "bar", "x": names, "y": reused, "name": "reused from the cache",
         "marker": {"color": theme.BLUE}, "hovertemplate": "%{x}: %{y:,.0f} tokens reused<extra></extra>"},
    ]
    layout = theme.layout("Prompt tokens per request: computed vs reused", "", "tokens", barmode="stack",
                          height=340)
    return {"data": traces, "layout": layout}


def _replicas_figure(p: Params, sweep: dict[str, list[SimResult]], sim: SimResult, work: Workload) -> dict:
    colors = {"round-robin": theme.BLACK, "cache-aware": theme.GREEN}
    traces = [
        {"type": "scatter", "mode": "lines+markers", "name": routing, "x": list(SWEEP_REPLICAS),
         "y": [r.hit_rate for r in results], "line": {"color": colors[routing], "width": 2},
         "marker": {"size": 8, "color": colors[routing]},
         "customdata": [r.token_hit_rate for r in results],
         "hovertemplate": f"{routing}, %{{x}} replicas<br>hit rate %{{y:.0%}}<br>prefix tokens found "
                          "%{customdata:.0%}<extra></extra>"}
        for routing, results in sweep.items()
    ]
    if work.scope == "session" and sim.shape.turns:
        n = list(range(1, SWEEP_REPLICAS[-1] + 1))
        traces.append({"type": "scatter", "mode": "lines", "name": "1/N", "x": n, "y": [1 / k for k in n],
                       "line": {"color": theme.GREY, "dash": "dot", "width": 1}, "hoverinfo": "skip"})
    traces.append({
        "type": "scatter", "mode": "markers", "name": f"this setting ({sim.replicas}, {sim.routing})",
        "x": [sim.replicas], "y": [sim.hit_rate],
        "marker": {"size": 16, "symbol": "diamond-open", "color": colors[sim.routing], "line": {"width": 3}},
        "hovertemplate": "this setting: %{y:.0%}<extra></extra>",
    })
    layout = theme.layout(
        "Simulated hit rate against replicas", "replicas (N)", "hit rate (whole prefix found)",
        xaxis={"type": "log", "tickvals": list(SWEEP_REPLICAS), "ticktext": [str(n) for n in SWEEP_REPLICAS]},
        yaxis={"range": [0, 1.05], "tickformat": ".0%"},
    )
    return {"data": traces, "layout": layout}


def _occupancy_figure(sim: SimResult, kv_per_token: float) -> dict:
    per_block_gb = sim.shape.block_tokens * kv_per_token / GB
    names = [f"replica {j + 1}" for j in range(sim.replicas)]
    tags = sorted({t for occ in sim.occupancy for t in occ if t != "empty"})
    traces = [
        {"type": "bar", "x": names, "y": [occ.get(tag, 0) * per_block_gb for occ in sim.occupancy], "name": tag,
         "marker": {"color": TAG_COLORS.get(tag, theme.PURPLE)},
         "hovertemplate": f"%{{x}}: %{{y:.1f}} GB {tag}<extra></extra>"}
        for tag in tags
    ]
    traces.append({"type": "bar", "x": names, "y": [occ["empty"] * per_block_gb for occ in sim.occupancy],
                   "name": "empty", "marker": {"color": "#DDDDDD"},
                   "hovertemplate": "%{x}: %{y:.1f} GB empty<extra></extra>"})
    rates = [f"{hits / n:.0%} hits" if n else "no requests"
             for n, hits in zip(sim.replica_requests, sim.replica_hits)]
    layout = theme.layout(
        f"KV cache of each replica at the end ({sim.routing})", "", "GB", barmode="stack", height=360,
        annotations=[{"x": name, "y": 1, "yref": "paper", "yanchor": "bottom", "text": rate, "showarrow": False}
                     for name, rate in zip(names, rates)],
    )
    return {"data": traces, "layout": layout}


LAB = Lab(
    slug="prefix-cache",
    title="Prefix caching",
    order=3,
    summary="Requests that start with the same text need not prefill it again, if they land where it is cached.",
    params=Params,
    run=run,
    what_you_see=(
        "Requests that start with the same text: a system prompt, tool definitions, a shared document, or an "
        "agent's earlier conversation. With prefix caching the KV blocks of that shared beginning are kept and "
        "reused, so only the new tail is prefilled. The hit rate is the share of requests that land on a GPU "
        "holding the prefix.",
        "Top: the prefill time (TTFT without queueing or network) of one request on a miss, on a hit, and the "
        "mean at the hit rate in force; beside it, how many prompt tokens each prefills and how many it reuses.",
        "The hit rate comes from a simulation: a seeded stream of requests on N replicas, each with a vLLM-style "
        "block cache (16-token blocks named by a hash chain, reference counts, least-recently-used eviction). "
        "The line chart shows the measured hit rate for 1 to 16 replicas under both routings; the bars show "
        "what each replica's KV cache holds at the end. Type a hit rate to ask \"what if\" instead.",
    ),
    try_this=(
        TryStep("Pick Coding agent",
                "Almost the whole 39,186-token prompt is shared: on one replica every turn finds its prefix, and "
                "a hit's TTFT is a small fraction of a miss's.",
                {"preset": "coding-agent", "shared_tokens": None, "unique_tokens": None, "hit_rate": None,
                 "replicas": 1, "routing": "cache-aware"}),
        TryStep("Drop the hit rate to 10%",
                "What round-robin over ten replicas gives a session's prefix (the line chart measures it): the "
                "mean TTFT climbs back towards the miss and the saving shrinks to a tenth.",
                {"preset": "coding-agent", "shared_tokens": None, "unique_tokens": None, "hit_rate": 0.1,
                 "replicas": 10, "routing": "round-robin"}),
        TryStep("Set the shared part to 0",
                "A workload caching cannot help: hit and miss cost the same, and nothing is saved.",
                {"preset": "coding-agent", "shared_tokens": 0, "unique_tokens": None, "hit_rate": None,
                 "replicas": 10, "routing": "round-robin"}),
        TryStep("Route by cache",
                "Back to the coding agent on ten replicas, now sending each turn to the replica that holds its "
                "conversation: the measured hit rate returns close to one replica's.",
                {"preset": "coding-agent", "shared_tokens": None, "unique_tokens": None, "hit_rate": None,
                 "replicas": 10, "routing": "cache-aware"}),
    ),
    misconceptions=(
        ("Prefix caching caches answers.",
         "It caches the K and V tensors of the prompt's prefix. The rest of the prompt is still prefilled and "
         "every output token still decoded; the output is unchanged (vLLM's design doc: it \"won't change model "
         "outputs\"). Caching whole responses is a different feature."),
        ("Round-robin over N replicas gets the same cache hits.",
         "A conversation's prefix is cached where its last turn ran; round-robin lands there about 1/N of the "
         "time. A prompt everyone shares ends up cached on every replica, at N times the memory."),
    ),
)

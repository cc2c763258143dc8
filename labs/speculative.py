"""Speculative decoding lab: the best draft length, its cost, and why the output stays the target's.

A draft model guesses k tokens; the target checks them in one pass. Every
step time comes from ``engine.cost`` at the chosen batch, context, GPU and
tensor-parallel degree (``engine.speculative.step_times``), so the verify
pass is priced for its k + 1 tokens per sequence: free at batch 1, where
decode is bound by reading the weights, and costly at large batch, where it
becomes compute-bound. A seeded draw of rounds shows the token stream, and
speculative sampling on an 8-token toy distribution shows that the output
is distributed as the target's (Leviathan et al. 2023, arXiv 2211.17192).
"""

from __future__ import annotations

from typing import Annotated, Literal

import numpy as np
from pydantic import Field, ValidationInfo, field_validator, model_validator

from engine.memory import GPU_MEMORY_UTILIZATION, memory_budget
from engine.models import MODELS, get_model
from engine.speculative import (
    DRAFT_TOKENS, TYPICAL_ALPHA_SOURCE, allowed_drafts, chi_square_test, draft_distribution,
    leviathan_speedup, simulate_stream, speculative_sample, speedup_curve, step_times, typical_acceptance,
)
from labs import theme
from labs.base import Lab, LabParams, LabResult, TryStep, param

GB = 1e9
TP_CHOICES = (1, 2, 4, 8)
PLAIN_TOKENS_SHOWN = 24  # the stream covers the time plain decoding takes for this many tokens
SAMPLES = 20_000
# An illustrative next-token distribution over 8 tokens (a toy, not a model's output).
TOY_TOKENS = ("the", "a", "of", "to", "and", "in", "is", "it")
TOY_TARGET = np.array([0.22, 0.18, 0.15, 0.13, 0.11, 0.09, 0.07, 0.05])
TARGETS = tuple(t for t in MODELS if allowed_drafts(t))
DraftId = Literal["llama-3.2-1b", "llama-3.2-3b", "llama-3.1-8b"]


class Params(LabParams):
    """Speculative-decoding controls (the common gpu/model/tp/profile come first)."""

    model: str = param("llama-3.1-8b", label="Target model", essential=True, only=TARGETS,
                       help="The model whose output is wanted; a smaller Llama 3 model drafts for it.")
    # validate_default: the default draft must also be checked against a changed target model.
    draft_model: Annotated[DraftId, Field(validate_default=True)] = param(
        "llama-3.2-1b", label="Draft model", essential=True,
        choice_labels={m: MODELS[m].name for m in DraftId.__args__},
        help="The small model that guesses; it must share the target's tokenizer.")
    acceptance_rate: float = param(
        0.7, ge=0, le=0.99, step=0.01, label="Acceptance rate α", essential=True,
        help="Chance the target accepts a guess, given it accepted the ones before it (per token).")
    draft_tokens: int = param(
        4, ge=1, le=16, unit="tokens", label="Draft length k", essential=True,
        help="Tokens the draft guesses each round; the target verifies k + 1 positions.")
    batch: int = param(
        1, ge=1, le=256, scale="log", unit="sequences", label="Batch", essential=True,
        help="Sequences decoding together, each drafting and verifying its own guesses.")
    context_tokens: int = param(
        512, ge=1, le=131072, scale="log", unit="tokens", label="Context",
        help="Tokens already in each sequence's KV cache.")
    seed: int = param(
        0, ge=0, le=1_000_000, label="Random seed",
        help="Seeds the token stream and the sampling histogram: the same seed, the same draw.")

    @field_validator("draft_model")
    @classmethod
    def _draft_fits_target(cls, v: str, info: ValidationInfo) -> str:
        target = info.data.get("model")
        if target is None:  # the model itself was refused; that error names it
            return v
        drafts = allowed_drafts(target)
        if not drafts:
            raise ValueError(
                f"no draft model in the catalog shares {target}'s tokenizer; "
                f"choose a model this lab supports: {', '.join(TARGETS)}")
        if v not in drafts:
            raise ValueError(f"{v} cannot draft for {target}; allowed drafts: {', '.join(drafts)}")
        return v

    @model_validator(mode="after")
    def _weights_fit(self) -> Params:
        target, draft, gpu = self.model_spec, get_model(self.draft_model), self.gpu_spec
        weights = target.weight_bytes() + draft.weight_bytes()
        usable = gpu.memory_bytes * GPU_MEMORY_UTILIZATION
        if weights > usable * self.tp:
            enough = [t for t in TP_CHOICES if weights <= usable * t]
            advice = f"use tp >= {enough[0]}" if enough else "no tp up to 8 holds them on this GPU"
            raise ValueError(
                f"tp: {target.name} + {draft.name} weights need {weights / GB:.1f} GB, more than the "
                f"{usable * self.tp / GB:.1f} GB usable on {self.tp} x {gpu.name}; {advice}")
        return self


def run(p: Params) -> LabResult:
    """Cost the three steps, find the best k, draw a stream of rounds and a sampling histogram."""
    gpu, target, profile = p.gpu_spec, p.model_spec, p.profile_spec
    draft = get_model(p.draft_model)
    alpha, k = p.acceptance_rate, p.draft_tokens
    times = step_times(target, draft, profile, gpu, tp=p.tp, batch=p.batch, context_tokens=p.context_tokens)
    curve = speedup_curve(alpha, times)
    c = times.draft_cost_ratio
    i = k - 1
    e = float(curve.expected_tokens[i])
    levi = leviathan_speedup(alpha, DRAFT_TOKENS, c)
    gemm = profile.rates("gemm")
    ridge = gemm.flops_per_s / gemm.bytes_per_s
    verify_bound = "compute" if times.verify_flop_per_byte[i] >= ridge else "memory"
    typical = typical_acceptance(target, draft)

    stream_rng, sample_rng = (np.random.default_rng(s) for s in np.random.SeedSequence(p.seed).spawn(2))
    stream = simulate_stream(alpha, k, times.draft_step_s, float(times.verify_step_s[i]),
                             PLAIN_TOKENS_SHOWN * times.target_step_s, stream_rng)
    stream_s = stream.accepted.size * float(curve.round_s[i])
    q, beta = draft_distribution(TOY_TARGET, alpha)
    right = np.bincount(speculative_sample(TOY_TARGET, q, SAMPLES, sample_rng), minlength=TOY_TARGET.size)
    wrong = np.bincount(speculative_sample(TOY_TARGET, q, SAMPLES, sample_rng, residual=False),
                        minlength=TOY_TARGET.size)
    fit, misfit = chi_square_test(right, TOY_TARGET), chi_square_test(wrong, TOY_TARGET)

    mem = _memory(p, draft)
    metrics = {
        "draft_cost_ratio": c,
        "expected_tokens_per_step": e,
        "speedup": float(curve.speedup[i]),
        "best_k": curve.best_k,
        "best_speedup": curve.best_speedup,
        "target_step_ms": times.target_step_s * 1e3,
        "draft_step_ms": times.draft_step_s * 1e3,
        "verify_step_ms": float(times.verify_step_s[i]) * 1e3,
        "round_ms": float(curve.round_s[i]) * 1e3,
        "leviathan_speedup": float(levi[i]),
        "verify_cost_in_target_steps": float(times.verify_step_s[i]) / times.target_step_s,
        "verify_flop_per_byte": float(times.verify_flop_per_byte[i]),
        "verify_bound": verify_bound,
        "attainable_ridge_flop_per_byte": ridge,
        "per_user": {
            "plain_tokens_per_s": 1 / times.target_step_s,
            "speculative_tokens_per_s": e / float(curve.round_s[i]),
        },
        "acceptance": {
            "alpha_per_token": alpha,
            "mean_acceptance_length": e,
            "mean_accepted_drafts": e - 1,
            "logged_acceptance_pct": 100 * (e - 1) / k,
            "typical_alpha_for_pair": typical,
        },
        "stream": {
            "rounds": int(stream.accepted.size),
            "tokens": stream.tokens,
            "tokens_per_round": stream.tokens / stream.accepted.size,
            "speedup": stream.tokens / stream_s * times.target_step_s,
        },
        "sampling": {
            "samples": SAMPLES,
            "beta": beta,
            "dof": fit.dof,
            "chi_square": fit.statistic,
            "p_value": fit.p_value,
            "chi_square_without_residual": misfit.statistic,
            "p_value_without_residual": misfit.p_value,
        },
        "memory": mem,
        "profile": {"id": profile.id, "provenance": profile.provenance},
    }
    notes = _notes(p, draft, times, curve, levi, verify_bound, ridge, typical, beta, fit, misfit, mem)
    figures = {
        "speedup": _speedup_figure(p, curve, levi),
        "round_time": _round_figure(p, times, curve),
        "stream": _stream_figure(stream, times.target_step_s),
        "sampling": _sampling_figure(right, wrong, beta, fit, misfit),
    }
    return LabResult(metrics=metrics, figures=figures, notes=notes)


def _memory(p: Params, draft) -> dict:
    """Weights and KV cache of target and draft, each sequence holding context + k tokens."""
    ctx = p.context_tokens + p.draft_tokens
    t = memory_budget(p.model_spec, p.gpu_spec, p.tp, p.batch, ctx)
    d = memory_budget(draft, p.gpu_spec, p.tp, p.batch, ctx)
    weights = t.weights_bytes + d.weights_bytes
    kv = t.kv_cache_bytes + d.kv_cache_bytes
    per_seq = kv / p.batch
    return {
        "weights_gb": weights / GB,
        "kv_cache_gb": kv / GB,
        "required_gb": (weights + kv) / GB,
        "usable_gb": t.usable_bytes / GB,
        "capacity_gb": t.capacity_bytes / GB,
        "fits": weights + kv <= t.usable_bytes,
        "max_batch": max(int((t.usable_bytes - weights) // per_seq), 0),
    }


def _notes(p, draft, times, curve, levi, verify_bound, ridge, typical, beta, fit, misfit, mem) -> list[str]:
    target = p.model_spec
    k, alpha, i = p.draft_tokens, p.acceptance_rate, p.draft_tokens - 1
    e = float(curve.expected_tokens[i])
    verify_ratio = float(times.verify_step_s[i]) / times.target_step_s
    notes = []
    if not mem["fits"]:
        notes.append(
            f"Does not fit: {p.batch} sequences x {p.context_tokens + k:,} tokens need {mem['kv_cache_gb']:.1f} GB "
            f"of KV cache (target + draft) on top of {mem['weights_gb']:.1f} GB of weights, more than the "
            f"{mem['usable_gb']:.1f} GB usable ({GPU_MEMORY_UTILIZATION:.0%} of {mem['capacity_gb']:.0f} GB). "
            f"At most {mem['max_batch']} sequences of this length fit; the times below are for the batch asked for.")
    notes.append(
        f"Speed-up = E x t_target / (k x t_draft + t_verify) = {e:.2f} x {times.target_step_s * 1e3:.2f} ms / "
        f"({k} x {times.draft_step_s * 1e3:.3f} ms + {float(times.verify_step_s[i]) * 1e3:.2f} ms) = "
        f"{float(curve.speedup[i]):.2f}x, with E = (1 - α^(k+1)) / (1 - α) tokens a round, the bonus token "
        f"included (Leviathan et al. 2023). Best k = {curve.best_k} ({curve.best_speedup:.2f}x).")
    notes.append(
        f"Three numbers not to confuse: α = {alpha:.2f} is per guess; a round yields E = {e:.2f} tokens "
        f"(vLLM logs it as 'Mean acceptance length'), i.e. {e - 1:.2f} accepted guesses; vLLM's "
        f"'Avg Draft acceptance rate' (accepted / drafted) would read {100 * (e - 1) / k:.1f}% at k = {k}.")
    if verify_bound == "compute":
        notes.append(
            f"The verify pass carries {p.batch} x {k + 1} = {p.batch * (k + 1):,} tokens at "
            f"{float(times.verify_flop_per_byte[i]):.0f} FLOP/byte, past the attainable ridge of {ridge:.0f}: it is "
            f"compute-bound and costs {verify_ratio:.1f} plain steps. Leviathan's formula, which prices it as one "
            f"step, would promise {float(levi[i]):.2f}x.")
    else:
        notes.append(
            f"The verify pass ({p.batch} x {k + 1} tokens, {float(times.verify_flop_per_byte[i]):.0f} FLOP/byte, "
            f"below the attainable ridge of {ridge:.0f}) is memory-bound: it costs {verify_ratio:.2f} plain steps, "
            f"because it reads the same weights and KV cache once.")
    notes.append(
        f"{draft.name} drafting for {target.name}: c = t_draft / t_target = {times.draft_cost_ratio:.3f}. "
        + ("The draft shares the target's GPU. " if p.tp == 1 else
           f"The draft runs on the same {p.tp} GPUs as the target, split the same way (vLLM's default, SGLang's "
           "behaviour), so it pays its own all-reduces. ")
        + f"Typical α for this pair: {typical:.2f}, an {TYPICAL_ALPHA_SOURCE}")
    floor = f" (this toy draft cannot go below β = {beta:.2f}, the target's top probability)" if beta > alpha else ""
    notes.append(
        f"Same distribution: {SAMPLES:,} tokens by speculative sampling from an 8-token toy target with "
        f"β = Σ min(p, q) = {beta:.2f}{floor}: χ² = {fit.statistic:.1f} on {fit.dof} degrees of freedom, "
        f"p = {fit.p_value:.3g}, consistent with the target. Drawing from p instead of norm(max(0, p − q)) "
        f"after a rejection: χ² = {misfit.statistic:.1f}, p = {misfit.p_value:.3g}: the output is no longer "
        "the target's.")
    notes.extend([*p.source_notes(), f"Draft {draft.name}: {draft.source}."])
    return notes


def _speedup_figure(p: Params, curve, levi) -> dict:
    k = p.draft_tokens
    ks = DRAFT_TOKENS.tolist()
    traces = [
        {"type": "scatter", "x": ks, "y": levi.tolist(), "mode": "lines",
         "name": "Leviathan's formula (verify = 1 step)",
         "line": {"color": theme.GREY, "width": 2, "dash": "dot"},
         "hovertemplate": "k = %{x}: %{y:.2f}x if verifying cost one step<extra></extra>"},
        {"type": "scatter", "x": ks, "y": curve.speedup.tolist(), "mode": "lines+markers",
         "name": f"speed-up at batch {p.batch}", "line": {"color": theme.BLUE, "width": 3},
         "marker": {"size": 6, "color": theme.BLUE},
         "hovertemplate": "k = %{x}: %{y:.2f}x<extra></extra>"},
        {"type": "scatter", "x": [k], "y": [float(curve.speedup[k - 1])], "mode": "markers", "name": f"your k = {k}",
         "marker": {"size": 14, "color": "rgba(0,0,0,0)", "line": {"color": theme.BLACK, "width": 2}},
         "hovertemplate": "your k = %{x}: %{y:.2f}x<extra></extra>"},
        {"type": "scatter", "x": [curve.best_k], "y": [curve.best_speedup], "mode": "markers+text",
         "name": f"best k = {curve.best_k}", "text": [f"best k = {curve.best_k}"], "textposition": "top center",
         "marker": {"size": 18, "color": theme.ORANGE, "symbol": "star", "line": {"color": theme.BLACK, "width": 1}},
         "hovertemplate": "best k = %{x}: %{y:.2f}x<extra></extra>"},
    ]
    layout = theme.layout(
        f"Speed-up against draft length at α = {p.acceptance_rate:.2f}", "Draft length k (tokens)",
        "Speed-up over plain decoding (x)",
        xaxis={"dtick": 1, "range": [0.5, 16.5]}, yaxis={"rangemode": "tozero"},
        shapes=[{"type": "line", "x0": 0.5, "x1": 16.5, "y0": 1, "y1": 1,
                 "line": {"color": theme.BLACK, "width": 1, "dash": "dash"}}],
        annotations=[{"x": 16.5, "y": 1, "xanchor": "right", "yanchor": "bottom", "showarrow": False,
                      "text": "plain decoding"}],
    )
    return {"data": traces, "layout": layout}


def _round_figure(p: Params, times, curve) -> dict:
    ks = DRAFT_TOKENS.tolist()
    draft_ms = (DRAFT_TOKENS * times.draft_step_s * 1e3).tolist()
    verify_ms = (times.verify_step_s * 1e3).tolist()
    plain_ms = (curve.expected_tokens * times.target_step_s * 1e3).tolist()
    traces = [
        {"type": "bar", "x": ks, "y": draft_ms, "name": "draft: k steps", "marker": {"color": theme.ORANGE},
         "hovertemplate": "k = %{x}: drafting %{y:.2f} ms<extra></extra>"},
        {"type": "bar", "x": ks, "y": verify_ms, "name": "verify: one pass over k + 1 tokens",
         "marker": {"color": theme.BLUE}, "hovertemplate": "k = %{x}: verifying %{y:.2f} ms<extra></extra>"},
        {"type": "scatter", "x": ks, "y": plain_ms, "mode": "lines+markers",
         "name": "plain decoding of the same E tokens",
         "line": {"color": theme.BLACK, "width": 2}, "marker": {"size": 5, "color": theme.BLACK},
         "hovertemplate": "k = %{x}: plain decoding needs %{y:.2f} ms<extra></extra>"},
    ]
    layout = theme.layout(
        "Time per round: drafting + verifying, against plain decoding", "Draft length k (tokens)", "ms per round",
        barmode="stack", xaxis={"dtick": 1},
        shapes=[{"type": "rect", "x0": p.draft_tokens - 0.5, "x1": p.draft_tokens + 0.5, "yref": "paper",
                 "y0": 0, "y1": 1, "fillcolor": "rgba(0,0,0,0.06)", "line": {"width": 0}}],
    )
    return {"data": traces, "layout": layout}


def _stream_figure(stream, target_step_s: float) -> dict:
    """Tokens emitted so far against time: plain decoding, the guesses, and what verification kept."""
    k, td, tv = stream.k, stream.draft_step_s, stream.verify_step_s
    rounds = stream.accepted.size
    emitted_before = np.concatenate([[0], np.cumsum(stream.accepted + 1)[:-1]])
    end_ms = (stream.start_s + k * td + tv) * 1e3
    j = np.arange(1, k + 1)
    guess_x = ((stream.start_s[:, None] + j * td) * 1e3).ravel()
    guess_y = (emitted_before[:, None] + j).ravel()
    kept = j[None, :] <= stream.accepted[:, None]
    acc_x = np.broadcast_to(end_ms[:, None], (rounds, k))[kept]
    acc_y = (emitted_before[:, None] + j)[kept]
    own = stream.accepted + 1  # position of the target's token in its round
    fixed = stream.accepted < k
    horizon_ms = PLAIN_TOKENS_SHOWN * target_step_s * 1e3
    plain_x = (np.arange(1, PLAIN_TOKENS_SHOWN + 1) * target_step_s * 1e3).tolist()
    marks = [
        ("plain decoding", plain_x, list(range(1, PLAIN_TOKENS_SHOWN + 1)), theme.BLACK, "circle", 7),
        ("draft's guess", guess_x.tolist(), guess_y.tolist(), theme.GREY, "circle-open", 7),
        ("accepted guess (free token)", acc_x.tolist(), acc_y.tolist(), theme.GREEN, "circle", 9),
        ("target's token replacing the first wrong guess", end_ms[fixed].tolist(),
         (emitted_before + own)[fixed].tolist(), theme.VERMILLION, "diamond", 10),
        ("bonus token (all k accepted)", end_ms[~fixed].tolist(), (emitted_before + own)[~fixed].tolist(),
         theme.BLUE, "star", 12),
    ]
    traces = [
        {"type": "scatter", "x": x, "y": y, "mode": "markers", "name": name,
         "marker": {"color": color, "symbol": symbol, "size": size},
         "hovertemplate": f"{name}<br>%{{x:.2f}} ms, token %{{y}}<extra></extra>"}
        for name, x, y, color, symbol, size in marks
    ]
    layout = theme.layout(
        f"One user's tokens over time (seeded draw, {rounds} rounds)", "time (ms)", "tokens emitted",
        xaxis={"range": [0, max(horizon_ms, float(end_ms[-1])) * 1.02]}, yaxis={"rangemode": "tozero"},
    )
    return {"data": traces, "layout": layout}


def _sampling_figure(right, wrong, beta, fit, misfit) -> dict:
    tokens = list(TOY_TOKENS)
    traces = [
        {"type": "bar", "x": tokens, "y": TOY_TARGET.tolist(), "name": "target distribution p",
         "marker": {"color": theme.GREY}, "hovertemplate": "%{x}: p = %{y:.3f}<extra></extra>"},
        {"type": "bar", "x": tokens, "y": (right / right.sum()).tolist(),
         "name": f"speculative sampling (χ² p = {fit.p_value:.2g})", "marker": {"color": theme.GREEN},
         "hovertemplate": "%{x}: %{y:.3f} of samples<extra></extra>"},
        {"type": "bar", "x": tokens, "y": (wrong / wrong.sum()).tolist(),
         "name": f"without the residual step (χ² p = {misfit.p_value:.2g})", "marker": {"color": theme.VERMILLION},
         "hovertemplate": "%{x}: %{y:.3f} of samples<extra></extra>"},
    ]
    layout = theme.layout(
        f"Same distribution: {SAMPLES:,} speculative samples at β = {beta:.2f}", "token", "share of samples",
        barmode="group",
    )
    return {"data": traces, "layout": layout}


def _typical(target: str, draft: str) -> float:
    return round(typical_acceptance(get_model(target), get_model(draft)), 2)


_BIG = {"gpu": "h100-sxm", "model": "llama-3.1-70b", "tp": 4, "batch": 1, "context_tokens": 512}

LAB = Lab(
    slug="speculative",
    title="Speculative decoding",
    order=4,
    summary="A small model guesses, the big one checks all guesses in one pass: find the draft length that pays, "
            "and see where speculation stops paying.",
    params=Params,
    run=run,
    what_you_see=(
        "Speculative decoding for one user. A small draft model guesses the next few tokens; the big model checks "
        "them all in one pass, which costs about the same as one normal decode step because decode is limited by "
        "reading the weights, not by maths. Accepted guesses are free tokens; the first wrong guess is replaced by "
        "the big model's own token, and when every guess is accepted the same pass yields one bonus token.",
        "Top: the speed-up over plain decoding for every draft length k at the chosen acceptance rate α, with the "
        "best k starred. The dotted line is Leviathan's formula, which prices the check as one decode step at any "
        "batch. Below it, the time of one round split into drafting and verifying, against the time plain "
        "decoding needs for the same expected tokens.",
        "The token stream is one random draw of rounds: grey rings are the draft's guesses, green dots the accepted "
        "ones, vermillion diamonds the big model's corrections, blue stars bonus tokens; black dots are plain "
        "decoding. The last chart samples many tokens by speculative sampling from a toy 8-token distribution: "
        "the output matches the big model's distribution, and stops matching if the residual step is skipped.",
    ),
    try_this=(
        TryStep("70% acceptance: find the best k",
                "Move the draft length: the star marks the best k. Past it each extra guess costs a full draft "
                "step but is seldom reached.",
                {**_BIG, "draft_model": "llama-3.2-1b", "acceptance_rate": 0.7, "draft_tokens": 2}),
        TryStep("Drop acceptance to 40%",
                "Creative writing: the best k shrinks, and drafting 8 tokens is now slower than the best k.",
                {**_BIG, "draft_model": "llama-3.2-1b", "acceptance_rate": 0.4, "draft_tokens": 8}),
        TryStep("Switch to a larger draft",
                f"Llama-3.2-3B guesses a little better (typical α {_typical('llama-3.1-70b', 'llama-3.2-3b')} "
                f"against {_typical('llama-3.1-70b', 'llama-3.2-1b')}, see the notes) but each guess costs more "
                "time: the cost ratio c rises and the curve drops.",
                {**_BIG, "draft_model": "llama-3.2-3b",
                 "acceptance_rate": _typical("llama-3.1-70b", "llama-3.2-3b"), "draft_tokens": 5}),
        TryStep("Raise the batch to 256",
                "256 users on one H100: the verify pass now carries 256 x 9 tokens and is compute-bound, costing "
                "several plain steps, so the speed-up falls below 1, far under the dotted curve that prices "
                "verifying as one step.",
                {"gpu": "h100-sxm", "model": "llama-3.1-8b", "tp": 1, "draft_model": "llama-3.2-1b",
                 "acceptance_rate": 0.6, "draft_tokens": 8, "batch": 256, "context_tokens": 512}),
    ),
    misconceptions=(
        ("Speculative decoding changes the output or its quality.",
         "Accepting with min(1, p/q) and resampling from norm(max(0, p − q)) gives exactly the target's "
         "distribution (Leviathan et al. 2023, Appendix A.1)."),
        ("Speculative decoding always speeds things up.",
         "It spends spare compute to save serial steps; at large batch the verify pass is compute-bound and "
         "rejected guesses are wasted work, so it can be slower than plain decoding."),
        ("A bigger draft model is better.",
         "A higher α is offset by a higher cost ratio c: in Leviathan et al.'s Table 2 T5-small (c = 0.02) beat "
         "T5-large (c = 0.11), 3.4x against 1.7x."),
        ("The logged acceptance rate is α.",
         "vLLM's 'Avg Draft acceptance rate' is accepted / drafted guesses, (E − 1) / k, well below the "
         "per-token α when k is large."),
    ),
)

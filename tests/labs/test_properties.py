"""Property tests over every lab's whole parameter space (issue 9, "bad input").

Strategies are derived from each lab's params schema (``labs.base.params_schema``),
so a new lab is covered the moment it lands in ``labs/``. Every lab must:

* declare every param typed and bounded: a choice list, a number with a min and
  a max, or (the hidden custom_model / custom_gpu texts) a string with a max length;
* answer every valid setting with JSON free of NaN and infinity, under 1 MB,
  with figures shaped ``{"data": [...], "layout": {...}}``;
* report every time (a metric named ``*_ms`` or ``*_s``, rates ``*_per_s``
  included) as a finite number > 0 (>= 0 for time saved).

Lab-specific monotonic laws live in ``LAWS`` (slug -> law functions). Each law
draws a setting, moves one param up, and checks the direction of a metric; the
physics behind each is in its docstring.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.control import reject
from pydantic import ValidationError

from labs import LABS
from labs.base import Lab, LabParams, params_schema

MAX_ANSWER_BYTES = 1_000_000
REL = 1e-9  # float tolerance of the monotonic laws
_QUIET = [HealthCheck.too_slow, HealthCheck.filter_too_much]
PROPERTY_SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=_QUIET)
LAW_SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=_QUIET)


def _numeric_strategy(variant: dict[str, Any], default: Any) -> st.SearchStrategy:
    lo, hi = variant.get("minimum"), variant.get("maximum")
    assert lo is not None and hi is not None, f"unbounded: {variant}"
    edges = st.sampled_from(sorted({lo, hi} | ({default} if isinstance(default, int | float) else set())))
    if variant["type"] == "number":
        return st.one_of(edges, st.floats(lo, hi))
    if hi / max(lo, 1) > 100:  # wide ranges (log sliders): draw small values as often as large ones
        logs = st.floats(0, math.log(hi)).map(lambda x: min(hi, max(lo, round(math.exp(x)))))
        return st.one_of(edges, st.integers(lo, hi), logs)
    return st.one_of(edges, st.integers(lo, hi))


def param_strategy(prop: dict[str, Any], info: dict[str, Any]) -> st.SearchStrategy:
    """Values of one param from its JSON schema ``prop`` and its page description ``info``.

    Choices keep their default half the time: labs refuse some combinations (a draft model must share
    the target's tokenizer, weights must fit the GPUs), and independent draws would hit them too often.
    Hidden params (a user's config.json, GPU figures) keep their default; tests/web/test_bad_input.py
    and the fuzz test send them hostile text. Nullable numbers (``int | None``) draw None too.

    Raises:
        AssertionError: the param is neither a choice nor a bounded number.
    """
    if info.get("hidden"):
        return st.just(info["default"])
    if info["choices"]:
        return st.one_of(st.just(info["default"]), st.sampled_from([c["value"] for c in info["choices"]]))
    strategies = []
    for variant in prop.get("anyOf", [prop]):
        if variant.get("type") == "null":
            strategies.append(st.none())
        elif variant.get("type") in ("integer", "number"):
            strategies.append(_numeric_strategy(variant, prop.get("default")))
        else:
            raise AssertionError(f"param {info['name']}: {variant} is neither a choice nor a bounded number")
    return st.one_of(strategies)


def strategies_of(lab: Lab) -> dict[str, st.SearchStrategy]:
    """One strategy per param of ``lab``."""
    props = lab.params.model_json_schema()["properties"]
    return {info["name"]: param_strategy(props[info["name"]], info) for info in params_schema(lab.params)}


def settings_of(lab: Lab) -> st.SearchStrategy[dict[str, Any]]:
    """Param dicts over the lab's whole space (some may fail its cross-field checks)."""
    return st.fixed_dictionaries(strategies_of(lab))


def draw_params(draw: Callable, lab: Lab) -> LabParams:
    """A valid params model; settings the lab refuses (cross-field checks) are rejected, not failed."""
    try:
        return lab.params.model_validate(draw(settings_of(lab)))
    except ValidationError:
        reject()


def flat_metrics(metrics: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out = {}
    for key, value in metrics.items():
        if isinstance(value, dict):
            out.update(flat_metrics(value, f"{prefix}{key}."))
        else:
            out[prefix + key] = value
    return out


def answer(lab: Lab, params: LabParams) -> dict[str, Any]:
    """The lab's answer as the API sends it, checked for NaN/infinity and size; metrics flattened."""
    result = lab.run(params)
    body = {"params": params.model_dump(mode="json"), "metrics": result.metrics,
            "figures": result.figures, "notes": result.notes}
    text = json.dumps(body, allow_nan=False)  # ValueError on NaN or infinity anywhere
    assert len(text.encode()) <= MAX_ANSWER_BYTES, f"answer is {len(text):,} bytes"
    return {**body, "flat": flat_metrics(result.metrics)}


def vary(draw: Callable, lab: Lab, params: LabParams, name: str) -> LabParams:
    """``params`` with ``name`` moved to a value >= its current one (within the param's bound)."""
    prop = lab.params.model_json_schema()["properties"][name]
    variant = next(v for v in prop.get("anyOf", [prop]) if v.get("type") in ("integer", "number"))
    current = getattr(params, name)
    if current is None:
        reject()
    top = variant["maximum"]
    new = draw(st.integers(current, top) if variant["type"] == "integer" else st.floats(current, top))
    try:
        return lab.params.model_validate({**params.model_dump(), name: new})
    except ValidationError:
        reject()


def non_decreasing(before: float, after: float, what: str) -> None:
    assert after >= before * (1 - REL), f"{what} fell from {before!r} to {after!r}"


# ---- every lab --------------------------------------------------------------------------------------

def _bounded(prop: dict[str, Any]) -> bool:
    if "enum" in prop or "const" in prop:
        return True
    if prop.get("type") in ("integer", "number"):
        return "minimum" in prop and "maximum" in prop
    if prop.get("type") == "string":
        return "maxLength" in prop or "enum" in prop
    if prop.get("type") == "null":
        return True
    variants = prop.get("anyOf", [])
    return bool(variants) and all(_bounded(v) for v in variants)


@pytest.mark.parametrize("slug", list(LABS))
def test_every_param_is_typed_and_bounded(slug):
    """Every property of the params schema admits finitely many values or a bounded range."""
    params = LABS[slug].params
    schema = params.model_json_schema()
    for name, prop in schema["properties"].items():
        assert _bounded(prop) or name in ("gpu", "model", "profile", *_validated_ids(params)), \
            f"{slug}.{name} is unbounded: {prop}"
    strategies_of(LABS[slug])


def _validated_ids(params: type[LabParams]) -> list[str]:
    """String params whose values a validator checks against a catalog (they have choices on the page)."""
    return [p["name"] for p in params_schema(params) if p["choices"] and p["type"] == "string"]


@pytest.mark.parametrize("slug", list(LABS))
def test_answers_are_finite_small_and_times_positive(slug):
    lab = LABS[slug]

    @PROPERTY_SETTINGS
    @given(st.data())
    def check(data):
        out = answer(lab, draw_params(data.draw, lab))
        for key, value in out["flat"].items():
            if key.endswith(("_ms", "_s")):
                assert isinstance(value, int | float) and not isinstance(value, bool), f"{key} = {value!r}"
                assert math.isfinite(value) and value >= 0, f"{key} = {value!r}"
                if "saved" not in key:  # time saved is 0 when nothing is cached; every time spent is > 0
                    assert value > 0, f"{key} = {value!r}"
        for name, figure in out["figures"].items():
            assert isinstance(figure.get("data"), list) and isinstance(figure.get("layout"), dict), name
            assert all("type" in trace for trace in figure["data"]), name

    check()


# ---- lab-specific laws ------------------------------------------------------------------------------

def roofline_decode_step_non_decreasing_in_batch(draw):
    """More sequences in a decode step never make it faster: each adds KV reads and FLOPs (engine/cost.py)."""
    lab = LABS["roofline"]
    p = draw_params(draw, lab)
    q = vary(draw, lab, p, "batch")
    non_decreasing(answer(lab, p)["flat"]["decode.step_ms"], answer(lab, q)["flat"]["decode.step_ms"],
                   f"decode step_ms, batch {p.batch} -> {q.batch}")


def roofline_decode_step_non_decreasing_in_history(draw):
    """A longer history means more KV cache bytes to read in each decode step."""
    lab = LABS["roofline"]
    p = draw_params(draw, lab)
    q = vary(draw, lab, p, "history_tokens")
    non_decreasing(answer(lab, p)["flat"]["decode.step_ms"], answer(lab, q)["flat"]["decode.step_ms"],
                   f"decode step_ms, history {p.history_tokens} -> {q.history_tokens}")


def roofline_tokens_per_s_non_decreasing_in_batch_while_fits(draw):
    """Decode throughput batch / t(batch) never falls with batch while the KV cache fits.

    Each op's time is max(a1 + b1 * batch, a2 + b2 * batch) with a_i >= 0 (roofline of an
    affine count plus launch and n_half terms), so t(batch) / batch is a sum of
    non-increasing terms and tokens/s = batch / t(batch) is non-decreasing.
    """
    lab = LABS["roofline"]
    p = draw_params(draw, lab)
    q = vary(draw, lab, p, "batch")
    after = answer(lab, q)["flat"]
    if not after["memory.fits"]:
        reject()
    non_decreasing(answer(lab, p)["flat"]["decode.tokens_per_s"], after["decode.tokens_per_s"],
                   f"decode tokens_per_s, batch {p.batch} -> {q.batch}")


def roofline_prefill_time_non_decreasing_in_prompt(draw):
    """A longer prompt is more linear-layer FLOPs and quadratically more attention FLOPs."""
    lab = LABS["roofline"]
    p = draw_params(draw, lab)
    q = vary(draw, lab, p, "prompt_tokens")
    non_decreasing(answer(lab, p)["flat"]["prefill.time_ms"], answer(lab, q)["flat"]["prefill.time_ms"],
                   f"prefill time_ms, prompt {p.prompt_tokens} -> {q.prompt_tokens}")


def chunked_decode_step_non_decreasing_in_users(draw):
    """Each streaming user adds a token to the decode step: more KV reads and FLOPs, never less time."""
    lab = LABS["chunked-prefill"]
    p = draw_params(draw, lab)
    q = vary(draw, lab, p, "users")
    non_decreasing(answer(lab, p)["flat"]["decode_step_ms"], answer(lab, q)["flat"]["decode_step_ms"],
                   f"decode_step_ms, users {p.users} -> {q.users}")


def chunked_prefill_never_lengthens_the_longest_stall(draw):
    """Chunking puts at most one chunk (<= the whole prompt) beside the decode tokens of a step, so the
    longest gap a streaming user sees is no longer than with the whole prompt prefilled in one step."""
    lab = LABS["chunked-prefill"]
    flat = answer(lab, draw_params(draw, lab))["flat"]
    non_decreasing(flat["lanes.chunked.max_stall_ms"], flat["lanes.no_chunking.max_stall_ms"],
                   "max_stall_ms, chunked -> no chunking")


def chunked_ttft_non_decreasing_in_prompt(draw):
    """Without chunking the newcomer waits for its whole prefill: more prompt tokens, more FLOPs."""
    lab = LABS["chunked-prefill"]
    p = draw_params(draw, lab)
    q = vary(draw, lab, p, "prompt_tokens")
    key = "lanes.no_chunking.newcomer_ttft_ms"
    non_decreasing(answer(lab, p)["flat"][key], answer(lab, q)["flat"][key],
                   f"{key}, prompt {p.prompt_tokens} -> {q.prompt_tokens}")


def speculative_expected_tokens_in_range_and_rising_with_alpha(draw):
    """E = (1 - alpha^(k+1)) / (1 - alpha) (Leviathan et al. 2023, eq. 1) lies in [1, k + 1] and
    rises with the acceptance rate alpha."""
    lab = LABS["speculative"]
    p = draw_params(draw, lab)
    q = vary(draw, lab, p, "acceptance_rate")
    before, after = answer(lab, p)["flat"], answer(lab, q)["flat"]
    assert 1 <= before["expected_tokens_per_step"] <= p.draft_tokens + 1
    non_decreasing(before["expected_tokens_per_step"], after["expected_tokens_per_step"],
                   f"expected_tokens_per_step, alpha {p.acceptance_rate} -> {q.acceptance_rate}")


def speculative_best_k_is_best(draw):
    """best_speedup is the maximum over k = 1..16, so no chosen k beats it."""
    lab = LABS["speculative"]
    flat = answer(lab, draw_params(draw, lab))["flat"]
    non_decreasing(flat["speedup"], flat["best_speedup"], "speedup -> best_speedup")


def speculative_target_step_non_decreasing_in_context(draw):
    """A longer context means more KV cache bytes read by each target decode step."""
    lab = LABS["speculative"]
    p = draw_params(draw, lab)
    q = vary(draw, lab, p, "context_tokens")
    non_decreasing(answer(lab, p)["flat"]["target_step_ms"], answer(lab, q)["flat"]["target_step_ms"],
                   f"target_step_ms, context {p.context_tokens} -> {q.context_tokens}")


def _with(lab: Lab, params: LabParams, **changes: Any) -> LabParams:
    try:
        return lab.params.model_validate({**params.model_dump(), **changes})
    except ValidationError:
        reject()


def prefix_hit_rate_zero_saves_nothing(draw):
    """With no request finding its prefix cached, nothing is saved and every TTFT is a miss's (DESIGN.md)."""
    lab = LABS["prefix-cache"]
    flat = answer(lab, _with(lab, draw_params(draw, lab), hit_rate=0.0))["flat"]
    assert flat["prefill_tokens_saved_fraction"] == 0
    assert flat["ttft_ms_mean"] == pytest.approx(flat["ttft_ms_miss"], rel=REL)


def prefix_savings_rise_with_hit_rate(draw):
    """A hit prefills only the unshared tokens, so the fraction saved and the mean TTFT's fall grow with
    the hit rate, and a hit is never slower than a miss."""
    lab = LABS["prefix-cache"]
    p = _with(lab, draw_params(draw, lab), hit_rate=draw(st.floats(0, 1)))
    q = vary(draw, lab, p, "hit_rate")
    before, after = answer(lab, p)["flat"], answer(lab, q)["flat"]
    assert before["ttft_ms_hit"] <= before["ttft_ms_miss"] * (1 + REL)
    non_decreasing(before["prefill_tokens_saved_fraction"], after["prefill_tokens_saved_fraction"],
                   f"prefill_tokens_saved_fraction, hit rate {p.hit_rate} -> {q.hit_rate}")
    non_decreasing(after["ttft_ms_mean"], before["ttft_ms_mean"],
                   f"ttft_ms_mean (reversed), hit rate {p.hit_rate} -> {q.hit_rate}")


LAWS: dict[str, list[Callable[[Callable], None]]] = {
    "roofline": [
        roofline_decode_step_non_decreasing_in_batch,
        roofline_decode_step_non_decreasing_in_history,
        roofline_tokens_per_s_non_decreasing_in_batch_while_fits,
        roofline_prefill_time_non_decreasing_in_prompt,
    ],
    "chunked-prefill": [
        chunked_decode_step_non_decreasing_in_users,
        chunked_prefill_never_lengthens_the_longest_stall,
        chunked_ttft_non_decreasing_in_prompt,
    ],
    "speculative": [
        speculative_expected_tokens_in_range_and_rising_with_alpha,
        speculative_best_k_is_best,
        speculative_target_step_non_decreasing_in_context,
    ],
    "prefix-cache": [
        prefix_hit_rate_zero_saves_nothing,
        prefix_savings_rise_with_hit_rate,
    ],
}


@pytest.mark.parametrize("law", [law for slug, laws in LAWS.items() if slug in LABS for law in laws],
                         ids=lambda law: law.__name__)
def test_law(law):
    @LAW_SETTINGS
    @given(st.data())
    def check(data):
        law(data.draw)

    check()

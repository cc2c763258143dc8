"""engine.speculative: expected tokens, step times, speed-up, the stream and speculative sampling.

Formulas: Leviathan, Kalman & Matias 2023, "Fast Inference from Transformers via
Speculative Decoding" (arXiv 2211.17192): E = (1 - a^(k+1)) / (1 - a) (eq. 1),
S = E / (k c + 1) (Theorem 3.8), correctness in Appendix A.1.
"""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.calibration import resolve_profile
from engine.hardware import GPUS, get_gpu
from engine.memory import memory_budget
from engine.models import get_model
from engine.speculative import (
    DRAFT_TOKENS, DRAFTS, allowed_drafts, chi_square_sf, chi_square_test, draft_distribution,
    expected_tokens, leviathan_speedup, logged_acceptance_rate, mean_accepted_drafts, simulate_stream,
    speculative_sample, speedup_curve, step_times, typical_acceptance,
)

TOY = np.array([0.22, 0.18, 0.15, 0.13, 0.11, 0.09, 0.07, 0.05])


def times(target="llama-3.1-8b", draft="llama-3.2-1b", gpu="h100-sxm", tp=1, batch=1, context_tokens=512):
    g = get_gpu(gpu)
    return step_times(get_model(target), get_model(draft), resolve_profile("datasheet", g), g,
                      tp=tp, batch=batch, context_tokens=context_tokens)


def fits(target, draft, gpu, tp):
    g = get_gpu(gpu)
    need = get_model(target).weight_bytes() + get_model(draft).weight_bytes()
    return need + memory_budget(get_model(target), g, tp, 1, 512).kv_cache_bytes <= 0.9 * g.memory_bytes * tp


# ---- formulas, by hand ----------------------------------------------------------

def test_expected_tokens_by_hand():
    """a = 0.7, k = 5: (1 - 0.7^6) / 0.3 = (1 - 0.117649) / 0.3 = 2.941170; a = 0: one token (the target's);
    a = 0.5, k = 1: (1 - 0.25) / 0.5 = 1.5."""
    assert expected_tokens(0.7, 5) == pytest.approx(2.941170, abs=1e-6)
    assert expected_tokens(0.0, 7) == 1.0
    assert expected_tokens(0.5, 1) == pytest.approx(1.5)


def test_three_acceptance_figures_differ():
    """a = 0.7, k = 5: mean accepted drafts E - 1 = 1.941170; vLLM's logged rate (E - 1) / k = 0.388234,
    not 0.7 (vllm/v1/spec_decode/metrics.py: accepted / drafted)."""
    assert mean_accepted_drafts(0.7, 5) == pytest.approx(1.941170, abs=1e-6)
    assert logged_acceptance_rate(0.7, 5) == pytest.approx(0.388234, abs=1e-6)
    assert logged_acceptance_rate(0.7, 1) == pytest.approx(0.7)  # they agree only at k = 1


@pytest.mark.parametrize(("alpha", "k", "speed"), [
    (0.6, 2, 1.96), (0.7, 3, 2.53), (0.8, 2, 2.44), (0.8, 5, 3.69), (0.9, 2, 2.71), (0.9, 10, 6.86),
])
def test_leviathan_table_1_speeds_at_zero_cost(alpha, k, speed):
    """Leviathan et al. 2023, Table 1 (c = 0): e.g. a = 0.6, k = 2: (1 - 0.216) / 0.4 = 1.96."""
    assert leviathan_speedup(alpha, k, 0.0) == pytest.approx(speed, abs=0.006)


def test_leviathan_best_k_at_c_005_is_5_or_6():
    """c = 0.05, a = 0.7: S(4) = 0.83193 / (0.3 x 1.20) = 2.3109, S(5) = 0.882351 / 0.375 = 2.35294,
    S(6) = 0.917646 / 0.39 = 2.35294, S(7) = 0.942352 / 0.405 = 2.32679: the peak is flat across 5 and 6."""
    s = leviathan_speedup(0.7, DRAFT_TOKENS, 0.05)
    assert s[3] == pytest.approx(2.3109, abs=1e-4)
    assert s[4] == pytest.approx(2.35294, abs=1e-5) and s[5] == pytest.approx(2.35294, abs=1e-5)
    assert int(DRAFT_TOKENS[np.argmax(s)]) in (5, 6)


def test_alpha_must_be_below_one():
    with pytest.raises(ValueError):
        expected_tokens(1.0, 3)


@given(st.floats(0, 0.99), st.integers(1, 16))
def test_expected_tokens_is_one_plus_the_sum_of_powers(alpha, k):
    """E = 1 + a + a^2 + ... + a^k: guess i is kept only if guesses 1..i all are; between 1 and k + 1;
    and the logged rate never exceeds a."""
    e = float(expected_tokens(alpha, k))
    assert e == pytest.approx(1 + sum(alpha ** i for i in range(1, k + 1)), rel=1e-9)
    assert 1 <= e <= k + 1
    assert float(logged_acceptance_rate(alpha, k)) <= alpha + 1e-12


@given(st.floats(0.01, 0.98), st.integers(1, 15))
def test_expected_tokens_grows_with_alpha_and_k(alpha, k):
    assert expected_tokens(alpha, k + 1) >= expected_tokens(alpha, k)  # equal once alpha^(k+1) underflows
    assert expected_tokens(alpha + 0.01, k) > expected_tokens(alpha, k)


# ---- step times ----------------------------------------------------------------------

@pytest.mark.parametrize(("target", "draft", "gpu", "tp"), [
    ("llama-3.1-8b", "llama-3.2-1b", "h100-sxm", 1),
    ("llama-3.1-70b", "llama-3.2-1b", "h100-sxm", 2),
    ("llama-3.1-70b", "llama-3.2-3b", "h200", 2),
    ("llama-3.1-70b", "llama-3.1-8b", "b200", 1),
    ("llama-3.1-70b", "llama-3.2-3b", "mi300x", 8),
])
def test_batch_1_matches_leviathan_within_5_percent(target, draft, gpu, tp):
    """At batch 1 decode reads the weights once whether it scores 1 or k + 1 tokens, so t_verify ~ t_target
    and E t_target / (k t_draft + t_verify) ~ E / (k c + 1) (Leviathan Theorem 3.8), over a grid of a and k."""
    t = times(target, draft, gpu, tp)
    c = t.draft_cost_ratio
    for alpha in (0.0, 0.2, 0.4, 0.6, 0.7, 0.8, 0.9, 0.99):
        ours = speedup_curve(alpha, t).speedup
        np.testing.assert_allclose(ours, leviathan_speedup(alpha, DRAFT_TOKENS, c), rtol=0.05)


@pytest.mark.parametrize(("target", "draft", "gpu", "tp"), [
    ("llama-3.1-70b", "llama-3.2-1b", "h100-sxm", 2),  # c = 0.044
    ("llama-3.1-70b", "llama-3.2-1b", "h100-sxm", 4),  # c = 0.064
    ("llama-3.1-70b", "llama-3.2-1b", "h200", 2),  # c = 0.054
    ("llama-3.1-70b", "llama-3.2-3b", "b200", 1),  # c = 0.061
    ("llama-3.1-70b", "llama-3.2-3b", "mi300x", 1),  # c = 0.056
])
def test_cost_ratio_near_005_gives_best_k_5_or_6_at_alpha_07(target, draft, gpu, tp):
    """Issue 5: a = 0.7 with c near 0.05 peaks at k = 5 or 6; at a = 0.4 the best k is smaller and
    k = 8 is slower than it (fewer guesses survive, each still costs a draft step)."""
    t = times(target, draft, gpu, tp)
    assert 0.04 <= t.draft_cost_ratio <= 0.065
    high, low = speedup_curve(0.7, t), speedup_curve(0.4, t)
    assert high.best_k in (5, 6)
    assert low.best_k < high.best_k
    assert low.speedup[8 - 1] < low.best_speedup


@pytest.mark.parametrize(("gpu", "tp"), [
    (g, tp) for g in GPUS for tp in (1, 2, 4, 8) if fits("llama-3.1-70b", "llama-3.1-8b", g, tp)
])
@pytest.mark.parametrize("batch", [1, 64])
def test_a_larger_draft_has_a_larger_cost_ratio(gpu, tp, batch):
    """Llama-3.2-1B < 3B < Llama-3.1-8B drafting for Llama-3.1-70B: more weights to read each draft step."""
    c = [times("llama-3.1-70b", d, gpu, tp, batch).draft_cost_ratio for d in DRAFTS["llama-3.1-70b"]]
    assert c[0] < c[1] < c[2]


def test_batch_256_verify_is_compute_bound_and_speculation_loses():
    """H100, Llama-3.1-8B + 3.2-1B, 512 tokens of context, k = 8, a = 0.6, batch 256.
    Verify: 256 x 9 = 2,304 tokens x 2 x 6.98e9 linear weights = 32 TFLOP, / 794.5 TFLOP/s = 41 ms of
    matmuls alone, against a ~13 ms plain step (16 GB of weights + 17 GB of KV at ~2.8 TB/s).
    E = (1 - 0.6^9) / 0.4 = 2.475 tokens a round cannot pay for ~3 plain steps of verify plus 8 draft steps."""
    t = times(batch=256)
    s = speedup_curve(0.6, t)
    g = resolve_profile("datasheet", get_gpu("h100-sxm")).rates("gemm")
    assert t.verify_flop_per_byte[8 - 1] > g.flops_per_s / g.bytes_per_s
    assert t.verify_step_s[8 - 1] > 3 * t.target_step_s
    assert s.speedup[8 - 1] < 1
    one = times(batch=1)  # at batch 1 the same verify costs about one plain step, and speculation pays
    assert one.verify_step_s[8 - 1] < 1.05 * one.target_step_s
    assert speedup_curve(0.6, one).best_speedup > 1.3


def test_step_times_grow_with_k_and_the_draft_is_cheaper():
    t = times(batch=32)
    assert np.all(np.diff(t.verify_step_s) > 0)
    assert t.verify_step_s[0] >= t.target_step_s > t.draft_step_s > 0


@given(st.floats(0, 0.99), st.sampled_from([1, 3, 17, 256]), st.sampled_from([1, 100, 4096, 131072]))
def test_speedup_is_positive_and_finite(alpha, batch, ctx):
    s = speedup_curve(alpha, times(batch=batch, context_tokens=ctx))
    assert np.all(np.isfinite(s.speedup)) and np.all(s.speedup > 0)
    assert s.best_speedup == s.speedup.max() and 1 <= s.best_k <= 16


# ---- draft pairs and their typical alpha --------------------------------------------

def test_drafts_share_the_targets_tokenizer():
    assert allowed_drafts("llama-3.1-8b") == ("llama-3.2-1b", "llama-3.2-3b")
    assert allowed_drafts("qwen2.5-7b") == ()
    for target, drafts in DRAFTS.items():
        for d in drafts:
            assert get_model(d).vocab_size == get_model(target).vocab_size == 128256
            assert get_model(d).param_count < get_model(target).param_count


def test_typical_alpha_follows_leviathan_table_3():
    """Interpolated in log size ratio between LaMDA 137B's 2B (0.71) and 8B (0.74) drafts:
    1B/70B (ratio 0.0175, just above 2B/137B = 0.0146) sits just above 0.71; 8B/70B (0.114) is past the
    8B row (0.058) and is held at 0.74."""
    target = get_model("llama-3.1-70b")
    one, three, eight = (typical_acceptance(target, get_model(d)) for d in DRAFTS["llama-3.1-70b"])
    assert 0.71 < one < three < 0.74
    assert eight == pytest.approx(0.74)


# ---- the stream ----------------------------------------------------------------------------

def test_stream_is_seeded_and_averages_e_tokens_a_round():
    """200,000 rounds at a = 0.7, k = 4: mean tokens a round -> E = (1 - 0.7^5) / 0.3 = 2.7731."""
    a = simulate_stream(0.7, 4, 1e-3, 5e-3, 1e3, np.random.default_rng(7))
    b = simulate_stream(0.7, 4, 1e-3, 5e-3, 1e3, np.random.default_rng(7))
    np.testing.assert_array_equal(a.accepted, b.accepted)
    assert a.accepted.size == 1e3 // 9e-3
    assert a.tokens / a.accepted.size == pytest.approx(2.7731, rel=0.01)


def test_stream_extremes():
    rng = np.random.default_rng(0)
    assert simulate_stream(0.0, 5, 1e-3, 1e-2, 1.0, rng).accepted.max() == 0
    assert simulate_stream(1.0, 5, 1e-3, 1e-2, 1.0, rng).accepted.min() == 5


# ---- speculative sampling ----------------------------------------------------------------

@pytest.mark.parametrize("beta", [0.3, 0.6, 0.9])
def test_draft_distribution_has_the_asked_acceptance(beta):
    q, reached = draft_distribution(TOY, beta)
    assert reached == beta
    assert q.sum() == pytest.approx(1)
    assert np.minimum(TOY, q).sum() == pytest.approx(beta)


def test_draft_distribution_floor_is_the_top_probability():
    q, reached = draft_distribution(TOY, 0.05)
    assert reached == pytest.approx(0.22)
    assert q[0] == pytest.approx(1.0)


@pytest.mark.parametrize("beta", [0.3, 0.6, 0.9])
def test_speculative_sampling_keeps_the_target_distribution(beta):
    """Issue 5: 20,000 tokens pass Pearson's chi-square test against p (fixed seed, 7 dof, p > 0.01),
    and fail it (p < 1e-6) when rejections draw from p instead of norm(max(0, p - q))."""
    q, _ = draft_distribution(TOY, beta)
    rng = np.random.default_rng(2023)
    right = np.bincount(speculative_sample(TOY, q, 20_000, rng), minlength=8)
    wrong = np.bincount(speculative_sample(TOY, q, 20_000, rng, residual=False), minlength=8)
    assert chi_square_test(right, TOY).p_value > 0.01
    assert chi_square_test(wrong, TOY).p_value < 1e-6


def test_without_the_residual_the_output_is_min_p_q_plus_the_rejected_share_of_p():
    """Accept: min(p, q)(x); reject (prob 1 - beta), then draw from p: (1 - beta) p(x). The sampler without
    the residual matches that mixture, so the test above fails for the reason we think it does."""
    q, beta = draft_distribution(TOY, 0.6)
    expected = np.minimum(TOY, q) + (1 - beta) * TOY
    wrong = np.bincount(speculative_sample(TOY, q, 20_000, np.random.default_rng(5), residual=False), minlength=8)
    assert chi_square_test(wrong, expected).p_value > 0.01


def test_identical_draft_is_always_accepted():
    assert np.array_equal(
        speculative_sample(TOY, TOY, 1000, np.random.default_rng(1)),
        speculative_sample(TOY, TOY, 1000, np.random.default_rng(1), residual=False),
    )


# ---- chi-square -------------------------------------------------------------------------------

@pytest.mark.parametrize("x", [0.1, 1.0, 3.0, 10.0, 40.0])
def test_chi_square_sf_closed_forms(x):
    """dof 2: exp(-x/2); dof 4: exp(-x/2)(1 + x/2); dof 1: erfc(sqrt(x/2)) (chi-square survival functions)."""
    assert chi_square_sf(x, 2) == pytest.approx(math.exp(-x / 2), rel=1e-10)
    assert chi_square_sf(x, 4) == pytest.approx(math.exp(-x / 2) * (1 + x / 2), rel=1e-10)
    assert chi_square_sf(x, 1) == pytest.approx(math.erfc(math.sqrt(x / 2)), rel=1e-9)


def test_chi_square_sf_table_values():
    """NIST/SEMATECH e-Handbook, table 1.3.6.7.4: upper critical values for 7 dof are 14.067 (0.05) and
    18.475 (0.01)."""
    assert chi_square_sf(14.067, 7) == pytest.approx(0.05, abs=1e-4)
    assert chi_square_sf(18.475, 7) == pytest.approx(0.01, abs=1e-4)
    assert chi_square_sf(0.0, 7) == 1.0


def test_chi_square_statistic_by_hand():
    """Counts (30, 70) against (0.5, 0.5): expected 50 each, (20^2 + 20^2) / 50 = 16, 1 dof."""
    r = chi_square_test([30, 70], [0.5, 0.5])
    assert r.statistic == pytest.approx(16.0) and r.dof == 1
    assert r.p_value == pytest.approx(math.erfc(math.sqrt(8)), rel=1e-9)

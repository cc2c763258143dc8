"""Speculative decoding: tokens per round, step times, speed-up, a token stream, and sampling.

A round of speculative decoding (Leviathan, Kalman & Matias 2023, "Fast
Inference from Transformers via Speculative Decoding", ICML, arXiv
2211.17192; called gamma there, k here):

1. the draft model runs k decode steps, guessing k tokens;
2. the target model scores all k + 1 prefixes in one pass (the verify step:
   k + 1 new tokens per sequence over its cached context);
3. guess i is accepted with probability min(1, p/q); at the first rejection
   one token is sampled from norm(max(0, p - q)); if all k are accepted the
   target's last position gives one more (the bonus token).

With i.i.d. per-token acceptance alpha, a round yields on average
E = (1 - alpha^(k+1)) / (1 - alpha) tokens (bonus included; Leviathan eq. 1).
The per-user speed-up over plain decoding is

    S = E x t_target / (k x t_draft + t_verify),

with every time costed by :func:`engine.cost.step_cost` at the batch, context,
GPU and tensor-parallel degree asked for. At batch 1, t_verify ~ t_target and
S reduces to Leviathan's (1 - alpha^(k+1)) / ((1 - alpha)(k c + 1)) with
c = t_draft / t_target. At large batch the verify step's B (k + 1) tokens make
it compute-bound, and its time grows with k + 1 (science.md F.4).

Three numbers that are often confused (vLLM ``vllm/v1/spec_decode/metrics.py``):

* alpha: probability that a guess is accepted given the ones before it were;
* mean acceptance length: tokens per round, E (vLLM logs "Mean acceptance
  length" = 1 + accepted / drafts, bonus included); mean accepted drafts = E - 1;
* "Avg Draft acceptance rate" as vLLM logs it: accepted / drafted = (E - 1) / k,
  which is smaller than alpha whenever k > 1.

The draft runs on the same tensor-parallel group as the target, split the same
way: vLLM's default when ``draft_tensor_parallel_size`` is unset (it allows 1 or
the target's degree) and SGLang's behaviour.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from engine.calibration import Profile
from engine.cost import step_cost
from engine.hardware import GPU
from engine.models import ModelConfig

MAX_DRAFT_TOKENS = 16
DRAFT_TOKENS = np.arange(1, MAX_DRAFT_TOKENS + 1)

# Leviathan et al. 2023, Table 3, LaMDA 137B target, empirical alpha at temperature 1:
# (draft parameters, alpha). The closest published pairs to a 1B-8B draft for a 70B target.
LAMDA_TARGET_PARAMS = 137e9
LAMDA_DRAFT_ALPHA = ((100e6, 0.57), (2e9, 0.71), (8e9, 0.74))
TYPICAL_ALPHA_SOURCE = (
    "assumption: interpolated by draft/target size ratio (log scale) in Leviathan et al. 2023, Table 3, "
    "LaMDA 137B at temperature 1 (100M draft: 0.57, 2B: 0.71, 8B: 0.74); held at the last row beyond it. "
    "No published alpha for this Llama pair was found; real alpha depends on the task and temperature."
)

# Draft models in the catalog that may draft for a target: they must share its tokenizer.
# Llama 3.1 and 3.2 share one tokenizer of 128,256 tokens (their config.json vocab_size);
# any smaller Llama 3.x model may draft (issue 5's pairs, plus 3B for 8B so that "a larger
# draft" can be tried from the lab's default target).
DRAFTS: dict[str, tuple[str, ...]] = {
    "llama-3.1-70b": ("llama-3.2-1b", "llama-3.2-3b", "llama-3.1-8b"),
    "llama-3.1-8b": ("llama-3.2-1b", "llama-3.2-3b"),
}


def allowed_drafts(target_id: str) -> tuple[str, ...]:
    """Catalog ids of the drafts offered for ``target_id`` (empty when none shares its tokenizer)."""
    return DRAFTS.get(target_id, ())


def typical_acceptance(target: ModelConfig, draft: ModelConfig) -> float:
    """A labelled-assumption alpha for a draft/target pair (see ``TYPICAL_ALPHA_SOURCE``).

    Interpolates alpha linearly in log10(draft params / target params) between
    the LaMDA 137B rows of Leviathan et al. Table 3; clamped to the first and
    last rows outside them.
    """
    ratio = draft.param_count / target.param_count
    xs = [math.log10(p / LAMDA_TARGET_PARAMS) for p, _ in LAMDA_DRAFT_ALPHA]
    ys = [a for _, a in LAMDA_DRAFT_ALPHA]
    return float(np.interp(math.log10(ratio), xs, ys))


# ---- expected tokens and the three acceptance figures ------------------------

def expected_tokens(alpha, k):
    """Tokens a round yields on average, bonus included: (1 - alpha^(k+1)) / (1 - alpha).

    Leviathan et al. 2023, eq. 1 (i.i.d. acceptance). Broadcasts; alpha in
    [0, 1), k >= 0. Equals k + 1 in the limit alpha -> 1.

    Raises:
        ValueError: alpha outside [0, 1).
    """
    a = np.asarray(alpha, dtype=float)
    if np.any((a < 0) | (a >= 1)):
        raise ValueError("alpha must be in [0, 1)")
    return (1 - a ** (np.asarray(k, dtype=float) + 1)) / (1 - a)


def mean_accepted_drafts(alpha, k):
    """Accepted guesses per round, E - 1 = alpha (1 - alpha^k) / (1 - alpha)."""
    return expected_tokens(alpha, k) - 1


def logged_acceptance_rate(alpha, k):
    """Accepted / drafted tokens, the "Avg Draft acceptance rate" vLLM logs: (E - 1) / k, in [0, 1)."""
    return mean_accepted_drafts(alpha, k) / np.asarray(k, dtype=float)


def leviathan_speedup(alpha, k, c):
    """Leviathan et al. 2023's walltime speed-up, (1 - alpha^(k+1)) / ((1 - alpha)(k c + 1)).

    Assumes the target scores k + 1 tokens in the time of one step, whatever the batch.
    """
    return expected_tokens(alpha, k) / (np.asarray(k, dtype=float) * c + 1)


# ---- step times ----------------------------------------------------------------

@dataclass(frozen=True)
class SpecTimes:
    """Step times of one speculative setting, seconds; verify arrays run over k = 1..16.

    Attributes:
        target_step_s: one plain decode step of the target (q = 1 per sequence).
        draft_step_s: one decode step of the draft model (q = 1 per sequence).
        verify_step_s: [16] the target scoring k + 1 tokens per sequence, k = 1..16.
        verify_flop_per_byte: [16] that verify step's arithmetic intensity.
        target_flop_per_byte: the plain step's arithmetic intensity.
    """

    target_step_s: float
    draft_step_s: float
    verify_step_s: np.ndarray
    verify_flop_per_byte: np.ndarray
    target_flop_per_byte: float

    @property
    def draft_cost_ratio(self) -> float:
        """c = t_draft / t_target (Leviathan et al. 2023, section 3.4)."""
        return self.draft_step_s / self.target_step_s


def step_times(
    target: ModelConfig, draft: ModelConfig, profile: Profile, gpu: GPU, *,
    tp: int, batch: int, context_tokens: int,
) -> SpecTimes:
    """Cost the target step, the draft step and the verify step for k = 1..16 with engine.cost.

    ``batch`` sequences, each with ``context_tokens`` already cached, decode
    together; the draft uses the same ``tp`` GPUs. The k draft steps of a
    round are each costed at ``context_tokens`` (their extra k - 1 cached
    tokens are a rounding error against the context).

    Raises:
        ValueError: batch < 1, context_tokens < 0, or a tp that does not divide
            either model's heads (from ``step_cost``).
    """
    if batch < 1:
        raise ValueError("batch must be >= 1")
    q = np.concatenate([[1], DRAFT_TOKENS + 1])[:, None]  # row 0: plain step; rows 1..16: verify k + 1
    target_cost = step_cost(target, profile, q, [[context_tokens]], sampled_tokens=q,
                            seq_counts=[[batch]], tp=tp, gpu=gpu)
    draft_cost = step_cost(draft, profile, [1], [context_tokens], seq_counts=[batch], tp=tp, gpu=gpu)
    t = target_cost.total_time_s
    ai = target_cost.flop_per_byte
    return SpecTimes(
        target_step_s=float(t[0]), draft_step_s=float(draft_cost.total_time_s),
        verify_step_s=t[1:], verify_flop_per_byte=ai[1:], target_flop_per_byte=float(ai[0]),
    )


@dataclass(frozen=True)
class SpeedupCurve:
    """Speed-up over plain decoding for k = 1..16 at one alpha.

    Attributes:
        expected_tokens: [16] E(alpha, k).
        round_s: [16] k t_draft + t_verify, seconds.
        speedup: [16] E t_target / round_s.
        best_k: the k of the largest speed-up (the smallest such k on ties).
        best_speedup: that speed-up.
    """

    expected_tokens: np.ndarray
    round_s: np.ndarray
    speedup: np.ndarray
    best_k: int
    best_speedup: float


def speedup_curve(alpha: float, times: SpecTimes) -> SpeedupCurve:
    """S(k) = E(alpha, k) t_target / (k t_draft + t_verify(k)) for k = 1..16, and its best k."""
    e = expected_tokens(alpha, DRAFT_TOKENS)
    round_s = DRAFT_TOKENS * times.draft_step_s + times.verify_step_s
    s = e * times.target_step_s / round_s
    i = int(np.argmax(s))
    return SpeedupCurve(expected_tokens=e, round_s=round_s, speedup=s,
                        best_k=int(DRAFT_TOKENS[i]), best_speedup=float(s[i]))


# ---- a seeded stream of rounds ---------------------------------------------------

@dataclass(frozen=True)
class Stream:
    """Rounds of speculative decoding for one user, drawn at random.

    Attributes:
        accepted: [rounds] guesses accepted in each round (0..k); the round
            then adds one target token: the correction of guess accepted + 1,
            or the bonus token when all k were accepted.
        start_s: [rounds] when each round starts, seconds.
        k, draft_step_s, verify_step_s: the round's shape.
    """

    accepted: np.ndarray
    start_s: np.ndarray
    k: int
    draft_step_s: float
    verify_step_s: float

    @property
    def tokens(self) -> int:
        """Tokens the stream emitted."""
        return int(self.accepted.sum() + self.accepted.size)


def simulate_stream(alpha: float, k: int, draft_step_s: float, verify_step_s: float,
                    horizon_s: float, rng: np.random.Generator) -> Stream:
    """Draw rounds until ``horizon_s`` seconds are filled: each guess accepted with probability alpha
    while all before it were (the i.i.d. model behind E).

    Raises:
        ValueError: alpha outside [0, 1], k < 1, or non-positive times.
    """
    if not 0 <= alpha <= 1 or k < 1 or draft_step_s <= 0 or verify_step_s <= 0 or horizon_s <= 0:
        raise ValueError("need 0 <= alpha <= 1, k >= 1 and positive times")
    round_s = k * draft_step_s + verify_step_s
    rounds = max(int(horizon_s // round_s), 1)
    hits = rng.random((rounds, k)) < alpha
    accepted = np.cumprod(hits, axis=1).sum(axis=1)
    return Stream(accepted=accepted, start_s=np.arange(rounds) * round_s, k=k,
                  draft_step_s=draft_step_s, verify_step_s=verify_step_s)


# ---- speculative sampling keeps the target's distribution ---------------------------

def draft_distribution(p, beta: float) -> tuple[np.ndarray, float]:
    """An over-confident draft q for target p whose acceptance sum(min(p, q)) is ``beta``.

    q = (1 - lam) p + lam * onehot(argmax p): the draft puts extra weight on
    the target's favourite token, as small models tend to. Then
    sum(min(p, q)) = 1 - lam (1 - p_max), so lam = (1 - beta) / (1 - p_max).
    beta below p_max is out of reach and is raised to p_max.

    Returns:
        (q, beta actually reached).
    """
    p = np.asarray(p, dtype=float)
    top = int(np.argmax(p))
    beta = float(np.clip(beta, p[top], 1.0))
    lam = (1 - beta) / (1 - p[top])
    q = (1 - lam) * p
    q[top] += lam
    return q, beta


def speculative_sample(p, q, n: int, rng: np.random.Generator, *, residual: bool = True) -> np.ndarray:
    """n tokens by speculative sampling of one position (Leviathan et al. 2023, Algorithm 1).

    Draw x ~ q; accept if r <= p(x)/q(x), r ~ U(0, 1); otherwise draw from
    norm(max(0, p - q)). The output is distributed as p (their Appendix A.1).
    With ``residual=False`` a rejection draws from p instead: the common
    mistake, whose output is min(p, q) + (1 - beta) p, not p.

    Returns:
        int array [n] of token indices.
    """
    p = np.asarray(p, dtype=float)
    q = np.asarray(q, dtype=float)
    guess = _draw(q, rng.random(n))
    accept = rng.random(n) * q[guess] <= p[guess]
    fallback = np.maximum(p - q, 0.0) if residual else p
    if fallback.sum() <= 0:  # q == p: every guess is accepted
        return guess
    redraw = _draw(fallback / fallback.sum(), rng.random(n))
    return np.where(accept, guess, redraw)


def _draw(probs: np.ndarray, u: np.ndarray) -> np.ndarray:
    cdf = np.cumsum(probs)
    return np.minimum(np.searchsorted(cdf, u * cdf[-1], side="right"), probs.size - 1)


@dataclass(frozen=True)
class ChiSquare:
    """Pearson's goodness-of-fit test of counts against expected probabilities.

    Attributes:
        statistic: sum (observed - expected)^2 / expected.
        dof: bins - 1.
        p_value: P(chi-square with dof degrees of freedom >= statistic).
    """

    statistic: float
    dof: int
    p_value: float


def chi_square_test(counts, probs) -> ChiSquare:
    """Pearson's chi-square test of ``counts`` against ``probs`` (all bins must have probs > 0).

    Raises:
        ValueError: mismatched shapes, a non-positive probability, or no counts.
    """
    counts = np.asarray(counts, dtype=float)
    probs = np.asarray(probs, dtype=float)
    if counts.shape != probs.shape or np.any(probs <= 0) or counts.sum() <= 0:
        raise ValueError("need matching shapes, positive probabilities and some counts")
    expected = counts.sum() * probs / probs.sum()
    stat = float(((counts - expected) ** 2 / expected).sum())
    dof = counts.size - 1
    return ChiSquare(statistic=stat, dof=dof, p_value=chi_square_sf(stat, dof))


def chi_square_sf(x: float, dof: int) -> float:
    """Survival function of the chi-square distribution: Q(dof / 2, x / 2).

    Q is the regularized upper incomplete gamma function, computed by its
    power series for x < a + 1 and by its continued fraction otherwise
    (Press et al., Numerical Recipes, 3rd ed., section 6.2, gser / gcf).

    Raises:
        ValueError: dof < 1 or x < 0.
    """
    if dof < 1 or x < 0:
        raise ValueError("need dof >= 1 and x >= 0")
    a, z = dof / 2, x / 2
    if z == 0:
        return 1.0
    log_prefactor = a * math.log(z) - z - math.lgamma(a)
    if z < a + 1:  # series for P(a, z)
        term = total = 1 / a
        n = a
        for _ in range(10_000):
            n += 1
            term *= z / n
            total += term
            if abs(term) < abs(total) * 1e-15:
                break
        return float(min(max(1 - total * math.exp(log_prefactor), 0.0), 1.0))
    tiny = 1e-300  # modified Lentz for the continued fraction of Q(a, z)
    b = z + 1 - a
    c = 1 / tiny
    d = 1 / b
    h = d
    for i in range(1, 10_000):
        an = -i * (i - a)
        b += 2
        d = an * d + b
        d = tiny if abs(d) < tiny else d
        c = b + an / c
        c = tiny if abs(c) < tiny else c
        d = 1 / d
        delta = d * c
        h *= delta
        if abs(delta - 1) < 1e-15:
            break
    return float(min(max(math.exp(log_prefactor) * h, 0.0), 1.0))

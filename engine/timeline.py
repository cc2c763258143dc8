"""Step-level timeline of one decode GPU when a long prompt arrives (the chunked-prefill lab).

A GPU runs continuous batching (Orca, vLLM): one step after another, each
step costed by :func:`engine.cost.step_cost` for exactly the batch it
carries. At t = 0, ``users`` (U) sequences are decoding, each with
``history_tokens`` (H) tokens cached, and a newcomer's prompt of
``prompt_tokens`` (P) tokens arrives at a step boundary. Three lanes:

* ``no_chunking``: the next step prefills all P tokens and carries no decode
  tokens (prefill-first scheduling, vLLM V0's default; Sarathi-Serve,
  arXiv 2403.02310, calls the result a *generation stall*). That step samples
  the newcomer's first token; then all U + 1 decode together.
* ``chunked``: Sarathi-Serve's stall-free batching. Step i carries the U
  decode tokens plus chunk i of the prompt, whose attention reads the KV of
  the earlier chunks. As in Sarathi (arXiv 2308.16369: "splits a prefill
  request into equal sized chunks"), the prompt is cut into n = ceil(P / C)
  chunks of P / n tokens (sizes differ by at most one, none above C), so no
  step carries a runt tail chunk that pays a whole weight read for a few
  tokens. The last chunk's step samples the first token.
* ``disaggregated`` (DistServe arXiv 2401.09670, Splitwise arXiv 2311.18677):
  a prefill GPU of the same type (and the same TP degree) prefills the
  prompt; its KV cache crosses a link; the newcomer joins the decode batch
  at the first decode-step boundary after the KV has arrived, and its first
  token (sampled on the prefill GPU) streams from there. Decode steps never
  carry prefill work.

Every lane's batches are arrays [steps, 2]: entry 0 stands for the U
identical existing users (``seq_counts`` = U), entry 1 for the newcomer
(q = 0 when absent). Contexts grow by one token per decode step. Each lane
runs until a common end time: the latest first token of the three lanes plus
a tail (``TAIL_STEPS`` decode steps or ``TAIL_FRACTION`` of that time,
whichever is longer), so the lanes share one time axis.

Only GPU time is modelled: a real TTFT adds queueing, tokenisation and
network time (vLLM's benchmark and NVIDIA NIM count them).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.calibration import Profile
from engine.cost import kv_heads_fraction, step_cost
from engine.hardware import GPU
from engine.models import ModelConfig

GIGA = 1e9
TAIL_STEPS = 10
TAIL_FRACTION = 0.15
LANES = ("no_chunking", "chunked", "disaggregated")


@dataclass(frozen=True)
class Link:
    """A link the KV cache can cross between a prefill and a decode GPU.

    Attributes:
        id: preset id (lowercase, hyphenated).
        name: what to show a user.
        short: a few words for a figure's title.
        bytes_per_s: bandwidth one way, per GPU, bytes/s.
        source: where the figure comes from.
    """

    id: str
    name: str
    short: str
    bytes_per_s: float
    source: str


LINKS: dict[str, Link] = {link.id: link for link in (
    Link("nvlink-4", "NVLink 4, 450 GB/s each way", "NVLink 4", 450 * GIGA,
         "18 NVLink 4 links, 900 GB/s both ways per H100/H200 (NVIDIA datasheet; MLPerf v4.1 H200 "
         "system JSON '18x 4th Gen NVLink, 900GB/s'); half of it each way"),
    Link("nvlink-5", "NVLink 5, 900 GB/s each way", "NVLink 5", 900 * GIGA,
         "NVLink 5: 1.8 TB/s both ways per B200 (glennklockwood.com/garden/processors/B200); half each way"),
    Link("ib-400g", "One 400 Gb/s InfiniBand NIC, 50 GB/s", "400 Gb/s InfiniBand", 50 * GIGA,
         "H100/H200 HGX nodes carry one 400 Gb/s NIC per GPU (MLPerf v4.1 H200 system JSON "
         "'10x 400Gbe Infiniband'); 400 Gb/s / 8 = 50 GB/s"),
    Link("pcie-5", "PCIe 5.0 x16, 64 GB/s each way", "PCIe 5", 64 * GIGA,
         "PCIe Gen5 x16: 128 GB/s both ways (PCI-SIG figure, as quoted in NVIDIA's H100 PCIe datasheet); "
         "half each way"),
    Link("ethernet-100g", "100 Gb Ethernet, 12.5 GB/s", "100 Gb Ethernet", 12.5 * GIGA, "100 Gb/s / 8 = 12.5 GB/s"),
)}


@dataclass(frozen=True)
class Lane:
    """The steps one scheduling policy runs on the decode GPU.

    Times are seconds from the newcomer's arrival. Arrays of one lane have
    ``steps`` entries, in order.

    Attributes:
        step_start_s: start of each step.
        step_s: duration of each step.
        prefill_tokens: newcomer prompt tokens each step carries (0: none).
        existing_decode: whether each step carries the U existing users' tokens.
        newcomer_token_s: times the newcomer writes a token; [0] is its first (TTFT).
        prefill_steps: decode-GPU steps from the arrival to the newcomer's
            first token: 1 without chunking, ceil(P / C) chunked, and on the
            disaggregated lane the decode-only steps before the newcomer joins.
    """

    step_start_s: np.ndarray
    step_s: np.ndarray
    prefill_tokens: np.ndarray
    existing_decode: np.ndarray
    newcomer_token_s: np.ndarray
    prefill_steps: int

    @property
    def existing_token_s(self) -> np.ndarray:
        """Times at which every existing user writes a token (all U together): ends of decode-carrying steps."""
        return (self.step_start_s + self.step_s)[self.existing_decode]

    @property
    def ttft_s(self) -> float:
        """The newcomer's time to first token (GPU part only), seconds."""
        return float(self.newcomer_token_s[0])

    @property
    def max_stall_s(self) -> float:
        """Longest gap between two tokens of an existing user, counting from their token at t = 0, seconds."""
        return float(np.diff(self.existing_token_s, prepend=0.0).max())

    @property
    def existing_tpot_s(self) -> float:
        """Existing users' mean gap between tokens while the newcomer is being prefilled, seconds.

        With token times T_0 = 0 < T_1 < ..., the gaps that start before the
        newcomer's first token are gaps 1..K, K = #{k >= 1: T_(k-1) < TTFT};
        their mean is T_K / K.
        """
        t = self.existing_token_s
        k = int(np.searchsorted(t, self.ttft_s, side="left")) + 1  # gap k starts at T_(k-1) < TTFT
        k = min(k, t.size)
        return float(t[k - 1] / k)


@dataclass(frozen=True)
class Timeline:
    """The three lanes on one time axis, and the figures they share.

    Attributes:
        decode_step_s: one decode step of the U users at H tokens, no newcomer.
        prefill_s: the P-token prefill alone (the no-chunking lane's step, the prefill GPU's work).
        kv_transfer_bytes: the prompt's KV cache, whole (``ModelConfig.kv_cache_bytes(P)``).
        kv_transfer_s: per-GPU share of it over the link; TP ranks send their shares in parallel.
        end_s: the end of the window every lane is simulated to.
        lanes: ``no_chunking``, ``chunked``, ``disaggregated``.
    """

    decode_step_s: float
    prefill_s: float
    kv_transfer_bytes: float
    kv_transfer_s: float
    end_s: float
    lanes: dict[str, Lane]


def kv_transfer(model: ModelConfig, prompt_tokens: int, link: Link, tp: int = 1) -> tuple[float, float]:
    """Bytes of the prompt's KV cache and seconds to send it over ``link``.

    Size = KV bytes per token x P (sliding-window layers hold at most their
    window). Under TP each rank holds ``kv_heads_fraction`` of it and sends
    its share over its own link (one NIC per GPU), so time = size x fraction
    / bandwidth (science.md D.2). No per-message latency and no overlap with
    the prefill compute (Splitwise and Mooncake overlap it layer by layer, so
    this is an upper bound).

    Returns:
        (bytes, seconds).
    """
    size = float(model.kv_cache_bytes(prompt_tokens))
    return size, size * kv_heads_fraction(model, tp) / link.bytes_per_s


def simulate(
    model: ModelConfig,
    profile: Profile,
    *,
    users: int,
    history_tokens: int,
    prompt_tokens: int,
    chunk_tokens: int,
    link: Link,
    tp: int = 1,
    gpu: GPU | None = None,
) -> Timeline:
    """Simulate the three lanes (see the module docstring).

    Args:
        model, profile: what ``step_cost`` needs.
        users: U, existing decoding users, >= 1.
        history_tokens: H, tokens each has cached at t = 0, >= 0.
        prompt_tokens: P, the newcomer's prompt, >= 1.
        chunk_tokens: C, prompt tokens per chunk on the chunked lane, >= 1.
        link: the disaggregated lane's KV link.
        tp: tensor-parallel degree of the decode GPU (and of the prefill GPU).
        gpu: needed when tp > 1 (its interconnect carries the all-reduces).

    Returns:
        A :class:`Timeline`; each lane holds the steps that start before ``end_s`` (the last
        one ends at or after it).

    Raises:
        ValueError: a count out of range, or what ``step_cost`` raises (tp that
            does not divide the heads, tp > 1 without a gpu).
    """
    if users < 1 or history_tokens < 0 or prompt_tokens < 1 or chunk_tokens < 1:
        raise ValueError("need users >= 1, history_tokens >= 0, prompt_tokens >= 1, chunk_tokens >= 1")
    U, H, P, C = users, history_tokens, prompt_tokens, chunk_tokens

    def cost(q, c) -> np.ndarray:
        return step_cost(model, profile, q, c, seq_counts=[U, 1], tp=tp, gpu=gpu).total_time_s

    decode_step_s, prefill_s = (float(t) for t in cost([[1, 0], [0, P]], [[H, 0], [0, 0]]))
    kv_bytes, kv_s = kv_transfer(model, P, link, tp)

    # Prefill phase of each lane: steps up to the newcomer's first token.
    n = -(-P // C)
    i = np.arange(n)
    chunk_q = P // n + (i < P % n)
    chunk_offset = np.cumsum(chunk_q) - chunk_q
    chunk_s = cost(np.stack([np.ones(n), chunk_q], 1), np.stack([H + i, chunk_offset], 1))

    ready_s = prefill_s + kv_s
    m_max = int(np.ceil(ready_s / decode_step_s)) + 1  # decode steps only grow, so these reach ready_s
    j = np.arange(m_max)
    alone_s = cost(np.stack([np.ones(m_max), np.zeros(m_max)], 1), np.stack([H + j, np.zeros(m_max)], 1))
    m = int(np.searchsorted(np.cumsum(alone_s), ready_s, side="left")) + 1
    alone_s = alone_s[:m]

    phases = {  # (step durations, prefill tokens, carries decodes, existing users' tokens so far)
        "no_chunking": (np.array([prefill_s]), np.array([P]), np.array([False]), 0),
        "chunked": (chunk_s, chunk_q, np.ones(n, bool), n),
        "disaggregated": (alone_s, np.zeros(m, int), np.ones(m, bool), m),
    }
    ttft = {name: float(d.sum()) for name, (d, *_) in phases.items()}
    latest = max(ttft.values())
    end_s = latest + max(TAIL_STEPS * decode_step_s, TAIL_FRACTION * latest)

    # Then all U + 1 users decode until end_s. Contexts only grow, so no step is shorter than a lane's first
    # joined step, and k = ceil(time left / that step) + 1 steps reach end_s.
    decoded = np.array([phase[3] for phase in phases.values()])
    first_joined_s = cost(np.ones((decoded.size, 2)), np.stack([H + decoded, np.full(decoded.size, P)], 1))
    lanes = {}
    for (name, (d, pre, carries, done)), d_join in zip(phases.items(), first_joined_s):
        k = int(np.ceil((end_s - ttft[name]) / d_join)) + 1
        j = np.arange(k)
        joined = cost(np.ones((k, 2)), np.stack([H + done + j, P + j], 1))
        durations = np.concatenate([d, joined])
        starts = np.concatenate([[0.0], np.cumsum(durations[:-1])])
        keep = max(int(np.searchsorted(starts, end_s, side="left")), d.size)
        ends = starts[:keep] + durations[:keep]
        lanes[name] = Lane(
            step_start_s=starts[:keep],
            step_s=durations[:keep],
            prefill_tokens=np.concatenate([pre, np.zeros(k, int)])[:keep],
            existing_decode=np.concatenate([carries, np.ones(k, bool)])[:keep],
            newcomer_token_s=ends[d.size - 1:],  # the first token ends the prefill phase
            prefill_steps=len(d),
        )
    return Timeline(decode_step_s=decode_step_s, prefill_s=prefill_s, kv_transfer_bytes=kv_bytes,
                    kv_transfer_s=kv_s, end_s=end_s, lanes=lanes)

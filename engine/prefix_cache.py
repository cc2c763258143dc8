"""Prefix caching: what a cached shared prefix saves, and how often a request finds it.

Two halves:

* **Cost** (:func:`prefill_saving`): a prompt of S shared + U unique tokens.
  On a miss the whole prompt is prefilled (q = S + U new tokens over c = 0
  cached); on a hit the full 16-token blocks of the shared part are reused,
  so only the rest is prefilled, attending to the reused context
  (q = S + U - c over c = 16 floor(S / 16) cached). Both are one step of
  ``engine.cost.step_cost``. At hit rate h the mean prefill time is
  h t_hit + (1 - h) t_miss.
* **Simulation** (:func:`simulate`): a seeded request stream fed to N
  replicas, each a :class:`engine.block_cache.BlockCache`, routed round-robin
  or cache-aware. The hit rate comes out of the caches, not out of a formula.

Workload shapes (``scope``):

* ``global``: every request starts with the same S tokens (a system prompt,
  a shared document), then U tokens of its own.
* ``session``: requests belong to conversations. Turn t's prompt is turn
  t - 1's prompt and output plus U new tokens, so the prefix a turn needs was
  last extended on the replica that served the turn before it (science.md
  E.3: session-specific prefixes).

The stream is a scale model, to keep a run to a few milliseconds of Python:
every length and the cache are divided by the same factor k, so one simulated
block stands for k blocks of 16 tokens and the longest request is at most
``MAX_BLOCKS`` simulated blocks. Which request hits depends on whether its
blocks are still cached, which depends on lengths relative to the cache, and
those ratios are kept (up to rounding to whole simulated blocks).
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Literal

import numpy as np

from engine.block_cache import BLOCK_TOKENS, BlockCache, CacheFullError, chain_hashes
from engine.calibration import Profile
from engine.cost import kv_heads_fraction, step_cost
from engine.hardware import GPU
from engine.memory import memory_budget
from engine.models import ModelConfig

Scope = Literal["global", "session"]
Routing = Literal["round-robin", "cache-aware"]

MAX_BLOCKS = 16
"""Longest request of a simulated stream, in simulated blocks (sets the scale factor k)."""
TURNS = 3
"""Counted turns per conversation (each conversation also plays one warm-up turn first)."""
SESSIONS_PER_REPLICA = 4
"""At most this many conversations per replica; fewer when they would not fit the cache."""
SESSION_FILL = 0.75
"""Conversations per replica fill at most this share of one replica's cache."""
REQUESTS_PER_REPLICA = 12
"""Requests per replica in a ``global`` stream."""
INFLIGHT_PER_REPLICA = 2
"""Requests running at once, per replica (fewer if the cache cannot hold that many of the longest):
request i finishes when request i + 2N arrives."""
MAX_REPLICAS = 16
"""Most replicas a simulation takes; streams are built for this many once and cut to size."""
LOAD_BOUND = 2.0
"""Cache-aware routing spills to the least loaded replica when the chosen one runs more than
this many times the mean running requests per replica."""


# ---- workloads and presets ------------------------------------------------


@dataclass(frozen=True)
class Workload:
    """Token counts of a request stream.

    Attributes:
        shared_tokens: S, the prefix a request can find cached.
        unique_tokens: U, the prompt tokens after it (new to every request).
        output_tokens: tokens each request generates (their KV is cached too).
        scope: ``global`` (one prefix for everyone) or ``session`` (a conversation's own).
    """

    shared_tokens: int
    unique_tokens: int
    output_tokens: int
    scope: Scope

    def __post_init__(self) -> None:
        if self.shared_tokens < 0 or self.unique_tokens < 1 or self.output_tokens < 0:
            raise ValueError("need shared_tokens >= 0, unique_tokens >= 1, output_tokens >= 0")


@dataclass(frozen=True)
class Preset:
    """A named workload with where its numbers come from."""

    id: str
    label: str
    workload: Workload
    source: str


PRESETS: dict[str, Preset] = {p.id: p for p in (
    Preset(
        "chat-system-prompt", "Chat with a shared system prompt",
        Workload(shared_tokens=1500, unique_tokens=150, output_tokens=300, scope="global"),
        "Illustration: a 1,500-token system prompt before a 150-token user message, 300 tokens out. "
        "The hit fraction is about system prompt / prompt length (science.md E.4).",
    ),
    Preset(
        "coding-agent", "Coding agent",
        Workload(shared_tokens=38186, unique_tokens=1000, output_tokens=344, scope="session"),
        "Prompt 39,186 tokens and output 344: the average ISL and OSL of NVIDIA Dynamo's synthetic coding "
        "trace (ai-dynamo/dynamo recipes/deepseek-v32-fp4/README.md). Almost all of it is the agent's own "
        "append-only context (Manus, 'Context Engineering for AI Agents': input:output about 100:1); "
        "the 1,000 new tokens per step (a tool result) are an illustration. The same README gives that trace "
        "a shared prefix ratio of 57.2% and a block- and token-level hit rate of 44%.",
    ),
    Preset(
        "rag-shared-document", "RAG over a shared document",
        Workload(shared_tokens=8000, unique_tokens=200, output_tokens=250, scope="global"),
        "Illustration: an 8,000-token document placed before a 200-token question. The document is "
        "reusable only because it comes first (block hashing, science.md E.4).",
    ),
    Preset(
        "agent-conversation", "Agent continuing its own conversation",
        Workload(shared_tokens=12000, unique_tokens=400, output_tokens=120, scope="session"),
        "Illustration: 12,000 tokens of the session's own history, 400 new tokens per turn, 120 out "
        "(about Manus's 100:1 input:output). The prefix belongs to one session (science.md E.3).",
    ),
    Preset(
        "nothing-shared", "Nothing shared",
        Workload(shared_tokens=0, unique_tokens=2000, output_tokens=300, scope="global"),
        "Illustration: 2,000-token prompts with nothing in common.",
    ),
)}


# ---- cost of a hit and a miss ---------------------------------------------


def cached_prefix_tokens(shared_tokens: int, block_tokens: int = BLOCK_TOKENS) -> int:
    """Tokens of the shared prefix a hit reuses: its full blocks only (vLLM caches full blocks)."""
    return block_tokens * (int(shared_tokens) // block_tokens)


@dataclass(frozen=True)
class PrefillSaving:
    """Prefill of one request on a miss and on a hit (times in seconds, FLOPs summed over the TP group).

    Attributes:
        prompt_tokens: S + U.
        cached_tokens: tokens a hit reuses, 16 floor(S / 16).
        miss_s, hit_s: prefill step time on a miss and on a hit.
        miss_flops, hit_flops: FLOPs of those steps, all GPUs of the group.
        gpus: GPUs per replica (tensor parallelism).
    """

    prompt_tokens: int
    cached_tokens: int
    miss_s: float
    hit_s: float
    miss_flops: float
    hit_flops: float
    gpus: int

    def mean_s(self, hit_rate: float) -> float:
        """Mean prefill time at hit rate h: h t_hit + (1 - h) t_miss."""
        return hit_rate * self.hit_s + (1 - hit_rate) * self.miss_s

    @property
    def saved_fraction_on_hit(self) -> float:
        """Share of the prompt's tokens a hit does not prefill."""
        return self.cached_tokens / self.prompt_tokens

    def saved_fraction(self, hit_rate: float) -> float:
        """Share of all prompt tokens not prefilled at hit rate h: h x cached / prompt."""
        return hit_rate * self.saved_fraction_on_hit

    def flops_saved(self, hit_rate: float, requests: int = 1000) -> float:
        """Prefill FLOPs ``requests`` requests skip at hit rate h."""
        return requests * hit_rate * (self.miss_flops - self.hit_flops)

    def gpu_s_saved(self, hit_rate: float, requests: int = 1000) -> float:
        """GPU-seconds of prefill ``requests`` requests skip: time saved x GPUs per replica."""
        return requests * hit_rate * (self.miss_s - self.hit_s) * self.gpus

    def throughput_gain(self, hit_rate: float) -> float:
        """Requests/s gain when prefill is the bottleneck: t_miss / mean prefill time."""
        return self.miss_s / self.mean_s(hit_rate)


def prefill_saving(
    model: ModelConfig, profile: Profile, shared_tokens: int, unique_tokens: int,
    *, tp: int = 1, gpu: GPU | None = None,
) -> PrefillSaving:
    """Cost the prefill of S + U tokens on a miss (q = S + U, c = 0) and a hit (q = S + U - c, c cached).

    Time is the prefill step alone; queueing, tokenisation and the network,
    also part of a measured TTFT (science.md G), are not modelled.

    Raises:
        ValueError: unique_tokens < 1 or shared_tokens < 0 (and step_cost's errors).
    """
    if unique_tokens < 1 or shared_tokens < 0:
        raise ValueError("need unique_tokens >= 1 and shared_tokens >= 0")
    prompt = shared_tokens + unique_tokens
    cached = cached_prefix_tokens(shared_tokens)
    cost = step_cost(model, profile, [[prompt], [prompt - cached]], [[0], [cached]], tp=tp, gpu=gpu)
    t, f = cost.total_time_s, cost.total_flops * tp
    return PrefillSaving(prompt_tokens=prompt, cached_tokens=cached, miss_s=float(t[0]), hit_s=float(t[1]),
                         miss_flops=float(f[0]), hit_flops=float(f[1]), gpus=tp)


def kv_capacity_blocks(model: ModelConfig, gpu: GPU, tp: int = 1) -> int:
    """16-token KV blocks one replica holds: (usable memory - weights) / (16 x KV bytes per token).

    Usable memory is vLLM's 0.9 of the device (``engine.memory``); KV bytes per
    token count every layer in full (sliding windows are not credited). 0 when
    the weights alone do not fit.
    """
    mem = memory_budget(model, gpu, tp, 1, 1)
    per_token = model.kv_bytes_per_token() * kv_heads_fraction(model, tp) * tp
    return max(int((mem.usable_bytes - mem.weights_bytes) // (BLOCK_TOKENS * per_token)), 0)


# ---- the simulated stream -------------------------------------------------


@dataclass(frozen=True)
class StreamShape:
    """How a workload is laid out in simulated blocks.

    Attributes:
        scale: k, 16-token blocks per simulated block.
        block_tokens: tokens per simulated block (16 k).
        capacity_blocks: one replica's cache in simulated blocks.
        prefix_blocks: ``global``: the shared prefix; ``session``: a conversation's history
            before its warm-up turn.
        new_blocks, output_blocks: a request's own prompt tail and output.
        turns: counted turns per conversation (``session``), 0 for ``global``.
    """

    scale: int
    block_tokens: int
    capacity_blocks: int
    prefix_blocks: int
    new_blocks: int
    output_blocks: int
    turns: int

    @property
    def longest_request_blocks(self) -> int:
        """Blocks of the longest request (prompt and output)."""
        per_turn = self.new_blocks + self.output_blocks
        return self.prefix_blocks + max(self.turns + 1, 1) * per_turn

    @property
    def mean_shared_tokens(self) -> float:
        """Mean shared prefix of the counted requests, tokens."""
        if self.turns == 0:
            return float(self.prefix_blocks * self.block_tokens)
        per_turn = self.new_blocks + self.output_blocks
        return (self.prefix_blocks + (self.turns + 1) / 2 * per_turn) * self.block_tokens


def stream_shape(workload: Workload, capacity_blocks: int) -> StreamShape:
    """Lay a workload out in simulated blocks (see the module docstring on the scale factor).

    ``session``: with T counted turns, a conversation's history before turn t
    is h0 + t (U + O); h0 = S - (T + 1)(U + O) / 2 makes the counted turns'
    mean prefix S (T is reduced, down to 1, when S is too short for that).
    Every non-empty segment keeps at least one simulated block.
    """
    S, U, O = workload.shared_tokens, workload.unique_tokens, workload.output_tokens
    if S < BLOCK_TOKENS:
        S = 0  # less than one full block: nothing can be cached
    turns = 0
    history = S
    if workload.scope == "session" and S > 0:
        turns = int(np.clip(2 * S // (U + O) - 1, 1, TURNS))
        history = max(S - (turns + 1) * (U + O) / 2, 0.0)
    longest = history + max(turns + 1, 1) * (U + O)
    scale = max(1, math.ceil(longest / (BLOCK_TOKENS * MAX_BLOCKS)))
    bt = BLOCK_TOKENS * scale

    def blocks(tokens: float, at_least: int) -> int:
        return max(round(tokens / bt), at_least if tokens > 0 else 0)

    return StreamShape(
        scale=scale, block_tokens=bt, capacity_blocks=capacity_blocks // scale,
        prefix_blocks=blocks(history, 1) if workload.scope == "global" else round(history / bt),
        new_blocks=blocks(U, 1), output_blocks=round(O / bt), turns=turns,
    )


@dataclass(frozen=True, slots=True)
class _Request:
    key: int  # conversation id (``session``) or request id (``global``)
    hashes: tuple[int, ...]  # prompt then output blocks
    tags: tuple[str, ...]  # what each block holds
    shared_blocks: int  # leading blocks a hit must find
    prompt_blocks: int
    counted: bool  # False for a conversation's warm-up turn


_TAGS = {"global": ("shared prefix", "request's own"), "session": ("conversation", "conversation")}


@lru_cache(maxsize=64)
def _global_chains(prefix_blocks: int, own_blocks: int) -> tuple[tuple[int, ...], ...]:
    """Block hashes of the ``global`` stream's requests: the shared prefix, then each request's own blocks."""
    prefix = chain_hashes((0, 0, i) for i in range(prefix_blocks))
    parent = prefix[-1] if prefix else 0
    return tuple(
        tuple(prefix + chain_hashes(((2, r, i) for i in range(own_blocks)), parent))
        for r in range(REQUESTS_PER_REPLICA * MAX_REPLICAS)
    )


@lru_cache(maxsize=64)
def _conversation_chains(blocks: int) -> tuple[tuple[int, ...], ...]:
    """Block hashes of every conversation the ``session`` stream can hold, ``blocks`` long each."""
    return tuple(
        tuple(chain_hashes((1, s, i) for i in range(blocks))) for s in range(SESSIONS_PER_REPLICA * MAX_REPLICAS)
    )


def _requests(workload: Workload, shape: StreamShape, replicas: int, seed: int) -> tuple[list[_Request], int]:
    """The seeded stream for ``replicas`` <= MAX_REPLICAS; returns (requests in arrival order, conversations)."""
    rng = np.random.default_rng(seed)
    u, o = shape.new_blocks, shape.output_blocks
    if workload.scope == "global" or shape.turns == 0:
        g = shape.prefix_blocks
        tags = (_TAGS["global"][0],) * g + (_TAGS["global"][1],) * (u + o)
        chains = _global_chains(g, u + o)[: REQUESTS_PER_REPLICA * replicas]
        return [_Request(r, chain, tags, g, g + u, True) for r, chain in enumerate(chains)], 0
    per_replica = int(np.clip(SESSION_FILL * shape.capacity_blocks // shape.longest_request_blocks,
                              1, SESSIONS_PER_REPLICA))
    sessions = per_replica * replicas
    turns = shape.turns + 1  # warm-up turn first
    d = u + o
    conversations = _conversation_chains(shape.prefix_blocks + turns * d)
    out = []
    for t in range(turns):  # in rounds: every conversation sends its next turn, in a random order
        shared = shape.prefix_blocks + t * d
        tags = (_TAGS["session"][0],) * (shared + d)
        for s in rng.permutation(sessions).tolist():
            out.append(_Request(s, conversations[s][: shared + d], tags, shared, shared + u, t > 0))
    return out, sessions


@dataclass(frozen=True)
class SimResult:
    """What the simulated replicas measured.

    Attributes:
        replicas, routing: the setting.
        hit_rate: counted requests that found their whole shared prefix cached.
        token_hit_rate: shared-prefix tokens found / shared-prefix tokens, over counted requests
            (partial finds included).
        replica_requests, replica_hits: counted requests and hits per replica.
        occupancy: per replica, cached blocks per tag and ``empty``, at the end (simulated blocks).
        shape: the stream's layout.
        requests: requests simulated (warm-up turns included); counted: those counted.
        sessions: conversations (0 for ``global``).
        evictions: blocks evicted, all replicas.
        spills: cache-aware requests sent past their best replica because it was overloaded.
        inflight: requests running at once per replica.
    """

    replicas: int
    routing: Routing
    hit_rate: float
    token_hit_rate: float
    replica_requests: tuple[int, ...]
    replica_hits: tuple[int, ...]
    occupancy: tuple[dict[str, int], ...]
    shape: StreamShape
    requests: int
    counted: int
    sessions: int
    evictions: int
    spills: int
    inflight: int


def simulate(workload: Workload, replicas: int, routing: Routing, capacity_blocks: int, seed: int = 0) -> SimResult:
    """Feed the seeded stream of ``workload`` to ``replicas`` block caches and measure hits.

    Each replica holds ``capacity_blocks`` 16-token blocks (scaled with the
    stream, see the module docstring). Requests run ``INFLIGHT_PER_REPLICA`` x N
    at a time (fewer when the cache holds fewer of the longest request; a
    replica whose cache is full of running requests waits for its oldest) (a conversation's next turn waits for its previous one); blocks
    of running requests cannot be evicted. Routing:

    * ``round-robin``: request i goes to replica i mod N;
    * ``cache-aware``: to the replica holding the longest prefix of the request
      (ties: the least loaded), unless it runs more than ``LOAD_BOUND`` x the
      mean, then to the least loaded replica (SGLang's router and llm-d's
      scheduler balance the same two goals, science.md E.3).

    Results are memoised (LRU, 512 runs): moving the hit rate, the replicas or
    the routing reuses the runs already made for the same workload.

    Args:
        workload: token counts and scope.
        replicas: N >= 1.
        routing: ``round-robin`` or ``cache-aware``.
        capacity_blocks: one replica's KV cache in 16-token blocks.
        seed: seeds numpy's ``default_rng`` (the conversations' interleaving).

    Raises:
        ValueError: replicas outside 1..MAX_REPLICAS, unknown routing, or a cache too small to hold
            one longest request.
    """
    if not 1 <= replicas <= MAX_REPLICAS:
        raise ValueError(f"replicas must be 1 to {MAX_REPLICAS}, got {replicas}")
    if routing not in ("round-robin", "cache-aware"):
        raise ValueError(f"unknown routing {routing!r}; valid: round-robin, cache-aware")
    # One replica routes the same either way: simulate it once (memoised), label it as asked.
    result = _simulate(workload, replicas, routing if replicas > 1 else "round-robin", capacity_blocks, seed)
    return result if result.routing == routing else replace(result, routing=routing)


def clear_simulation_cache() -> None:
    """Forget memoised simulations and streams (benchmarks time cold runs with it)."""
    for memo in (_simulate, _global_chains, _conversation_chains):
        memo.cache_clear()


def simulation_cache_size() -> int:
    """Simulations memoised now."""
    return _simulate.cache_info().currsize


@lru_cache(maxsize=512)
def _simulate(workload: Workload, replicas: int, routing: Routing, capacity_blocks: int, seed: int) -> SimResult:
    """:func:`simulate`, memoised."""
    shape = stream_shape(workload, capacity_blocks)
    inflight = min(INFLIGHT_PER_REPLICA, shape.capacity_blocks // shape.longest_request_blocks)
    if inflight < 1:
        raise ValueError(
            f"a replica's KV cache ({capacity_blocks:,} blocks of {BLOCK_TOKENS} tokens) cannot hold "
            f"one request of {shape.longest_request_blocks * shape.block_tokens:,} tokens"
        )
    stream, sessions = _requests(workload, shape, replicas, seed)
    aware = routing == "cache-aware" and replicas > 1
    caches = [BlockCache(shape.capacity_blocks, record_events=aware) for _ in range(replicas)]
    index: dict[int, int] = {}  # the router's view: block hash -> bitmask of replicas holding it
    everyone = (1 << replicas) - 1
    load = [0] * replicas
    running: OrderedDict[int, tuple[int, tuple[int, ...]]] = OrderedDict()  # key -> (replica, hashes)
    window = inflight * replicas
    requests = [0] * replicas
    hits = [0] * replicas
    found = shared_total = spills = 0
    for i, req in enumerate(stream):
        # A conversation's previous turn ends before its next begins; otherwise the oldest request ends.
        while req.key in running or len(running) >= window:
            replica, hashes = running.pop(req.key) if req.key in running else running.popitem(last=False)[1]
            caches[replica].release(hashes)
            load[replica] -= 1
        if aware:
            replica = _route(index, everyone, req.hashes[: req.prompt_blocks], load)
            if load[replica] + 1 > LOAD_BOUND * max((len(running) + 1) / replicas, 1.0):
                replica = load.index(min(load))
                spills += 1
        else:
            replica = i % replicas
        cache = caches[replica]
        while True:
            try:
                hit = cache.admit(req.hashes, req.tags)
                break
            except CacheFullError:  # the replica waits for its oldest running request to finish
                key = next(k for k, (j, _) in running.items() if j == replica)
                caches[replica].release(running.pop(key)[1])
                load[replica] -= 1
        if aware:
            _apply_events(index, cache, 1 << replica)
        running[req.key] = (replica, req.hashes)
        load[replica] += 1
        if req.counted:
            requests[replica] += 1
            got = min(hit, req.shared_blocks)
            found += got
            shared_total += req.shared_blocks
            hits[replica] += req.shared_blocks > 0 and got == req.shared_blocks
    counted = sum(requests)
    return SimResult(
        replicas=replicas, routing=routing,
        hit_rate=sum(hits) / counted if counted else 0.0,
        token_hit_rate=found / shared_total if shared_total else 0.0,
        replica_requests=tuple(requests), replica_hits=tuple(hits),
        occupancy=tuple(c.occupancy() for c in caches), shape=shape,
        requests=len(stream), counted=counted, sessions=sessions,
        evictions=sum(c.evictions for c in caches), spills=spills, inflight=inflight,
    )


def _route(index: dict[int, int], everyone: int, prompt: tuple[int, ...], load: list[int]) -> int:
    """The replica holding the longest prefix of ``prompt`` (ties: least loaded, then lowest index).

    One walk down the prompt's blocks, narrowing the set of replicas that hold
    every block so far (Dynamo's KV router indexes blocks from KV events the same way).
    """
    holders = everyone
    for h in prompt:
        narrower = index.get(h, 0) & holders
        if not narrower:
            break
        holders = narrower
    if holders == everyone:
        return load.index(min(load))
    best = -1
    while holders:
        j = (holders & -holders).bit_length() - 1  # lowest replica left in the set
        holders &= holders - 1
        if best < 0 or load[j] < load[best]:
            best = j
    return best


def _apply_events(index: dict[int, int], cache: BlockCache, bit: int) -> None:
    """Fold a replica's stored / evicted blocks into the router's index, and clear them."""
    for h in cache.stored:
        index[h] = index.get(h, 0) | bit
    for h in cache.removed:
        left = index[h] & ~bit
        if left:
            index[h] = left
        else:
            del index[h]
    cache.stored.clear()
    cache.removed.clear()

"""Timeline simulator: the three lanes' steps, worked by hand from the scheduling rules in engine/timeline.py.

Step times themselves come from engine.cost (tested in test_cost.py); these tests check that each lane
costs exactly the batch the rules say, at the right time, and the metrics derived from the token times.
"""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.calibration import resolve_profile
from engine.cost import step_cost
from engine.hardware import GPUS, get_gpu
from engine.models import MODELS, get_model
from engine.timeline import LINKS, TAIL_FRACTION, TAIL_STEPS, Lane, kv_transfer, simulate

H100 = get_gpu("h100-sxm")
PROFILE = resolve_profile("datasheet", H100)
LLAMA8B = get_model("llama-3.1-8b")
IB = LINKS["ib-400g"]


def sim(users=30, history=2000, prompt=32000, chunk=256, link=IB, model=LLAMA8B, profile=PROFILE, tp=1, gpu=H100):
    return simulate(model, profile, users=users, history_tokens=history, prompt_tokens=prompt,
                    chunk_tokens=chunk, link=link, tp=tp, gpu=gpu)


def one_step(q, c, users):
    return float(step_cost(LLAMA8B, PROFILE, [q], [c], seq_counts=[users, 1]).total_time_s[0])


# ---- the KV transfer -----------------------------------------------------------


def test_kv_transfer_llama_8b_32k_over_one_ib_nic():
    """KV bytes per token = 2 (K, V) x 32 layers x 8 KV heads x 128 x 2 bytes = 131,072 (science.md A.2);
    x 32,000 tokens = 4,194,304,000 bytes; at 400 Gb/s = 50 GB/s: 4.194304e9 / 50e9 = 83.886 ms
    (science.md D.2 lists 86 ms for 32,768 tokens: 4.29 GB / 50 GB/s)."""
    size, seconds = kv_transfer(LLAMA8B, 32000, IB)
    assert size == 4_194_304_000
    assert seconds == pytest.approx(0.08388608)


def test_kv_transfer_splits_across_tp_ranks():
    """TP 2: each rank holds 4 of the 8 KV heads and sends them over its own link: 83.886 / 2 = 41.943 ms.
    TP 8: one head each: 83.886 / 8 = 10.486 ms (science.md D.2: 8 x 400 Gb/s, 10.7 ms for 32,768 tokens)."""
    assert kv_transfer(LLAMA8B, 32000, IB, tp=2)[1] == pytest.approx(0.04194304)
    assert kv_transfer(LLAMA8B, 32000, IB, tp=8)[1] == pytest.approx(0.01048576)
    assert kv_transfer(LLAMA8B, 32000, IB, tp=8)[0] == 4_194_304_000  # the size is the whole cache


def test_kv_transfer_sliding_window_holds_only_the_window():
    """Mistral-7B-v0.1 caches at most its 4,096-token window: 4,096 x 131,072 = 536,870,912 bytes;
    over 100 GbE (12.5 GB/s): 42.95 ms."""
    size, seconds = kv_transfer(get_model("mistral-7b-v0.1"), 32000, LINKS["ethernet-100g"])
    assert size == 4096 * 131_072 == 536_870_912
    assert seconds == pytest.approx(536_870_912 / 12.5e9)


@pytest.mark.parametrize("link", LINKS.values(), ids=list(LINKS))
def test_link_presets_have_a_source_and_a_bandwidth(link):
    assert link.bytes_per_s > 1e9
    assert len(link.source) > 10


# ---- the three lanes, step by step ------------------------------------------------------


def test_no_chunking_prefill_step_is_exactly_the_cost_models_prefill():
    """The step after arrival carries the P prompt tokens and nothing else: its time is
    step_cost([P], [0]) with no decode work added (and none counted twice)."""
    tl = sim()
    lane = tl.lanes["no_chunking"]
    prefill = float(step_cost(LLAMA8B, PROFILE, [32000], [0]).total_time_s)
    assert lane.step_s[0] == prefill == tl.prefill_s
    assert lane.prefill_tokens[0] == 32000 and not lane.existing_decode[0]
    assert lane.ttft_s == prefill
    # Then the newcomer joins: U at H tokens + the newcomer at P tokens, one token each.
    assert lane.step_s[1] == pytest.approx(one_step([1, 1], [2000, 32000], 30), rel=1e-12)
    assert lane.max_stall_s == pytest.approx(prefill + lane.step_s[1], rel=1e-12)
    assert lane.prefill_steps == 1


def test_chunked_lane_carries_one_chunk_per_step_by_hand():
    """P = 1,000, C = 300: ceil(1000 / 300) = 4 equal chunks (Sarathi) of 250 tokens at offsets
    0, 250, 500, 750; every step also carries the U = 4 users, whose contexts grow 50, 51, 52, 53."""
    tl = sim(users=4, history=50, prompt=1000, chunk=300)
    lane = tl.lanes["chunked"]
    assert lane.prefill_steps == 4
    assert lane.prefill_tokens[:5].tolist() == [250, 250, 250, 250, 0]
    assert lane.existing_decode.all()
    for i, (q, c) in enumerate([(250, 0), (250, 250), (250, 500), (250, 750)]):
        assert lane.step_s[i] == pytest.approx(one_step([1, q], [50 + i, c], 4), rel=1e-12)
    # The last chunk's step ends with the first token; then U + 1 decode: users at 54, 55 ...,
    # the newcomer at 1000, 1001 ...
    assert lane.ttft_s == pytest.approx(lane.step_s[:4].sum(), rel=1e-12)
    assert lane.step_s[4] == pytest.approx(one_step([1, 1], [54, 1000], 4), rel=1e-12)
    assert lane.step_s[5] == pytest.approx(one_step([1, 1], [55, 1001], 4), rel=1e-12)


def test_uneven_prompt_splits_into_chunks_one_token_apart():
    """P = 32,000, C = 6,588: ceil(32000 / 6588) = 5 chunks; 32,000 / 5 = 6,400 each, none above C,
    no runt tail. P = 1,001, C = 500: 3 chunks of 334, 334, 333 (sizes differ by at most one)."""
    assert sim(chunk=6588).lanes["chunked"].prefill_tokens[:5].tolist() == [6400] * 5
    assert sim(users=4, history=50, prompt=1001, chunk=500).lanes["chunked"].prefill_tokens[:3].tolist() == [
        334, 334, 333,
    ]


def test_disaggregated_lane_joins_at_the_first_boundary_after_the_kv_arrives():
    """The prefill GPU needs prefill_s, the link kv_transfer_s; meanwhile the decode GPU runs U-user decode
    steps (contexts H, H + 1, ...). The newcomer's first token streams at the first step boundary at or
    after prefill_s + kv_transfer_s, and no decode step ever carries prompt tokens."""
    tl = sim()
    lane = tl.lanes["disaggregated"]
    m = lane.prefill_steps
    for i in (0, 1, m - 1):
        assert lane.step_s[i] == pytest.approx(one_step([1, 0], [2000 + i, 0], 30), rel=1e-12)
    ready = tl.prefill_s + tl.kv_transfer_s
    boundaries = lane.step_start_s + lane.step_s
    assert boundaries[m - 2] < ready <= boundaries[m - 1] == lane.ttft_s
    assert (lane.prefill_tokens == 0).all() and lane.existing_decode.all()
    assert lane.step_s[m] == pytest.approx(one_step([1, 1], [2000 + m, 32000], 30), rel=1e-12)


def test_lanes_share_one_window():
    """end = latest first token + max(10 decode steps, 15% of it); each lane runs past it by < 1 step."""
    tl = sim(prompt=8000, chunk=512)
    latest = max(lane.ttft_s for lane in tl.lanes.values())
    assert tl.end_s == pytest.approx(latest + max(TAIL_STEPS * tl.decode_step_s, TAIL_FRACTION * latest))
    for lane in tl.lanes.values():
        assert lane.step_start_s[-1] < tl.end_s <= lane.step_start_s[-1] + lane.step_s[-1]
        assert np.allclose(lane.step_start_s[1:], lane.step_start_s[:-1] + lane.step_s[:-1], rtol=1e-12)


# ---- lane metrics, on hand-made lanes -----------------------------------------------


def make_lane(starts, steps, decode, first_token_step):
    starts, steps = np.array(starts, float), np.array(steps, float)
    ends = starts + steps
    pre = np.r_[np.ones(first_token_step + 1, int), np.zeros(len(steps) - first_token_step - 1, int)]
    return Lane(step_start_s=starts, step_s=steps, prefill_tokens=pre, existing_decode=np.array(decode),
                newcomer_token_s=ends[first_token_step:], prefill_steps=first_token_step + 1)


def test_metrics_when_a_step_carries_no_decodes():
    """Steps [0, 1) prefill alone, [1, 3), [3, 3.5) decode. Existing tokens at 3 and 3.5 (and 0 before):
    longest gap 3 - 0 = 3; TTFT = 1; the gaps starting before 1 are just (0, 3]: mean 3 / 1 = 3."""
    lane = make_lane([0, 1, 3], [1, 2, 0.5], [False, True, True], 0)
    assert lane.existing_token_s.tolist() == [3, 3.5]
    assert lane.ttft_s == 1
    assert lane.max_stall_s == 3
    assert lane.existing_tpot_s == 3


def test_metrics_when_every_step_carries_decodes():
    """Steps [0, 3), [3, 4), [4, 5), first token at the end of step 1 (t = 4). Existing tokens 3, 4, 5:
    longest gap 3; gaps starting before 4 are (0, 3] and (3, 4]: mean 4 / 2 = 2."""
    lane = make_lane([0, 3, 4], [3, 1, 1], [True, True, True], 1)
    assert lane.ttft_s == 4
    assert lane.max_stall_s == 3
    assert lane.existing_tpot_s == 2


# ---- the checks ----------------------------------------------------------------


def test_prompt_32000_freeze_vs_chunks_vs_disaggregated():
    """Defaults (30 users x 2,000 tokens, Llama-3.1-8B, H100 SXM datasheet), prompt 32,000, chunk 256:
    no chunking stalls everyone for about the whole prefill (prefill + one decode step), at least 20x the
    chunked lane's longest step; the disaggregated lane's longest gap is a decode step plus the newcomer's
    KV reads (<= 1.25 x the plain decode step); chunking delays the newcomer's own first token."""
    tl = sim()
    nc, ch, dg = (tl.lanes[k] for k in ("no_chunking", "chunked", "disaggregated"))
    assert tl.prefill_s <= nc.max_stall_s <= 1.02 * tl.prefill_s
    assert nc.max_stall_s >= 20 * ch.max_stall_s
    assert dg.max_stall_s <= 1.25 * tl.decode_step_s
    assert ch.ttft_s >= nc.ttft_s
    assert nc.existing_tpot_s == nc.max_stall_s
    assert ch.existing_tpot_s == pytest.approx(ch.ttft_s / ch.prefill_steps, rel=1e-12)


def test_bigger_chunks_trade_stall_for_ttft_over_the_whole_range_at_32000():
    """Every chunk size on a fine geometric grid over 256..8,192 (plus 256 and 8,192 themselves) at the
    32,000-token setting: the newcomer's TTFT never rises and the longest stall never falls, beyond 1%,
    against every smaller chunk. Equal-size chunks (n = ceil(P / C), P / n tokens each) make this hold at
    every integer C: the longest step is the last chunk's, which only grows with P / n, while fewer steps
    mean fewer weight reads and fewer re-reads of earlier chunks' KV."""
    chunks = np.unique(np.r_[256, 8192, np.geomspace(256, 8192, 300).round()].astype(int))
    lanes = [sim(chunk=int(c)).lanes["chunked"] for c in chunks]
    ttft = np.array([lane.ttft_s for lane in lanes])
    stall = np.array([lane.max_stall_s for lane in lanes])
    assert (ttft <= 1.01 * np.minimum.accumulate(ttft)).all()
    assert (stall >= 0.99 * np.maximum.accumulate(stall)).all()
    assert stall[-1] > 10 * stall[0]


# ---- properties ------------------------------------------------------------------------------

CONFIGS = st.fixed_dictionaries({
    "model": st.sampled_from(list(MODELS)),
    "gpu": st.sampled_from(list(GPUS)),
    "link": st.sampled_from(list(LINKS)),
    "tp": st.sampled_from([1, 2, 4]),
    "users": st.integers(1, 256),
    "history": st.integers(0, 32768),
    "prompt": st.integers(256, 131072),
    "chunk": st.integers(64, 16384),
})


def sim_config(cfg):
    model, gpu = get_model(cfg["model"]), get_gpu(cfg["gpu"])
    tp = cfg["tp"] if model.num_heads % cfg["tp"] == 0 else 1
    return sim(users=cfg["users"], history=cfg["history"], prompt=cfg["prompt"], chunk=cfg["chunk"],
               link=LINKS[cfg["link"]], model=model, profile=resolve_profile("datasheet", gpu), tp=tp, gpu=gpu)


@settings(max_examples=60, deadline=None)
@given(CONFIGS)
def test_lane_invariants(cfg):
    tl = sim_config(cfg)
    P, C = cfg["prompt"], cfg["chunk"]
    nc, ch, dg = (tl.lanes[k] for k in ("no_chunking", "chunked", "disaggregated"))
    for lane in tl.lanes.values():
        assert np.isfinite(lane.step_s).all() and (lane.step_s > 0).all()
        assert np.diff(lane.newcomer_token_s).min() > 0
        assert 0 < lane.ttft_s < tl.end_s
    assert ch.prefill_steps == math.ceil(P / C) and ch.prefill_tokens.sum() == P
    assert dg.prefill_tokens.sum() == 0 and dg.ttft_s >= tl.prefill_s + tl.kv_transfer_s
    # Splitting a prompt never makes it cheaper: chunked TTFT >= the single prefill step.
    assert ch.ttft_s >= nc.ttft_s * (1 - 1e-12)
    assert nc.max_stall_s > tl.prefill_s
    assert dg.max_stall_s < nc.max_stall_s


@settings(max_examples=40, deadline=None)
@given(CONFIGS, st.integers(256, 8192), st.integers(256, 8192))
def test_a_bigger_chunk_never_lowers_the_stall_or_raises_ttft(cfg, c1, c2):
    """Over random models, GPUs, users, history and prompts, any two chunk sizes in 256..8,192."""
    small, big = (sim_config({**cfg, "chunk": c}).lanes["chunked"] for c in sorted((c1, c2)))
    assert big.ttft_s <= 1.01 * small.ttft_s
    assert big.max_stall_s >= 0.99 * small.max_stall_s


@pytest.mark.parametrize("bad", [dict(users=0), dict(history=-1), dict(prompt=0), dict(chunk=0)])
def test_bad_counts_raise(bad):
    with pytest.raises(ValueError):
        sim(**bad)

"""The calibration pipeline for real on this machine's CPU: plan, counting, timing, fit, file, server.

One quick CPU calibration (``pdlab calibrate --device cpu --quick``: torch
matmul and SDPA on one thread, ~35 s of CPU time) is run once for the module;
its fit must predict the sizes held out of it with a median absolute error of
at most 15% per op class (issue 7). It is a measurement, not a fixture: a
failure means this machine's timings no longer follow the cost model.
"""

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from fastapi.testclient import TestClient  # noqa: E402

from engine.calibration import OP_CLASSES, PROFILES, load_profile  # noqa: E402
from engine.cost import step_cost  # noqa: E402
from engine.models import ModelConfig, get_model  # noqa: E402
from kernels import backends  # noqa: E402
from kernels import calibrate as cal  # noqa: E402
from web.app import create_app  # noqa: E402
from web.cli import main  # noqa: E402

pytestmark = pytest.mark.kernels

MAX_MEDIAN_ERROR_PCT = 15.0
ONE_LAYER = ModelConfig(id="one-layer", name="One layer", source="test", num_layers=1, hidden_size=2048,
                        num_heads=32, num_kv_heads=8, head_dim=64, intermediate_size=8192, vocab_size=1000)


# ---- counting agrees with the cost model ---------------------------------------------------------

def test_gemm_counts_by_hand():
    """[8, 2048] @ [2048, 3072] in bf16: 2 x 8 x 2048 x 3072 = 100,663,296 FLOPs;
    (8 x 2048 + 2048 x 3072 + 8 x 3072) x 2 = 12,664,832 bytes."""
    assert cal.gemm_counts(8, 2048, 3072, 2) == (100_663_296.0, 12_664_832.0)


def test_counts_match_engine_cost_for_one_layer():
    """The four projections, prefill and decode attention and the KV store of a one-layer model
    add up to what engine.cost.step_cost counts for that layer (LM head left out: no sampled tokens).
    Both count gate and up as one fused [d, 2I] GEMM reading the MLP input once (2d + 3I elements).
    """
    profile = PROFILES["h100-sxm-datasheet"]
    T = 300
    cost = step_cost(ONE_LAYER, profile, [T], [0], sampled_tokens=[0])
    shapes = cal.projection_shapes(ONE_LAYER).values()
    flops, bytes_ = np.sum([cal.gemm_counts(T, k, n, 2) for k, n in shapes], axis=0)
    assert flops == float(cost.flops["gemm"])
    assert float(cost.bytes["gemm"]) == bytes_
    prefill = cal.attention_counts(T, 0, 1, 32, 8, 64, 2)
    assert prefill == pytest.approx((float(cost.flops["prefill_attention"]), float(cost.bytes["prefill_attention"])))
    assert cal.kv_store_counts(T, 8, 64, 2)[1] == pytest.approx(float(cost.bytes["kv_store"]))
    # 16 sequences decoding one token each over 999 cached ones: the kernel sees 1,000 keys per sequence.
    decode_cost = step_cost(ONE_LAYER, profile, [1], [999], seq_counts=[16], sampled_tokens=[0])
    decode = cal.attention_counts(1, 999, 16, 32, 8, 64, 2)
    assert decode == pytest.approx((float(decode_cost.flops["decode_attention"]),
                                    float(decode_cost.bytes["decode_attention"])))


def test_mla_models_are_refused():
    with pytest.raises(ValueError, match="latent attention"):
        cal.projection_shapes(get_model("deepseek-v3"))


def test_moe_projection_shapes_are_one_experts():
    """Mixtral-8x7B: hidden 4096, expert intermediate 14336 -> gate+up [4096, 28672], down [14336, 4096]."""
    shapes = cal.projection_shapes(get_model("mixtral-8x7b"))
    assert shapes["gate_up"] == (4096, 28672) and shapes["down"] == (14336, 4096)


# ---- the plan ----------------------------------------------------------------------------------

@pytest.mark.parametrize("device", ["cpu", "cuda"])
@pytest.mark.parametrize("quick", [True, False])
def test_every_sweep_has_an_odd_number_of_sizes(device, quick):
    """Every other size held out leaves the smallest and largest in the fit."""
    sizes = cal.sizes_for(device, quick)
    for name in ("gemm_tokens", "prefill_lengths", "decode_batches", "decode_contexts", "store_tokens"):
        values = getattr(sizes, name)
        assert len(values) % 2 == 1 and list(values) == sorted(set(values)), name


def test_cpu_plan_holds_out_every_other_size_of_each_series():
    model = get_model("llama-3.2-1b")
    sizes = cal.sizes_for("cpu", quick=True)
    cases = cal.plan("cpu", model, sizes)
    assert {c.op for c in cases} == {"gemm", "prefill_attention", "decode_attention", "kv_store"}
    assert {c.implementation for c in cases} == {"torch"}
    qkv = [c for c in cases if c.op == "gemm" and c.shape["out_features"] == (32 + 2 * 8) * 64]
    assert [c.shape["tokens"] for c in qkv] == list(sizes.gemm_tokens)
    assert [c.held_out for c in qkv] == [i % 2 == 1 for i in range(len(qkv))]
    decode = {(c.shape["batch"], c.shape["context"]): c.held_out for c in cases if c.op == "decode_attention"}
    assert decode[(1, sizes.decode_contexts[0])] is False and decode[(2, sizes.decode_contexts[0])] is True
    assert all(b * c <= sizes.decode_max_tokens for b, c in decode)


def test_cuda_plan_times_our_kernels_and_flash_attention(monkeypatch):
    """Without a GPU, the CUDA plan is checked for its composition: prefill for every backend,
    decode for ours (block 16) and flash-attn's paged kernel (block 256), never SDPA's gathering decode."""
    fake = [backends.Backend(name, object(), None, object()) for name in ("triton", "flash_attn", "torch_sdpa_flash")]
    monkeypatch.setattr(cal, "_attention_backends", lambda device: fake)
    sizes = cal.sizes_for("cuda", quick=True)
    cases = cal.plan("cuda", get_model("llama-3.1-8b"), sizes)
    prefill = {c.implementation for c in cases if c.op == "prefill_attention"}
    decode = {(c.implementation, c.shape["page_size"]) for c in cases if c.op == "decode_attention"}
    assert prefill == {"triton", "flash_attn", "torch_sdpa_flash"}
    assert decode == {("triton", 16), ("flash_attn", 256)}
    assert {c.dtype for c in cases} == {"bfloat16"}
    assert {c.implementation for c in cases if c.op == "kv_store"} == {"triton"}


TINY = ModelConfig(id="tiny", name="Tiny", source="test", num_layers=1, hidden_size=64, num_heads=4,
                   num_kv_heads=2, head_dim=16, intermediate_size=128, vocab_size=100)


def test_gpu_cases_call_our_kernels_with_their_signatures():
    """The cases the CUDA pack times, run here on the Triton interpreter (fp32, tiny shapes):
    each call returns the kernel's output shape, and the KV store lands every token in its slot."""
    buf = cal.Buffers("cpu", torch.float32)
    prefill = cal._prefill_case(backends.TRITON, TINY, 24, False, torch.float32)
    fn, inputs = prefill.setup(buf)
    assert fn(inputs[0]).shape == (24, 4, 16)
    decode = cal._decode_case(backends.TRITON, TINY, 3, 40, False, torch.float32)
    fn, inputs = decode.setup(buf)
    assert fn(inputs[0]).shape == (3, 4, 16) and decode.shape["page_size"] == 16
    sdpa = cal._prefill_case(backends.SDPA_FLASH, TINY, 24, False, torch.float32)
    fn, inputs = sdpa.setup(buf)
    assert fn(inputs[0]).shape == (1, 4, 24, 16)
    store = cal._store_case(TINY, 8, False, torch.float32, use_triton=True)
    fn, inputs = store.setup(buf)
    fn(inputs[0])
    key, value, k_cache, v_cache, slots = inputs[0]
    assert torch.equal(k_cache.view(-1, 2, 16)[slots], key) and torch.equal(v_cache.view(-1, 2, 16)[slots], value)


# ---- the real run ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def profile():
    return cal.calibrate("cpu", quick=True, threads=1, progress=False)


def test_cpu_calibration_predicts_held_out_sizes(profile):
    """Fit on half the sizes, predict the other half: median |error| <= 15% per op class."""
    table = {op: profile.fit.error[op] for op in ("gemm", "prefill_attention", "decode_attention", "kv_store")}
    report = {op: (round(e.median_abs_pct, 1), round(e.worst_abs_pct, 1), e.cases) for op, e in table.items()}
    print("held-out error (median %, worst %, cases):", report)
    for op, err in table.items():
        assert err.cases >= 2, op
        assert err.median_abs_pct <= MAX_MEDIAN_ERROR_PCT, f"{op}: {report[op]}"


def test_cpu_profile_says_what_it_is(profile):
    assert profile.provenance == "measured" and profile.id == "cpu-measured"
    assert profile.device.kind == "cpu" and profile.device.gpu_id is None
    assert profile.device.measured_copy_bytes_per_s > 1e8 and profile.device.measured_gemm_flops_per_s > 1e8
    assert profile.software["torch_num_threads"] == "1" and "torch" in profile.software
    assert set(profile.fit.ops) == set(OP_CLASSES)
    assert "not timed" in profile.fit.sources["elementwise"]
    ops = {m.op for m in profile.measurements}
    assert {"copy", "peak_gemm", *OP_CLASSES} - {"elementwise"} <= ops
    for m in profile.measurements:
        assert m.median_s > 0 and m.spread_s >= 0 and m.runs == cal.sizes_for("cpu", True).runs


def test_profile_round_trips_and_serves(profile, tmp_path):
    path = tmp_path / "cpu-measured.json"
    path.write_text(profile.model_dump_json(indent=1))
    assert load_profile(path) == profile
    try:
        with TestClient(create_app(profile_paths=[str(path)])) as client:
            listed = {p["id"]: p for p in client.get("/api/profiles").json()}
            assert listed["cpu-measured"]["provenance"] == "measured"
            schema = {lab["slug"]: lab for lab in client.get("/api/labs").json()}
            picker = next(p for p in schema["roofline"]["params"] if p["name"] == "profile")
            assert "cpu-measured" in [c["value"] for c in picker["choices"]]
            page = client.post("/api/labs/calibration", json={"profile": "cpu-measured"})
            assert page.status_code == 200
            body = page.json()
            assert body["metrics"]["error"]["gemm"]["median_abs_pct"] == pytest.approx(
                profile.fit.error["gemm"].median_abs_pct)
            scatter = body["figures"]["predicted_vs_measured"]["data"]
            assert sum(len(t["x"]) for t in scatter if t.get("mode") == "markers") == sum(
                m.op in OP_CLASSES for m in profile.measurements)
            roof = client.post("/api/labs/roofline", json={"profile": "cpu-measured"}).json()
            assert any("cpu-measured" in n for n in roof["notes"])
            assert any("measured on a CPU" in n for n in roof["notes"])
    finally:
        PROFILES.pop("cpu-measured", None)


def test_cli_writes_the_profile(profile, tmp_path, monkeypatch, capsys):
    seen = {}

    def fake_calibrate(device, model, **kw):
        seen.update(device=device, model=model, **kw)
        return profile

    monkeypatch.setattr(cal, "calibrate", fake_calibrate)
    out = tmp_path / "p.json"
    assert main(["calibrate", "--device", "cpu", "--quick", "--model", "llama-3.2-1b", "--out", str(out)]) == 0
    assert seen == {"device": "cpu", "model": "llama-3.2-1b", "quick": True, "threads": 1, "profile_id": None}
    assert load_profile(out) == profile
    assert "cpu-measured" in capsys.readouterr().out


def test_cli_refuses_a_malformed_profile_naming_the_field(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"id": "x", "provenance": "guessed"}))
    assert main(["serve", "--profile", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "provenance" in err and "not a calibration profile" in err


def test_cli_refuses_cuda_without_a_gpu(capsys):
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    assert main(["calibrate", "--device", "cuda", "--out", "/dev/null"]) == 2
    assert "no CUDA GPU" in capsys.readouterr().err

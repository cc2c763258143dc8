"""Profiles from users (issue 9): validated, size-limited, used for one request, never stored or evaluated.

The browser uploads a profile to ``POST /api/profiles/validate``, keeps the
normalised answer, and sends it with each ``POST /api/labs/{slug}/with-profile``.
"""

from __future__ import annotations

import asyncio
import builtins
import copy
import io
import json
import os

import httpx
import pytest
from anyio.from_thread import start_blocking_portal

from engine.calibration import OP_CLASSES, datasheet_profile
from engine.hardware import get_gpu
from labs import LABS
from web.app import create_app
from web.guard import MAX_UPLOAD_BYTES

VALIDATE = "/api/profiles/validate"


def profile_doc(speedup: float = 1.0) -> dict:
    """The H100 datasheet profile as a user's file, renamed, every rate times ``speedup``."""
    doc = datasheet_profile(get_gpu("h100-sxm")).model_dump(mode="json")
    doc["id"] = "my-h100"
    doc["description"] = "A user's profile."
    for rates in doc["fit"]["ops"].values():
        rates["flops_per_s"] *= speedup
        rates["bytes_per_s"] *= speedup
    return doc


def measured_doc() -> dict:
    doc = profile_doc()
    doc["provenance"] = "measured"
    doc["measurements"] = [{"op": "gemm", "implementation": "torch", "shape": {"m": 4096, "n": 4096, "k": 4096},
                            "dtype": "bfloat16", "flops": 2 * 4096**3, "bytes": 3 * 2 * 4096**2,
                            "median_s": 2e-4, "spread_s": 1e-6, "runs": 50}]
    return doc


def flat(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        out.update(flat(v, f"{prefix}{k}.") if isinstance(v, dict) else {prefix + k: v})
    return out


def refused(response, status: int = 422) -> list[dict]:
    assert response.status_code == status, (response.status_code, response.text[:300])
    detail = response.json()["detail"]
    return detail if isinstance(detail, list) else [{"loc": [], "msg": detail}]


# ---- the happy path ------------------------------------------------------------------------------------

def test_validate_answers_the_normalised_profile(client):
    r = client.post(VALIDATE, json=profile_doc())
    assert r.status_code == 200
    body = r.json()
    assert body["profile"]["id"] == "my-h100" and body["profile"]["fit"]["ops"].keys() == set(OP_CLASSES)
    assert body["summary"].startswith("my-h100: datasheet profile of NVIDIA H100")
    assert client.post(VALIDATE, json=measured_doc()).json()["summary"].endswith("1 measurements")


@pytest.mark.parametrize("slug", list(LABS))
def test_every_lab_runs_under_an_uploaded_profile(client, slug):
    """Rates x4: the uploaded profile, not the datasheet one (nor a cached datasheet answer), sets the times."""
    plain = client.post(f"/api/labs/{slug}", json={})
    uploaded = client.post(f"/api/labs/{slug}/with-profile", json={"params": {}, "profile": profile_doc(4.0)})
    assert plain.status_code == 200 and uploaded.status_code == 200, uploaded.text[:300]
    assert uploaded.json()["params"]["profile"] == "uploaded"
    before, after = flat(plain.json()["metrics"]), flat(uploaded.json()["metrics"])
    assert before != after
    times = [k for k in before if k.endswith("_ms") and isinstance(before[k], float) and k in after]
    if times:
        assert any(after[k] < before[k] for k in times), times


def test_params_errors_name_the_param(client):
    (err,) = refused(client.post("/api/labs/roofline/with-profile",
                                 json={"params": {"batch": 0}, "profile": profile_doc()}))
    assert err["loc"] == ["body", "params", "batch"]
    (err,) = refused(client.post("/api/labs/roofline/with-profile",
                                 json={"params": {"profile": "datasheet"}, "profile": profile_doc()}))
    assert err["loc"] == ["body", "params", "profile"] and "uploaded" in err["msg"]


# ---- never stored, never written, never evaluated ------------------------------------------------------

def test_nothing_is_kept_between_requests(client):
    assert client.post(VALIDATE, json=profile_doc()).status_code == 200
    assert client.post("/api/labs/roofline/with-profile", json={"profile": profile_doc()}).status_code == 200
    assert "my-h100" not in {p["id"] for p in client.get("/api/profiles").json()}
    refused(client.post("/api/labs/roofline", json={"profile": "my-h100"}))
    refused(client.post("/api/labs/roofline", json={"profile": "uploaded"}))  # only with a profile in the body


def test_nothing_is_written_to_disk(client, monkeypatch):
    """Any open() for writing during the upload and the lab run fails the test."""
    real_open, real_os_open = builtins.open, os.open

    def no_write(file, mode="r", *args, **kwargs):
        assert not set(str(mode)) & set("wax+"), f"opened {file} for writing"
        return real_open(file, mode, *args, **kwargs)

    def no_os_write(path, flags, *args, **kwargs):
        assert not flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT), f"os.open({path}) for writing"
        return real_os_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", no_write)
    monkeypatch.setattr(io, "open", no_write)
    monkeypatch.setattr(os, "open", no_os_write)
    assert client.post(VALIDATE, json=measured_doc()).status_code == 200
    assert client.post("/api/labs/roofline/with-profile", json={"profile": measured_doc()}).status_code == 200


def test_text_in_a_profile_is_never_evaluated(client, tmp_path):
    marker = tmp_path / "pwned"
    doc = profile_doc()
    doc["description"] = f"__import__('os').system('touch {marker}') {{{{ 7*7 }}}} ${{7*7}} <script>alert(1)</script>"
    doc["software"] = {"torch": f"eval(open('{marker}', 'w'))"}
    r = client.post(VALIDATE, json=doc)
    assert r.status_code == 200
    assert r.json()["profile"]["description"] == doc["description"]  # kept as text, verbatim
    run = client.post("/api/labs/roofline/with-profile", json={"profile": doc})
    assert run.status_code == 200 and "49" not in run.json()["notes"][0]
    assert not marker.exists()


def test_concurrent_requests_keep_their_own_profiles():
    """Requests with different profiles, served at once, each get the answer of their own profile."""
    app = create_app()
    docs = {"x1": profile_doc(1.0), "x4": profile_doc(4.0)}
    body = {"params": {"batch": 64, "history_tokens": 4000}}

    async def main():
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
            async def one(name):
                r = await c.post("/api/labs/roofline/with-profile", json={**body, "profile": docs[name]})
                return name, r.json()["metrics"]["decode"]["step_ms"]

            reference = dict([await one("x1"), await one("x4")])
            results = await asyncio.gather(*(one(name) for name in ["x1", "x4"] * 12))
            return reference, results

    with start_blocking_portal() as portal:  # its own loop: the browser tests' Playwright may hold this thread's
        reference, results = portal.call(main)
    assert reference["x1"] > reference["x4"]
    assert all(step_ms == reference[name] for name, step_ms in results)


# ---- hostile files -------------------------------------------------------------------------------------

def _set(doc: dict, path: str, value) -> dict:
    doc = copy.deepcopy(doc)
    *parents, last = path.split(".")
    node = doc
    for key in parents:
        node = node[int(key)] if isinstance(node, list) else node[key]
    node[last] = value
    return doc


HOSTILE = [
    # (what, document, loc that must be named, words the message must contain)
    ("huge rate", _set(profile_doc(), "fit.ops.gemm.flops_per_s", 1e300), "flops_per_s", "less than or equal"),
    ("negative launch time", _set(profile_doc(), "fit.ops.gemm.launch_overhead_s", -1e-6), "launch_overhead_s",
     "greater than or equal"),
    ("negative all-reduce", _set(profile_doc(), "fit.all_reduce_latency_s", -0.5), "all_reduce_latency_s",
     "greater than or equal"),
    ("negative measured time", _set(measured_doc(), "measurements.0.median_s", -2e-4), "median_s", "greater than"),
    ("zero rate", _set(profile_doc(), "fit.ops.decode_attention.bytes_per_s", 0), "bytes_per_s", "greater than"),
    ("rate as text", _set(profile_doc(), "fit.ops.gemm.flops_per_s", "fast"), "flops_per_s", "number"),
    ("ops as a list", _set(profile_doc(), "fit.ops", []), "ops", "dictionary"),
    ("device as text", _set(profile_doc(), "device", "my gpu"), "device", "dictionary"),
    ("unknown op class", _set(profile_doc(), "fit.ops.warp_drive", profile_doc()["fit"]["ops"]["gemm"]),
     "warp_drive", "Input should be"),
    ("missing op class", _set(profile_doc(), "fit.ops", {"gemm": profile_doc()["fit"]["ops"]["gemm"]}), "ops",
     "no rates for prefill_attention"),
    ("extra field", _set(profile_doc(), "exec", "import os"), "exec", "Extra inputs"),
    ("path in the id", _set(profile_doc(), "id", "../../etc/passwd"), "id", "pattern"),
    ("measured without rows", _set(profile_doc(), "provenance", "measured"), "", "measurements"),
    ("huge shape", _set(measured_doc(), "measurements.0.shape", {f"d{i}": 1 for i in range(17)}), "shape",
     "at most 16"),
]


@pytest.mark.parametrize("what, doc, loc, words", HOSTILE, ids=[h[0] for h in HOSTILE])
@pytest.mark.parametrize("route", ["validate", "with-profile"])
def test_hostile_profiles_are_refused_naming_the_field(client, what, doc, loc, words, route):
    if route == "validate":
        r, prefix = client.post(VALIDATE, json=doc), ["body"]
    else:
        r, prefix = client.post("/api/labs/roofline/with-profile", json={"profile": doc}), ["body", "profile"]
    errs = refused(r)
    assert any(e["loc"][:len(prefix)] == prefix and (not loc or loc in map(str, e["loc"])) and words in e["msg"]
               for e in errs), errs


@pytest.mark.parametrize("text, words", [
    (json.dumps(profile_doc()).replace("794500000000000.0", "1e999"), "too large"),
    (json.dumps(profile_doc()).replace("794500000000000.0", "NaN"), "NaN"),
    (json.dumps(profile_doc()).replace("794500000000000.0", "9" * 5000), "digits"),
    ('{"id": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested too deeply"),
    ("{'id': 'python-literal'}", "not valid JSON"),
])
def test_hostile_json_is_refused_with_a_message(client, text, words):
    (err,) = refused(client.post(VALIDATE, content=text, headers={"content-type": "application/json"}))
    assert words in err["msg"]


def test_megabytes_are_refused_with_the_limit(client):
    doc = _set(profile_doc(), "description", "x" * (MAX_UPLOAD_BYTES + 1))
    for path in (VALIDATE, "/api/labs/roofline/with-profile"):
        (err,) = refused(client.post(path, json=doc), status=413)
        assert f"{MAX_UPLOAD_BYTES:,} bytes" in err["msg"]


def test_upload_limit_is_only_on_profile_routes(client):
    """A lab request stays at the small limit: 100 kB of params is a 413, not parsed."""
    (err,) = refused(client.post("/api/labs/roofline", json={"gpu": "x" * 100_000}), status=413)
    assert "65,536 bytes" in err["msg"]


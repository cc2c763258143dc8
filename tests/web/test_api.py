"""Every endpoint of DESIGN.md's HTTP API, each lab's defaults and bounds, and 422s."""


import pytest

from labs import LABS


def test_healthz(client):
    assert client.get("/healthz").json() == {"status": "ok"}


@pytest.mark.parametrize("path", ["/", *[f"/labs/{slug}" for slug in LABS]])
def test_pages(client, path):
    r = client.get(path)
    assert r.status_code == 200
    assert "text/html" in r.headers["content-type"]


def test_unknown_lab_page_is_404(client):
    assert client.get("/labs/nope").status_code == 404


def test_plotly_is_served_locally(client):
    r = client.get("/vendor/plotly.min.js")
    assert r.status_code == 200 and len(r.content) > 1_000_000


def test_lab_list_has_every_param_described(client):
    labs = client.get("/api/labs").json()
    assert {lab["slug"] for lab in labs} == set(LABS)
    for lab in labs:
        for p in lab["params"]:
            assert {"name", "type", "default", "min", "max", "step", "unit", "label", "help"} <= set(p)
            assert p["label"] and p["help"]


@pytest.mark.parametrize("slug", list(LABS))
def test_each_lab_answers_its_defaults(client, slug):
    r = client.post(f"/api/labs/{slug}", json={})
    assert r.status_code == 200
    body = r.json()
    assert set(body) == {"params", "metrics", "figures", "notes"}
    assert body["figures"]


@pytest.mark.parametrize("slug", list(LABS))
def test_each_lab_refuses_values_past_its_bounds(client, slug):
    for p in next(lab for lab in client.get("/api/labs").json() if lab["slug"] == slug)["params"]:
        if p["max"] is None:
            continue
        r = client.post(f"/api/labs/{slug}", json={p["name"]: p["max"] * 10 + 1})
        assert r.status_code == 422, p["name"]
        assert r.json()["detail"][0]["loc"][-1] == p["name"]


def test_roofline_metrics_contract(client):
    m = client.post("/api/labs/roofline", json={"batch": 8}).json()["metrics"]
    assert {"ridge_flop_per_byte", "kv_bytes_per_token", "decode", "prefill", "memory"} <= set(m)
    assert {"flop_per_byte", "step_ms", "tokens_per_s", "bound"} <= set(m["decode"])
    assert {"flop_per_byte", "time_ms", "bound"} <= set(m["prefill"])
    assert {"weights_gb", "kv_cache_gb", "required_gb", "capacity_gb", "fits", "max_batch"} <= set(m["memory"])
    assert m["decode"]["bound"] in ("memory", "compute")


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        ({"batch": 0}, "batch", "greater than or equal to 1"),
        ({"gpu": "h100"}, "gpu", "valid: h100-sxm"),
        ({"model": "gpt-5"}, "model", "valid: "),
        ({"profile": "nope"}, "profile", "valid: datasheet"),
        ({"batch": "many"}, "batch", "valid integer"),
        ({"flux_capacitor": 1}, "flux_capacitor", "Extra inputs"),
        ({"tp": 3}, "tp", "1, 2, 4 or 8"),
    ],
)
def test_bad_input_is_422_naming_the_field(client, body, field, words):
    r = client.post("/api/labs/roofline", json=body)
    assert r.status_code == 422
    detail = r.json()["detail"]
    assert detail[0]["loc"][-1] == field
    assert words in detail[0]["msg"]


def test_catalogs_carry_units_and_sources(client):
    gpus = client.get("/api/gpus").json()
    h100 = next(g for g in gpus if g["id"] == "h100-sxm")
    assert h100["bf16_tflops"] == pytest.approx(989.4)
    assert h100["source"]
    models = client.get("/api/models").json()
    llama = next(m for m in models if m["id"] == "llama-3.1-8b")
    assert llama["kv_bytes_per_token"] == 131072 and llama["source"]
    profiles = client.get("/api/profiles").json()
    assert all(p["provenance"] in ("datasheet", "measured") for p in profiles)
    assert any(p["id"] == "h100-sxm-datasheet" and p["provenance"] == "datasheet" for p in profiles)


def test_responses_never_carry_nan(client):
    body = client.post("/api/labs/roofline", json={"history_tokens": 0, "batch": 1024}).text
    assert "NaN" not in body and "Infinity" not in body

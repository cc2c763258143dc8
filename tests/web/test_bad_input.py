"""Bad input to every lab, derived from its params schema (issue 9, "bad input").

Whatever a student types into the URL or a script posts, a lab answers 422
naming the field and what is allowed (413 for an oversized body), never a 500,
and never a NaN. Covers every lab in ``labs.LABS`` automatically.
"""

from __future__ import annotations

import json

import pytest

from labs import LABS
from labs.base import params_schema
from web.guard import MAX_BODY_BYTES, MAX_INT_DIGITS


def _numeric(slug):
    """(slug, name, variant) for every numeric range param, nullable ones included."""
    props = LABS[slug].params.model_json_schema()["properties"]
    for name, prop in props.items():
        for variant in prop.get("anyOf", [prop]):
            if variant.get("type") in ("integer", "number") and "enum" not in variant:  # enums are choices
                yield slug, name, variant


NUMERIC = [case for slug in LABS for case in _numeric(slug)]
CHOICES = [(slug, p) for slug in LABS for p in params_schema(LABS[slug].params) if p["choices"]]


def post(client, slug, body):
    return client.post(f"/api/labs/{slug}", content=body if isinstance(body, bytes | str) else json.dumps(body),
                       headers={"content-type": "application/json"})


def errors(response) -> list[dict]:
    assert response.status_code == 422, (response.status_code, response.text[:300])
    return response.json()["detail"]


@pytest.mark.parametrize("slug", list(LABS))
def test_unknown_field_is_refused_by_name(client, slug):
    (err,) = errors(post(client, slug, {"no_such_param": 1}))
    assert err["loc"] == ["body", "no_such_param"] and err["type"] == "extra_forbidden"


@pytest.mark.parametrize("slug, name, variant", NUMERIC, ids=lambda v: v if isinstance(v, str) else "")
def test_out_of_range_names_the_bound(client, slug, name, variant):
    lo, hi = variant["minimum"], variant["maximum"]
    step = 1 if variant["type"] == "integer" else 1e-6 * max(1.0, abs(hi))
    (below,) = errors(post(client, slug, {name: lo - step}))
    (above,) = errors(post(client, slug, {name: hi + step}))
    assert below["loc"][-1] == name and below["ctx"]["ge"] == lo
    assert above["loc"][-1] == name and above["ctx"]["le"] == hi


@pytest.mark.parametrize("slug, name, variant", NUMERIC, ids=lambda v: v if isinstance(v, str) else "")
@pytest.mark.parametrize("value", ["ten", [1], {"a": 1}, "1e3x"])
def test_wrong_type_is_refused(client, slug, name, variant, value):
    assert any(e["loc"][:2] == ["body", name] for e in errors(post(client, slug, {name: value})))


@pytest.mark.parametrize("slug, p", CHOICES, ids=lambda v: v if isinstance(v, str) else v["name"])
def test_unknown_choice_lists_the_valid_ones(client, slug, p):
    """Unknown gpu, model, profile, draft model or preset ids: 422, and the message lists every valid one."""
    bad = "no-such-id" if p["type"] == "string" else 3
    errs = errors(post(client, slug, {p["name"]: bad}))
    message = " ".join(e["msg"] for e in errs if e["loc"][-1] == p["name"])
    assert message, errs
    for choice in p["choices"]:
        assert str(choice["value"]) in message, (choice["value"], message)


@pytest.mark.parametrize("slug", list(LABS))
@pytest.mark.parametrize("body, says", [
    ('{"tp": NaN}', "NaN"),
    ('{"tp": Infinity}', "Infinity"),
    ('{"tp": -Infinity}', "Infinity"),
    ('{"tp": 1e999}', "too large"),
    ('{"tp": ' + "9" * (MAX_INT_DIGITS + 1) + "}", "digits"),
    ('{"tp": ' + "9" * 5000 + "}", "digits"),  # beyond Python's own int-parsing limit too
    ("[" * 5000 + "]" * 5000, "nested too deeply"),
    ('{"tp": 1', "not valid JSON"),
    (b'{"tp": "\xff"}', "not valid JSON"),
])
def test_hostile_json_is_refused_with_a_message(client, slug, body, says):
    (err,) = errors(post(client, slug, body))
    assert err["type"] == "json_invalid" and says in err["msg"]


@pytest.mark.parametrize("slug", list(LABS))
@pytest.mark.parametrize("body", ["[1, 2]", '"x"', "3", "true"])
def test_a_body_that_is_not_an_object_is_refused(client, slug, body):
    assert errors(post(client, slug, body))


@pytest.mark.parametrize("slug", list(LABS))
def test_null_body_means_defaults(client, slug):
    assert post(client, slug, "null").status_code == 200


def test_oversized_body_is_413_with_the_limit(client):
    r = post(client, "roofline", {"gpu": "x" * MAX_BODY_BYTES})
    assert r.status_code == 413
    assert f"{MAX_BODY_BYTES:,} bytes" in r.json()["detail"]


def test_oversized_chunked_body_is_413(client):
    """No Content-Length (chunked transfer): the guard counts while reading."""
    def chunks():
        for _ in range(100):
            yield b" " * 1024

    r = client.post("/api/labs/roofline", content=chunks(), headers={"content-type": "application/json"})
    assert r.status_code == 413


@pytest.mark.parametrize("field", ["custom_model", "custom_gpu"])
def test_hostile_custom_texts_are_refused(client, field):
    """The user's own config.json / GPU figures: junk, wrong types and huge numbers are 422s."""
    props = LABS["roofline"].params.model_json_schema()["properties"]
    if field not in props:
        pytest.skip(f"{field} is not a param (yet)")
    for text in ["", "not json", "[]", json.dumps({"a": 1}), json.dumps({"hidden_size": 1e300}),
                 json.dumps({"hidden_size": -5, "num_attention_heads": "x"})]:
        assert post(client, "roofline", {field: text}).status_code == 422, text

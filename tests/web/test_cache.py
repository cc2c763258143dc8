"""The per-worker result cache (web/cache.py): hits, eviction, profiles, one rendering at a time."""

from __future__ import annotations

import threading
import time

import pytest

from engine.calibration import PROFILES
from labs import LABS
from labs.base import uploaded_profile
from web.cache import ResultCache

Params = LABS["roofline"].params


class Renders:
    """A render callback that counts its calls and answers b"<n>"."""

    def __init__(self, delay_s: float = 0.0, fail: bool = False) -> None:
        self.calls, self.delay_s, self.fail = 0, delay_s, fail
        self._lock = threading.Lock()

    def __call__(self) -> bytes:
        with self._lock:
            self.calls += 1
            n = self.calls
        time.sleep(self.delay_s)
        if self.fail:
            raise RuntimeError("lab bug")
        return f"{n}".encode()


def test_identical_params_render_once():
    cache, render = ResultCache(4), Renders()
    assert cache.get("roofline", Params(batch=8), render) == b"1"
    assert cache.get("roofline", Params(batch=8), render) == b"1"  # an equal, separately built params model
    assert cache.get("roofline", Params(batch=9), render) == b"2"
    assert cache.get("other-lab", Params(batch=8), render) == b"3"  # the slug is part of the key
    assert render.calls == 3


def test_least_recently_used_is_evicted():
    cache, render = ResultCache(2), Renders()
    cache.get("roofline", Params(batch=1), render)
    cache.get("roofline", Params(batch=2), render)
    cache.get("roofline", Params(batch=1), render)  # batch=1 is now the most recent
    cache.get("roofline", Params(batch=3), render)  # evicts batch=2
    assert render.calls == 3
    cache.get("roofline", Params(batch=1), render)
    assert render.calls == 3
    cache.get("roofline", Params(batch=2), render)
    assert render.calls == 4


def test_zero_entries_turns_it_off():
    cache, render = ResultCache(0), Renders()
    cache.get("roofline", Params(), render)
    cache.get("roofline", Params(), render)
    assert render.calls == 2


def test_a_profile_registered_again_is_not_answered_from_the_old_entry(monkeypatch):
    cache, render = ResultCache(4), Renders()
    profile_id = "h100-sxm-datasheet"
    assert cache.get("roofline", Params(), render) == b"1"
    faster = PROFILES[profile_id].model_copy(update={"description": "registered again"})
    monkeypatch.setitem(PROFILES, profile_id, faster)
    assert cache.get("roofline", Params(), render) == b"2"
    assert cache.get("roofline", Params(), render) == b"2"


def test_answers_under_an_uploaded_profile_are_never_kept():
    cache, render = ResultCache(4), Renders()
    mine = PROFILES["h100-sxm-datasheet"].model_copy(update={"id": "h100-sxm-datasheet"})  # same id, not registered
    with uploaded_profile(mine):
        params = Params.model_validate({"profile": "uploaded"})
        cache.get("roofline", params, render)
        cache.get("roofline", params, render)
    assert render.calls == 2
    cache.get("roofline", Params(), render)
    assert render.calls == 3  # the datasheet answer was not taken from the uploaded one


def test_concurrent_misses_render_once():
    """A room asking for one setting at the same moment: one rendering, everyone gets it."""
    cache, render = ResultCache(4), Renders(delay_s=0.2)
    answers = []
    threads = [threading.Thread(target=lambda: answers.append(cache.get("roofline", Params(), render)))
               for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert render.calls == 1 and answers == [b"1"] * 8


def test_a_failed_render_stores_nothing():
    cache = ResultCache(4)
    with pytest.raises(RuntimeError):
        cache.get("roofline", Params(), Renders(fail=True))
    render = Renders()
    assert cache.get("roofline", Params(), render) == b"1"

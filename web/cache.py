"""An LRU cache of rendered lab answers, one per worker process.

A lab's answer is a pure function of its validated params and the profile
they resolve to, so identical requests (two hundred students opening the
same link, the "Try this" steps) can share one rendering. The key is the
frozen params model; the entry also keeps the profile object it was computed
with and is used only while the params still resolve to that very object,
so a profile registered again under the same id is never answered from an
old entry. Only answers under a registered profile (``PROFILES``) are kept:
an uploaded profile, or the datasheet profile of a user's own GPU, is made
anew for each request and is rendered every time.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable

from engine.calibration import PROFILES, Profile
from labs.base import LabParams

CACHE_ENV = "PDLAB_RESULT_CACHE"
DEFAULT_ENTRIES = 256  # answers are ~10-100 kB, so at most a few tens of MB per worker


class ResultCache:
    """Least-recently-used map from (lab slug, params) to the rendered JSON answer.

    Args:
        entries: most answers kept; 0 turns the cache off.
    """

    def __init__(self, entries: int) -> None:
        self.entries = entries
        self._items: OrderedDict[tuple[str, LabParams], tuple[Profile, bytes]] = OrderedDict()
        self._rendering: dict[tuple[str, LabParams], threading.Event] = {}
        self._lock = threading.Lock()

    def get(self, slug: str, params: LabParams, render: Callable[[], bytes]) -> bytes:
        """The cached answer for ``params``, or ``render()``'s, stored for next time.

        Only one thread renders a given key at a time; others asking for it meanwhile
        wait for that answer (a room opening one link computes it once, not once each).

        Raises:
            whatever ``render`` raises (nothing is stored then; a waiting thread renders again).
        """
        profile = params.profile_spec
        if self.entries <= 0 or PROFILES.get(profile.id) is not profile:
            return render()
        key = (slug, params)
        while True:
            with self._lock:
                entry = self._items.get(key)
                if entry is not None and entry[0] is profile:
                    self._items.move_to_end(key)
                    return entry[1]
                rendering = self._rendering.get(key)
                if rendering is None:
                    self._rendering[key] = threading.Event()
                    break
            rendering.wait()
        try:
            body = render()
            with self._lock:
                self._items[key] = (profile, body)
                self._items.move_to_end(key)
                while len(self._items) > self.entries:
                    self._items.popitem(last=False)
            return body
        finally:
            with self._lock:
                self._rendering.pop(key).set()


RESULTS = ResultCache(int(os.environ.get(CACHE_ENV, DEFAULT_ENTRIES)))

"""A vLLM-style automatic prefix cache of KV blocks, for one replica.

The design follows vLLM's automatic prefix caching (docs/design/prefix_caching.md,
science.md E.2):

* only **full** blocks are cached; a block is named by a chained hash of
  (parent block's hash, the block's tokens), so two requests share a block
  exactly when everything before it, and the block itself, are equal;
* a request reuses the longest run of leading blocks found in the cache and
  allocates the rest;
* every cached block has a reference count (requests using it); a block whose
  count drops to 0 stays cached but joins an LRU free queue, and is evicted
  from the front of that queue only when a new block needs its slot;
* a finished request frees its blocks in **reverse** order, so its last
  blocks (the longest prefixes) are evicted first.

What a block's tokens are is up to the caller: any hashable that differs
exactly when the tokens differ (the simulator uses ``(owner, index)`` pairs
instead of token ids). Python's ``hash`` of a tuple of ints is deterministic
(PYTHONHASHSEED only salts str and bytes), so runs are reproducible; vLLM
uses SHA-256 or a builtin hash the same way.
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from collections.abc import Hashable, Iterable, Sequence

BLOCK_TOKENS = 16
"""vLLM's default KV block size, tokens (docs/design/prefix_caching.md example)."""

ROOT_HASH = 0
"""Parent hash of a request's first block."""


class CacheFullError(RuntimeError):
    """Every block of the cache is in use by running requests: nothing can be evicted."""


def chain_hashes(contents: Iterable[Hashable], parent: int = ROOT_HASH) -> list[int]:
    """Hashes of consecutive blocks: h_i = hash((h_{i-1}, contents_i)), h_{-1} = ``parent``.

    Args:
        contents: each block's tokens (or anything naming them), in order.
        parent: hash of the block before the first one (``ROOT_HASH`` at a prompt's start),
            so a chain can be extended from where another ended.

    Returns:
        One int per block.
    """
    out = []
    h = parent
    for content in contents:
        h = hash((h, content))
        out.append(h)
    return out


class BlockCache:
    """The KV block pool of one replica with automatic prefix caching.

    Args:
        capacity_blocks: blocks the pool holds (the GPU memory left after the
            weights, divided by one block's KV bytes), >= 1.
        record_events: keep the hashes of blocks stored and evicted in
            ``stored`` and ``removed`` (for a cache-aware router to drain).

    Raises:
        ValueError: capacity_blocks < 1.
    """

    def __init__(self, capacity_blocks: int, *, record_events: bool = False) -> None:
        if capacity_blocks < 1:
            raise ValueError(f"capacity_blocks must be >= 1, got {capacity_blocks}")
        self.capacity_blocks = int(capacity_blocks)
        self._refs: dict[int, int] = {}  # every cached block: hash -> requests using it
        self._free: OrderedDict[int, None] = OrderedDict()  # ref 0 blocks, least recently freed first
        self._tags: dict[int, str] = {}  # what each cached block holds, for occupancy plots
        self.evictions = 0
        # KV events for a router's index, as vLLM publishes BlockStored / BlockRemoved
        self.stored: list[int] | None = [] if record_events else None
        self.removed: list[int] | None = [] if record_events else None

    def __len__(self) -> int:
        """Blocks cached (in use or free)."""
        return len(self._refs)

    @property
    def free_cached_blocks(self) -> int:
        """Cached blocks no running request uses (evictable)."""
        return len(self._free)

    def match(self, hashes: Sequence[int]) -> int:
        """How many leading blocks of ``hashes`` are cached (the lookup stops at the first miss)."""
        refs = self._refs
        n = 0
        for h in hashes:
            if h not in refs:
                break
            n += 1
        return n

    def admit(self, hashes: Sequence[int], tags: Sequence[str] | str) -> int:
        """Start a request whose blocks are ``hashes``: reuse the cached prefix, allocate the rest.

        Args:
            hashes: the request's full blocks in order (prompt, then output).
            tags: a label per block (or one for all), kept for ``occupancy``.

        Returns:
            Leading blocks found in the cache (their prefill is skipped).

        Raises:
            CacheFullError: the new blocks need more slots than are empty or
                evictable; the cache is left unchanged.
        """
        refs, free, tags_ = self._refs, self._free, self._tags
        n = len(hashes)
        empty = self.capacity_blocks - len(refs)
        if 2 * n > empty + len(free):  # might not fit: count exactly before touching anything
            new_count = sum(1 for h in hashes if h not in refs)
            touched_free = sum(1 for h in hashes if refs.get(h) == 0)
            if new_count - empty > len(free) - touched_free:
                raise CacheFullError(
                    f"request needs {new_count} new blocks; {empty} empty and "
                    f"{len(free) - touched_free} evictable of {self.capacity_blocks}"
                )
        # A block after the first miss can still be cached (its parent was evicted first);
        # it is reused like any cached block, but the lookup stopped before it, so its
        # tokens are prefilled again all the same.
        new = []  # positions of blocks not cached
        for i, h in enumerate(hashes):
            r = refs.get(h)
            if r is None:
                new.append(i)
            else:
                if r == 0:
                    del free[h]
                refs[h] = r + 1
        evict = max(len(new) - empty, 0)
        removed = self.removed
        for _ in range(evict):
            h = free.popitem(last=False)[0]
            del refs[h]
            del tags_[h]
            if removed is not None:
                removed.append(h)
        self.evictions += evict
        one_tag = isinstance(tags, str)
        for i in new:
            h = hashes[i]
            refs[h] = 1
            tags_[h] = tags if one_tag else tags[i]
        if self.stored is not None:
            self.stored.extend(hashes[i] for i in new)
        return new[0] if new else n

    def release(self, hashes: Sequence[int]) -> None:
        """Finish a request: drop one reference from each of its blocks, last block first.

        Blocks that no request uses any more stay cached and join the LRU free
        queue in that reverse order (vLLM: the longest prefixes are evicted first).

        Raises:
            KeyError: a block that is not cached (the request was never admitted).
        """
        refs, free = self._refs, self._free
        for h in reversed(hashes):
            r = refs[h] - 1
            refs[h] = r
            if r == 0:
                free[h] = None

    def occupancy(self) -> dict[str, int]:
        """Cached blocks per tag, plus ``"empty"`` for the slots holding nothing."""
        counts = dict(Counter(self._tags.values()))
        counts["empty"] = self.capacity_blocks - len(self._refs)
        return counts

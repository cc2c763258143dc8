"""The vLLM-style block cache: hash chains, reuse, reference counts, LRU eviction (science.md E.2)."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.block_cache import ROOT_HASH, BlockCache, CacheFullError, chain_hashes


def blocks(owner, n, parent=ROOT_HASH):
    return chain_hashes(((owner, i) for i in range(n)), parent)


def test_chain_hash_is_parent_then_content():
    """h_0 = hash((root, c_0)), h_1 = hash((h_0, c_1)): the definition, spelled out."""
    h = chain_hashes(["a", "b"])
    assert h[0] == hash((ROOT_HASH, "a"))
    assert h[1] == hash((h[0], "b"))


def test_equal_prefixes_share_blocks_and_the_first_difference_changes_every_later_hash():
    a = chain_hashes([1, 2, 3, 4])
    b = chain_hashes([1, 2, 9, 4])  # differs in block 2 only
    assert a[:2] == b[:2]
    assert all(x != y for x, y in zip(a[2:], b[2:]))  # block 3 has equal content but a different past


def test_a_chain_can_be_extended_from_where_another_ended():
    whole = chain_hashes([1, 2, 3])
    assert chain_hashes([3], parent=whole[1]) == whole[2:]


def test_admit_reuses_the_longest_cached_prefix_and_allocates_the_rest():
    cache = BlockCache(100)
    first = blocks("sys", 4) + blocks("req1", 2, parent=blocks("sys", 4)[-1])
    assert cache.admit(first, "x") == 0
    assert len(cache) == 6
    second = blocks("sys", 4) + blocks("req2", 3, parent=blocks("sys", 4)[-1])
    assert cache.match(second) == 4
    assert cache.admit(second, "x") == 4
    assert len(cache) == 9  # 4 shared + 2 + 3


def test_lookup_stops_at_the_first_missing_block():
    cache = BlockCache(10)
    chain = blocks("a", 3)
    cache.admit(chain[:1], "x")
    assert cache.match(chain) == 1


def test_released_blocks_stay_cached_until_their_slot_is_needed():
    cache = BlockCache(4)
    a = blocks("a", 4)
    cache.admit(a, "x")
    cache.release(a)
    assert len(cache) == 4 and cache.free_cached_blocks == 4
    assert cache.match(a) == 4  # still a hit after the request ended


def test_eviction_takes_the_least_recently_freed_block_and_the_tail_first():
    """Capacity 6. Request a (3 blocks) ends, then b (3 blocks) ends; the free queue is
    a2 a1 a0 b2 b1 b0 (each request's blocks in reverse). A new 2-block request evicts a2 and a1:
    a keeps only its first block, b keeps all three."""
    cache = BlockCache(6)
    a, b = blocks("a", 3), blocks("b", 3)
    cache.admit(a, "x")
    cache.admit(b, "x")
    cache.release(a)
    cache.release(b)
    cache.admit(blocks("c", 2), "x")
    assert cache.match(a) == 1
    assert cache.match(b) == 3
    assert cache.evictions == 2


def test_a_hit_refreshes_a_free_block():
    """Same as above, but b's blocks are reused (ref 1 again) before c arrives: a is evicted first,
    and b, in use, cannot be evicted at all."""
    cache = BlockCache(6)
    a, b = blocks("a", 3), blocks("b", 3)
    cache.admit(a, "x")
    cache.admit(b, "x")
    cache.release(a)
    cache.release(b)
    assert cache.admit(b, "x") == 3
    cache.admit(blocks("c", 3), "x")
    assert cache.match(a) == 0
    assert cache.match(b) == 3


def test_blocks_in_use_are_never_evicted_and_a_full_cache_refuses_without_changing():
    cache = BlockCache(4)
    a = blocks("a", 3)
    cache.admit(a, "x")  # in use: 3 of 4 slots
    before = (len(cache), cache.free_cached_blocks, cache.occupancy())
    with pytest.raises(CacheFullError):
        cache.admit(blocks("b", 2), "x")
    assert (len(cache), cache.free_cached_blocks, cache.occupancy()) == before
    assert cache.match(a) == 3


def test_shared_blocks_count_references():
    """Two requests hold the same prefix: releasing one leaves it in use (not evictable)."""
    cache = BlockCache(5)
    prefix = blocks("sys", 3)
    r1 = prefix + blocks("r1", 1, prefix[-1])
    r2 = prefix + blocks("r2", 1, prefix[-1])
    cache.admit(r1, "x")
    cache.admit(r2, "x")
    cache.release(r1)
    assert cache.free_cached_blocks == 1  # only r1's own block
    with pytest.raises(CacheFullError):  # 0 empty + 1 evictable < 2 needed
        cache.admit(blocks("new", 2), "x")
    cache.release(r2)
    assert cache.free_cached_blocks == 5


def test_occupancy_counts_tags_and_empty_slots():
    cache = BlockCache(10)
    prefix = blocks("sys", 3)
    cache.admit(prefix + blocks("r", 2, prefix[-1]), ["shared"] * 3 + ["own"] * 2)
    assert cache.occupancy() == {"shared": 3, "own": 2, "empty": 5}


def test_kv_events_report_stored_and_evicted_blocks():
    cache = BlockCache(2, record_events=True)
    a = blocks("a", 2)
    cache.admit(a, "x")
    assert cache.stored == a and cache.removed == []
    cache.release(a)
    cache.stored.clear()
    b = blocks("b", 1)
    cache.admit(b, "x")
    assert cache.stored == b
    assert cache.removed == [a[1]]  # the tail block goes first


def test_capacity_must_be_positive():
    with pytest.raises(ValueError, match="capacity_blocks"):
        BlockCache(0)


@settings(max_examples=60, deadline=None)
@given(
    capacity=st.integers(4, 40),
    ops=st.lists(st.tuples(st.integers(0, 5), st.integers(1, 4), st.booleans()), min_size=1, max_size=60),
)
def test_invariants_hold_under_any_sequence(capacity, ops):
    """Requests from 6 'conversations' (prefix of up to 4 blocks each) come and go at random:
    the cache never exceeds its capacity, a request finds at most its length, and the blocks a
    running request holds are always still cached."""
    cache = BlockCache(capacity)
    running: list[list[int]] = []
    for owner, n, finish in ops:
        if finish and running:
            cache.release(running.pop(0))
            continue
        chain = blocks(owner, n)
        try:
            hit = cache.admit(chain, "x")
        except CacheFullError:
            continue
        assert 0 <= hit <= n
        running.append(chain)
        assert len(cache) <= capacity
        occ = cache.occupancy()
        assert sum(occ.values()) == capacity and occ["empty"] >= 0
        for held in running:
            assert cache.match(held) == len(held)

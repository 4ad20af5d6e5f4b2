"""The KV block pool and its shared-prefix cache."""

from __future__ import annotations

import pytest

from tokenprobe.errors import ConfigError
from tokenprobe.sim.kv import BlockPool, blocks_for


def test_blocks_for_is_ceiling() -> None:
    assert [blocks_for(n, 16) for n in (0, 1, 16, 17, 32, 33)] == [0, 1, 1, 2, 2, 3]


def test_allocate_and_free() -> None:
    pool = BlockPool(10)
    pool.allocate(7)
    assert pool.free_blocks == 3 and pool.peak_used_blocks == 7
    with pytest.raises(AssertionError):
        pool.allocate(4)
    pool.free(7)
    assert pool.used_blocks == 0 and pool.peak_used_blocks == 7
    with pytest.raises(ConfigError, match="capacity_blocks"):
        BlockPool(0)


def test_prefix_shared_pinned_then_cached_then_evicted() -> None:
    pool = BlockPool(10, block_size=16, prefix_caching=True)
    # the last prompt token is always computed: a 48-token prefix of a 48-token prompt -> 2 blocks
    assert pool.shareable_blocks(48, 48) == 2
    assert pool.shareable_blocks(48, 100) == 3
    pool.allocate(4)  # request 1 computes 3 prefix blocks + 1 own
    assert pool.publish_prefix(group=0, blocks=3)
    assert pool.acquire_prefix(0, 3) == 3  # request 2 hits
    assert pool.used_blocks == 4  # shared blocks counted once
    pool.free(1)  # request 1's own block
    pool.release_prefix(0)
    pool.release_prefix(0)
    # unused: free again, but still cached
    assert pool.used_blocks == 0 and pool.cached_free_blocks == 3
    assert pool.acquire_prefix(0, 3) == 3
    pool.release_prefix(0)
    pool.allocate(8)  # needs 1 of the 3 cached blocks: the prefix is evicted
    assert pool.cached_free_blocks == 0
    assert pool.acquire_prefix(0, 3) == 0


def test_prefix_caching_off_never_shares() -> None:
    pool = BlockPool(10, prefix_caching=False)
    assert not pool.publish_prefix(0, 2)
    assert pool.acquire_prefix(0, 2) == 0


def test_a_preempted_requests_blocks_stay_cached_until_taken_tail_first() -> None:
    """vLLM v1's free queue hands out the least recently freed blocks first, and a request's
    blocks are freed tail first: a preempted request loses its last blocks first and keeps a
    findable prefix."""
    pool = BlockPool(20, block_size=16, prefix_caching=True)
    pool.allocate(12)  # request 7 holds 12 blocks, 10 of them full computed blocks
    pool.free(12, retain_seq=7, retained=10)
    assert pool.free_blocks == 20 and pool.cached_free_blocks == 10 and pool.retained(7) == 10
    pool.allocate(8)  # the 8 never-used blocks go first: nothing evicted
    assert pool.retained(7) == 10
    pool.allocate(5)  # then the 2 unretained tail blocks, then 3 of the retained ones
    assert pool.retained(7) == 7 and pool.cached_free_blocks == 7
    pool.free(5)  # freed after request 7: behind it in the queue
    pool.allocate(2)  # still taken from request 7's run, not from the newer frees
    assert pool.retained(7) == 5
    used = pool.used_blocks
    assert pool.reclaim(7, 4) == 4  # readmission reuses 4 (all it may), the 5th stays free
    assert pool.used_blocks == used + 4 and pool.retained(7) == 0
    assert pool.cached_free_blocks == 0 and pool.reclaim(7, 4) == 0


def test_without_prefix_caching_nothing_is_retained() -> None:
    pool = BlockPool(10, prefix_caching=False)
    pool.allocate(6)
    pool.free(6, retain_seq=1, retained=6)
    assert pool.retained(1) == 0 and pool.cached_free_blocks == 0 and pool.reclaim(1, 6) == 0


def test_free_order_is_tracked_only_while_a_cached_run_waits() -> None:
    """Behind no cached run, freed blocks are as good as never-used ones: nothing is tracked,
    so a run without preemptions pays nothing for prefix caching."""
    pool = BlockPool(20, block_size=16, prefix_caching=True)
    pool.allocate(10)
    pool.free(4)
    assert not pool._runs  # nothing cached: no order kept
    pool.free(4, retain_seq=3, retained=4)
    pool.free(2)  # behind request 3's run
    assert pool.retained(3) == 4 and pool._run_blocks == 6
    assert pool.reclaim(3, 4) == 4
    assert not pool._runs and pool._run_blocks == 0  # no cached run left: order forgotten

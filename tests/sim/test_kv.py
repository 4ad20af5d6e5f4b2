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

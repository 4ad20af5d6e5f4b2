"""The paged KV cache: a pool of fixed-size blocks and an optional shared-prefix cache.

Modelled on vLLM v1's `BlockPool` / `KVCacheManager` (vllm/v1/core/block_pool.py,
kv_cache_manager.py): the KV cache is `capacity_blocks` blocks of `block_size` token slots; a
sequence holding n tokens of KV owns ceil(n / block_size) blocks; only *full* blocks of a prompt
can be shared through prefix caching.

Prefix caching here covers the case the workloads describe: requests of one `prefix_group` share
their first `prefix_tokens` prompt tokens (a common system prompt). The full blocks of that prefix
are computed once, pinned while any request uses them (reference count), and when unused they
stay cached in the free pool until allocations need the space. vLLM's free queue hands out the
least recently freed blocks first, so an unused prefix is evicted only when the never-cached free
blocks run out; groups are evicted oldest first. Counts only: the simulator never needs block ids.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

from tokenprobe.errors import ConfigError


def blocks_for(tokens: int, block_size: int) -> int:
    """ceil(tokens / block_size): blocks that hold `tokens` KV entries."""
    return -(-tokens // block_size)


@dataclass(slots=True)
class _Prefix:
    blocks: int
    refs: int = 0


@dataclass(slots=True)
class BlockPool:
    """Block accounting: `used_blocks` never exceeds `capacity_blocks` (checked on every call).

    `used_blocks` counts blocks owned by sequences plus pinned prefix blocks. Cached prefix
    blocks with no user are free (allocatable) and counted in `cached_free_blocks`.
    """

    capacity_blocks: int
    block_size: int = 16
    prefix_caching: bool = False
    used_blocks: int = 0
    peak_used_blocks: int = 0
    _prefixes: dict[int, _Prefix] = field(default_factory=dict)
    _unused: OrderedDict[int, None] = field(default_factory=OrderedDict)  # LRU of refs == 0
    cached_free_blocks: int = 0
    pinned_blocks: int = 0  # blocks of prefixes in use (refs > 0), part of used_blocks

    def __post_init__(self) -> None:
        if self.capacity_blocks < 1:
            raise ConfigError("kv capacity_blocks", self.capacity_blocks, "at least one block")
        if self.block_size < 1:
            raise ConfigError("block_size", self.block_size, "an integer >= 1")

    @property
    def free_blocks(self) -> int:
        return self.capacity_blocks - self.used_blocks

    @property
    def capacity_tokens(self) -> int:
        return self.capacity_blocks * self.block_size

    def can_allocate(self, n_blocks: int) -> bool:
        return n_blocks <= self.free_blocks

    def allocate(self, n_blocks: int) -> None:
        """Take `n_blocks` free blocks; evicts unused cached prefixes when they are needed."""
        if n_blocks > self.free_blocks:
            raise AssertionError(f"allocate {n_blocks} > free {self.free_blocks}")
        self.used_blocks += n_blocks
        if self.cached_free_blocks:
            self._evict_for_new_blocks()
        if self.used_blocks > self.peak_used_blocks:
            self.peak_used_blocks = self.used_blocks

    def free(self, n_blocks: int) -> None:
        if n_blocks > self.used_blocks - self.pinned_blocks or n_blocks < 0:
            raise AssertionError(f"free {n_blocks} of {self.used_blocks} used")
        self.used_blocks -= n_blocks

    def _evict_for_new_blocks(self) -> None:
        """Unused prefixes live in the free pool; evict the oldest while they no longer fit."""
        while self.cached_free_blocks > self.free_blocks:
            group, _ = self._unused.popitem(last=False)
            self.cached_free_blocks -= self._prefixes.pop(group).blocks

    # ------------------------------------------------------------ prefix cache

    def shareable_blocks(self, prefix_tokens: int, input_tokens: int) -> int:
        """Full blocks of a prefix that may be shared; the last prompt token is always computed."""
        return min(prefix_tokens, input_tokens - 1) // self.block_size

    def acquire_prefix(self, group: int, blocks: int) -> int:
        """Pin the cached prefix of `group` if present; return its blocks (0: not cached).

        The caller then computes only the tokens after them and owns none of these blocks.
        """
        if not self.prefix_caching or blocks == 0:
            return 0
        entry = self._prefixes.get(group)
        if entry is None or entry.blocks != blocks:  # a shorter prompt: not the same blocks
            return 0
        if entry.refs == 0:  # cached but unused: its blocks leave the free pool again
            del self._unused[group]
            self.cached_free_blocks -= entry.blocks
            self.used_blocks += entry.blocks
            self.pinned_blocks += entry.blocks
            self.peak_used_blocks = max(self.peak_used_blocks, self.used_blocks)
        entry.refs += 1
        return blocks

    def publish_prefix(self, group: int, blocks: int) -> bool:
        """After a prefill computed the prefix, move `blocks` of the caller's own into the cache.

        Returns True when the caller's blocks became the (pinned) shared prefix; False when the
        group is already cached or caching is off (the caller keeps its blocks).
        """
        if not self.prefix_caching or blocks == 0 or group in self._prefixes:
            return False
        self._prefixes[group] = _Prefix(blocks, refs=1)
        self.pinned_blocks += blocks
        return True

    def release_prefix(self, group: int) -> None:
        entry = self._prefixes[group]
        entry.refs -= 1
        if entry.refs == 0:
            self.used_blocks -= entry.blocks
            self.pinned_blocks -= entry.blocks
            self.cached_free_blocks += entry.blocks
            self._unused[group] = None
            self._evict_for_new_blocks()

"""The paged KV cache: a pool of fixed-size blocks, its prefix cache and its free queue.

Modelled on vLLM v1's `BlockPool` / `KVCacheManager` (vllm/v1/core/block_pool.py,
kv_cache_manager.py): the KV cache is `capacity_blocks` blocks of `block_size` token slots; a
sequence holding n tokens of KV owns ceil(n / block_size) blocks; only *full* blocks can be found
again through prefix caching.

With prefix caching, freed blocks keep their KV until they are handed out again, and vLLM's free
queue hands out the least recently freed first (`FreeKVCacheBlockQueue`; a request's blocks are
freed tail first, so its last blocks go first). Two kinds of cached KV are found again here:
- a shared prompt prefix: requests of one `prefix_group` share their first `prefix_tokens`
  tokens (a common system prompt); its full blocks are computed once, pinned while any request
  uses them (reference count), and put at the back of the free queue when unused;
- a preempted request's own computed blocks (`free(retain_seq=...)`): vLLM v1 recomputes a
  preempted request, but its blocks stay cached, so on readmission `get_computed_blocks` skips
  what is left of them (`reclaim`).
The free queue is kept as runs of blocks in free order (`_runs`): cached runs, and anonymous runs
of blocks freed by finished requests (cached too in vLLM, but nothing here asks for them again)
behind them; free blocks outside the runs (never used, or freed while no cached run waited)
come first. With no cached run, order does not matter and nothing is tracked. Allocation
consumes from the front: a preempted request's run loses its tail blocks first (its prefix
stays findable), a shared prefix touched there is dropped whole. Counts only: the simulator
never needs block ids. Without prefix caching nothing is kept and no runs are tracked.

A hybrid model's recurrent layers (Gated DeltaNet, Mamba-2) hold a fixed state per running
sequence beside its per-token KV: vLLM v1 allocates it from the same KV memory, one state per
request for as long as it runs (`MambaManager`, the hybrid KV-cache coordinator, which pads the
attention page to the state's size). Here a sequence owns `state_blocks` more blocks than its
tokens need (`seq_blocks`): reserved at admission, freed with the rest (cost.memory
`state_blocks_per_seq` sizes them); 0 for attention-only models.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

from tokenprobe.errors import ConfigError

GROUP, SEQ, ANON = "group", "seq", "anon"  # kinds of free-queue runs


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

    `used_blocks` counts blocks owned by sequences plus pinned prefix blocks. Cached blocks with
    no user (unused prefixes, retained blocks of preempted requests) are free (allocatable) and
    counted in `cached_free_blocks`.
    """

    capacity_blocks: int
    block_size: int = 16
    prefix_caching: bool = False
    state_blocks: int = 0  # blocks of one running sequence's fixed state (hybrid models)
    used_blocks: int = 0
    peak_used_blocks: int = 0
    _prefixes: dict[int, _Prefix] = field(default_factory=dict)
    _runs: OrderedDict[tuple[str, int], int] = field(default_factory=OrderedDict)  # free queue
    _run_blocks: int = 0  # blocks in `_runs`; the free blocks outside them come first
    _anon_id: int = 0
    cached_free_blocks: int = 0
    pinned_blocks: int = 0  # blocks of prefixes in use (refs > 0), part of used_blocks

    def __post_init__(self) -> None:
        if self.capacity_blocks < 1:
            raise ConfigError("kv capacity_blocks", self.capacity_blocks, "at least one block")
        if self.block_size < 1:
            raise ConfigError("block_size", self.block_size, "an integer >= 1")
        if self.state_blocks < 0:
            raise ConfigError("state_blocks", self.state_blocks, "an integer >= 0")

    @property
    def free_blocks(self) -> int:
        return self.capacity_blocks - self.used_blocks

    @property
    def capacity_tokens(self) -> int:
        return self.capacity_blocks * self.block_size

    def seq_blocks(self, tokens: int) -> int:
        """Blocks a running sequence holding KV of `tokens` tokens owns: its tokens' blocks
        plus its fixed state (`state_blocks`)."""
        return -(-tokens // self.block_size) + self.state_blocks

    def can_allocate(self, n_blocks: int) -> bool:
        return n_blocks <= self.free_blocks

    def allocate(self, n_blocks: int) -> None:
        """Take `n_blocks` free blocks from the front of the free queue (evicting cached KV)."""
        used = self.used_blocks + n_blocks
        if used > self.capacity_blocks:
            raise AssertionError(f"allocate {n_blocks} > free {self.free_blocks}")
        self.used_blocks = used
        if self._run_blocks and self._run_blocks > self.capacity_blocks - used:
            self._consume_runs()
        if used > self.peak_used_blocks:
            self.peak_used_blocks = used

    def free(self, n_blocks: int, retain_seq: int = -1, retained: int = 0) -> None:
        """Give back `n_blocks`; with prefix caching the first `retained` of a sequence's blocks
        (its computed full blocks) stay findable by `reclaim(retain_seq)`."""
        if n_blocks > self.used_blocks - self.pinned_blocks or n_blocks < 0:
            raise AssertionError(f"free {n_blocks} of {self.used_blocks} used")
        self.used_blocks -= n_blocks
        if not self.prefix_caching:
            return
        retained = min(retained, n_blocks) if retain_seq >= 0 else 0
        self._push_anon(n_blocks - retained)  # the tail: freed first, handed out first
        if retained:
            self._push((SEQ, retain_seq), retained)
            self.cached_free_blocks += retained

    def _push(self, key: tuple[str, int], blocks: int) -> None:
        self._runs[key] = blocks
        self._run_blocks += blocks

    def _push_anon(self, blocks: int) -> None:
        # behind no cached run, a freed block is as good as a never-used one: nothing to track
        if blocks <= 0 or not self.cached_free_blocks:
            return
        if self._runs:
            last = next(reversed(self._runs))
            if last[0] == ANON:  # adjacent anonymous runs are one
                self._runs[last] += blocks
                self._run_blocks += blocks
                return
        self._anon_id += 1
        self._push((ANON, self._anon_id), blocks)

    def _consume_runs(self) -> None:
        """Runs at the front of the free queue whose blocks allocation has taken."""
        while self._run_blocks > self.free_blocks:
            key, blocks = next(iter(self._runs.items()))
            taken = self._run_blocks - self.free_blocks
            if taken < blocks and key[0] != GROUP:  # tail blocks of a run go, the rest stays
                self._runs[key] = blocks - taken
                self._run_blocks -= taken
                if key[0] == SEQ:
                    self.cached_free_blocks -= taken
                break
            del self._runs[key]  # the whole run (a prefix is only found whole)
            self._run_blocks -= blocks
            if key[0] != ANON:
                self.cached_free_blocks -= blocks
            if key[0] == GROUP:
                del self._prefixes[key[1]]
        self._forget_order_if_uncached()

    def _pop_run(self, key: tuple[str, int]) -> int:
        """Take a cached run out of the free queue (it is reused or evicted); its blocks."""
        blocks = self._runs.pop(key, 0)
        self._run_blocks -= blocks
        self.cached_free_blocks -= blocks
        self._forget_order_if_uncached()
        return blocks

    def _forget_order_if_uncached(self) -> None:
        """With no cached run left, the order of the other free blocks no longer matters."""
        if not self.cached_free_blocks and self._runs:
            self._runs.clear()
            self._run_blocks = 0

    # ------------------------------------------------------------ preempted requests

    def retained(self, seq: int) -> int:
        """Blocks of preempted sequence `seq` still cached (0: none)."""
        return self._runs.get((SEQ, seq), 0)

    def reclaim(self, seq: int, blocks: int) -> int:
        """Take back up to `blocks` of `seq`'s retained blocks as used; the rest stays free."""
        held = self._pop_run((SEQ, seq))
        if not held:
            return 0
        hit = min(held, blocks)
        self.used_blocks += hit
        self.peak_used_blocks = max(self.peak_used_blocks, self.used_blocks)
        return hit

    # ------------------------------------------------------------ prefix cache

    def shareable_blocks(self, prefix_tokens: int, input_tokens: int) -> int:
        """Full blocks of a prefix that may be shared; the last prompt token is always computed."""
        return min(prefix_tokens, input_tokens - 1) // self.block_size

    def cached_prefix_blocks(self, group: int, blocks: int) -> int:
        """The blocks `acquire_prefix(group, blocks)` would share, without pinning them."""
        if not self.prefix_caching or blocks == 0:
            return 0
        entry = self._prefixes.get(group)
        return blocks if entry is not None and entry.blocks == blocks else 0

    def acquire_prefix(self, group: int, blocks: int) -> int:
        """Pin the cached prefix of `group` if present; return its blocks (0: not cached).

        The caller then computes only the tokens after them and owns none of these blocks.
        """
        if self.cached_prefix_blocks(group, blocks) == 0:  # a shorter prompt: not the same
            return 0
        entry = self._prefixes[group]
        if entry.refs == 0:  # cached but unused: its blocks leave the free queue again
            self._pop_run((GROUP, group))
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
            self._push((GROUP, group), entry.blocks)

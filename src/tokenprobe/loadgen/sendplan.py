"""From a `Workload` to what bench sends: the same requests `simulate` runs, with prompts.

`plan_sends` draws the requests with `Workload.generate(np.random.default_rng(seed))`, exactly as
the simulator does (sim/api.py `run_workload`), so a measured and a simulated run of one workload
and seed share arrival times, lengths and prefix groups. Then:

- a dataset's lengths are recounted with the server's tokenizer (`/tokenize`; prompts with their
  special tokens, replies without) where it has one and `verify_input_tokens` holds, else they
  stay the workload's characters-per-token estimate; `counted_by` says which;
- each prefix group gets its text (`prompts.prefix_text`), fitted to `shared_prefix_tokens`;
- each synthetic request gets a prompt fitted to its input length after its group's prefix
  (`prompts.fit_prompts`); a dataset request sends its row (the prefix before it);
- the arrival kind picks the loop: closed = `concurrency` workers; every other kind is open loop
  at the requests' `arrival_s` (offline: all at 0; a trace: its timestamps).

A run stopped by `duration_s` (bench's flags only) draws more requests the same way: open loop,
the arrivals before the duration; closed loop, POOL_FOR_DURATION requests cycled. At most MAX_POOL
synthetic prompts are fitted per shape; past them, a request of the same length and group reuses
prompt i mod MAX_POOL with its words reshuffled for that cycle (`prompts.reshuffled`; fresh to a
prefix cache unless prefix reuse is allowed), and a request of another shape is fitted on its own.
Warm-up requests take the first requests' lengths without prefixes (the measured requests find
no prefix cached by the warm-up) and their own prompts; a dataset's warm-ups are its first rows.
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass, replace

import numpy as np

from tokenprobe.errors import ServerError
from tokenprobe.loadgen.client import StreamClient, WireRequest
from tokenprobe.loadgen.config import BenchConfig
from tokenprobe.loadgen.prompts import PromptItem, Tokenizer, fit_prompts, prefix_text, reshuffled
from tokenprobe.workload import (
    ESTIMATE,
    MAX_REQUESTS,
    Dataset,
    DatasetLengths,
    DatasetOptions,
    DatasetRow,
    RequestSpec,
    Workload,
    dataset_lengths,
)

POOL_FOR_DURATION = 1024  # distinct requests drawn for a closed-loop timed run
MAX_POOL = 4096
COUNT_BATCH = 256  # dataset rows counted per round (TOKENIZE_PARALLEL at a time)
SERVER_COUNT = "server /tokenize"


@dataclass(frozen=True, slots=True)
class SendPlan:
    """The run's requests and their prompts; `wire(i)` is request i as sent."""

    workload: Workload
    specs: list[RequestSpec]
    fitted: dict[int, PromptItem]
    warm: list[WireRequest]
    concurrency: int | None  # closed loop; None: open loop at the specs' arrival_s
    cycle: bool  # a timed closed loop: request i has specs[i % len(specs)]'s shape
    verified: bool
    counted_by: str | None  # a dataset's length counter
    salt: str
    pool: int
    prefixes: dict[int, str]  # prefix group -> its text

    @property
    def prompt_pool(self) -> int:
        """Distinct prompts before they cycle: a dataset's rows, or the synthetic pool."""
        return len(self.workload.dataset.rows) if self.workload.dataset else self.pool

    @property
    def multi_turn(self) -> bool:
        return self.workload.conversation.multi_turn

    @property
    def num_requests(self) -> int | None:
        return None if self.cycle else len(self.specs)

    def prompt(self, index: int) -> PromptItem:
        """Request `index`'s prompt: its dataset row (after its group's prefix), its fitted
        synthetic prompt, or past the pool a fitted one reshuffled (module docstring)."""
        if self.workload.dataset is not None:
            spec = self.specs[index % len(self.specs)]
            row = self.workload.dataset.dataset.rows[spec.item]
            if spec.turn:  # a conversation's later message (loadgen.conversations adds history)
                return PromptItem(row.followups[spec.turn - 1][0])
            prefix = self.prefixes.get(spec.prefix_group, "")
            return PromptItem(row.prompt, prefix=prefix, messages=row.messages)
        item = self.fitted.get(index)
        if item is not None:
            return item
        base = self.fitted[index % self.pool]
        cycle = index // self.pool
        if not self.salt:
            return base  # a replay: sent as it is
        return replace(base, prompt=reshuffled(base.prompt, f"{self.salt}:{cycle}"))

    def wire(self, index: int) -> WireRequest:
        spec = self.specs[index % len(self.specs)]
        item = self.prompt(index)
        group = spec.prefix_group if spec.prefix_tokens and not spec.turn else None
        return _wire(str(index), item, spec.output_tokens, group)


def _wire(
    request_id: str, item: PromptItem, output_tokens: int, prefix_group: int | None = None
) -> WireRequest:
    messages = item.messages
    if messages and item.prefix:  # the shared prefix opens the first message
        (role, content), *rest = messages
        messages = ((role, item.prefix + content), *rest)
    return WireRequest(
        request_id, item.text, output_tokens, item.input_tokens, messages, prefix_group
    )


async def plan_sends(
    config: BenchConfig, workload: Workload, client: StreamClient, salt: str
) -> SendPlan:
    """The run's requests and prompts (module docstring); `config.seed` is set."""
    assert config.seed is not None
    tokenize: Tokenizer = client.tokenize_prompt if config.verify_input_tokens else _no_tokenizer
    counted_by = None
    if workload.dataset is not None:
        workload, counted_by = await _recount(config, workload, client)
    specs, cycle = _draw(config, workload)
    prefixes = await _prefixes(workload, specs, config.seed, salt, tokenize)
    pool = min(len(specs), MAX_POOL)
    fitted, verified = await _prompts(workload, specs, pool, prefixes, config.seed, salt, tokenize)
    warm = await _warmup(config, workload, specs, config.seed, salt, tokenize)
    concurrency = workload.arrival.concurrency if workload.arrival.closed_loop else None
    return SendPlan(
        workload,
        specs,
        fitted,
        warm,
        concurrency,
        cycle,
        verified,
        counted_by,
        salt,
        pool,
        prefixes,
    )


async def _no_tokenizer(_text: str) -> int | None:
    return None


def _draw(config: BenchConfig, workload: Workload) -> tuple[list[RequestSpec], bool]:
    """The workload's requests for the seed, as the simulator draws them (module docstring)."""
    seed = config.seed

    def draw(n: int | None = None) -> list[RequestSpec]:
        return workload.generate(np.random.default_rng(seed), n)

    if config.duration_s is None:
        return draw(), False
    if workload.arrival.closed_loop:
        return draw(POOL_FOR_DURATION), True
    rate = workload.arrival.rate_per_s
    n = min(math.ceil(rate * config.duration_s * 1.2) + 16, MAX_REQUESTS)
    specs = draw(n)
    while specs[-1].arrival_s < config.duration_s and n < MAX_REQUESTS:
        n = min(2 * n, MAX_REQUESTS)
        specs = draw(n)
    return [s for s in specs if s.arrival_s < config.duration_s], False


async def _prefixes(
    workload: Workload, specs: list[RequestSpec], seed: int, salt: str, tokenize: Tokenizer
) -> dict[int, str]:
    if not workload.shared_prefix_tokens:
        return {}
    groups = sorted({s.prefix_group for s in specs})
    texts = await asyncio.gather(
        *(prefix_text(g, workload.shared_prefix_tokens, seed, salt, tokenize) for g in groups)
    )
    return dict(zip(groups, texts, strict=True))


async def _prompts(
    workload: Workload,
    specs: list[RequestSpec],
    pool: int,
    prefixes: dict[int, str],
    seed: int,
    salt: str,
    tokenize: Tokenizer,
) -> tuple[dict[int, PromptItem], bool]:
    if workload.dataset is not None:
        return {}, False  # a dataset's prompts are its rows (SendPlan.prompt)

    def shape(i: int) -> tuple[int, int]:
        return _fit_tokens(specs, i), specs[i].prefix_group

    def head(i: int) -> str:
        return "" if specs[i].turn else prefixes.get(specs[i].prefix_group, "")

    need = [*range(pool), *(i for i in range(pool, len(specs)) if shape(i) != shape(i % pool))]
    shapes = [(i, _fit_tokens(specs, i), head(i)) for i in need]
    items_list, verified = await fit_prompts(shapes, seed, tokenize, salt)
    return dict(zip(need, items_list, strict=True)), verified


def _fit_tokens(specs: list[RequestSpec], i: int) -> int:
    """The tokens request i's own prompt is fitted to: its input, or for a conversation's
    follow-up its new message (its input less the previous turn's input and output)."""
    spec = specs[i]
    if not spec.turn:
        return spec.input_tokens
    before = specs[i - 1]
    return max(spec.input_tokens - before.input_tokens - before.output_tokens, 1)


async def _warmup(
    config: BenchConfig,
    workload: Workload,
    specs: list[RequestSpec],
    seed: int,
    salt: str,
    tokenize: Tokenizer,
) -> list[WireRequest]:
    if not config.warmup:
        return []
    shapes = [specs[k % len(specs)] for k in range(config.warmup)]
    if workload.dataset is not None:
        rows = workload.dataset.dataset.rows
        return [
            WireRequest(
                f"warmup-{k}", rows[s.item].prompt, s.output_tokens, None, rows[s.item].messages
            )
            for k, s in enumerate(shapes)
        ]
    first = len(specs) + MAX_POOL  # indices no measured request has
    fit = [(first + k, s.input_tokens - s.prefix_tokens, "") for k, s in enumerate(shapes)]
    items, _ = await fit_prompts(fit, seed, tokenize, salt)
    return [
        _wire(f"warmup-{k}", item, s.output_tokens)
        for k, (item, s) in enumerate(zip(items, shapes, strict=True))
    ]


async def _recount(
    config: BenchConfig, workload: Workload, client: StreamClient
) -> tuple[Workload, str]:
    """The workload with its dataset's lengths counted by the server (the estimate stays where
    the server cannot count or `verify_input_tokens` is off)."""
    lengths = workload.dataset
    assert lengths is not None
    if not config.verify_input_tokens:
        return workload, lengths.counted_by
    # a timed run cycles through at most MAX_POOL rows: no need to count a whole ShareGPT dump
    needed = workload.size if config.duration_s is None else MAX_POOL
    recounted = await recount(lengths, client, needed, workload.conversation.multi_turn)
    if recounted is None:
        return workload, ESTIMATE
    return workload.with_dataset(recounted), SERVER_COUNT


async def recount(
    lengths: DatasetLengths, client: StreamClient, needed: int, followups: bool = False
) -> DatasetLengths | None:
    """`lengths` recounted by the server's tokenizer over the rows a run of `needed` requests
    takes (in file order, until that many fit `max_input_tokens`); None when the server has no
    /tokenize. Prompts are counted with their special tokens (as `usage.prompt_tokens` counts
    them), replies and (with `followups`) a conversation's later messages without."""
    ds, options = lengths.dataset, lengths.options or DatasetOptions()
    ins: list[int] = []
    replies: list[int | None] = []
    later: list[list[tuple[int, int | None]]] = []
    kept = 0
    for start in range(0, len(ds.rows), COUNT_BATCH):
        batch = ds.rows[start : start + COUNT_BATCH]
        counts = await asyncio.gather(*(client.tokenize_prompt(r.prompt) for r in batch))
        if any(c is None for c in counts):
            if ins:
                raise ServerError(f"the server's /tokenize stopped answering (row {start})")
            return None
        ins += [c for c in counts if c is not None]
        replies += await asyncio.gather(*(_count_reply(client, r.reply) for r in batch))
        if followups:
            later += await asyncio.gather(*(_count_followups(client, r) for r in batch))
        limit = options.max_input_tokens
        kept += sum(1 for c in counts if c is not None and (limit is None or c <= limit))
        if kept >= needed:
            break
    counted = Dataset(ds.path, ds.format, ds.rows[: len(ins)], ds.skipped)
    return dataset_lengths(counted, options, ins, replies, SERVER_COUNT, later)


async def _count_followups(client: StreamClient, row: DatasetRow) -> list[tuple[int, int | None]]:
    counts = []
    for message, reply in row.followups:
        counted = await client.count_tokens(message)
        counts.append((1 if counted is None else counted, await client.count_tokens(reply)))
    return counts


async def _count_reply(client: StreamClient, reply: str | None) -> int | None:
    return None if reply is None else await client.count_tokens(reply)

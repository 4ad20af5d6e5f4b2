"""The runner: preflight, prompts, warm-up, then the closed or open loop, records written live.

Order of a run (`run_bench_async`):
1. preflight: one tiny streaming request; a server that is unreachable, answers 404/401 or does
   not stream OpenAI chunks raises ServerError with one clear sentence (nothing is measured);
2. the workload (`BenchConfig.workload()`: the flags' or a workload file's, read and checked
   before anything is sent) and its requests and prompts (`loadgen.sendplan`: the arrival times
   and lengths `simulate` draws for the same workload and seed);
3. warm-up: `warmup` requests, not recorded;
4. measurement, on a clock restarted at 0: closed loop (`concurrency` workers, each sends its
   next request when its last one ends) or open loop (send at the arrival times, without waiting
   for answers; offline: all at 0; a trace: its timestamps; `max_concurrency` optionally caps
   requests in flight, as vLLM's flag does);
   each finished request is appended and flushed to records.jsonl as it arrives, so a killed
   run keeps every finished request; Ctrl-C (cancellation) still writes summary.json. A write
   that fails (disk full) stops the run with RunFolderWriteError (exit 1): the lines written
   before it are kept, requests in flight are abandoned.

Every secret of the run (`BenchConfig.secrets`) is written as "***" (the writer redacts), and
the config holds the URL with its credentials masked.

Send lag = sent_s - scheduled_s: how late the client sent each request (event-loop and
connection overhead; in open loop with `max_concurrency`, also the wait for a free slot).
With `duration_s`, no request is started after the duration; those in flight finish (each is
bounded by timeout_s).
"""

from __future__ import annotations

import asyncio
import itertools
import secrets
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

from tokenprobe.errors import ServerError
from tokenprobe.loadgen.client import StreamClient, Target, WireRequest
from tokenprobe.loadgen.config import BenchConfig
from tokenprobe.loadgen.conversations import run_conversations
from tokenprobe.loadgen.credentials import mask_url
from tokenprobe.loadgen.models import served_models, server_identity
from tokenprobe.loadgen.pacing import sleep_until
from tokenprobe.loadgen.sendplan import POOL_FOR_DURATION, SendPlan, plan_sends, recount
from tokenprobe.loadgen.summary import bench_summary
from tokenprobe.records import (
    DeploymentConfig,
    RequestRecord,
    Run,
    RunConfig,
    RunFolderWriteError,
    RunWriter,
)
from tokenprobe.units import now_s, wall_s
from tokenprobe.workload import DatasetLengths, workload_dict

_T = TypeVar("_T")
OnRecord = Callable[[RequestRecord], None]
# called once, right after the measurement clock restarts: (t0_s on units.now_s, the Run being
# filled, its RunWriter or None); `tokenprobe.bench` starts its telemetry there, on the same clock
OnStart = Callable[[float, Run, RunWriter | None], None]
PREFLIGHT_TIMEOUT_S = 30.0
PREFLIGHT_PROMPT = "Hello"


def run_bench(
    config: BenchConfig,
    on_record: OnRecord | None = None,
    on_start: OnStart | None = None,
    hide: Sequence[str] = (),
) -> Run:
    """Run one measurement (blocking); see `run_bench_async`."""
    return run_blocking(run_bench_async(config, on_record, on_start, hide))


def run_blocking(coro: Coroutine[Any, Any, _T]) -> _T:
    """`asyncio.run(coro)`, without asyncio repr-ing the (possibly huge) result at the end."""
    box: list[_T] = []

    async def main() -> None:
        box.append(await coro)

    asyncio.run(main())
    return box[0]


async def run_bench_async(
    config: BenchConfig,
    on_record: OnRecord | None = None,
    on_start: OnStart | None = None,
    hide: Sequence[str] = (),
) -> Run:
    """Measure the server of `config`; the Run's records are the measured requests only.

    `hide`: secrets to redact in the run folder besides the config's own (the caller's, e.g. the
    credentials of a separate /metrics URL)."""
    model_source = "given"
    if not config.model:
        config = replace(config, model=(await served_models(config.url, config.api_key()))[0])
        model_source = "server /models"
    target = Target(
        base_url=config.url,
        model=config.model,
        endpoint=config.endpoint,
        timeout_s=config.timeout_s,
        api_key=config.api_key(),
        ignore_eos=config.ignore_eos,
        extra_body=config.request_fields(),
    )
    if config.seed is None:
        config = replace(config, seed=secrets.randbits(31))
    # fresh words per run and sweep point, even with a given seed (prompts module docstring)
    salt = "" if config.allow_prefix_reuse else f"{secrets.token_hex(4)}.{config.sweep_point}"
    workload = config.workload(pool_requests=POOL_FOR_DURATION)
    connections = config.concurrency or config.max_concurrency or workload.arrival.concurrency
    async with StreamClient(target, now_s(), max_connections=connections) as client:
        template_tokens = await _template_tokens(client, await preflight(client))
        identity = await server_identity(config.url, config.api_key())
        plan = await plan_sends(config, workload, client, salt)
        warmup_errors = await _warmup(config, client, plan)
        run_config = _run_config(config, plan, *identity)
        run_config.update({
            "model_source": model_source,
            "prompt_salt": salt,
            "template_tokens": template_tokens,
            # past the pool's end: synthetic prompts' words reshuffled, a dataset's repeated
            "prompt_cycles": "reshuffled" if salt and plan.workload.dataset is None else "repeated",
            "input_tokens_verified": plan.verified,
            "dataset_tokens_counted_by": plan.counted_by,
            "warmup_errors": warmup_errors,
            "prompt_pool": plan.prompt_pool,
            "keep_alive": client.keep_alive,
        })  # fmt: skip
        client.secrets = (*client.secrets, *hide)
        return await _measure(config, client, plan, run_config, on_record, on_start)


def _run_config(
    config: BenchConfig, plan: SendPlan, server_engine: str | None, server_version: str | None
) -> dict[str, Any]:
    """The run's config.json object (records.RunConfig): the typed fields every reader shares
    (the deployment as far as bench knows it: the served model, `--gpu`, `--catalog-model`; the
    workload as `simulate` writes it; the SLOs, seed and server) beside bench's other settings
    (URL masked, never the key)."""
    settings = config.to_dict()
    owned = ("model", "gpu", "catalog_model", "seed", "slo_ttft_s", "slo_tpot_s")
    deployment = DeploymentConfig(
        model=config.model, gpu=config.gpu, catalog_model=config.catalog_model
    )
    return RunConfig(
        source="measured",
        deployment=deployment,
        workload=_workload_doc(config, plan),
        slo_ttft_s=config.slo_ttft_s,
        slo_tpot_s=config.slo_tpot_s,
        seed=config.seed,
        server_url=settings["url"],
        served_model=config.model,
        server_engine=server_engine,
        server_version=server_version,
        extra={k: v for k, v in settings.items() if k not in owned},
    ).to_dict()


def _workload_doc(config: BenchConfig, plan: SendPlan) -> dict[str, Any]:
    """The workload as `simulate` writes it; a timed run says its duration (its request count
    is the pool drawn, not what was sent), so no reader replays it as a fixed count."""
    doc = workload_dict(plan.workload)
    if config.duration_s is not None:
        doc["duration_s"] = config.duration_s
    return doc


async def preflight(client: StreamClient) -> RequestRecord:
    """One tiny request; raise ServerError saying why when the server cannot be measured.

    Its timeout is at least PREFLIGHT_TIMEOUT_S: it checks that the server answers at all, so a
    deliberately tiny timeout_s (to count timeouts) still lets the run start. A second tiny
    request follows on the same connection: when it needed a new one (or found the pooled one
    closed), the server does not keep connections alive after a stream, and the run then opens
    a fresh connection per request instead of racing the server's close (see `loadgen.client`).
    """
    timeout_s = max(client.target.timeout_s, PREFLIGHT_TIMEOUT_S)
    spec = WireRequest("preflight", PREFLIGHT_PROMPT, 1)
    record = await client.send(spec, 0.0, timeout_s=timeout_s)
    if not record.ok:
        raise ServerError(_preflight_message(client.target, record))
    opened = client.connections_opened
    again = await client.send(spec, 0.0, timeout_s=timeout_s)
    if again.ok and client.connections_opened > opened:
        client.keep_alive = False
    return record


async def _template_tokens(client: StreamClient, preflight_record: RequestRecord) -> int | None:
    """Prompt tokens the endpoint adds around a prompt: 0 for completions; for chat, the chat
    template's (its system prompt and role markers, which every request shares and a prefix
    cache may serve): the preflight's usage minus the server's /tokenize count of its prompt.
    None when the server does not say (no usage or no /tokenize)."""
    if client.target.endpoint != "chat":
        return 0
    if preflight_record.token_count_source != "usage":
        return None
    counted = await client.tokenize_prompt(PREFLIGHT_PROMPT)
    if counted is None or preflight_record.input_tokens < counted:
        return None
    return preflight_record.input_tokens - counted


def _preflight_message(target: Target, record: RequestRecord) -> str:
    kind, detail = record.error_kind or "", record.error_message or ""
    url = target.url
    if kind == "connect":
        return f"cannot reach {url}: {detail}; is the server running and the URL right?"
    if kind == "timeout":
        return f"no answer from {url} within {max(target.timeout_s, PREFLIGHT_TIMEOUT_S):g} s"
    if kind == "http_404":
        return f"{url} answered 404 (is --url the API root, ending in /v1, and --model right?)"
    if kind in ("http_401", "http_403"):
        hint = "pass the key with --api-key-env VAR or --api-key"
        return f"{url} refused the request ({kind}): {detail}; {hint}"
    if kind == "malformed_stream":
        return f"{url} is not an OpenAI-compatible streaming endpoint: {detail}"
    return f"the first request to {url} failed ({kind}): {detail}"


async def _warmup(config: BenchConfig, client: StreamClient, plan: SendPlan) -> int:
    """Send the warm-up requests (closed loop at the run's concurrency); return how many failed."""
    warm = plan.warm
    if not warm:
        return 0
    failed = 0

    def count(record: RequestRecord) -> None:
        nonlocal failed
        failed += 0 if record.ok else 1

    width = plan.concurrency or min(config.max_concurrency or 1, len(warm))
    await _closed_loop(client, lambda i: warm[i], width, len(warm), None, count)
    return failed


async def _measure(
    config: BenchConfig,
    client: StreamClient,
    plan: SendPlan,
    run_config: dict[str, Any],
    on_record: OnRecord | None,
    on_start: OnStart | None = None,
) -> Run:
    client.t0_s = now_s()
    run = Run(kind="measured", config=run_config, wall_start_s=wall_s())
    writer = (
        RunWriter(config.out, "measured", run_config, run.wall_start_s, client.secrets)
        if config.out
        else None
    )

    def emit(record: RequestRecord) -> None:
        run.records.append(record)
        if writer is not None:
            writer.add_record(record)
        if on_record is not None:
            on_record(record)

    try:
        if on_start is not None:
            on_start(client.t0_s, run, writer)

        try:
            if plan.multi_turn:
                await run_conversations(client, plan, emit, config.max_concurrency)
            elif plan.concurrency is not None:
                await _closed_loop(
                    client,
                    plan.wire,
                    plan.concurrency,
                    plan.num_requests,
                    config.duration_s,
                    emit,
                )
            else:
                await _open_loop(config, client, plan, emit)
        except* RunFolderWriteError as group:
            raise _first(group) from None
    finally:
        run.duration_s = now_s() - client.t0_s
        if writer is not None:
            _close(writer, run)
    return run


def _first(group: BaseExceptionGroup[RunFolderWriteError]) -> RunFolderWriteError:
    """The write failure that stopped the loop (out of the TaskGroup's exception group)."""
    for exc in group.exceptions:
        if isinstance(exc, RunFolderWriteError):
            return exc
        if isinstance(exc, BaseExceptionGroup):
            return _first(exc)
    raise AssertionError("except* gave a group without its exception")


def _close(writer: RunWriter, run: Run) -> None:
    """Close the writer with the summary; after a failed write, the summary is not tried (the
    disk that refused a record would refuse it too) and the failure is raised."""
    if writer.failure is not None:
        writer.close()
        raise RunFolderWriteError(
            f"{writer.failure}; the run stopped there; the {writer.records_written} records "
            f"written before it are kept in {writer.directory}"
        )
    writer.close(bench_summary(run))


async def _closed_loop(
    client: StreamClient,
    spec: Callable[[int], WireRequest],
    concurrency: int,
    num_requests: int | None,
    duration_s: float | None,
    emit: OnRecord,
) -> None:
    counter = itertools.count()
    t0 = client.t0_s

    async def worker() -> None:
        while True:
            now = now_s()
            if duration_s is not None and now - t0 >= duration_s:
                return
            index = next(counter)
            if num_requests is not None and index >= num_requests:
                return
            emit(await client.send(spec(index), now - t0))

    async with asyncio.TaskGroup() as group:
        for _ in range(concurrency):
            group.create_task(worker())


async def _open_loop(
    config: BenchConfig, client: StreamClient, plan: SendPlan, emit: OnRecord
) -> None:
    """Send request i at its arrival time, without waiting for answers (`max_concurrency`
    caps those in flight)."""
    gate = asyncio.Semaphore(config.max_concurrency) if config.max_concurrency else None

    async def one(index: int, scheduled_s: float) -> None:
        if gate is None:
            emit(await client.send(plan.wire(index), scheduled_s))
            return
        async with gate:
            emit(await client.send(plan.wire(index), scheduled_s))

    t0 = client.t0_s
    async with asyncio.TaskGroup() as group:
        for index, spec in enumerate(plan.specs):
            await sleep_until(t0 + spec.arrival_s)
            group.create_task(one(index, spec.arrival_s))


def count_dataset(
    url: str, lengths: DatasetLengths, needed: int, api_key: str | None = None
) -> DatasetLengths:
    """A dataset's lengths counted by the server at `url` (its /tokenize, as bench counts them),
    for a simulation of the same requests; ServerError when it cannot count."""

    async def count() -> DatasetLengths | None:
        async with StreamClient(Target(url, "", api_key=api_key), now_s()) as client:
            return await recount(lengths, client, needed)

    counted = run_blocking(count())
    if counted is None:
        raise ServerError(f"{mask_url(url)} has no usable /tokenize endpoint to count the dataset")
    return counted


def sweep_configs(config: BenchConfig, field: str, values: Sequence[float]) -> list[BenchConfig]:
    """One config per sweep point (`field`: "concurrency" or "rate_per_s"), each in out/<point>."""
    configs: list[BenchConfig] = []
    for value in values:
        if field == "concurrency":
            changes: dict[str, Any] = {"concurrency": int(value), "rate_per_s": None}
        else:
            changes = {"rate_per_s": float(value), "concurrency": None}
        point = f"{field}_{value:g}"
        out = str(Path(config.out) / point) if config.out else None
        configs.append(replace(config, out=out, sweep_point=len(configs), **changes))
    return configs

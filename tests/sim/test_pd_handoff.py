"""SGLang's prefill/decode handoff (sim/pd_handoff.py), on a stand-in step price so every instant
can be derived by hand: prefill steps (more than one prompt token) take 50 ms, every other step
10 ms. Llama-3.1-8B on H100 SXM, TP1 workers in one NVLink domain: a 1,601-token prompt's KV is
1,601 x 131,072 B = 209,846,272 B, 0.466 ms at 450 GB/s plus the link's latency. 1,601 = 100
blocks of 16 + 1, so the decode worker finds 100 blocks as transferred and computes one token."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from tokenprobe.cli import app
from tokenprobe.cost import Split, make_deployment
from tokenprobe.errors import ConfigError
from tokenprobe.records import RequestRecord
from tokenprobe.sim import (
    NUM_RESERVED_DECODE_TOKENS,
    DisaggResult,
    SchedulerConfig,
    StepPlan,
    build_workload,
    simulate_fleet,
)
from tokenprobe.sim.disagg import run_disaggregated
from tokenprobe.workload import Arrival, RequestSpec, Workload

DEP = make_deployment("llama-3.1-8b", "h100-sxm")
PROMPT = 1601
FRONTEND_S = 0.02
PREFILL_S, STEP_S = 0.05, 0.01
T_S = DEP.gpu.link.latency_s + PROMPT * 131_072 / 450e9  # the transfer
runner = CliRunner()


def _step(plan: StepPlan) -> tuple[float, float]:
    return (PREFILL_S if plan.prefill_tokens > 1 else STEP_S), 1.0


def _run(
    specs: list[RequestSpec], split: str = "1p1d", blocks: int = 100_000, handoff: str = "sglang"
) -> DisaggResult:
    workload = Workload(Arrival("trace", trace=tuple(specs)), name="trace")
    return run_disaggregated(
        workload, _step, DEP, SchedulerConfig(), blocks, split=Split.parse(split),
        handoff=handoff, frontend_s=FRONTEND_S,
    )  # fmt: skip


def _by_id(result: DisaggResult) -> dict[str, RequestRecord]:
    return {r.request_id: r for r in result.records}


def test_one_request_ttft_is_front_end_prefill_transfer() -> None:
    """Idle workers: the decode worker pre-allocates as soon as the request reaches it (20 ms),
    the prefill runs 50 ms, the KV lands T later and the idle decode worker takes it over at
    once, streaming the prefill's token: TTFT = 20 + 50 ms + T, no decode step in it. The other
    4 tokens take a 10 ms step each (the first also computes the prompt's last token)."""
    (record,) = _run([RequestSpec("a", 0.0, PROMPT, 5)]).records
    assert DEP.kv_bytes_per_token == 131_072
    assert record.first_token_s == pytest.approx(FRONTEND_S + PREFILL_S + T_S, abs=1e-12)
    assert record.extra["prealloc_wait_s"] == pytest.approx(0.0, abs=1e-12)
    assert record.extra["kv_transfer_s"] == pytest.approx(T_S, abs=1e-12)
    assert record.extra["handoff_wait_s"] == pytest.approx(0.0, abs=1e-12)
    assert record.output_tokens == 5
    assert record.finish_s == pytest.approx(record.first_token_s + 4 * STEP_S, abs=1e-12)


def test_the_proxy_passes_both_servers_front_ends_in_turn() -> None:
    """vLLM's proxy sends the request to the prefill server, awaits its one-token response,
    then sends it to the decode server (toy_proxy_server.py): the prefill server's front end
    (20 ms), the prefill (50 ms), the decode server's front end (20 ms), the transfer T, then
    the decode worker's first step, which computes the prompt's last token (10 ms) and yields
    the first token: TTFT = 20 + 50 + 20 ms + T + 10 ms. The other 4 tokens take 10 ms each.
    SGLang's router sends to both servers at once: one front end (the test above)."""
    result = _run([RequestSpec("a", 0.0, PROMPT, 5)], handoff="proxy")
    (record,) = result.records
    assert record.extra["prefill_done_s"] == pytest.approx(FRONTEND_S + PREFILL_S, abs=1e-12)
    assert record.extra["decode_frontend_s"] == FRONTEND_S
    assert record.extra["kv_transfer_s"] == pytest.approx(T_S, abs=1e-12)
    expected = 2 * FRONTEND_S + PREFILL_S + T_S + STEP_S
    assert record.first_token_s == pytest.approx(expected, abs=1e-12)
    assert record.finish_s == pytest.approx(expected + 4 * STEP_S, abs=1e-12)
    assert record.output_tokens == 5 and record.ok
    config = result.to_dict()["config"]
    assert config["frontend_s"] == FRONTEND_S and config["frontends_in_series"] == 2


def test_both_handoffs_wait_for_the_decode_step_in_flight() -> None:
    """A decodes from L = 70 ms + T on in 10 ms steps. B reaches the workers at L + 13 ms,
    inside A's second step: the decode worker pre-allocates at that step's end, L + 20 ms, and
    only then may B's prefill start (7 ms waited). B's KV lands at L + 70 ms + T, inside the
    step [L + 70, L + 80] ms: its first token comes at L + 80 ms (10 ms - T waited)."""
    land_a = FRONTEND_S + PREFILL_S + T_S
    t_b = land_a + 0.013 - FRONTEND_S
    records = _by_id(_run([RequestSpec("a", 0.0, PROMPT, 60), RequestSpec("b", t_b, PROMPT, 5)]))
    b = records["b"]
    assert b.extra["prealloc_wait_s"] == pytest.approx(0.007, abs=1e-9)
    assert b.extra["prefill_done_s"] == pytest.approx(land_a + 0.07, abs=1e-9)
    assert b.first_token_s == pytest.approx(land_a + 0.08, abs=1e-9)
    assert b.extra["handoff_wait_s"] == pytest.approx(STEP_S - T_S, abs=1e-9)


def test_pre_allocation_waits_for_decode_memory() -> None:
    """A decode pool of 300 blocks: a pre-allocation needs 1,601 + 512 reserved tokens = 133
    blocks free and holds 100. The first two fit (300 - 100 >= 133); the third waits until a
    running request finishes and frees its blocks; every request is still served."""
    assert NUM_RESERVED_DECODE_TOKENS == 512
    specs = [RequestSpec(str(i), 0.0, PROMPT, 20) for i in range(3)]
    result = _run(specs, blocks=300)
    records = _by_id(result)
    first_done = min(r.finish_s or 0.0 for r in result.records if r.request_id != "2")
    third = records["2"]
    assert records["0"].extra["prealloc_wait_s"] == pytest.approx(0.0, abs=1e-12)
    assert records["1"].extra["prealloc_wait_s"] == pytest.approx(0.0, abs=1e-12)
    gate = FRONTEND_S + third.extra["prealloc_wait_s"]
    assert gate >= first_done - 1e-12
    assert all(r.ok and r.output_tokens == 20 for r in result.records)
    assert result.decode[0].pool.peak_used_blocks <= 300


def test_under_load_nothing_is_lost_and_every_kv_lands_before_its_first_token() -> None:
    """SGLang's handoff with the cost model: 300 requests on 1p3d. Every request is served
    once; its prefill starts after its decode worker pre-allocated; its first token comes
    after its KV landed; the router sends them round robin (100 to each decode worker); no
    worker holds more KV than it has."""
    workload = build_workload(input_tokens=4096, output_tokens=128, rate_per_s=6, num_requests=300)
    result = simulate_fleet(DEP, workload, disaggregate="1p3d", engine="sglang")
    assert isinstance(result, DisaggResult)
    records = result.records
    assert len({r.request_id for r in records}) == 300 and all(r.ok for r in records)
    overhead = DEP.efficiency.request_overhead_s
    for r in records:
        landed = r.extra["prefill_done_s"] + r.extra["kv_transfer_s"]
        assert r.first_token_s is not None and r.first_token_s >= landed
        assert r.extra["prealloc_wait_s"] >= 0.0 and r.extra["handoff_wait_s"] >= 0.0
        assert r.extra["prefill_done_s"] >= r.sent_s + overhead + r.extra["prealloc_wait_s"]
        assert r.output_tokens == 128
    by_decode = [sum(r.extra["decode_worker"] == d for r in records) for d in range(3)]
    assert by_decode == [100, 100, 100]
    for part in result.workers:
        assert part.pool.peak_used_blocks <= part.pool.capacity_blocks
    data = result.to_dict()
    assert data["config"]["pd_handoff"] == data["handoff"]["kind"] == "sglang"
    assert data["handoff"]["frontend_s"] == overhead
    assert data["handoff"]["prealloc_wait_mean_s"] >= 0.0


def test_the_handoff_follows_the_engine_and_the_flag() -> None:
    workload = build_workload(input_tokens=64, output_tokens=8, rate_per_s=2, num_requests=4)
    for engine, flag, expected in (("vllm", None, "proxy"), ("sglang", None, "sglang"),
                                   ("sglang", "proxy", "proxy")):  # fmt: skip
        result = simulate_fleet(DEP, workload, disaggregate="1p1d", engine=engine, pd_handoff=flag)
        assert result.to_dict()["config"]["pd_handoff"] == expected
    with pytest.raises(ConfigError, match="pd_handoff"):
        simulate_fleet(DEP, workload, disaggregate="1p1d", pd_handoff="zmq")
    with pytest.raises(ConfigError, match="pd_handoff"):
        simulate_fleet(DEP, workload, replicas=2, pd_handoff="sglang")


@pytest.mark.parametrize(
    ("extra", "named"),
    [(["--disaggregate", "1p1d", "--pd-handoff", "zmq"], "pd"), (["--pd-handoff", "sglang"], "pd")],
)
def test_cli_refuses_a_bad_handoff_naming_the_flag(extra: list[str], named: str) -> None:
    args = ["simulate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--input-tokens", "64"]
    args += ["--output-tokens", "8", "--rate", "2", "--num-requests", "4", *extra]
    result = runner.invoke(app, args, env={"COLUMNS": "200"})
    assert result.exit_code == 2
    text = "".join(result.output.split())
    assert "pd_handoff" in text or "--pd-handoff" in text
    assert "Traceback" not in result.output

"""Prefill/decode disaggregation (sim/disagg.py): the KV transfer priced by hand, every
transferred block arriving before its decode starts, the decode worker finding the prompt's KV
as cached blocks, no request lost, and what disaggregation buys physically (decode steps without
prefill chunks in them)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from tokenprobe.cli import app
from tokenprobe.cost import Efficiency, make_deployment
from tokenprobe.errors import ConfigError
from tokenprobe.metrics import timeline_energy_j
from tokenprobe.sim import DisaggResult, build_workload, simulate_fleet
from tokenprobe.workload import Arrival, RequestSpec, Workload

DEP = make_deployment("llama-3.1-8b", "h100-sxm")
runner = CliRunner()


def _pd(workload: Workload, split: str = "1p1d", **kw: object) -> DisaggResult:
    result = simulate_fleet(DEP, workload, disaggregate=split, **kw)  # type: ignore[arg-type]
    assert isinstance(result, DisaggResult)
    return result


def test_a_4k_prompt_moves_its_kv_in_the_time_the_link_allows() -> None:
    """Llama-3.1-8B's KV is 32 layers x 8 KV heads x 128 x (K, V) x 2 bytes = 131,072 B per
    token, so a 4,096-token prompt moves 536,870,912 B. Two TP1 workers share one HGX H100's
    NVLink domain: 450 GB/s one way, 1.193 ms plus the link's latency. The client's first token
    comes after the prefill, the transfer and the decode worker's first step."""
    assert DEP.kv_bytes_per_token == 131_072
    one = Workload(Arrival("trace", trace=(RequestSpec("r0", 0.0, 4096, 64),)), name="one")
    result = _pd(one)
    (record,) = result.records
    expected = DEP.gpu.link.latency_s + 536_870_912 / 450e9
    assert record.extra["kv_transfer_s"] == pytest.approx(expected, rel=1e-9)
    assert record.extra["kv_link_wait_s"] == 0.0
    prefill_done = record.extra["prefill_done_s"]
    assert record.first_token_s > prefill_done + expected
    assert record.output_tokens == 64 and record.ok
    # the decode worker found every full block of the prompt but the last token's
    decode_record = result.decode[0].records[0]
    assert decode_record.extra["server_cached_tokens"] == 4095 // 16 * 16
    assert result.to_dict()["kv_transfer"]["recomputed_on_decode"] == 0


def test_across_servers_the_kv_takes_the_nics() -> None:
    """Two TP8 workers fill two HGX H100 servers: the KV goes over the decode worker's eight
    400 Gb/s NICs, 8 x 50 GB/s, in parallel: 536,870,912 B / 400 GB/s = 1.342 ms, plus the
    NVLink and the NIC latencies."""
    dep = make_deployment("llama-3.1-8b", "h100-sxm", tp=8)
    topo = dep.gpu.topology
    assert topo is not None and topo.nic_bytes_per_s == 50e9
    one = Workload(Arrival("trace", trace=(RequestSpec("r0", 0.0, 4096, 8),)), name="one")
    result = simulate_fleet(dep, one, disaggregate="1p1d")
    (record,) = result.records
    latency = dep.gpu.link.latency_s + topo.nic_latency_s
    assert record.extra["kv_transfer_s"] == pytest.approx(latency + 536_870_912 / 400e9, rel=1e-9)


def test_a_faster_link_moves_it_faster() -> None:
    one = Workload(Arrival("trace", trace=(RequestSpec("r0", 0.0, 4096, 8),)), name="one")
    nvlink = _pd(one, kv_link_bytes_per_s=450e9).records[0].extra["kv_transfer_s"]
    assert nvlink == pytest.approx(DEP.gpu.link.latency_s + 536_870_912 / 450e9, rel=1e-9)


def test_under_load_no_request_is_lost_and_every_kv_arrives_before_its_decode() -> None:
    """The proxy's fleet with a 20 ms front end per server: each request passes the prefill
    server's before its prefill and the decode server's before its KV moves."""
    overhead = 0.02
    dep = make_deployment(
        "llama-3.1-8b", "h100-sxm", efficiency=Efficiency(request_overhead_s=overhead)
    )
    workload = build_workload(input_tokens=4096, output_tokens=128, rate_per_s=6, num_requests=300)
    result = simulate_fleet(dep, workload, disaggregate="1p3d")
    assert isinstance(result, DisaggResult)
    records = result.records
    assert len({r.request_id for r in records}) == 300 and all(r.ok for r in records)
    for r in records:
        assert r.extra["decode_frontend_s"] == overhead
        assert r.extra["prefill_done_s"] >= r.sent_s + overhead
        arrived = r.extra["prefill_done_s"] + overhead + r.extra["kv_transfer_s"]
        assert r.first_token_s is not None and r.first_token_s >= arrived
        assert r.extra["kv_transfer_s"] >= r.extra["kv_link_wait_s"] >= 0.0
    for part in result.workers:
        assert part.pool.peak_used_blocks <= part.pool.capacity_blocks
    data = result.to_dict()
    assert data["disaggregate"] == "1p3d" and data["config"]["num_gpus"] == 4
    assert sum(w["completed"] for w in data["per_decode_worker"]) == 300
    run = result.run()
    energy = timeline_energy_j(run.timeline, run.duration_s or 0.0)
    assert energy == pytest.approx(data["energy"]["total_j"], rel=1e-6)


def test_decode_steps_without_prefill_chunks_are_faster() -> None:
    """4k-token prompts, 256-token outputs, 8 req/s on four H100s: aggregated, every replica's
    decode steps carry other requests' prefill chunks; disaggregated (1 prefill + 3 decode
    workers) they do not, so the decode time per token falls, while TTFT grows (one prefill
    worker, and the transfer)."""
    workload = build_workload(input_tokens=4096, output_tokens=256, rate_per_s=8, num_requests=300)
    pd = _pd(workload, "1p3d").to_dict()
    agg = simulate_fleet(DEP, workload, replicas=4, router="least-loaded").to_dict()
    assert pd["tpot_s"]["p50"] < 0.95 * agg["tpot_s"]["p50"]
    assert pd["ttft_s"]["p50"] > agg["ttft_s"]["p50"]


@pytest.mark.parametrize("text", ["3x", "0p1d", "1p0d", "p1d"])
def test_a_bad_split_names_the_flag(text: str) -> None:
    with pytest.raises(ConfigError, match="disaggregate"):
        _pd(build_workload(input_tokens=8, output_tokens=8, rate_per_s=1, num_requests=2), text)


def test_disaggregation_refuses_replicas_and_closed_loops() -> None:
    open_loop = build_workload(input_tokens=8, output_tokens=8, rate_per_s=1, num_requests=2)
    with pytest.raises(ConfigError, match="replicas"):
        simulate_fleet(DEP, open_loop, replicas=2, disaggregate="1p1d")
    closed = build_workload(input_tokens=8, output_tokens=8, concurrency=2, num_requests=4)
    with pytest.raises(ConfigError, match="arrival"):
        _pd(closed)


def test_cli_shows_the_workers_and_the_transfers(tmp_path) -> None:
    args = ["simulate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--input-tokens", "2048"]
    args += ["--output-tokens", "32", "--rate", "4", "--num-requests", "60"]
    out = tmp_path / "pd"
    result = runner.invoke(
        app, [*args, "--disaggregate", "1p2d", "--out", str(out)], env={"COLUMNS": "200"}
    )
    assert result.exit_code == 0, result.output
    assert "1p2d: decode workers" in result.output and "KV transfers: 60" in result.output
    assert runner.invoke(app, ["diagnose", str(out)]).exit_code == 0
    bad = runner.invoke(app, [*args, "--disaggregate", "2x"], env={"COLUMNS": "200"})
    assert bad.exit_code == 2 and "disaggregate" in bad.output


@pytest.mark.parametrize("value", ["0", "-5", "nan", "inf"])
def test_cli_refuses_a_bad_link_bandwidth_naming_the_flag(value: str) -> None:
    args = ["simulate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--input-tokens", "64"]
    args += ["--output-tokens", "8", "--rate", "2", "--num-requests", "4", "--disaggregate"]
    args += ["1p1d", "--kv-link-gb-per-s", value]
    result = runner.invoke(app, args, env={"COLUMNS": "200"})
    assert result.exit_code == 2, result.output
    assert "kv_link_gb_per_s" in "".join(result.output.split())
    assert "Traceback" not in result.output

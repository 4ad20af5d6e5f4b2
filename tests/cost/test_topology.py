"""Multi-node topology (cost/comm.py, cost/deployment.py): collectives priced by where they run.

Figures used below, from catalog/gpus.toml: H100 SXM NVLink4 450 GB/s one direction, 7 us per
collective; HGX/DGX H100 8 GPUs per node and per NVLink domain, one ConnectX-7 400 Gb/s
(50 GB/s) NIC per GPU, 5 us per network step; the default `efficiency.link` 0.8 applies to both.
So the achievable rates are 360 GB/s on NVLink and 40 GB/s on the NIC.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from statistics import NormalDist

import pytest
from typer.testing import CliRunner

from tokenprobe.cli import app
from tokenprobe.cost import BatchShape, Workload, make_deployment, step_cost
from tokenprobe.cost.comm import allreduce_time_s, send_time_s
from tokenprobe.cost.stepcomm import comm_breakdown
from tokenprobe.errors import ConfigError, SchemaError
from tokenprobe.hardware import get_gpu, get_host, gpu_names, load_hardware_file
from tokenprobe.plan import PlanRequest, candidates, fixed_lengths, whatif

runner = CliRunner()
NVLINK_RATE = 450e9 * 0.8
NIC_RATE = 50e9 * 0.8


def test_405b_tp16_across_two_hgx_h100_nodes_by_hand() -> None:
    """Llama-3.1-405B TP16 on 2 x HGX H100 (d = 8 GPUs per domain, m = 2 domains), a decode
    step of 64 sequences: each all-reduce is S = 64 x 16384 hidden x 2 B = 2,097,152 B.

    Single-domain ring (what was priced before): 7 us + 2·15/16·S / 360 GB/s
        = 7 + 10.923 = 17.923 us.
    Hierarchical: intra = 7 us + 2·7/8·S / 360 GB/s = 7 + 10.194 = 17.194 us (reduce-scatter +
    all-gather on NVLink); inter = 2·log2(2)·5 us + 2·1/2·(S/8) / 40 GB/s = 10 + 6.554
    = 16.554 us (each GPU all-reduces its 1/8 shard, 262,144 B, with its peer in the other
    node over its own NIC). Total 33.748 us, 1.88x the single-domain figure. Two all-reduces
    per layer x 126 layers = 252 per step: 4.333 ms on NVLink + 4.172 ms on the NICs.
    """
    dep = make_deployment("llama-3.1-405b", "h100-sxm", tp=16, weight_dtype="fp8")
    assert (dep.nodes, dep.gpus_per_node, dep.domain_gpus) == (2, 8, 8)
    s = 64 * 16384 * 2
    single = 7e-6 + 2 * 15 / 16 * s / NVLINK_RATE
    intra = 7e-6 + 2 * 7 / 8 * s / NVLINK_RATE
    inter = 2 * 5e-6 + 2 * 1 / 2 * (s / 8) / NIC_RATE
    assert allreduce_time_s(dep, s) == pytest.approx(intra + inter, rel=1e-9)
    assert (intra + inter) / single == pytest.approx(1.883, abs=1e-3)

    c = comm_breakdown(dep, BatchShape.decode(64, 2048))
    assert c["allreduce_bytes"] == s
    assert c["allreduces_per_step"] == 252
    assert c["allreduce_inter_node_bytes"] == pytest.approx(262_144)
    assert c["intra_domain_s"] == pytest.approx(252 * intra, rel=1e-9)
    assert c["inter_node_s"] == pytest.approx(252 * inter, rel=1e-9)
    assert c["intra_domain_s"] == pytest.approx(4.333e-3, abs=1e-6)
    assert c["inter_node_s"] == pytest.approx(4.172e-3, abs=1e-6)


def test_deepseek_v3_ep32_alltoall_across_four_nodes_by_hand() -> None:
    """DeepSeek-V3 with attention DP + EP32 on 4 x HGX H100 (vLLM --data-parallel-size 32
    --enable-expert-parallel), a decode step of 2048 sequences, 64 per GPU.

    Dispatch (and combine) of one MoE layer: each GPU's 64 tokens x 7168 hidden x 2 B x top-8
    copies, of which 31/32 go to other GPUs: 7,340,032 x 31/32 = 7,110,656 B leave each GPU.
    Under uniform routing 24 of those 31 peers are in the other 3 nodes: 5,505,024 B go over
    the GPU's NIC, 1,605,632 B over NVLink at the same time. NIC: 5 us + 5,505,024 / 40 GB/s =
    142.63 us; NVLink: 1,605,632 / 360 GB/s = 4.46 us, hidden under it. One all-to-all =
    7 us + 142.63 us = 149.63 us, against 7 + 7,110,656 / 360 GB/s = 26.75 us in one domain.
    58 MoE layers x 2 = 116 all-to-alls per step: 638,582,784 B over each NIC, 16.545 ms.
    The busiest of the 32 GPUs receives f times the mean GPU's bytes (cost/epbalance.py: 64 x 8
    = 512 copies a GPU at the default skew 0: f = 1 + z'·√(31/32 / 512) = 1.0909, z' = z_32 +
    (z_32² − 1)/(6·√512), z_32 = Φ⁻¹(31.625/32.25) = 2.0667), and the exchange ends with it:
    5 us + 137.63 us x f a hop over the NIC; in one domain 7 us + 19.75 us x f, 5.68 times less.
    """
    dep = make_deployment(
        "deepseek-v3", "h100-sxm", tp=32, expert_parallel=True, attention_dp=True,
        weight_dtype="fp8",
    )  # fmt: skip
    assert (dep.nodes, dep.domain_gpus) == (4, 8)
    c = comm_breakdown(dep, BatchShape.decode(2048, 2048))
    assert c["alltoalls_per_step"] == 116
    assert c["alltoall_bytes"] == pytest.approx(7_110_656)
    assert c["alltoall_inter_node_bytes"] == pytest.approx(5_505_024)
    assert c["alltoalls_per_step"] * c["alltoall_inter_node_bytes"] == pytest.approx(638_582_784)
    z = NormalDist().inv_cdf(31.625 / 32.25)
    f = 1 + (z + (z * z - 1) / (6 * math.sqrt(512))) * math.sqrt(31 / 32 / 512)
    assert f == pytest.approx(1.0909, abs=1e-4)
    assert c["ep_imbalance"] == pytest.approx(f, rel=1e-12)
    one = 7e-6 + 5e-6 + 5_505_024 * f / NIC_RATE
    assert c["alltoall_s"] == pytest.approx(116 * one, rel=1e-9)
    assert c["inter_node_s"] == pytest.approx(116 * (5e-6 + 5_505_024 * f / NIC_RATE), rel=1e-9)
    assert c["intra_domain_s"] == pytest.approx(116 * 7e-6, rel=1e-9)
    assert one / (7e-6 + 7_110_656 * f / NVLINK_RATE) == pytest.approx(5.68, abs=0.01)


def test_pipeline_sends_across_nodes_go_at_nic_speed() -> None:
    """TP4 x PP4 on 2 nodes of 8: stages hold GPUs 0-3, 4-7, 8-11, 12-15, so only the send
    from stage 1 to stage 2 leaves the node: 2 x (7 us + S / 360 GB/s) on NVLink and
    7 us + 5 us + S / 40 GB/s over the NIC (the base cost of the send plus one network step),
    with S = 8 tokens x 16384 x 2 B = 262,144 B: 2 x 7.728 + 18.554 = 34.01 us."""
    dep = make_deployment("llama-3.1-405b", "h100-sxm", tp=4, pp=4, weight_dtype="fp8")
    c = comm_breakdown(dep, BatchShape.decode(8, 1024))
    s = 8 * 16384 * 2
    assert c["pipeline_inter_node_sends"] == 1
    assert c["pipeline_send_s"] == pytest.approx(
        2 * (7e-6 + s / NVLINK_RATE) + 7e-6 + 5e-6 + s / NIC_RATE, rel=1e-9
    )
    assert c["pipeline_send_s"] == pytest.approx(34.01e-6, abs=0.01e-6)
    assert c["inter_node_s"] > send_time_s(dep, s)  # leaving the node never beats NVLink


def test_deployments_inside_one_domain_are_priced_as_before() -> None:
    """TP8 on one HGX node: the ring formula on NVLink alone, nothing on the NICs; and an
    explicit one-node placement prices exactly as the default one. GB200 NVL72: TP16 spans
    4 compute trays but one NVLink domain, so it stays on NVLink too."""
    dep = make_deployment("llama-3.1-405b", "h100-sxm", tp=8, weight_dtype="fp8")
    s = 16 * 16384 * 2
    c = comm_breakdown(dep, BatchShape.decode(16, 1024))
    ring = 7e-6 + 2 * 7 / 8 * s / NVLINK_RATE
    assert c["inter_node_s"] == 0
    assert c["allreduce_s"] == pytest.approx(252 * ring, rel=1e-12)
    placed = make_deployment(
        "llama-3.1-405b", "h100-sxm", tp=8, weight_dtype="fp8", nodes=1, gpus_per_node=8
    )
    shape = BatchShape.decode(16, 1024)
    assert step_cost(placed, shape) == step_cost(dep, shape)

    rack = make_deployment("llama-3.1-405b", "gb200", tp=16, weight_dtype="fp8")
    assert (rack.nodes, rack.gpus_per_node, rack.domain_gpus) == (4, 4, 72)
    assert not rack.crosses_domains
    assert comm_breakdown(rack, shape)["inter_node_s"] == 0


def test_a_faster_nic_never_slows_and_helps_only_across_nodes() -> None:
    """Prefill of 4096 tokens at TP16 moves 128 MiB per all-reduce: doubling the NIC (400 ->
    800 Gb/s) shortens the step; at TP8 it changes nothing."""
    shape = BatchShape.prefill(4096, 1)
    for tp, helps in ((16, True), (8, False)):
        dep = make_deployment("llama-3.1-405b", "h100-sxm", tp=tp, weight_dtype="fp8")
        topo = dep.gpu.topology
        assert topo is not None
        faster_topo = dataclasses.replace(topo, nic_bytes_per_s=2 * topo.nic_bytes_per_s)
        faster = dataclasses.replace(dep, gpu=dataclasses.replace(dep.gpu, topology=faster_topo))
        before, after = step_cost(dep, shape).time_s, step_cost(faster, shape).time_s
        assert after < before if helps else after == before


def test_whatif_ranks_the_scale_out_network_only_where_it_is_crossed() -> None:
    work = Workload(4096, 64, 8)
    multi = make_deployment("llama-3.1-405b", "h100-sxm", tp=16, weight_dtype="fp8")
    w = whatif(multi, work, target="ttft_s")
    assert w.gain("scale_out_network", "ttft_s") > 0
    single = make_deployment("llama-3.1-405b", "h100-sxm", tp=8, weight_dtype="fp8")
    assert "scale_out_network" not in whatif(single, work).upgraded


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"tp": 16, "nodes": 1}, "nodes x gpus_per_node"),
        ({"tp": 8, "nodes": 2}, "nodes=2"),
        ({"tp": 16, "gpus_per_node": 6}, "6-GPU scale-up domain"),
        ({"tp": 8, "gpus_per_node": 0}, "gpus_per_node=0"),
    ],
)
def test_bad_topology_names_the_field(kwargs: dict[str, int], needle: str) -> None:
    with pytest.raises(ConfigError, match=needle.replace("x", ".")):
        make_deployment("llama-3.1-405b", "h100-sxm", **kwargs)


@pytest.mark.parametrize(
    ("flags", "needle"),
    [
        (["--tp", "16", "--nodes", "1"], "nodesxgpus_per_node"),
        (["--tp", "16", "--gpus-per-node", "6"], "6-GPUscale-updomain"),
        (["--tp", "8", "--nodes", "3"], "nodes=3"),
    ],
)
def test_bad_topology_on_the_cli_is_one_message_exit_2(flags: list[str], needle: str) -> None:
    args = ["estimate", "--model", "llama-3.1-405b", "--gpu", "h100-sxm", *flags]
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert needle in "".join(result.output.split())
    assert len(result.output.strip().splitlines()) <= 3


def test_estimate_json_says_where_the_communication_goes() -> None:
    args = ["estimate", "--model", "llama-3.1-405b", "--gpu", "h100-sxm", "--tp", "16"]
    result = runner.invoke(app, [*args, "--weight-dtype", "fp8", "--json"])
    assert result.exit_code == 0, result.output
    comm = json.loads(result.output)["communication"]
    assert (comm["nodes"], comm["gpus_per_node"], comm["scale_up_domain_gpus"]) == (2, 8, 8)
    assert comm["nic_bytes_per_s"] == 50e9
    for stage in ("prefill", "decode_step"):
        part = comm[stage]
        assert part["inter_node_s"] > 0 and part["intra_domain_s"] > 0
        total = part["allreduce_s"] + part["alltoall_s"] + part["pipeline_send_s"]
        assert part["intra_domain_s"] + part["inter_node_s"] == pytest.approx(total)


def test_every_catalog_gpu_has_a_topology_of_whole_nodes() -> None:
    for name in gpu_names():
        topo = get_gpu(name).topology
        assert topo is not None, name
        assert topo.scale_up_gpus % topo.gpus_per_node == 0, name
    nvl72 = get_gpu("gb300").topology
    assert nvl72 is not None and nvl72.rack_scale and nvl72.nic_bytes_per_s == 800e9 / 8


def _gpu_file(tmp_path: Path, topology: str) -> Path:
    src = Path(__file__).parents[1] / "data" / "hardware" / "my_gpu.toml"
    text = src.read_text().replace("test-accel-1", "topo-accel")
    text = text.replace('"Test Accel One", "TA1"', '"Topo Accel"')
    path = tmp_path / "topo_gpu.toml"
    path.write_text(text + topology)
    return path


def test_a_user_gpu_without_topology_cannot_span_nodes(tmp_path: Path) -> None:
    path = _gpu_file(tmp_path, "")
    dep = make_deployment("llama-3.1-70b", str(path), tp=8)
    assert dep.gpu.topology is None and not dep.crosses_domains
    with pytest.raises(ConfigError, match=r"topo-accel\.topology"):
        make_deployment("llama-3.1-70b", str(path), tp=8, nodes=2, gpus_per_node=4)


def test_a_topology_that_is_not_whole_nodes_is_a_schema_error(tmp_path: Path) -> None:
    bad = (
        "[topo-accel.topology]\ngpus_per_node = 4\nscale_up_gpus = 6\n"
        "nic_gbit_per_s = 400\nnic_latency_us = 5\n"
    )
    with pytest.raises(SchemaError, match="scale_up_gpus"):
        load_hardware_file(_gpu_file(tmp_path, bad))


@pytest.mark.parametrize(
    ("host", "gpu"),
    [("dgx-h100", "h100-sxm"), ("dgx-b200", "b200"), ("gb200-nvl72-tray", "gb200"),
     ("dgx-b300", "b300")],
)  # fmt: skip
def test_a_reference_hosts_nics_are_its_gpus_nics(host: str, gpu: str) -> None:
    """DGX H100 / B200: 8 x 400 Gb/s = 3200 Gb/s; a GB200 NVL72 tray: 4 x 400; DGX B300:
    8 x 800. The host catalog and the GPU's topology describe the same NICs."""
    topo = get_gpu(gpu).topology
    assert topo is not None
    assert get_host(host).nic_bytes_per_s == pytest.approx(
        topo.gpus_per_node * topo.nic_bytes_per_s
    )


def test_plan_places_its_candidates_with_gpus_per_node() -> None:
    """`plan --gpus-per-node 4`: a TP8 candidate of H100s spans two 4-GPU servers."""
    in_len, out_len = fixed_lengths(512, 64)
    cands = candidates(["h100-sxm"], ["bf16"], [8], [256], [1.0])
    req = PlanRequest("llama-3.1-70b", 1.0, in_len, out_len, None, 0.1, cands, gpus_per_node=4)
    dep = req.deployment(cands[0])
    assert (dep.nodes, dep.gpus_per_node, dep.crosses_domains) == (2, 4, True)


def _sim_tpot_s(flags: list[str]) -> float:
    args = ["simulate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--tp", "2", *flags]
    args += ["--input-tokens", "256", "--output-tokens", "32", "--offline", "--num-requests", "8"]
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    return float(json.loads(result.output)["tpot_s"]["mean"])


def test_simulate_across_two_servers_pays_the_nic_every_step() -> None:
    """TP2 with one GPU per server: each of the 2 x 32 all-reduces of a decode step adds a
    network step pair (2 x 5 us) and its shard at NIC speed, so every step is slower."""
    assert _sim_tpot_s(["--gpus-per-node", "1"]) > _sim_tpot_s([])

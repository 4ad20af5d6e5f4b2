"""Stages outside the GPU: host CPU (E8), network (E9), loading (E10), offload and KV swap (E11)."""

from __future__ import annotations

import dataclasses

import pytest

import tokenprobe
from tokenprobe.cost import HostModel, Workload, estimate_deployment, make_deployment
from tokenprobe.cost.io import kv_swap_stage, load_stage
from tokenprobe.cost.network import sse_chunk_bytes, wire_bytes_per_token
from tokenprobe.errors import ConfigError
from tokenprobe.hardware import get_host
from tokenprobe.units import GIGA


def test_streamed_token_costs_a_few_hundred_bytes_and_no_nic_bandwidth() -> None:
    per_token = wire_bytes_per_token("meta-llama/Llama-3.1-8B-Instruct")
    assert 200 < per_token < 500
    assert wire_bytes_per_token("m", tls=True) == wire_bytes_per_token("m") + 29
    # longer model names make longer chunks (the name is repeated in every event)
    assert sse_chunk_bytes("a" * 50) == sse_chunk_bytes("a") + 49
    d = tokenprobe.estimate("llama-3.1-8b", "h100-sxm", input_tokens=1000, output_tokens=100)
    net = d.to_dict()["network"]
    assert net["request_bytes"] > 4000  # ~4 characters per prompt token
    assert net["nic_max_output_tokens_per_s"] > 1e7  # 100 GbE: tens of millions of tokens/s


def test_host_cpu_parts_sum_and_saturation_rate() -> None:
    host = HostModel()
    parts = host.request_cpu_s(1000, 200, "m")
    assert parts["tokenize_s"] == pytest.approx(1000 / host.tokenizer_tokens_per_s)
    assert parts["stream_s"] == pytest.approx(200 * host.sse_chunk_s)
    tls = dataclasses.replace(host, tls=True).request_cpu_s(1000, 200, "m")
    assert tls["tls_s"] > 0 == parts["tls_s"]
    assert sum(parts.values()) == pytest.approx(
        host.admission_cpu_s(1000, "m") + 200 * host.token_cpu_s("m")
    )
    d = tokenprobe.estimate("llama-3.1-8b", "h100-sxm", input_tokens=1000, output_tokens=200)
    h = d.to_dict()["host"]
    # one API-server process (vLLM's default), not the host's 64 cores: by hand, 300 us HTTP
    # + 1 ms tokenizer (1000 tokens at 1e6/s) + 200 x (5 + 30) us streaming + ~14 us JSON
    # + 138 us chat template (130 + 7 for one message + 4,000 characters x 0.2 ns)
    # = 8.45 ms, so ~118 requests/s
    assert h["api_server_processes"] == 1
    assert h["cpu_s_per_request"] == pytest.approx(8.45e-3, rel=0.01)
    assert h["max_requests_per_s"] == pytest.approx(1 / h["cpu_s_per_request"])
    four = tokenprobe.estimate(
        "llama-3.1-8b", "h100-sxm", input_tokens=1000, output_tokens=200, api_server_processes=4
    )
    four_rps = four.to_dict()["host"]["max_requests_per_s"]
    assert four_rps == pytest.approx(4 * h["max_requests_per_s"])


def test_chat_template_costs_per_request_message_and_character() -> None:
    # benchmarks/chat_template_cost.py's fit: 130 us a render + 7 us a message + 0.2 ns a
    # character; a 1,000-token prompt is 4,000 characters: 130 + 7 + 0.8 = 137.8 us, and a
    # 10-message conversation of the same text 130 + 70 + 0.8 = 200.8 us
    host = HostModel()
    assert host.chat_template_cpu_s(1000) == pytest.approx(137.8e-6)
    chat = dataclasses.replace(host, messages_per_request=10.0)
    assert chat.chat_template_cpu_s(1000) == pytest.approx(200.8e-6)
    assert host.request_cpu_s(1000, 1, "m")["chat_template_s"] == pytest.approx(137.8e-6)
    with pytest.raises(ConfigError, match="messages_per_request"):
        HostModel(messages_per_request=0.5)


def test_one_api_server_process_becomes_the_bound_for_a_small_fast_model() -> None:
    dep = make_deployment("qwen3-8b", "b200", weight_dtype="fp8")
    wl = Workload(input_tokens=64, output_tokens=16, batch=256)
    est = estimate_deployment(dep, wl, host_spec=get_host("default"))
    assert est.outside_gpu["host"]["bound"] == "cpu"
    many = estimate_deployment(dep, wl, host_spec=get_host("default"), api_server_processes=16)
    assert many.outside_gpu["host"]["bound"] == "gpu"
    # processes beyond the cores the engine core and GPU workers leave them do not help
    two_cores = dataclasses.replace(get_host("default"), cpu_cores=3)
    capped = estimate_deployment(dep, wl, host_spec=two_cores, api_server_processes=16)
    assert capped.outside_gpu["host"]["api_server_processes_on_own_cores"] == 1
    assert capped.outside_gpu["host"]["bound"] == "cpu"
    # a core twice as fast halves every CPU second
    fast = dataclasses.replace(get_host("default"), cpu_core_speed=2.0)
    h2 = estimate_deployment(dep, wl, host_spec=fast).outside_gpu["host"]
    h1 = est.outside_gpu["host"]
    assert h2["max_requests_per_s"] == pytest.approx(2 * h1["max_requests_per_s"])


def test_cold_start_reads_the_checkpoint_then_copies_it() -> None:
    dep = make_deployment("llama-3.1-70b", "h100-sxm", tp=4)
    host = get_host("default")
    ld = load_stage(dep, host)
    assert ld["checkpoint_bytes"] == pytest.approx(141e9, rel=0.03)
    assert ld["storage_read_s"] == pytest.approx(ld["checkpoint_bytes"] / host.nvme_bytes_per_s)
    assert ld["cold_start_s"] >= ld["warm_start_s"]
    slow = load_stage(dep, host, storage_bytes_per_s=1 * GIGA)  # network storage at 8 Gb/s
    assert slow["cold_start_s"] > ld["cold_start_s"] + 100


def test_weight_offload_slows_decode_and_frees_hbm() -> None:
    kw: dict[str, object] = {"input_tokens": 512, "output_tokens": 64}
    base = tokenprobe.estimate("llama-3.1-8b", "l4", **kw).to_dict()  # type: ignore[arg-type]
    off = tokenprobe.estimate(
        "llama-3.1-8b",
        "l4",
        cpu_offload_bytes=4 * GIGA,
        **kw,  # type: ignore[arg-type]
    ).to_dict()
    assert off["tpot_s"] > base["tpot_s"] + 4 * GIGA / 32e9 * 0.9  # PCIe 4 x16 ~ 31.5 GB/s
    freed = base["memory"]["weights_bytes_per_gpu"] - off["memory"]["weights_bytes_per_gpu"]
    assert freed == pytest.approx(4 * GIGA)
    assert off["communication"]["decode_step"]["host_offload_s"] > 0


def test_kv_swap_beats_recompute_for_long_contexts_on_pcie5() -> None:
    dep = make_deployment("llama-3.1-8b", "h100-sxm")
    long = kv_swap_stage(dep, 32_000)
    assert long["cheaper"] == "swap"
    assert long["swap_in_s"] == pytest.approx(
        long["kv_bytes_per_gpu"] / dep.gpu.host_bytes_per_s  # type: ignore[operator]
    )


def test_storage_speed_and_engine_init_are_parameters_of_the_cold_start() -> None:
    import tokenprobe

    shape = {"model": "llama-3.1-70b", "gpu": "h100-sxm", "tp": 4, "input_tokens": 1024,
             "output_tokens": 256}  # fmt: skip
    slow = tokenprobe.estimate(**shape, storage_bytes_per_s=1e9, engine_init_s=35.0)
    default = tokenprobe.estimate(**shape).to_dict()["loading"]
    slow = slow.to_dict()["loading"]
    # 141.1 GB at 1 GB/s = 141.1 s, plus the unchanged host-to-GPU copy, plus 35 s of init
    assert slow["storage_read_s"] == pytest.approx(slow["checkpoint_bytes"] / 1e9)
    assert slow["cold_start_s"] == pytest.approx(
        slow["storage_read_s"] + default["host_to_gpu_s"] + 35.0
    )
    assert default["engine_init_s"] == 20.0 and default["cold_start_s"] < slow["cold_start_s"]
    with pytest.raises(ConfigError, match="storage_bytes_per_s"):
        tokenprobe.estimate(**shape, storage_bytes_per_s=0.0)

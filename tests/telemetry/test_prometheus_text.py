"""Prometheus text exposition: dcgm-exporter and vLLM scrapes (synthetic, in their formats)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from tokenprobe.telemetry.prometheus_text import gpu_samples, parse_exposition, server_sample

DATA = Path(__file__).parents[1] / "data" / "telemetry"


def test_dcgm_exporter_scrape_becomes_one_sample_per_gpu_in_si_units():
    gpu0, gpu1 = gpu_samples((DATA / "dcgm_exporter_scrape.txt").read_text(), t_s=12.5)
    assert (gpu0.t_s, gpu0.gpu_index, gpu1.gpu_index) == (12.5, 0, 1)
    assert gpu0.power_w == pytest.approx(412.345)
    assert gpu0.energy_j == pytest.approx(8_123_456.789)  # mJ -> J
    assert gpu0.gpu_util == pytest.approx(0.93)
    assert gpu0.mem_util == pytest.approx(0.61)
    assert gpu0.mem_used_bytes == 72150 * 2**20
    assert gpu0.sm_clock_hz == pytest.approx(1.98e9)
    assert gpu0.mem_clock_hz == pytest.approx(2.619e9)
    assert gpu0.temp_c == 58
    assert gpu0.pcie_tx_bytes_per_s == 123456789
    assert gpu1.power_w == pytest.approx(655.5)
    assert gpu1.sm_clock_hz == pytest.approx(1.755e9)
    assert gpu1.gpu_util is None  # not in the scrape for GPU 1


@pytest.mark.parametrize("enforced_first", [False, True], ids=["set-first", "enforced-first"])
def test_the_enforced_power_limit_wins_over_the_set_one(enforced_first: bool) -> None:
    """An inline scrape (not a recording) with both power-limit fields, in either order: the
    sample holds the enforced one (W); a GPU with only the set limit gets that one."""
    lines = [
        'DCGM_FI_DEV_POWER_MGMT_LIMIT{gpu="0"} 700',
        'DCGM_FI_DEV_POWER_MGMT_LIMIT{gpu="1"} 350',
    ]
    enforced = 'DCGM_FI_DEV_ENFORCED_POWER_LIMIT{gpu="0"} 300'
    lines = [enforced, *lines] if enforced_first else [*lines, enforced]
    gpu0, gpu1 = gpu_samples("\n".join(lines) + "\n", t_s=0.0)
    assert gpu0.power_limit_w == pytest.approx(300.0)
    assert gpu1.power_limit_w == pytest.approx(350.0)


def test_dcgm_3_3_clocks_event_reasons_are_the_throttle_reasons() -> None:
    """An inline scrape (not a recording) in DCGM >= 3.3's naming: DCGM_FI_DEV_CLOCKS_EVENT_REASONS
    (formerly DCGM_FI_DEV_CLOCK_THROTTLE_REASONS) = 4, SW power cap, lands in throttle_reasons."""
    text = "\n".join(
        [
            "# TYPE DCGM_FI_DEV_CLOCKS_EVENT_REASONS gauge",
            'DCGM_FI_DEV_CLOCKS_EVENT_REASONS{gpu="0",modelName="NVIDIA H100"} 4',
            'DCGM_FI_DEV_SM_CLOCK{gpu="0",modelName="NVIDIA H100"} 1200',
        ]
    )
    (sample,) = gpu_samples(text, t_s=1.0)
    assert sample.throttle_reasons == 4 and isinstance(sample.throttle_reasons, int)
    assert sample.sm_clock_hz == pytest.approx(1.2e9)


@pytest.mark.parametrize("new_first", [False, True], ids=["old-first", "new-first"])
def test_the_new_clocks_event_reasons_name_wins_over_the_old_one(new_first: bool) -> None:
    """Both names in one scrape (an exporter mid-migration), in either order: the newer
    DCGM_FI_DEV_CLOCKS_EVENT_REASONS wins; a GPU with only the old name keeps that one."""
    new = 'DCGM_FI_DEV_CLOCKS_EVENT_REASONS{gpu="0"} 4'
    lines = [
        'DCGM_FI_DEV_CLOCK_THROTTLE_REASONS{gpu="0"} 0',
        'DCGM_FI_DEV_CLOCK_THROTTLE_REASONS{gpu="1"} 32',
    ]
    lines.insert(0 if new_first else len(lines), new)
    gpu0, gpu1 = gpu_samples("\n".join(lines), t_s=0.0)
    assert (gpu0.throttle_reasons, gpu1.throttle_reasons) == (4, 32)


def test_exposition_parser_reads_labels_escapes_specials_and_timestamps():
    text = (
        "# TYPE x gauge\n"
        'x{a="1",b="say \\"hi\\", ok",c="back\\\\slash"} 2.5 1700000000000\n'
        "y +Inf\n"
        "z NaN\n"
        "bad line without a value\n"
        'w{unterminated="1} 3\n'
    )
    result = parse_exposition(text)
    x, y, z = result.metrics
    assert x.labels == {"a": "1", "b": 'say "hi", ok', "c": "back\\slash"}
    assert (x.value, x.timestamp_ms) == (2.5, 1700000000000)
    assert y.value == math.inf and math.isnan(z.value)
    assert result.skipped_lines == 2


def test_vllm_metrics_give_the_servers_view():
    sample = server_sample((DATA / "vllm_metrics.txt").read_text(), t_s=3.0)
    assert sample.source == "vllm"
    assert (sample.requests_running, sample.requests_waiting) == (24.0, 7.0)
    assert sample.kv_cache_usage == pytest.approx(0.9312)
    assert sample.preemptions_total == 3.0


def test_llama_cpp_and_missing_figures():
    text = "llamacpp:requests_processing 2\nllamacpp:requests_deferred 0\n"
    sample = server_sample(text, t_s=0.0)
    assert (sample.source, sample.requests_running, sample.requests_waiting) == ("llama.cpp", 2, 0)
    assert sample.kv_cache_usage is None
    assert sample.to_dict() == {
        "t_s": 0.0,
        "requests_running": 2.0,
        "requests_waiting": 0.0,
        "source": "llama.cpp",
    }


# dcgm-exporter's label set on an A100 (from its docs' MIG example, real_public_dcgm_exporter_
# a100_mig_busy.txt), the instance lines with GPU_I_PROFILE / GPU_I_ID added
_WHOLE = 'gpu="0",UUID="GPU-34319582-d595-d1c7-d1d2-179bcfa61660",device="nvidia0"'
_INSTANCE = _WHOLE + ',GPU_I_PROFILE="1g.5gb",GPU_I_ID="13"'


@pytest.mark.parametrize("instance_first", [False, True], ids=["gpu-then-mig", "mig-then-gpu"])
def test_mig_instance_series_never_overwrite_the_whole_gpu(instance_first: bool) -> None:
    """An inline scrape (not a recording) with a whole-GPU and a MIG-instance line for the same
    fields, in either order: the sample holds the whole GPU's values; a field that only an
    instance reports stays None; an empty GPU_I_ID is no instance (Prometheus: absent)."""
    whole = [
        f"DCGM_FI_DEV_FB_USED{{{_WHOLE}}} 4845",
        f"DCGM_FI_DEV_GPU_UTIL{{{_WHOLE}}} 99",
        f'DCGM_FI_DEV_POWER_USAGE{{{_WHOLE},GPU_I_PROFILE="",GPU_I_ID=""}} 409.692000',
    ]
    instance = [
        f"DCGM_FI_DEV_FB_USED{{{_INSTANCE}}} 1024",
        f"DCGM_FI_DEV_GPU_UTIL{{{_INSTANCE}}} 12",
        f"DCGM_FI_PROF_PCIE_TX_BYTES{{{_INSTANCE}}} 33011804",
    ]
    lines = instance + whole if instance_first else whole + instance
    (gpu0,) = gpu_samples("\n".join(lines) + "\n", t_s=0.0)
    assert gpu0.gpu_index == 0
    assert gpu0.mem_used_bytes == 4845 * 2**20  # not the instance's 1024 MiB
    assert gpu0.gpu_util == pytest.approx(0.99)  # not the instance's 12 %
    assert gpu0.power_w == pytest.approx(409.692)
    assert gpu0.pcie_tx_bytes_per_s is None  # only the instance had it

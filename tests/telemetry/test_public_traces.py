"""The importers on REAL telemetry copied from public repositories (tests/data/telemetry/
real_public_*; the source, commit, license and what each one shows are in that folder's README).

Expected counts come from the files themselves by plain line counting, not from the importer;
expected values are cells read off the files by hand (quoted in the comments).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import datetime
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

from tokenprobe.hardware import get_gpu
from tokenprobe.telemetry.nvidia_smi_csv import parse_nvidia_smi_csv, read_nvidia_smi_csv
from tokenprobe.telemetry.prometheus_text import gpu_samples, parse_exposition, server_sample
from tokenprobe.telemetry.scrape import ServerScraper

DATA = Path(__file__).parents[1] / "data" / "telemetry"
MiB = 2**20

H100 = DATA / "real_public_nvidia_smi_h100_gpuburn.csv"
H100_MIG = DATA / "real_public_nvidia_smi_h100_mig_gpuburn.csv"
DCGM_T4 = DATA / "real_public_dcgm_exporter_t4_busy.txt"
DCGM_A100 = DATA / "real_public_dcgm_exporter_a100_mig_busy.txt"
SGLANG = DATA / "real_public_sglang_metrics_llama31_8b_overload.txt"
VLLM_V1 = DATA / "real_public_vllm_v1_metrics_qwen25_05b_idle.txt"

# The columns of the real 212-field header that the importer maps (the rest it ignores).
MAPPED_COLUMNS = {
    "timestamp",
    "index",
    "power.draw [W]",
    "power.draw.average [W]",
    "power.draw.instant [W]",
    "utilization.gpu [%]",
    "utilization.memory [%]",
    "memory.used [MiB]",
    "temperature.gpu",
    "clocks.current.sm [MHz]",
    "clocks.current.memory [MHz]",
    "clocks_event_reasons.active",
    "power.limit [W]",
    "enforced.power.limit [W]",
}


def _metric_lines(path: Path) -> list[str]:
    """Exposition lines that are neither blank nor comments, counted without the parser."""
    lines = [line.strip() for line in path.read_text().splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


def _csv_sections(path: Path) -> tuple[list[str], list[str]]:
    """(header lines, data lines) of an nvidia-smi CSV log, by plain text."""
    lines = [line for line in path.read_text().splitlines() if line.strip()]
    headers = [line for line in lines if line.startswith("timestamp, ")]
    return headers, [line for line in lines if not line.startswith("timestamp, ")]


# ------------------------------------------------------------------ nvidia-smi --format=csv


@pytest.mark.parametrize("path", [H100, H100_MIG], ids=["h100", "h100-mig"])
def test_full_query_gpu_capture_imports_every_row(path: Path) -> None:
    """Two `--query-gpu=<every field> --format=csv` outputs (idle, then under gpu-burn), each
    with its own header: 212 cells a line, none of them with a comma inside."""
    headers, rows = _csv_sections(path)
    assert len(headers) == 2 and len(rows) == 2
    cells = headers[0].count(",") + 1
    assert cells == 212 and headers[0] == headers[1]
    assert all(row.count(",") + 1 == cells for row in rows)
    assert {c.strip() for c in headers[0].split(",")} >= MAPPED_COLUMNS

    result = read_nvidia_smi_csv(path)
    assert result.lines_read == len(rows) and result.skipped_lines == 0
    assert len(result.samples) == len(rows)
    assert {s.gpu_index for s in result.samples} == {0}  # "index" column: 0
    assert not result.bad_values  # "[Requested functionality has been deprecated]" is unmapped
    assert len(result.ignored_columns) == cells - len(MAPPED_COLUMNS)


def test_h100_idle_then_gpu_burn_values_are_the_cells() -> None:
    result = read_nvidia_smi_csv(H100)
    idle, load = result.samples
    # timestamps "2026/07/14 08:12:38.696" and "2026/07/14 08:12:53.353" (local time)
    first = datetime(2026, 7, 14, 8, 12, 38, 696000)
    assert result.wall_start_s == pytest.approx(first.timestamp())
    assert (idle.t_s, load.t_s) == (0.0, pytest.approx(14.657, abs=1e-3))
    # idle: "69.85 W", "0 %", "0 %", "0 MiB", 41, "345 MHz", "2619 MHz", "0x0000000000000001"
    assert idle.power_w == pytest.approx(69.85)
    assert (idle.gpu_util, idle.mem_util, idle.mem_used_bytes) == (0.0, 0.0, 0.0)
    assert idle.temp_c == 41
    assert idle.sm_clock_hz == pytest.approx(345e6)
    assert idle.mem_clock_hz == pytest.approx(2619e6)
    assert idle.throttle_reasons == 0x1  # GPU idle, the only reason
    # gpu-burn: "631.95 W", "100 %", "11 %", "19818 MiB", 59, "1980 MHz", "0x0000000000000000"
    assert load.gpu_util == pytest.approx(1.0)
    assert load.mem_util == pytest.approx(0.11)
    assert load.mem_used_bytes == 19818 * MiB
    assert load.temp_c == 59
    assert load.sm_clock_hz == pytest.approx(1980e6)
    assert load.throttle_reasons == 0
    # power.limit and enforced.power.limit: "700.00 W" on both rows
    assert idle.power_limit_w == load.power_limit_w == pytest.approx(700.0)


def test_power_draw_is_not_overwritten_by_the_later_instant_column() -> None:
    """The real header has power.draw, power.draw.average, power.draw.instant (in that order):
    power.draw ("631.95 W" under load) is the figure, not power.draw.instant ("625.68 W")."""
    idle, load = read_nvidia_smi_csv(H100).samples
    assert (idle.power_w, load.power_w) == (pytest.approx(69.85), pytest.approx(631.95))
    mig_idle, mig_load = read_nvidia_smi_csv(H100_MIG).samples
    # MIG: "71.15 W" / "433.78 W" (power.draw.instant: "70.72 W" / "447.35 W")
    assert (mig_idle.power_w, mig_load.power_w) == (pytest.approx(71.15), pytest.approx(433.78))


def test_first_alias_with_a_value_wins() -> None:
    """The rule behind the fix, on a small inline log (not a recording): an [N/A] first alias
    leaves the field to the next one that has a value."""
    text = (
        "timestamp, power.draw [W], power.draw.instant [W]\n"
        "2026/07/14 08:12:53.353, 631.95 W, 625.68 W\n"
        "2026/07/14 08:12:54.353, [N/A], 625.68 W\n"
    )
    first, second = parse_nvidia_smi_csv(text).samples
    assert first.power_w == pytest.approx(631.95)
    assert second.power_w == pytest.approx(625.68)


def test_the_enforced_power_limit_wins_over_the_set_one() -> None:
    """An inline log (not a recording) in the real header's order: power.limit (set by software)
    before enforced.power.limit (the lowest of all limiters, what the board holds to). The
    enforced value is the field even though it comes later; when it is [N/A] the set one is."""
    text = (
        "timestamp, power.draw [W], power.limit [W], enforced.power.limit [W]\n"
        "2026/07/14 08:12:53.353, 295.10 W, 700.00 W, 300.00 W\n"
        "2026/07/14 08:12:54.353, 296.20 W, 700.00 W, [N/A]\n"
    )
    result = parse_nvidia_smi_csv(text)
    assert [s.power_limit_w for s in result.samples] == [pytest.approx(300.0), pytest.approx(700.0)]
    assert not result.missing and not result.bad_values


def test_a_field_is_missing_only_when_no_column_for_it_had_a_value() -> None:
    """An inline log (not a recording) with the real capture's three power columns and cells:
    power.draw [N/A] with power.draw.average "631.95 W" is a power reading, not a missing one;
    only the line where all three are [N/A] counts, once (not once a column)."""
    text = (
        "timestamp, index, power.draw [W], power.draw.average [W], power.draw.instant [W], "
        "utilization.gpu [%]\n"
        "2026/07/14 08:12:53.353, 0, [N/A], 631.95 W, 625.68 W, 100 %\n"
        "2026/07/14 08:12:54.353, 0, [N/A], [N/A], [N/A], [N/A]\n"
        "2026/07/14 08:12:55.353, 0, 631.95 W, [N/A], [N/A], 100 %\n"
    )
    result = parse_nvidia_smi_csv(text)
    assert [s.power_w for s in result.samples] == [
        pytest.approx(631.95),
        None,
        pytest.approx(631.95),
    ]
    assert result.missing == {"power_w": 1, "gpu_util": 1}
    assert not result.bad_values


def test_real_full_captures_miss_no_power_reading() -> None:
    """Both real captures have power.draw on every row ("69.85 W", "631.95 W", "71.15 W",
    "433.78 W"): no power_w is counted missing, whatever the other columns say."""
    assert "power_w" not in read_nvidia_smi_csv(H100).missing
    assert "power_w" not in read_nvidia_smi_csv(H100_MIG).missing


def test_h100_in_mig_mode_reports_no_utilization() -> None:
    """With MIG enabled ("mig.mode.current": "Enabled") nvidia-smi prints [N/A] for
    utilization.gpu and utilization.memory: the fields stay None and are counted as missing."""
    result = read_nvidia_smi_csv(H100_MIG)
    idle, load = result.samples
    assert result.missing == {"gpu_util": 2, "mem_util": 2}
    assert all(s.gpu_util is None and s.mem_util is None for s in result.samples)
    assert load.t_s == pytest.approx(16.787, abs=1e-3)  # 09:00:27.792 -> 09:00:44.579
    assert (idle.mem_used_bytes, load.mem_used_bytes) == (59 * MiB, 11125 * MiB)
    assert (idle.temp_c, load.temp_c) == (42, 53)
    assert (idle.throttle_reasons, load.throttle_reasons) == (0x1, 0)


# ------------------------------------------------------------------ dcgm-exporter /metrics


def test_dcgm_exporter_t4_scrape_in_si_units() -> None:
    """A busy T4 (default counters, no clock-event reasons field): 91 % util at 68.244 W."""
    text = DCGM_T4.read_text()
    result = parse_exposition(text)
    assert len(result.metrics) == len(_metric_lines(DCGM_T4)) == 20
    assert result.skipped_lines == 0
    (t4,) = gpu_samples(text, t_s=4.0)
    assert (t4.t_s, t4.gpu_index) == (4.0, 0)
    assert t4.power_w == pytest.approx(68.244)
    assert t4.energy_j == pytest.approx(15_152_422.938)  # "15152422938" mJ
    assert t4.gpu_util == pytest.approx(0.91)
    assert t4.mem_util == pytest.approx(0.73)
    assert t4.mem_used_bytes == 5120 * MiB
    assert t4.sm_clock_hz == pytest.approx(660e6)
    assert t4.mem_clock_hz == pytest.approx(5000e6)
    assert t4.temp_c == 74
    assert (t4.pcie_tx_bytes_per_s, t4.pcie_rx_bytes_per_s) == (4791810, 6935930)
    assert t4.throttle_reasons is None
    assert t4.power_limit_w is None  # no power-limit field among the default counters
    assert result.metrics[0].labels["modelName"] == "Tesla T4"


def test_dcgm_exporter_a100_with_a_mig_instance_is_one_gpu_at_its_power_cap() -> None:
    """The A100's own lines plus four GPU-instance lines (GPU_I_PROFILE="1g.5gb") that carry the
    same gpu="0" label: one sample, with the whole GPU's figures."""
    text = DCGM_A100.read_text()
    result = parse_exposition(text)
    assert len(result.metrics) == len(_metric_lines(DCGM_A100)) == 21
    assert result.skipped_lines == 0  # the three-space indentation of the docs is tolerated
    mig = [m for m in result.metrics if "GPU_I_PROFILE" in m.labels]
    assert len(mig) == 4 and {m.labels["GPU_I_PROFILE"] for m in mig} == {"1g.5gb"}
    (a100,) = gpu_samples(text, t_s=0.0)
    assert a100.gpu_index == 0
    assert a100.power_w == pytest.approx(409.692)
    assert a100.power_w >= get_gpu("a100-sxm-40gb").tdp_w  # 400 W: at (just over) the cap
    assert a100.energy_j == pytest.approx(319_159.391)  # "319159391" mJ
    assert a100.mem_used_bytes == 4845 * MiB
    assert a100.sm_clock_hz == pytest.approx(1215e6)
    assert a100.temp_c == 61
    assert a100.gpu_util is None  # only DCGM_FI_PROF_GR_ENGINE_ACTIVE, no DCGM_FI_DEV_GPU_UTIL


# ------------------------------------------------------------------ LLM servers' /metrics


def test_sglang_scrape_of_an_overloaded_server() -> None:
    """Llama-3.1-8B-Instruct: 162 running, 2826 queued, token (KV) usage 0.28."""
    text = SGLANG.read_text()
    result = parse_exposition(text)
    assert len(result.metrics) == len(_metric_lines(SGLANG)) == 91
    assert result.skipped_lines == 0
    inf = [m for m in result.metrics if m.labels.get("le") == "+Inf"]
    assert [m.value for m in inf] == [11008.0, 11228.0, 7.400757e06, 14007.0]
    sample = server_sample(text, t_s=2.0)
    assert sample.source == "sglang"
    assert (sample.requests_running, sample.requests_waiting) == (162.0, 2826.0)
    assert sample.kv_cache_usage == pytest.approx(0.28)
    assert sample.preemptions_total is None  # this SGLang exported no preemption counter


def test_vllm_v1_scrape_of_an_idle_server() -> None:
    """vLLM V1 exposition (engine label, _created series, kv_cache_usage_perc, cache_config_info
    with odd label values such as "set()"), from a server that had served nothing yet."""
    text = VLLM_V1.read_text()
    assert "vllm:kv_cache_usage_perc{" in text and "vllm:gpu_cache_usage_perc" not in text
    result = parse_exposition(text)
    assert len(result.metrics) == len(_metric_lines(VLLM_V1)) == 395
    assert result.skipped_lines == 0
    (info,) = [m for m in result.metrics if m.name == "vllm:cache_config_info"]
    assert info.labels["num_gpu_blocks"] == "101625"
    assert info.labels["cpu_offload_params"] == "set()"
    assert info.labels["engine"] == "0"
    sample = server_sample(text, t_s=0.0)
    assert sample.source == "vllm"
    assert (sample.requests_running, sample.requests_waiting) == (0.0, 0.0)
    assert (sample.kv_cache_usage, sample.preemptions_total) == (0.0, 0.0)


class _Replay(BaseHTTPRequestHandler):
    body = b""

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def replay_server() -> Iterator[tuple[HTTPServer, type[_Replay]]]:
    handler = type("Replay", (_Replay,), {})
    server = HTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server, handler
    server.shutdown()
    thread.join()
    server.server_close()


def test_scraper_reads_the_real_sglang_page_over_http(
    replay_server: tuple[HTTPServer, type[_Replay]],
) -> None:
    """ServerScraper against a local HTTP server replaying the recorded page byte for byte."""
    server, handler = replay_server
    handler.body = SGLANG.read_bytes()
    scraper = ServerScraper(f"http://127.0.0.1:{server.server_port}/metrics", period_s=1.0)
    sample = scraper.scrape_once(7.5)
    assert sample.error is None and scraper.failures == 0 and scraper.notes == []
    assert (sample.t_s, sample.source) == (7.5, "sglang")
    assert (sample.requests_running, sample.requests_waiting) == (162.0, 2826.0)
    assert sample.kv_cache_usage == pytest.approx(0.28)

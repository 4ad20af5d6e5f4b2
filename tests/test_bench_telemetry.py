"""`tokenprobe bench --telemetry` (tokenprobe.bench): load generator, host sampler and the server's
own /metrics on one clock, into one run folder.

The end-to-end test uses the REAL llama.cpp server (xllamacpp + SmolLM2-135M, 1 thread) of
tests/loadgen; there is no NVIDIA GPU here, so the run must record host samples and llama.cpp's
/metrics samples and say that NVML is missing. The other tests use no server at all (a dead port)
or records written by hand in the test.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

import tokenprobe.cli.bench  # noqa: F401  (registers the command on app)
from loadgen.conftest import LlamaServer, start_llama_server
from tokenprobe.cli.app import app
from tokenprobe.diagnose import diagnose
from tokenprobe.errors import SchemaError
from tokenprobe.records import (
    HostSample,
    Run,
    ServerSample,
    TelemetrySample,
    read_run,
    write_run,
)
from tokenprobe.telemetry.scrape import ServerScraper, metrics_url

runner = CliRunner()


@pytest.fixture(scope="module")
def llama_and_load_s(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[LlamaServer, float]]:
    """The real llama.cpp server, 2 slots, 1 thread (started by tests/loadgen/conftest.py's code),
    and its launch-to-healthy time in seconds, measured here."""
    start_s = time.perf_counter()
    started = start_llama_server(tmp_path_factory.mktemp("llama") / "server.log", parallel=2)
    load_s = time.perf_counter() - start_s
    try:
        yield started, load_s
    finally:
        started.stop()


def test_bench_telemetry_records_host_and_server_metrics_on_the_run_clock(
    llama_and_load_s: tuple[LlamaServer, float], tmp_path: Path
) -> None:
    server, load_s = llama_and_load_s
    out = tmp_path / "run"
    args = ["bench", "--url", server.url, "--model", "smollm2", "--out", str(out)]
    args += ["--concurrency", "2", "--num-requests", "8", "--input-tokens", "32"]
    args += ["--output-tokens", "48", "--telemetry", "--telemetry-period-s", "0.05"]
    args += ["--server-pid", str(server.proc.pid), "--server-load-s", f"{load_s:.3f}", "--json"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    run = read_run(out)
    assert run.warnings == []
    assert [r.error_kind for r in run.records] == [None] * 8
    duration = run.duration_s
    assert duration is not None and duration > 0.3

    # host samples: on the run clock, every ~50 ms, with the server process's CPU share
    assert len(run.host) >= 0.5 * duration / 0.05
    times = [h.t_s for h in run.host]
    assert times == sorted(times) and 0 <= times[0] < 0.2 and times[-1] <= duration + 0.05
    busy = [h.process_cpu_util for h in run.host if h.process_cpu_util is not None]
    assert busy and max(busy) > 0.3  # the 1-thread server decodes during the run

    # llama.cpp's own /metrics (derived from --url), at >= 0.25 s, seeing requests in flight
    assert run.telemetry_notes["server_metrics_url"] == server.root_url + "/metrics"
    assert run.server and all(s.error is None for s in run.server)
    assert {s.source for s in run.server} == {"llama.cpp"}
    assert max(s.requests_running or 0 for s in run.server) >= 1
    assert all(0 <= s.t_s <= duration + 0.3 for s in run.server)

    # no NVML here: no GPU samples, and a note that says so (in the folder and the summary)
    if not run.telemetry:
        assert any("NVML" in n for n in run.telemetry_notes["notes"])
        assert any("NVML" in n for n in summary["telemetry"]["notes"])
    assert summary["telemetry"]["host_samples"] == len(run.host)
    assert summary["telemetry"]["server_samples"] == len(run.server)
    assert run.config["telemetry"]["period_s"] == 0.05
    assert json.loads((out / "summary.json").read_text())["telemetry"] == summary["telemetry"]

    # the diagnosis of this real run: one pegged CPU thread, no GPU; loading as its own domain
    result = diagnose(run)
    assert {"cpu-bound", "slow-loading"} <= result.kinds()
    loading = next(f for f in result.findings if f.kind == "slow-loading")
    assert loading.evidence["server_load_s"] == pytest.approx(load_s, abs=1e-3)
    assert "memory-bandwidth-bound" not in result.kinds()


def test_scraper_on_a_dead_port_records_errors_and_one_note_not_a_crash() -> None:
    scraper = ServerScraper("http://127.0.0.1:9/metrics", period_s=0.3)
    first, second = scraper.scrape_once(0.0), scraper.scrape_once(0.3)
    assert first.error is not None and second.error is not None
    assert first.requests_running is None
    assert scraper.failures == 2 and len(scraper.notes) == 1
    assert "127.0.0.1:9/metrics" in scraper.notes[0]


@pytest.mark.parametrize(
    ("api", "expected"),
    [
        ("http://h:8000/v1", "http://h:8000/metrics"),
        ("http://h:8000/v1/", "http://h:8000/metrics"),
        ("http://h:8080", "http://h:8080/metrics"),
    ],
)
def test_metrics_url_sits_beside_the_api_root(api: str, expected: str) -> None:
    assert metrics_url(api) == expected


def test_run_folder_round_trips_host_server_and_notes(tmp_path: Path) -> None:
    """Records written by hand: every new field survives write_run -> read_run."""
    run = Run(
        kind="measured",
        telemetry=[TelemetrySample(t_s=0.0, gpu_index=0, power_w=100.0)],
        host=[HostSample(0.0, (0.5, 1.0), 1e9, 2e9, 1.0, 2.0, 0.9, {"package-0:0": 3.5})],
        server=[ServerSample(0.1, 2.0, 1.0, 0.5, 0.0, "vllm"), ServerSample(0.2, error="refused")],
        telemetry_notes={"period_s": 0.1, "notes": ["NVML unavailable"]},
    )
    back = read_run(write_run(run, tmp_path))
    assert back.host == run.host and back.server == run.server
    assert back.telemetry_notes == run.telemetry_notes
    assert back.host[0].cpu_util == 0.75


def test_read_run_without_telemetry_files_and_with_bad_notes(tmp_path: Path) -> None:
    write_run(Run(kind="simulated"), tmp_path)
    assert not (tmp_path / "host.jsonl").exists()
    back = read_run(tmp_path)
    assert back.host == [] and back.server == [] and back.telemetry_notes == {}
    (tmp_path / "telemetry_notes.json").write_text("{not json")
    assert read_run(tmp_path).telemetry_notes == {}
    assert any("telemetry_notes.json" in w for w in read_run(tmp_path).warnings)


def test_a_bad_host_line_names_the_file_and_line(tmp_path: Path) -> None:
    write_run(Run(kind="measured", host=[HostSample(0.0)]), tmp_path)
    with (tmp_path / "host.jsonl").open("a") as f:
        f.write('{"t_s": 1.0, "cpu_util_per_core": ["x"]}\n')
    with pytest.raises(SchemaError, match=r"host\.jsonl:2"):
        read_run(tmp_path)


def test_credentials_of_a_separate_metrics_url_are_written_nowhere(tmp_path: Path) -> None:
    """A /metrics that fails (the fake server has none) puts its URL into notes and samples:
    the URL's password and token must come out as *** there too."""
    from loadgen.fake_server import FakeServer

    out = tmp_path / "run"
    with FakeServer() as fake:
        metrics = f"http://mu:mpw-4242@127.0.0.1:{fake.port}/nowhere?token=mt-77"
        args = ["bench", "--url", fake.url("ok"), "--model", "m", "--out", str(out)]
        args += ["--concurrency", "1", "--num-requests", "3", "--input-tokens", "4"]
        args += ["--output-tokens", "3", "--telemetry", "--telemetry-period-s", "0.05"]
        args += ["--server-metrics-url", metrics]
        result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert read_run(out).server, "the failing scrape is recorded"
    for path in out.iterdir():
        text = path.read_text()
        assert "mpw-4242" not in text and "mt-77" not in text, path.name
    config = json.loads((out / "config.json").read_text())["config"]
    assert config["telemetry"]["server_metrics_url"].endswith("/nowhere?token=***")
    assert "mpw-4242" not in "".join(result.output.split())

"""The serving front end as a resource (sim/frontend.py) and the batch window: hand-checked."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from tokenprobe.cost import HostModel, make_deployment
from tokenprobe.diagnose import diagnose
from tokenprobe.errors import ConfigError, SchemaError
from tokenprobe.hardware import get_gpu, get_host
from tokenprobe.records import read_run
from tokenprobe.sim import (
    Frontend,
    SchedulerConfig,
    build_workload,
    engine_defaults,
    run_workload,
    simulate,
    simulate_fleet,
)
from tokenprobe.sim.kv import BlockPool
from tokenprobe.sim.result import SimResult
from tokenprobe.workload import Arrival, RequestSpec, Workload, fixed

from .helpers import IDLE_W, unit_step

CONFIG = SchedulerConfig(max_num_seqs=8, max_num_batched_tokens=512)


def _fixed(n: int, tokens_in: int, tokens_out: int, arrival: Arrival | None = None) -> Workload:
    return Workload(
        arrival or Arrival("offline"),
        fixed(tokens_in, "input_tokens"),
        fixed(tokens_out, "output_tokens"),
        num_requests=n,
    )


def _run(
    workload: Workload, frontend: Frontend | None, config: SchedulerConfig = CONFIG
) -> SimResult:
    pool = BlockPool(1000, config.block_size, config.prefix_caching)
    return run_workload(workload, unit_step, pool, config, idle_w=IDLE_W, frontend=frontend)


def test_one_process_serves_requests_one_after_another() -> None:
    # 3 requests at t = 0, 0.5 s of CPU each before the engine sees them, no token work: the
    # process hands them over at 0.5, 1.0, 1.5 s; they waited 0, 0.5, 1.0 s for it. Unit steps:
    # the first starts its prefill at 0.5 s, first token at 1.5 s
    fe = Frontend(1, lambda n: 0.5, token_cpu_s=0.0)
    result = _run(_fixed(3, 16, 2), fe)
    waits = [r.frontend_wait_s for r in result.records]
    assert waits == [0.0, 0.5, 1.0]
    assert result.records[0].first_token_s == pytest.approx(1.5)
    # two processes: requests 0 and 1 in parallel, request 2 behind request 0
    two = _run(_fixed(3, 16, 2), Frontend(2, lambda n: 0.5, token_cpu_s=0.0))
    assert [r.frontend_wait_s for r in two.records] == [0.0, 0.0, 0.5]


def test_streamed_tokens_arrive_after_their_sse_work() -> None:
    # one request, unit steps, 0.1 s of CPU per token and none to admit: each step's one token
    # is delivered 0.1 s after the step's end (the mean completion of its work, share 1:
    # (1 + 1) x 0.1 / 2), so TTFT 1.1 s and every token time 0.1 s late
    fe = Frontend(1, lambda n: 0.0, token_cpu_s=0.1)
    (record,) = _run(_fixed(1, 32, 4), fe).records
    assert record.first_token_s == pytest.approx(1.1)
    assert record.token_times_s == pytest.approx([1.1, 2.1, 3.1, 4.1])
    assert record.finish_s == pytest.approx(4.1)


def test_a_closed_loop_user_waits_for_the_last_token() -> None:
    # one user, 2 requests of 2 tokens: request 0 ends its last step at 2 s, delivered at 2.1 s;
    # request 1 is sent then, so its first token is at 2.1 + 1 + 0.1
    fe = Frontend(1, lambda n: 0.0, token_cpu_s=0.1)
    result = _run(_fixed(2, 16, 2, Arrival("closed", concurrency=1)), fe)
    assert result.records[1].sent_s == pytest.approx(2.1)
    assert result.records[1].first_token_s == pytest.approx(3.2)


def test_the_fitted_front_end_latency_is_not_counted_twice() -> None:
    # request_overhead_s (fitted unloaded latency) 0.3 s with 0.2 s of CPU work: handed over at
    # 0.3 s, not 0.5 s; with 0.4 s of work, at 0.4 s
    for work, ready in ((0.2, 0.3), (0.4, 0.4)):
        fe = Frontend(1, lambda n, w=work: w, token_cpu_s=0.0, latency_s=0.3)
        (record,) = _run(_fixed(1, 16, 2), fe).records
        assert record.first_token_s == pytest.approx(ready + 1.0)


# the judged case: many short requests on one API-server process, then four
SHORT = {"input_tokens": 16, "output_tokens": 2, "rate_per_s": 4000.0, "num_requests": 3000}


def _short(**kw: object) -> SimResult:
    return simulate("qwen3-8b", "b200", weight_dtype="fp8", **SHORT, **kw)  # type: ignore[arg-type]


def test_one_api_server_process_caps_the_rate_and_diagnose_says_cpu_bound() -> None:
    one, four = _short(api_server_processes=1), _short(api_server_processes=4)
    host = HostModel()
    cpu_s = host.admission_cpu_s(16, "qwen3-8b") + 2 * host.token_cpu_s("qwen3-8b")
    # by hand: 300 us HTTP + ~16 us tokenizer + ~2 us JSON + chat template (130 us + 7 us for
    # its one message + 64 characters x 0.2 ns) + 2 x 35 us streaming ~ 0.527 ms
    assert cpu_s == pytest.approx(0.527e-3, rel=0.02)
    d1, d4 = one.to_dict(), four.to_dict()
    # the front end is the bound: requests/s at 1 / cpu_s (within the run's ramp and drain)
    assert d1["requests_per_s"] == pytest.approx(1 / cpu_s, rel=0.05)
    assert d1["frontend"]["utilization"] > 0.95
    assert d1["frontend"]["queue_mean"] > 100  # requests wait in front of the engine
    # four processes keep up with the offered 4000/s: the GPU is the bound, in fuller steps
    assert d4["requests_per_s"] > 1.4 * d1["requests_per_s"]
    assert d4["frontend"]["wait_mean_s"] < 0.01 < d1["frontend"]["wait_mean_s"]
    # the engine steps back to back; each step's 0.5 ms CPU slice (step_overhead_s, no kernel
    # running: sim/gpu_gap.py) is the only time the GPU is not busy
    assert d4["busy_fraction"] == pytest.approx(
        1 - d4["steps"] * 0.5e-3 / d4["duration_s"], abs=0.01
    )
    assert d4["steps"] < d1["steps"]
    # vLLM V1's engine core steps whatever it holds: one process leaves the GPU stepping small
    # batches (it reads busy) at lower power, not idle
    assert d1["energy"]["average_power_w"] < d4["energy"]["average_power_w"]
    dg1, dg4 = diagnose(one.run()), diagnose(four.run())
    assert "cpu-bound" in dg1.kinds() and "cpu-bound" not in dg4.kinds()
    (finding,) = [f for f in dg1.findings if f.kind == "cpu-bound"]
    assert finding.evidence["server_process_pegged_share_busy"] == pytest.approx(1.0, abs=0.05)
    assert finding.evidence["api_server_processes"] == 1
    assert "--api-server-processes 2" in finding.action
    # the effect, simulated on the run's own arrivals: two processes serve 2 / cpu_s = 3,795/s,
    # just short of the offered 4,000/s that four keep up with
    doubled = finding.evidence["simulated_requests_per_s_with_2_processes"]
    assert doubled == pytest.approx(2 / cpu_s, rel=0.05)
    assert d1["requests_per_s"] < doubled < d4["requests_per_s"]


def test_the_engine_in_the_api_server_process_leaves_the_gpu_waiting() -> None:
    # vLLM V0 (one process for HTTP, streaming and the engine loop, vllm#580's "50 %"): each
    # step waits for the process's parsing and streaming, so the GPU idles most of the time
    shared, four = _short(engine_in_api_server=True), _short(api_server_processes=4)
    d, d4 = shared.to_dict(), four.to_dict()
    # four processes: the GPU idles only in each step's 0.5 ms CPU slice (sim/gpu_gap.py)
    assert d["busy_fraction"] < 0.6 < 1 - d4["steps"] * 0.5e-3 / d4["duration_s"] - 0.01
    assert d4["busy_fraction"] > 1 - d4["steps"] * 0.5e-3 / d4["duration_s"] - 0.01
    assert d["frontend"]["queue_mean"] > 100  # while requests queue in front
    assert d4["requests_per_s"] > 1.4 * d["requests_per_s"]
    dg = diagnose(shared.run())
    assert "cpu-bound" in dg.kinds() and "cpu-bound" not in diagnose(four.run()).kinds()
    (finding,) = [f for f in dg.findings if f.kind == "cpu-bound"]
    assert finding.evidence["gpu_util_busy"] < 0.6  # type: ignore[operator]
    assert "engine core" in finding.action
    with pytest.raises(ConfigError, match="api_server_processes"):
        _short(engine_in_api_server=True, api_server_processes=2)


def test_front_end_off_by_default_and_when_named_records_its_setup() -> None:
    plain = simulate(
        "llama-3.1-8b", "h100-sxm", input_tokens=64, output_tokens=8, rate_per_s=5, num_requests=10
    )
    assert plain.engine.frontend is None and "frontend" not in plain.to_dict()
    assert all(r.frontend_wait_s is None for r in plain.records)
    hosted = simulate(
        "llama-3.1-8b",
        "h100-sxm",
        input_tokens=64,
        output_tokens=8,
        rate_per_s=5,
        num_requests=10,
        host="default",
    )
    assert hosted.config["frontend"]["api_server_processes"] == 1
    assert hosted.run().host  # the processes' utilization as host samples


def test_a_slower_core_host_file_slows_the_front_end(tmp_path: Path) -> None:
    spec = dataclasses.replace(get_host("default"), cpu_core_speed=0.5)
    path = tmp_path / "slow.toml"
    path.write_text(
        '[slow]\ndisplay_name = "half-speed cores"\ncpu_cores = 8\ndram_gib = 64\n'
        "dram_gb_per_s = 100\nnvme_gb_per_s = 3\nnic_gbit_per_s = 10\ncpu_core_speed = 0.5\n"
        'sources = ["test"]\n'
    )
    assert get_host(str(path)).cpu_core_speed == spec.cpu_core_speed
    kw = {"input_tokens": 16, "output_tokens": 2, "rate_per_s": 4000.0, "num_requests": 1500}
    fast = simulate("qwen3-8b", "b200", weight_dtype="fp8", host="default", **kw)  # type: ignore[arg-type]
    slow = simulate("qwen3-8b", "b200", weight_dtype="fp8", host=str(path), **kw)  # type: ignore[arg-type]
    # twice the CPU seconds per request: about half the requests/s once the front end binds
    ratio = slow.to_dict()["requests_per_s"] / fast.to_dict()["requests_per_s"]
    assert ratio == pytest.approx(0.5, rel=0.1)
    path.write_text(path.read_text().replace("cpu_core_speed = 0.5", "cpu_core_speed = -1"))
    with pytest.raises(SchemaError, match="cpu_core_speed"):
        get_host(str(path))


def test_bad_process_counts_are_refused_by_name() -> None:
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ConfigError, match="api_server_processes"):
            simulate(
                "llama-3.1-8b",
                "h100-sxm",
                input_tokens=8,
                output_tokens=2,
                rate_per_s=1,
                num_requests=2,
                api_server_processes=bad,
            )  # type: ignore[arg-type]


# ------------------------------------------------------------------ batch window


def test_a_lone_request_is_held_exactly_the_window() -> None:
    # one request, window 2.5 s, unit steps: admitted at 2.5 s, first token at 3.5 s
    held = _run(_fixed(1, 16, 2), None, dataclasses.replace(CONFIG, batch_window_s=2.5))
    (record,) = held.records
    assert record.first_token_s == pytest.approx(3.5) and record.queue_s == pytest.approx(2.5)


def test_a_full_batch_is_not_held() -> None:
    # 8 requests at once fill max_num_seqs = 8: admitted at once, first tokens at 1 s
    held = _run(_fixed(8, 16, 2), None, dataclasses.replace(CONFIG, batch_window_s=10.0))
    assert all(r.first_token_s == pytest.approx(1.0) for r in held.records)


def test_a_window_gathers_a_trickle_into_one_batch() -> None:
    # requests every 1 s, window 3.5 s: the first waits 3.5 s and takes the 3 after it along
    # (at 3.5 s four are waiting), so one prefill step serves four prompts
    trace = tuple(RequestSpec(str(i), float(i), 16, 2) for i in range(4))
    arrivals = Workload(
        Arrival("trace", trace=trace), fixed(16, "input_tokens"), fixed(2, "output_tokens")
    )
    held = _run(arrivals, None, dataclasses.replace(CONFIG, batch_window_s=3.5))
    assert [r.first_token_s for r in held.records] == pytest.approx([4.5] * 4)
    assert max(row[5] for row in held.engine.timeline.rows) == 4 * 16  # one step, four prompts


def test_batch_window_raises_ttft_and_lowers_energy_per_token() -> None:
    # light Poisson load (2 req/s): without a window each decode step carries ~1-2 sequences
    # and reads every weight for them; gathering 2 s of arrivals (~4 requests) shares each
    # weight read among more tokens, so J/token falls, while TTFT grows by up to the window
    def run(window: float) -> dict[str, object]:
        cfg = dataclasses.replace(
            engine_defaults("vllm", get_gpu("h100-sxm"), 1), batch_window_s=window
        )
        return simulate(
            "llama-3.1-8b",
            "h100-sxm",
            input_tokens=256,
            output_tokens=64,
            rate_per_s=2,
            num_requests=120,
            config=cfg,
        ).to_dict()

    plain, held = run(0.0), run(2.0)
    assert held["ttft_s"]["p50"] > plain["ttft_s"]["p50"] + 0.5  # type: ignore[index]
    assert held["ttft_s"]["p50"] < plain["ttft_s"]["p50"] + 2.0 + 0.1  # type: ignore[index]
    assert (
        held["energy"]["joules_per_output_token"] < 0.8 * plain["energy"]["joules_per_output_token"]
    )  # type: ignore[index]
    assert held["energy"]["average_power_w"] < plain["energy"]["average_power_w"]  # type: ignore[index]
    assert held["steps"] < plain["steps"]  # type: ignore[operator]


def test_bad_batch_windows_are_refused() -> None:
    for bad in (-1.0, float("nan"), float("inf"), 1e9):
        with pytest.raises(ConfigError, match="batch_window_s"):
            SchedulerConfig(batch_window_s=bad)
    windowed = SchedulerConfig(batch_window_s=1.0)
    pool = BlockPool(100, 16, False)
    with pytest.raises(ConfigError, match="batch_window_s"):
        run_workload(_fixed(1, 16, 2), unit_step, pool, windowed, idle_w=IDLE_W, scheduler="static")


def test_host_samples_are_the_processes_busy_share_per_window() -> None:
    # two processes, 1 s of work each at t = 0 and again at t = 3 s, run of 4 s: both busy in
    # [0, 1) and [3, 4), idle in between, so windows read 1 or 0 and the mean is 2 / 4 = 0.5
    fe = Frontend(2, lambda n: 1.0, token_cpu_s=0.0)
    for i, t in enumerate((0.0, 0.0, 3.0, 3.0)):
        fe.admit(i, 1, t)
    samples = fe.host_samples(4.0)
    util = [s.process_cpu_util or 0.0 for s in samples]
    assert sum(util) / len(util) == pytest.approx(0.5)
    assert util[0] == 1.0 and util[len(util) // 2] == 0.0 and util[-1] == 1.0


def test_a_shared_process_holds_each_step_until_it_has_streamed() -> None:
    # engine loop in the API-server process, unit steps, 0.1 s per token: step k starts when the
    # previous step's token is streamed, so steps start at 0, 1.1, 2.2, 3.3 and each token
    # arrives 0.1 s after its step: 1.1, 2.2, 3.3, 4.4 (three 0.1 s GPU gaps in 4.4 s)
    fe = Frontend(1, lambda n: 0.0, token_cpu_s=0.1, shares_engine=True)
    result = _run(_fixed(1, 32, 4), fe)
    (record,) = result.records
    assert record.token_times_s == pytest.approx([1.1, 2.2, 3.3, 4.4])
    assert result.to_dict()["busy_fraction"] == pytest.approx(4 / 4.4)


@pytest.mark.parametrize("kw", [{"api_server_processes": 1}, {"engine_in_api_server": True}])
def test_a_front_end_run_replayed_against_itself_agrees(tmp_path: Path, kw: dict) -> None:
    # the replay (diagnose --predict) rebuilds the recorded front end, so the saturated
    # front end's long TTFT is reproduced, not flagged as a mismatch
    result = simulate(
        "qwen3-8b", "b200", weight_dtype="fp8", **{**SHORT, "num_requests": 800}, **kw
    )  # type: ignore[arg-type]
    result.write(tmp_path / "run")
    diagnosis = diagnose(read_run(tmp_path / "run"), predict=True, replay_run=True)
    assert diagnosis.replay is not None
    rows = {row["metric"]: row for row in diagnosis.replay["rows"]}
    for metric in ("ttft_s p50", "ttft_s p90", "output_tokens_per_s"):
        assert rows[metric]["ratio"] == pytest.approx(1.0, rel=0.02), metric


def test_a_fleet_of_one_with_a_front_end_is_the_single_replica() -> None:
    """Each replica its own server: with one replica, the fleet with one API-server process is
    `simulate` with one, request by request."""
    wl = build_workload(input_tokens=16, output_tokens=2, rate_per_s=500.0, num_requests=300)
    one = simulate(deployment=_DEP, workload=wl, seed=2, api_server_processes=1)
    fleet = simulate_fleet(_DEP, wl, replicas=1, seed=2, api_server_processes=1)
    a = {r.request_id: r for r in one.records}
    for r in fleet.records:
        assert r.finish_s == pytest.approx(a[r.request_id].finish_s, rel=1e-12)
        assert r.frontend_wait_s == pytest.approx(a[r.request_id].frontend_wait_s, rel=1e-12)
    assert fleet.to_dict()["frontend"] == pytest.approx(one.to_dict()["frontend"])


_DEP = make_deployment("llama-3.1-8b", "h100-sxm")

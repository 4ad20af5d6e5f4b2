"""One workload for bench and simulate (issue 16 item 1): a workload file and a ShareGPT dataset
give a measured run (the real llama.cpp server) and a simulated run the same arrival times and
request lengths for a seed; shared-prefix groups send one text per group; offline and closed-loop
workloads run as the simulator runs them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from aiohttp import web
from typer.testing import CliRunner

import tokenprobe.cli.bench
import tokenprobe.cli.simulate  # noqa: F401  (registers the commands on app)
from loadgen.conftest import LlamaServer
from loadgen.fake_server import FakeServer, good_stream, raw_stream
from tokenprobe.cli.app import app
from tokenprobe.loadgen import BenchConfig
from tokenprobe.loadgen.sendplan import _draw
from tokenprobe.records import read_run
from tokenprobe.workload import ESTIMATE, build_workload, load_workload

runner = CliRunner()
SAMPLE = Path(__file__).parents[1] / "data" / "datasets" / "sharegpt_sample.json"
SIM = ["simulate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm"]
ENV = {"COLUMNS": "300"}


def _invoke(args: list[str]) -> None:
    result = runner.invoke(app, args, env=ENV)
    assert result.exit_code == 0, result.output


def _shapes(out: Path) -> list[tuple[str, float, int, int]]:
    records = sorted(read_run(out).records, key=lambda r: int(r.request_id))
    return [(r.request_id, r.scheduled_s, r.input_tokens, r.output_tokens) for r in records]


def _config(out: Path) -> dict[str, Any]:
    return json.loads((out / "config.json").read_text())["config"]


WORKLOAD = """
num_requests = 6
shared_prefix_tokens = 10
prefix_groups = 2
[arrival]
kind = "gamma"
rate_per_s = 5.0
burstiness = 0.5
[input_tokens]
kind = "uniform"
low = 24
high = 48
[output_tokens]
kind = "uniform"
low = 2
high = 5
"""


def test_a_workload_file_gives_bench_and_simulate_the_same_arrivals_and_lengths(
    llama: LlamaServer, tmp_path: Path
):
    wf = tmp_path / "w.toml"
    wf.write_text(WORKLOAD)
    measured, simulated = tmp_path / "measured", tmp_path / "simulated"
    _invoke(
        ["bench", "--url", llama.url, "--workload", str(wf), "--seed", "3", "--out", str(measured)]
    )
    _invoke([*SIM, "--workload", str(wf), "--seed", "3", "--out", str(simulated)])
    shapes = _shapes(measured)
    # bench's records: scheduled times as drawn, input tokens from the server's usage, output
    # tokens generated with ignore_eos: the simulator's requests, one for one
    assert shapes == _shapes(simulated)
    drawn = load_workload(wf).generate(np.random.default_rng(3))
    assert [(s.arrival_s, s.input_tokens, s.output_tokens) for s in drawn] == [
        shape[1:] for shape in shapes
    ]
    assert _config(measured)["workload"] == _config(simulated)["workload"]


def test_a_sharegpt_file_runs_in_bench_and_simulate_with_the_same_lengths(
    llama: LlamaServer, tmp_path: Path
):
    measured, counted, estimated = tmp_path / "m", tmp_path / "s", tmp_path / "e"
    load = ["--dataset", str(SAMPLE), "--concurrency", "2", "--num-requests", "6"]
    load += ["--max-output-tokens", "4"]
    _invoke(["bench", "--url", llama.url, *load, "--out", str(measured)])
    _invoke([*SIM, *load, "--tokenizer-url", llama.url, "--out", str(counted)])
    _invoke([*SIM, *load, "--out", str(estimated)])
    lengths = [shape[2:] for shape in _shapes(measured)]
    assert lengths == [shape[2:] for shape in _shapes(counted)]
    assert all(out <= 4 for _, out in lengths)
    for out in (measured, counted):
        assert _config(out)["workload"]["dataset"]["counted_by"] == "server /tokenize"
    estimate = _config(estimated)["workload"]["dataset"]
    assert estimate["counted_by"] == ESTIMATE and estimate["format"] == "sharegpt"
    # row 0's prompt, "Tell a short story about my garden.", is 35 characters: ceil(35/4) = 9
    assert _shapes(estimated)[0][2] == 9


@pytest.fixture(scope="module")
def fake() -> Any:
    with FakeServer() as server:
        yield server


def _capturing(fake: FakeServer, name: str) -> tuple[str, list[dict[str, Any]]]:
    bodies: list[dict[str, Any]] = []

    async def keep(request: web.Request, n: int) -> web.StreamResponse:
        bodies.append(await request.json())
        return await raw_stream(request, good_stream(n))

    return fake.script(name, keep), bodies


def test_prefix_groups_share_one_text_each_and_offline_sends_all_at_once(
    fake: FakeServer, tmp_path: Path
):
    wf = tmp_path / "w.toml"
    wf.write_text(
        "num_requests = 8\nshared_prefix_tokens = 8\nprefix_groups = 3\n"
        '[arrival]\nkind = "offline"\n'
        '[input_tokens]\nkind = "fixed"\nvalue = 20\n[output_tokens]\nkind = "fixed"\nvalue = 2\n'
    )
    url, bodies = _capturing(fake, "prefix_groups")
    _invoke(
        [
            "bench",
            "--url",
            url,
            "--model",
            "m",
            "--workload",
            str(wf),
            "--seed",
            "4",
            "--out",
            str(tmp_path / "r"),
        ]
    )
    prompts = [b["prompt"] for b in bodies if b["max_tokens"] == 2]
    assert len(prompts) == 8
    heads = [p.split("\n", 1)[0] for p in prompts]
    groups = [s.prefix_group for s in load_workload(wf).generate(np.random.default_rng(4))]
    # one prefix text per group drawn, as many requests each as the draw gave it
    assert sorted(heads.count(h) for h in set(heads)) == sorted(
        groups.count(g) for g in set(groups)
    )
    assert len({p.split("\n", 1)[1] for p in prompts}) == 8  # the rest of every prompt is new
    records = read_run(tmp_path / "r").records
    assert [r.scheduled_s for r in records] == [0.0] * 8
    # each record names its group, as drawn (what diagnose --predict replays the cache with)
    by_index = {int(r.request_id): r.extra["prefix_group"] for r in records}
    assert [by_index[i] for i in range(8)] == [float(g) for g in groups]


def test_a_closed_loop_workload_keeps_its_concurrency(fake: FakeServer, tmp_path: Path):
    wf = tmp_path / "w.toml"
    wf.write_text('num_requests = 5\n[arrival]\nkind = "closed"\nconcurrency = 2\n')
    url, bodies = _capturing(fake, "closed_workload")
    out = tmp_path / "r"
    _invoke(["bench", "--url", url, "--model", "m", "--workload", str(wf), "--out", str(out)])
    assert len(read_run(out).records) == 5
    assert _config(out)["workload"]["arrival"] == {
        "kind": "closed", "rate_per_s": 0.0, "burstiness": 1.0, "concurrency": 2
    }  # fmt: skip
    assert {b["max_tokens"] for b in bodies} >= {256}  # the workload's default output length


def test_a_timed_open_loop_draws_the_workload_arrivals_until_the_duration():
    config = BenchConfig(
        url="http://h/v1", model="m", rate_per_s=50.0, duration_s=2.0, input_tokens=8, seed=5
    )
    specs, cycled = _draw(config, config.workload())
    longer = build_workload(input_tokens=8, output_tokens=256, rate_per_s=50.0, num_requests=500)
    times = [s.arrival_s for s in longer.generate(np.random.default_rng(5))]
    assert not cycled and [s.arrival_s for s in specs] == [t for t in times if t < 2.0]
    assert 60 < len(specs) < 140  # 100 expected at 50/s over 2 s


CONVERSATION = """
num_requests = 4
[arrival]
kind = "poisson"
rate_per_s = 20.0
[conversation]
turns = 2
think_s = 0.2
[input_tokens]
kind = "uniform"
low = 20
high = 30
[output_tokens]
kind = "fixed"
value = 3
"""


def test_a_follow_up_carries_the_history_and_the_reply_it_got(fake: FakeServer, tmp_path: Path):
    wf = tmp_path / "w.toml"
    wf.write_text(CONVERSATION)
    url, bodies = _capturing(fake, "conversation")
    out = tmp_path / "r"
    _invoke(["bench", "--url", url, "--model", "m", "--workload", str(wf), "--out", str(out)])
    prompts = [b["prompt"] for b in bodies if b["max_tokens"] == 3]
    firsts = [p for p in prompts if "\n" not in p]
    follow_ups = [p for p in prompts if "\n" in p]
    assert len(firsts) == len(follow_ups) == 2
    for follow in follow_ups:  # turn 0's prompt, the streamed reply (" w" x 3), a new message
        head, message = follow.rsplit("\n", 1)
        assert head in {p + " w w w" for p in firsts} and message not in firsts
    records = {r.request_id: r for r in read_run(out).records}
    for first, follow in (("0", "1"), ("2", "3")):
        assert records[follow].scheduled_s >= (records[first].finish_s or 0) + 0.2


def test_a_conversation_against_the_real_server_matches_the_workload_lengths(
    llama: LlamaServer, tmp_path: Path
):
    wf = tmp_path / "w.toml"
    wf.write_text(CONVERSATION)
    out = tmp_path / "r"
    _invoke(["bench", "--url", llama.url, "--workload", str(wf), "--seed", "1", "--out", str(out)])
    specs = load_workload(wf).generate(np.random.default_rng(1))
    records = sorted(read_run(out).records, key=lambda r: int(r.request_id))
    for spec, rec in zip(specs, records, strict=True):
        assert rec.ok and rec.output_tokens == 3
        # first turns are fitted exactly; a follow-up re-tokenizes the streamed reply inside its
        # history, which can merge or split a token or two at the boundaries
        assert abs(rec.input_tokens - spec.input_tokens) <= (3 if spec.turn else 0)


def test_a_trace_workload_replays_its_timestamps_and_lengths(fake: FakeServer, tmp_path: Path):
    (tmp_path / "t.csv").write_text(
        "arrival_s,input_tokens,output_tokens\n0.0,12,2\n0.15,20,3\n0.05,16,4\n"
    )
    wf = tmp_path / "w.toml"
    wf.write_text('[arrival]\nkind = "trace"\ntrace_file = "t.csv"\n')
    url, bodies = _capturing(fake, "trace")
    out = tmp_path / "r"
    _invoke(["bench", "--url", url, "--model", "m", "--workload", str(wf), "--out", str(out)])
    records = sorted(read_run(out).records, key=lambda r: r.scheduled_s)
    assert [r.scheduled_s for r in records] == [0.0, 0.05, 0.15]  # sorted by arrival
    assert sorted(b["max_tokens"] for b in bodies if b["max_tokens"] > 1) == [2, 3, 4]


def test_past_the_pool_a_dataset_request_sends_its_own_row(
    fake: FakeServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    import tokenprobe.loadgen.sendplan

    monkeypatch.setattr(tokenprobe.loadgen.sendplan, "MAX_POOL", 2)
    data = tmp_path / "d.jsonl"
    rows = {"alpha": 2, "beta": 3, "gamma": 4}
    data.write_text(
        "".join(json.dumps({"prompt": p, "output_tokens": n}) + "\n" for p, n in rows.items())
    )
    url, bodies = _capturing(fake, "dataset_rows")
    args = ["bench", "--url", url, "--model", "m", "--dataset", str(data), "--concurrency", "1"]
    _invoke([*args, "--num-requests", "7", "--out", str(tmp_path / "r")])
    sent = [(b["prompt"], b["max_tokens"]) for b in bodies if b["max_tokens"] > 1]
    assert len(sent) == 7 and set(sent) == set(rows.items())


def test_a_sharegpt_follow_up_sends_the_rows_next_message_after_the_history(
    fake: FakeServer, tmp_path: Path
):
    (tmp_path / "sample.json").write_text(SAMPLE.read_text())
    wf = tmp_path / "w.toml"
    wf.write_text(
        'num_requests = 4\n[arrival]\nkind = "offline"\n[conversation]\nturns = 2\n'
        '[dataset]\nfile = "sample.json"\nmax_output_tokens = 3\n'
    )
    url, bodies = _capturing(fake, "dataset_conversation")
    _invoke(
        ["bench", "--url", url, "--model", "m", "--workload", str(wf), "--out", str(tmp_path / "r")]
    )
    row = json.loads(SAMPLE.read_text())[2]["conversations"]
    prompts = [b["prompt"] for b in bodies if b["max_tokens"] > 1]
    # the fake server streams " w" per token: turn 0's prompt, its 3-token reply, the next message
    assert row[0]["value"] + " w w w\n" + row[2]["value"] in prompts

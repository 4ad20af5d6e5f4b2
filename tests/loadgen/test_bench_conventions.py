"""bench's conventions against real servers: SLOs and goodput kept in the run folder, fresh
prompts at every sweep point (and the prefix-cache warning when a run is answered from the
cache), sampling flags and --extra-body in every body, --model from GET /v1/models, and the live
progress line."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from rich.console import Console
from typer.testing import CliRunner

import tokenprobe.cli.bench  # noqa: F401  (registers the commands on app)
from loadgen.conftest import LlamaServer
from loadgen.fake_server import FakeServer, good_stream, raw_stream
from tokenprobe.cli.app import app
from tokenprobe.cli.bench import Progress
from tokenprobe.loadgen.summary import CACHE_TOLERANCE_TOKENS
from tokenprobe.records import RequestRecord, read_run, read_summary

runner = CliRunner()


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeServer]:
    with FakeServer() as server:
        yield server


def _flat(text: str) -> str:
    return "".join(text.split())


def _bench(url: str, out: Path, *more: str) -> list[str]:
    args = ["bench", "--url", url, "--input-tokens", "24", "--output-tokens", "3"]
    return [*args, "--out", str(out), *more]


def _config(out: Path) -> dict[str, Any]:
    return json.loads((out / "config.json").read_text())["config"]


def test_slos_and_goodput_are_kept_in_summary_and_config(llama: LlamaServer, tmp_path: Path):
    loose, strict = tmp_path / "loose", tmp_path / "strict"
    common = ["--model", "smollm2", "--concurrency", "2", "--num-requests", "4"]
    for out, slo in ((loose, "60"), (strict, "0.000001")):
        args = [*common, "--slo-ttft-s", slo, "--slo-tpot-s", slo]
        result = runner.invoke(app, _bench(llama.url, out, *args), env={"COLUMNS": "300"})
        assert result.exit_code == 0, result.output
        assert _config(out)["slo_ttft_s"] == _config(out)["slo_tpot_s"] == float(slo)
        assert "goodput" in result.output and "TTFT <=" in result.output
    loose_summary, strict_summary = read_summary(loose), read_summary(strict)
    assert loose_summary is not None and strict_summary is not None
    assert loose_summary["slo_ttft_s"] == 60.0
    # every request meets a 60 s SLO, none a 1 µs one
    assert loose_summary["goodput_requests_per_s"] == pytest.approx(loose_summary["requests_per_s"])
    assert strict_summary["goodput_requests_per_s"] == 0.0


def _cached(out: Path) -> list[float]:
    return [float(r.extra["server_cached_tokens"]) for r in read_run(out).records]


def test_sweep_points_send_fresh_prompts_and_reuse_is_opt_in(llama: LlamaServer, tmp_path: Path):
    """The issue's case: a seeded 2-point sweep; from the second point on the server answered
    the prompt from its prefix cache. Now it sees fresh prompts (cached ~0, no warning), unless
    --allow-prefix-reuse asks for the seed's prompts as they are."""
    sweep = ["--model", "smollm2", "--sweep", "concurrency=1,2", "--num-requests", "4"]
    fresh, reused = tmp_path / "fresh", tmp_path / "reused"
    result = runner.invoke(app, _bench(llama.url, fresh, *sweep, "--seed", "1"))
    assert result.exit_code == 0, result.output
    assert "prefix cache" not in result.output
    points = [fresh / "concurrency_1", fresh / "concurrency_2"]
    for point in points:
        assert max(_cached(point)) <= CACHE_TOLERANCE_TOKENS, _cached(point)
        assert all(r.input_tokens == 24 for r in read_run(point).records)  # still exact
        summary = read_summary(point)
        assert summary is not None and summary["warnings"] == []
    salts = {_config(p)["prompt_salt"] for p in points}
    assert len(salts) == 2 and "" not in salts

    args = [*sweep, "--seed", "1", "--allow-prefix-reuse"]
    result = runner.invoke(app, _bench(llama.url, reused, *args))
    assert result.exit_code == 0, result.output
    second = reused / "concurrency_2"
    # the same prompts again: the server has them cached (asked for, so no warning)
    assert min(_cached(second)) >= 24 // 2, _cached(second)
    assert read_summary(second)["warnings"] == []  # type: ignore[index]


def test_chat_template_tokens_shared_by_every_request_give_no_warning(
    llama: LlamaServer, tmp_path: Path
):
    """Every chat request shares its template's system prompt, which llama.cpp serves from its
    cache: fresh prompts, so no warning; the template's size is measured and kept."""
    out = tmp_path / "chat"
    args = ["--model", "smollm2", "--endpoint", "chat", "--concurrency", "1"]
    result = runner.invoke(app, _bench(llama.url, out, *args, "--num-requests", "3"))
    assert result.exit_code == 0, result.output
    run = read_run(out)
    template = run.config["template_tokens"]
    assert template == run.records[0].input_tokens - 24 > 0  # 24: --input-tokens
    assert 0 < max(_cached(out)) <= template  # the template is cached, not the prompts
    assert read_summary(out)["warnings"] == []  # type: ignore[index]


@pytest.mark.parametrize("endpoint", ["completions", "chat"])
def test_prefix_cache_hits_nobody_asked_for_give_a_warning(
    llama: LlamaServer, tmp_path: Path, endpoint: str
):
    data = tmp_path / "same.jsonl"
    prompt = "Tell me a story about a cat who lived in a lighthouse by the sea, in ten words."
    data.write_text(json.dumps({"prompt": prompt}) + "\n")
    out = tmp_path / "run"
    args = ["bench", "--url", llama.url, "--model", "smollm2", "--dataset", str(data)]
    args += ["--output-tokens", "2", "--concurrency", "1", "--num-requests", "3"]
    args += ["--endpoint", endpoint]
    result = runner.invoke(app, [*args, "--out", str(out)], env={"COLUMNS": "400"})
    assert result.exit_code == 0, result.output
    assert "warning:" in result.output and "prefix cache" in result.output
    summary = read_summary(out)
    assert summary is not None
    assert summary["client"]["prefix_cache"]["hits"] >= 2  # every request after the first
    cache, repeated = summary["warnings"][1], summary["warnings"][0]
    assert "dataset repeats prompts" in cache
    assert "2 requests re-sent a prompt" in repeated and "pool of 1 prompts" in repeated
    assert summary["client"]["repeated_prompts"] == 2


def test_model_defaults_to_the_first_served_model(llama: LlamaServer, tmp_path: Path):
    with_model, without = tmp_path / "given", tmp_path / "asked"
    common = ["--concurrency", "1", "--num-requests", "1"]
    assert runner.invoke(app, _bench(llama.url, without, *common)).exit_code == 0
    assert _config(without)["model_source"] == "server /models"
    served = json.loads(_urlopen(llama.root_url + "/v1/models"))["data"][0]["id"]
    assert _config(without)["model"] == served
    result = runner.invoke(app, _bench(llama.url, with_model, *common, "--model", "smollm2"))
    assert result.exit_code == 0
    assert _config(with_model)["model"] == "smollm2"
    assert _config(with_model)["model_source"] == "given"


def _urlopen(url: str) -> str:
    import urllib.request

    with urllib.request.urlopen(url, timeout=10) as resp:
        return str(resp.read().decode())


@pytest.mark.parametrize(("mode", "needle"), [("no_models", "lists no model"), ("http500", "404")])
def test_model_missing_and_server_names_none_is_one_clear_error(
    fake: FakeServer, tmp_path: Path, mode: str, needle: str
):
    args = _bench(fake.url(mode), tmp_path / "run", "--concurrency", "1", "--num-requests", "1")
    result = runner.invoke(app, args)
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    flat = _flat(result.output)
    assert _flat(needle) in flat and "--model" in flat and "/v1/models" in flat


def test_sampling_flags_and_extra_body_reach_every_body(fake: FakeServer, tmp_path: Path):
    bodies: list[dict[str, Any]] = []

    async def keep(request: web.Request, n: int) -> web.StreamResponse:
        bodies.append(await request.json())
        return await raw_stream(request, good_stream(n))

    url = fake.script("keep_bodies", keep)
    args = ["--model", "m", "--concurrency", "2", "--num-requests", "3", "--temperature", "0.7"]
    args += ["--top-p", "0.9", "--top-k", "20", "--sampling-seed", "5", "--seed", "3"]
    args += ["--extra-body", '{"min_p": 0.05, "temperature": 0.2, "chat_template_kwargs": {}}']
    result = runner.invoke(app, _bench(url, tmp_path / "run", *args))
    assert result.exit_code == 0, result.output
    assert len(bodies) == 3
    for body in bodies:
        # --extra-body is merged last: its temperature wins over --temperature
        assert body["temperature"] == 0.2 and body["top_p"] == 0.9 and body["top_k"] == 20
        assert body["seed"] == 5 and body["min_p"] == 0.05 and body["chat_template_kwargs"] == {}
        assert body["max_tokens"] == 3 and body["stream"] is True
    assert len({b["prompt"] for b in bodies}) == 3  # no prompt sent twice
    assert _config(tmp_path / "run")["extra_body"]["min_p"] == 0.05


@pytest.mark.parametrize(
    ("value", "needle"),
    [("{not json", "not valid JSON"), ("[1, 2]", "a JSON object"), ('"x"', "a JSON object")],
)
def test_bad_extra_body_is_exit_2_naming_the_flag(tmp_path: Path, value: str, needle: str):
    args = _bench("http://127.0.0.1:9/v1", tmp_path / "run", "--model", "m", "--concurrency")
    result = runner.invoke(app, [*args, "1", "--num-requests", "1", "--extra-body", value])
    assert result.exit_code == 2, result.output
    flat = _flat(result.output)
    assert "--extra-body" in flat and _flat(needle) in flat
    assert "Traceback" not in result.output


def test_extra_body_cannot_replace_the_prompt(tmp_path: Path):
    args = _bench("http://127.0.0.1:9/v1", tmp_path / "run", "--model", "m", "--concurrency")
    args += ["1", "--num-requests", "1", "--extra-body", '{"prompt": "x"}']
    result = runner.invoke(app, args)
    assert result.exit_code == 2 and "extra_body" in result.output


def _record(i: int, ttft_s: float, gaps: list[float], error: str | None = None) -> RequestRecord:
    times = [1.0 + ttft_s]
    for gap in gaps:
        times.append(times[-1] + gap)
    return RequestRecord(
        request_id=str(i),
        scheduled_s=1.0,
        sent_s=1.0,
        first_token_s=None if error else times[0],
        finish_s=None if error else times[-1],
        input_tokens=8,
        output_tokens=0 if error else len(times),
        token_times_s=[] if error else times,
        error_kind=error,
    )


def test_progress_shows_eta_rates_percentiles_and_errors():
    progress = Progress(total=4)
    assert "ETA ?" in progress.cells()
    progress(_record(0, 0.100, [0.010, 0.030]))
    progress(_record(1, 0.300, [0.020]))
    progress(_record(2, 0.0, [], error="http_500"))
    cells = progress.cells()
    assert "requests 3/4" in cells and "errors 1" in cells
    # TTFT 100 and 300 ms: p50 200; ITL 10, 20, 30 ms: p50 20
    assert any(c.startswith("TTFT p50/p99 200.0/") for c in cells), cells
    assert any(c.startswith("ITL p50/p99 20.0/") for c in cells), cells
    eta = next(c for c in cells if c.startswith("ETA"))
    assert eta != "ETA ?"  # one request left at the rate so far
    assert Progress(total=None, duration_s=5.0).eta_s(2.0) == 3.0
    terminal = Console(force_terminal=True, width=300, record=True, file=io.StringIO())
    terminal.print(progress)  # what the Live display draws on a TTY
    shown = terminal.export_text()
    assert "TTFT p50/p99 200.0/" in shown and "errors 1" in shown and "ETA" in shown


def test_no_live_progress_when_not_a_tty(fake: FakeServer, tmp_path: Path):
    args = ["--model", "m", "--concurrency", "1", "--num-requests", "2"]
    result = runner.invoke(app, _bench(fake.url("ok"), tmp_path / "run", *args))
    assert result.exit_code == 0, result.output
    assert "ETA" not in result.output and "req/s" in result.output  # the summary line only


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"temperature": float("nan")}, "temperature"),
        ({"temperature": -0.1}, "temperature"),
        ({"top_p": 1.5}, "top_p"),
        ({"top_k": -1}, "top_k"),
        ({"sampling_seed": -3}, "sampling_seed"),
        ({"slo_ttft_s": 0.0}, "slo_ttft_s"),
        ({"slo_tpot_s": float("inf")}, "slo_tpot_s"),
        ({"extra_body": {"stream": False}}, "extra_body"),
        ({"extra_body": ["x"]}, "extra_body"),
    ],
)
def test_bad_request_options_are_refused_by_name(change: dict[str, Any], field: str):
    from tokenprobe.errors import ConfigError
    from tokenprobe.loadgen import BenchConfig

    base: dict[str, Any] = {"url": "http://h/v1", "model": "m", "concurrency": 1}
    base.update(num_requests=1, input_tokens=8, **change)
    with pytest.raises(ConfigError) as info:
        BenchConfig(**base)
    assert info.value.field == field


def test_past_the_pool_prompts_are_reshuffled_not_repeated(
    llama: LlamaServer, fake: FakeServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """A run longer than its prompt pool (sendplan.MAX_POOL, made 2 here) sends new prompts of the
    same words and length: the real server counts each as --input-tokens and caches none."""
    import tokenprobe.loadgen.sendplan

    monkeypatch.setattr(tokenprobe.loadgen.sendplan, "MAX_POOL", 2)
    bodies: list[dict[str, Any]] = []

    async def keep(request: web.Request, n: int) -> web.StreamResponse:
        bodies.append(await request.json())
        return await raw_stream(request, good_stream(n))

    common = ["--model", "m", "--concurrency", "1", "--num-requests", "5", "--seed", "2"]
    url = fake.script("keep_cycled", keep)
    assert runner.invoke(app, _bench(url, tmp_path / "fake", *common)).exit_code == 0
    prompts = [b["prompt"] for b in bodies]
    assert len(set(prompts)) == 5  # 2 pooled prompts, 3 reshuffles
    assert sorted(prompts[2].split()) == sorted(prompts[0].split())  # same words, new order

    out = tmp_path / "real"
    assert runner.invoke(app, _bench(llama.url, out, *common)).exit_code == 0
    records = read_run(out).records
    assert [r.input_tokens for r in records] == [24] * 5  # the server's usage
    assert max(_cached(out)) <= CACHE_TOLERANCE_TOKENS + 24 // 4
    summary = read_summary(out)
    assert summary is not None and summary["warnings"] == []
    assert summary["client"]["repeated_prompts"] == 0

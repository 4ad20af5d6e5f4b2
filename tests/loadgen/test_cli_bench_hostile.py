"""`tokenprobe bench` with bad --out folders, credentials in the URL, and runs that fail: exit
codes, one clear message, nothing old mixed in, no secret written (fake servers on 127.0.0.1)."""

from __future__ import annotations

import base64
import json
import os
import resource
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiohttp import web
from typer.testing import CliRunner

import tokenprobe.cli.bench  # noqa: F401  (registers the commands on app)
from loadgen.fake_server import FakeServer, good_stream, raw_stream
from tokenprobe.cli.app import app
from tokenprobe.records import read_run

runner = CliRunner()
CLI = "import tokenprobe.cli.bench; from tokenprobe.cli.app import app; app()"


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeServer]:
    with FakeServer() as server:
        yield server


def _args(url: str, out: Path, *more: str) -> list[str]:
    args = ["bench", "--url", url, "--model", "m", "--input-tokens", "4", "--output-tokens", "3"]
    return [*args, "--concurrency", "2", "--num-requests", "4", "--out", str(out), *more]


def _flat(text: str) -> str:
    return "".join(text.split())


def test_out_holding_a_run_is_refused_unless_overwrite(fake: FakeServer, tmp_path: Path):
    out = tmp_path / "run"
    assert runner.invoke(app, _args(fake.url("ok"), out)).exit_code == 0
    (out / "host.jsonl").write_text('{"t_s": 0.0, "old": true}\n')  # an old run's telemetry
    (out / "notes.txt").write_text("mine")  # not a run file: left alone
    before = (out / "records.jsonl").read_text()
    again = runner.invoke(app, _args(fake.url("ok"), out))
    assert again.exit_code == 2 and "Traceback" not in again.output
    assert _flat(str(out)) in _flat(again.output) and "alreadyholdsarun" in _flat(again.output)
    assert (out / "records.jsonl").read_text() == before  # untouched
    replaced = runner.invoke(app, _args(fake.url("ok"), out, "--overwrite"))
    assert replaced.exit_code == 0, replaced.output
    assert not (out / "host.jsonl").exists() and (out / "notes.txt").read_text() == "mine"
    assert len(read_run(out).records) == 4


def test_out_that_is_a_file_or_cannot_be_created_is_one_line_exit_2(
    fake: FakeServer, tmp_path: Path
):
    a_file = tmp_path / "file"
    a_file.write_text("x")
    for out, words in ((a_file, "isafile"), (a_file / "sub", "cannotwrite")):
        result = runner.invoke(app, _args(fake.url("ok"), out))
        assert result.exit_code == 2, result.output
        assert words in _flat(result.output) and "Traceback" not in result.output


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only folder")
def test_out_in_a_read_only_folder_is_exit_2(fake: FakeServer, tmp_path: Path):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o555)
    result = runner.invoke(app, _args(fake.url("ok"), locked / "run"))
    assert result.exit_code == 2 and "cannotwrite" in _flat(result.output)


def test_disk_full_mid_run_exits_1_and_keeps_the_records_written(fake: FakeServer, tmp_path: Path):
    """RLIMIT_FSIZE makes every write past N bytes fail (EFBIG), as a full disk does (ENOSPC)."""
    out = tmp_path / "full"
    limit_bytes = 6000  # config.json and a few records fit; 40 records do not

    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, limit_bytes))

    args = _args(fake.url("ok"), out, "--json")
    args[args.index("--num-requests") + 1] = "40"
    proc = subprocess.run(
        [sys.executable, "-c", CLI, *args],
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=limit,
        env={**os.environ, "COLUMNS": "400"},
    )
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr and "cannotwrite" in _flat(proc.stderr)
    run = read_run(out)
    assert 1 <= len(run.records) < 40 and all(r.ok for r in run.records)
    assert f"the{len(run.records)}recordswritten" in _flat(proc.stderr)


def _auth_script(fake: FakeServer, name: str, expected: str) -> str:
    """OK when the Authorization header is `expected`; else 401 echoing the header and query."""

    async def handler(request: web.Request, n: int) -> web.StreamResponse:
        echo = f"got {request.headers.get('Authorization')!r} and {request.query_string!r}"
        if request.headers.get("Authorization") != expected:
            return web.json_response({"error": echo}, status=401)
        if fake.requests[name] % 2:  # an error that quotes the credentials back
            return web.json_response({"error": f"quota exceeded for {echo}"}, status=429)
        return await raw_stream(request, good_stream(n))

    return fake.script(name, handler)


def _no_secret_written(out: Path, *secrets: str) -> None:
    for path in out.iterdir():
        text = path.read_text()
        for secret in secrets:
            assert secret not in text, (path.name, secret)


def test_url_userinfo_authenticates_as_basic_and_is_never_written(fake: FakeServer, tmp_path: Path):
    basic = "Basic " + base64.b64encode(b"alice:s3cret-pass").decode()
    url = _auth_script(fake, "basic", basic).replace("//", "//alice:s3cret-pass@", 1)
    url += "?api_key=q-key-42&x=1"
    out = tmp_path / "run"
    result = runner.invoke(app, _args(url, out, "--json", "--max-error-rate", "1"))
    assert result.exit_code == 0, result.output
    run = read_run(out)
    assert {r.error_kind for r in run.records} == {None, "http_429"}  # it authenticated
    assert any("***" in (r.error_message or "") for r in run.records)
    _no_secret_written(out, "s3cret-pass", "q-key-42", basic.split()[1])
    shown = json.loads((out / "config.json").read_text())["config"]["url"]
    assert "alice" not in shown and "api_key=***" in shown and "x=1" in shown
    assert "s3cret-pass" not in _flat(result.output) and "q-key-42" not in _flat(result.output)


def test_api_key_flag_is_bearer_and_redacted_where_echoed(fake: FakeServer, tmp_path: Path):
    key = "sk-flag-key-0987"
    url = _auth_script(fake, "bearer", f"Bearer {key}")
    out = tmp_path / "run"
    result = runner.invoke(app, _args(url, out, "--api-key", key, "--max-error-rate", "1"))
    assert result.exit_code == 0, result.output
    run = read_run(out)
    assert {r.error_kind for r in run.records} == {None, "http_429"}
    _no_secret_written(out, key)
    assert key not in _flat(result.output)
    both = runner.invoke(app, _args(url, tmp_path / "b", "--api-key", key, "--api-key-env", "X"))
    assert both.exit_code == 2 and key not in _flat(both.output)


def test_every_request_failing_exits_1_with_counts_and_keeps_results(
    fake: FakeServer, tmp_path: Path
):
    out = tmp_path / "run"
    result = runner.invoke(app, _args(fake.url("malformed"), out))
    assert result.exit_code == 1, result.output
    flat = _flat(result.output)
    assert "everyrequestfailed" in flat and "malformed_stream:4" in flat
    assert json.loads((out / "summary.json").read_text())["failed"] == 4


def test_max_error_rate_sets_the_exit_code(fake: FakeServer, tmp_path: Path):
    async def handler(request: web.Request, n: int) -> web.StreamResponse:
        if fake.requests["half"] % 4 == 0:  # a quarter of the measured requests fail
            return web.json_response({"error": "busy"}, status=503)
        return await raw_stream(request, good_stream(n))

    url = fake.script("half", handler)
    codes = {}
    for rate in ("0", "1"):
        out = tmp_path / f"r{rate}"
        result = runner.invoke(app, [*_args(url, out, "--max-error-rate", rate)])
        codes[rate] = result.exit_code
        failed = json.loads((out / "summary.json").read_text())["failed"]
        assert 0 < failed < 4, result.output
        if rate == "0":
            assert "--max-error-rate" in _flat(result.output) and "http_503" in _flat(result.output)
    assert codes == {"0": 1, "1": 0}
    bad = runner.invoke(app, _args(url, tmp_path / "bad", "--max-error-rate", "nan"))
    assert bad.exit_code == 2 and "max_error_rate" in _flat(bad.output)


def test_a_refusal_at_preflight_quoting_the_key_does_not_show_it(
    fake: FakeServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    async def handler(request: web.Request, n: int) -> web.StreamResponse:
        echo = request.headers.get("Authorization", "")
        return web.json_response({"error": f"invalid key in {echo!r}"}, status=401)

    monkeypatch.setenv("TP_TEST_KEY", "sk-env-key-5566")
    url = fake.script("refuse", handler, preflight=True)
    result = runner.invoke(app, _args(url, tmp_path / "run", "--api-key-env", "TP_TEST_KEY"))
    assert result.exit_code == 1 and "Traceback" not in result.output
    flat = _flat(result.output)
    assert "http_401" in flat and "Bearer***" in flat and "sk-env-key-5566" not in flat


def test_bench_import_refuses_an_out_holding_a_run_unless_overwrite(tmp_path: Path):
    from loadgen.test_importers import VLLM

    result_file = tmp_path / "vllm.json"
    result_file.write_text(json.dumps(VLLM))
    args = ["bench-import", str(result_file), "--out", str(tmp_path / "imp")]
    assert runner.invoke(app, args).exit_code == 0
    again = runner.invoke(app, args)
    assert again.exit_code == 2 and "alreadyholdsarun" in _flat(again.output)
    assert runner.invoke(app, [*args, "--overwrite"]).exit_code == 0
    assert len(read_run(tmp_path / "imp").records) == len(VLLM["ttfts"])

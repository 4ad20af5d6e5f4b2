"""Bad files inside the runs folder, against the real server: a file that links out of the runs
folder is never read or served, and a run whose files are bad (binary, not UTF-8, NaN, empty, a
folder or a FIFO in a file's place, a dangling link) is listed as unreadable with the reason
while the other runs list and open as usual. Nothing answers 500, nothing blocks, nothing leaves
a traceback in the server's log (conftest checks it after every test)."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tokenprobe.records import CONFIG_FILE, RECORDS_FILE, SUMMARY_FILE

from .conftest import Server, start_server, write_small_run

GOOD = "good"
SECRET_JSON = '{"format": "tokenprobe-run", "kind": "simulated", "secret": "top secret"}\n'


@dataclass(frozen=True)
class Bad:
    """A run folder spoiled by `spoil`; `words` must appear in the reason given for it."""

    name: str
    spoil: Callable[[Path, Path], None]  # (run folder, a folder outside the runs folder)
    words: str
    summary_readable: bool = False  # config.json and summary.json read: only the page fails


def _replace(run: Path, name: str, make: Callable[[Path], None]) -> None:
    path = run / name
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)
    make(path)


def _link_out(name: str) -> Callable[[Path, Path], None]:
    def spoil(run: Path, outside: Path) -> None:
        target = outside / f"{run.name}-{name}"
        shutil.copyfile(run / name, target)  # the run's own file: readable, only misplaced
        if name == SUMMARY_FILE:
            target.write_text(SECRET_JSON)
        _replace(run, name, lambda p: p.symlink_to(target))

    return spoil


def _write(name: str, data: bytes) -> Callable[[Path, Path], None]:
    return lambda run, _: (run / name).write_bytes(data)


def _edit_config(**changes: object) -> Callable[[Path, Path], None]:
    def spoil(run: Path, _: Path) -> None:
        doc = json.loads((run / CONFIG_FILE).read_text())
        (run / CONFIG_FILE).write_text(json.dumps({**doc, **changes}))

    return spoil


def _edit_first_record(**changes: object) -> Callable[[Path, Path], None]:
    def spoil(run: Path, _: Path) -> None:
        first, *rest = (run / RECORDS_FILE).read_text().splitlines()
        lines = [json.dumps({**json.loads(first), **changes}), *rest]
        (run / RECORDS_FILE).write_text("\n".join(lines) + "\n")

    return spoil


BAD_RUNS = [
    Bad("link-config", _link_out(CONFIG_FILE), "links outside the runs folder"),
    Bad("link-summary", _link_out(SUMMARY_FILE), "links outside the runs folder"),
    Bad("link-records", _link_out(RECORDS_FILE), "links outside the runs folder"),
    Bad(
        "link-nowhere",
        lambda run, o: _replace(run, SUMMARY_FILE, lambda p: p.symlink_to(o / "missing")),
        "cannot be read",
    ),
    Bad(
        "link-loop",
        lambda run, _: _replace(run, SUMMARY_FILE, lambda p: p.symlink_to(p)),
        "cannot be read",
    ),
    Bad("dir-records", lambda run, _: _replace(run, RECORDS_FILE, Path.mkdir), "is a folder"),
    Bad(
        "fifo-records",
        lambda run, _: _replace(run, RECORDS_FILE, os.mkfifo),
        "not a regular file",
    ),
    Bad(
        "fifo-summary",
        lambda run, _: _replace(run, SUMMARY_FILE, os.mkfifo),
        "not a regular file",
    ),
    Bad("binary-config", _write(CONFIG_FILE, b"\x00\x01\xff\xfe" * 64), "binary"),
    Bad("latin1-config", _write(CONFIG_FILE, '{"kind": "caf\xe9"}'.encode("latin-1")), "UTF-8"),
    Bad("empty-config", _write(CONFIG_FILE, b""), "not valid JSON"),
    Bad("list-config", _write(CONFIG_FILE, b"[1, 2]"), "JSON object"),
    Bad("nan-config", _write(CONFIG_FILE, b'{"format": NaN}'), "NaN"),
    Bad("empty-summary", _write(SUMMARY_FILE, b""), "not valid JSON"),
    Bad("nan-summary", _write(SUMMARY_FILE, b'{"completed": NaN}'), "nan"),
    Bad("inf-summary", _write(SUMMARY_FILE, b'{"ttft_s": {"p50": -Infinity}}'), "inf"),
    Bad("list-summary", _write(SUMMARY_FILE, b"[1, 2]"), "JSON object"),
    Bad(
        "latin1-records",
        _write(RECORDS_FILE, '{"error_message": "caf\xe9"}\n'.encode("latin-1")),
        "utf-8",
        summary_readable=True,
    ),
    Bad("text-wall-start", _edit_config(wall_start_s="noon"), "text-wall-start", True),
    Bad("list-run-config", _edit_config(config=[1, 2]), "list-run-config", True),
    Bad("far-future-record", _edit_first_record(finish_s=1e308), "far-future-record", True),
    Bad(
        "broken-records",
        _write(RECORDS_FILE, b'{"request_id": \n{}\n'),
        "not valid JSON",
        summary_readable=True,
    ),
]


@pytest.fixture(scope="module")
def bad_runs_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    base = tmp_path_factory.mktemp("bad-runs")
    runs_dir, outside = base / "runs", base / "outside"
    runs_dir.mkdir()
    outside.mkdir()
    secret = outside / "secret.txt"
    secret.write_text("top secret\n")
    write_small_run(runs_dir / GOOD, num_requests=20)
    for bad in BAD_RUNS:
        write_small_run(runs_dir / bad.name, num_requests=5)
        bad.spoil(runs_dir / bad.name, outside)
    os.mkfifo(runs_dir / "fifo-run")  # not folders: never runs
    (runs_dir / "file-run").write_text(SECRET_JSON)
    write_small_run(outside / "escaped-run", num_requests=5)
    (runs_dir / "link-run").symlink_to(outside / "escaped-run")
    with start_server(runs_dir, secret) as running:
        yield running


def _get(server: Server, path: str) -> httpx.Response:
    return httpx.get(f"{server.url}{path}", timeout=60)


def _detail(response: httpx.Response) -> str:
    return str(response.json()["detail"]).replace("\n", "")


def test_the_list_shows_bad_runs_as_unreadable_and_the_rest_as_usual(
    bad_runs_server: Server,
) -> None:
    r = _get(bad_runs_server, "/api/runs")
    assert r.status_code == 200
    runs = {row["name"]: row for row in r.json()["runs"]}
    assert set(runs) == {GOOD} | {b.name for b in BAD_RUNS}
    assert runs[GOOD]["completed"] == 20 and "error" not in runs[GOOD]
    for bad in BAD_RUNS:
        row = runs[bad.name]
        if bad.summary_readable:
            assert "error" not in row and row["completed"] == 5, row
        else:
            assert bad.words.lower() in row["error"].lower(), (bad.name, row)
            assert "top secret" not in row["error"]


@pytest.mark.parametrize("bad", BAD_RUNS, ids=lambda b: b.name)
def test_a_bad_run_answers_a_400_with_the_reason(bad_runs_server: Server, bad: Bad) -> None:
    summary = _get(bad_runs_server, f"/api/runs/{bad.name}")
    page = _get(bad_runs_server, f"/runs/{bad.name}")
    if bad.summary_readable:
        assert summary.status_code == 200 and summary.json()["summary"]["completed"] == 5
    else:
        assert summary.status_code == 400, summary.text
        assert bad.words.lower() in _detail(summary).lower()
    assert page.status_code == 400, page.text[:300]
    assert bad.words.lower() in _detail(page).lower()
    for r in (summary, page):
        assert "top secret" not in r.text
    assert _get(bad_runs_server, f"/runs/{GOOD}").status_code == 200  # the others still open


@pytest.mark.parametrize("name", ["fifo-run", "file-run", "link-run"])
def test_what_is_not_a_run_folder_is_404(bad_runs_server: Server, name: str) -> None:
    for prefix in ("/api/runs/", "/runs/"):
        r = _get(bad_runs_server, prefix + name)
        assert r.status_code == 404, (prefix, r.text)
        assert "top secret" not in r.text


def test_a_link_to_a_file_inside_the_runs_folder_is_followed(bad_runs_server: Server) -> None:
    runs = bad_runs_server.runs_dir
    alias = runs / "alias"
    write_small_run(alias, num_requests=5)
    (alias / SUMMARY_FILE).unlink()
    (alias / SUMMARY_FILE).symlink_to(Path("..") / GOOD / SUMMARY_FILE)
    try:
        r = _get(bad_runs_server, "/api/runs/alias")
        assert r.status_code == 200 and r.json()["summary"]["completed"] == 20
    finally:
        shutil.rmtree(alias)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_an_unreadable_file_makes_the_run_unreadable(bad_runs_server: Server) -> None:
    run = bad_runs_server.runs_dir / "no-access"
    write_small_run(run, num_requests=5)
    (run / SUMMARY_FILE).chmod(0)
    try:
        r = _get(bad_runs_server, "/api/runs/no-access")
        assert r.status_code == 400 and "Permission denied" in _detail(r)
        rows = {row["name"]: row for row in _get(bad_runs_server, "/api/runs").json()["runs"]}
        assert "Permission denied" in rows["no-access"]["error"]
    finally:
        shutil.rmtree(run)


RAW_TARGETS = [
    "/runs/%2e%2e",
    "/runs/%2e%2e%2foutside%2fsecret.txt",
    "/api/runs/%2E%2E%2F%2E%2E%2Fetc%2Fpasswd",
    "/runs/good/../../outside/secret.txt",
    "/runs/good%2f..%2f..%2foutside%2fsecret.txt",
    "/runs//etc/passwd",
    "/api/runs/%2Fetc%2Fpasswd",
    "/runs/good%00",
    "/api/runs/%00",
    "/runs/link-config%2fconfig.json",
    "/runs/good%5c..%5csecret.txt",
    "/runs/%c0%ae%c0%ae",
    "/runs/%ff",
    "/api/runs/" + "a" * 5000,
]


@pytest.mark.parametrize("target", RAW_TARGETS)
def test_encoded_traversal_is_a_4xx(bad_runs_server: Server, target: str) -> None:
    status, text = bad_runs_server.raw_get(target)
    assert status in (400, 404), (target, status, text[:300])
    assert "top secret" not in text


def test_the_page_lists_unreadable_runs_with_the_reason(
    bad_runs_server: Server, browser: Any, artifacts: Path
) -> None:
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(bad_runs_server.url + "/")
    page.wait_for_function("document.body.dataset.ready === '1'", timeout=60_000)
    unreadable = page.locator("#runs-table tr.unreadable")
    listed_bad = [b for b in BAD_RUNS if not b.summary_readable]
    assert unreadable.count() == len(listed_bad)
    texts = unreadable.all_inner_texts()
    assert any("links outside the runs folder" in t for t in texts)
    links = page.locator("#runs-table a").all_inner_texts()
    assert GOOD in links and len(links) == len(BAD_RUNS) + 1
    page.locator("#runs-table").screenshot(path=str(artifacts / "web-unreadable-runs.png"))
    page.close()
    assert errors == []

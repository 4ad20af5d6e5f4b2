"""The README (and docs/*.md) as a tested front door: every command written there runs as written.

Each fenced ```bash block, and each `$ ` line of a ```text block, of README.md and docs/*.md is
split into commands (`\\` continuations joined, `# comments` dropped, `&&` parts run in order) and
each command is one test case, run in README order in one temporary folder, so that `runs/...`
and `*.html` paths land there and a later command finds what an earlier one wrote. A
`[--json]`-style optional part runs both without and with it. `tokenprobe ...` commands run
in-process through the typer app (the same argv parsing as the console script; it saves the
~1 s interpreter start-up per command that the ~90 s budget of this file cannot afford);
`serve` and `monitor`, which run until stopped, run as subprocesses, are fetched once and
stopped with SIGINT (Ctrl-C). A command that fails (non-zero exit, or an exception) fails.

Placeholders are replaced by SUBSTITUTIONS and ELLIPSIS (below): the server URL and NAME by the
real llama.cpp server of tests/loadgen (SmolLM2-135M on one CPU thread) and the name it serves.
On that server the default run shrinks the load of `bench` (REDUCED); TOKENPROBE_README_SLOW=1
runs it as written, as well as the commands listed in SLOW (minutes each), which the default
run still checks to parse (`--help` appended: click parses every flag before it acts on
--help, so a misspelled or renamed flag fails). `profile` needs a GPU: without one it must print
its documented "nothing measured" line.

Figures quoted in the README are compared with what their command prints (FIGURES): the
`tokenprobe estimate` excerpt line by line, the seed-003 table, hello-vs-summary's joules, the
bursty-load diagnosis, the measured-vs-predicted table of `diagnose --predict` on the measured
run, the model count; under TOKENPROBE_README_SLOW=1 also the plan table, the plan's serving
modes and the pooled accuracy figures (README and docs/accuracy.md, against validate.py's JSON
line).
"""

from __future__ import annotations

import itertools
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from typer.testing import CliRunner

from loadgen.conftest import LlamaServer, llama  # noqa: F401  (the suite's real server fixture)
from loadgen.test_importers import VLLM as VLLM_RESULT
from tokenprobe.cli import app

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
SLOW_RUN = os.environ.get("TOKENPROBE_README_SLOW") == "1"
VALIDATION_DIR = Path(
    os.environ.get("TOKENPROBE_VALIDATION_DIR") or REPO.parent / "shared" / "validation"
)
WIDE = {"COLUMNS": "200"}  # rich wraps at the terminal width: keep table rows on one line
SERVED_MODEL = "smollm2"

# What the README writes -> what the test runs. Keys are literal text of the README; values are
# computed per run (the server's port, free ports, files of this repository).
SUBSTITUTIONS: dict[str, Callable[[Context], str]] = {
    "http://127.0.0.1:8000/v1": lambda ctx: ctx.server().url,  # the suite's llama.cpp server
    "NAME": lambda ctx: SERVED_MODEL,  # the name that server is asked for
    "RESULT.json": lambda ctx: ctx.vllm_result(),  # vLLM's --save-detailed keys (test_importers)
    "REPORT.json": lambda ctx: str(REPO / "tests/loadgen/data/guidellm_0.8.1_report.json"),
    # a log of seed 003's nvidia-smi command, as recorded beside a run in another terminal
    "gpu.csv": lambda ctx: str(REPO / "tests/data/telemetry/nvidia_smi_units_header.csv"),
    "benchmarks/data/": lambda ctx: str(REPO / "benchmarks/data") + "/",
    "docs/workloads/": lambda ctx: str(REPO / "docs/workloads") + "/",
    "tests/data/datasets/": lambda ctx: str(REPO / "tests/data/datasets") + "/",
    "benchmarks/validate.py": lambda ctx: str(REPO / "benchmarks/validate.py"),
    "benchmarks/sim_validate.py": lambda ctx: str(REPO / "benchmarks/sim_validate.py"),
    "../shared/validation/": lambda ctx: str(VALIDATION_DIR) + "/",
    "--port 8080": lambda ctx: f"--port {free_port()}",  # 8080 may be taken on a shared box
    "--prometheus 9400": lambda ctx: f"--prometheus {free_port()}",
}
# `tokenprobe bench ... --rate 5`: the `...` stands for the first bench command's target and load
ELLIPSIS = {
    "bench": "--url http://127.0.0.1:8000/v1 --model NAME --num-requests 200 --input-tokens 512 "
    "--output-tokens 128 --out runs/b-open",
}
# Default run, commands against the test server: SmolLM2 on one thread shared with the suite
# streams ~10-20 tokens/s here, so 200 requests of 512 + 128 tokens would take many minutes.
REDUCED = {"--num-requests": "3", "--input-tokens": "16", "--output-tokens": "4"}
# Commands that take minutes, run only under TOKENPROBE_README_SLOW=1 (else parsed with --help):
SLOW = {
    "tokenprobe plan": "simulates every candidate deployment: 5-25 s each command here",
    "tokenprobe calibrate benchmarks/data/sglang_datacrunch_h200.csv": "replays serving runs "
    "through the simulator per fit step: 3 of its rows alone took 2.7 min on this box",
    "tokenprobe calibrate ../shared/validation/": "fits 1,188 Argonne rows: minutes",
    "python benchmarks/validate.py": "every validation row, twice: ~8 min",
    "python benchmarks/sim_validate.py": "simulates each row (seconds each under load)",
}
# Not run: what installs the package or runs this very suite.
NOT_RUN = {
    "pip install": "installs the package (scripts/test.sh and CI do; the venv running this has it)",
    "bash scripts/test.sh": "runs the whole suite, this file included",
}
# Quick docs commands that need the validation folder and run by default (seconds):
FAST_EXCEPTIONS = ("--only trtllm_v0.9 --no-extra",)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# ------------------------------------------------------------------ reading the pages


@dataclass(frozen=True)
class Command:
    page: str  # file name
    line: int  # first line of the command in the page
    text: str  # one command as written (a `&&` part, comment dropped, continuations joined)
    expected: tuple[str, ...] = ()  # output lines quoted under a `$ ` line of a text block

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}:{self.text[:70]}"


def fenced_blocks(text: str) -> Iterator[tuple[int, str, list[str]]]:
    """(line number of the first body line, language, body lines) of every fenced block."""
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = re.match(r"^```(\w*)\s*$", lines[i])
        if not m:
            i += 1
            continue
        j = i + 1
        while j < len(lines) and not lines[j].startswith("```"):
            j += 1
        yield i + 2, m.group(1), lines[i + 1 : j]
        i = j + 1


def logical_lines(start: int, body: list[str]) -> Iterator[tuple[int, str]]:
    """Lines with `\\` continuations joined, numbered by their first physical line."""
    buf, first = "", start
    for n, line in enumerate(body, start):
        if not buf:
            first = n
        if line.rstrip().endswith("\\"):
            buf += line.rstrip()[:-1] + " "
            continue
        yield first, buf + line
        buf = ""


def commands_of(page: Path) -> list[Command]:
    out: list[Command] = []
    for start, lang, body in fenced_blocks(page.read_text(encoding="utf-8")):
        if lang == "bash":
            for n, line in logical_lines(start, body):
                for part in _and_parts(line):
                    out.append(Command(page.name, n, part))
        elif lang == "text":
            out.extend(_text_block(page.name, start, body))
    return out


def _and_parts(line: str) -> list[str]:
    """A line's `&&`-separated commands, each with comments dropped and quoting kept."""
    words = shlex.split(line, comments=True)
    parts = [list(g) for k, g in itertools.groupby(words, lambda w: w == "&&") if not k]
    return [" ".join(shlex.quote(w) if not _optional(w) else w for w in p) for p in parts if p]


def _optional(word: str) -> bool:
    return word.startswith("[") or word.endswith("]")


def _text_block(page: str, start: int, body: list[str]) -> list[Command]:
    """`$ command` lines of a text block, each with the output lines quoted under it."""
    out: list[Command] = []
    for n, line in enumerate(body, start):
        if line.startswith("$ "):
            out.append(Command(page, n, line[2:].strip()))
        elif out:
            last = out[-1]
            out[-1] = Command(last.page, last.line, last.text, (*last.expected, line))
    return out


ALL = [c for page in PAGES for c in commands_of(page)]


def variants(text: str) -> list[str]:
    """`a [--json] [--out x]` -> ['a', 'a --json --out x']: without, then with, the options."""
    without = re.sub(r"\s*\[[^\[\]]+\]", "", text)
    with_all = re.sub(r"\[([^\[\]]+)\]", r"\1", text)
    return [without] if without == with_all else [without, with_all]


def startswith(text: str, prefixes: dict[str, str]) -> str | None:
    return next((reason for p, reason in prefixes.items() if text.startswith(p)), None)


# ------------------------------------------------------------------ running


@dataclass
class Context:
    """One temporary working folder for all commands, and the server when one is needed."""

    workdir: Path
    request: pytest.FixtureRequest
    outputs: dict[str, str] = field(default_factory=dict)  # command as run -> its output

    def vllm_result(self) -> str:
        path = self.workdir / "vllm-result.json"
        path.write_text(json.dumps(VLLM_RESULT), encoding="utf-8")
        return str(path)

    def server(self) -> LlamaServer:
        server: LlamaServer = self.request.getfixturevalue("llama")
        return server


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("readme")


@pytest.fixture(scope="module")
def outputs() -> dict[str, str]:
    return {}


def substitute(text: str, ctx: Context, reduce: bool) -> str:
    """The README's text with placeholders replaced (SUBSTITUTIONS, ELLIPSIS, REDUCED)."""
    words = text.split(" ")
    if len(words) > 2 and words[2] == "..." and words[1] in ELLIPSIS:
        text = " ".join([*words[:2], ELLIPSIS[words[1]], *words[3:]])
    uses_server = "http://127.0.0.1:8000/v1" in text
    for key, value in SUBSTITUTIONS.items():
        if key in text:
            text = text.replace(key, value(ctx))
    if reduce and uses_server:
        for flag, value in REDUCED.items():
            text = re.sub(rf"{flag} \d+", f"{flag} {value}", text)
    return text


def run_tokenprobe(argv: list[str]) -> tuple[int, str]:
    """Run `tokenprobe ARGV` in-process; (exit code, stdout and stderr as a terminal shows them)."""
    code, output, _ = invoke(argv)
    return code, output


def invoke(argv: list[str]) -> tuple[int, str, str]:
    """(exit code, stdout + stderr, stdout alone) of `tokenprobe ARGV`, run in-process."""
    result = CliRunner().invoke(app, argv, env=WIDE, prog_name="tokenprobe")
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.output, result.stdout


def tokenprobe_exe() -> list[str]:
    script = Path(sys.executable).parent / "tokenprobe"
    if script.exists():
        return [str(script)]
    return [sys.executable, "-c", "from tokenprobe.cli import main; main()"]


def fetch(url: str, timeout_s: float = 60.0) -> str:
    """GET `url`, retrying until it answers 200 (a server that is still starting)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5) as resp:
                return str(resp.read().decode("utf-8", "replace"))
        except (urllib.error.URLError, OSError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def run_until_ctrl_c(argv: list[str], url: str, cwd: Path) -> tuple[int, str, str]:
    """Start a long-running command, GET `url` once it answers, then SIGINT it (Ctrl-C)."""
    env = {**os.environ, **WIDE, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen(
        [*tokenprobe_exe(), *argv], cwd=cwd, env=env, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        body = fetch(url)
    finally:
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    return proc.returncode, out, body


def option(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


# ------------------------------------------------------------------ figures quoted in prose


def numbers(text: str) -> list[str]:
    return re.findall(r"\d[\d,]*(?:\.\d+)?", text)


def squash(line: str) -> str:
    return " ".join(line.replace("│", " ").replace("┃", " ").split())


def check_excerpt(cmd: Command, output: str) -> None:
    """Each quoted output line is a line of the real output (table borders and spacing aside)."""
    printed = {squash(line) for line in output.splitlines()}
    for line in cmd.expected:
        if line.strip() and not line.startswith("("):
            assert squash(line) in printed, f"README line not printed today: {line!r}"


def readme() -> str:
    return (REPO / "README.md").read_text(encoding="utf-8")


def table_rows(text: str, header_start: str) -> list[list[str]]:
    """Cells of the markdown table whose header row starts with `header_start`."""
    lines = text.splitlines()
    i = next(n for n, line in enumerate(lines) if line.startswith(header_start))
    rows = []
    for line in lines[i + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip("|").split("|")])
    return rows


def check_seed003(output: str) -> None:
    """README's seed-003 table: ours and the seed's tokens/s, watts and kWh/M as printed."""
    printed = {}  # "A single-long 96 60 231 280 0.667 1.30" once borders and spacing go
    for line in map(squash, output.splitlines()):
        m = re.match(r"([ABC]) [a-z][\w-]* ((?:[\d,.]+ ?){6})$", line)
        if m:
            printed[m.group(1)] = m.group(2).split()
    for row in table_rows(readme(), "| scenario | tokens/s"):
        ours_seed = [re.findall(r"[\d,.]+", cell) for cell in row[1:]]
        got = printed[row[0][0]]  # tokens/s, seed, W, seed W, kWh/M, seed kWh/M
        for k, (ours, seed) in enumerate(ours_seed):
            assert ours == got[2 * k], (row, got)
            assert float(seed.replace(",", "")) == float(got[2 * k + 1].replace(",", "")), row


def check_hello(output: str) -> None:
    m = re.search(
        r"greetings take ([\d,]+) J, the one\s+summary ([\d,]+) J \(([\d.]+)x\)", readme()
    )
    assert m, "hello-vs-summary sentence not found in README"
    flat = "\n".join(map(squash, output.splitlines()))
    joules = re.findall(r"^GPU energy total \(idle\) ([\d,]+) J", flat, re.MULTILINE)
    assert joules[:2] == [m.group(1), m.group(2)]
    ratio = float(joules[1].replace(",", "")) / float(joules[0].replace(",", ""))
    assert f"{ratio:.1f}" == m.group(3)


def check_bursty(output: str) -> None:
    text = " ".join(readme().split())
    m = re.search(
        r"dispersion index ([\d.]+) over.*?step time is (\d+)% memory, but the GPU draws "
        r"(\d+)% of TDP",
        text,
    )
    assert m, "bursty diagnosis sentence not found in README"
    flat = " ".join(output.split())
    assert f"dispersion index {m.group(1)}," in flat
    # the memory-bandwidth-bound rule's reason: "util 100%, power 79% of TDP, memory 68%"
    assert f"power {m.group(3)}% of TDP, memory {m.group(2)}%" in flat


def check_models(output: str) -> None:
    m = re.search(r"Models \(`src/tokenprobe/catalog/models/`\): (\d+) Hugging Face", readme())
    assert m, "model count not found in README"
    # a row: name, [HF id,] total parameters ("8.03 B"), ... (boxed on a terminal, plain in a pipe)
    rows = [
        line for line in map(squash, output.splitlines()) if re.match(r"\S+ (\S+ )?[\d.]+ B ", line)
    ]
    assert len(rows) == int(m.group(1)), output


def check_plan_row(cmd: str, output: str) -> None:
    """A row of the README's plan table against the plan command with its rate and length."""
    argv = shlex.split(cmd)
    rate, out_tokens = option(argv, "--rate"), option(argv, "--output-tokens")
    rows = table_rows(readme(), "| requests/s | output tokens each")
    row = next(r for r in rows if r[0] == rate and r[1].replace(",", "") == out_tokens)
    flat = "\n".join(map(squash, output.splitlines()))
    m = re.search(r"^a100-sxm-80gb fp16 tp1 \S+ (\d+) ([\d.]+) ", flat, re.MULTILINE)
    assert m, output
    assert (row[3], row[4]) == (m.group(1), m.group(2))
    assert float(row[2].replace(",", "")) == float(rate) * int(out_tokens)


def check_plan_modes(output: str) -> None:
    """The README's disaggregation example: without spec decode 1p1d meets the TPOT bound on 2
    GPUs where aggregated replicas need 3; with MTP both layouts do on 2."""
    flat = "\n".join(map(squash, output.splitlines()))
    rows = re.findall(r"^h100-sxm bf16 tp1 seqs256 (\d+) \S+ (agg|\d+p\d+d) \S+ tp1 \S+ (\S+) ",
                      flat, re.MULTILINE)  # fmt: skip
    fewest: dict[tuple[str, str], int] = {}
    for gpus, mode, spec in rows:
        fewest[mode, spec] = min(int(gpus), fewest.get((mode, spec), 1 << 30))
    assert fewest == {("agg", "-"): 3, ("1p1d", "-"): 2, ("agg", "mtp:1"): 2,
                      ("1p1d", "mtp:1"): 2}, output  # fmt: skip


def check_pooled_accuracy(output: str) -> None:
    """README's pooled figures and docs/accuracy.md's pooled table against validate.py's JSON."""
    by_kind = {k["kind"]: k for k in json.loads(output.strip().splitlines()[-1])["by_kind"]}
    text = " ".join(readme().split())
    m = re.search(
        r"([\d.]+) % on time per output token, ([\d.]+) % on throughput, ([\d.]+) % on TTFT "
        r"and ([\d.]+) % on energy",
        text,
    )
    assert m, "pooled accuracy sentence not found in README"
    kinds = ("decode time per token", "throughput", "TTFT", "energy per token")
    assert [float(g) for g in m.groups()] == [by_kind[k]["profile_mdape_pct"] for k in kinds]
    docs = (REPO / "docs/accuracy.md").read_text(encoding="utf-8")
    for row, kind in zip(table_rows(docs, "| kind | rows"), [*kinds, "power"], strict=True):
        assert int(row[1].replace(",", "")) == by_kind[kind]["rows"], row
        assert float(row[2].rstrip(" %")) == by_kind[kind]["mdape_pct"], row
        assert float(row[3].split(" %")[0]) == by_kind[kind]["profile_mdape_pct"], row


def check_predicted(output: str) -> None:
    """`bench --gpu --catalog-model` recorded what the server runs: diagnose prices it."""
    assert "Measured vs predicted" in output, output


FIGURES: dict[str, Callable[[str], None]] = {
    "tokenprobe diagnose runs/b1 --predict": check_predicted,
    "tokenprobe simulate --scenario seed-003": check_seed003,
    "tokenprobe simulate --scenario hello-vs-summary": check_hello,
    "tokenprobe diagnose runs/s2": check_bursty,
    "tokenprobe models": check_models,
}


def check_figures(cmd: Command, ran: str, output: str) -> None:
    if cmd.expected:
        check_excerpt(cmd, output)
    if cmd.text in FIGURES:
        FIGURES[cmd.text](output)
    if cmd.text.startswith("tokenprobe plan") and "--disaggregate" in cmd.text:
        check_plan_modes(output)
    elif cmd.text.startswith("tokenprobe plan") and "--tp 1" in cmd.text:
        check_plan_row(ran, output)
    if cmd.text == "python benchmarks/validate.py":
        check_pooled_accuracy(output)


# ------------------------------------------------------------------ the tests


@pytest.mark.parametrize("cmd", ALL, ids=[c.id for c in ALL])
def test_command(
    cmd: Command, workdir: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    if reason := startswith(cmd.text, NOT_RUN):
        pytest.skip(f"not run: {reason}")
    slow = startswith(cmd.text, SLOW) if not any(f in cmd.text for f in FAST_EXCEPTIONS) else None
    texts = variants(cmd.text)
    for k, text in enumerate(texts):
        # the variants are alternatives: the last (every optional part) runs in the shared
        # folder, whose run folders later commands read; the others each in a folder of their own
        here = workdir if k == len(texts) - 1 else workdir / f"variant-{cmd.line}-{k}"
        here.mkdir(exist_ok=True)
        monkeypatch.chdir(here)
        ctx = Context(here, request)
        ran = substitute(text, ctx, reduce=not SLOW_RUN)
        argv = shlex.split(ran)
        skip_without_inputs(argv, here)
        if slow and not SLOW_RUN:
            check_parses(argv, ctx)
            continue
        output = run(argv, ctx)
        check_figures(cmd, ran, output)


def skip_without_inputs(argv: list[str], workdir: Path) -> None:
    """A run folder a command reads (not one it writes) was made by an earlier command; when
    that one was skipped (no llama.cpp server here), this one is skipped too, saying why."""
    for before, word in itertools.pairwise(argv):
        read = word.startswith("runs/") and before not in ("--out", "--runs-dir")
        if read and not (workdir / word).exists():
            pytest.skip(f"{word} was not written: the command that writes it did not run")


def check_parses(argv: list[str], ctx: Context) -> None:
    """The slow command's flags exist (click parses them all before acting on --help), and the
    files it names are there."""
    if argv[0] == "python":
        code, out = run_python([*argv[1:], "--help"], ctx.workdir)
    else:
        code, out = run_tokenprobe([*argv[1:], "--help"])
    assert code == 0, out
    for word in argv[1:]:
        in_validation = word.startswith(str(VALIDATION_DIR))
        if word.endswith(".csv") and in_validation and not VALIDATION_DIR.is_dir():
            pytest.skip(f"no validation folder at {VALIDATION_DIR} (docs/accuracy.md)")
        if word.endswith(".csv"):
            assert Path(word).is_file(), word


def run_python(argv: list[str], cwd: Path) -> tuple[int, str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.run(
        [sys.executable, *argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=1800
    )
    return proc.returncode, proc.stdout + proc.stderr


def run(argv: list[str], ctx: Context) -> str:
    """Run one command as the README writes it; its output, after checking it succeeded."""
    if argv[0] == "python":
        code, out = run_python(argv[1:], ctx.workdir)
        if code == 2 and "validation data not found" in out and not VALIDATION_DIR.is_dir():
            pytest.skip(f"no validation folder: the script says so ({out.strip()[:120]})")
        assert code == 0, out
        return out
    assert argv[0] == "tokenprobe", argv
    if argv[1] == "serve":
        return check_serve(argv, ctx)
    if argv[1] == "monitor":
        return check_monitor(argv, ctx)
    if argv[1] == "profile":
        return check_profile(argv)
    code, out, stdout = invoke(argv[1:])
    assert code == 0, out
    if "--json" in argv:  # the promise of --json: one JSON document on stdout, nothing else
        json.loads(stdout)
    return out


def check_serve(argv: list[str], ctx: Context) -> str:
    url = f"http://127.0.0.1:{option(argv, '--port')}/"
    code, out, body = run_until_ctrl_c(argv[1:], url, ctx.workdir)
    assert "<html" in body.lower(), body[:200]
    assert code in (0, 130), out
    return out


def check_monitor(argv: list[str], ctx: Context) -> str:
    port = option(argv, "--prometheus") if "--prometheus" in argv else None
    if port is None:  # no endpoint to wait on: wait for the run folder it writes as it goes
        url = ""
        proc_argv = argv[1:]
        env = {**os.environ, **WIDE, "PYTHONPATH": os.pathsep.join(sys.path)}
        proc = subprocess.Popen(
            [*tokenprobe_exe(), *proc_argv], cwd=ctx.workdir, env=env, text=True,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        )  # fmt: skip
        out_dir = ctx.workdir / option(argv, "--out")
        deadline = time.monotonic() + 60
        while not (out_dir / "host.jsonl").exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
        code = proc.returncode
    else:
        url = f"http://127.0.0.1:{port}/metrics"
        code, out, body = run_until_ctrl_c(argv[1:], url, ctx.workdir)
        assert "tokenprobe_" in body, body[:200]
    assert code == 0, out
    assert (ctx.workdir / option(argv, "--out") / "config.json").is_file(), out
    return out


def check_profile(argv: list[str]) -> str:
    from tokenprobe.calibrate.profiler import gpu_unavailable_reason

    reason = gpu_unavailable_reason()
    if reason is None:
        pytest.skip("a GPU is here: benchmarks/profile_gpu_check.py is the device check")
    code, out = run_tokenprobe(argv[1:])
    assert code == 0, out
    assert squash(out) == squash(f"tokenprobe profile: {reason}; nothing measured."), out
    return out


def test_python_block_runs() -> None:
    """The README's Python example runs and gives the keys it names."""
    blocks = [b for _, lang, b in fenced_blocks(readme()) if lang == "python"]
    assert blocks
    for body in blocks:
        namespace: dict[str, object] = {}
        exec(compile("\n".join(body), "README.md", "exec"), namespace)
        d = namespace["d"]
        assert isinstance(d, dict) and d["ttft_s"] > 0 and d["decode"]["bound"]


def test_every_command_is_classified() -> None:
    """Every fenced command is a tokenprobe or python command, or listed in NOT_RUN."""
    for cmd in ALL:
        assert cmd.text.startswith(("tokenprobe ", "python ")) or startswith(cmd.text, NOT_RUN), (
            cmd.id
        )
    assert any(c.expected for c in ALL), "the README's estimate excerpt was not found"
    assert sum(c.page == "README.md" for c in ALL) >= 20


def test_slow_commands_exist() -> None:
    """Each SLOW entry still names a command of the pages (a stale list hides nothing)."""
    for prefix in SLOW:
        assert any(c.text.startswith(prefix) for c in ALL), prefix

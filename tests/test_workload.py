"""Workloads: arrival processes, length distributions, traces and workload files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tokenprobe.errors import ConfigError, SchemaError
from tokenprobe.workload import (
    Arrival,
    LengthDist,
    Workload,
    arrival_times_s,
    fixed,
    load_workload,
    read_lengths_file,
    read_trace,
)


def _rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def test_poisson_mean_rate_and_first_at_zero() -> None:
    t = arrival_times_s(Arrival("poisson", rate_per_s=4.0), _rng(), 20_000)
    assert t[0] == 0.0
    assert np.all(np.diff(t) >= 0)
    gaps = np.diff(t)
    assert gaps.mean() == pytest.approx(0.25, rel=0.03)
    # exponential: coefficient of variation 1
    assert gaps.std() / gaps.mean() == pytest.approx(1.0, rel=0.05)


@pytest.mark.parametrize("burstiness", [0.25, 1.0, 4.0])
def test_gamma_keeps_rate_and_sets_cv(burstiness: float) -> None:
    gaps = np.diff(arrival_times_s(Arrival("gamma", 2.0, burstiness), _rng(1), 40_000))
    assert gaps.mean() == pytest.approx(0.5, rel=0.05)
    # Gamma(shape k): CV = 1/sqrt(k)
    assert gaps.std() / gaps.mean() == pytest.approx(1 / np.sqrt(burstiness), rel=0.06)


def test_constant_offline_closed() -> None:
    assert arrival_times_s(Arrival("constant", 2.0), _rng(), 4).tolist() == [0, 0.5, 1.0, 1.5]
    assert arrival_times_s(Arrival("offline"), _rng(), 3).tolist() == [0, 0, 0]
    closed = Arrival("closed", concurrency=8)
    assert closed.closed_loop and not Arrival("offline").closed_loop


def test_same_seed_same_requests() -> None:
    w = Workload(Arrival("poisson", 3.0), LengthDist("normal", mean=100, std=50), num_requests=50)
    assert w.generate(_rng(7)) == w.generate(_rng(7))
    assert w.generate(_rng(7)) != w.generate(_rng(8))


def test_length_distributions() -> None:
    rng = _rng(2)
    assert set(fixed(7).sample(rng, 10).tolist()) == {7}
    u = LengthDist("uniform", low=3, high=5).sample(rng, 1000)
    assert set(u.tolist()) == {3, 4, 5}
    norm = LengthDist("normal", mean=2, std=10).sample(rng, 1000)
    assert norm.min() >= 1  # clipped
    logn = LengthDist("lognormal", mean=300, sigma=0.8).sample(rng, 50_000)
    assert logn.mean() == pytest.approx(300, rel=0.03)  # parametrised by its mean
    emp = LengthDist("empirical", values=(10, 20)).sample(rng, 1000)
    assert set(emp.tolist()) == {10, 20}


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"kind": "fixed", "value": 0}, "tokens"),
        ({"kind": "fixed", "value": -5}, "tokens"),
        ({"kind": "uniform", "low": 5, "high": 2}, "low/high"),
        ({"kind": "normal", "mean": -1.0}, "mean"),
        ({"kind": "zipf"}, "kind"),
    ],
)
def test_bad_lengths_name_the_field(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(ConfigError, match=field):
        LengthDist(**kwargs)  # type: ignore[arg-type]


def test_bad_arrivals() -> None:
    with pytest.raises(ConfigError, match="rate_per_s"):
        Arrival("poisson", rate_per_s=0.0)
    with pytest.raises(ConfigError, match="burstiness"):
        Arrival("gamma", rate_per_s=1.0, burstiness=-1.0)
    with pytest.raises(ConfigError, match="concurrency"):
        Arrival("closed", concurrency=0)
    with pytest.raises(ConfigError, match="num_requests"):
        Workload(Arrival("offline"), num_requests=0)


def test_trace_csv_and_jsonl(tmp_path: Path) -> None:
    csv_path = tmp_path / "t.csv"
    csv_path.write_text("arrival_s,input_tokens,output_tokens\n0.5,10,20\n0.1,30,40\n")
    arrival = read_trace(csv_path)
    w = Workload(arrival)
    reqs = w.generate(_rng())
    assert [(r.arrival_s, r.input_tokens, r.output_tokens) for r in reqs] == [
        (0.1, 30, 40),
        (0.5, 10, 20),
    ]
    jl = tmp_path / "t.jsonl"
    jl.write_text('{"arrival_s": 0, "input_tokens": 5, "output_tokens": 6}\n\n')
    assert Workload(read_trace(jl)).size == 1


def test_unreadable_trace_line_names_file_and_line(tmp_path: Path) -> None:
    p = tmp_path / "bad.csv"
    p.write_text("arrival_s,input_tokens,output_tokens\n0.0,10,20\n0.1,abc,20\n")
    with pytest.raises(SchemaError, match=r"bad\.csv:3"):
        read_trace(p)
    q = tmp_path / "bad.jsonl"
    q.write_text('{"arrival_s": 0, "input_tokens": 5, "output_tokens": 6}\n{oops\n')
    with pytest.raises(SchemaError, match=r"bad\.jsonl:2"):
        read_trace(q)
    neg = tmp_path / "neg.jsonl"
    neg.write_text('{"arrival_s": 0, "input_tokens": -5, "output_tokens": 6}\n')
    with pytest.raises(SchemaError, match=r"neg\.jsonl:1.*>= 1"):
        read_trace(neg)


def test_workload_file_toml_and_json(tmp_path: Path) -> None:
    (tmp_path / "lens.txt").write_text("# lengths\n100\n200\n")
    (tmp_path / "w.toml").write_text(
        'name = "chat"\nnum_requests = 10\n'
        '[arrival]\nkind = "gamma"\nrate_per_s = 4.0\nburstiness = 0.5\n'
        '[input_tokens]\nkind = "empirical"\nfile = "lens.txt"\n'
        '[output_tokens]\nkind = "uniform"\nlow = 5\nhigh = 9\n'
    )
    w = load_workload(tmp_path / "w.toml")
    assert w.name == "chat" and w.arrival.burstiness == 0.5
    assert w.input_len == read_lengths_file(tmp_path / "lens.txt", "input_tokens")
    assert {r.input_tokens for r in w.generate(_rng())} <= {100, 200}
    (tmp_path / "w.json").write_text('{"arrival": {"kind": "offline"}, "num_requests": 3}')
    assert load_workload(tmp_path / "w.json").size == 3


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ('num_request = 3\n[arrival]\nkind = "offline"\n', "unknown keys"),
        ('[arrival]\nkind = "offline"\nrate = 3\n', r"unknown keys in \[arrival\]"),
        ('[arrival]\nkind = "poisson"\n', "rate_per_s"),
        ('[arrival]\nkind = "offline"\n[output_tokens]\nvalue = -3\n', "output_tokens"),
        ("[arrival\n", "not valid TOML"),
    ],
)
def test_workload_file_rejects_bad_input(tmp_path: Path, text: str, match: str) -> None:
    p = tmp_path / "w.toml"
    p.write_text(text)
    with pytest.raises(ConfigError, match=match):
        load_workload(p)

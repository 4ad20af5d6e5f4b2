"""benchmarks/validate_deployments.py: the deployment CSVs parse and cite a source, the harness
replays a row of each kind, the closed-loop stand-in and the acceptance inversion are right, and
bad rows are refused or counted as not covered."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

from tokenprobe.errors import SchemaError

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))
import deployment_replay as dr  # noqa: E402
import validate_deployments as vd  # noqa: E402

FILES = sorted(vd.DATA_DIR.glob("*.csv"))


def _rows(name: str) -> list[dict[str, str]]:
    return vd.load_rows([vd.DATA_DIR / name])


def test_every_csv_parses_and_every_row_cites_its_source() -> None:
    assert len(FILES) >= 4
    rows = vd.load_rows(FILES)
    assert {r["kind"] for r in rows} == set(dr.KINDS)
    for r in rows:
        ref = r["source_ref"]
        assert ref.startswith(("github:", "https://")), ref
        if ref.startswith("github:"):  # owner/name@<40-hex commit>:path
            commit = ref.split("@", 1)[1].split(":", 1)[0]
            assert len(commit) == 40 and int(commit, 16) >= 0, ref
        assert r["in_fit"] == "no"
        assert dr.measured(r), f"{r['source_id']}: no figure to compare"


def test_acceptance_from_length_inverts_the_geometric_sum() -> None:
    # k = 2, tau = 2.18: 1 + a + a^2 = 2.18 -> a = (-1 + sqrt(1 + 4 * 1.18)) / 2 = 0.695826
    assert dr.acceptance_from_length(2.18, 2) == pytest.approx((-1 + math.sqrt(5.72)) / 2, abs=1e-9)
    assert dr.acceptance_from_length(1.0, 3) == pytest.approx(0.0, abs=1e-9)  # nothing accepted
    assert dr.acceptance_from_length(4.0, 3) == pytest.approx(1.0, abs=1e-9)  # every draft
    with pytest.raises(dr.SkipRowError):
        dr.acceptance_from_length(3.5, 2)  # more than k + 1 tokens a step


def test_closed_loop_rate_holds_the_concurrency_by_littles_law() -> None:
    """A run whose mean E2E grows with the rate, E2E = 2 s + 0.01 s x r: the rate found must
    satisfy r x E2E(r) = C (C = 64: 0.01 r^2 + 2 r - 64 = 0 -> r = 27.7128...)."""
    seen: list[float] = []

    def run(arrival: dr.Arrival) -> dict[str, dict[str, float]]:
        t = [spec.arrival_s for spec in arrival.trace]
        assert t[:64] == [0.0] * 64  # the C users' first requests at once
        rate = 1.0 / (t[65] - t[64])
        seen.append(rate)
        return {"e2e_s": {"mean": 2.0 + 0.01 * rate}}

    dr.closed_loop(run, 200, 64, 100, 10)
    r = seen[-1]
    assert r * (2.0 + 0.01 * r) == pytest.approx(64, rel=dr.CLOSED_LOOP_TOL * 1.1)
    assert r == pytest.approx(-100 + math.sqrt(100**2 + 6400), rel=0.05)
    assert len(seen) <= dr.CLOSED_LOOP_STEPS


def test_a_row_of_each_kind_is_replayed() -> None:
    picks = [
        next(r for r in _rows("lmsys_mtp_blog_h200.csv") if r["kind"] == "dpep"),
        next(r for r in _rows("lmsys_mtp_blog_h200.csv") if r["kind"] == "spec"),
        next(r for r in _rows("trtllm_dsr1_best_perf.csv") if r["phase"] == "latency"),
        next(
            r
            for r in _rows("dstack_pd_ratio_h200.csv")
            if r["prefill_workers"] == "3"
            and r["isl"] == "2048"
            and r["osl"] == "128"
            and r["concurrency"] == "32"
        ),
    ]
    for row in picks:
        rep = dr.replay(row, "default")
        assert rep.predicted is not None, rep.why
        errors = rep.errors()
        assert set(errors) == set(rep.measured) and "throughput" in errors
        assert all(math.isfinite(e) and e > -1.0 for e in errors.values())
    pd = dr.replay(picks[-1], "default")
    assert set(pd.errors()) == {"ttft", "itl", "throughput"}
    agg = dr.replay(picks[-1], "default", aggregated=True)  # the same GPUs, 4 replicas
    assert agg.kind == "pd-agg" and agg.predicted is not None and "4 replicas" in agg.note
    spec = dr.replay(picks[1], "default")
    assert "source's length 2.18" in spec.note


def test_summary_counts_rows_covered_and_not_covered() -> None:
    rows = _rows("trtllm_dsr1_best_perf.csv")
    eagle = {**rows[0], "spec_method": "eagle", "spec_k": "4"}  # no acceptance, no default
    no_lengths = next(r for r in rows if not r["isl"])
    replays = [dr.replay(r, "default") for r in (rows[0], eagle, no_lengths)]
    assert replays[1].predicted is None and "no acceptance" in replays[1].why
    assert replays[2].predicted is None and "lengths not stated" in replays[2].why
    out = vd.summarize(replays)
    spec_all = next(g for g in out["by_kind"] if g["kind"] == "spec" and g["source"] == "all")
    assert (spec_all["rows"], spec_all["covered"], spec_all["throughput_n"]) == (2, 1, 1)
    assert sum(out["not_covered"].values()) == 2
    source = next(g for g in out["by_kind"] if g["source"] == "trtllm_dsr1_best_perf")
    assert source["held_out"] is True  # no shipped profile was fitted on it


def test_a_row_without_a_source_is_refused_naming_file_and_line(tmp_path: Path) -> None:
    text = (vd.DATA_DIR / "lmsys_mtp_blog_h200.csv").read_text().splitlines()
    header, first = text[0], text[1]
    cols = header.split(",")
    cells = first.split(",")
    cells[cols.index("source_ref")] = ""
    bad = tmp_path / "bad.csv"
    bad.write_text("\n".join([header, ",".join(cells)]) + "\n")
    with pytest.raises(SchemaError, match=r"bad\.csv:2.*source_ref"):
        vd.load_rows([bad])
    (tmp_path / "nocols.csv").write_text("a,b\n1,2\n")
    with pytest.raises(SchemaError, match="no column"):
        vd.load_rows([tmp_path / "nocols.csv"])

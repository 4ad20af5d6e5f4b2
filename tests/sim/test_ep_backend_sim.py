"""`simulate --dp` with an EP back end (cost/epcomm.py through cli/ep_options.py): two-batch
overlap never slows the ranks' steps and hides exactly the exchange it overlaps, the run's config
records the back end so a reader prices it again, and a bad flag is one message, exit 2."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from tokenprobe.cli import app
from tokenprobe.cost import EpComm, make_deployment
from tokenprobe.records import RunConfig
from tokenprobe.sim import simulate_fleet
from tokenprobe.sim.runconfig import price_deployment
from tokenprobe.workload import Arrival, Workload, fixed

runner = CliRunner()
MODEL, GPU = "qwen3-30b-a3b", "h100-sxm"
BASE = ["simulate", "--model", MODEL, "--gpu", GPU, "--input-tokens", "512", "--output-tokens",
        "32", "--rate", "20", "--num-requests", "40", "--dp", "4", "--enable-expert-parallel",
        "--json"]  # fmt: skip
ENV = {"COLUMNS": "200"}


def _busy_s(flags: list[str]) -> float:
    out = runner.invoke(app, [*BASE, *flags], env=ENV)
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert data["completed"] == 40
    said = data["data_parallel"]["ep_backend"]
    assert ("deepep" in said) == ("deepep" in flags) and ("overlap" in said) == bool(
        {"--enable-two-batch-overlap", "--enable-dbo"} & set(flags)
    )
    return float(data["data_parallel"]["gang_busy_s"])


def test_overlap_never_slows_the_ranks_and_deepep_changes_the_exchange() -> None:
    plain = _busy_s([])
    tbo = _busy_s(["--enable-two-batch-overlap"])
    assert tbo <= plain
    # DeepEP inside one node: one copy per GPU holding a token's experts (fewer than 8 x 3/4)
    # at DeepEP's own NVLink rate instead of the profile's; a different, still positive time
    deepep = _busy_s(["--moe-a2a-backend", "deepep"])
    assert deepep > 0 and deepep != plain


def test_the_run_config_records_the_back_end() -> None:
    dep = make_deployment(MODEL, GPU, tp=4, expert_parallel=True, attention_dp=True,
                          ep_comm=EpComm(backend="deepep", overlap=True))  # fmt: skip
    wl = Workload(Arrival("poisson", rate_per_s=5), fixed(64, "input_tokens"),
                  fixed(4, "output_tokens"), num_requests=4)  # fmt: skip
    result = simulate_fleet(dep, wl, dp=4)
    config = RunConfig.of(result.run(with_timeline=False))
    assert config.deployment.ep_comm["backend"] == "deepep"
    assert price_deployment(config.deployment).ep_comm == dep.ep_comm


def test_a_bad_ep_flag_is_one_message_exit_2() -> None:
    for flags, field in (
        (["--moe-a2a-backend", "nccl"], "ep_backend"),
        (["--deepep-mode", "fast"], "deepep_mode"),
        (["--ep-num-redundant-experts", "-1"], "redundant_experts"),
        (["--ep-num-redundant-experts", "3"], "tp"),  # 128 + 3 experts do not divide over 4
    ):
        bad = runner.invoke(app, [*BASE, *flags], env=ENV)
        assert bad.exit_code == 2 and field in bad.output, bad.output
        assert "Traceback" not in bad.output

"""Fit the `vllm-blackwell` profile: vLLM 0.11's kernels on B200 (issue 18 item 3), power unchanged.

Called by benchmarks/fit_profiles.py (`--only vllm-blackwell`); see there for the other profiles.

Data: ML.ENERGY leaderboard v3's B200 runs (benchmarks/data/mlenergy_leaderboard_v3_b200.csv,
source `mlenergy_v3_b200`), the same benchmark, vLLM version (0.11.1) and launch configs as the
H100 rows the `vllm` profile is fitted on (github:ml-energy/benchmark@c1d6557,
configs/vllm/<task>/<model>/{H100,B200}/monolithic.config.yaml: async scheduling, 8192 batched
tokens, 3 API servers on both; B200 adds FlashInfer/CUTLASS MoE kernels for gpt-oss and
DeepSeek, `VLLM_ATTENTION_BACKEND=CUTLASS_MLA` for DeepSeek; the others get vLLM's Blackwell
default, FlashInfer attention: vllm-project/vllm@1c0d9ecf:vllm/platforms/cuda.py). Held out:
every third run (model x GPU count x task series, `calibrate.split`'s default, as for `vllm`).
(Fitting on the dense models and holding out the MoE and hybrid ones was tried: the dense rows'
throughput then goes 19.0 -> 12.3 %, but the held-out MoE rows stay 20 % too fast, ITL 20.8 ->
20.3 %, throughput 28.9 -> 29.1 %: what differs on Blackwell is in the MoE kernels, which dense
rows cannot see.)

What is fitted: the `vllm` profile's time parameters, from its values (GEMM, HBM, attention and
MoE kernel rates, link, per-kernel/step/sequence host costs), and `mixed_step_overhead_s`, the host
time of a step with prompt tokens that vLLM 0.11 cannot replay as one CUDA graph on FlashInfer, the
Blackwell default (FA3 on H100 can: cost/efficiency.py), from 0 (fits 1.0 ms; the B200 runs' mean
step over their median ITL is 1.12-1.31 for the 8B-70B dense chat runs, 1.03-1.10 on H100; most of
that gap is in the waiting rows the fit does not see, so the busy rows hold it to ~1 ms);
`routing_skew` and `request_overhead_s` stay: the steady-state rows see neither. The power model
is NOT refitted: the profile names `power_of = "vllm"` (the H100 fit), so B200 energy and power
stay a transfer check of the power model, now with B200's own time model; its records say how
they moved.

Set from sources, not fitted (`FIXED`): `ssm_memory`, the ceiling on the Mamba-2 decode kernel's
state traffic (cost/efficiency.py): vLLM 0.11 launches its Triton selective_state_update with
Hopper's tile on B200 (a Blackwell launch came in vllm-project/vllm PR #32873, Jan 2026), and the
kernel moves ~2.85 TB/s on 132 SMs whatever the HBM (H200), so ~3.2 TB/s on B200's 148 SMs, 0.40
of its 8 TB/s. Without it the busy Nemotron-Nano rows ran 25-30 % too fast (ITL -24.7 %, energy
-30 %) while the same rows on H100 fit within ~5 %, and the fit pulled `memory` down for all.

Rows the fit does not see (they are still in every error it reports): runs whose own GPU power
says the GPU idled through much of each step. A GPU that runs the model's step the whole step
draws the power model's busy power (H100 power MdAPE 9.4 %, `vllm` profile); 86 of the 275 B200
rows read less than `BUSY_FRACTION_MIN` of the way from idle to it, against 34 of 274 H100 rows,
with ITL 38 % and throughput 72 % off on B200 (11 % / 15 % on H100), e.g. Qwen3-8B GPQA at batch
8: 32.5 ms a token at 294 W (idle 140 W) where chat on the same GPU runs 5.0 ms at 646 W, the
same 8B model stepping 8 sequences. Multiplying each such step by its busy fraction gives back
the model's step (9.4 vs 6.1 ms there; Llama-3.1-8B chat batch 128: 10.9 vs 10.2 ms): the GPU did
the predicted work and then waited on something outside it (the runs' host; the published
configs are those of H100, where the same runs do not wait). Fitting kernel rates to those waits
would slow every B200 prediction; they are reported, not fitted.

`python benchmarks/fit_blackwell.py` (no fit; ~10 s) prints the B200 rows' errors with the
`vllm` and `vllm-blackwell` profiles, split into busy and waiting rows and by kind of model
(dense / MoE / hybrid, one GPU or several), then one JSON line.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from tokenprobe.calibrate import (
    Calibration,
    Params,
    Row,
    load_csv,
    load_profile,
    observe,
    summarize,
)
from tokenprobe.calibrate.calibration import DEFAULT_FIT_ROWS_PER_SOURCE, split
from tokenprobe.calibrate.fit import fit_staged, subsample
from tokenprobe.calibrate.profile import Profile
from validation_data import bias_pct, mdape_pct

# a row whose measured GPU power is below idle + 0.8 x (predicted busy power - idle): 20 % of each
# step idle, twice the power model's H100 MdAPE (module docstring); 0.7 and 0.9 were tried: held-out
# ITL 13.9 / 14.9 %, throughput 15.9 / 20.3 %, energy 12.9 / 15.4 % (0.8: see the profile)
BUSY_FRACTION_MIN = 0.8
# vLLM 0.11's Mamba-2 decode kernel (Triton selective_state_update at its one launch for dstate
# 128, BLOCK_SIZE_M 4 / 4 warps) is bound on the SM side (cost/efficiency.py `ssm_memory`): on an
# H200 it moves an fp32 state of EffBatch 8192 (x 64 x 128 x 4 B, read and written: 65,536 B each)
# in 188.20 us (vllm-project/vllm PR #44251, heuristic column; 4096: 94.81 us, 2.83 TB/s), 2.85
# TB/s on 132 SMs, the rate `vllm` gives an H100 (0.85 x 3.35 TB/s). Per SM on B200's 148 SMs
# (Chips and Cheese, "Nvidia's B200: Keeping the CUDA Juggernaut Rolling", 2025) over its 8 TB/s:
# 0.40 of the HBM peak. Set, not fitted: the hybrid rows check it.
H200_SSU_BYTES_PER_S = 8192 * 65_536 / 188.20e-6
H200_SMS, B200_SMS, B200_HBM_BYTES_PER_S = 132, 148, 8.0e12
SSM_MEMORY_B200 = H200_SSU_BYTES_PER_S / H200_SMS * B200_SMS / B200_HBM_BYTES_PER_S
FIXED = {"ssm_memory": SSM_MEMORY_B200}  # set on the fit's start (`calibrate_busy`)
B200_CSV = Path(__file__).resolve().parent / "data" / "mlenergy_leaderboard_v3_b200.csv"
METRICS = ("itl_median", "output_throughput", "energy_per_output_token", "power_total")


def busy_fraction(row: Row, params: Params) -> float:
    """The share of the measured step the GPU was busy, read from the row's own power:
    (measured − idle) / (predicted busy − idle), per GPU; 1 where no power was measured."""
    measured_w = row.measured.get("power_total")
    if measured_w is None:
        return 1.0
    predicted_w = row.predictions(params.efficiency, params.power)["power_total"]
    gpus, idle_w = row.deployment.num_gpus, row.deployment.gpu.idle_w
    return (measured_w / gpus - idle_w) / max(predicted_w / gpus - idle_w, 1e-9)


def busy_rows(rows: Sequence[Row], params: Params) -> list[Row]:
    """The rows whose GPU was busy through the step (module docstring)."""
    return [r for r in rows if busy_fraction(r, params) >= BUSY_FRACTION_MIN]


def calibrate_busy(
    rows: Sequence[Row], spec: dict[str, Any], start: Params, engine: str
) -> Calibration:
    """`calibrate.calibrate` with the fit on the busy rows of the fitted runs; the errors, before
    and after, on every row of both sets."""
    fitted, held = split(rows, spec["holdout"])
    seen = subsample(busy_rows(fitted, start), DEFAULT_FIT_ROWS_PER_SOURCE)
    # the fit starts from `vllm` with the figures set from their sources (FIXED); "before" is `vllm`
    result = fit_staged(
        seen, spec["parameters"], replace(start, efficiency=start.efficiency.with_overrides(FIXED))
    )
    p = result.params
    errors = [
        summarize(observe(rs, q.efficiency, q.power)) for rs in (fitted, held) for q in (start, p)
    ]
    return Calibration(engine, result, *errors, len(fitted), len(held))


def fit_profile(
    rows: Sequence[Row], spec: dict[str, Any], start: Profile, notes: str
) -> tuple[Profile, Calibration]:
    """The fitted profile (power named, not copied: `power_of`) and its calibration."""
    name = spec["name"]
    params = Params(start.efficiency, start.power)
    mine = [replace(r, engine=name) for r in rows]
    cal = calibrate_busy(mine, spec, params, name)
    # its records hold energy and power too: the unchanged power model before and after the fit
    profile = replace(
        cal.profile(name, str(spec["version"]), f"{notes} (fit_blackwell.py; [power]: power_of)"),
        engine="vllm",
        vendor="nvidia",
        generation=spec["generation"],
        power_of=start.name,
        power=start.power,
    )
    return profile, cal


def _kind(row: Row) -> str:
    """ "dense", "MoE" or "hybrid" (model.architecture's first word), on one GPU or several."""
    arch = row.deployment.model.architecture.split(" ")[0]
    return f"{arch} {'1-gpu' if row.deployment.num_gpus == 1 else 'n-gpu'}"


def report() -> dict[str, Any]:
    """MdAPE (median signed) per profile, busy/waiting split and kind of model (module doc)."""
    rows = load_csv(B200_CSV).rows
    start = load_profile("vllm")
    busy = {id(r) for r in busy_rows(rows, Params(start.efficiency, start.power))}
    out: dict[str, Any] = {}
    for name in ("vllm", "vllm-blackwell"):
        p = load_profile(name)
        groups: dict[tuple[str, str, str], list[float]] = defaultdict(list)
        for r in rows:
            split_name = "busy" if id(r) in busy else "waiting"
            for o in observe([r], p.efficiency, p.power):
                for part in ("all", split_name, f"{split_name} {_kind(r)}"):
                    groups[(part, o.metric, "")].append(o.error)
        out[name] = {
            f"{part} {metric}": {
                "rows": len(e),
                "mdape_pct": mdape_pct(e),
                "median_signed_pct": bias_pct(e),
            }
            for (part, metric, _), e in sorted(groups.items())
        }
    return out


def main() -> int:
    figures = report()
    print(f"{'rows (busy: from the vllm profile)':28} {'metric':24} {'n':>4} "
          f"{'vllm':>15} {'vllm-blackwell':>15}")  # fmt: skip
    for key, a in figures["vllm"].items():
        b = figures["vllm-blackwell"][key]
        part, metric = key.rsplit(" ", 1)
        print(f"{part:28} {metric:24} {a['rows']:4d} "
              f"{a['mdape_pct']:6.1f} ({a['median_signed_pct']:+5.1f}) "
              f"{b['mdape_pct']:6.1f} ({b['median_signed_pct']:+5.1f})")  # fmt: skip
    print(json.dumps({"benchmark": "b200_rows_by_busy_share", "profiles": figures}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

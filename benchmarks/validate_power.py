"""validate.py's energy errors by GPU and model group (issue 18 item 4).

The power model prices quantized and MoE steps with terms of their own (cost.energy: CUDA-core
dequantization, instruction-bound expert kernels), so its errors are shown per group of rows as
well as per GPU: dense or MoE (hybrid Mamba models apart), and the weight format (bf16, fp8,
mxfp4, ...). Each group's MdAPE and median signed error of energy per output token and of GPU
power, with the row's shipped profile; H100 rows are the power fit's, the others transferred.

Energy per output token is power times the time a token takes, so a row measured for both has
a third figure, "time/output token": (1 + energy error) / (1 + power error) − 1, the error of
the predicted time per output token that the energy error holds beside the power's. It says
whether a group's energy error is the power model's or the time model's (ML.ENERGY v3 B200,
Nemotron Nano v2 hybrids before `Efficiency.ssm_memory`: energy −34 %, power +31 %, time −48 %:
the GPU waits on something the time model does not see, and draws less while it waits; with it,
energy −19 %, power +23 %, time −31 %).

The same table by GPU count (`gpu_count`) shows how the power error moves with tensor
parallelism (the all-reduce's SM share in cost.energy; ML.ENERGY v3 H100, median signed power
error at 1/2/4/8 GPUs -1.0/+6.4/+11.1/+12.8 % before it, -1.1/+3.9/+10.0/+6.3 % with it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from tokenprobe.calibrate import Observation, Row
from validation_data import bias_pct, mdape_pct

KINDS = {
    "energy/output token": ("energy_per_output_token",),
    "power": ("power_total", "power_per_gpu"),
}
TIME_KIND = "time/output token"  # energy / power (module docstring)


def time_errors(errors: dict[str, list[float]]) -> list[float]:
    """The errors of time per output token a row's energy and power errors imply (none when the
    row lacks one of them): (1 + e_energy) / (1 + e_power) − 1, paired in order (two rows with
    one run key and label come as one run of observations)."""
    pairs = zip(errors.get("energy/output token", []), errors.get("power", []), strict=False)
    return [(1.0 + energy) / (1.0 + power) - 1.0 for energy, power in pairs]


def model_group(row: Row) -> str:
    """ "dense-bf16", "moe-fp8", "moe-mxfp4", "hybrid-bf16", ...: architecture and weights."""
    dep = row.deployment
    if dep.model.state_elements_per_seq > 0:
        arch = "hybrid"
    else:
        arch = "moe" if dep.model.moe is not None else "dense"
    return f"{arch}-{dep.weight_dtype.name}"


def gpu_count(row: Row) -> str:
    """ "1 gpu", "4 gpus": the GPUs one replica spans (power per GPU falls as TP spreads the work
    and the all-reduce waits grow: cost.energy)."""
    n = row.deployment.num_gpus
    return f"{n} gpu" if n == 1 else f"{n} gpus"


def energy_by_group(
    rows: Sequence[Row], profiled: list[Observation], by: Callable[[Row], str] = model_group
) -> list[dict[str, Any]]:
    """Print and return the errors per (GPU, group, metric), the group `by` (model group, or
    `gpu_count`). `profiled` holds each row's observations in the rows' order
    (validate.with_profiles), so each is matched to its row."""
    groups: dict[tuple[str, str, str], list[float]] = {}
    i = 0
    for row in rows:
        key = (row.deployment.gpu.name, by(row))
        mine: dict[str, list[float]] = {}
        while i < len(profiled) and (profiled[i].run, profiled[i].label) == (row.run, row.label):
            o = profiled[i]
            i += 1
            for kind, metrics in KINDS.items():
                if o.metric in metrics:
                    groups.setdefault((*key, kind), []).append(o.error)
                    mine.setdefault(kind, []).append(o.error)
        if implied := time_errors(mine):
            groups.setdefault((*key, TIME_KIND), []).extend(implied)
    what = "model group" if by is model_group else "GPU count"
    print(f"\nenergy by GPU and {what} (shipped profiles)")
    print(f"{'gpu':16} {'group':14} {'metric':20} {'rows':>5} {'MdAPE':>7} {'bias':>7}")
    out = []
    for (gpu, group, kind), errors in sorted(groups.items()):
        row = {
            "gpu": gpu,
            "group": group,
            "metric": kind,
            "rows": len(errors),
            "mdape_pct": mdape_pct(errors),
            "median_signed_pct": bias_pct(errors),
        }
        print(f"{gpu:16} {group:14} {kind:20} {len(errors):5d} {row['mdape_pct']:6.1f}% "
              f"{row['median_signed_pct']:+6.1f}%")  # fmt: skip
        out.append(row)
    return out

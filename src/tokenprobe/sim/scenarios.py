"""Named scenarios: a deployment, server settings and one or more workloads to compare.

Seed 003 ("Token只是表面成本", section 4) measured a 7B chat model in fp16 on one A100 80GB under
a continuous-batching server with `nvidia-smi` power logging (GPU power only):
  A single long output (short prompt, 1000+ tokens out): ~280 W, ~60 tokens/s, ~1.3 kWh/M tokens
  B 4-8 concurrent chats, 512 in / 256 out:              ~350 W, ~180 tokens/s, ~0.54 kWh/M
  C offline batch of 32, regular lengths:                ~390 W, ~400+ tokens/s, ~0.27 kWh/M
(kWh per million tokens = average power / output tokens/s: 280 / 60 -> 1.30, 390 / 400 -> 0.27.)
The seed gives neither exact lengths nor the model; our choices are stated per part: Llama-2-7B,
A: 128 in / 2048 out, one user at a time; B: 6 users (the middle of 4-8); C: 512 in / 256 out with
max_num_seqs = 32. The seed calls its figures illustrative ("示意数据").

"hello-vs-summary" (seed 003, 1.2): 100 users each sending a greeting (20 tokens in, 30 out) vs
one ~5000-word document summarised (4700 in, 300 out): 5000 tokens each way.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tokenprobe.errors import ConfigError
from tokenprobe.sim.api import simulate
from tokenprobe.sim.base import SchedulerConfig
from tokenprobe.sim.engine import ProgressFn
from tokenprobe.sim.result import SimResult
from tokenprobe.workload import Arrival, Workload, fixed


@dataclass(frozen=True, slots=True)
class SeedFigures:
    """What a seed document reported for a scenario part (for side-by-side tables)."""

    output_tokens_per_s: float
    kwh_per_million_tokens: float
    average_power_w: float
    source: str = "seed 003, section 4"


@dataclass(frozen=True, slots=True)
class ScenarioPart:
    label: str
    workload: Workload
    config: SchedulerConfig = field(default_factory=SchedulerConfig)
    seed: SeedFigures | None = None


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    description: str
    model: str
    gpu: str
    parts: tuple[ScenarioPart, ...]
    weight_dtype: str = "bf16"
    tp: int = 1


def _workload(name: str, arrival: Arrival, tokens_in: int, tokens_out: int, n: int) -> Workload:
    return Workload(
        arrival,
        fixed(tokens_in, "input_tokens"),
        fixed(tokens_out, "output_tokens"),
        num_requests=n,
        name=name,
    )


_A = ScenarioPart(
    "A single-long",
    _workload("single-long", Arrival("closed", concurrency=1), 128, 2048, 4),
    seed=SeedFigures(60.0, 1.3, 280.0),
)
_B = ScenarioPart(
    "B chat-4-8",
    _workload("chat-4-8", Arrival("closed", concurrency=6), 512, 256, 60),
    seed=SeedFigures(180.0, 0.54, 350.0),
)
_C = ScenarioPart(
    "C offline-batch-32",
    _workload("offline-batch-32", Arrival("offline"), 512, 256, 256),
    config=SchedulerConfig(max_num_seqs=32),
    seed=SeedFigures(400.0, 0.27, 390.0),
)


def _seed003(name: str, description: str, parts: tuple[ScenarioPart, ...]) -> Scenario:
    """Seed 003's deployment: a 7B chat model in fp16 on one A100 80GB."""
    return Scenario(name, description, "llama-2-7b", "a100-sxm-80gb", parts, "fp16")


SCENARIOS: dict[str, Scenario] = {
    "single-long": _seed003("single-long", "seed 003 A: one long output at a time", (_A,)),
    "chat-4-8": _seed003("chat-4-8", "seed 003 B: 4-8 concurrent chats 512/256", (_B,)),
    "offline-batch-32": _seed003("offline-batch-32", "seed 003 C: offline batch 32", (_C,)),
    "seed-003": _seed003("seed-003", "seed 003 A, B and C side by side", (_A, _B, _C)),
    "hello-vs-summary": _seed003(
        "hello-vs-summary",
        "100 users say hello vs one 5000-word summary, 5000 tokens each",
        (
            ScenarioPart("100 x hello", _workload("hello-100", Arrival("offline"), 20, 30, 100)),
            ScenarioPart(
                "1 x summary", _workload("summary-5000w", Arrival("offline"), 4700, 300, 1)
            ),
        ),
    ),
}


def get_scenario(name: str) -> Scenario:
    if name not in SCENARIOS:
        raise ConfigError("scenario", name, f"one of {', '.join(SCENARIOS)}")
    return SCENARIOS[name]


def run_scenario(
    scenario: Scenario, seed: int = 0, progress: ProgressFn | None = None
) -> list[tuple[ScenarioPart, SimResult]]:
    """Simulate every part of a scenario on its deployment."""
    return [
        (
            part,
            simulate(
                scenario.model,
                scenario.gpu,
                tp=scenario.tp,
                weight_dtype=scenario.weight_dtype,
                workload=part.workload,
                config=part.config,
                seed=seed,
                progress=progress,
            ),
        )
        for part in scenario.parts
    ]

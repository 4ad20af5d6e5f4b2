"""SGLang's overlap scheduler: the CPU plans step k+1 while the GPU runs step k.

From sgl-project/sglang's 0.4 line: server_args.py has `disable_overlap_schedule: bool = False`
(the overlap loop is the default) and, in v0.4.0/0.4.1, turns it off only with
`--enable-dp-attention` (`self.disable_overlap_schedule = True` in that branch; read in a stored
copy of the file, the one sim/sglang_dp.py transcribes); managers/scheduler.py of the same era
turns it off only for embedding and multimodal models (`if not self.is_generation:
self.enable_overlap = False`, `if self.model_config.is_multimodal: ...`) and then runs
`event_loop_overlap`: `run_batch(batch)` hands step k to the worker thread
(`TpModelWorkerClient.forward_batch_generation` returns future token ids), then the loop
processes the result of step k-1 and builds step k+1 (`get_next_batch_to_run`) while the GPU
still runs step k. The host's per-step work (scheduling, sampling bookkeeping, detokenizer
hand-off: the cost model's `host_time_s`, `Efficiency.step_overhead_s` and `seq_overhead_s`)
then lies under the GPU's, and a step takes the longer of the two instead of their sum.

So a plain tensor-parallel SGLang 0.4 server (dstack's offline DeepSeek-R1 runs: `sgl.Engine`
with tp 8, no dp attention) is priced here with its host time hidden; the --enable-dp-attention
ranks keep it exposed (0.4.1's server_args.py turns the overlap loop off there, and the
profile's host parameters were fitted so). The GPU's host-gap power over the hidden seconds
(`cost.host_gap_power_w`) leaves the step's energy with them.

Not modelled: the overlap loop's one-step lag of finished requests (a request's last token is
processed one step late; its slot is reused a step later) and SGLang 0.5's overlap of the same
kind, which the `sglang` profile was fitted without.
"""

from __future__ import annotations

from typing import cast

from tokenprobe.cost import BatchShape, Deployment, host_gap_power_w, host_time_s
from tokenprobe.sim.base import SchedulerConfig, StepPlan
from tokenprobe.sim.engine import StepFn


def hidden_host_s(dep: Deployment, shape: BatchShape, time_s: float) -> float:
    """Seconds of host time the overlap loop hides in a step priced at `time_s` (GPU + host):
    all of it while the GPU's part is at least as long, else as much as the GPU's part."""
    host_s = float(host_time_s(dep, shape))
    return max(0.0, min(host_s, time_s - host_s))


def overlapped_step_fn(dep: Deployment, step_fn: StepFn) -> StepFn:
    """`step_fn` with the host's per-step time hidden under the GPU's (module docstring): a
    step of GPU time g and host time h takes max(g, h), not g + h."""
    gap_w = host_gap_power_w(dep) * dep.num_gpus

    def step(plan: StepPlan) -> tuple[float, float]:
        time_s, energy_j = step_fn(plan)
        # a plan has BatchShape's fields (sim/api.py cost_step_fn reads it so too)
        hidden_s = hidden_host_s(dep, cast(BatchShape, plan), time_s)
        return time_s - hidden_s, energy_j - gap_w * hidden_s

    return step


def config_step_fn(dep: Deployment, config: SchedulerConfig, step_fn: StepFn) -> StepFn:
    """The step function a server of `config` runs: `step_fn`, overlapped when the config's
    scheduler overlaps host and GPU work (`SchedulerConfig.overlap_schedule`)."""
    return overlapped_step_fn(dep, step_fn) if config.overlap_schedule else step_fn

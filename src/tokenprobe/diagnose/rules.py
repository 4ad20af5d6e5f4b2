"""The rules of the diagnosis (seed 000's troubleshooting tree, seed 003 §6's power patterns).

Each rule reads `Signals` (and the cost model's view when the run names a catalog model and GPU)
and returns a `Verdict`: fired with a `Finding` (evidence = the numbers it decided on), clear, or
skipped for lack of data. Thresholds are named in context.py; "busy" means at least one request
in flight.

- memory-bandwidth-bound: GPU busy ≥ BUSY_UTIL, power ≤ LOW_POWER_OF_TDP of TDP, and memory
  busy (NVML memory utilization ≥ MEM_UTIL_HIGH, or the cost model's memory share ≥ 0.5).
- compute-bound: GPU busy, and power ≥ HIGH_POWER_OF_TDP of TDP or compute share ≥ 0.5; but
  clear, naming throttling, when the power-cap check below holds. At the power limit high power
  only says the board reached its budget, whatever the tensor cores do (the real T4 scrape of
  tests/data/telemetry: 97.5 % of its 70 W at 660 MHz of 1590 MHz, with DCGM's tensor-pipe
  activity at 0.6 %), and nvidia-smi names that state by its clock-event reason, "SW Power Cap",
  not by a saturated unit: the one finding is throttling's "power-capped", whose action (power
  limit, cooling, clock-proportional throughput) is the one that applies; compute-bound's (fp8
  compute, a faster GPU, more tensor parallelism) would not lift the cap.
- KV-capacity-bound: KV use ≥ KV_FULL for ≥ KV_FULL_SHARE of busy time, with preemptions,
  timeouts or requests waiting ≥ QUEUE_SHARE of busy time.
- CPU-bound: GPU utilization ≤ GPU_IDLE_UTIL while busy (or no GPU at all), with the host CPU
  ≥ CPU_SATURATED on average or the server process ≥ PROCESS_PEGGED of a core for ≥ half of the
  busy time. Or, where the records carry the wait in front of the API-server processes (the
  simulator's front end, `RequestRecord.frontend_wait_s`), those processes pegged so, with
  requests waiting longer in front of them (mean ≥ FRONTEND_WAIT_MIN_S) than in the engine's
  queue: vLLM V1's engine core steps whatever it holds, so a starved GPU can still read busy
  (running small batches at low power); the queue's place says which side sets the rate.
- communication-bound: more than one GPU, and a communication share ≥ COMM_SHARE in the cost
  model, or PCIe traffic ≥ PCIE_BUSY of the host link.
- bursty arrivals: dispersion index var/mean of arrivals per window ≥ BURSTY_DISPERSION (Poisson
  gives 1), with power per window following the arrivals (correlation ≥ POWER_CORR at lag 0 or
  1 window) when power is known.
- throttling: NVML power/thermal throttle reasons in ≥ THROTTLE_SHARE of samples, or the SM clock
  of the last fifth of busy samples ≥ CLOCK_DROP below the first fifth (judged on at least
  MIN_CLOCK_SAMPLES busy clock samples), or power-capped: the busy samples at ≥
  POWER_CAP_OF_LIMIT of the power limit (the enforced limit the telemetry recorded, else the
  catalog TDP) make up ≥ THROTTLE_SHARE of the busy time and their median SM clock is
  < CAPPED_CLOCK_OF_BOOST of the catalog boost clock. The power cap needs neither reasons nor a
  series: one dcgm-exporter scrape (default counters: no reasons field) is enough. Skipped when
  none of the three can be judged (no reasons, too few clock samples, and no catalog boost
  clock or no sample with both power and clock). The clock drop and the power cap are judged
  per GPU and fire when any GPU shows them (two steady GPUs at different clocks are no drop; one
  capped GPU is not outvoted by healthy ones); a multi-GPU finding names the GPU(s).
  Why these marks: GPU Boost runs the SM clock at its boost clock unless a power or thermal
  limit (or a clock cap set by hand) holds it back, so a busy board at its limit with the clock
  15 % or more under boost is held by the limit: the real H100 under gpu-burn sits at 90 % of
  its 700 W with the clock at its 1980 MHz maximum. 90 % of the limit, not 100 %: the power
  controller keeps the board's draw under the limit (nvidia-smi: enforced.power.limit), and
  nvidia-smi documents power.draw as accurate to ±5 W, 7 % of a 70 W T4. 85 % of boost: a few
  clock steps of jitter around the limit stay clear, while a clock drawn down towards the base
  clock (A100 1095 of 1410 MHz, 78 %) fires.
- idle waste: static power x window ≥ STATIC_SHARE of the run energy (static power: the energy
  join's idle baseline when measured with no request in flight, else the catalog's idle power).
- loading vs generation: a recorded `server_load_s` in the run config, or the first requests'
  TTFT ≥ COLD_FACTOR × the rest's median (and ≥ COLD_MIN_S above it): loading is reported as its
  own fault domain, apart from generation.
"""

from __future__ import annotations

from tokenprobe.diagnose.context import Context, Rule
from tokenprobe.diagnose.rules_gpu import (
    communication_bound,
    compute_bound,
    idle_waste,
    memory_bandwidth_bound,
    throttling,
)
from tokenprobe.diagnose.rules_load import (
    bursty_arrivals,
    cpu_bound,
    kv_capacity_bound,
    loading_vs_generation,
)

RULES: dict[str, Rule] = {
    "memory-bandwidth-bound": memory_bandwidth_bound,
    "compute-bound": compute_bound,
    "kv-capacity-bound": kv_capacity_bound,
    "cpu-bound": cpu_bound,
    "communication-bound": communication_bound,
    "bursty-arrivals": bursty_arrivals,
    "throttling": throttling,
    "idle-waste": idle_waste,
    "slow-loading": loading_vs_generation,
}

__all__ = ["RULES", "Context", "Rule"]

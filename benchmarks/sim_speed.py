"""Simulator speed: 100,000 chat requests, Llama-3.1-8B on one H100, Poisson at 80% of capacity.

Capacity is measured by the simulator itself: an offline run (every request at t = 0) of the same
length distributions gives the saturated requests/s; the benchmark then offers 80% of it. The
wall time covers only the 100k-request run (generation, event loop, records, summary). Prints
one JSON line. Target (issue 17 item 7): under 6 s on one core, memory under 2 GB. `cpu_s` (this
process's CPU time) is the figure to judge on a shared machine; `wall_s` is also printed;
`peak_rss_bytes` is the process's peak resident set (ru_maxrss).

The cluster case (`--replicas 16 --requests 1000000`): 16 replicas behind the least-loaded
router, offered 80 % of 16 replicas' capacity; target under 60 s on one core.

Measured in session 10 on the shared 2-core box (load 1.8-2.5, wall = CPU), back to back
against the session's start (0c80fa2), results identical request by request: 100k requests
6.4-6.6 against 8.6-8.8 CPU-s (-25 %), 256,606 steps, 270 MB peak; 16 x 100k 8.8 against 11.7;
`--spec-decode mtp:1 --requests 30000` 8.9 against 10.6; `--disaggregate 1p3d` 18.0 against
29.5; 16 x 1M 69.8 CPU-s, 2,616,930 steps, 1.97 GB peak (86.5 CPU-s, 1.96 GB in session 9).
Instructions (valgrind, a 20,000-request run less a 2,000-request one) 7.10 -> 5.01 G (-29 %),
the figure that does not swing with the box. So memory meets its target and time still misses
it here (6 s, 60 s). What changed: an exact step's deployment-only terms kept on the Deployment
(cost/step.py `step_constants`), no StepCost or BatchShape built per exact step (45 -> 24 us a
`step_cost`), the running step's end beside the event heap, timeline points packed by struct
(array.extend parsed each value), records built positionally, energy_summary in numpy (np.cumsum
keeps the order). What is left: ~30k exact cost-model calls (terms of cost/ops.py, the power
model's GpuWork), ~10 us of Python per step (plan, memo, commit, complete), records and the
summary (~1 s of 6), a fleet's router and next-event heap (~10 % of a fleet run).
`--profile` prints the functions with
the most own time.

    python benchmarks/sim_speed.py [--requests N] [--load 0.8] [--replicas R] [--profile]
        [--api-server-processes N]   (the serving front end as a resource: sim/frontend.py)
        [--spec-decode mtp:1]        (speculative decoding, one replica: sim/specdecode.py; the
                                      offered rate stays 80 % of plain decode's capacity)
        [--disaggregate 1p3d]        (prefill/decode workers, sim/disagg.py: 80 % of one
                                      replica's capacity per decode worker)
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import resource
import time

from tokenprobe.cost import SpecDecode, Split, make_deployment
from tokenprobe.sim import simulate, simulate_fleet
from tokenprobe.workload import Arrival, LengthDist, Workload

MODEL, GPU = "llama-3.1-8b", "h100-sxm"
# chat-like lengths (ShareGPT-ish: long-tailed), means 512 in / 256 out
INPUT = LengthDist("lognormal", mean=512.0, sigma=0.7, name="input_tokens")
OUTPUT = LengthDist("lognormal", mean=256.0, sigma=0.7, name="output_tokens")


def capacity_requests_per_s(num_requests: int = 4000) -> float:
    offline = Workload(Arrival("offline"), INPUT, OUTPUT, num_requests=num_requests)
    rps = simulate(MODEL, GPU, workload=offline, seed=1).to_dict()["requests_per_s"]
    assert isinstance(rps, float)
    return rps


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=100_000)
    parser.add_argument("--load", type=float, default=0.8)
    parser.add_argument("--replicas", type=int, default=1)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--api-server-processes", type=int, default=None)
    parser.add_argument("--spec-decode", default=None)
    parser.add_argument("--disaggregate", default=None)
    args = parser.parse_args()
    spec = None if args.spec_decode is None else SpecDecode.parse(args.spec_decode)
    split = None if args.disaggregate is None else Split.parse(args.disaggregate)
    capacity = capacity_requests_per_s()
    # the fleet's offered rate: per replica, or per decode worker (the prefill workers' share)
    rate = args.load * capacity * (args.replicas if split is None else split.decode)
    target_s = 6.0 if args.replicas == 1 and split is None else 60.0  # issue 17 item 7
    chat = Workload(Arrival("poisson", rate_per_s=rate), INPUT, OUTPUT, args.requests, name="chat")
    profiler = cProfile.Profile() if args.profile else None
    t0, c0 = time.perf_counter(), time.process_time()
    if profiler:
        profiler.enable()
    if split is not None:
        dep = make_deployment(MODEL, GPU)
        out = simulate_fleet(dep, chat, disaggregate=args.disaggregate, spec_decode=spec).to_dict()
    elif args.replicas == 1:
        out = simulate(
            MODEL, GPU, workload=chat, seed=0, api_server_processes=args.api_server_processes,
            spec_decode=spec,
        ).to_dict()  # fmt: skip
    else:
        dep = make_deployment(MODEL, GPU)
        fleet = simulate_fleet(dep, chat, replicas=args.replicas, router="least-loaded")
        out = fleet.to_dict()
    wall_s = time.perf_counter() - t0
    cpu_s = time.process_time() - c0
    if profiler:
        profiler.disable()
        pstats.Stats(profiler).sort_stats("tottime").print_stats(45)
    print(
        json.dumps(
            {
                "benchmark": "sim_speed",
                "model": MODEL,
                "gpu": GPU,
                "requests": args.requests,
                "replicas": args.replicas,
                "api_server_processes": args.api_server_processes,
                "spec_decode": args.spec_decode,
                "disaggregate": args.disaggregate,
                "capacity_requests_per_s": round(capacity, 3),
                "offered_requests_per_s": round(rate, 3),
                "achieved_requests_per_s": out["requests_per_s"],
                "simulated_s": out["duration_s"],
                "steps": out["steps"],
                "preemptions": out["preemptions"],
                "wall_s": round(wall_s, 3),
                "cpu_s": round(cpu_s, 3),
                "requests_per_wall_s": round(args.requests / wall_s, 1),
                "requests_per_cpu_s": round(args.requests / cpu_s, 1),
                "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                "target_s": target_s,
                "ok": cpu_s < target_s,
            }
        )
    )


if __name__ == "__main__":
    main()

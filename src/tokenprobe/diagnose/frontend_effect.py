"""What more API-server processes would do for a run that recorded its serving front end (the
simulator's, `config["frontend"]`): the same arrivals and lengths replayed (replay.py's trace)
on the same deployment, host core speed and scheduler with more processes, so the cpu-bound
finding can say the effect rather than guess it. Only for runs of at most MAX_REQUESTS requests:
a diagnosis should stay quick."""

from __future__ import annotations

from typing import Any

from tokenprobe.diagnose.costview import deployment_of
from tokenprobe.diagnose.replay import _shared_prefix_tokens, _specs, recorded_frontend
from tokenprobe.errors import TokenprobeError
from tokenprobe.records import Run, RunConfig
from tokenprobe.sim import scheduler_name, scheduler_of, simulate, spec_decode_of
from tokenprobe.workload import Arrival, Workload

MAX_REQUESTS = 20_000


def more_processes_effect(run: Run, processes: int) -> dict[str, Any] | None:
    """{processes, requests_per_s, ttft_p50_s, busy_fraction} of the run replayed with
    `processes` API-server processes in their own processes (vLLM V1); None when the run
    recorded no front end, is too large, or cannot be replayed."""
    front = recorded_frontend(run)
    if not front or len(run.records) > MAX_REQUESTS:
        return None
    try:
        rc = RunConfig.of(run)
        dep = deployment_of(run, [])
        specs = _specs(run.records, _shared_prefix_tokens(rc))
        if dep is None or not specs:
            return None
        result = simulate(
            deployment=dep,
            workload=Workload(arrival=Arrival("trace", trace=tuple(specs)), name="replay"),
            config=scheduler_of(rc.deployment, dep.gpu),
            scheduler=scheduler_name(rc.deployment),
            seed=rc.seed or 0,
            trace_requests=0,
            profile=rc.deployment.profile,
            api_server_processes=processes,
            host=front["host"],
            spec_decode=spec_decode_of(rc.deployment),
        )
    except TokenprobeError:
        return None
    d = result.to_dict()
    return {
        "processes": processes,
        "requests_per_s": d["requests_per_s"],
        "ttft_p50_s": d["ttft_s"]["p50"],
        "busy_fraction": d["busy_fraction"],
    }

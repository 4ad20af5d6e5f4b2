"""Workloads (requirement S1): arrival processes, length distributions, trace replay, scenarios.

A `Workload` is a frozen, validated spec; `generate(rng)` turns it into `RequestSpec`s with a
seeded `numpy.random.Generator` passed in (same seed, same requests).

Arrival processes (`ARRIVALS`, a plain dict: one edit adds one):
- poisson(rate): exponential gaps of mean 1/rate.
- gamma(rate, burstiness): gaps ~ Gamma(shape=burstiness, scale=1/(rate*burstiness)), the same
  parametrisation as vLLM's benchmark_serving `--burstiness` (1 = Poisson, < 1 burstier, > 1 more
  regular; the mean rate stays `rate`).
- constant(rate): gaps of exactly 1/rate.
- offline: every request at t = 0.
- closed(concurrency N): N users, each sends its next request when its previous one finishes
  (zero think time); arrival times are decided by the simulator / load generator, here all 0.
- trace: replay (arrival_s, input_tokens, output_tokens) rows from a CSV or JSONL file.
The first request of an open-loop process arrives at t = 0, as in vLLM's benchmark.

Length distributions (`LengthDist`, integers >= 1): fixed, uniform (inclusive), normal (rounded,
clipped to >= 1), lognormal (parametrised by its *mean* and the sigma of the underlying normal:
mu = ln(mean) - sigma^2/2), empirical (resampled uniformly from given values or a file).

Workload files (`load_workload`): TOML or JSON, unknown keys rejected, e.g.

    name = "chat"
    num_requests = 1000
    shared_prefix_tokens = 0
    [arrival]            # kind = poisson | gamma | constant | offline | closed | trace
    kind = "gamma"
    rate_per_s = 4.0
    burstiness = 0.5     # trace: trace_file = "trace.csv" (relative to the workload file)
    [input_tokens]       # kind = fixed (value) | uniform (low, high) | normal (mean, std)
    kind = "normal"      #      | lognormal (mean, sigma) | empirical (values or file)
    mean = 512
    std = 128
    [output_tokens]
    kind = "fixed"
    value = 256

and optionally `prefix_groups = N` (the shared prefix is one of N texts, `spec`),
`[conversation]` turns, think_s (multi-turn, `conversation`) and `[dataset]` file,
output_tokens, max_input_tokens, max_output_tokens (the requests of a ShareGPT / OpenAI
messages / prompt JSONL / CSV file instead of the length tables, `datasets`). docs/workloads/
holds an example. The simulator and `bench --workload` both run `generate(default_rng(seed))`.

Limits (a workload is refused where it is built, so simulate, plan, calibrate and bench all get
them): at most `MAX_REQUESTS` (10^7) requests, token counts at most `MAX_LENGTH_TOKENS` (2^24,
16.8M: no served model's context is near it; sampled lengths are clipped to it), rates in
[1e-9, 1e9] requests/s, burstiness in [1e-6, 1e6], a lognormal's sigma at most 10 (beyond, its
samples are 0 or overflow), trace and length files at most `MAX_TRACE_BYTES` (128 MiB, about 3M
rows). 10^7 requests already take ~10 s and a few GiB to generate; 10^11 asked for 745 GiB.
Every number is checked finite (TOML and JSON both carry NaN/inf) and of its type (a bool is not
a count). A bad value in a file raises SchemaError naming the file, the field and the value.

Named scenarios (workload + deployment + scheduler settings) are in `tokenprobe.sim.scenarios`,
because they also fix the hardware and the server's settings.
"""

from __future__ import annotations

from tokenprobe.workload.arrivals import ARRIVALS, Arrival, arrival_times_s
from tokenprobe.workload.checks import (
    ARRIVAL_KINDS,
    BURSTINESS_RANGE,
    LENGTH_KINDS,
    MAX_LENGTH_TOKENS,
    MAX_LOGNORMAL_SIGMA,
    MAX_REQUESTS,
    MAX_TRACE_BYTES,
    RATE_RANGE_PER_S,
)
from tokenprobe.workload.conversation import Conversation
from tokenprobe.workload.datasets import (
    CHARS_PER_TOKEN,
    DATASET_FORMATS,
    ESTIMATE,
    Dataset,
    DatasetLengths,
    DatasetOptions,
    DatasetRow,
    dataset_lengths,
    estimate_tokens,
    estimated_lengths,
    load_dataset_lengths,
    read_dataset,
)
from tokenprobe.workload.lengths import LengthDist, fixed, read_lengths_file
from tokenprobe.workload.loading import load_workload, workload_from_dict
from tokenprobe.workload.request import RequestSpec
from tokenprobe.workload.spec import Workload, build_workload, workload_dict
from tokenprobe.workload.trace import read_trace

__all__ = [
    "ARRIVALS",
    "ARRIVAL_KINDS",
    "BURSTINESS_RANGE",
    "CHARS_PER_TOKEN",
    "DATASET_FORMATS",
    "ESTIMATE",
    "LENGTH_KINDS",
    "MAX_LENGTH_TOKENS",
    "MAX_LOGNORMAL_SIGMA",
    "MAX_REQUESTS",
    "MAX_TRACE_BYTES",
    "RATE_RANGE_PER_S",
    "Arrival",
    "Conversation",
    "Dataset",
    "DatasetLengths",
    "DatasetOptions",
    "DatasetRow",
    "LengthDist",
    "RequestSpec",
    "Workload",
    "arrival_times_s",
    "build_workload",
    "dataset_lengths",
    "estimate_tokens",
    "estimated_lengths",
    "fixed",
    "load_dataset_lengths",
    "load_workload",
    "read_dataset",
    "read_lengths_file",
    "read_trace",
    "workload_dict",
    "workload_from_dict",
]

"""What plan searches (one `Candidate` per point) and what it found (`Outcome`).

A candidate is a GPU x weight dtype x tp x batch cap x power cap x servers' GPUs (the node
topology) x speculative decoding x attention data parallelism (`dp` ranks of tp GPUs each whose
MoE layers share their experts over all dp x tp GPUs, vLLM `--data-parallel-size` with
`--enable-expert-parallel`, SGLang `--enable-dp-attention`, with the EP back end that moves their
tokens: cost/epcomm.py), served either aggregated (data-parallel replicas of one deployment
behind a `router`) or disaggregated (`PpDd`: P prefill and D decode workers of that deployment,
SGLang PD / Dynamo / llm-d). The comma lists of the CLI parse here, so bad input is
one ConfigError naming the flag.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from tokenprobe.cost import DEFAULT_EP_COMM, MAX_WORKERS, EpComm, SpecDecode, Split
from tokenprobe.errors import ConfigError
from tokenprobe.sim import ROUTERS

AGGREGATED = "agg"
PLAIN_TP = (1, DEFAULT_EP_COMM.backend, False)  # (dp, EP back end, two-batch overlap): no DP
ALL_SPLITS = "all"  # every P:D split within --max-gpus
NO_SPEC = "none"


def dp_unsupported(dp: int, spec_decode: str | None, disaggregate: str | None) -> bool:
    """Attention-DP ranks step together: the simulator runs them aggregated and without drafts
    (sim.simulate_fleet), so dp > 1 with either is not a candidate."""
    return dp > 1 and (spec_decode is not None or disaggregate is not None)


@dataclass(frozen=True)
class Candidate:
    gpu: str
    weight_dtype: str
    tp: int
    max_num_seqs: int = 256
    # the GPUs' power limit as a fraction of TDP (`nvidia-smi -pl`, seed 003 section 5.1): a
    # lower cap lowers the clock, which slows compute-bound work and cuts energy per token
    power_limit_fraction: float = 1.0
    # None: aggregated replicas behind `router` (None too when one replica serves the rate);
    # "1p3d": one prefill and three decode workers (the simulator's PD router)
    disaggregate: str | None = None
    router: str | None = "round-robin"
    spec_decode: str | None = None  # "mtp:1"; None: off
    gpus_per_node: int | None = None  # None: the plan's, else the GPU's catalog topology
    dp: int = 1  # attention-DP ranks of tp GPUs each, experts over dp x tp GPUs (1: plain TP)
    ep_backend: str = DEFAULT_EP_COMM.backend  # with dp > 1: the MoE exchange (EpComm.backend)
    two_batch_overlap: bool = False  # with dp > 1: SGLang TBO / vLLM DBO (EpComm.overlap)

    @property
    def dp_unsupported(self) -> bool:
        return dp_unsupported(self.dp, self.spec_decode, self.disaggregate)

    @property
    def gpus(self) -> int:
        """GPUs of one replica or worker."""
        return self.dp * self.tp

    @property
    def base_label(self) -> str:
        """The deployment of one replica or worker (the table's first column)."""
        label = f"{self.gpu} {self.weight_dtype} tp{self.tp} seqs{self.max_num_seqs}"
        if self.power_limit_fraction < 1.0:
            label += f" pl{100 * self.power_limit_fraction:.0f}%"
        if self.gpus_per_node is not None:
            label += f" {self.gpus_per_node}/node"
        if self.dp > 1:
            label += f" dp{self.dp}-ep{self.gpus}"
            if self.ep_backend != DEFAULT_EP_COMM.backend:
                label += f" {self.ep_backend}"
            if self.two_batch_overlap:
                label += " tbo"
        return label

    @property
    def mode(self) -> str:
        return self.disaggregate or AGGREGATED

    @property
    def label(self) -> str:
        """Every searched dimension that differs from plain aggregated serving."""
        parts = [self.base_label]
        if self.disaggregate:
            parts.append(self.disaggregate)
        elif self.router is not None and self.router != "round-robin":
            parts.append(self.router)
        if self.spec_decode:
            parts.append(self.spec_decode)
        return " ".join(parts)


@dataclass(frozen=True)
class Outcome:
    """One candidate after pruning or simulation."""

    candidate: Candidate
    feasible: bool
    reason: str
    rate_per_replica: float = 0.0  # aggregated: what one replica sustains (bisected)
    replicas: int = 0  # aggregated: replicas; disaggregated: P + D workers
    gpus: int = 0
    ttft_p90_s: float | None = None  # of the whole fleet at the requested rate
    tpot_p90_s: float | None = None
    output_tokens_per_s_per_gpu: float = 0.0
    kwh_per_million_output_tokens: float | None = None
    kwh_per_million_input_tokens: float | None = None
    prefill_share: float = 0.0  # of the fleet's energy, used to split costs
    miss: float = math.inf  # how far a lone request is from the SLOs (1 = just meets)
    # the fleet's worst p90 over its SLO at the requested rate (< 1: headroom); ranks equal costs
    slo_ratio: float | None = None
    nodes: int = 1  # servers one replica / worker spans
    nic_share: float | None = None  # of a lone decode step's time on the scale-out NICs
    imbalance: float | None = None  # busiest replica's requests over the mean
    prefix_cache_hit_rate: float | None = None
    simulated: bool = False  # judged by the simulator (else by the cost model)
    cost_per_hour: float | None = None
    usd_per_million_input_tokens: float | None = None
    usd_per_million_output_tokens: float | None = None

    @property
    def fleet(self) -> str:
        """`4x tp2` (replicas x tp), `1p3d tp2` (workers x tp), `- tp2` (not judged)."""
        c = self.candidate
        count = f"{self.replicas}x" if self.replicas else "-"
        ranks = f" dp{c.dp}" if c.dp > 1 else ""
        return f"{c.disaggregate or count} tp{c.tp}{ranks}"

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        c = self.candidate
        d["candidate"] = c.label
        d["deployment"] = c.base_label
        d["miss"] = None if math.isinf(self.miss) else self.miss
        d.update(
            mode=c.mode,
            fleet=self.fleet,
            tp=c.tp,
            router=c.router if c.disaggregate is None else None,
            spec_decode=c.spec_decode,
            gpus_per_node=c.gpus_per_node,
            dp=c.dp,
            ep_backend=c.ep_backend if c.dp > 1 else None,
            two_batch_overlap=c.two_batch_overlap if c.dp > 1 else None,
        )
        return d


def parse_split(text: str) -> tuple[int, int]:
    """`1p3d` -> (1, 3): at least one worker of each kind (cost.Split, the simulator's rule)."""
    try:
        split = Split.parse(text)
    except ConfigError:
        raise ConfigError(
            "disaggregate", text,
            f"{AGGREGATED}, {ALL_SPLITS} or PpDd with P and D in [1, {MAX_WORKERS}], e.g. 1p3d",
        ) from None  # fmt: skip
    return split.prefill, split.decode


def split_modes(items: Iterable[str]) -> tuple[str, ...]:
    """The `--disaggregate` list, checked: agg, all, or P:D splits ("1p2d")."""
    out = []
    for item in items:
        text = item.strip().lower()
        if text not in (AGGREGATED, ALL_SPLITS):
            p, d = parse_split(text)
            text = f"{p}p{d}d"
        out.append(text)
    return tuple(dict.fromkeys(out))


def spec_modes(items: Iterable[str], acceptance: float | None = None) -> tuple[str | None, ...]:
    """The `--spec-decode` list: none (off) or METHOD:K, each parsed as estimate parses it."""
    out: list[str | None] = []
    for item in items:
        text = item.strip().lower()
        if text == NO_SPEC:
            out.append(None)
            continue
        spec = SpecDecode.parse(text, acceptance)
        out.append(f"{spec.method}:{spec.draft_tokens}")
    return tuple(dict.fromkeys(out))


def routers(items: Iterable[str]) -> tuple[str, ...]:
    out = tuple(dict.fromkeys(item.strip().lower() for item in items))
    for r in out:
        if r not in ROUTERS:
            raise ConfigError("router", r, f"one of {', '.join(ROUTERS)}")
    return out


def ep_layouts(
    dps: Iterable[int],
    backends: Iterable[str] = (DEFAULT_EP_COMM.backend,),
    overlaps: Iterable[bool] = (False,),
) -> tuple[tuple[int, str, bool], ...]:
    """The `--dp` x `--moe-a2a-backend` x `--two-batch-overlap` lists, checked: (dp, backend,
    overlap) triples; plain TP (dp 1) has no expert exchange between ranks, so only once."""
    backend_list = tuple(dict.fromkeys(b.strip().lower() for b in backends))
    overlap_list = tuple(dict.fromkeys(overlaps))
    for b in backend_list:
        EpComm(backend=b)  # ConfigError("ep_backend", ...) for a name it does not know
    out: list[tuple[int, str, bool]] = []
    for dp in dict.fromkeys(dps):
        if isinstance(dp, bool) or not isinstance(dp, int) or dp < 1:
            raise ConfigError("dp", dp, "a positive number of attention-DP ranks")
        if dp == 1:
            out.append(PLAIN_TP)
            continue
        out += [(dp, b, o) for b in backend_list for o in overlap_list]
    return tuple(dict.fromkeys(out))


def candidates(
    gpus: Iterable[str],
    dtypes: Iterable[str],
    tps: Iterable[int],
    max_num_seqs: Iterable[int],
    power_limit_fractions: Iterable[float] = (1.0,),
    *,
    modes: Iterable[str] = (AGGREGATED,),
    router_list: Iterable[str] = ("round-robin",),
    specs: Iterable[str | None] = (None,),
    gpus_per_node: Iterable[int | None] = (None,),
    layouts: Iterable[tuple[int, str, bool]] = (PLAIN_TP,),
) -> tuple[Candidate, ...]:
    """Every combination. `modes` holds agg and explicit splits; `all` is expanded by the
    search (it depends on tp and --max-gpus). Disaggregated candidates have no router.
    `layouts`: (dp, EP back end, two-batch overlap) triples (`ep_layouts`)."""
    fractions, mode_list = tuple(power_limit_fractions), split_modes(modes)
    router_names, spec_list, per_node = routers(router_list), tuple(specs), tuple(gpus_per_node)
    out: list[Candidate] = []
    layouts = tuple(layouts)
    grid = itertools.product(
        gpus, dtypes, tps, max_num_seqs, fractions, per_node, spec_list, layouts
    )
    skipped = 0
    for g, d, t, s, f, n, sd, (dp, b, o) in grid:
        for m in mode_list:
            if dp_unsupported(dp, sd, None if m == AGGREGATED else m):
                skipped += 1
                continue
            if m == AGGREGATED:
                out += [Candidate(g, d, t, s, f, None, r, sd, n, dp, b, o) for r in router_names]
            else:
                out.append(Candidate(g, d, t, s, f, m, None, sd, n, dp, b, o))
    if skipped and not out:
        dps = [dp for dp, _, _ in layouts]
        why = "dp > 1 with agg and spec decode none (the ranks step together)"
        raise ConfigError("dp", dps, why)
    return tuple(out)

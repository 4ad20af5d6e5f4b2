"""`RunConfig`: what ran, declared once (issue 16 item 2), written by every producer of a run
(bench, simulate, bench-import) and read back by every consumer (diagnose, report, compare,
calibrate) into the same objects.

A `RunConfig` is `DeploymentConfig` (everything that prices the deployment: the model as served
and its catalog name, GPU, tp/pp/ep, weight/activation/KV dtypes, the cost profile's name and
its efficiency/power values, the power limit, the engine preset and its scheduler settings,
speculative decoding when on)
plus the workload, the SLOs, the run's source (measured / simulated / imported), the server's
URL (credentials already masked by the load generator), version, engine (the `owned_by` of its
model list) and served model id when known,
and `extra`: what else the writer keeps (bench's settings, the telemetry block, ...).

On disk it is config.json's "config" object, *flat* (`to_dict`): the deployment's keys sit at the
top level (`model`, `gpu`, `tp`, ...) as every run folder written before this type has them, so
an old folder reads into a RunConfig (missing keys take their defaults; bench's `url` is the
server URL) and readers of the plain dict (report, web) keep working. Unknown keys go to `extra`
and are written back unchanged, so `RunConfig.from_dict(c.to_dict()) == c`.

Names only: records sits below cost and sim, so turning a DeploymentConfig into a priced
`cost.Deployment` is `sim.price_deployment` and the reverse `sim.deployment_config`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from tokenprobe.errors import SchemaError
from tokenprobe.records.types import RUN_KINDS, Run

MAX_PARALLEL = 1024
# bench writes the server URL as "url" (BenchConfig.to_dict); others as "server_url"
_URL_KEYS = ("server_url", "url")


@dataclass(frozen=True, slots=True)
class DeploymentConfig:
    """What prices a run's deployment (names; see the module docstring). `model` is the model
    as run (the served name of a bench run, a catalog name of a simulation); `catalog_model`
    the catalog name to price it with when `model` is not one. `efficiency` / `power` hold the
    profile's values (cost.Efficiency / cost.PowerModel fields), so a reader needs no profile
    file; empty means the cost model's defaults. `scheduler` holds the scheduler's name and its
    SchedulerConfig fields as the simulator ran them (empty: the engine preset's defaults)."""

    model: str | None = None
    catalog_model: str | None = None
    gpu: str | None = None
    tp: int | None = None  # None: not known (a measured run that was not told); priced as 1
    pp: int | None = None
    expert_parallel: bool = False
    attention_dp: bool = False  # vLLM DP + EP: attention ranks sharing the experts (sim/dpep.py)
    dp_ranks: int | None = None  # with attention_dp: the ranks (None: one per GPU)
    # the servers the replica spans and their GPUs (None: the GPU's catalog topology, the
    # fewest nodes that hold it; cost.Deployment's placement)
    nodes: int | None = None
    gpus_per_node: int | None = None
    weight_dtype: str | None = None
    act_dtype: str | None = None
    kv_dtype: str | None = None
    profile: str | None = None
    efficiency: dict[str, float] = field(default_factory=dict)
    power: dict[str, float] = field(default_factory=dict)
    power_limit_w: float | None = None
    engine: str | None = None
    scheduler: dict[str, Any] = field(default_factory=dict)
    spec_decode: str | None = None  # speculative decoding METHOD:K (cost.SpecDecode.parse)
    spec_acceptance: float | None = None  # its per-token draft acceptance
    # the EP back end's fields (cost.EpComm: backend, mode, dispatch_dtype, overlap,
    # redundant_experts); empty: the plain all-to-all
    ep_comm: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("tp", "pp", "dp_ranks", "nodes", "gpus_per_node"):
            value = getattr(self, name)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int):
                raise SchemaError(f"config.{name}", f"{value!r:.40} is not an integer")
            if not 1 <= value <= MAX_PARALLEL:
                raise SchemaError(f"config.{name}", f"{value} is not in [1, {MAX_PARALLEL}]")
        limit = self.power_limit_w
        if limit is not None and not (_number(limit) and math.isfinite(limit) and limit > 0):
            raise SchemaError("config.power_limit_w", f"{limit!r:.40} is not a power > 0 (W)")
        for name in ("efficiency", "power"):
            table = getattr(self, name)
            if not isinstance(table, dict) or not all(_number(v) for v in table.values()):
                raise SchemaError(f"config.{name}", f"{table!r:.60} is not a table of numbers")

    @property
    def catalog_name(self) -> str | None:
        """The name to look the model up in the catalog by."""
        return self.catalog_model or self.model


_STR_FIELDS: tuple[str, ...] = ("model", "catalog_model", "gpu", "weight_dtype", "act_dtype")
_STR_FIELDS += ("kv_dtype", "profile", "engine", "spec_decode")
DEPLOYMENT_KEYS: tuple[str, ...] = tuple(f.name for f in fields(DeploymentConfig))


@dataclass(frozen=True, slots=True)
class RunConfig:
    """A run's configuration (module docstring). `source` is the run's kind."""

    source: str
    deployment: DeploymentConfig = field(default_factory=DeploymentConfig)
    workload: dict[str, Any] | None = None
    slo_ttft_s: float | None = None
    slo_tpot_s: float | None = None
    seed: int | None = None
    server_url: str | None = None
    server_version: str | None = None
    server_engine: str | None = None
    served_model: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.source not in RUN_KINDS:
            raise SchemaError("config.source", f"{self.source!r:.40} not in {RUN_KINDS}")
        for name in ("slo_ttft_s", "slo_tpot_s"):
            value = getattr(self, name)
            if value is not None and not (_number(value) and math.isfinite(value) and value > 0):
                raise SchemaError(f"config.{name}", f"{value!r:.40} is not a time > 0 (s)")
        seed = self.seed
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
            raise SchemaError("config.seed", f"{seed!r:.40} is not an integer >= 0")
        if self.workload is not None and not isinstance(self.workload, dict):
            raise SchemaError("config.workload", f"{self.workload!r:.60} is not an object")

    def to_dict(self) -> dict[str, Any]:
        """The flat JSON object config.json holds (module docstring)."""
        dep = self.deployment
        doc: dict[str, Any] = dict(self.extra)
        doc.update({name: _copy(getattr(dep, name)) for name in DEPLOYMENT_KEYS})
        typed = dict(
            run_source=self.source,
            workload=self.workload,
            slo_ttft_s=self.slo_ttft_s,
            slo_tpot_s=self.slo_tpot_s,
            seed=self.seed,
            server_url=self.server_url,
            server_version=self.server_version,
            server_engine=self.server_engine,
            served_model=self.served_model,
        )
        doc.update(typed)
        # a field not known (None, empty, False) is left out: it reads back as its default, and
        # a measured run's config keeps the keys it always had
        unknown = [k for k in (*DEPLOYMENT_KEYS, *typed) if _unknown(doc[k])]
        for key in unknown:
            del doc[key]
        return doc

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any], kind: str | None = None) -> RunConfig:
        """Read a config object (any version: module docstring); `kind` is config.json's
        "kind", used when the object does not say its source. SchemaError names a bad field."""
        source = kind or doc.get("run_source") or "simulated"
        url = next((doc[k] for k in _URL_KEYS if doc.get(k) is not None), None)
        # bench's own "url" stays in extra too (its settings as BenchConfig.to_dict wrote them)
        used = {*DEPLOYMENT_KEYS, "server_url", "run_source", "workload", "slo_ttft_s"}
        used |= {"slo_tpot_s", "seed", "server_version", "server_engine", "served_model"}
        return cls(
            source=str(source),
            deployment=_deployment(doc),
            workload=doc.get("workload"),
            slo_ttft_s=_opt_float(doc, "slo_ttft_s"),
            slo_tpot_s=_opt_float(doc, "slo_tpot_s"),
            seed=doc.get("seed"),
            server_url=_opt_str(doc, "server_url", url),
            server_version=_opt_str(doc, "server_version"),
            server_engine=_opt_str(doc, "server_engine"),
            served_model=_opt_str(doc, "served_model"),
            extra={k: v for k, v in doc.items() if k not in used},
        )

    @classmethod
    def imported(
        cls, tool: str, settings: Mapping[str, Any], model: str | None = None
    ) -> RunConfig:
        """An imported run's config: the tool it came from (extra "source") and its settings,
        and the served model when the file names it (bench-import)."""
        return cls(
            source="imported",
            deployment=DeploymentConfig(model=model),
            served_model=model,
            extra={"source": tool, **settings},
        )

    @classmethod
    def of(cls, run: Run) -> RunConfig:
        """The typed configuration of a run (read from `run.config`)."""
        return cls.from_dict(run.config, run.kind)


def _deployment(doc: Mapping[str, Any]) -> DeploymentConfig:
    tp, pp = doc.get("tp"), doc.get("pp")  # type-checked by DeploymentConfig
    dp_ranks = doc.get("dp_ranks")
    values: dict[str, Any] = {name: _opt_str(doc, name) for name in _STR_FIELDS}
    return DeploymentConfig(
        **values,
        tp=tp,
        pp=pp,
        nodes=doc.get("nodes"),
        gpus_per_node=doc.get("gpus_per_node"),
        expert_parallel=bool(doc.get("expert_parallel") or False),
        attention_dp=bool(doc.get("attention_dp") or False),
        dp_ranks=dp_ranks,
        efficiency=_table(doc, "efficiency"),
        power=_table(doc, "power"),
        power_limit_w=_opt_float(doc, "power_limit_w"),
        scheduler=_table(doc, "scheduler"),
        spec_acceptance=_opt_float(doc, "spec_acceptance"),
        ep_comm=_table(doc, "ep_comm"),
    )


def _unknown(value: Any) -> bool:
    """None, an empty table or False: a field at its not-known default (0 is a value)."""
    return value is None or value is False or (isinstance(value, dict) and not value)


def _copy(value: Any) -> Any:
    return dict(value) if isinstance(value, dict) else value


def _number(value: object) -> bool:
    return not isinstance(value, bool) and isinstance(value, int | float)


def _opt_str(doc: Mapping[str, Any], key: str, value: Any = None) -> str | None:
    value = doc.get(key) if value is None else value
    if value is None or isinstance(value, str):
        return value
    raise SchemaError(f"config.{key}", f"{value!r:.40} is not a string")


def _opt_float(doc: Mapping[str, Any], key: str) -> float | None:
    value = doc.get(key)
    if value is None:
        return None
    if not _number(value):
        raise SchemaError(f"config.{key}", f"{value!r:.40} is not a number")
    return float(value)


def _table(doc: Mapping[str, Any], key: str) -> dict[str, Any]:
    value = doc.get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise SchemaError(f"config.{key}", f"{value!r:.60} is not an object")
    return dict(value)

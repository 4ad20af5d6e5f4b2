"""What a run was, in a few words, from its config.json `config` (any run kind).

Read defensively: a measured run has `model`, `url`, the bench keys (`concurrency`,
`rate_per_s`, `num_requests`, `input_tokens`, ...) and maybe `catalog_model`/`gpu`; a simulated
run has its deployment (`model`, `gpu`, `tp`, `workload`, `scheduler`); an imported run has
`source` and what the tool kept (vLLM: `model_id`, `backend`, `request_rate`, `max_concurrency`);
a typed run config may nest them under `deployment` / `workload` / `server`. An absent or
odd-typed key is "-", never an error. Used by the report's headline and by the run browser's
list, so both say the same.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit, urlunsplit

from tokenprobe.report.fmt import MISSING, num

FACTS = ("model", "gpu", "engine", "load", "server")


def _dict(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


def _lookup(config: dict[str, Any], *keys: str) -> Any:
    """The first of `keys` present and not None, at the top level or in the nested parts."""
    parts = [config, *(_dict(config.get(k)) for k in ("deployment", "server", "workload"))]
    for key in keys:
        for part in parts:
            value = part.get(key)
            if value is not None and value != "":
                return value
    return None


def _text(v: Any) -> str | None:
    return v if isinstance(v, str) and v else None


def _model(config: dict[str, Any]) -> str:
    served = _text(_lookup(config, "model", "served_model", "served_model_id", "model_id"))
    catalog = _text(_lookup(config, "catalog_model"))
    if served and catalog and catalog != served:
        return f"{served} (priced as {catalog})"
    return served or catalog or MISSING


def _gpu(config: dict[str, Any]) -> str:
    gpu = _lookup(config, "gpu")
    if isinstance(gpu, dict):  # a typed GPU spec
        gpu = gpu.get("name")
    name = _text(gpu)
    if name is None:
        gpus = _dict(config.get("telemetry")).get("gpus")
        return f"{len(gpus)} GPU(s) sampled" if isinstance(gpus, list) and gpus else MISSING
    tp, pp = _lookup(config, "tp"), _lookup(config, "pp")
    par = [f"{k}={v}" for k, v in (("tp", tp), ("pp", pp)) if isinstance(v, int) and v > 1]
    return f"{name} ({', '.join(par)})" if par else name


def _engine(config: dict[str, Any]) -> str:
    for key in ("engine", "engine_preset", "preset", "server_version", "backend"):
        value = _lookup(config, key)
        if isinstance(value, dict):
            value = value.get("name")
        if _text(value):
            return str(value)
    scheduler = _dict(config.get("scheduler")) or _dict(
        _dict(config.get("deployment")).get("scheduler")
    )
    name = _text(scheduler.get("name"))
    return f"simulated {name} scheduler" if name else MISSING


def _arrival_load(config: dict[str, Any]) -> str | None:
    arrival = _dict(_dict(config.get("workload")).get("arrival"))
    kind = arrival.get("kind")
    if kind == "poisson" or (_lookup(config, "rate_per_s", "request_rate") and kind != "closed"):
        rate = arrival.get("rate_per_s") or _lookup(config, "rate_per_s", "request_rate")
        if isinstance(rate, int | float) and not isinstance(rate, bool) and rate > 0:
            return f"{num(rate)} req/s"
    users = arrival.get("concurrency") or _lookup(config, "concurrency", "max_concurrency")
    if isinstance(users, int) and not isinstance(users, bool) and users > 0:
        return f"concurrency {users:,}"
    if kind == "offline" or config.get("offline") is True:
        return "offline (all at once)"
    return None


def _lengths(config: dict[str, Any]) -> str | None:
    dataset = _text(_lookup(config, "dataset"))
    if dataset:
        return f"dataset {dataset.rsplit('/', 1)[-1]}"
    lengths = []
    for key in ("input_tokens", "output_tokens"):
        v = _lookup(config, key)
        if isinstance(v, dict):  # a workload's length distribution
            v = v.get("value") if v.get("kind") == "fixed" else v.get("kind")
        if isinstance(v, int | str) and not isinstance(v, bool):
            lengths.append(f"{v:,}" if isinstance(v, int) else v)
    return f"{lengths[0]} in / {lengths[1]} out tokens" if len(lengths) == 2 else None


def _load(config: dict[str, Any]) -> str:
    parts = [_arrival_load(config)]
    n = _lookup(config, "num_requests")
    if isinstance(n, int) and not isinstance(n, bool):
        parts.append(f"{n:,} requests")
    parts.append(_lengths(config))
    found = [p for p in parts if p]
    return ", ".join(found) if found else MISSING


def _without_credentials(url: str) -> str:
    """The URL without user:password@ and without its query (a key may ride in either)."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
    except ValueError:  # not a URL we can take apart: show nothing of it rather than a secret
        return MISSING
    if not parts.scheme or not host:
        return url.split("@")[-1].split("?")[0]
    host = f"[{host}]" if ":" in host else host
    return urlunsplit((parts.scheme, host + port, parts.path, "", ""))


def _server(kind: Any, config: dict[str, Any]) -> str:
    url = _text(_lookup(config, "url", "base_url", "server_url"))
    if url:
        return _without_credentials(url)
    if kind == "simulated":
        return "simulated"
    source = _text(_lookup(config, "source"))
    return f"imported from {source}" if source else MISSING


def run_facts(kind: Any, config: Any) -> dict[str, str]:
    """model, gpu, engine, load and server of a run as display strings ("-" when unknown)."""
    c = _dict(config)
    return {
        "model": _model(c),
        "gpu": _gpu(c),
        "engine": _engine(c),
        "load": _load(c),
        "server": _server(kind, c),
    }

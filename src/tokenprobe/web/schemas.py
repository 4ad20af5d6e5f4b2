"""The JSON API's request bodies: strict pydantic models with bounds (no coercion of "8" to 8,
unknown keys rejected), and the catalog lookups that keep every name inside the catalogs.

A model or GPU in a request is a catalog name, never a path: `get_model` / `get_gpu` would read a
file for a path, and the web app must not touch files outside the runs folder.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from tokenprobe.calibrate import Profile, load_profile, shipped_profiles
from tokenprobe.cost import Estimate, estimate
from tokenprobe.errors import ConfigError, UnknownHardwareError, UnknownModelError
from tokenprobe.hardware import GpuSpec, get_gpu, gpu_names
from tokenprobe.model import ModelSpec, catalog_names, from_hf_config, get_model

DtypeName = Literal["fp32", "bf16", "fp16", "fp8", "int8", "int4", "fp4", "mxfp4"]
DTYPE_NAMES: tuple[str, ...] = DtypeName.__args__  # type: ignore[attr-defined]

MAX_TOKENS = 1_048_576  # 1 Mi tokens: beyond any catalog model's context
MAX_BATCH = 65_536
MAX_TP = 64
MAX_PP = 64
MAX_POWER_W = 5_000.0
MAX_CONFIG_CHARS = 64_000
MAX_CONFIG_NUMBER = 1e9
# The cost model walks the layers one by one (model.layer_groups): 10^9 layers would hold a
# worker for hours. The deepest published models have ~126 (Llama 3.1 405B); 1,024 is ample.
MAX_LAYERS = 1024
LAYER_KEYS = frozenset({"num_hidden_layers", "n_layer"})  # the keys from_hf_config reads

LIMITS: dict[str, tuple[float, float]] = {
    "input_tokens": (1, MAX_TOKENS),
    "output_tokens": (1, MAX_TOKENS),
    "batch": (1, MAX_BATCH),
    "tp": (1, MAX_TP),
    "pp": (1, MAX_PP),
    "power_limit_w": (1, MAX_POWER_W),
}


class WorkloadRequest(BaseModel):
    """Model, parallelism, precisions and request shape (everything but the GPU)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    model: str = Field("llama-3.1-8b", min_length=1, max_length=100)
    hf_config: dict[str, Any] | None = Field(
        None, description="a pasted Hugging Face config.json (used instead of `model`)"
    )
    tp: int = Field(1, ge=1, le=MAX_TP)
    pp: int = Field(1, ge=1, le=MAX_PP)
    input_tokens: int = Field(1024, ge=1, le=MAX_TOKENS)
    output_tokens: int = Field(256, ge=1, le=MAX_TOKENS)
    batch: int = Field(1, ge=1, le=MAX_BATCH)
    weight_dtype: DtypeName = "bf16"
    kv_dtype: DtypeName | None = None
    power_limit_w: float | None = Field(None, gt=0, le=MAX_POWER_W, allow_inf_nan=False)
    profile: str | None = Field(
        None, min_length=1, max_length=40, description="a shipped engine profile (never a path)"
    )


class EstimateRequest(WorkloadRequest):
    gpu: str = Field("h100-sxm", min_length=1, max_length=100)


def _check_numbers(cfg: dict[str, Any]) -> None:
    """ConfigError naming the first number of a pasted config that is out of bounds (NaN, inf,
    beyond ±MAX_CONFIG_NUMBER, or a layer count beyond MAX_LAYERS). Iterative: a deeply nested
    config costs no stack."""
    stack: list[tuple[str, Any]] = [(str(k), v) for k, v in cfg.items()]
    while stack:
        path, value = stack.pop()
        if isinstance(value, bool) or value is None or isinstance(value, str):
            continue
        if isinstance(value, int | float):
            key = path.rsplit(".", 1)[-1]
            hi = MAX_LAYERS if key in LAYER_KEYS else MAX_CONFIG_NUMBER
            if not abs(value) <= hi:  # also catches NaN
                raise ConfigError(f"hf_config.{path}", value, f"a number within ±{hi:g}")
        elif isinstance(value, dict):
            stack.extend((f"{path}.{k}", v) for k, v in value.items())
        elif isinstance(value, list):
            stack.extend((f"{path}[{i}]", v) for i, v in enumerate(value))


def pasted_model(cfg: dict[str, Any]) -> ModelSpec:
    """A ModelSpec from a pasted config.json, bounded in size and in every number."""
    if len(json.dumps(cfg)) > MAX_CONFIG_CHARS:
        raise ConfigError("hf_config", "...", f"at most {MAX_CONFIG_CHARS:,} characters of JSON")
    _check_numbers(cfg)
    try:
        return from_hf_config(cfg, name=str(cfg.get("_name_or_path") or "pasted config"))
    except ConfigError as exc:  # e.g. SchemaError("config.json", "missing key ...")
        raise ConfigError("hf_config", "...", exc.allowed) from None
    except (KeyError, TypeError, ValueError, ZeroDivisionError, AttributeError) as exc:
        raise ConfigError("hf_config", "...", f"not a usable model config ({exc!r})") from None


def catalog_model(name: str) -> ModelSpec:
    """A model of the catalog by name (case-insensitive); never a path."""
    names = catalog_names()
    if name.strip().lower() not in {n.lower() for n in names}:
        raise UnknownModelError(name, names)
    return get_model(name.strip().lower())


def catalog_gpu(name: str) -> GpuSpec:
    """A GPU of the catalog by name (case-insensitive); never a path."""
    names = gpu_names()
    match = {n.lower(): n for n in names}.get(name.strip().lower())
    if match is None:
        raise UnknownHardwareError(name, names)
    return get_gpu(match)


def shipped_profile(name: str) -> Profile:
    """A profile shipped with the package by name; never a file (`load_profile` reads paths)."""
    names = shipped_profiles()
    if name not in names:
        raise ConfigError("profile", name, f"one of {', '.join(names)} (or none for the defaults)")
    return load_profile(name)


def request_model(req: WorkloadRequest) -> ModelSpec:
    """The request's model: its pasted config if any, else the catalog model it names."""
    return pasted_model(req.hf_config) if req.hf_config is not None else catalog_model(req.model)


def run_estimate(req: WorkloadRequest, gpu: GpuSpec, model: ModelSpec | None = None) -> Estimate:
    """The estimate of `req` on `gpu` (`model`: request_model(req), when already built).

    A pasted config is unchecked input to the cost model: an arithmetic failure it causes (an
    overflow when it routes a token to more experts than it has, a division by a zero size) is
    that config's fault, so it is a ConfigError on `hf_config`, not a server error.
    """
    model = model or request_model(req)
    if req.hf_config is None:
        return _estimate(req, gpu, model)
    try:
        return _estimate(req, gpu, model)
    except ConfigError:
        raise
    except (ArithmeticError, ValueError) as exc:
        raise ConfigError("hf_config", "...", f"not a usable model config ({exc!r})") from None


def _estimate(req: WorkloadRequest, gpu: GpuSpec, model: ModelSpec) -> Estimate:
    profile = shipped_profile(req.profile) if req.profile is not None else None
    return estimate(
        model,
        gpu,
        input_tokens=req.input_tokens,
        output_tokens=req.output_tokens,
        batch=req.batch,
        tp=req.tp,
        pp=req.pp,
        weight_dtype=req.weight_dtype,
        kv_dtype=req.kv_dtype,
        power_limit_w=req.power_limit_w,
        efficiency=profile.efficiency if profile else None,
        power=profile.power if profile else None,
    )

"""Engine profiles: fitted cost-model parameters in a small TOML file, and the shipped ones.

File format (every section but [engine] optional; a key left out keeps the model's default):

    [engine]
    name = "vllm"                  # the profile's name (engine and era)
    engine = "vllm"                # the engine preset it prices (tokenprobe.sim.PRESETS)
    vendor = "nvidia"              # GPU vendor whose kernels it was fitted on (hardware.VENDORS)
    generation = "blackwell"       # optional: the GPU generation it was fitted on (catalog/
                                   # energy.toml's names, `cost.gpu_generation`); "" = any
    power_of = "vllm"              # optional: use this shipped profile's [power] (then no [power])
    version = "0.11.1"             # engine versions it was fitted on (free text)
    fitted_on = ["mlenergy_v3"]    # sources (tables) the fit used
    notes = "..."

    [efficiency]                   # tokenprobe.cost.Efficiency fields (fractions, seconds)
    memory = 0.83
    step_overhead_s = 0.0011

    [power]                        # tokenprobe.cost.PowerModel fields
    busy_power_fraction = 0.3

    [fit]                          # what was fitted and how well (written by `calibrate`)
    parameters = ["memory", "step_overhead_s"]
    [[fit.error]]
    set = "fitted"                 # or "held_out"
    source = "mlenergy_v3"
    metric = "itl_median"
    rows = 214
    mdape_before_pct = 12.7
    mdape_after_pct = 6.1

Unknown keys anywhere, a wrong type or an out-of-range value raise SchemaError naming the file
and the key. Ranges: the efficiency fractions in (0, 1] and the power coefficients in the ranges
`cost.Efficiency` / `cost.PowerModel` enforce; besides, every number must be finite (TOML has
`nan` and `inf`), an overhead (`*_s`) at most `MAX_OVERHEAD_S` (10 s: fitted ones are µs to
ms), `routing_skew` at most `MAX_ROUTING_SKEW` (5: the fits give 0.5-1.2; at 5 a few experts
take nearly every pick, and large values overflow the log-normal weights to NaN), `rows` an
integer >= 0 and the MdAPE figures finite and >= 0. Files are read by `tokenprobe.files` (a
folder, FIFO, binary or non-UTF-8 file is a SchemaError naming it). `save_profile` writes
exactly this format; `load_profile(save_profile(p))` == p.
Shipped profiles live in `calibrate/profiles/<name>.toml` and are fitted by
`benchmarks/fit_profiles.py` on shared/validation and benchmarks/data.

Which profile prices a run: `select_profile(engine, vendor, generation)`. An engine's kernels
differ by era, by GPU vendor (vLLM on ROCm runs other attention, GEMM and all-reduce kernels than
on CUDA) and by GPU generation (vLLM picks FlashInfer attention by default on Blackwell, SM 10.0,
and FlashAttention elsewhere: vllm-project/vllm@1c0d9ecf:vllm/platforms/cuda.py; its GEMM and MoE
kernels are sm100 builds and configs), so each engine preset names its
profile per vendor and, where one is fitted, per vendor and generation (`tokenprobe.sim.PRESETS`),
and each profile says which engine, vendor and generation it was fitted for.

`power_of` names the shipped profile whose power model a profile uses unchanged: a profile fitted
on another GPU generation's times keeps the power model fitted on H100 (issue 18: energy on a new
GPU stays a transfer check), and follows that profile when it is refitted. It must name a shipped
profile without a `power_of` of its own, and the file then has no [power] table.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from importlib import resources
from pathlib import Path
from typing import Any

from tokenprobe.cost import (
    DEFAULT_EFFICIENCY,
    DEFAULT_POWER,
    MAX_OVERHEAD_S,
    MAX_ROUTING_SKEW,
    Efficiency,
    PowerModel,
    gpu_generation,
)
from tokenprobe.errors import ConfigError, SchemaError
from tokenprobe.files import check_out_file, names_a_file, parse_toml, read_text
from tokenprobe.hardware import VENDORS, get_gpu, gpu_names
from tokenprobe.sim import engine_era, engine_preset

SECTIONS = ("engine", "efficiency", "power", "fit")
ENGINE_KEYS = {
    "name": str,
    "engine": str,
    "vendor": str,
    "generation": str,
    "power_of": str,
    "version": str,
    "fitted_on": list,
    "notes": str,
}
FIT_KEYS = {"parameters": list, "error": list}
ERROR_KEYS = {
    "set": str,
    "source": str,
    "metric": str,
    "rows": int,
    "mdape_before_pct": float,
    "mdape_after_pct": float,
}
ERROR_SETS = ("fitted", "held_out")


@dataclass(frozen=True)
class FitError:
    """Error of one (source, metric) before and after the fit, on the fitted or held-out set."""

    set: str
    source: str
    metric: str
    rows: int
    mdape_before_pct: float
    mdape_after_pct: float


@dataclass(frozen=True)
class Profile:
    name: str
    version: str = ""
    engine: str = ""  # the engine preset it prices ("" = unstated)
    vendor: str = ""  # the GPU vendor it was fitted on ("" = unstated)
    generation: str = ""  # the GPU generation it was fitted on ("" = any of the vendor's)
    power_of: str = ""  # the shipped profile whose [power] it uses ("" = its own [power])
    fitted_on: tuple[str, ...] = ()
    notes: str = ""
    efficiency: Efficiency = DEFAULT_EFFICIENCY
    power: PowerModel = DEFAULT_POWER
    parameters: tuple[str, ...] = ()
    errors: tuple[FitError, ...] = field(default=())

    def deployment_kwargs(self) -> dict[str, Any]:
        """`make_deployment(model, gpu, ..., **profile.deployment_kwargs())` prices with it."""
        return {"efficiency": self.efficiency, "power": self.power}


# ------------------------------------------------------------------------------ reading


def _check_keys(table: Mapping[str, Any], allowed: Any, where: str, origin: str) -> None:
    unknown = sorted(set(table) - set(allowed))
    if unknown:
        raise SchemaError(
            origin, f"unknown key {where}{unknown[0]!r}; allowed: {', '.join(sorted(allowed))}"
        )


def _typed(value: Any, kind: type, key: str, origin: str) -> Any:
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value) if abs(value) < 2**1000 else math.inf
    if not isinstance(value, kind) or isinstance(value, bool):
        raise SchemaError(origin, f"{key}={value!r:.80} should be a {kind.__name__}")
    if isinstance(value, list) and not all(isinstance(v, str) for v in value):
        raise SchemaError(origin, f"{key} should be a list of strings")
    if isinstance(value, float) and not (math.isfinite(value) and value >= 0):
        raise SchemaError(origin, f"{key}={value!r} should be a finite number >= 0")
    if isinstance(value, int) and value < 0:
        raise SchemaError(origin, f"{key}={value!r} should be >= 0")
    return value


def _numbers(table: Any, section: str, origin: str) -> dict[str, float]:
    if not isinstance(table, Mapping):
        raise SchemaError(origin, f"[{section}] should be a table")
    out = {}
    for key, value in table.items():
        out[key] = float(_typed(value, float, f"{section}.{key}", origin))
        hi = MAX_OVERHEAD_S if key.endswith("_s") else None
        hi = MAX_ROUTING_SKEW if key == "routing_skew" else hi
        if hi is not None and out[key] > hi:
            raise SchemaError(origin, f"{section}.{key}={value!r} should be <= {hi:g}")
    return out


def _efficiency(table: Any, origin: str) -> Efficiency:
    values = _numbers(table, "efficiency", origin)
    _check_keys(values, {f.name for f in fields(Efficiency)}, "efficiency.", origin)
    try:
        return DEFAULT_EFFICIENCY.with_overrides(values)
    except ConfigError as exc:
        raise SchemaError(origin, str(exc)) from None


def _power(table: Any, origin: str) -> PowerModel:
    values = _numbers(table, "power", origin)
    _check_keys(values, {f.name for f in fields(PowerModel)}, "power.", origin)
    try:
        return PowerModel(
            **{**{f.name: getattr(DEFAULT_POWER, f.name) for f in fields(PowerModel)}, **values}
        )
    except ConfigError as exc:
        raise SchemaError(origin, str(exc)) from None


def _errors(items: list[Any], origin: str) -> tuple[FitError, ...]:
    out = []
    for i, item in enumerate(items):
        where = f"fit.error[{i}]."
        if not isinstance(item, Mapping):
            raise SchemaError(origin, f"{where[:-1]} should be a table")
        _check_keys(item, ERROR_KEYS, where, origin)
        missing = [k for k in ERROR_KEYS if k not in item]
        if missing:
            raise SchemaError(origin, f"{where}{missing[0]} is missing")
        values = {k: _typed(item[k], t, where + k, origin) for k, t in ERROR_KEYS.items()}
        if values["set"] not in ERROR_SETS:
            raise SchemaError(origin, f"{where}set={values['set']!r}: one of {ERROR_SETS}")
        out.append(FitError(**values))
    return tuple(out)


def _fit(table: Any, origin: str) -> tuple[tuple[str, ...], tuple[FitError, ...]]:
    if not isinstance(table, Mapping):
        raise SchemaError(origin, "[fit] should be a table")
    _check_keys(table, FIT_KEYS, "fit.", origin)
    params = _typed(table.get("parameters", []), list, "fit.parameters", origin)
    items = table.get("error", [])
    if not isinstance(items, list):
        raise SchemaError(origin, "fit.error should be an array of tables ([[fit.error]])")
    return tuple(params), _errors(items, origin)


def _power_of(name: str, origin: str) -> PowerModel:
    """The power model of the shipped profile `name` (engine.power_of)."""
    if name not in shipped_profiles():
        raise SchemaError(
            origin, f"engine.power_of={name!r}: one of {', '.join(shipped_profiles())}"
        )
    other = _load_shipped(name)
    if other.power_of:
        raise SchemaError(
            origin, f"engine.power_of={name!r} uses {other.power_of!r}'s power: name that one"
        )
    return other.power


def parse_profile(text: str, origin: str = "<profile>") -> Profile:
    """A Profile from TOML text; SchemaError (naming `origin` and the key) on anything wrong."""
    doc = parse_toml(text, origin)
    _check_keys(doc, SECTIONS, "section ", origin)
    engine = doc.get("engine")
    if not isinstance(engine, Mapping) or "name" not in engine:
        raise SchemaError(origin, "needs an [engine] table with a name")
    _check_keys(engine, ENGINE_KEYS, "engine.", origin)
    meta = {k: _typed(v, ENGINE_KEYS[k], f"engine.{k}", origin) for k, v in engine.items()}
    if meta.get("vendor", "") not in ("", *VENDORS):
        raise SchemaError(origin, f"engine.vendor={meta['vendor']!r} should be one of {VENDORS}")
    if meta.get("generation", "") not in ("", *generations()):
        raise SchemaError(
            origin, f"engine.generation={meta['generation']!r}: one of {', '.join(generations())}"
        )
    params, errors = _fit(doc.get("fit", {}), origin)
    power_of = meta.get("power_of", "")
    power = _power_of(power_of, origin) if power_of else _power(doc.get("power", {}), origin)
    if power_of and "power" in doc:
        raise SchemaError(origin, f"engine.power_of={power_of!r} and a [power] table: give one")
    return Profile(
        name=meta["name"],
        version=meta.get("version", ""),
        engine=meta.get("engine", ""),
        vendor=meta.get("vendor", ""),
        generation=meta.get("generation", ""),
        power_of=power_of,
        fitted_on=tuple(meta.get("fitted_on", ())),
        notes=meta.get("notes", ""),
        efficiency=_efficiency(doc.get("efficiency", {}), origin),
        power=power,
        parameters=params,
        errors=errors,
    )


@functools.lru_cache(maxsize=1)
def generations() -> tuple[str, ...]:
    """The GPU generations a profile can name: those of the catalog's GPUs (cost.gpu_generation)."""
    return tuple(sorted({gpu_generation(get_gpu(n)) for n in gpu_names()} - {""}))


# ------------------------------------------------------------------------------ writing


def _toml_value(value: Any) -> str:
    if isinstance(value, str):
        escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        return f'"{escaped}"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ConfigError("profile value", value, "a finite number")
        return repr(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise ConfigError("profile value", value, "a string, number or list")


def dumps_profile(profile: Profile) -> str:
    """The TOML text of a profile (only non-default parameters are not special: all are written)."""
    lines = ["# tokenprobe engine profile (tokenprobe.calibrate.profile documents the format)"]
    lines += ["[engine]", f"name = {_toml_value(profile.name)}"]
    for key in ("engine", "vendor", "generation", "power_of"):
        if getattr(profile, key):
            lines.append(f"{key} = {_toml_value(getattr(profile, key))}")
    lines.append(f"version = {_toml_value(profile.version)}")
    lines.append(f"fitted_on = {_toml_value(list(profile.fitted_on))}")
    if profile.notes:
        lines.append(f"notes = {_toml_value(profile.notes)}")
    lines += ["", "[efficiency]"]
    lines += [
        f"{f.name} = {_toml_value(float(getattr(profile.efficiency, f.name)))}"
        for f in fields(Efficiency)
    ]
    if not profile.power_of:  # else the power is the named profile's (engine.power_of)
        lines += ["", "[power]"]
        lines += [
            f"{f.name} = {_toml_value(float(getattr(profile.power, f.name)))}"
            for f in fields(PowerModel)
        ]
    lines += ["", "[fit]", f"parameters = {_toml_value(list(profile.parameters))}"]
    for e in profile.errors:
        lines += ["", "[[fit.error]]"]
        lines += [f"{f.name} = {_toml_value(getattr(e, f.name))}" for f in fields(FitError)]
    return "\n".join(lines) + "\n"


def save_profile(profile: Profile, path: str | Path) -> Path:
    p = Path(path)
    check_out_file(p, "profile path")
    try:
        p.write_text(dumps_profile(profile), encoding="utf-8")
    except OSError as exc:
        raise ConfigError("profile path", str(p), f"cannot write: {exc.strerror}") from None
    return p


# ------------------------------------------------------------------------------ lookup


def shipped_profiles() -> list[str]:
    """Names of the profiles that ship with the package."""
    folder = resources.files("tokenprobe.calibrate") / "profiles"
    return sorted(
        f.name.removesuffix(".toml") for f in folder.iterdir() if f.name.endswith(".toml")
    )


@functools.lru_cache(maxsize=32)
def _load_shipped(name: str) -> Profile:
    res = resources.files("tokenprobe.calibrate") / "profiles" / f"{name}.toml"
    return parse_profile(res.read_text(encoding="utf-8"), f"profiles/{name}.toml")


def load_profile(name_or_path: str | Path) -> Profile:
    """A profile file (path) or a shipped profile by name (e.g. "vllm", "tensorrt-llm")."""
    text = str(name_or_path)
    path = Path(text)
    if path.suffix == ".toml" or names_a_file(path):
        return parse_profile(read_text(path), text)
    known = shipped_profiles()
    if text not in known:
        raise ConfigError("profile", text, f"a profile .toml file or one of: {', '.join(known)}")
    return _load_shipped(text)


def select_profile(engine: str, vendor: str, generation: str = "") -> Profile | None:
    """The shipped profile that prices `engine` on a GPU of `vendor` and `generation`
    (`cost.gpu_generation`; "" = unknown), or None (model defaults).

    `engine` is an engine preset or alias ("vllm", "trt-llm") or a shipped profile's name (an
    era such as "vllm-2024", as `observations.engine_name` names rows). A shipped profile fitted
    on this vendor (or on an unstated one) is taken as named, except that the profile an engine's
    preset names for the vendor gives way to the one it names for the vendor's generation
    (`vllm` on a B200 is `vllm-blackwell`); otherwise the engine's preset names its profile for
    the vendor (`tokenprobe.sim.PRESETS`): vLLM on an AMD GPU is `vllm-rocm`, whatever the era.
    An engine with no profile for the vendor gets None; an unknown engine is a ConfigError.
    """
    name = profile_name_for(engine, vendor, generation)
    return _load_shipped(name) if name is not None else None


def profile_name_for(engine: str, vendor: str, generation: str = "") -> str | None:
    """The name `select_profile` loads (the profile itself need not be shipped yet)."""
    era = engine_era(engine)
    if era is not None and vendor in era.profiles:  # the era's kernels on this vendor
        return era.profiles[vendor]
    family = None
    if engine in shipped_profiles():
        named = _load_shipped(engine)
        if named.vendor in ("", vendor):
            preset = engine_preset(named.engine or engine)
            if preset.profiles.get(vendor) != engine:  # an era, or a generation's own profile
                return engine
            return preset.profile_for(vendor, generation) or engine
        family = named.engine or None
    return engine_preset(family or engine).profile_for(vendor, generation)

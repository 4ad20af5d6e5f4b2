"""GPU, link and host specs, and the cited catalog they are loaded from (requirement E2).

Every figure lives in `catalog/gpus.toml` / `catalog/hosts.toml` with its source; that file's
header documents the schema. The files are written in datasheet units named by their unit
(`hbm_gb_per_s`, `peak_tflop_per_s`, `latency_us`); this module converts them to SI floats
(bytes, bytes/s, FLOP/s, s, W) at load, and validates them: unknown or missing keys and any number
that is not finite and > 0, or outside its plausible range (`_RANGES`: e.g. at most 10^5
TFLOP/s, 10^5 GiB of HBM, 10^5 W; far beyond any part, but where the SI figures stay finite
after conversion), raise `SchemaError` naming the file, the key and the value. User files (a GPU
TOML for `get_gpu`, a host TOML for `get_host`) are read by `tokenprobe.files` (a folder, FIFO,
binary or non-UTF-8 file is a SchemaError naming it, never a hang).

Conventions the cost model relies on:

- `peak_flop_per_s` holds DENSE tensor-core peaks (never the 2:4 sparsity figures); "fp32" is the
  TF32 tensor figure; a missing dtype means no native support.
- `LinkSpec.bytes_per_s` is ONE direction, all links of one GPU together. Datasheets print both
  directions summed (H100 NVLink "900 GB/s" = 450 GB/s each way); that is
  `bidirectional_bytes_per_s`.
- `TopologySpec` is where a GPU sits: `gpus_per_node` in a server, `scale_up_gpus` sharing its
  scale-up fabric (the `link`: NVLink/NVSwitch, xGMI, or the node's PCIe switches), a whole
  number of nodes (8 = one HGX board, 72 = a GB200 NVL72 rack), and the scale-out NIC per GPU
  that joins domains (`nic_bytes_per_s` one direction, line rate / 8).
- PCIe bandwidth per direction = lanes x transfer rate x line-encoding efficiency / 8 (PCI-SIG
  base specifications: 8/16/32 GT/s with 128b/130b for gen 3/4/5; 64 GT/s with 242B/256B FLITs
  for gen 6). PCIe 4.0 x16 is 31.5 GB/s each way, not 16 (that is PCIe 3.0).

`get_gpu` accepts a catalog name, an alias (case, spaces and "_" ignored, e.g. the names
nvidia-smi prints), or the path of a user TOML file; the parsed catalog is cached, so a lookup
by name is a couple of dict reads.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Any

from tokenprobe.errors import ConfigError, SchemaError, UnknownHardwareError
from tokenprobe.files import names_a_file, parse_toml, read_toml
from tokenprobe.precision import DTYPES, get_dtype
from tokenprobe.units import BITS_PER_BYTE, GIGA, MEGA, MICRO, TERA, GiB, MiB

LINK_KINDS = ("nvlink3", "nvlink4", "nvlink5", "xgmi", "pcie3", "pcie4", "pcie5", "pcie6")
VENDORS = ("nvidia", "amd")
PCIE_LANE_COUNTS = (1, 2, 4, 8, 16)

# PCI-SIG: transfer rate per lane (GT/s) and the fraction of it that carries data.
_PCIE_GT_PER_S = {3: 8.0, 4: 16.0, 5: 32.0, 6: 64.0}
_PCIE_ENCODING = {3: 128 / 130, 4: 128 / 130, 5: 128 / 130, 6: 242 / 256}


def pcie_lane_bytes_per_s(gen: int) -> float:
    """Data bandwidth of one PCIe lane, one direction, bytes/s (gen3 0.985e9 ... gen6 7.56e9)."""
    if gen not in _PCIE_GT_PER_S:
        raise ConfigError("pcie_gen", gen, f"one of {sorted(_PCIE_GT_PER_S)}")
    return _PCIE_GT_PER_S[gen] * GIGA * _PCIE_ENCODING[gen] / BITS_PER_BYTE


# Collectives (all-reduce, all-to-all) between GPUs that only share PCIe go through PCIe
# switches and the CPU root complexes, so they reach a smaller share of the link than over
# NVLink: "on PCI systems, the performance you get is usually determined by the bandwidth your
# CPU and memory can deliver" (NCCL maintainer, NVIDIA/nccl#1639). 8x A100 SXM4 (NVLink3,
# 300 GB/s a direction) against A100 PCIe (PCIe 4, 31.5 GB/s): nominally 9.5x apart, measured
# 14-15x (UCL ARC, doi:10.5281/zenodo.20560283), so PCIe keeps 9.5 / 14.5 ≈ 0.66 of the share
# NVLink reaches. Point-to-point copies are not affected (P2P writes reach ~89 % of PCIe 5 on
# 8-GPU RTX PRO 6000 servers: github.com/voipmonitor/rtx6kpro, hardware/pcie-bandwidth.md).
PCIE_COLLECTIVE_FACTOR = 0.66


@dataclass(frozen=True, slots=True)
class LinkSpec:
    """GPU-to-GPU link of one GPU: `bytes_per_s` one direction, all links together."""

    kind: str
    bytes_per_s: float
    latency_s: float

    @property
    def collective_factor(self) -> float:
        """Share of the engine's link efficiency a collective keeps on this kind of link."""
        return PCIE_COLLECTIVE_FACTOR if self.kind.startswith("pcie") else 1.0

    @property
    def bidirectional_bytes_per_s(self) -> float:
        """Both directions summed: the datasheet headline (H100 NVLink 900 GB/s)."""
        return 2 * self.bytes_per_s


@dataclass(frozen=True, slots=True)
class TopologySpec:
    """Where a GPU sits (catalog `[<gpu>.topology]`): GPUs per server, GPUs per scale-up domain
    (those its `link` joins; a whole number of servers) and the scale-out NIC of each GPU that
    joins domains: `nic_bytes_per_s` one direction, `nic_latency_s` per inter-node step."""

    gpus_per_node: int
    scale_up_gpus: int
    nic_bytes_per_s: float
    nic_latency_s: float

    @property
    def rack_scale(self) -> bool:
        """The scale-up fabric spans servers (NVL72), so the node is not its boundary."""
        return self.scale_up_gpus > self.gpus_per_node


@dataclass(frozen=True, slots=True)
class GpuSpec:
    """One GPU model in SI units. See catalog/gpus.toml for the meaning and source of each."""

    name: str
    display_name: str
    vendor: str
    aliases: tuple[str, ...]
    peak_flop_per_s: Mapping[str, float]
    hbm_bytes: float
    hbm_bytes_per_s: float
    tdp_w: float
    idle_w: float
    link: LinkSpec
    pcie_gen: int
    pcie_lanes: int
    sources: tuple[str, ...]
    sm_clock_hz: float | None = None
    hbm_reported_bytes: float | None = None  # memory.total as nvidia-smi prints it
    cuda_total_bytes: float | None = None  # total of torch.cuda.mem_get_info (what vLLM sizes by)
    c2c_bytes_per_s: float | None = None  # CPU-GPU link replacing PCIe (GH200), one direction
    topology: TopologySpec | None = None  # None: a user file without [topology] (one domain)

    def __hash__(self) -> int:
        # The mapping field is not hashable; the name identifies a spec within a process.
        return hash((self.name, self.hbm_bytes, self.hbm_bytes_per_s, self.tdp_w))

    @property
    def pcie_bytes_per_s(self) -> float:
        """Host link bandwidth, one direction: lanes x per-lane rate (PCI-SIG)."""
        return self.pcie_lanes * pcie_lane_bytes_per_s(self.pcie_gen)

    @property
    def host_bytes_per_s(self) -> float:
        """CPU<->GPU bandwidth, one direction: NVLink-C2C where present, else PCIe."""
        return self.c2c_bytes_per_s if self.c2c_bytes_per_s is not None else self.pcie_bytes_per_s

    def peak_flop_per_s_for(self, dtype: str) -> float | None:
        """Dense tensor peak for a compute dtype (aliases such as "tf32" accepted); None if the
        GPU has no native support. An unknown dtype name raises ConfigError."""
        peak = self.peak_flop_per_s.get(dtype)
        if peak is not None:
            return peak
        return self.peak_flop_per_s.get(get_dtype(dtype).name)


@dataclass(frozen=True, slots=True)
class HostSpec:
    """The server around the GPUs, SI units (bytes, bytes/s). Source: catalog/hosts.toml."""

    name: str
    cpu_cores: int
    dram_bytes: float
    dram_bytes_per_s: float
    nvme_bytes_per_s: float
    nic_bytes_per_s: float
    sources: tuple[str, ...]
    display_name: str = ""
    # single-thread speed relative to the core cost/host.py's CPU costs describe (1.0); the
    # API-server front end runs on one core per process, so this, not the core count, sets how
    # many requests/s it parses. Optional in a host file (`cpu_core_speed`): measure it with
    # benchmarks/host_costs.py on the host and divide by the defaults.
    cpu_core_speed: float = 1.0
    # the server's power apart from its GPUs (CPUs, DRAM, NICs, NVSwitches, fans, PSU losses),
    # W, and the GPUs it holds; optional in a host file (`base_power_w`, `gpus`): cost.energy
    # charges a deployment base_power_w x its GPUs / gpus for as long as it runs
    base_power_w: float | None = None
    gpus: int | None = None


# ------------------------------------------------------------------------------------------
# Validation of one parsed TOML table
# ------------------------------------------------------------------------------------------

_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9.\-]*$")
_GPU_REQUIRED = (
    "display_name", "vendor", "peak_tflop_per_s", "hbm_gib", "hbm_gb_per_s", "tdp_w", "idle_w",
    "pcie_gen", "pcie_lanes", "link", "sources",
)  # fmt: skip
_GPU_OPTIONAL = (
    "aliases", "boost_clock_mhz", "memory_reported_mib", "cuda_total_gib",
    "c2c_gb_per_s_per_direction", "topology",
)  # fmt: skip
_LINK_KEYS = ("kind", "gb_per_s_per_direction", "latency_us")
_TOPOLOGY_KEYS = ("gpus_per_node", "scale_up_gpus", "nic_gbit_per_s", "nic_latency_us")
# GPUs in one server / one scale-up domain: far above any product (NVL576 is the largest
# NVLink domain announced), so only nonsense is refused.
_MAX_NODE_GPUS = 1 << 10
_MAX_SCALE_UP_GPUS = 1 << 16
# (lo, hi) of each number, in the file's units; lo is exclusive (> lo), hi inclusive. Wide on
# purpose: they catch a unit slip by 10^3+ and keep SI conversions finite, nothing finer.
_RANGES: dict[str, tuple[float, float]] = {
    "peak_tflop_per_s": (1e-6, 1e5),
    "hbm_gib": (1e-6, 1e5),
    "hbm_gb_per_s": (1e-3, 1e6),
    "tdp_w": (1e-3, 1e5),
    "idle_w": (0.0, 1e5),
    "gb_per_s_per_direction": (1e-6, 1e6),
    "latency_us": (1e-6, 1e7),
    "boost_clock_mhz": (1e-3, 1e6),
    "memory_reported_mib": (1e-3, 1e9),
    "cuda_total_gib": (1e-6, 1e5),
    "c2c_gb_per_s_per_direction": (1e-6, 1e6),
    "dram_gib": (1e-6, 1e8),
    "dram_gb_per_s": (1e-6, 1e6),
    "nvme_gb_per_s": (1e-6, 1e6),
    "nic_gbit_per_s": (1e-6, 1e7),
    "cpu_core_speed": (1e-3, 1e3),
    "base_power_w": (0.0, 1e6),
    "nic_latency_us": (1e-6, 1e7),
}
_MAX_CPU_CORES = 10**6
_HOST_KEYS = (
    "display_name", "cpu_cores", "dram_gib", "dram_gb_per_s", "nvme_gb_per_s", "nic_gbit_per_s",
    "sources",
)  # fmt: skip
_HOST_OPTIONAL = ("cpu_core_speed", "base_power_w", "gpus")


class _Table:
    """One TOML table with the file and the dotted path it came from, for error messages."""

    def __init__(self, data: Mapping[str, Any], origin: str, where: str) -> None:
        self.data = data
        self.origin = origin
        self.where = where

    def fail(self, key: str, problem: str) -> SchemaError:
        return SchemaError(self.origin, f"[{self.where}] {key}: {problem}")

    def check_keys(self, required: tuple[str, ...], optional: tuple[str, ...] = ()) -> None:
        unknown = sorted(set(self.data) - set(required) - set(optional))
        if unknown:
            allowed = ", ".join(required + optional)
            raise self.fail(unknown[0], f"unknown key; allowed keys: {allowed}")
        missing = [k for k in required if k not in self.data]
        if missing:
            raise self.fail(missing[0], "missing required key")

    def sub(self, key: str) -> _Table:
        value = self.data[key]
        if not isinstance(value, Mapping):
            raise self.fail(key, f"{value!r} is not a table")
        return _Table(value, self.origin, f"{self.where}.{key}".lstrip("."))

    def text(self, key: str, choices: tuple[str, ...] = ()) -> str:
        value = self.data[key]
        if not isinstance(value, str) or not value.strip():
            raise self.fail(key, f"{value!r} is not a non-empty string")
        if choices and value not in choices:
            raise self.fail(key, f"{value!r} is not one of {', '.join(choices)}")
        return value

    def texts(self, key: str, *, non_empty: bool) -> tuple[str, ...]:
        value = self.data[key]
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise self.fail(key, f"{value!r} is not a list of non-empty strings")
        if non_empty and not value:
            raise self.fail(key, "is empty; give at least one source")
        return tuple(value)

    def positive(self, key: str, range_key: str | None = None) -> float:
        """A finite number in its `_RANGES` range (> 0 where no range is listed)."""
        value = self.data[key]
        lo, hi = _RANGES.get(range_key or key, (0.0, math.inf))
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        if not ok or not math.isfinite(value) or not lo < value <= hi:
            raise self.fail(key, f"{value!r} is not a finite number > {lo:g} and <= {hi:g}")
        return float(value)

    def optional_positive(self, key: str) -> float | None:
        return self.positive(key) if key in self.data else None

    def count(self, key: str, hi: int) -> int:
        value = self.data[key]
        if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= hi:
            raise self.fail(key, f"{value!r} is not an integer > 0 and <= {hi}")
        return value

    def integer(self, key: str, choices: tuple[int, ...]) -> int:
        value = self.data[key]
        if isinstance(value, bool) or not isinstance(value, int) or value not in choices:
            raise self.fail(key, f"{value!r} is not one of {', '.join(map(str, choices))}")
        return value


def _parse_peaks(table: _Table) -> Mapping[str, float]:
    peaks: dict[str, float] = {}
    for dtype in table.data:
        if dtype not in DTYPES:
            raise table.fail(dtype, f"unknown dtype; allowed: {', '.join(DTYPES)}")
        peaks[dtype] = table.positive(dtype, "peak_tflop_per_s") * TERA
    if not peaks:
        raise table.fail("peak_tflop_per_s", "is empty; give at least one dtype")
    return MappingProxyType(peaks)


def _parse_link(table: _Table) -> LinkSpec:
    table.check_keys(_LINK_KEYS)
    return LinkSpec(
        kind=table.text("kind", LINK_KINDS),
        bytes_per_s=table.positive("gb_per_s_per_direction") * GIGA,
        latency_s=table.positive("latency_us") * MICRO,
    )


def _parse_topology(table: _Table) -> TopologySpec:
    table.check_keys(_TOPOLOGY_KEYS)
    per_node = table.count("gpus_per_node", _MAX_NODE_GPUS)
    scale_up = table.count("scale_up_gpus", _MAX_SCALE_UP_GPUS)
    if scale_up % per_node:
        # the NIC is priced only between domains, so a domain is a whole number of servers
        raise table.fail(
            "scale_up_gpus", f"{scale_up} is not a multiple of gpus_per_node={per_node}"
        )
    return TopologySpec(
        gpus_per_node=per_node,
        scale_up_gpus=scale_up,
        nic_bytes_per_s=table.positive("nic_gbit_per_s") * GIGA / BITS_PER_BYTE,
        nic_latency_s=table.positive("nic_latency_us") * MICRO,
    )


def _scaled(value: float | None, factor: float) -> float | None:
    return None if value is None else value * factor


def _parse_gpu(table: _Table, name: str) -> GpuSpec:
    if not _NAME_RE.match(name):
        raise table.fail("name", f"{name!r} must be lower case letters, digits, '.' or '-'")
    table.check_keys(_GPU_REQUIRED, _GPU_OPTIONAL)
    tdp_w, idle_w = table.positive("tdp_w"), table.positive("idle_w")
    if idle_w >= tdp_w:
        raise table.fail("idle_w", f"{idle_w!r} is not below tdp_w={tdp_w!r}")
    return GpuSpec(
        name=name,
        display_name=table.text("display_name"),
        vendor=table.text("vendor", VENDORS),
        aliases=table.texts("aliases", non_empty=False) if "aliases" in table.data else (),
        peak_flop_per_s=_parse_peaks(table.sub("peak_tflop_per_s")),
        hbm_bytes=table.positive("hbm_gib") * GiB,
        hbm_bytes_per_s=table.positive("hbm_gb_per_s") * GIGA,
        tdp_w=tdp_w,
        idle_w=idle_w,
        link=_parse_link(table.sub("link")),
        pcie_gen=table.integer("pcie_gen", tuple(_PCIE_GT_PER_S)),
        pcie_lanes=table.integer("pcie_lanes", PCIE_LANE_COUNTS),
        sources=table.texts("sources", non_empty=True),
        sm_clock_hz=_scaled(table.optional_positive("boost_clock_mhz"), MEGA),
        hbm_reported_bytes=_scaled(table.optional_positive("memory_reported_mib"), MiB),
        cuda_total_bytes=_scaled(table.optional_positive("cuda_total_gib"), GiB),
        c2c_bytes_per_s=_scaled(table.optional_positive("c2c_gb_per_s_per_direction"), GIGA),
        topology=_parse_topology(table.sub("topology")) if "topology" in table.data else None,
    )


def _parse_host(table: _Table, name: str) -> HostSpec:
    table.check_keys(_HOST_KEYS, _HOST_OPTIONAL)
    speed = table.optional_positive("cpu_core_speed")
    base_w = table.optional_positive("base_power_w")
    gpus = table.count("gpus", _MAX_NODE_GPUS) if "gpus" in table.data else None
    if (base_w is None) != (gpus is None):
        raise table.fail("base_power_w", "give base_power_w and gpus together")
    return HostSpec(
        name=name,
        cpu_cores=table.count("cpu_cores", _MAX_CPU_CORES),
        dram_bytes=table.positive("dram_gib") * GiB,
        dram_bytes_per_s=table.positive("dram_gb_per_s") * GIGA,
        nvme_bytes_per_s=table.positive("nvme_gb_per_s") * GIGA,
        nic_bytes_per_s=table.positive("nic_gbit_per_s") * GIGA / BITS_PER_BYTE,
        sources=table.texts("sources", non_empty=True),
        display_name=table.text("display_name"),
        cpu_core_speed=1.0 if speed is None else speed,
        base_power_w=base_w,
        gpus=gpus,
    )


def _tables(doc: Mapping[str, Any], origin: str) -> list[tuple[str, _Table]]:
    root = _Table(doc, origin, "")
    if not doc:
        raise SchemaError(origin, "holds no entries")
    return [(name, root.sub(name)) for name in doc]


# ------------------------------------------------------------------------------------------
# Catalog and lookup
# ------------------------------------------------------------------------------------------


def _normalize(name: str) -> str:
    """Lookup key: lower case, runs of spaces/underscores as '-'."""
    return re.sub(r"[\s_]+", "-", name.strip().lower())


_VENDOR_PREFIXES = ("nvidia-", "amd-")


@dataclass(frozen=True, slots=True)
class _Index:
    gpus: dict[str, GpuSpec]
    keys: dict[str, str]  # normalized name or alias -> name


def _build_index(gpus: list[GpuSpec], origin: str, taken: Mapping[str, str]) -> _Index:
    keys: dict[str, str] = {}
    for gpu in gpus:
        for key in (gpu.name, *map(_normalize, gpu.aliases)):
            owner = keys.get(key) or taken.get(key)
            if owner is not None and owner != gpu.name:
                raise SchemaError(origin, f"[{gpu.name}] name or alias {key!r} is taken by {owner}")
            keys[key] = gpu.name
    return _Index({g.name: g for g in gpus}, keys)


def _catalog_text(filename: str) -> str:
    return resources.files("tokenprobe").joinpath("catalog", filename).read_text("utf-8")


@functools.cache
def _catalog() -> _Index:
    origin = "tokenprobe/catalog/gpus.toml"
    doc = parse_toml(_catalog_text("gpus.toml"), origin)
    gpus = [_parse_gpu(table, name) for name, table in _tables(doc, origin)]
    return _build_index(gpus, origin, {})


@functools.cache
def _hosts() -> dict[str, HostSpec]:
    origin = "tokenprobe/catalog/hosts.toml"
    doc = parse_toml(_catalog_text("hosts.toml"), origin)
    return {name: _parse_host(table, name) for name, table in _tables(doc, origin)}


# GPUs loaded from user files in this process (load_hardware_file), and their lookup keys.
_USER_GPUS: dict[str, GpuSpec] = {}
_USER_KEYS: dict[str, str] = {}


def _lookup(key: str) -> GpuSpec | None:
    catalog = _catalog()
    for candidate in (key, *(key[len(p) :] for p in _VENDOR_PREFIXES if key.startswith(p))):
        name = catalog.keys.get(candidate)
        if name is not None:
            return catalog.gpus[name]
        name = _USER_KEYS.get(candidate)
        if name is not None:
            return _USER_GPUS[name]
    return None


def gpu_names() -> list[str]:
    """Catalog names, then the names of GPUs loaded from user files in this process."""
    return [*_catalog().gpus, *_USER_GPUS]


def _hint_names(key: str) -> list[str]:
    """Candidates for the 'closest known' hint: names and short aliases (not the long
    nvidia-smi strings); only those that start with what was typed, when there are any."""
    short = [k for k in (*_catalog().keys, *_USER_KEYS) if k.count("-") <= 2]
    known = list(dict.fromkeys([*gpu_names(), *short]))
    return [k for k in known if k.startswith(key)] or known


def get_gpu(name: str) -> GpuSpec:
    """A GPU by catalog name or alias (case-insensitive), or from a user TOML file path.

    Unknown names raise UnknownHardwareError with the closest known names.
    """
    spec = _catalog().gpus.get(name) or _lookup(_normalize(name))
    if spec is not None:
        return spec
    if name.endswith(".toml") or names_a_file(name):
        return _single_gpu_from_file(name)
    raise UnknownHardwareError(name, _hint_names(_normalize(name)))


def _single_gpu_from_file(path: str) -> GpuSpec:
    gpus = load_hardware_file(path)
    if len(gpus) != 1:
        names = ", ".join(g.name for g in gpus)
        raise ConfigError("gpu", path, f"file holds {len(gpus)} GPUs ({names}); name one of them")
    return gpus[0]


def load_hardware_file(path: str | Path) -> list[GpuSpec]:
    """Load user GPUs (same schema as catalog/gpus.toml) and make them known to get_gpu.

    A name or alias that is already in the catalog is rejected; loading a file again replaces
    the GPUs it defined before.
    """
    origin = str(path)
    doc = read_toml(path)
    gpus = [_parse_gpu(table, name) for name, table in _tables(doc, origin)]
    reloaded = {g.name for g in gpus}
    taken = {k: f"the catalog entry {v}" for k, v in _catalog().keys.items()}
    taken |= {k: v for k, v in _USER_KEYS.items() if v not in reloaded}
    index = _build_index(gpus, origin, taken)
    for key in [k for k, v in _USER_KEYS.items() if v in reloaded]:
        del _USER_KEYS[key]
    _USER_GPUS.update(index.gpus)
    _USER_KEYS.update(index.keys)
    return gpus


def host_names() -> list[str]:
    return list(_hosts())


def get_host(name: str = "default") -> HostSpec:
    """A host from catalog/hosts.toml by name (case-insensitive), or the one host of a user TOML
    file (same schema as catalog/hosts.toml) given by its path."""
    host = _hosts().get(_normalize(name))
    if host is not None:
        return host
    if name.endswith(".toml") or names_a_file(name):
        hosts = load_host_file(name)
        if len(hosts) != 1:
            names = ", ".join(h.name for h in hosts)
            raise ConfigError("host", name, f"file holds {len(hosts)} hosts ({names}); want one")
        return hosts[0]
    raise ConfigError("host", name, f"one of {', '.join(host_names())}, or a host .toml file")


def load_host_file(path: str | Path) -> list[HostSpec]:
    """Hosts of a user TOML file in the schema of catalog/hosts.toml (not added to the catalog)."""
    origin = str(path)
    doc = read_toml(path)
    return [_parse_host(table, name) for name, table in _tables(doc, origin)]

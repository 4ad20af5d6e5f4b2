"""The hardware catalog (requirement E2): datasheet figures in SI units, the seeds' worked
transfer times, lookup by name/alias/file, and clear errors for bad input.

Reference values are the vendors' datasheets (dense tensor figures; the sparse headlines halved)
and PCI-SIG's lane rates; each test names the figure it checks.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from tokenprobe import hardware
from tokenprobe.errors import ConfigError, SchemaError, UnknownHardwareError
from tokenprobe.hardware import (
    LINK_KINDS,
    GpuSpec,
    get_gpu,
    get_host,
    gpu_names,
    host_names,
    load_hardware_file,
    pcie_lane_bytes_per_s,
)
from tokenprobe.precision import DTYPES
from tokenprobe.units import GIGA, MICRO, MILLI, TERA, GiB

DATA = Path(__file__).parent / "data" / "hardware"
MY_GPU = DATA / "my_gpu.toml"

REQUIRED = (
    "a100-sxm-40gb", "a100-sxm-80gb", "a100-pcie-80gb", "h100-sxm", "h100-pcie", "h200",
    "gh200", "b200", "l40s", "l4", "a10g", "rtx-4090", "mi300x",
)  # fmt: skip


@pytest.fixture(autouse=True)
def _fresh_user_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """GPUs loaded from user files are process-wide; give every test an empty registry."""
    monkeypatch.setattr(hardware, "_USER_GPUS", {})
    monkeypatch.setattr(hardware, "_USER_KEYS", {})


def _catalog() -> list[GpuSpec]:
    return [get_gpu(name) for name in gpu_names()]


# --- datasheet figures -------------------------------------------------------------------------


def test_catalog_has_the_gpus_issue_2_asks_for() -> None:
    assert set(REQUIRED) <= set(gpu_names())


def test_h100_sxm_matches_the_hopper_datasheet() -> None:
    gpu = get_gpu("h100-sxm")
    # Dense tensor peaks (datasheet sparse 989 / 1,979 / 3,958 halved; whitepaper 494.7 ...).
    assert gpu.peak_flop_per_s["fp32"] == pytest.approx(494.7 * TERA)
    assert gpu.peak_flop_per_s["bf16"] == pytest.approx(989.4 * TERA)
    assert gpu.peak_flop_per_s["fp8"] == pytest.approx(1978.9 * TERA)
    assert gpu.peak_flop_per_s["int8"] == pytest.approx(1978.9 * TERA)
    assert gpu.hbm_bytes_per_s == pytest.approx(3.35 * TERA)
    assert gpu.hbm_bytes == 80 * GiB
    assert gpu.tdp_w == 700
    assert gpu.link.kind == "nvlink4"
    assert gpu.link.bytes_per_s == pytest.approx(450 * GIGA)  # one direction
    assert gpu.link.bidirectional_bytes_per_s == pytest.approx(900 * GIGA)  # the headline
    assert (gpu.pcie_gen, gpu.pcie_lanes) == (5, 16)


def test_a100_sxm_80gb_matches_the_ampere_datasheet_and_has_no_fp8() -> None:
    gpu = get_gpu("a100-sxm-80gb")
    assert gpu.peak_flop_per_s["bf16"] == pytest.approx(312 * TERA)
    assert gpu.peak_flop_per_s["fp32"] == pytest.approx(156 * TERA)
    assert gpu.peak_flop_per_s["int8"] == pytest.approx(624 * TERA)
    assert gpu.peak_flop_per_s_for("fp8") is None
    assert gpu.hbm_bytes_per_s == pytest.approx(2039 * GIGA)
    assert gpu.tdp_w == 400
    assert gpu.link.bidirectional_bytes_per_s == pytest.approx(600 * GIGA)
    assert gpu.pcie_gen == 4


def test_h200_is_an_h100_sxm_with_more_and_faster_memory() -> None:
    h100, h200 = get_gpu("h100-sxm"), get_gpu("h200")
    assert dict(h200.peak_flop_per_s) == dict(h100.peak_flop_per_s)
    assert h200.hbm_bytes == 141 * GiB
    assert h200.hbm_bytes_per_s == pytest.approx(4.8 * TERA)
    assert h200.tdp_w == 700


def test_mi300x_matches_the_amd_datasheet() -> None:
    gpu = get_gpu("mi300x")
    assert gpu.vendor == "amd"
    assert gpu.peak_flop_per_s["bf16"] == pytest.approx(1307.4 * TERA)
    assert gpu.peak_flop_per_s["fp8"] == pytest.approx(2614.9 * TERA)
    assert gpu.hbm_bytes == 192 * GiB
    assert gpu.hbm_bytes_per_s == pytest.approx(5.3 * TERA)
    assert gpu.tdp_w == 750
    # 7 Infinity Fabric links x 128 GB/s (both directions) = 896 GB/s aggregate.
    assert gpu.link.bidirectional_bytes_per_s == pytest.approx(896 * GIGA)


def test_rtx_4090_uses_the_fp32_accumulate_tensor_rate() -> None:
    """Ada whitepaper: FP16 tensor 330.3 TFLOP/s with fp16 accumulate, 165.2 with fp32
    accumulate (what bf16/fp16 GEMMs in LLM inference use), FP8 330.3 with fp32 accumulate."""
    gpu = get_gpu("rtx-4090")
    assert gpu.peak_flop_per_s["bf16"] == pytest.approx(165.2 * TERA)
    assert gpu.peak_flop_per_s["fp8"] == pytest.approx(330.3 * TERA)


def test_b200_has_native_fp4_at_twice_its_fp8_rate() -> None:
    gpu = get_gpu("b200")
    assert gpu.peak_flop_per_s["fp4"] == pytest.approx(2 * gpu.peak_flop_per_s["fp8"])
    assert gpu.peak_flop_per_s["fp8"] == pytest.approx(4500 * TERA)
    assert gpu.link.bidirectional_bytes_per_s == pytest.approx(1800 * GIGA)


def test_t4_matches_the_turing_datasheet_and_has_no_bf16() -> None:
    """T4 datasheet: mixed precision (FP16/FP32) 65 TFLOPS, INT8 130 TOPS, single precision 8.1
    TFLOPS (CUDA cores: no TF32 on Turing), 16 GB GDDR6 320+ GB/s, 70 W, x16 PCIe Gen3, no
    NVLink. No bf16: a bf16 model computes in fp16 on it."""
    gpu = get_gpu("t4")
    assert gpu.peak_flop_per_s["fp16"] == pytest.approx(65 * TERA)
    assert gpu.peak_flop_per_s["int8"] == pytest.approx(130 * TERA)
    assert gpu.peak_flop_per_s["fp32"] == pytest.approx(8.1 * TERA)
    for dtype in ("bf16", "fp8", "fp4"):
        assert gpu.peak_flop_per_s_for(dtype) is None
    assert gpu.hbm_bytes == 16 * GiB
    assert gpu.hbm_bytes_per_s == pytest.approx(320 * GIGA)
    assert (gpu.tdp_w, gpu.idle_w) == (70, 27)
    assert (gpu.pcie_gen, gpu.pcie_lanes) == (3, 16)
    assert gpu.link.kind == "pcie3"
    assert gpu.pcie_bytes_per_s == pytest.approx(15.75 * GIGA, rel=0.001)  # 8 GT/s x16 128b/130b
    # what nvidia-smi and dcgm-exporter print as the model name
    assert get_gpu("Tesla T4") is gpu and get_gpu("NVIDIA T4") is gpu


def test_gh200_host_traffic_uses_nvlink_c2c_not_pcie() -> None:
    gpu = get_gpu("gh200")
    assert gpu.host_bytes_per_s == pytest.approx(450 * GIGA)
    assert gpu.host_bytes_per_s > 7 * gpu.pcie_bytes_per_s
    assert get_gpu("h100-sxm").host_bytes_per_s == get_gpu("h100-sxm").pcie_bytes_per_s


# --- seed figures and PCIe ----------------------------------------------------------------------


def test_seed_20_gb_over_pcie5_x16_takes_about_156_ms() -> None:
    """Seed 004: 20 GB over PCIe (128 GB/s) ~150-156 ms. 128 GB/s is the gen5 x16 headline, both
    directions, before 128b/130b encoding; with it, 126 GB/s and 159 ms (2% from the seed)."""
    bidirectional_bytes_per_s = 2 * get_gpu("h100-pcie").pcie_bytes_per_s
    assert bidirectional_bytes_per_s == pytest.approx(128 * GIGA, rel=0.02)
    assert 20 * GIGA / bidirectional_bytes_per_s == pytest.approx(156 * MILLI, rel=0.02)


def test_seed_20_gb_over_nvlink4_takes_about_22_ms() -> None:
    link = get_gpu("h100-sxm").link
    assert 20 * GIGA / link.bidirectional_bytes_per_s == pytest.approx(22 * MILLI, rel=0.02)


def test_pcie4_x16_is_31_5_gb_per_s_per_direction_not_16() -> None:
    """Seed 000 says PCIe 4.0 x16 is ~16 GB/s one way; that is PCIe 3.0. PCI-SIG 4.0: 16 GT/s
    per lane, 128b/130b -> 1.969 GB/s per lane, 31.5 GB/s for x16."""
    assert get_gpu("a100-pcie-80gb").pcie_bytes_per_s == pytest.approx(31.5 * GIGA, rel=0.001)


@pytest.mark.parametrize(
    ("gen", "gb_per_s"), [(3, 0.985), (4, 1.969), (5, 3.938), (6, 7.563)]
)  # fmt: skip
def test_pcie_lane_rates_follow_pci_sig(gen: int, gb_per_s: float) -> None:
    assert pcie_lane_bytes_per_s(gen) == pytest.approx(gb_per_s * GIGA, rel=0.001)


def test_unknown_pcie_generation_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="pcie_gen"):
        pcie_lane_bytes_per_s(7)


# --- every entry -------------------------------------------------------------------------------


@pytest.mark.parametrize("gpu", _catalog(), ids=lambda g: g.name)
def test_every_entry_is_cited_finite_and_consistent(gpu: GpuSpec) -> None:
    assert gpu.sources and all(s.strip() for s in gpu.sources)
    numbers = [gpu.hbm_bytes, gpu.hbm_bytes_per_s, gpu.tdp_w, gpu.idle_w, gpu.link.bytes_per_s]
    numbers += [gpu.link.latency_s, gpu.pcie_bytes_per_s, *gpu.peak_flop_per_s.values()]
    assert all(math.isfinite(x) and x > 0 for x in numbers)
    # idle is the smaller part of the board power (L4: 18 of 72 W; the T4's 27 of 70 W in P0, read
    # from public nvidia-smi outputs, is the largest share in the catalog)
    assert gpu.idle_w < gpu.tdp_w / 2
    assert set(gpu.peak_flop_per_s) <= set(DTYPES)
    assert gpu.link.kind in LINK_KINDS
    assert 1 * MICRO <= gpu.link.latency_s <= 100 * MICRO


@pytest.mark.parametrize("gpu", _catalog(), ids=lambda g: g.name)
def test_lower_precision_is_never_slower(gpu: GpuSpec) -> None:
    """fp4 >= fp8 >= 16-bit float (bf16, or fp16 on Turing, which has no bf16) >= fp32 (TF32, or
    the CUDA-core rate on Turing) where present: each halving of the operand width at least keeps
    the tensor rate. Every GPU has a 16-bit float format."""
    half = "bf16" if "bf16" in gpu.peak_flop_per_s else "fp16"
    ladder = [
        gpu.peak_flop_per_s[d] for d in ("fp4", "fp8", half, "fp32") if d in gpu.peak_flop_per_s
    ]
    assert half in gpu.peak_flop_per_s
    assert ladder == sorted(ladder, reverse=True)


@pytest.mark.parametrize("gpu", _catalog(), ids=lambda g: g.name)
def test_pcie_links_run_at_the_pcie_rate(gpu: GpuSpec) -> None:
    if gpu.link.kind.startswith("pcie"):
        assert gpu.link.kind == f"pcie{gpu.pcie_gen}"
        assert gpu.link.bytes_per_s == pytest.approx(gpu.pcie_bytes_per_s, rel=0.01)
    else:  # NVLink / xGMI are there because they beat the host link
        assert gpu.link.bytes_per_s > gpu.pcie_bytes_per_s


@pytest.mark.parametrize("gpu", _catalog(), ids=lambda g: g.name)
def test_reported_memory_is_the_sold_capacity_less_a_small_carve_out(gpu: GpuSpec) -> None:
    """nvidia-smi's memory.total is at most the sold GiB and at most 7% below it (ECC on GDDR6
    takes 1/16); a sold "80GB" read as 80e9 bytes would fail this for the HBM parts."""
    if gpu.hbm_reported_bytes is not None:
        assert 0.93 * gpu.hbm_bytes <= gpu.hbm_reported_bytes <= gpu.hbm_bytes
    if gpu.cuda_total_bytes is not None:  # CUDA's total: below nvidia-smi's (driver reserve)
        assert gpu.hbm_reported_bytes is not None
        assert 0.99 * gpu.hbm_reported_bytes <= gpu.cuda_total_bytes < gpu.hbm_reported_bytes


# --- lookup ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("typed", "name"),
    [
        ("H100", "h100-sxm"),
        ("h100-sxm5", "h100-sxm"),
        ("NVIDIA H100 80GB HBM3", "h100-sxm"),  # nvidia-smi
        ("nvidia_h100_80gb_hbm3", "h100-sxm"),
        ("H100-SXM-80GB", "h100-sxm"),  # validation CSVs
        ("H100-HBM3-80GB", "h100-sxm"),
        ("A100-SXM4-80GB", "a100-sxm-80gb"),
        ("NVIDIA A100-SXM4-40GB", "a100-sxm-40gb"),
        ("A100-PCIE-80GB", "a100-pcie-80gb"),
        ("H200-SXM-141GB", "h200"),
        ("L40S-48GB", "l40s"),
        ("GH200", "gh200"),
        ("NVIDIA GH200 480GB", "gh200"),
        ("NVIDIA GeForce RTX 4090", "rtx-4090"),
        ("AMD Instinct MI300X", "mi300x"),
        ("  B200 ", "b200"),
    ],
)
def test_lookup_by_alias_ignores_case_spaces_and_underscores(typed: str, name: str) -> None:
    assert get_gpu(typed).name == name


def test_lookup_returns_the_cached_spec() -> None:
    assert get_gpu("H100") is get_gpu("h100-sxm")
    assert {get_gpu("h100-sxm"): 1}[get_gpu("h100")] == 1  # hashable: usable as a cache key


def test_unknown_gpu_lists_close_names() -> None:
    with pytest.raises(UnknownHardwareError, match="h100") as info:
        get_gpu("h1000")
    assert isinstance(info.value, ConfigError)
    assert "h1000" in str(info.value)


def test_ambiguous_a100_suggests_the_a100_variants() -> None:
    with pytest.raises(UnknownHardwareError) as info:
        get_gpu("A100")
    assert "a100-sxm" in str(info.value) and "a100-pcie" in str(info.value)


def test_peak_lookup_accepts_dtype_aliases_and_rejects_unknown_dtypes() -> None:
    gpu = get_gpu("h100-sxm")
    assert gpu.peak_flop_per_s_for("tf32") == gpu.peak_flop_per_s["fp32"]
    assert gpu.peak_flop_per_s_for("bfloat16") == gpu.peak_flop_per_s["bf16"]
    assert gpu.peak_flop_per_s_for("fp4") is None
    with pytest.raises(ConfigError, match="fp7"):
        gpu.peak_flop_per_s_for("fp7")


# --- user hardware files -----------------------------------------------------------------------


def test_user_file_loads_in_si_units_and_becomes_known() -> None:
    [gpu] = load_hardware_file(MY_GPU)
    assert gpu.name == "test-accel-1"
    assert gpu.peak_flop_per_s["bf16"] == pytest.approx(500 * TERA)
    assert gpu.hbm_bytes == 64 * GiB
    assert gpu.hbm_bytes_per_s == pytest.approx(2500 * GIGA)
    assert gpu.link.bytes_per_s == pytest.approx(200 * GIGA)
    assert gpu.link.latency_s == pytest.approx(9 * MICRO)
    assert gpu.sm_clock_hz == pytest.approx(1.5 * GIGA)
    assert get_gpu("test-accel-1") is gpu
    assert get_gpu("TA1") is gpu and get_gpu("test accel one") is gpu
    assert "test-accel-1" in gpu_names()


def test_get_gpu_accepts_a_path_to_a_one_gpu_file() -> None:
    assert get_gpu(str(MY_GPU)).name == "test-accel-1"
    assert get_gpu("test-accel-1").name == "test-accel-1"


def test_get_gpu_on_a_file_with_two_gpus_asks_which() -> None:
    with pytest.raises(ConfigError, match="test-pair-a, test-pair-b"):
        get_gpu(str(DATA / "two_gpus.toml"))
    assert get_gpu("test-pair-b").pcie_bytes_per_s == pytest.approx(8 * 1.969 * GIGA, rel=0.001)


def test_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"nope\.toml"):
        get_gpu(str(tmp_path / "nope.toml"))


def _variant(tmp_path: Path, old: str, new: str) -> Path:
    text = MY_GPU.read_text()
    assert old in text
    path = tmp_path / "variant.toml"
    path.write_text(text.replace(old, new))
    return path


@pytest.mark.parametrize(
    ("old", "new", "named"),
    [
        ("hbm_gib = 64", "hbm_gib = 64\nhbm_tb = 1", ["hbm_tb", "unknown key"]),
        ("direction = 200", "direction = -5", ["gb_per_s_per_direction", "-5"]),
        ("hbm_gb_per_s = 2500", "hbm_gb_per_s = nan", ["hbm_gb_per_s", "nan"]),
        ("fp8 = 1000", "fp7 = 1000", ["fp7", "unknown dtype"]),
        ("tdp_w = 500\n", "", ["tdp_w", "missing"]),
        ('kind = "nvlink4"', 'kind = "carrier-pigeon"', ["kind", "carrier-pigeon"]),
        ("pcie_gen = 5", "pcie_gen = 7", ["pcie_gen", "7"]),
        ("idle_w = 50", "idle_w = 600", ["idle_w", "600"]),
        ('vendor = "nvidia"', 'vendor = "acme"', ["vendor", "acme"]),
        ("sources = [\"made up for the tests\"]", "sources = []", ["sources", "empty"]),
        ("test-accel-1", "h100-sxm", ["h100-sxm", "taken"]),
        ('"TA1"', '"H100"', ["h100", "taken"]),
        ("[test-accel-1]", '["Test Accel"]', ["Test Accel", "lower case"]),
        ("hbm_gib = 64", "hbm_gib = = 64", ["not valid TOML"]),
        ("hbm_gib = 64", "hbm_gib = 64\ncuda_total_gib = 0", ["cuda_total_gib", "0"]),
    ],
)  # fmt: skip
def test_bad_user_file_names_the_key_and_value(
    tmp_path: Path, old: str, new: str, named: list[str]
) -> None:
    path = _variant(tmp_path, old, new)
    with pytest.raises(SchemaError) as info:
        load_hardware_file(path)
    message = str(info.value)
    assert str(path) in message
    for part in named:
        assert part in message
    assert "test-accel-1" not in gpu_names()  # nothing half-registered


def test_reloading_a_file_replaces_its_gpus(tmp_path: Path) -> None:
    load_hardware_file(MY_GPU)
    path = _variant(tmp_path, "bf16 = 500", "bf16 = 400")
    [gpu] = load_hardware_file(path)
    assert get_gpu("TA1") is gpu
    assert gpu.peak_flop_per_s["bf16"] == pytest.approx(400 * TERA)


# --- hosts -------------------------------------------------------------------------------------


def test_default_host_is_a_two_socket_ddr5_server() -> None:
    host = get_host()
    assert host.name == "default"
    assert host.cpu_cores == 64
    # 2 sockets x 8 channels x 4800 MT/s x 8 bytes
    assert host.dram_bytes_per_s == pytest.approx(2 * 8 * 4800e6 * 8)
    assert host.nic_bytes_per_s == pytest.approx(100 * GIGA / 8)  # 100 GbE


def test_named_hosts_and_their_figures() -> None:
    assert {"default", "dgx-h100", "gh200-grace"} <= set(host_names())
    assert get_host("DGX-H100").cpu_cores == 112
    grace = get_host("gh200-grace")
    assert (grace.cpu_cores, grace.dram_bytes_per_s) == (72, pytest.approx(512 * GIGA))
    for name in host_names():
        host = get_host(name)
        assert host.sources
        values = [
            host.dram_bytes,
            host.dram_bytes_per_s,
            host.nvme_bytes_per_s,
            host.nic_bytes_per_s,
        ]
        assert all(math.isfinite(v) and v > 0 for v in values)


def test_unknown_host_lists_the_known_ones() -> None:
    with pytest.raises(ConfigError, match="dgx-h100"):
        get_host("dgx-h1000")

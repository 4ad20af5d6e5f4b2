"""The local-GPU profiler behind `tokenprobe profile` (requirement M4). PyTorch is optional.

It builds a random-weight decoder of the model's architecture (shapes from the ModelSpec, no
weights downloaded) directly on the GPU and times, with CUDA events, plain eager PyTorch:
- prefill: one forward of `batch` x L new tokens (causal SDPA, LM head on the last position),
  for each L in `prefill_lengths` (batch 1);
- decode: one step of `batch` sequences at context C (SDPA of one query over C cached keys per
  sequence, GQA), for each batch x context that fits in free memory;
and reads the NVML energy counter around each timed loop (power = ΔE / Δt, energy per step).
Peak memory is `torch.cuda.max_memory_allocated`.

What it writes is a run folder `calibrate` reads: config.json (records.py format, kind
"measured"), `profile.csv` (one row per point in the shared/validation schema, source_id
`tokenprobe_profile`, engine `pytorch-eager`) and summary.json. Eager PyTorch is not a serving
engine: its fitted profile describes kernels plus launch overhead on this GPU (no CUDA graphs),
which is what `estimate --profile` needs to be checked against a real device.

Only dense models (MHA/GQA/MQA, full or sliding attention treated as full) are built; MoE and
MLA architectures raise ConfigError.
"""

from __future__ import annotations

import csv
import functools
import importlib
import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tokenprobe.errors import ConfigError, TelemetryError
from tokenprobe.hardware import get_gpu
from tokenprobe.model import Gqa, ModelSpec, get_model
from tokenprobe.records import RunWriter
from tokenprobe.units import MILLI, now_s

PROFILE_CSV = "profile.csv"
SOURCE_ID = "tokenprobe_profile"
ENGINE = "pytorch-eager"
TORCH_DTYPES = {"bf16": "bfloat16", "fp16": "float16"}
CSV_COLUMNS = (
    "source_id", "source_ref", "engine", "engine_version", "model", "model_hf_id", "arch",
    "weight_precision", "kv_cache_precision", "gpu", "gpu_count", "tp", "pp", "workload_type",
    "batch_size", "isl", "osl", "ttft_ms_mean", "itl_ms_mean", "power_W_total",
    "energy_J_per_output_token", "energy_J_per_request", "notes",
)  # fmt: skip
MIN_TIMED_S = 0.3  # time each point at least this long, so the energy counter moves enough


def gpu_unavailable_reason() -> str | None:
    """None when a CUDA GPU is usable from PyTorch, else one line saying why not."""
    try:
        torch = importlib.import_module("torch")
    except ImportError:
        return (
            "PyTorch is not installed; `pip install 'tokenprobe[profile]'` on a machine with a GPU"
        )
    if not torch.cuda.is_available():
        return "no CUDA GPU is visible to PyTorch: `tokenprobe profile` needs an NVIDIA GPU"
    return None


@dataclass(frozen=True)
class ProfileSpec:
    model: str
    dtype: str = "bf16"
    batches: tuple[int, ...] = (1, 8, 32, 128)
    contexts: tuple[int, ...] = (512, 2048, 8192)
    prefill_lengths: tuple[int, ...] = (128, 512, 2048, 8192)
    gpu: str | None = None  # catalog name; default: the device's name looked up in the catalog
    warmup: int = 2
    min_repeats: int = 5

    def __post_init__(self) -> None:
        if self.dtype not in TORCH_DTYPES:
            raise ConfigError("dtype", self.dtype, f"one of {', '.join(TORCH_DTYPES)}")
        for name in ("batches", "contexts", "prefill_lengths"):
            values = getattr(self, name)
            if not values or any(not isinstance(v, int) or v < 1 for v in values):
                raise ConfigError(name, values, "one or more positive integers")


@dataclass
class Point:
    kind: str  # "prefill" or "decode"
    batch: int
    tokens: int  # prompt length (prefill) or context (decode)
    time_s: float
    power_w: float | None
    energy_j: float | None  # per step, this GPU


@dataclass
class ProfileRun:
    spec: ProfileSpec
    gpu: str
    device_name: str
    torch_version: str
    points: list[Point] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    peak_memory_bytes: int = 0


def check_model(model: ModelSpec) -> None:
    # every layer an attention + MLP decoder layer (hybrids' recurrent or MLP-only layers are not)
    plain = all(isinstance(layer.mixer, Gqa) and layer.ffn is not None for layer in model.layers)
    if model.moe is not None or model.mla is not None or not plain:
        raise ConfigError(
            "model", model.name, "the profiler builds dense MHA/GQA models only (no MoE, no MLA)"
        )


# ------------------------------------------------------------------------------ the model


class _Decoder:
    """Random weights of `model` on the GPU and a functional forward pass."""

    def __init__(self, torch: Any, model: ModelSpec, dtype: Any, device: str = "cuda") -> None:
        self.torch, self.m, self.dtype, self.device = torch, model, dtype, device
        dev, h = device, model.hidden_size
        q, kv, inner = model.q_dim, model.num_kv_heads * model.head_dim, model.intermediate_size

        def w(*shape: int) -> Any:
            return torch.randn(*shape, device=dev, dtype=dtype) * (1.0 / math.sqrt(shape[-1]))

        self.embed = w(model.vocab_size, h)
        self.lm_head = self.embed if model.tie_word_embeddings else w(model.vocab_size, h)
        up = 2 * inner if model.gated_mlp else inner
        self.layers = [
            {"qkv": w(q + 2 * kv, h), "o": w(h, q), "up": w(up, h), "down": w(h, inner)}
            for _ in range(model.num_layers)
        ]

    def kv_cache(self, batch: int, context: int) -> list[tuple[Any, Any]]:
        m, t = self.m, self.torch
        shape = (batch, m.num_kv_heads, context, m.head_dim)
        return [
            (
                t.randn(shape, device=self.device, dtype=self.dtype),
                t.randn(shape, device=self.device, dtype=self.dtype),
            )
            for _ in range(m.num_layers)
        ]

    def _mlp(self, x: Any, layer: dict[str, Any]) -> Any:
        fn = self.torch.nn.functional
        up = fn.linear(x, layer["up"])
        if self.m.gated_mlp:
            gate, up = up.chunk(2, dim=-1)
            up = fn.silu(gate) * up
        else:
            up = fn.gelu(up)
        return fn.linear(up, layer["down"])

    def forward(self, tokens: Any, cache: list[tuple[Any, Any]] | None) -> Any:
        """tokens [B, T]; with `cache` (decode, T = 1) attend over it, else causal prefill."""
        t, m = self.torch, self.m
        fn = t.nn.functional
        b, n = tokens.shape
        x = fn.embedding(tokens, self.embed)
        q_dim, kv_dim = m.q_dim, m.num_kv_heads * m.head_dim
        for i, layer in enumerate(self.layers):
            r = fn.rms_norm(x, (m.hidden_size,))
            qkv = fn.linear(r, layer["qkv"])
            qh = qkv[..., :q_dim].view(b, n, m.num_heads, m.head_dim).transpose(1, 2)
            kh = qkv[..., q_dim : q_dim + kv_dim].view(b, n, m.num_kv_heads, m.head_dim)
            vh = qkv[..., q_dim + kv_dim :].view(b, n, m.num_kv_heads, m.head_dim)
            kh, vh = kh.transpose(1, 2), vh.transpose(1, 2)
            if cache is not None:
                k_cache, v_cache = cache[i]
                k_cache[:, :, -1:] = kh  # the new token's K/V take the last slot
                v_cache[:, :, -1:] = vh
                kh, vh = k_cache, v_cache
            attn = fn.scaled_dot_product_attention(
                qh, kh, vh, is_causal=cache is None, enable_gqa=m.num_kv_heads != m.num_heads
            )
            x = x + fn.linear(attn.transpose(1, 2).reshape(b, n, q_dim), layer["o"])
            x = x + self._mlp(fn.rms_norm(x, (m.hidden_size,)), layer)
        last = fn.rms_norm(x[:, -1, :], (m.hidden_size,))
        return fn.linear(last, self.lm_head).float()


# ------------------------------------------------------------------------------ timing


class _Energy:
    """NVML's cumulative energy counter of one GPU (None where unsupported or no NVML)."""

    def __init__(self, index: int) -> None:
        self.index, self.gpus = index, None
        try:
            telemetry = importlib.import_module("tokenprobe.telemetry.nvml")
            self.gpus = telemetry.NvmlGpus()
        except (TelemetryError, ImportError):
            self.gpus = None

    def read_j(self) -> float | None:
        if self.gpus is None:
            return None
        sample = self.gpus.read(self.index, now_s()).sample
        return None if sample is None or sample.energy_j is None else float(sample.energy_j)

    def close(self) -> None:
        if self.gpus is not None:
            self.gpus.close()


def _time_step(
    torch: Any, fn: Callable[[], Any], spec: ProfileSpec, energy: _Energy
) -> tuple[float, float | None]:
    """Median step time (CUDA events) and mean power (NVML energy counter over the loop)."""
    for _ in range(spec.warmup):
        fn()
    torch.cuda.synchronize()
    times: list[float] = []
    e0, t0 = energy.read_j(), now_s()
    while len(times) < spec.min_repeats or now_s() - t0 < MIN_TIMED_S:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * MILLI)
    e1, wall_s = energy.read_j(), now_s() - t0
    # mean power over the loop (the gaps between steps are a few µs of launch); energy of one
    # step = that power x the step's GPU time
    power_w = None if e0 is None or e1 is None or wall_s <= 0 else (e1 - e0) / wall_s
    return statistics.median(times), power_w


def _fits(torch: Any, model: ModelSpec, batch: int, context: int, dtype_bytes: int) -> bool:
    kv = 2 * model.num_layers * batch * context * model.num_kv_heads * model.head_dim * dtype_bytes
    act = 8 * batch * context * model.num_heads * dtype_bytes  # SDPA workspace, generous
    free, _ = torch.cuda.mem_get_info()
    return bool(kv + act < 0.85 * free)


def _prefill_points(torch: Any, dec: _Decoder, run: ProfileRun, energy: _Energy) -> None:
    spec, m = run.spec, dec.m
    for length in spec.prefill_lengths:
        if not _fits(torch, m, 1, length, 2):
            run.skipped.append(f"prefill L={length}: does not fit")
            continue
        tokens = torch.randint(0, m.vocab_size, (1, length), device="cuda")
        with torch.inference_mode():
            t, p = _time_step(torch, functools.partial(dec.forward, tokens, None), spec, energy)
        run.points.append(Point("prefill", 1, length, t, p, p * t if p else None))


def _decode_points(torch: Any, dec: _Decoder, run: ProfileRun, energy: _Energy) -> None:
    spec, m = run.spec, dec.m
    for context in spec.contexts:
        for batch in spec.batches:
            if not _fits(torch, m, batch, context, 2):
                run.skipped.append(f"decode B={batch} C={context}: KV cache does not fit")
                continue
            cache = dec.kv_cache(batch, context)
            tokens = torch.randint(0, m.vocab_size, (batch, 1), device="cuda")
            step = functools.partial(dec.forward, tokens, cache)
            with torch.inference_mode():
                t, p = _time_step(torch, step, spec, energy)
            run.points.append(Point("decode", batch, context, t, p, p * t if p else None))
            del cache, step
            torch.cuda.empty_cache()


def profile_gpu(spec: ProfileSpec) -> ProfileRun:
    """Measure on the local GPU (torch and CUDA required: check `gpu_unavailable_reason` first)."""
    reason = gpu_unavailable_reason()
    if reason is not None:
        raise ConfigError("gpu", None, reason)
    torch = importlib.import_module("torch")
    model = get_model(spec.model)
    check_model(model)
    device_name = str(torch.cuda.get_device_name(0))
    gpu = get_gpu(spec.gpu or device_name).name
    run = ProfileRun(spec, gpu, device_name, str(torch.__version__))
    torch.manual_seed(0)
    torch.cuda.reset_peak_memory_stats()
    dec = _Decoder(torch, model, getattr(torch, TORCH_DTYPES[spec.dtype]))
    energy = _Energy(torch.cuda.current_device())
    try:
        _prefill_points(torch, dec, run, energy)
        _decode_points(torch, dec, run, energy)
    finally:
        energy.close()
    run.peak_memory_bytes = int(torch.cuda.max_memory_allocated())
    return run


# ------------------------------------------------------------------------------ the run folder


def csv_rows(run: ProfileRun) -> list[dict[str, str]]:
    """The points as rows of the shared/validation schema (observations.py reads them back)."""
    model = get_model(run.spec.model)
    out = []
    for p in run.points:
        prefill = p.kind == "prefill"
        row = dict.fromkeys(CSV_COLUMNS, "")
        row.update(
            source_id=SOURCE_ID,
            source_ref="tokenprobe profile",
            engine=ENGINE,
            engine_version=f"torch {run.torch_version}",
            model=model.name,
            model_hf_id=run.spec.model,
            arch="dense",
            weight_precision=run.spec.dtype,
            kv_cache_precision=run.spec.dtype,
            gpu=run.gpu,
            gpu_count="1",
            tp="1",
            pp="1",
            workload_type="prefill_step" if prefill else "decode_step",
            batch_size=str(p.batch),
            isl=str(p.tokens),
            osl="1" if prefill else "",
            notes=f"device={run.device_name}; isl = prompt length (prefill) or context (decode)",
        )
        row["ttft_ms_mean" if prefill else "itl_ms_mean"] = f"{p.time_s / MILLI:.6g}"
        if p.power_w is not None:
            row["power_W_total"] = f"{p.power_w:.6g}"
        if p.energy_j is not None:
            key = "energy_J_per_request" if prefill else "energy_J_per_output_token"
            row[key] = f"{p.energy_j / p.batch:.6g}"
        out.append(row)
    return out


def write_profile_run(run: ProfileRun, directory: str | Path) -> Path:
    """config.json + profile.csv + summary.json; `calibrate DIRECTORY` reads it."""
    root = Path(directory)
    config = {
        "source": "tokenprobe profile",
        "engine": ENGINE,
        "model": run.spec.model,
        "gpu": run.gpu,
        "device_name": run.device_name,
        "torch_version": run.torch_version,
        "profile": asdict(run.spec),
    }
    with RunWriter(root, "measured", config, 0.0) as writer:
        writer.close(
            {
                "points": len(run.points),
                "skipped": run.skipped,
                "peak_memory_bytes": run.peak_memory_bytes,
            }
        )
    write_csv(csv_rows(run), root / PROFILE_CSV)
    return root


def write_csv(rows: Sequence[dict[str, str]], path: Path) -> None:
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(CSV_COLUMNS))
        writer.writeheader()
        writer.writerows(rows)

"""`tokenprobe models` and `tokenprobe gpus`: what the catalogs hold."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from tokenprobe.cli.app import app, guarded, print_json
from tokenprobe.cli.render import Col, print_table
from tokenprobe.hardware import get_gpu, gpu_names
from tokenprobe.model import ModelSpec, catalog_names, get_model
from tokenprobe.units import GIGA, TERA, GiB, KiB, MiB

JSON_HELP = "Print one JSON document only"
MODEL_COLUMNS = (
    Col("name", kind="name"),
    Col("HF id", kind="name", drop=3),
    Col("total", "params", kind="num", justify="right"),
    Col("active", kind="num", justify="right"),
    Col("layers", kind="num", justify="right", drop=1),
    Col("architecture", "arch", kind="name"),
    Col("attention", "attn", kind="num", drop=2),
    Col("MoE", kind="num", drop=1),
    Col("KV KiB/token (bf16)", "KV KiB", kind="num", justify="right"),
    Col("state MiB/seq (bf16)", "state MiB", kind="num", justify="right", drop=2),
)
GPU_COLUMNS = (
    Col("name", kind="name"),
    Col("bf16 TFLOP/s", "bf16 TF/s", kind="num", justify="right"),
    Col("fp8 TFLOP/s", "fp8 TF/s", kind="num", justify="right"),
    Col("HBM GiB", kind="num", justify="right"),
    Col("HBM TB/s", kind="num", justify="right"),
    Col("TDP W", kind="num", justify="right"),
    Col("idle W", kind="num", justify="right", drop=1),
    Col("link (GB/s per dir)", "link GB/s", kind="num", drop=2),
    Col("PCIe", kind="num", drop=3),
)


@app.command("models")
def models_cmd(json_out: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False) -> None:
    """List the built-in models: architecture kind, parameter counts, KV bytes per token and the
    fixed state per sequence of recurrent (linear-attention, SSM) layers."""
    rows: list[dict[str, Any]] = []
    for name in catalog_names():
        m = guarded(lambda name=name: get_model(name))  # type: ignore[misc]
        rows.append(
            {
                "name": name,
                "hf_id": m.hf_id,
                "params_total": m.params_total,
                "params_active": m.params_active,
                "layers": m.num_layers,
                "architecture": m.architecture,
                "kv_elements_per_token": m.kv_elements_per_token,
                # bf16 KV plus any cache in a fixed format (DSA's fp8 indexer keys), one GPU
                "kv_bytes_per_token_bf16": m.kv_bytes_per_token_per_gpu(2.0, 1),
                "state_elements_per_seq": m.state_elements_per_seq,
                "attention": "mla" if m.mla else f"{m.num_heads}q/{_kv_heads(m)}kv",
                "moe": None if m.moe is None else f"{m.moe.experts_per_token}/{m.moe.num_experts}",
            }
        )
    if json_out:
        print_json({"models": rows})
        return
    print_table(
        "Model catalog",
        MODEL_COLUMNS,
        [
            [
                str(r["name"]),
                str(r["hf_id"]),
                f"{r['params_total'] / GIGA:.2f} B",
                f"{r['params_active'] / GIGA:.2f} B",
                str(r["layers"]),
                str(r["architecture"]),
                str(r["attention"]),
                str(r["moe"] or "-"),
                f"{r['kv_bytes_per_token_bf16'] / KiB:.0f}",
                _state_mib(r["state_elements_per_seq"]),
            ]
            for r in rows
        ],
    )


def _kv_heads(m: ModelSpec) -> str:
    """The KV heads, or their range where they vary by layer (DeciLM: "1-4")."""
    counts = m.kv_head_counts
    return str(counts[0]) if len(counts) == 1 else f"{counts[0]}-{counts[-1]}"


def _state_mib(elements: int) -> str:
    """A sequence's fixed recurrent state in bf16, MiB ("-" for attention-only models)."""
    return f"{elements * 2 / MiB:.1f}" if elements else "-"


@app.command("gpus")
def gpus_cmd(json_out: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False) -> None:
    """List the hardware catalog: dense peaks, HBM, power, links."""
    rows: list[dict[str, Any]] = []
    for name in gpu_names():
        g = get_gpu(name)
        rows.append(
            {
                "name": g.name,
                "display_name": g.display_name,
                "peak_flop_per_s": dict(g.peak_flop_per_s),
                "hbm_bytes": g.hbm_bytes,
                "hbm_bytes_per_s": g.hbm_bytes_per_s,
                "tdp_w": g.tdp_w,
                "idle_w": g.idle_w,
                "link": g.link.kind,
                "link_bytes_per_s": g.link.bytes_per_s,
                "pcie": f"gen{g.pcie_gen} x{g.pcie_lanes}",
                "sources": list(g.sources),
            }
        )
    if json_out:
        print_json({"gpus": rows})
        return
    print_table("GPU catalog (dense tensor-core peaks)", GPU_COLUMNS, [_gpu_row(r) for r in rows])


def _gpu_row(r: dict[str, Any]) -> list[str]:
    peaks = r["peak_flop_per_s"]
    return [
        str(r["name"]),
        f"{peaks['bf16'] / TERA:.0f}" if "bf16" in peaks else "-",  # T4: fp16 only
        f"{peaks['fp8'] / TERA:.0f}" if "fp8" in peaks else "-",
        f"{float(r['hbm_bytes']) / GiB:.0f}",
        f"{float(r['hbm_bytes_per_s']) / TERA:.2f}",
        f"{r['tdp_w']:.0f}",
        f"{r['idle_w']:.0f}",
        f"{r['link']} {float(r['link_bytes_per_s']) / GIGA:.0f}",
        str(r["pcie"]),
    ]

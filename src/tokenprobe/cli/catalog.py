"""`tokenprobe models` and `tokenprobe gpus`: what the catalogs hold."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.table import Table

from tokenprobe.cli.app import app, console, guarded, print_json
from tokenprobe.hardware import get_gpu, gpu_names
from tokenprobe.model import catalog_names, get_model
from tokenprobe.units import GIGA, TERA, GiB


@app.command("models")
def models_cmd(
    json_out: Annotated[bool, typer.Option("--json", help="Print JSON only")] = False,
) -> None:
    """List the built-in models with their parameter counts and KV bytes per token."""
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
                "kv_elements_per_token": m.kv_elements_per_token,
                "attention": "mla" if m.mla else f"{m.num_heads}q/{m.num_kv_heads}kv",
                "moe": None if m.moe is None else f"{m.moe.experts_per_token}/{m.moe.num_experts}",
            }
        )
    if json_out:
        print_json({"models": rows})
        return
    t = Table(title="Model catalog")
    for col in (
        "name",
        "HF id",
        "total",
        "active",
        "layers",
        "attention",
        "MoE",
        "KV KiB/token (bf16)",
    ):
        t.add_column(col)
    for r in rows:
        t.add_row(
            str(r["name"]),
            str(r["hf_id"]),
            f"{r['params_total'] / GIGA:.2f} B",
            f"{r['params_active'] / GIGA:.2f} B",
            str(r["layers"]),
            str(r["attention"]),
            str(r["moe"] or "-"),
            f"{r['kv_elements_per_token'] * 2 / 1024:.0f}",
        )
    console.print(t)


@app.command("gpus")
def gpus_cmd(
    json_out: Annotated[bool, typer.Option("--json", help="Print JSON only")] = False,
) -> None:
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
    t = Table(title="GPU catalog (dense tensor-core peaks)")
    for col in (
        "name",
        "bf16 TFLOP/s",
        "fp8 TFLOP/s",
        "HBM GiB",
        "HBM TB/s",
        "TDP W",
        "idle W",
        "link (GB/s per dir)",
        "PCIe",
    ):
        t.add_column(col)
    for r in rows:
        peaks = r["peak_flop_per_s"]
        assert isinstance(peaks, dict)
        t.add_row(
            str(r["name"]),
            f"{peaks['bf16'] / TERA:.0f}" if "bf16" in peaks else "-",  # T4: fp16 only
            f"{peaks['fp8'] / TERA:.0f}" if "fp8" in peaks else "-",
            f"{float(r['hbm_bytes']) / GiB:.0f}",
            f"{float(r['hbm_bytes_per_s']) / TERA:.2f}",
            f"{r['tdp_w']:.0f}",
            f"{r['idle_w']:.0f}",
            f"{r['link']} {float(r['link_bytes_per_s']) / GIGA:.0f}",
            str(r["pcie"]),
        )
    console.print(t)

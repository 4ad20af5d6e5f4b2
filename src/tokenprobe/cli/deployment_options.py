"""The options that describe a deployment and a request shape, declared once for every command
that takes them (estimate, whatif, compare, plan, report, simulate), and `--json`. A command
keeps its own default in its signature; the type and the help live here."""

from __future__ import annotations

from typing import Annotated

import typer

# the rule of cost.make_deployment: fp8 W8A8 engines keep an fp8 cache, the rest 16-bit
KV_DTYPE_HELP = "KV-cache dtype (default: fp8 with fp8 weights, else the 16-bit compute dtype)"
WEIGHT_DTYPE_HELP = "fp32 bf16 fp16 fp8 int8 int4 fp4 mxfp4"

ModelOption = Annotated[str, typer.Option(help="Catalog name, HF id or path to config.json")]
GpuOption = Annotated[str, typer.Option(help="GPU name from `tokenprobe gpus` or a TOML file")]
InputTokensOption = Annotated[int, typer.Option(help="Prompt tokens per request")]
OutputTokensOption = Annotated[int, typer.Option(help="Generated tokens per request")]
BatchOption = Annotated[int, typer.Option(help="Requests decoded together")]
NumGpusOption = Annotated[int | None, typer.Option(help="GPUs in total (= tp x pp)")]
TpOption = Annotated[int | None, typer.Option(help="Tensor-parallel degree")]
PpOption = Annotated[int, typer.Option(help="Pipeline-parallel degree")]
WeightDtypeOption = Annotated[str, typer.Option(help=WEIGHT_DTYPE_HELP)]
KvDtypeOption = Annotated[str | None, typer.Option(help=KV_DTYPE_HELP)]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON only")]
# Where the replica's GPUs sit; every command that builds a Deployment takes these two.
NodesOption = Annotated[
    int | None,
    typer.Option(help="Servers the tp x pp GPUs span (default: the fewest that hold them)"),
]
GpusPerNodeOption = Annotated[
    int | None,
    typer.Option(help="GPUs per server (default: the GPU's catalog topology, e.g. 8 on HGX)"),
]

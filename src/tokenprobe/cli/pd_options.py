"""`simulate --disaggregate`'s handoff flag (`--pd-handoff`): how a request passes from its
prefill worker to its decode worker (sim/pd_handoff.py)."""

from __future__ import annotations

from typing import Annotated

import typer

from tokenprobe.sim import PD_HANDOFFS

PdHandoffOption = Annotated[
    str | None,
    typer.Option(
        help="With --disaggregate: the handoff, "
        f"{' or '.join(PD_HANDOFFS)} (sglang: the router sends each request to a prefill and a "
        "decode worker at once, the decode worker pre-allocates its KV before the prefill "
        "starts and streams the first token at its next step; proxy: prefill first, then the "
        "least-loaded decode worker, through each server's front end in turn). Default: sglang "
        "for SGLang's engine, else proxy"
    ),
]

"""`--spec-decode METHOD:K` and `--spec-acceptance a`: declared once for `estimate` and
`simulate`, parsed by `cost.SpecDecode.parse` (one message naming the field per bad value)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from tokenprobe.cost import SpecDecode
from tokenprobe.files import finite

SpecDecodeOption = Annotated[
    str | None,
    typer.Option(help="Speculative decoding METHOD:K: mtp:1, eagle:4, ngram:4 (k drafts)"),
]
SpecAcceptanceOption = Annotated[
    float | None,
    typer.Option(help="Per-token draft acceptance, 0..1 (default: mtp 0.85; others: give it)"),
]


def spec_of(spec_decode: str | None, spec_acceptance: float | None) -> SpecDecode | None:
    """The setting the two flags give (None: off); ConfigError naming the bad field."""
    if spec_decode is None:
        return None
    acceptance = None if spec_acceptance is None else finite("spec_acceptance", spec_acceptance)
    return SpecDecode.parse(spec_decode, acceptance)


def spec_summary_line(spec: dict[str, Any]) -> str:
    """One line of `simulate`'s table output for the `spec_decode` key of its JSON."""
    rate, mean = spec["acceptance_rate"], spec["tokens_per_step_mean"]
    measured = (
        "no draft verified"
        if mean is None
        else (
            f"{mean:.3f} tokens per verification step (expected "
            f"{spec['expected_tokens_per_step']:.3f}), {100 * rate:.1f} % of drafts accepted"
        )
    )
    return (
        f"speculative decoding {spec['method']}:{spec['draft_tokens']}, acceptance "
        f"{spec['acceptance']:g}: {measured}"
    )

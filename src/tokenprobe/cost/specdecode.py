"""Speculative decoding in the cost model (`estimate --spec-decode mtp:1`).

Each decode step of a sequence drafts k tokens and the target model verifies them in one pass
over k + 1 positions (the k drafts and the token after them), attending to the sequence's
cache. The pass is priced as the decode step of the batch (one row per sequence, its cached KV
read once, as a multi-query decode kernel reads it) plus k more rows per sequence through every
weight matmul and their attention over the context (`verify_shape`): the weights are read once
for all of them, so at small, memory-bound batches it costs little more than a one-token step,
and at compute-bound batches about k + 1 times the matmul work.

Tokens a step emits: with a per-token acceptance probability a, independent per position (the
model of Leviathan, Kalman & Matias, "Fast Inference from Transformers via Speculative
Decoding", ICML 2023, section 3.1), the accepted prefix of k drafts plus the target's own next
token gives E = (1 - a^(k+1)) / (1 - a) tokens per step (k + 1 at a = 1).

Draft cost per step, by method:
- mtp: DeepSeek's multi-token-prediction module (DeepSeek-V3 technical report, arXiv
  2412.19437, section 2.2): one more transformer block sharing the embedding and output head,
  run k times in sequence; each run is priced as a decode step of the model scaled by
  `draft_fraction` (one layer's weights plus the LM head over the weights a token touches: in
  decode the weight reads set the time).
- eagle: EAGLE's draft head (Li et al., ICML 2024; EAGLE-3, arXiv 2503.01840) is likewise one
  decoder layer over the target's features with the target's LM head, run k times: as mtp.
- ngram: prompt lookup (vLLM's `ngram` proposer) matches the context on the CPU: no GPU work.
The KV of the verified positions is written in the pass; rejected positions are overwritten.

Acceptance defaults: mtp 0.85, the low end of DeepSeek-V3's reported 85-90 % acceptance of the
second token's prediction (section 5.4.3). EAGLE's and n-gram's rates depend on the model, its
draft head and the text far more; no default is shipped for them: give `acceptance` (vLLM
reports it: `vllm:spec_decode_num_accepted_tokens` / `vllm:spec_decode_num_draft_tokens`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tokenprobe.cost.deployment import Deployment
from tokenprobe.cost.shape import BatchShape
from tokenprobe.cost.step import StepCost, step_cost
from tokenprobe.errors import ConfigError

METHODS = ("mtp", "eagle", "ngram")
DEFAULT_ACCEPTANCE = {"mtp": 0.85}
MAX_DRAFT_TOKENS = 16
_SPEC = re.compile(r"^\s*([a-z]+)\s*:\s*(\d+)\s*$")


@dataclass(frozen=True, slots=True)
class SpecDecode:
    """A speculative-decoding setting: method, draft tokens per step, per-token acceptance."""

    method: str
    draft_tokens: int
    acceptance: float

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ConfigError("spec_decode", self.method, f"one of {', '.join(METHODS)}")
        if not 1 <= self.draft_tokens <= MAX_DRAFT_TOKENS:
            raise ConfigError("spec_decode", self.draft_tokens, f"1 to {MAX_DRAFT_TOKENS} drafts")
        if not 0.0 <= self.acceptance <= 1.0:
            raise ConfigError("spec_acceptance", self.acceptance, "a probability in [0, 1]")

    @classmethod
    def parse(cls, text: str, acceptance: float | None = None) -> SpecDecode:
        """`mtp:3` (method : draft tokens), with the method's default acceptance unless given."""
        m = _SPEC.match(text.lower())
        if m is None:
            raise ConfigError("spec_decode", text, "METHOD:K, e.g. mtp:1, eagle:4, ngram:4")
        method, k = m.group(1), int(m.group(2))
        if method not in METHODS:  # before the acceptance, which has no default for it
            raise ConfigError("spec_decode", text, f"a method of {', '.join(METHODS)}")
        if acceptance is None:
            acceptance = DEFAULT_ACCEPTANCE.get(method)
        if acceptance is None:
            raise ConfigError(
                "spec_acceptance",
                None,
                f"a measured per-token acceptance for {method} (no default is shipped: it "
                "depends on the draft and the text; vLLM's spec_decode metrics give it)",
            )
        return cls(method, k, acceptance)

    @property
    def tokens_per_step(self) -> float:
        """E = (1 - a^(k+1)) / (1 - a): tokens a verification step emits (module docstring)."""
        a, k = self.acceptance, self.draft_tokens
        return float(k + 1) if a >= 1.0 else (1.0 - a ** (k + 1)) / (1.0 - a)

    def label(self) -> str:
        return f"{self.method}:{self.draft_tokens}, acceptance {self.acceptance:g}"


def draft_fraction(dep: Deployment) -> float:
    """One layer's weights plus the LM head over the weights a decode token reads (the
    draft head of mtp / eagle against the whole model, by weight reads). The decoder layers are
    the model less its vocab x hidden matrices: two when the LM head is its own matrix, one
    when it is tied to the embedding (Llama-3.2-1B/3B, Gemma); the draft runs the head either
    way."""
    m = dep.model
    head = m.vocab_size * m.hidden_size
    layers = max(m.num_layers, 1)
    body = max(m.params_active - m.embedding_params - m.lm_head_params, 0.0)
    return min(1.0, (body / layers + head) / max(m.params_active, 1.0))


def draft_passes(dep: Deployment, spec: SpecDecode) -> float:
    """The draft's work per step in decode steps of the target: k runs of `draft_fraction`
    for mtp / eagle, none for ngram (module docstring)."""
    return 0.0 if spec.method == "ngram" else spec.draft_tokens * draft_fraction(dep)


def verify_rows(seqs: int, context_tokens: int, draft_tokens: int) -> tuple[int, float]:
    """The rows and attention (query, key) pairs that verifying `draft_tokens` drafts adds to
    a decode step of `seqs` sequences holding `context_tokens` tokens of KV in all: each draft
    position attends to its sequence's context and to the positions before it in the pass."""
    k = draft_tokens
    return seqs * k, k * context_tokens + seqs * k * (k + 1) / 2


def verify_shape(batch: int, context_tokens: int, draft_tokens: int) -> BatchShape:
    """The verification pass (module docstring): a decode step of `batch` sequences plus
    `draft_tokens` more positions each, attending to the context and to each other (their
    rows priced as prompt rows of `batch` sequences)."""
    rows, pairs = verify_rows(batch, batch * context_tokens, draft_tokens)
    return BatchShape(
        prefill_tokens=rows,
        prefill_attn_pairs=pairs,
        prefill_seqs=batch,
        decode_seqs=batch,
        decode_context_tokens=batch * context_tokens,
    )


def spec_step(dep: Deployment, batch: int, context_tokens: int, spec: SpecDecode) -> StepCost:
    """The cost of one emitted token per sequence with speculative decoding: a verification
    pass over k + 1 positions plus the draft's work, over E tokens per step; times in seconds
    per emitted token, FLOP and bytes per GPU per emitted token, power the step's average."""
    verify = step_cost(dep, verify_shape(batch, context_tokens, spec.draft_tokens))
    draft_runs = draft_passes(dep, spec)
    one = step_cost(dep, BatchShape.decode(batch, context_tokens)) if draft_runs else None
    e = spec.tokens_per_step

    def per_token(name: str) -> float:
        extra = getattr(one, name) * draft_runs if one is not None else 0.0
        return (float(getattr(verify, name)) + extra) / e

    time_s = per_token("time_s")
    energy_j = per_token("energy_j")
    return StepCost(
        time_s=time_s,
        compute_s=per_token("compute_s"),
        memory_s=per_token("memory_s"),
        comm_s=per_token("comm_s"),
        overhead_s=per_token("overhead_s"),
        flop=per_token("flop"),
        hbm_bytes=per_token("hbm_bytes"),
        compute_util=verify.compute_util,
        memory_util=verify.memory_util,
        power_w=energy_j / (time_s * dep.num_gpus) if time_s > 0 else verify.power_w,
        energy_j=energy_j,
        clock_fraction=verify.clock_fraction,
    )

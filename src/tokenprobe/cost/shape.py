"""What one engine step computes: a batch of prefill chunks and decode tokens."""

from __future__ import annotations

from dataclasses import dataclass

from tokenprobe.errors import ConfigError


@dataclass(frozen=True, slots=True)
class BatchShape:
    """One forward pass of the engine (one "step"), summed over the sequences in it.

    prefill_tokens: new prompt tokens computed this step (all prefilling sequences together).
    prefill_attn_pairs: causal query-key pairs of those tokens, sum over sequences of
        new x (cached_before + (new + 1) / 2); a whole prompt of n tokens gives n(n+1)/2.
    prefill_seqs: sequences with prompt tokens in this step.
    decode_seqs: sequences generating one token this step.
    decode_context_tokens: sum of the context lengths (tokens in KV) those sequences attend to.
    """

    prefill_tokens: int = 0
    prefill_attn_pairs: float = 0.0
    prefill_seqs: int = 0
    decode_seqs: int = 0
    decode_context_tokens: int = 0

    def __post_init__(self) -> None:
        for name in (
            "prefill_tokens",
            "prefill_attn_pairs",
            "prefill_seqs",
            "decode_seqs",
            "decode_context_tokens",
        ):
            if getattr(self, name) < 0:
                raise ConfigError(name, getattr(self, name), "a count >= 0")

    @property
    def tokens(self) -> int:
        """Rows of every linear layer's input this step."""
        return self.prefill_tokens + self.decode_seqs

    @property
    def logit_rows(self) -> int:
        """Rows that reach the LM head: the last position of each sequence in the step."""
        return self.prefill_seqs + self.decode_seqs

    @classmethod
    def prefill(cls, prompt_tokens: int, batch: int = 1, cached_tokens: int = 0) -> BatchShape:
        """`batch` prompts of `prompt_tokens` new tokens each, after `cached_tokens` of prefix."""
        pairs = prompt_tokens * (cached_tokens + (prompt_tokens + 1) / 2)
        return cls(
            prefill_tokens=batch * prompt_tokens,
            prefill_attn_pairs=batch * pairs,
            prefill_seqs=batch,
        )

    @classmethod
    def decode(cls, batch: int, context_tokens: int) -> BatchShape:
        """`batch` sequences each generating one token with `context_tokens` already cached."""
        return cls(decode_seqs=batch, decode_context_tokens=batch * context_tokens)

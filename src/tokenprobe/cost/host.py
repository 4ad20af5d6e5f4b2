"""Host-side stages of a request that the estimator shows beside the GPU stages (E5, E8 v1).

v1 keeps two parameters: tokenizer throughput and one network round trip. Defaults: Hugging Face
`tokenizers` (Rust, byte-level BPE) encodes on the order of 1e6 tokens/s on one modern core
(its README: "Takes less than 20 seconds to tokenize a GB of text"; 1 GB ≈ 2.5e8 tokens ⇒
~1.2e7 tokens/s over all cores of a server, ~1e6 per core); the client is on the same host
(network 0 s). Issue 7 replaces these with measured and modelled values (HTTP/JSON, SSE framing).
"""

from __future__ import annotations

from dataclasses import dataclass

from tokenprobe.errors import ConfigError
from tokenprobe.units import MEGA


@dataclass(frozen=True, slots=True)
class HostModel:
    tokenizer_tokens_per_s: float = 1.0 * MEGA
    network_rtt_s: float = 0.0

    def __post_init__(self) -> None:
        if not self.tokenizer_tokens_per_s > 0:
            raise ConfigError("tokenizer_tokens_per_s", self.tokenizer_tokens_per_s, "> 0")
        if not self.network_rtt_s >= 0:
            raise ConfigError("network_rtt_s", self.network_rtt_s, ">= 0")

    def tokenize_s(self, tokens: int) -> float:
        return tokens / self.tokenizer_tokens_per_s

    def network_s(self) -> float:
        return self.network_rtt_s

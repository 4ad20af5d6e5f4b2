"""tokenprobe: what one LLM token really costs the hardware.

The Python API (U2) is imported lazily so `import tokenprobe` stays cheap:

    import tokenprobe
    est = tokenprobe.estimate(model="llama-3.1-8b", gpu="h100-sxm", input_tokens=1024,
                              output_tokens=256, batch=8)
    est.to_dict()  # == `tokenprobe estimate ... --json`
    sim = tokenprobe.simulate(model="llama-3.1-8b", gpu="h100-sxm", input_tokens=512,
                              output_tokens=128, rate_per_s=5.0, num_requests=200, seed=0)
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

_LAZY = {
    "estimate": ("tokenprobe.cost", "estimate"),
    "simulate": ("tokenprobe.sim", "simulate"),
    "get_model": ("tokenprobe.model", "get_model"),
    "get_gpu": ("tokenprobe.hardware", "get_gpu"),
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        return getattr(importlib.import_module(module), attr)
    raise AttributeError(f"module 'tokenprobe' has no attribute {name!r}")


__all__ = ["__version__", "estimate", "get_gpu", "get_model", "simulate"]

"""Number formats of weights, activations and the KV cache (requirement E3).

`bytes_per_element` includes the block/group scale overhead of the quantized formats, because the
scales are read from HBM on every step just like the weights:

- int4 (W4A16, AWQ layout): 4-bit weights, per group of 128 one fp16 scale and one packed 4-bit
  zero point -> 0.5 + (2 + 0.5)/128 B. Source: AWQ (Lin et al., arXiv:2306.00978) and vLLM's
  `awq` / `gptq_marlin` kernels, default group_size 128.
- fp4 (NVFP4): 4-bit e2m1 values, one fp8 e4m3 scale per block of 16 -> 0.5 + 1/16 B (plus one
  fp32 tensor scale, negligible). Source: NVIDIA Blackwell NVFP4 format (TensorRT Model
  Optimizer docs).
- mxfp4 (OCP MX): 4-bit e2m1 values, one e8m0 scale per block of 32 -> 0.5 + 1/32 B. Source: OCP
  Microscaling Formats v1.0; used by gpt-oss's MoE weights (its model card).
- fp8 / int8: per-tensor or per-channel scales, negligible against the weights.
"""

from __future__ import annotations

from dataclasses import dataclass

from tokenprobe.errors import ConfigError


@dataclass(frozen=True, slots=True)
class Dtype:
    name: str
    bits: int
    group_size: int = 0
    scale_bytes_per_group: float = 0.0
    is_float: bool = True

    @property
    def bytes_per_element(self) -> float:
        overhead = self.scale_bytes_per_group / self.group_size if self.group_size else 0.0
        return self.bits / 8 + overhead


DTYPES: dict[str, Dtype] = {
    "fp32": Dtype("fp32", 32),
    "bf16": Dtype("bf16", 16),
    "fp16": Dtype("fp16", 16),
    "fp8": Dtype("fp8", 8),
    "int8": Dtype("int8", 8, is_float=False),
    "int4": Dtype("int4", 4, group_size=128, scale_bytes_per_group=2.5, is_float=False),
    "fp4": Dtype("fp4", 4, group_size=16, scale_bytes_per_group=1.0),
    "mxfp4": Dtype("mxfp4", 4, group_size=32, scale_bytes_per_group=1.0),
}

_ALIASES: dict[str, str] = {
    "float32": "fp32",
    "float": "fp32",
    "tf32": "fp32",
    "bfloat16": "bf16",
    "float16": "fp16",
    "half": "fp16",
    "fp8_e4m3": "fp8",
    "e4m3": "fp8",
    "fp8_e5m2": "fp8",
    "float8": "fp8",
    "w8a8": "int8",
    "w4a16": "int4",
    "awq": "int4",
    "gptq": "int4",
    "nvfp4": "fp4",
}

# What a matmul whose weights are stored as key computes in when the caller names no activation
# dtype: weight-only formats (int4 W4A16) dequantize to bf16 (vLLM Marlin/AWQ kernels); the rest
# run natively (fp8 W8A8, int8 W8A8 SmoothQuant, NVFP4 W4A4 on Blackwell).
DEFAULT_ACTIVATION: dict[str, str] = {
    "fp32": "fp32",
    "bf16": "bf16",
    "fp16": "fp16",
    "fp8": "fp8",
    "int8": "int8",
    "int4": "bf16",
    "fp4": "fp4",
    "mxfp4": "bf16",
}


def get_dtype(name: str, field: str = "dtype") -> Dtype:
    """Look a dtype up by name or alias; a ConfigError naming `field` otherwise."""
    key = name.strip().lower()
    key = _ALIASES.get(key, key)
    if key not in DTYPES:
        raise ConfigError(field, name, f"one of {', '.join(DTYPES)}")
    return DTYPES[key]


# Activations a layer keeps (the residual stream, the profile run's per-token tensors, a
# recurrent layer's state) and sends between GPUs (the TP all-reduce, the EP combine, the
# embedding output) are 16-bit even when the GEMMs take fp8 or fp4 inputs: a W8A8 linear
# quantizes its bf16/fp16 input inside the call and writes its output in the input's dtype
# (vllm-project/vllm@646ad5a478f8ac4174d2cb200999951ab8edd4e7:vllm/model_executor/layers/
# quantization/utils/w8a8_utils.py apply_fp8_linear: ops.scaled_fp8_quant(input_2d, ..) then
# cutlass_scaled_mm(qinput, .., out_dtype=input.dtype)), so only the GEMM's operand is 8-bit.
MIN_ACTIVATION_BYTES_PER_ELEMENT = 2.0
# what a quantized checkpoint keeps unquantized (embeddings, LM head, the modules it names
# not to convert) is stored 16-bit: bf16/fp16
UNQUANTIZED_BYTES_PER_ELEMENT = 2.0


def activation_bytes_per_element(act_dtype: Dtype) -> float:
    """Bytes of one activation element held in memory or sent between GPUs: the compute
    dtype's, at least 16-bit (fp8/fp4 GEMM inputs are quantized inside the kernel from bf16/fp16
    activations; `MIN_ACTIVATION_BYTES_PER_ELEMENT`); fp32 activations stay 4 bytes."""
    return max(act_dtype.bytes_per_element, MIN_ACTIVATION_BYTES_PER_ELEMENT)

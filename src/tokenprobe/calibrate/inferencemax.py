"""InferenceMAX's single-node rows (benchmarks/data/inferencemax_agg.csv, data README §12) ->
`Row`s replayed by the serving simulator, held out of every fit.

Each row carries InferenceMAX's own serving command and client settings in `notes` and
`dataset` (benchmarks/inferencemax_commands.py transcribes them from the launch scripts), so the
generic online-serving mapper (`calibrate.serving.serving_rows`) reads its engine flags
(--max-num-seqs / --max-running-requests, --max-num-batched-tokens / --chunked-prefill-size,
--gpu-memory-utilization / --mem-fraction-static, --kv-cache-dtype, --disable-radix-cache,
TensorRT-LLM's --max_batch_size / --max_num_tokens), its lengths (uniform in [0.8 L, L]) and its
prompt count. Rows the simulator cannot express are refused here with the reason, counted by
`sources.load_rows`:
- TensorRT-LLM with `enable_attention_dp: true`: its attention-DP ranks are not the serving
  replay's TP attention (TensorRT-LLM mechanisms are the TRT work's).
AMD's ATOM rows run with the `atom` preset (sim/atom.py) and no profile (nothing public to fit).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import replace

from tokenprobe.calibrate.observations import Row, SkipRowError
from tokenprobe.calibrate.serving import serving_rows

SOURCE_ID = "inferencemax"
GROUP_END = " | "  # a row's label starts with its group (group_key), then this


def group_key(row: Mapping[str, str]) -> str:
    """The configuration group a row reports in: GPU, engine, version (image tag), checkpoint,
    weight format, e.g. "B200 vLLM v0.13.0 gpt-oss-120b mxfp4"."""
    version = row.get("engine_version", "").split(" ")[0]
    precision = row.get("weight_precision", "").split(" ")[0]
    return (
        f"{row.get('gpu', '')} {row.get('engine', '')} {version} {row.get('model', '')} {precision}"
    )


def group_of(label: str) -> str:
    """The group_key at the start of an InferenceMAX row's label."""
    return label.split(GROUP_END, 1)[0]


def inferencemax_rows(row: Mapping[str, str]) -> Iterator[Row]:
    """One InferenceMAX row (module docstring)."""
    notes = row.get("notes", "")
    if "TensorRT" in row.get("engine", "") and "dp_attention=true" in notes:
        raise SkipRowError("InferenceMAX: TensorRT-LLM attention DP (enable_attention_dp)")
    # held out of every fit, so the simulator's step memo (sim/stepcache.py, within 0.5 % of
    # exact pricing) stands in for exact steps: 10 x conc requests of up to 8k output tokens
    # are ~80k steps a row (0.6 s memoized against 31 s exact for an H100 1k/8k row)
    group = group_key(row)
    # vLLM's --async-scheduling hides the host's per-step work under the GPU's (serving.py)
    for out in serving_rows(row, exact_steps=False, overlap=True):
        yield replace(out, label=f"{group}{GROUP_END}{out.label}")

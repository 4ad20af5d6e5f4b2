"""`simulate`'s SGLang scheduler flags, named as `sglang.launch_server` names them.

They set `SchedulerConfig.max_prefill_tokens`, `schedule_conservativeness` and
`enable_mixed_chunk` (sim/sglang_scheduler.py), which only SGLang's scheduling reads (`--engine
sglang`); SGLang's `--chunked-prefill-size` is `--max-num-batched-tokens` there.
"""

from __future__ import annotations

from typing import Annotated

import typer

MaxPrefillTokensOption = Annotated[
    int | None,
    typer.Option(help="--engine sglang: prompt tokens one prefill batch admits (16384)"),
]
ScheduleConservativenessOption = Annotated[
    float | None,
    typer.Option(
        help="--engine sglang: scales the initial new_token_ratio 0.7 (1.0); higher reserves "
        "more KV per running request and admits fewer"
    ),
]
EnableMixedChunkOption = Annotated[
    bool,
    typer.Option(
        "--enable-mixed-chunk",
        help="--engine sglang: a prefill batch also runs every decode (default: prefill-only)",
    ),
]

"""`simulate --engine-version`: the server a given vLLM release sets up (sim/vllm_v0.py).

`--engine vllm-2025h1` (the era preset) simulates the release its shipped profile was fitted on
(its `Era.stands_for`: 0.7.3, V0 engine, MLA with its padded latent and extra weights);
`--engine-version` names another release, e.g. `--engine vllm --engine-version 0.7.3` (V0, priced
with the era's profile: `EnginePreset.era_of`) or `--engine vllm-2025h1 --engine-version 0.8.5`
(V1, the default from 0.8.0). Without either, `--engine vllm` is today's V1 server.
"""

from __future__ import annotations

from typing import Annotated

import typer

from tokenprobe.cost import Deployment, is_release
from tokenprobe.errors import ConfigError
from tokenprobe.sim import (
    SchedulerConfig,
    engine_defaults,
    engine_preset,
    is_vllm_era,
    server_config,
    vllm_version_defaults,
)

EngineVersionOption = Annotated[
    str | None,
    typer.Option(
        help="--engine vllm: the release whose server is simulated (e.g. 0.7.3: V0 engine and "
        "its MLA KV sizing; 0.8.0 and later: V1). Default: vllm-2025h1 0.7.3, vllm today's"
    ),
]


def profile_engine(engine: str | None, engine_version: str | None) -> str | None:
    """The name whose shipped profile prices the run: the era of `engine_version` when it has
    one (`vllm` 0.7.3 -> `vllm-2025h1`), else `engine`."""
    if engine is None or not engine_version:
        return engine
    return engine_preset(engine).era_of(engine_version) or engine


def server_defaults(engine: str, dep: Deployment, engine_version: str | None) -> SchedulerConfig:
    """The scheduler `engine` (of `engine_version`) sets up for `dep`, before the flags."""
    preset = engine_preset(engine)
    if engine_version is not None:
        if preset.name != "vllm":
            raise ConfigError(
                "engine_version", engine_version, "only with --engine vllm (or an era)"
            )
        if not is_release(engine_version):
            raise ConfigError("engine_version", engine_version, "a vLLM release such as 0.7.3")
        return vllm_version_defaults(dep, engine_version)
    if is_vllm_era(engine):
        return vllm_version_defaults(dep, engine)
    # an SGLang 0.4 era's settings; --max-num-batched-tokens, if given, applies after this
    return server_config(engine, dep, engine_defaults(engine, dep.gpu, dep.tp))

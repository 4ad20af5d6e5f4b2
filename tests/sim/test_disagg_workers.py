"""Disaggregated workers of their own kind (sim/api.py `simulate_fleet`): a decode worker that is
an attention-DP + EP deployment (Dynamo's and SGLang's wide-EP decode workers), a prefill worker
with its own deployment and scheduler flags (`prefill_deployment`, `prefill_config`), each side's
KV pool sized by its own rule, and the simulator's invariants (no request lost, every transfer
before its decode)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tokenprobe.cost import SpecDecode, make_deployment
from tokenprobe.errors import ConfigError
from tokenprobe.sim import DisaggResult, capacity_blocks, simulate_fleet
from tokenprobe.sim.engines import vllm_defaults
from tokenprobe.workload import Arrival, RequestSpec, Workload

MODEL, GPU = "qwen3-30b-a3b", "h100-sxm"
DEP4 = make_deployment(MODEL, GPU, tp=4, expert_parallel=True, attention_dp=True)
TP2 = make_deployment(MODEL, GPU, tp=2)


def _trace(n: int, prompt: int = 1024, output: int = 32) -> Workload:
    specs = tuple(RequestSpec(f"r{i}", 0.01 * i, prompt, output) for i in range(n))
    return Workload(Arrival("trace", trace=specs), name="t")


def _pd(dep, workload: Workload, **kw: object) -> DisaggResult:  # type: ignore[no-untyped-def]
    result = simulate_fleet(dep, workload, disaggregate="1p1d", **kw)  # type: ignore[arg-type]
    assert isinstance(result, DisaggResult)
    return result


def test_an_attention_dp_decode_worker_serves_every_request_after_its_transfer() -> None:
    """A DEP4 decode worker behind a TP2 prefill worker: every request completes, each one's
    decode starts after its KV arrived, each side's pool is its own deployment's."""
    config = vllm_defaults(DEP4.gpu)
    result = _pd(DEP4, _trace(12), prefill_deployment=TP2, config=config)
    records = result.records
    assert len({r.request_id for r in records}) == 12 and all(r.ok for r in records)
    assert result.prefill[0].pool.capacity_blocks == capacity_blocks(TP2, config)
    assert result.decode[0].pool.capacity_blocks == capacity_blocks(DEP4, config)
    data = result.to_dict()
    assert (data["prefill_tp"], data["decode_tp"], data["config"]["num_gpus"]) == (2, 4, 6)
    for r in records:  # the proxy's handoff: prefill, then the transfer, then the decode
        arrived = r.extra["prefill_done_s"] + r.extra["kv_transfer_s"]
        assert r.first_token_s is not None and r.first_token_s >= arrived
    for part in result.workers:
        assert part.pool.peak_used_blocks <= part.pool.capacity_blocks


def test_the_decode_worker_steps_as_the_attention_dp_deployment() -> None:
    """One request alone: its decode steps on the DEP4 worker are the attention-DP deployment's
    steps, so its TPOT differs from a TP4 decode worker's on the same GPUs (TP shards every
    layer over 4 GPUs; attention DP runs the request's attention on one rank)."""
    tp4 = make_deployment(MODEL, GPU, tp=4, expert_parallel=True)
    one = _trace(1, 512, 64)
    dep_tpot = _pd(DEP4, one, prefill_deployment=TP2).to_dict()["tpot_s"]["p50"]
    tp_tpot = _pd(tp4, one, prefill_deployment=TP2).to_dict()["tpot_s"]["p50"]
    assert dep_tpot > 0 and tp_tpot > 0 and dep_tpot != pytest.approx(tp_tpot, rel=1e-3)


def test_the_prefill_side_takes_its_own_chunk() -> None:
    """A prefill worker whose step budget is 256 tokens (its own `--max-num-batched-tokens`)
    needs 4096 / 256 = 16 steps for one 4,096-token prompt; with the decode side's 8,192 it
    needs one. The decode side keeps its own budget either way."""
    config = vllm_defaults(TP2.gpu)
    small = replace(config, max_num_seqs=4, max_num_batched_tokens=256)
    prompt = _trace(1, 4096, 4)
    chunked = _pd(TP2, prompt, config=config, prefill_config=small)
    whole = _pd(TP2, prompt, config=config)
    assert chunked.prefill[0].to_dict()["steps"] == 16
    assert whole.prefill[0].to_dict()["steps"] == 1
    assert chunked.to_dict()["ttft_s"]["p50"] > whole.to_dict()["ttft_s"]["p50"]


def test_an_attention_dp_decode_worker_decodes_speculatively() -> None:
    """MTP on a DEP4 decode worker (ranks balanced): every request still emits all its tokens,
    and accepting every draft (acceptance 1, 3 drafts) makes its steps emit 4 tokens each, so
    it takes fewer decode steps than without drafts."""
    work = _trace(4, 256, 64)
    plain = _pd(DEP4, work, prefill_deployment=TP2)
    spec = _pd(DEP4, work, prefill_deployment=TP2, spec_decode=SpecDecode.parse("mtp:3", 1.0))
    assert all(r.output_tokens == 64 for r in spec.records)
    assert spec.decode[0].to_dict()["steps"] < plain.decode[0].to_dict()["steps"]


def test_worker_options_without_disaggregate_are_refused() -> None:
    with pytest.raises(ConfigError, match="prefill_tp"):
        simulate_fleet(TP2, _trace(1), prefill_deployment=TP2)
    with pytest.raises(ConfigError, match="prefill_tp"):
        simulate_fleet(TP2, _trace(1), prefill_config=vllm_defaults(TP2.gpu))

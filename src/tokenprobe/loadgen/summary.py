"""A measured run's summary: `metrics.summarize` plus the client's own figures and warnings.

SLOs: given to `bench_summary`, or else the run config's `slo_ttft_s` / `slo_tpot_s` (what
`bench --slo-ttft-s/--slo-tpot-s` keeps), so summary.json written at the end of the run carries
the goodput and the SLOs it was counted against.

Prefix-cache hits the workload did not ask for: llama.cpp reports the prompt tokens it took from
its cache (`timings.cache_n`), vLLM and SGLang `usage.prompt_tokens_details.cached_tokens`
(`server_cached_tokens` in a record's extra). A request counts as answered from the cache when
more than T + max(CACHE_TOLERANCE_TOKENS, CACHE_TOLERANCE_SHARE x (its prompt - T)) tokens were
cached, T the chat template's tokens (`template_tokens` in the run config; 0 for completions):
every chat request shares its template's system prompt and role markers, and fresh synthetic
prompts still share the BOS token and the leading digits of their index, a few tokens whatever
the prompt length. Unless the run allowed prefix
reuse, such hits give a warning: the measured TTFT is then below a fresh prompt's.
"""

from __future__ import annotations

from typing import Any

from tokenprobe.metrics import latency_stats, summarize
from tokenprobe.records import RequestRecord, Run

CACHE_TOLERANCE_TOKENS = 4
CACHE_TOLERANCE_SHARE = 0.25


def client_figures(run: Run) -> dict[str, Any]:
    """The client's own figures: send lag (s), where token counts came from, and the prompt
    tokens the server answered from its prefix cache."""
    lags = [r.sent_s - r.scheduled_s for r in run.records]
    sources: dict[str, int] = {}
    for r in run.records:
        if r.ok:
            sources[r.token_count_source] = sources.get(r.token_count_source, 0) + 1
    return {
        "send_lag_s": {**latency_stats(lags), "max": max(lags) if lags else None},
        # re-sent once after a pooled connection was found closed (loadgen.client docstring)
        "retried_requests": sum(1 for r in run.records if r.extra.get("retries")),
        "keep_alive": run.config.get("keep_alive"),
        "token_count_source": dict(sorted(sources.items())),
        "input_tokens_verified": run.config.get("input_tokens_verified"),
        "warmup_errors": run.config.get("warmup_errors"),
        "prefix_cache": prefix_cache_figures(run.records, _int(run.config.get("template_tokens"))),
        "repeated_prompts": repeated_prompts(run),
    }


def _cached(record: RequestRecord) -> int | None:
    value = record.extra.get("server_cached_tokens")
    return int(value) if isinstance(value, int | float) else None


def _tolerated(prompt_tokens: int, template_tokens: int | None) -> float:
    """Cached tokens a fresh prompt of `prompt_tokens` (template included) may still show."""
    template = template_tokens or 0
    own = max(prompt_tokens - template, 0)
    return template + max(CACHE_TOLERANCE_TOKENS, CACHE_TOLERANCE_SHARE * own)


def prefix_cache_figures(
    records: list[RequestRecord], template_tokens: int | None = 0
) -> dict[str, Any]:
    """Cached prompt tokens the server reported: total, share of prompt tokens, and how many
    requests were answered from the cache (see the module docstring); None where not reported.
    `template_tokens`: the tokens the endpoint's template adds to every prompt (chat), which
    every request shares and the server may serve from its cache (runner._template_tokens)."""
    reported = [(r, c) for r in records if r.ok and (c := _cached(r)) is not None]
    if not reported:
        return {"reported_requests": 0, "cached_tokens": None, "cached_share": None, "hits": None}
    cached = sum(c for _, c in reported)
    prompt = sum(max(r.input_tokens, c) for r, c in reported)
    hits = sum(1 for r, c in reported if c > _tolerated(r.input_tokens, template_tokens))
    return {
        "reported_requests": len(reported),
        "cached_tokens": cached,
        "cached_share": cached / prompt if prompt else None,
        "hits": hits,
    }


def repeated_prompts(run: Run) -> int:
    """Requests that re-sent a prompt of the run's pool (the runner cycles through
    `prompt_pool` prompts: a dataset's, or at most sendplan.MAX_POOL synthetic ones, whose words
    it reshuffles on each cycle unless prefix reuse is allowed)."""
    pool = run.config.get("prompt_pool")
    if not isinstance(pool, int) or isinstance(pool, bool) or pool <= 0:
        return 0
    if run.config.get("prompt_cycles") == "reshuffled":
        return 0  # past the pool, the words are reshuffled: new prompts (sendplan.SendPlan.prompt)
    return max(len(run.records) - pool, 0)


def run_warnings(run: Run, figures: dict[str, Any]) -> list[str]:
    """What a reader of the results must know: prefix-cache hits nobody asked for, and prompts
    sent more than once."""
    if run.config.get("allow_prefix_reuse"):
        return []
    repeated = figures["repeated_prompts"]
    notes = (
        [
            f"{repeated} requests re-sent a prompt already sent in this run (a pool of "
            f"{run.config['prompt_pool']} prompts, cycled); a server with a prefix cache may "
            "answer them from it"
        ]
        if repeated
        else []
    )
    return notes + _cache_warning(run, figures["prefix_cache"])


def _cache_warning(run: Run, cache: dict[str, Any]) -> list[str]:
    workload = run.config.get("workload")
    if not cache["hits"] or (isinstance(workload, dict) and workload.get("shared_prefix_tokens")):
        return []  # none, or the workload asked for shared prefixes
    share = cache["cached_share"] or 0.0
    why = (
        "the dataset repeats prompts or shares prefixes"
        if run.config.get("dataset")
        else "the prompts were not fresh"
    )
    return [
        f"the server answered {cache['cached_tokens']:,} prompt tokens ({share:.0%}) from its "
        f"prefix cache in {cache['hits']} of {cache['reported_requests']} requests ({why}): "
        "TTFT is below a fresh prompt's; with --allow-prefix-reuse this is intended"
    ]


def run_slos(run: Run) -> tuple[float | None, float | None]:
    """The SLOs kept in the run config (None where not given)."""
    ttft, tpot = (_number(run.config.get(k)) for k in ("slo_ttft_s", "slo_tpot_s"))
    return ttft, tpot


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def bench_summary(
    run: Run, slo_ttft_s: float | None = None, slo_tpot_s: float | None = None
) -> dict[str, Any]:
    """`metrics.summarize(run)` plus the SLOs, the client's figures under "client" and
    "warnings". SLOs not given are taken from the run config."""
    if slo_ttft_s is None and slo_tpot_s is None:
        slo_ttft_s, slo_tpot_s = run_slos(run)
    figures = client_figures(run)
    return {
        **summarize(run, slo_ttft_s, slo_tpot_s),
        "slo_ttft_s": slo_ttft_s,
        "slo_tpot_s": slo_tpot_s,
        "client": figures,
        "warnings": run_warnings(run, figures),
    }

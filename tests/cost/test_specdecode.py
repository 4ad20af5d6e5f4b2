"""Speculative decoding in the cost model (cost/specdecode.py): the expected tokens per step of
the geometric acceptance model, hand-checked; a verification pass reading the weights once for
k + 1 positions (so it pays at small, memory-bound batches and not at compute-bound ones); the
draft's cost; and the flags, with one clear message per bad value."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from tokenprobe.cli import app
from tokenprobe.cost import SpecDecode, draft_fraction, estimate, make_deployment, spec_step
from tokenprobe.cost.estimate import decode_step
from tokenprobe.errors import ConfigError

DEP = make_deployment("llama-3.1-8b", "h100-sxm")
runner = CliRunner()


@pytest.mark.parametrize(
    ("method", "k", "a", "tokens"),
    [
        ("mtp", 1, 0.85, 1.85),  # 1 + 0.85
        ("mtp", 3, 0.7, (1 - 0.7**4) / 0.3),  # 1 + 0.7 + 0.49 + 0.343 = 2.533
        ("eagle", 4, 1.0, 5.0),  # every draft accepted: k + 1
        ("ngram", 4, 0.0, 1.0),  # none: the target's own token only
    ],
)
def test_tokens_per_step_is_the_geometric_expectation(
    method: str, k: int, a: float, tokens: float
) -> None:
    assert SpecDecode(method, k, a).tokens_per_step == pytest.approx(tokens)


def test_at_small_batch_a_verification_pass_costs_about_a_decode_step() -> None:
    """Batch 8 at a 1k context is memory-bound: a pass over 2 positions per sequence reads the
    weights once, like a one-token step, so MTP with 1.85 tokens per step nearly halves the time
    per token (the draft, one layer plus the LM head, adds a few percent)."""
    plain = decode_step(DEP, 8, 1024).time_s
    mtp = spec_step(DEP, 8, 1024, SpecDecode("mtp", 1, 0.85)).time_s
    assert 0.5 * plain < mtp < 0.62 * plain


def test_nothing_accepted_is_slower_than_plain_decode() -> None:
    """n-gram drafts that are never accepted: each step still verifies k + 1 positions and
    emits one token, so it can only cost more than a plain step."""
    plain = decode_step(DEP, 8, 1024).time_s
    assert spec_step(DEP, 8, 1024, SpecDecode("ngram", 4, 0.0)).time_s >= plain


def test_at_a_compute_bound_batch_speculation_buys_less() -> None:
    """At batch 1024 the weight matmuls are compute-bound: verifying 4 positions costs about 4x
    the FLOP of one, so the gain at batch 1024 is far below the gain at batch 4."""
    spec = SpecDecode("mtp", 3, 0.8)
    gain = {
        b: decode_step(DEP, b, 512).time_s / spec_step(DEP, b, 512, spec).time_s for b in (4, 1024)
    }
    assert gain[4] > 1.8 and gain[1024] < 0.75 * gain[4]


def test_estimate_reports_the_setting_and_prices_decode_with_it() -> None:
    kw = dict(input_tokens=1024, output_tokens=256, batch=8)
    plain = estimate("llama-3.1-8b", "h100-sxm", **kw)
    mtp = estimate("llama-3.1-8b", "h100-sxm", spec_decode=SpecDecode("mtp", 1, 0.85), **kw)
    d = mtp.to_dict()
    assert d["spec_decode"] == {
        "method": "mtp", "draft_tokens": 1, "acceptance": 0.85,
        "tokens_per_step": pytest.approx(1.85),
    }  # fmt: skip
    assert plain.to_dict()["spec_decode"] is None
    assert mtp.tpot_s < plain.tpot_s
    assert (
        d["energy"]["joules_per_output_token"]
        < plain.to_dict()["energy"]["joules_per_output_token"]
    )


@pytest.mark.parametrize(
    ("text", "acceptance", "field"),
    [
        ("mtp", None, "spec_decode"),
        ("medusa:2", None, "spec_decode"),
        ("mtp:0", None, "spec_decode"),
        ("eagle:4", None, "spec_acceptance"),
        ("mtp:2", 1.5, "spec_acceptance"),
    ],
)
def test_bad_settings_name_the_field(text: str, acceptance: float | None, field: str) -> None:
    with pytest.raises(ConfigError, match=field):
        SpecDecode.parse(text, acceptance)


def test_cli_flags() -> None:
    base = ["estimate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--batch", "8"]
    ok = runner.invoke(app, [*base, "--spec-decode", "mtp:1", "--json"])
    assert ok.exit_code == 0, ok.output
    assert json.loads(ok.stdout)["spec_decode"]["tokens_per_step"] == pytest.approx(1.85)
    table = runner.invoke(app, [*base, "--spec-decode", "ngram:4", "--spec-acceptance", "0.3"])
    assert table.exit_code == 0 and "tokens/step" in table.output, table.output
    bad = runner.invoke(app, [*base, "--spec-decode", "eagle:4"], env={"COLUMNS": "300"})
    assert bad.exit_code == 2 and "spec_acceptance" in bad.output, bad.output


def test_draft_fraction_of_a_tied_embedding_model_counts_one_vocab_matrix() -> None:
    """Llama-3.2-1B ties its LM head to the embedding (config.json: hidden 2048, intermediate
    8192, 32 heads and 8 KV heads of 64, 16 layers, vocab 128256, tie_word_embeddings true).
    One layer: q and o 2048 x 2048 each, k and v 2048 x 512 each (10,485,760), the MLP
    3 x 2048 x 8192 (50,331,648), two RMSNorms (4,096): 60,821,504; 16 of them, the one
    128256 x 2048 matrix (262,668,288) and the final norm: 1,235,814,400 parameters. The
    decoder body is the model less that one matrix (not two): the draft reads one layer (plus
    a 16th of the final norm) and the head: (60,821,504 + 128 + 262,668,288) / 1,235,814,400."""
    dep = make_deployment("llama-3.2-1b", "h100-sxm")
    assert dep.model.params_active == 1_235_814_400
    expected = (60_821_504 + 2048 / 16 + 262_668_288) / 1_235_814_400
    assert draft_fraction(dep) == pytest.approx(expected, rel=1e-9)
    # an untied model (Llama-3.1-8B) still has its head counted apart from the embedding
    m = DEP.model
    head = m.vocab_size * m.hidden_size
    untied = ((m.params_active - 2 * head) / m.num_layers + head) / m.params_active
    assert draft_fraction(DEP) == pytest.approx(untied, rel=1e-9)


def test_an_unknown_method_is_named_before_the_missing_acceptance() -> None:
    with pytest.raises(ConfigError, match=r"^spec_decode='medusa:2'"):
        SpecDecode.parse("medusa:2")

"""Credentials in a URL or a key: how requests authenticate, and what is written instead."""

from __future__ import annotations

import base64
import json

import pytest
from typer.testing import CliRunner

import tokenprobe.cli.bench  # noqa: F401  (registers the commands)
from tokenprobe.cli.app import app
from tokenprobe.errors import ConfigError
from tokenprobe.loadgen import BenchConfig
from tokenprobe.loadgen.credentials import credentials, mask_url, metrics_urls
from tokenprobe.records import redact


def test_user_and_password_are_basic_auth_and_leave_the_url():
    c = credentials("http://bob:p%40ss@127.0.0.1:8000/v1?model=x", None)
    assert c.authorization == "Basic " + base64.b64encode(b"bob:p@ss").decode()
    assert str(c.request_url) == "http://127.0.0.1:8000/v1?model=x" == c.shown_url
    assert {"p@ss", "p%40ss", c.authorization.split()[1]} <= set(c.secrets)


def test_a_lone_token_is_bearer_and_key_like_query_values_are_masked_when_shown():
    c = credentials("https://sk-abc123@api.example/v1?api-key=q1&Token=q2&n=3", None)
    assert c.authorization == "Bearer sk-abc123"
    assert c.request_url.query["api-key"] == "q1"  # still sent: the server may need it
    assert c.shown_url == "https://api.example/v1?api-key=***&Token=***&n=3"
    assert {"sk-abc123", "q1", "q2"} <= set(c.secrets)


def test_a_key_given_twice_is_refused_without_showing_either():
    with pytest.raises(ConfigError) as info:
        credentials("http://u:pw-1@h/v1", "key-2")
    assert "pw-1" not in str(info.value) and "key-2" not in str(info.value)


def test_a_bad_url_is_refused_with_its_credentials_masked():
    for url in ("http://u:pw-77@h:notaport/v1", "ftp://u:pw-77@h/v1", "http://u:pw-77@/v1"):
        with pytest.raises(ConfigError) as info:
            BenchConfig(url=url, model="m", concurrency=1, num_requests=1, input_tokens=4)
        assert "pw-77" not in str(info.value) and "url=" in str(info.value)
    assert mask_url("http://a:b@h/v1?key=z&x=1") == "http://***@h/v1?key=***&x=1"


def test_the_cli_error_for_a_bad_url_does_not_show_its_password(tmp_path):
    args = ["bench", "--url", "http://u:pw-77@h:99999/v1", "--model", "m", "--concurrency", "1"]
    args += ["--num-requests", "1", "--input-tokens", "4", "--out", str(tmp_path / "r")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2 and "pw-77" not in result.output


def test_config_writes_the_masked_url_and_never_the_key():
    config = BenchConfig(
        url="http://u:pw-5@h:1/v1?token=t-6",
        model="m",
        concurrency=1,
        num_requests=1,
        input_tokens=4,
    )
    doc = json.dumps(config.to_dict())
    assert "pw-5" not in doc and "t-6" not in doc and "token=***" in doc
    keyed = BenchConfig(
        url="http://h:1/v1",
        model="m",
        concurrency=1,
        num_requests=1,
        input_tokens=4,
        api_key_value="sk-7",
    )
    assert "sk-7" not in json.dumps(keyed.to_dict()) and "sk-7" not in repr(keyed)
    assert keyed.secrets() == ("sk-7",)


def test_metrics_url_keeps_the_query_for_the_scrape_and_masks_it_when_shown():
    scrape, shown = metrics_urls("http://u:pw@h:1/v1/?key=k-8")
    assert scrape == "http://h:1/metrics?key=k-8" and shown == "http://h:1/metrics?key=***"


def test_redact_replaces_secrets_in_strings_only_so_json_stays_valid():
    doc = {"a": "x sk-9 y", "sk-9": [1.5, "sk-9sk-9"], "n": 19, "t": [0.1, 0.2]}
    out = redact(doc, ["sk-9", "1", "9"])
    assert json.loads(json.dumps(out)) == out
    assert out["a"] == "x *** y"  # the longest secret first, whole
    assert "sk-9" not in json.dumps(out) and out["n"] == 19 and out["t"] == [0.1, 0.2]

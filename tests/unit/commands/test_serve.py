"""``speechkit serve``'s arguments: model names, who may be served without a token, the token file."""
from __future__ import annotations

import pytest

from speechkit.commands.serve import is_loopback, read_token
from speechkit.errors import HparamsError, RunOptionsError
from speechkit.serve.limits import ServeLimits
from speechkit.serve.models import parse_model_spec


def test_model_names():
    assert parse_model_spec("results/asr-model/").name == "asr-model"
    assert parse_model_spec("org/sep-ctc") == parse_model_spec("sep-ctc=org/sep-ctc")
    assert parse_model_spec("https://host/models/voc?rev=2").name == "voc"
    assert parse_model_spec("fast=https://host/m").source == "https://host/m"
    with pytest.raises(HparamsError, match="choose one with NAME=SOURCE"):
        parse_model_spec("bad name=folder")


def test_loopback_addresses():
    assert all(map(is_loopback, ["127.0.0.1", "127.8.0.3", "::1", "localhost"]))
    assert not any(map(is_loopback, ["0.0.0.0", "192.168.1.5", "::", "example.org"]))


def test_token_rules(tmp_path):
    assert read_token(None, "127.0.0.1") is None
    with pytest.raises(RunOptionsError, match="--host 0.0.0.0 serves beyond this machine"):
        read_token(None, "0.0.0.0")
    (tmp_path / "short").write_text("abc\n")
    with pytest.raises(RunOptionsError, match="at least 16 characters"):
        read_token(tmp_path / "short", "0.0.0.0")
    with pytest.raises(RunOptionsError, match="cannot read it"):
        read_token(tmp_path / "missing", "0.0.0.0")
    (tmp_path / "good").write_text("0123456789abcdef-token\n")
    assert read_token(tmp_path / "good", "0.0.0.0") == "0123456789abcdef-token"


def test_limits_must_be_positive():
    with pytest.raises(ValueError, match="max_batch_items must be positive"):
        ServeLimits(max_batch_items=0)
    with pytest.raises(ValueError, match="max_wait_ms must be 0 or more"):
        ServeLimits(max_wait_ms=-1)
    assert ServeLimits(max_wait_ms=0).max_wait_ms == 0


def test_the_options_defaults_are_the_limits_defaults():
    from speechkit.commands.serve import ServeLimitsDefaults

    defaults = ServeLimits()
    for name, value in vars(ServeLimitsDefaults).items():
        if not name.startswith("_"):
            assert getattr(defaults, name) == value, name


def test_tokens_are_redacted_from_every_log_record():
    import logging

    from speechkit.serve.protocol import RedactTokens

    def redacted(message, *args):
        record = logging.LogRecord("uvicorn.error", logging.INFO, "", 0, message, args, None)
        assert RedactTokens("s3cret-token-value-1234").filter(record)
        return record.getMessage()

    assert redacted('%s - "WebSocket %s" [accepted]', "127.0.0.1:5", "/v1/stream?token=abc") == \
        '127.0.0.1:5 - "WebSocket /v1/stream?token=[redacted]" [accepted]'
    assert redacted("GET /?a=1&TOKEN=xyz HTTP/1.1") == "GET /?a=1&TOKEN=[redacted] HTTP/1.1"
    assert redacted("header Authorization: Bearer abc.def") == "header Authorization: Bearer [redacted]"
    assert redacted("saw s3cret-token-value-1234 in a path") == "saw [redacted] in a path"
    assert redacted("nothing %d here", 5) == "nothing 5 here"

"""Logs as data: tracebacks kept in JSON and console, secrets masked at any depth."""

from __future__ import annotations

import json
import logging

import pytest
import structlog
from structlog.testing import capture_logs

from bot.logs import REDACTED, configure, redact


@pytest.fixture(autouse=True)
def _restore_logging():
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    structlog.reset_defaults()


def _fail() -> None:
    raise ValueError("the bad thing")


def _json_lines(err: str) -> list[dict]:
    return [json.loads(line) for line in err.splitlines() if line.startswith("{")]


def test_json_log_lines_keep_the_traceback(capsys):
    configure("json")
    try:
        _fail()
    except ValueError:
        structlog.get_logger("citebot.test").exception("it_failed", turn_id="t-1")
    try:
        _fail()
    except ValueError:
        logging.getLogger("slack_bolt.test").exception("a library failed")  # stdlib logger
    lines = _json_lines(capsys.readouterr().err)
    assert [e["event"] for e in lines] == ["it_failed", "a library failed"]
    for e in lines:
        assert "Traceback (most recent call last)" in e["exception"]
        assert "in _fail" in e["exception"] and "ValueError: the bad thing" in e["exception"]
        assert "exc_info" not in e


def test_console_logs_keep_the_traceback_without_local_variables(capsys):
    configure("console")
    secret_local = "xoxb-1111-2222-local"  # noqa: F841 - a local a rich traceback would print
    try:
        _fail()
    except ValueError:
        structlog.get_logger("citebot.test").exception("it_failed")
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and "ValueError: the bad thing" in err
    assert "xoxb-1111-2222-local" not in err


def test_redaction_walks_nested_lists_dicts_and_strings():
    event = {
        "event": "slack_call_failed",
        "errors": ["invalid token xoxb-123-456-abc", ("xapp-1-A1-2-abc", 3)],
        "request": {"headers": {"Authorization": "Bearer sk-live-abc", "X-Other": "fine"},
                    "body": {"nested": {"api_key": "plain-looking-value", "keep": 1}},
                    "note": "authorization: Bearer abc.def-ghi_jkl"},
        "anthropic": "key sk-ant-api03-abcdef was refused",
        "basic": "Authorization: Basic dXNlcjpwYXNzd29yZA==",
        "token": None,
        "count": 4,
    }
    out = redact(None, "error", event)
    dumped = json.dumps(out)
    for secret in ("xoxb-123", "xapp-1", "sk-live-abc", "plain-looking-value", "abc.def-ghi_jkl",
                   "sk-ant-api03", "dXNlcjpwYXNzd29yZA"):
        assert secret not in dumped, secret
    assert out["request"]["headers"] == {"Authorization": REDACTED, "X-Other": "fine"}
    assert out["request"]["body"]["nested"] == {"api_key": REDACTED, "keep": 1}
    assert out["errors"][0] == f"invalid token {REDACTED}" and out["errors"][1][1] == 3
    assert out["token"] is None and out["count"] == 4 and out["event"] == "slack_call_failed"


def test_redaction_reaches_the_rendered_json_line_and_its_traceback(capsys):
    configure("json")
    try:
        raise RuntimeError("Slack said invalid_auth for xoxb-9999-8888-zz")
    except RuntimeError:
        structlog.get_logger("citebot.test").exception(
            "slack_failed", errors=[{"token": "xoxe-1-abc"}], detail={"list": ["sk-ant-xyz"]})
    (line,) = _json_lines(capsys.readouterr().err)
    dumped = json.dumps(line)
    assert "xoxb-9999" not in dumped and "xoxe-1-abc" not in dumped and "sk-ant-xyz" not in dumped
    assert "Traceback" in line["exception"] and REDACTED in line["exception"]


def test_capture_logs_sees_structured_events():
    with capture_logs() as logs:
        structlog.get_logger("citebot.test").info("turn", refused=False, timings_ms={"total": 1.0})
    assert logs == [{"event": "turn", "log_level": "info", "refused": False,
                     "timings_ms": {"total": 1.0}}]

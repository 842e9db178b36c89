"""Hostile settings through the real command line: every bad value or file is one line,
`citebot: bad setting: VAR: …` saying what to fix, exit status 2, never a traceback, and
never the password or token the value held."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import REPO

SECRET = "Zq7xS3cretPW"
# Every secret setting holds it too: no message may quote one of them either.
SECRET_SETTINGS = ("SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET", "SLACK_APP_TOKEN", "ANTHROPIC_API_KEY",
                   "CITEBOT_ES_API_KEY", "CITEBOT_ES_PASSWORD")
SEARCH_IN_CHANNEL = ("search", "--channel", "C0123ENG", "anything")


@dataclass(frozen=True)
class Case:
    env: dict[str, str]
    variable: str
    says: str  # a piece of the fix the message must give
    argv: tuple[str, ...] = ("chunks",)
    files: dict[str, bytes] = field(default_factory=dict)  # written under the run's folder


CASES = {
    "redis_url_missing_colon": Case(
        {"REDIS_URL": f"redis//:{SECRET}@127.0.0.1:6390/0"}, "REDIS_URL",
        "'redis//:***@127.0.0.1:6390/0' is not a URL"),
    "redis_url_bad_port": Case(
        {"REDIS_URL": f"redis://:{SECRET}@127.0.0.1:notaport/0"}, "REDIS_URL",
        "must be a number from 0 to 65535", ("turns", "show", "x")),
    "redis_url_unknown_scheme": Case(
        {"REDIS_URL": f"http://:{SECRET}@127.0.0.1:6390/0"}, "REDIS_URL",
        "use redis:// or rediss:// or unix://", ("turns", "show", "x")),
    "redis_url_bad_query_argument": Case(
        {"REDIS_URL": f"redis://:{SECRET}@127.0.0.1:6390/0?socket_timeout=soon"}, "REDIS_URL",
        "Invalid value for 'socket_timeout'", ("turns", "show", "x")),
    "es_url_bad_port": Case(
        {"CITEBOT_ES_URL": f"http://elastic:{SECRET}@127.0.0.1:notaport"}, "CITEBOT_ES_URL",
        "'http://elastic:***@127.0.0.1:***' has no valid host and port"),
    "es_url_unknown_scheme": Case(
        {"CITEBOT_ES_URL": f"ftp://elastic:{SECRET}@127.0.0.1:9250"}, "CITEBOT_ES_URL",
        "use http:// or https://"),
    "es_url_no_scheme": Case(
        {"CITEBOT_ES_URL": f"elastic:{SECRET}@127.0.0.1:9250"}, "CITEBOT_ES_URL", "is not a URL"),
    "es_url_password_with_at_and_slash": Case(
        {"CITEBOT_ES_URL": f"http://elastic:a@b/{SECRET}@127.0.0.1:x"}, "CITEBOT_ES_URL",
        "elastic:***@127.0.0.1"),
    "es_url_api_key_in_query": Case(
        {"CITEBOT_ES_URL": f"http://127.0.0.1:99999/?api_key={SECRET}&pretty"}, "CITEBOT_ES_URL",
        "api_key=***&pretty"),
    "anthropic_base_url_key_in_query": Case(
        {"ANTHROPIC_BASE_URL": f"proxy.internal/v1?key={SECRET}"}, "ANTHROPIC_BASE_URL",
        "is not a URL (expected e.g. https://"),
    "source_url_with_password_and_no_path": Case(
        {"CITEBOT_SOURCE_URL": f"https://wiki:{SECRET}@wiki.example.com/"}, "CITEBOT_SOURCE_URL",
        "is not a link template"),
    "source_url_without_host": Case(
        {"CITEBOT_SOURCE_URL": "https:///{path}"}, "CITEBOT_SOURCE_URL", "gives no usable link"),
    "number_with_junk": Case(
        {"CITEBOT_TOP_K": "ten", **{name: SECRET for name in SECRET_SETTINGS}}, "CITEBOT_TOP_K",
        "valid integer"),
    "timeout_not_a_number": Case(
        {"CITEBOT_ES_TIMEOUT_S": "nan", "CITEBOT_ES_URL": "http://127.0.0.1:9250"},
        "CITEBOT_ES_TIMEOUT_S", "finite number"),
    "timeout_negative": Case(
        {"CITEBOT_ES_TIMEOUT_S": "-1", "CITEBOT_ES_URL": "http://127.0.0.1:9250"},
        "CITEBOT_ES_TIMEOUT_S", "greater than 0"),
    "scopes_not_utf8": Case(
        {"CITEBOT_SCOPES": "scopes.toml"}, "CITEBOT_SCOPES",
        "scopes.toml is not UTF-8 text: byte 32 (line 3, 0xe9)", SEARCH_IN_CHANNEL,
        {"scopes.toml": '[default]\nsources = ["**"]\n# caf\xe9\n'.encode("latin-1")}),
    "scopes_toml_syntax": Case(
        {"CITEBOT_SCOPES": "scopes.toml"}, "CITEBOT_SCOPES", "is not valid TOML", SEARCH_IN_CHANNEL,
        {"scopes.toml": b'[default\nsources = ["**"]\n'}),
    "scopes_nested_too_deeply": Case(
        {"CITEBOT_SCOPES": "scopes.toml"}, "CITEBOT_SCOPES", "too deeply", SEARCH_IN_CHANNEL,
        {"scopes.toml": b"[default]\nsources = " + b"[" * 5000 + b"\n"}),
    "scopes_directory": Case(
        {"CITEBOT_SCOPES": "."}, "CITEBOT_SCOPES", "is a directory, not a file", SEARCH_IN_CHANNEL),
    "scopes_empty_value": Case(
        {"CITEBOT_SCOPES": ""}, "CITEBOT_SCOPES", "is set but empty", SEARCH_IN_CHANNEL),
    "scopes_missing": Case(
        {"CITEBOT_SCOPES": "nowhere.toml"}, "CITEBOT_SCOPES", "No such file", SEARCH_IN_CHANNEL),
    "scopes_below_a_file": Case(
        {"CITEBOT_SCOPES": "plain/scopes.toml"}, "CITEBOT_SCOPES", "cannot read", SEARCH_IN_CHANNEL,
        {"plain": b"not a folder"}),
    "glossary_not_utf8": Case(
        {"CITEBOT_GLOSSARY": "glossary.csv"}, "CITEBOT_GLOSSARY",
        "is not UTF-8 text: byte 14 (line 2, 0xe9)", ("search", "anything"),
        {"glossary.csv": "term,alias\ncaf\xe9,coffee\n".encode("latin-1")}),
    "glossary_extra_cells": Case(
        {"CITEBOT_GLOSSARY": "glossary.csv"}, "CITEBOT_GLOSSARY",
        "line 2 has more cells than the header's 2", ("search", "anything"),
        {"glossary.csv": b"term,alias\nIC,Incident Commander,the one in charge\n"}),
    "glossary_cell_past_the_csv_limit": Case(
        {"CITEBOT_GLOSSARY": "glossary.csv"}, "CITEBOT_GLOSSARY", "line 2 is not CSV: field larger",
        ("search", "anything"), {"glossary.csv": b'term,alias\nIC,"' + b"x" * 200_000 + b'"\n'}),
    "glossary_directory": Case(
        {"CITEBOT_GLOSSARY": "."}, "CITEBOT_GLOSSARY", "is a directory", ("search", "anything")),
    "glossary_empty_value": Case(
        {"CITEBOT_GLOSSARY": ""}, "CITEBOT_GLOSSARY", "is set but empty", ("search", "anything")),
    "encoder_precision_unknown": Case(
        {"CITEBOT_ENCODER_PRECISION": "fp16"}, "CITEBOT_ENCODER_PRECISION", "use fp32 (the default) or int8"),
    "encoder_threads_zero": Case(
        {"CITEBOT_ENCODER_THREADS": "0"}, "CITEBOT_ENCODER_THREADS", "greater than or equal to 1"),
    "cache_empty_value": Case({"CITEBOT_CACHE": ""}, "CITEBOT_CACHE", "is set but empty"),
    "env_file_not_utf8": Case(
        {}, ".env", ".env is not UTF-8 text: byte 21 (line 2, 0xe9)", ("chunks",),
        {".env": "CITEBOT_TOP_K=5\n# caf\xe9\n".encode("latin-1")}),
}


def run_citebot(argv: tuple[str, ...], env: dict[str, str], cwd: Path,
                timeout_s: float = 60) -> subprocess.CompletedProcess[str]:
    """`citebot ARGV` as a person runs it (bot.cli's main), in cwd, with only these settings."""
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("CITEBOT_", "SLACK_", "REDIS_", "ANTHROPIC_"))}
    return subprocess.run([sys.executable, "-m", "bot.cli", *argv], cwd=cwd, timeout=timeout_s,
                          env={**base, "PYTHONPATH": str(REPO), "CITEBOT_STORE": str(cwd / "store"),
                               **env}, capture_output=True, text=True, check=False)


@pytest.mark.slow  # a process per case: the fast run leaves them to CI
@pytest.mark.parametrize("name", list(CASES))
def test_a_bad_setting_is_one_line_naming_it_without_its_secret(name, tmp_path):
    case = CASES[name]
    for relative, data in case.files.items():
        (tmp_path / relative).write_bytes(data)
    result = run_citebot(case.argv, case.env, tmp_path)
    out = result.stdout + result.stderr
    assert "Traceback" not in out, out
    assert result.returncode == 2, out
    assert f"citebot: bad setting: {case.variable}: " in result.stderr, out
    assert case.says in result.stderr, out
    assert SECRET not in out, out


def test_a_pipe_as_the_scopes_file_fails_at_once(tmp_path):
    """A FIFO (or a device) would block the read forever, or never end: refused unread."""
    os.mkfifo(tmp_path / "scopes.toml")
    result = run_citebot(SEARCH_IN_CHANNEL, {"CITEBOT_SCOPES": "scopes.toml"}, tmp_path, timeout_s=30)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert "bad setting: CITEBOT_SCOPES: scopes.toml is not a regular file" in result.stderr


def test_a_valid_env_file_and_url_still_work(tmp_path):
    """The checks refuse only what is broken: a URL with credentials and a query is fine."""
    (tmp_path / ".env").write_text("CITEBOT_TOP_K=5\n", encoding="utf-8")
    result = run_citebot(("chunks",), {"REDIS_URL": f"redis://:{SECRET}@127.0.0.1:6390/0?db=0",
                                       "CITEBOT_SOURCE_URL": "https://wiki.example.com/{path}"},
                         tmp_path)
    assert result.returncode == 0, result.stderr


def test_a_long_bracket_line_in_a_scopes_file_costs_linear_time(tmp_path):
    """A multi-line string may hold '[' and thousands of spaces; the error path that looks
    for a table's line must not backtrack on it (it took 11 s at 2,000 spaces)."""
    from bot.slack.scopes import load_scopes
    from search.errors import ConfigError
    from tests.fuzz_support import within_budget

    path = tmp_path / "scopes.toml"
    path.write_text('x = """\n[' + " " * 1500 + 'a\n"""\n[default]\nsources = ["**"]\n',
                    encoding="utf-8")
    def refused() -> ConfigError:
        with pytest.raises(ConfigError, match="unknown table") as err:
            load_scopes(path)
        return err.value

    within_budget(refused)  # the budget is checked on the path that raises

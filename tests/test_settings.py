"""Settings: a bad value stops citebot at start with the variable a person actually sets."""

from __future__ import annotations

import pytest

from bot.settings import env_name, load_settings
from search.config import redact_url
from search.errors import ConfigError


def test_a_bad_redis_url_is_reported_as_redis_url(monkeypatch):
    monkeypatch.setenv("REDIS_URL", "localhost:6379")
    with pytest.raises(ConfigError) as err:
        load_settings()
    assert "REDIS_URL: " in str(err.value) and "CITEBOT_REDIS_URL" not in str(err.value)


@pytest.mark.parametrize(("variable", "value", "named"), [
    ("ANTHROPIC_BASE_URL", "nonsense", "ANTHROPIC_BASE_URL"),
    ("CITEBOT_TOP_K", "0", "CITEBOT_TOP_K"),
    ("CITEBOT_ES_URL", "es.internal", "CITEBOT_ES_URL"),
    ("CITEBOT_METRICS_PORT", "70000", "CITEBOT_METRICS_PORT"),
])
def test_every_bad_value_names_its_variable(monkeypatch, variable, value, named):
    monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigError, match=f"bad setting: {named}: "):
        load_settings()


def test_aliased_fields_name_their_first_alias():
    assert env_name("redis_url") == "REDIS_URL"
    assert env_name("slack_bot_token") == "SLACK_BOT_TOKEN"
    assert env_name("store") == "CITEBOT_STORE"


@pytest.mark.parametrize(("url", "shown"), [
    ("redis//:PW@127.0.0.1:6390/0", "redis//:***@127.0.0.1:6390/0"),  # the missing colon
    ("http://elastic:PW@127.0.0.1:notaport", "http://elastic:***@127.0.0.1:***"),
    ("elastic:PW@es:9200", "elastic:***@es:9200"),  # no scheme
    ("http://u:p@ss/w#rd@h/x", "http://u:***@h/x"),  # a raw @, / and # in the password
    ("redis://PW@h", "redis://***@h"),  # a lone user part may be a token
    ("http://elastic:PW", "http://elastic:***"),  # the host left out: the password is the port
    ("http://h:9200/?api_key=PW&pretty", "http://h:9200/?api_key=***&pretty"),
    ("https://wiki.example.com/{path}", "https://wiki.example.com/{path}"),
    ("http://[::1]:9200", "http://[::1]:9200"),
])
def test_a_url_is_shown_with_its_credentials_masked(url, shown):
    assert redact_url(url) == shown


def test_readiness_never_shows_the_redis_password(monkeypatch):
    """/readyz reports a Redis that is down by its address, without the URL's password."""
    from bot.wiring import Components

    monkeypatch.setenv("REDIS_URL", "redis://:Zq7xS3cretPW@127.0.0.1:1/0")  # nothing listens on 1
    checks = Components(load_settings()).readiness()
    assert checks["redis"] != "ok" and "Zq7xS3cretPW" not in checks["redis"], checks

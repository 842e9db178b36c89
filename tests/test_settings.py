"""Settings: a bad value stops citebot at start with the variable a person actually sets."""

from __future__ import annotations

import pytest

from bot.settings import env_name, load_settings
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

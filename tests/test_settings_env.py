"""Where settings come from, pinned case by case: the environment (names in any case, the
CITEBOT_ prefix, the unprefixed aliases), a `.env` file in the working directory (its
parsing rules), which wins, what is ignored, and that a bad value from either names its
variable. These held under pydantic-settings and hold for bot/settings_env.py, which
replaced it (docs/decisions/0051-settings-without-pydantic-settings.md).

The conftest runs each test in its own empty folder with no CITEBOT_, SLACK_ or service
variables set."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from bot.settings import load_settings
from search.errors import ConfigError


def dotenv(text: str) -> None:
    Path(".env").write_text(text, encoding="utf-8")


def test_a_prefixed_variable_sets_its_field(monkeypatch):
    monkeypatch.setenv("CITEBOT_TOP_K", "7")
    monkeypatch.setenv("CITEBOT_CLAIM_JUDGE", "yes")
    s = load_settings()
    assert (s.top_k, s.claim_judge, s.passages) == (7, True, 5)


def test_variable_names_are_matched_in_any_case(monkeypatch):
    monkeypatch.setenv("citebot_top_k", "8")
    monkeypatch.setenv("Citebot_Passages", "3")
    monkeypatch.setenv("redis_url", "redis://127.0.0.1:1/0")
    s = load_settings()
    assert (s.top_k, s.passages, s.redis_url) == (8, 3, "redis://127.0.0.1:1/0")


@pytest.mark.parametrize("name", ["REDIS_URL", "CITEBOT_REDIS_URL"])
def test_an_aliased_field_takes_either_name(monkeypatch, name):
    monkeypatch.setenv(name, "redis://127.0.0.1:1/0")
    assert load_settings().redis_url == "redis://127.0.0.1:1/0"


def test_the_first_alias_wins_when_both_are_set(monkeypatch):
    monkeypatch.setenv("CITEBOT_REDIS_URL", "redis://127.0.0.1:2/0")
    monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:1/0")
    monkeypatch.setenv("CITEBOT_SLACK_BOT_TOKEN", "xoxb-second")
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-first")
    s = load_settings()
    assert s.redis_url == "redis://127.0.0.1:1/0"
    assert s.slack_bot_token is not None and s.slack_bot_token.get_secret_value() == "xoxb-first"


def test_unknown_and_unprefixed_names_are_ignored(monkeypatch):
    monkeypatch.setenv("CITEBOT_NO_SUCH_SETTING", "anything")
    monkeypatch.setenv("TOP_K", "3")  # a field's bare name is not its variable
    dotenv("CITEBOT_ALSO_UNKNOWN=1\nTOP_K=4\npassages=2\nSOMETHING_ELSE=x\n")
    s = load_settings()
    assert (s.top_k, s.passages) == (10, 5)


def test_an_empty_value_is_not_unset(monkeypatch):
    """An empty URL means unset (the validators say so); an empty number is refused."""
    monkeypatch.setenv("CITEBOT_ES_URL", "")
    assert load_settings().es_url is None
    monkeypatch.setenv("CITEBOT_TOP_K", "")
    with pytest.raises(ConfigError, match="bad setting: CITEBOT_TOP_K: "):
        load_settings()


def test_the_word_none_is_a_value_not_unset(monkeypatch):
    monkeypatch.setenv("CITEBOT_ES_URL", "None")
    with pytest.raises(ConfigError, match="bad setting: CITEBOT_ES_URL: 'None' is not a URL"):
        load_settings()


def test_the_env_file_parsing_rules():
    dotenv(
        "# a comment line\n"
        "\n"
        "export CITEBOT_TOP_K=4\n"
        "CITEBOT_INDEX='single quoted'  # a comment after the value\n"
        'CITEBOT_SLASH_COMMAND="/double"\n'
        "CITEBOT_REDIS_PREFIX = spaced:   # spaces around = and before the comment\n"
        "CITEBOT_ANTHROPIC_MODEL=claude-x#not-a-comment\n"
        "CITEBOT_ES_USERNAME=\n"
        "CITEBOT_PASSAGES\n"  # no '=': unset, the default stays
        "CITEBOT_SOURCE_URL=https://wiki.example.com/${SPACE}/{path}\n"
    )
    s = load_settings()
    assert s.top_k == 4
    assert s.index == "single quoted"
    assert s.slash_command == "/double"
    assert s.redis_prefix == "spaced:"
    assert s.anthropic_model == "claude-x#not-a-comment"
    assert s.es_username == ""
    assert s.passages == 5
    assert s.source_url == "https://wiki.example.com//{path}"  # ${SPACE} unset: interpolated empty


def test_the_env_file_interpolates_earlier_lines_and_the_environment(monkeypatch):
    monkeypatch.setenv("SPACE", "eng")
    dotenv('HOST=wiki.example.com\nCITEBOT_SOURCE_URL="https://${HOST}/${SPACE}/{path}"\n'
           "CITEBOT_INDEX='${SPACE}-literal'\n")
    s = load_settings()
    assert s.source_url == "https://wiki.example.com/eng/{path}"
    assert s.index == "eng-literal"  # single quotes too


def test_a_double_quoted_value_may_span_lines_and_hold_escapes():
    dotenv('CITEBOT_ANTHROPIC_MODEL="two\\nlines"\nCITEBOT_INDEX="a\nb"\n')
    s = load_settings()
    assert s.anthropic_model == "two\nlines"
    assert s.index == "a\nb"


def test_the_environment_wins_over_the_env_file(monkeypatch):
    dotenv("CITEBOT_TOP_K=4\nCITEBOT_PASSAGES=3\nREDIS_URL=redis://127.0.0.1:1/0\n")
    monkeypatch.setenv("CITEBOT_TOP_K", "6")
    monkeypatch.setenv("CITEBOT_REDIS_URL", "redis://127.0.0.1:2/0")  # the other alias, still the environment
    s = load_settings()
    assert (s.top_k, s.passages, s.redis_url) == (6, 3, "redis://127.0.0.1:2/0")


def test_an_override_wins_over_both(monkeypatch):
    dotenv("CITEBOT_TOP_K=4\n")
    monkeypatch.setenv("CITEBOT_TOP_K", "6")
    monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:1/0")
    s = load_settings(top_k=9, redis_url=None, store=Path("elsewhere"))
    assert (s.top_k, s.redis_url, s.store) == (9, None, Path("elsewhere"))


def test_only_the_working_directory_env_file_is_read(tmp_path, monkeypatch):
    dotenv("CITEBOT_TOP_K=4\n")
    (tmp_path / "below").mkdir()
    monkeypatch.chdir(tmp_path / "below")
    assert load_settings().top_k == 10


def test_a_bad_value_in_the_env_file_names_its_variable():
    dotenv("CITEBOT_TOP_K=ten\nSLACK_CLIENT_ID=123.456\n")
    with pytest.raises(ConfigError) as err:
        load_settings()
    assert str(err.value).startswith("bad setting: CITEBOT_TOP_K: ")
    assert "SLACK_CLIENT_SECRET: is not set but SLACK_CLIENT_ID is" in str(err.value)  # a default, checked


def test_an_env_file_that_is_not_utf8_is_a_bad_setting():
    Path(".env").write_bytes("CITEBOT_TOP_K=5\n# caf\xe9\n".encode("latin-1"))
    with pytest.raises(ConfigError, match="bad setting: .env: .env is not UTF-8 text"):
        load_settings()


def test_secrets_from_either_source_never_print(monkeypatch):
    dotenv("SLACK_BOT_TOKEN=xoxb-from-the-file\n")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-from-the-env")
    s = load_settings()
    shown = repr(s) + str(s) + s.model_dump_json()
    assert "xoxb-from-the-file" not in shown and "sk-ant-from-the-env" not in shown
    assert s.slack_bot_token is not None and s.slack_bot_token.get_secret_value() == "xoxb-from-the-file"


def test_settings_are_frozen():
    s = load_settings()
    with pytest.raises(ValidationError):
        s.top_k = 3  # type: ignore[misc]

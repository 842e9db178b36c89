"""Fuzz pass over the settings parsers: the scopes file, the glossary file and the URL
settings. Whatever the input, the parser either accepts it or raises citebot's ConfigError
(never another exception), within the per-input budget, and a message never quotes the
secret a URL held."""

from __future__ import annotations

import itertools
import string
from pathlib import Path

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from bot.settings import load_settings
from bot.slack.scopes import Scopes, load_scopes
from search.config import redact_url
from search.errors import ConfigError
from search.glossary import Glossary
from tests.fuzz_support import FUZZ_SETTINGS, within_budget

pytestmark = pytest.mark.fuzz

_counter = itertools.count()

# Pieces a scopes file is made of, and pieces that break it: tables, keys, values, quotes,
# nesting, long runs of what a regex might backtrack on.
_LINES = st.one_of(
    st.sampled_from([
        "[default]", "[channels.C0123ENG]", "[channels.general]", "[users.U0123ALICE]",
        "[users.alice]", "[channels]", "[[channels]]", "[ default ]", "[bogus]",
        'sources = ["**"]', 'sources = "engineering/**"', "sources = []", "sources = [1, 2]",
        'sources = ["/abs/**"]', 'sources = [""]', 'reply = "thread"', 'reply = "loud"',
        "reply = 3", "shared = true", 'shared = "yes"', 'name = "eng"', "colour = 1",
        'x = """', '"""', "default = 1", "channels = 2", "# comment", "", "=", "[", "]", '"',
    ]),
    st.builds(lambda c, n: c * n, st.sampled_from(["[", "{", " ", "[ ", "a.", "\\"]),
              st.integers(0, 3000)),
    st.builds(lambda n: "[" + " " * n + "x", st.integers(0, 3000)),
    st.builds(lambda c, n: "sources = " + c * n, st.sampled_from(["[", "{a = "]),
              st.integers(0, 3000)),
    st.text(max_size=200),
)
_SCOPES_TEXT = st.lists(_LINES, max_size=40).map("\n".join)

_SECRET = st.text(string.ascii_letters + string.digits + "-._~!$*+%", min_size=10, max_size=24)
_PREFIX = st.sampled_from(["", "http://", "https://", "redis://", "rediss://", "unix://",
                           "redis//", "http:/", "http:", "//", "ftp://", "HTTP://", " http://"])
_USER = st.text(string.ascii_letters + string.digits + "._-", max_size=12)
_JUNK = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=40)
_HOSTISH = st.one_of(_JUNK, st.sampled_from(["127.0.0.1:6390/0", "es:9200", "h:notaport",
                                             "[::1]:9200", "[::1", "h:99999", "/tmp/redis.sock"]))
_QUERY_KEY = st.sampled_from(["api_key", "token", "access_token", "password", "sig", "key"])
_FIELDS = ("es_url", "redis_url", "anthropic_base_url", "slack_api_url", "source_url")


def _path(tmp_path_factory, data: bytes) -> Path:
    path = tmp_path_factory.getbasetemp() / f"fuzz-config-{next(_counter)}"
    path.write_bytes(data)
    return path


def _accepts_or_config_error(call):
    """call()'s result or its ConfigError, the budget checked on either path."""
    def caught():
        try:
            return call()
        except ConfigError as exc:
            return exc

    return within_budget(caught)


@FUZZ_SETTINGS
@given(text=_SCOPES_TEXT)
def test_the_scopes_parser_takes_any_toml_ish_text(tmp_path_factory, text):
    path = _path(tmp_path_factory, text.encode("utf-8", "surrogatepass"))
    result = _accepts_or_config_error(lambda: load_scopes(path))
    assert isinstance(result, Scopes | ConfigError)
    if isinstance(result, ConfigError):
        assert str(result).startswith("bad setting: CITEBOT_SCOPES: ")


@FUZZ_SETTINGS
@given(data=st.binary(max_size=4000))
def test_the_scopes_parser_takes_any_bytes(tmp_path_factory, data):
    path = _path(tmp_path_factory, data)
    result = _accepts_or_config_error(lambda: load_scopes(path))
    assert isinstance(result, Scopes | ConfigError)


@FUZZ_SETTINGS
@given(data=st.one_of(st.binary(max_size=4000),
                      st.lists(st.sampled_from(["term,alias,definition", "term,alias", "a,b",
                                                "a,b,c,d", '"a,b",c', '"open', "", ",", "\x00"]),
                               max_size=30).map(lambda rows: "\n".join(rows).encode())))
def test_the_glossary_loader_takes_any_bytes(tmp_path_factory, data):
    path = _path(tmp_path_factory, data)
    result = _accepts_or_config_error(lambda: Glossary.load(path))
    assert isinstance(result, Glossary | ConfigError)
    if isinstance(result, ConfigError):
        assert str(result).startswith("bad setting: CITEBOT_GLOSSARY: ")


@st.composite
def _urls_with_a_secret(draw) -> tuple[str, str]:
    """A URL-ish string holding the secret where credentials go: as the password (the
    authority may be malformed, the rest may hold more '@'), as a credential-like query
    parameter, or as the "port" of an address whose host was left out."""
    secret = draw(_SECRET)
    prefix, user, rest = draw(_PREFIX), draw(_USER), draw(_HOSTISH)
    where = draw(st.sampled_from(["password", "query", "port"]))
    if where == "password":
        url = f"{prefix}{user}:{secret}@{rest}"
        others = prefix + user + rest
    elif where == "query":
        host = draw(_HOSTISH.filter(lambda h: not set(h) & set("?#&;=")))
        tail = draw(st.text(string.ascii_letters + "=&", max_size=12))
        url = f"{prefix}{host}/?{draw(_QUERY_KEY)}={secret}&{tail}"
        others = prefix + host + tail
    else:
        assume(not secret.isdigit())  # a password of digits there is a port, by any reading
        url = f"{prefix}{user or 'elastic'}:{secret}"
        others = prefix + user
    assume(secret not in others)  # the secret only where credentials go
    return url, secret


@FUZZ_SETTINGS
@given(case=_urls_with_a_secret(), field=st.sampled_from(_FIELDS))
def test_a_url_setting_is_accepted_or_refused_without_its_secret(case, field):
    url, secret = case
    result = _accepts_or_config_error(lambda: load_settings(**{field: url}))
    if isinstance(result, ConfigError):
        message = str(result)
        assert message.startswith("bad setting: ") and secret not in message, message
    assert secret not in redact_url(url)

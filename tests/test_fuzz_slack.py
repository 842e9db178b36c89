"""Fuzz pass over what a Slack request may carry: the question cleaner on long texts of
Slack markup, the text functions that read document and model text, and the request
body's shape check and event parsing on arbitrary JSON. Each input runs within the
per-input CPU budget of tests/fuzz_support.py, so a super-linear path (the emphasis regex
took 13 s on one 40,000-character mention) fails on the input that triggers it.

Long inputs are drawn as a short unit of markup repeated up to ~40,000 characters, with
a prefix and a suffix: a repeated unit is what makes a backtracking regex rescan.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from bot.answer.checks import cited_sentences, normalise
from bot.answer.compose import quotation
from bot.answer.prompt import neutralise, parse_refusal
from bot.answer.release import settled_ends
from bot.answer.sentences import sentence_spans
from bot.slack.inbound import (
    clean_question,
    clean_text,
    mention_question,
    message_question,
    parse_command,
)
from bot.slack.shape import problem, shape_problem
from bot.slack.split import split_markdown, split_text
from tests.fuzz_support import FUZZ_SETTINGS, within_budget

pytestmark = pytest.mark.fuzz

MAX_CHARS = 40_000
# Slack markup and what sits beside it: the characters the brief of each regex turns on.
TOKENS = st.sampled_from([
    "*", "_", "~", "`", "```", ">", "&gt;", "<", "<@", "<@U1>", "<#C1|general>", "<!here>", "<http://a|",
    "|", ":", ":pray:", "@", " ", "  ", "\n", "\n\n", "\t", "a", "A", "aB", "a_b", "x.y", "1", "--f",
    "-", "—", "…", ".", "...", "!", "?", ",", "[", "]", "[1]", "(", ")", '"', "\u201c", "\u201d", "\u26a0 [",
    "hey ", "quick q:", "thanks", "um ", "NOT_COVERED", "<passage", "\u200b", "é",
])
# Mostly the single characters of Slack markup with a letter or two between them ("*a "),
# sometimes the longer tokens above.
MARKUP = st.sampled_from(list("*_~`><@|:") + [" ", "\n", "\t", "a", "b", "1", "."])
UNIT = st.one_of(st.lists(MARKUP, min_size=1, max_size=4), st.lists(MARKUP, min_size=1, max_size=4),
                 st.lists(TOKENS, min_size=1, max_size=5)).map("".join)
# The inputs each fixed regex was quadratic on, always tried first.
KNOWN = ["<@U1> " + "*a " * 13_333, "_a " * 13_333, "- " * 20_000 + "x", "\n" * 40_000 + "x",
         "> \n" * 10_000, "<@" * 20_000, "<http://a|" * 4_000, "```" + "aa" * 20_000, "[" * 40_000,
         "\u201ca" * 20_000, "\u26a0 [" * 13_000, " \u2026" * 20_000, "<" + " " * 40_000, " " * 40_000 + "x"]


@st.composite
def long_markup(draw) -> str:
    """Prefix + a unit repeated up to MAX_CHARS + suffix."""
    unit = draw(UNIT)
    times = draw(st.integers(1, MAX_CHARS // len(unit)))
    return draw(UNIT) + unit * times + draw(st.text(st.sampled_from("*_~`><@|: \n"), max_size=20))


def known(test):
    for text in KNOWN:
        test = example(text=text)(test)
    return test


@FUZZ_SETTINGS
@given(text=long_markup())
@known
def test_the_question_cleaner_is_linear_on_slack_markup(text):
    cleaned = within_budget(lambda: clean_text(text))
    assert isinstance(cleaned, str)
    assert isinstance(within_budget(lambda: clean_question(text)), str)
    assert within_budget(lambda: parse_command(text)).kind in ("help", "why", "question")


@settings(FUZZ_SETTINGS, max_examples=30)
@given(text=long_markup())
@known
def test_document_and_model_text_functions_are_linear(text):
    within_budget(lambda: normalise(text))
    within_budget(lambda: cited_sentences(text))
    within_budget(lambda: sentence_spans(text, wrapped=True))
    within_budget(lambda: quotation(text))
    within_budget(lambda: neutralise(text))
    within_budget(lambda: parse_refusal(text))
    within_budget(lambda: split_markdown(text))
    within_budget(lambda: split_text(text))
    within_budget(lambda: list(settled_ends(text)))


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=5),
    max_leaves=25)
KEYS = st.sampled_from(["type", "event", "actions", "team", "enterprise", "user", "channel", "container",
                        "view", "message", "authorizations", "is_enterprise_install", "event_id", "team_id",
                        "challenge", "callback_id", "action_id", "response_url", "state", "trigger_id"])
EVENT_KEYS = st.sampled_from(["type", "user", "text", "ts", "channel", "thread_ts", "bot_id", "subtype",
                              "event_ts", "channel_type", "tab", "team", "message", "view", "bot_profile"])
TYPES = st.sampled_from(["event_callback", "block_actions", "view_submission", "shortcut", "message_action",
                         "url_verification", "block_suggestion", "app_mention", "message", "app_home_opened"])
EVENT = st.dictionaries(EVENT_KEYS, JSON | TYPES | st.text(max_size=30), max_size=9)
BODY = st.one_of(JSON, st.dictionaries(KEYS, JSON | TYPES | EVENT, max_size=8),
                 st.builds(lambda e, extra: {"type": "event_callback", "event": e, **extra},
                           EVENT, st.dictionaries(KEYS, JSON, max_size=3)))


@FUZZ_SETTINGS
@given(body=BODY, how=st.sampled_from(["json", "payload", "form"]))
def test_the_body_shape_check_judges_any_json_and_what_passes_parses(body, how):
    import urllib.parse

    if how == "json":
        raw, content_type = json.dumps(body).encode(), "application/json"
    elif how == "payload":
        raw = urllib.parse.urlencode({"payload": json.dumps(body)}).encode()
        content_type = "application/x-www-form-urlencoded"
    else:
        fields = body if isinstance(body, dict) else {"text": body}
        raw = urllib.parse.urlencode({str(k): str(v) for k, v in fields.items()}).encode()
        content_type = "application/x-www-form-urlencoded"
    found = within_budget(lambda: problem(raw, content_type))
    assert found is None or isinstance(found, str)
    if how != "form":
        assert (found is None) == (shape_problem(body) is None)
    # An event the check passes is one the adapter can read: no listener fails on it.
    if found is None and isinstance(body, dict) and isinstance(body.get("event"), dict) and how == "json":
        event = body["event"]
        if event.get("type") in ("app_mention", "message"):
            q = within_budget(lambda: mention_question(event, "Ev1", None))
            assert isinstance(q.text, str) and isinstance(q.channel, str)
            m = within_budget(lambda: message_question(event, "Ev1", None, "UCITEBOT"))
            assert m is None or isinstance(m.text, str)

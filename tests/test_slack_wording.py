"""Slack wording is cleaned before retrieval: mentions, links, :emoji:, emphasis, quotes,
`code` and fenced blocks, "hey @citebot quick q:" and "thanks!"; identifiers in code stay
search terms. Unit tests on bot.slack.inbound.clean_question, then one mention through the
real HTTP server to show the turn searches the cleaned question."""

from __future__ import annotations

import pytest

from bot.slack.inbound import clean_question
from search.text import content_words
from tests.slack_harness import mention, one_answer


@pytest.mark.parametrize(("raw", "clean"), [
    # mentions, links, escapes
    ("<@UCITEBOT> what about <#C123|general> &amp; <!here> <https://x.example/a|the docs> &lt;3?",
     "what about & the docs <3?"),
    ("see <https://wiki.example.com/oncall> for the rota", "see https://wiki.example.com/oncall for the rota"),
    ("<!subteam^S0123|@oncall> who holds the pager?", "who holds the pager?"),
    # openings and closings
    ("<@UCITEBOT> hey quick q: how often does the Release Train leave?",
     "how often does the Release Train leave?"),
    ("hey @citebot quick q: what is the per diem?", "what is the per diem?"),
    ("hi all, sorry to bother — where is the annex? thanks!", "where is the annex?"),
    ("Hello there! Who owns the Conductor? ty", "Who owns the Conductor?"),
    ("qq: can I expense a dock", "can I expense a dock"),
    ("ok so, um, what is the soak?", "what is the soak?"),
    ("thanks", "thanks"),  # nothing but filler: kept, so the turn says something sensible
    # filler words that are the question's own words stay
    ("all robots need a health score?", "all robots need a health score?"),
    ("question time policy?", "question time policy?"),
    ("there is a rota, who is on it?", "there is a rota, who is on it?"),
    # emoji, emphasis, quotes
    ("what is E-417 on the :robot_face: swap station :pray::skin-tone-2:",
     "what is E-417 on the swap station"),
    ("meeting at 10:30:00, does the ~old~ *new* _travel_ policy apply?",
     "meeting at 10:30:00, does the old new travel policy apply?"),
    ("&gt; the soak runs for 72 hours\nstill true?", "the soak runs for 72 hours still true?"),
    ("is 2*3*4 kept, and max_connections?", "is 2*3*4 kept, and max_connections?"),
    # code: inline spans verbatim, fenced blocks as their identifiers
    ("what does `max_connections` default to?", "what does max_connections default to?"),
    ("why does `:robot_face: *x*` look odd", "why does :robot_face: *x* look odd"),
    (("what does this mean\n```Traceback (most recent call last):\n  File \"fos/conductor.py\", "
      "line 12\nKlaxonTimeout: pager_escalation failed after 300s\n```"),
     "what does this mean fos/conductor.py KlaxonTimeout pager_escalation 300s"),
    ("flash with ```quillctl flash --force --slot=B``` ok?", "flash with --force --slot ok?"),
])
def test_slack_wording_is_cleaned(raw, clean):
    assert clean_question(raw) == clean


def test_identifiers_in_code_stay_search_terms():
    q = clean_question("hey quick q: does `FOS_SAFE_MODE` stop the ```\nconductor.assign_task()\n``` loop?")
    terms = content_words(q)
    assert {"fos", "safe", "mode", "conductor", "assign", "task", "loop"} <= set(terms)
    assert "hey" not in terms and "quick" not in terms


@pytest.mark.slow
def test_a_chatty_mention_is_searched_and_logged_as_its_question(standin, start_bot, small_store):
    h = start_bot(small_store)
    event = mention(standin, "hey quick q: how often does the *Release Train* leave? :pray: thx!")
    h.sender.event(event)
    h.drain()
    _, turn_id = one_answer(standin, event)
    record = h.components.turnlog.get_turn(turn_id)
    assert record["question"] == "how often does the Release Train leave?"
    assert record["condensed_query"] == record["question"]

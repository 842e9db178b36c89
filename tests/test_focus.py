"""A question's content for the gate: Slack preamble, greetings, sentiment and filler set
aside, the content kept as written, in linear time."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from search.focus import FOCUS_MAX_CHARS, focus
from search.text import content_words
from tests.fuzz_support import FUZZ_SETTINGS, within_budget


@pytest.mark.parametrize(("question", "content", "aside"), [
    ("hey all quick q - anyone know how many vacation days we get? thanks!! :pray:",
     ["many", "vacation", "days", "get"], [":pray:", "thanks!!", "hey", "quick", "q", "anyone", "know"]),
    ("just got married!! how do i add my spouse to health insurance?",
     ["add", "spouse", "health", "insurance"], ["just got married!!"]),
    ("ugh lol the vpn keeps dropping, who do i ping about that",
     ["vpn", "keeps", "dropping", "ping"], ["ugh", "lol"]),
    ("so excited!!! :tada: my friend is interviewing with us, can i refer them 🙏",
     ["friend", "interviewing", "us", "refer"], ["so excited!!!", ":tada:", "🙏"]),
])
def test_preamble_and_filler_are_set_aside_and_the_content_kept(question, content, aside):
    f = focus(question)
    assert f.terms == content
    assert all(a in f.set_aside for a in aside), f.set_aside
    assert set(f.terms) <= set(content_words(question))


@pytest.mark.parametrize("question", [
    "How do I configure git rebase autosquash?",
    "a vendor sent me a fancy bottle of whisky for the holidays, am i alowed to keep it??",
    "laptop stolen! what do i do?",  # the exclamation is the question: too little is left
    "is the team offsite budget per person?",  # "team" is a topic, not a greeting
])
def test_a_question_without_preamble_is_measured_as_written(question):
    f = focus(question)
    assert f.terms == content_words(question) and not f.changed


def test_a_question_of_nothing_but_filler_is_measured_as_written():
    f = focus("hey all! thanks lol :tada:")
    assert f.terms == content_words("hey all! thanks lol :tada:") and not f.changed


def test_focus_reads_long_and_hostile_questions_in_linear_time():
    for text in (":" * 50_000, "!" * 50_000 + " why", ":a" * 25_000, "hey " * 12_000 + "vpn?"):
        f = within_budget(lambda text=text: focus(text))
        assert f.terms == content_words(text)  # over FOCUS_MAX_CHARS: measured as written
    edge = "hey all! " * (FOCUS_MAX_CHARS // 9 - 1) + "vpn quota?"
    assert len(edge) <= FOCUS_MAX_CHARS
    assert within_budget(lambda: focus(edge)).terms == ["vpn", "quota"]


@pytest.mark.fuzz
@FUZZ_SETTINGS
@given(st.text(alphabet=st.sampled_from(list("ab :!?.\n_-+') hey lol🙏")), max_size=FOCUS_MAX_CHARS))
def test_focus_keeps_only_the_question_s_own_words_and_never_loses_them_all(text):
    f = within_budget(lambda: focus(text))
    assert set(f.terms) <= set(content_words(text))
    assert bool(f.terms) == bool(content_words(text))

"""Fuzz: no text, whole or cut into any pieces, comes out of the link rule
(bot.answer.textlinks) with a link whose target could hide behind other words, and the
rule stays linear on tens of thousands of characters of bracket soup."""

from __future__ import annotations

import itertools
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bot.answer.checks import quote_in
from bot.answer.textlinks import visible_links, visible_piece
from tests.fuzz_support import FUZZ_SETTINGS, within_budget

pytestmark = pytest.mark.fuzz

TOKENS = ["[", "]", "(", ")", "<", ">", "|", ":", "!", "\n", "\n\n", " ", "   ", "a", "wiki",
          "https://evil.example.com/x", "www.evil.example.com", "mailto:a@b.c", "\u200b", "\u202e",
          '"', "'", "\\", "[1]", "](", "]:", "[g]: ", ".", ". "]
texts = st.lists(st.sampled_from(TOKENS), max_size=400).map("".join)
soups = st.tuples(st.sampled_from(["[", "](", "[a](", "<http:", "[a]: ", "![", "[[a]", "(a"]),
                  st.integers(1, 6000)).map(lambda t: t[0] * t[1])
_DEFINITION = re.compile(r"(?m)^ {0,3}\[[^\[\]]+\]:")


def hinges(text: str) -> list[str]:
    """What would make a Markdown link (inline, image, or a definition for a reference)."""
    return re.findall(r"\]\(", text) + _DEFINITION.findall(text)


@FUZZ_SETTINGS
@given(texts)
def test_no_text_keeps_a_hinge_and_showing_twice_changes_nothing(text):
    shown = within_budget(lambda: visible_links(text))
    assert hinges(shown) == []
    assert visible_links(shown) == shown


@FUZZ_SETTINGS
@given(texts, st.lists(st.integers(0, 10_000), max_size=12))
def test_pieces_cut_anywhere_never_join_into_a_link(text, cuts):
    points = sorted({c % (len(text) + 1) for c in cuts} | {0, len(text)})
    sent = ""
    for a, b in itertools.pairwise(points):
        sent += within_budget(lambda a=a, b=b, before=sent: visible_piece(before, text[a:b]))
    assert hinges(sent) == []


@FUZZ_SETTINGS
@given(soups)
def test_bracket_soup_is_linear(text):
    within_budget(lambda: visible_links(text))
    within_budget(lambda: quote_in("a](b", text))

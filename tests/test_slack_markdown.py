"""Claude's text in `markdown` blocks within Slack's 12,000 characters a message, cut
cleanly: at paragraph and sentence ends, never inside a quotation, a Slack link, code or
between a quotation and the flag of its failed check (bot/slack/split.py, render.py)."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from bot.answer.record import TurnRecord
from bot.answer.textlinks import visible_links
from bot.slack.render import MARKDOWN_MAX, escape, render_turn
from bot.slack.split import protected_spans, split_markdown

FLAG = " ⚠️ [quote check failed: mis-cited: the words are in [3], not [2]]"


def _record(answer: str, model: str | None = "claude-standin") -> TurnRecord:
    return TurnRecord(turn_id="t-md", created_at="2026-01-01T00:00:00", question="q?",
                      condensed_query="q?", answer=answer, model=model, composer="claude",
                      passages=[{"number": 1, "chunk_id": "c1", "source": "a.md",
                                 "heading_path": ["A"], "page": None}],
                      citations=[{"marker": "[1]", "resolved": True, "retrieved": True}])


def _chained(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Spans that overlap (a quotation's flags follow one another) as one: no cut between."""
    chained: list[tuple[int, int]] = []
    for a, b in sorted(spans):
        if chained and a < chained[-1][1]:
            chained[-1] = (chained[-1][0], max(b, chained[-1][1]))
        else:
            chained.append((a, b))
    return chained


def test_a_chain_of_flags_longer_than_the_limit_is_cut_between_words():
    """Regression (hypothesis, CI): one quotation with three failed-check flags is kept whole
    together, and longer than the limit it was cut inside a word ('wor' | 'ds')."""
    text = " ".join(['A "quoted span. With a stop inside" [2].', FLAG, FLAG, FLAG])
    pieces = split_markdown(text, 224)
    assert all(len(p) <= 224 for p in pieces)
    assert " ".join(pieces).split() == text.split()


def _inside(text: str, pos: int) -> bool:
    return any(a < pos < b for a, b in protected_spans(text))


def test_a_long_answer_splits_into_messages_of_at_most_12000_markdown_characters():
    para = ('The Train "leaves every second Tuesday. It waits for no one." [1]' + FLAG
            + " See <https://wiki.example.com/a|the page> and `make release`. ")
    answer = "\n\n".join(para * 6 for _ in range(32))  # about 37,000 characters
    messages = render_turn(_record(answer))
    joined = escape(visible_links(answer))  # the model's link shown with its address
    assert "the page (https://wiki.example.com/a)" in joined
    assert len(joined) > 3 * MARKDOWN_MAX and len(messages) >= 4
    shown = []
    for m in messages:
        blocks = m.block_dicts()
        markdown = [b["text"] for b in blocks if b["type"] == "markdown"]
        assert sum(map(len, markdown)) <= MARKDOWN_MAX
        shown += markdown
    for piece in shown:  # every cut is clean: the piece ends where a quotation, flag, link end
        assert piece.endswith(("]]", "`.", "[1]")) or piece.endswith(") and `make release`.")
        assert piece.count('"') % 2 == 0
    assert re.sub(r"\s+", " ", " ".join(shown)) == re.sub(r"\s+", " ", joined.strip())
    assert messages[-1].block_dicts()[-1]["type"] == "context_actions"  # the trailer closes it


def test_short_answers_are_one_markdown_block_and_ours_stay_sections():
    (m,) = render_turn(_record('It "leaves" [1] & returns <soon>.'))
    assert m.block_dicts()[0] == {"type": "markdown", "text": 'It "leaves" [1] &amp; returns &lt;soon&gt;.'}
    (ours,) = render_turn(_record("The collection says: …", model=None))
    assert ours.block_dicts()[0]["type"] == "section"


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from([
    "A plain sentence here.", 'A "quoted span. With a stop inside" [2].', FLAG,
    "<https://x.example/a b|a link. With text>", "`code. with stops`", "\n\n", "\n",
    "Word", "e.g. the bay.", "[text](https://x.example/y)"]), min_size=1, max_size=400),
    st.integers(min_value=200, max_value=3000))
def test_markdown_cuts_keep_every_word_within_the_limit_and_outside_what_is_kept_whole(parts, limit):
    text = " ".join(parts)
    pieces = split_markdown(text, limit)
    assert all(len(p) <= limit for p in pieces)
    assert " ".join(pieces).split() == text.split()
    at = 0
    stripped = text.strip()
    for piece in pieces[:-1]:
        at = stripped.index(piece, at) + len(piece)
        longest = max((b - a for a, b in _chained(protected_spans(stripped))), default=0)
        if longest < limit // 3:  # a cut can always be made outside them
            assert not _inside(stripped, at), (piece[-60:], stripped[at:at + 60])

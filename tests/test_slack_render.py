"""Block Kit rendering within Slack's limits, escaped."""

from __future__ import annotations

from hypothesis import given
from hypothesis import settings as hyp_settings
from hypothesis import strategies as st

from bot.answer.record import TurnRecord
from bot.slack.render import (
    ACTION_WHY,
    MESSAGE_BLOCKS_MAX,
    SECTION_TEXT_MAX,
    escape,
    render_turn,
    split_text,
)
from tests.slack_harness import (
    block_text,
    buttons,
    feedback_buttons,
)


# -- rendering within Slack's limits ------------------------------------------------------
def _record(answer: str, **kw) -> TurnRecord:
    return TurnRecord(turn_id="t-0123456789ab", created_at="2025-01-01T00:00:00+00:00", question="q?",
                      condensed_query="q?", answer=answer, **kw)


def test_long_answers_split_cleanly_within_limits():
    paragraph = ("The Release Train leaves every other Tuesday [1]. " * 40).strip()
    answer = "\n\n".join([paragraph] * 60) + "\n\n" + "x" * 7000  # ~130,000 chars, one unbroken word
    passages = [{"number": n, "chunk_id": f"c{n}", "source": f"handbook/doc-{n}.md",
                 "heading_path": ["Part <A>", "R&D"], "page": str(n), "chars": 100} for n in range(1, 21)]
    messages = render_turn(_record(answer, passages=passages,
                                   citations=[{"marker": "[1]", "resolved": True, "retrieved": True}]))
    assert len(messages) > 1
    sections: list[str] = []
    for m in messages:
        blocks = m.block_dicts()
        assert len(blocks) <= MESSAGE_BLOCKS_MAX
        for b in blocks:
            if b["type"] == "section":
                assert len(b["text"]["text"]) <= SECTION_TEXT_MAX
                sections.append(b["text"]["text"])
    answer_sections = [s for s in sections if not s.startswith("*Sources*")]
    # nothing lost, nothing doubled: the same characters in order, whitespace aside
    assert "".join("".join(answer_sections).split()) == "".join(answer.split())
    assert " ".join(answer_sections[:60]).split() == " ".join([paragraph] * 60).split()
    assert all(s.endswith((".", "x")) for s in answer_sections[:-1])  # cut at sentence ends
    last = messages[-1].block_dicts()
    assert [b["type"] for b in last[-2:]] == ["actions", "context_actions"]
    assert "turn `t-0123456789ab`" in block_text(last)
    assert "Part &lt;A&gt; › R&amp;D, p. 1" in block_text(last)  # the cited source only
    assert "doc-2.md" not in block_text(last)


def test_source_text_is_escaped_and_entities_never_split():
    answer = "Use <b>bold</b> & \"quotes\" → a<b " + "&" * 5000
    (message,) = render_turn(_record(answer))
    text = block_text(message.block_dicts())
    assert "&lt;b&gt;bold&lt;/b&gt; &amp;" in text and "<b>" not in text
    for piece in split_text(escape("&" * 5000)):
        assert piece.replace("&amp;", "") == ""  # every piece holds whole entities
    assert escape("<@U123> <!channel>") == "&lt;@U123&gt; &lt;!channel&gt;"


@hyp_settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab .!?\n&<>")), max_size=9000),
       st.integers(min_value=20, max_value=3000))
def test_split_text_keeps_every_word_within_the_limit(text, limit):
    escaped = escape(text)
    pieces = split_text(escaped, limit)
    assert all(0 < len(p) <= limit for p in pieces)
    assert "".join("".join(pieces).split()) == "".join(escaped.split())  # every character, in order
    for p in pieces:
        tail = p[p.rfind("&"):] if "&" in p else ""
        assert not tail or tail.startswith(("&amp;", "&lt;", "&gt;"))


def test_errors_and_refusals_render_with_turn_ids():
    (err,) = render_turn(_record("Sorry — I could not answer this: boom (turn t-0123456789ab)",
                                 error="boom"))
    blocks = err.block_dicts()
    assert set(buttons(blocks)) == {ACTION_WHY} and "turn `t-0123456789ab`" in block_text(blocks)
    (ref,) = render_turn(_record("The collection does not cover this question.", refused=True,
                                 passages=[{"number": 1, "source": "a.md", "heading_path": []}]))
    text = block_text(ref.block_dicts())
    assert "not covered by the collection" in text and "*Sources*" not in text
    assert set(feedback_buttons(ref.block_dicts())) == {"helpful", "not_helpful"}
    assert feedback_buttons(blocks) == {}  # an error gets no feedback controls


def test_sources_become_links_with_a_url_template():
    passages = [{"number": 1, "chunk_id": "c1", "source": "people/travel & per diem.md",
                 "heading_path": ["Travel", "Per <diem>"], "page": None, "chars": 10}]
    record = _record("It is 40 EUR [1].", passages=passages,
                     citations=[{"marker": "[1]", "resolved": True, "retrieved": True}])
    (plain,) = render_turn(record)
    assert "*[1]* people/travel &amp; per diem.md — Travel › Per &lt;diem&gt;" in block_text(plain.block_dicts())
    (linked,) = render_turn(record, url_template="https://wiki.example.com/docs/{path}")
    assert ("<https://wiki.example.com/docs/people/travel%20%26%20per%20diem.md|[1] people/travel "
            "&amp; per diem.md — Travel › Per &lt;diem&gt;>") in block_text(linked.block_dicts())

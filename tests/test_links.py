"""Sources a person can open: addresses checked (search/links.py) and Slack links escaped
(bot/slack/mrkdwn.py)."""

from __future__ import annotations

import re

import pytest

from bot.answer.record import TurnRecord
from bot.slack.mrkdwn import link, link_target, passage_line, source_line
from bot.slack.render import SECTION_TEXT_MAX, render_turn
from search.links import URL_MAX_CHARS, BadURL, document_url, link_for, normalise
from tests.slack_harness import block_text

TEMPLATE = "https://wiki.example.com/docs/{path}"


# -- addresses ----------------------------------------------------------------------------
def test_an_address_is_percent_encoded_where_it_could_break_a_link():
    assert normalise("https://wiki.example.com/a b|c>d<e\"f") == \
        "https://wiki.example.com/a%20b%7Cc%3Ed%3Ce%22f"
    assert normalise("https://wiki.example.com/x?a=1&b=%20two#sec-2") == \
        "https://wiki.example.com/x?a=1&b=%20two#sec-2"  # escapes already there stay as they are
    assert normalise("HTTPS://Wiki.Example.com/ä") == "https://Wiki.Example.com/%C3%A4"
    assert normalise("https://bücher.example/x") == "https://xn--bcher-kva.example/x"


@pytest.mark.parametrize(("raw", "why"), [
    ("javascript:alert(1)", "not an http(s) address"),
    ("JaVaScRiPt:alert(1)", "not an http(s) address"),
    ("data:text/html,<script>", "not an http(s) address"),
    ("file:///etc/passwd", "not an http(s) address"),
    ("mailto:ops@example.com", "not an http(s) address"),
    ("https:///no-host", "names no host"),
    ("https://wiki.example.com/a\nb", "control character"),
    ("https://wiki.example.com/" + "x" * URL_MAX_CHARS, f"over {URL_MAX_CHARS}"),
])
def test_addresses_that_cannot_be_links_are_refused_with_the_reason(raw, why):
    with pytest.raises(BadURL, match=re.escape(why)):
        document_url(raw, "people/travel.md", TEMPLATE)


def test_a_relative_address_needs_the_template_to_resolve_against():
    with pytest.raises(BadURL, match="relative and CITEBOT_SOURCE_URL is unset"):
        document_url("../travel.html", "people/travel.md", None)
    assert document_url("../travel.html", "people/2024/travel.md", TEMPLATE) == \
        "https://wiki.example.com/docs/people/travel.html"
    assert document_url("/root.html", "people/travel.md", TEMPLATE) == "https://wiki.example.com/root.html"
    assert document_url("   ", "people/travel.md", None) is None  # an empty `url:` names nothing


def test_the_documents_own_address_wins_over_the_template_and_anchors_go_on_either():
    own = "https://intranet.example.com/travel?lang=en#top"
    assert link_for("people/travel.md", own, None, TEMPLATE) == own
    assert link_for("people/travel.md", own, "per-diem", TEMPLATE) == \
        "https://intranet.example.com/travel?lang=en#per-diem"  # the heading's anchor replaces #top
    assert link_for("guide/install.html", None, "with-pip", TEMPLATE) == \
        "https://wiki.example.com/docs/guide/install.html#with-pip"
    assert link_for("people/travel & per diem.md", None, None, TEMPLATE) == \
        "https://wiki.example.com/docs/people/travel%20%26%20per%20diem.md"
    assert link_for("guide/install.html", None, "id with space", None) is None  # nowhere to go
    assert link_for("x.html", None, "a|b>c", TEMPLATE) == "https://wiki.example.com/docs/x.html#a%7Cb%3Ec"


# -- Slack links --------------------------------------------------------------------------
def test_a_slack_link_escapes_its_label_and_keeps_its_address_whole():
    line = link("https://wiki.example.com/a b|c>d?x=1&y=2", "R&D <team> | ops")
    assert line == "<https://wiki.example.com/a%20b%7Cc%3Ed?x=1&amp;y=2|R&amp;D &lt;team&gt; ¦ ops>"
    # exactly one link: one "<" opening it, one "|" splitting it, one ">" closing it
    assert (line.count("<"), line.count("|"), line.count(">")) == (1, 1, 1)


@pytest.mark.parametrize("bad", ["javascript:alert(1)", "relative/path.html", "", None,
                                 "https://wiki.example.com/" + "x" * URL_MAX_CHARS])
def test_an_address_that_cannot_be_a_link_is_shown_as_text(bad):
    assert link_target(bad) is None
    assert link(bad, "Travel <b>") == "Travel &lt;b&gt;"
    assert source_line(2, "people/travel.md", ["Travel"], None, bad) == "*[2]* people/travel.md — Travel"


def test_passage_lines_use_the_link_recorded_with_the_turn():
    recorded = {"number": 1, "source": "guide/install.html", "heading_path": ["Install", "With pip"],
                "page": None, "url": "https://docs.example.org/install.html#with-pip"}
    assert passage_line(recorded, TEMPLATE) == \
        "<https://docs.example.org/install.html#with-pip|[1] guide/install.html — Install › With pip>"
    # a turn recorded with no link stays without one, whatever the template says now
    assert passage_line({**recorded, "url": None}, TEMPLATE) == \
        "*[1]* guide/install.html — Install › With pip"
    # a turn recorded before links were recorded links by the template, as it did then
    old = {k: v for k, v in recorded.items() if k != "url"}
    assert passage_line(old, TEMPLATE) == ("<https://wiki.example.com/docs/guide/install.html|[1] "
                                           "guide/install.html — Install › With pip>")


def test_an_answer_links_each_cited_source_by_its_recorded_address():
    passages = [
        {"number": 1, "chunk_id": "c1", "source": "people/travel.md", "heading_path": ["Travel", "Per <diem>"],
         "page": None, "chars": 10, "url": "https://wiki.example.com/travel|x>y"},
        {"number": 2, "chunk_id": "c2", "source": "evil.md", "heading_path": ["Evil"],
         "page": None, "chars": 10, "url": "javascript:alert(1)"},
    ]
    record = TurnRecord(turn_id="t-0123456789ab", created_at="2025-01-01T00:00:00+00:00", question="q?",
                        condensed_query="q?", answer="It is 40 EUR [1] and more [2].", passages=passages,
                        citations=[{"marker": "[1]", "resolved": True, "retrieved": True},
                                   {"marker": "[2]", "resolved": True, "retrieved": True}])
    (message,) = render_turn(record)
    text = block_text(message.block_dicts())
    assert "<https://wiki.example.com/travel%7Cx%3Ey|[1] people/travel.md — Travel › Per &lt;diem&gt;>" in text
    assert "*[2]* evil.md — Evil" in text and "javascript" not in text


def test_long_links_are_packed_into_sections_by_whole_lines():
    url = "https://wiki.example.com/" + "a&bcdefgh/" * 40 + "x" * 1300  # 1,725 characters, 1,885 escaped
    passages = [{"number": n, "chunk_id": f"c{n}", "source": f"doc-{n}.md", "heading_path": ["&" * 400],
                 "page": None, "chars": 10, "url": url + str(n)} for n in range(1, 9)]
    record = TurnRecord(turn_id="t-0123456789ab", created_at="2025-01-01T00:00:00+00:00", question="q?",
                        condensed_query="q?", answer="Eight sources.", passages=passages)
    (message,) = render_turn(record)
    sections = [b["text"]["text"] for b in message.block_dicts()
                if b["type"] == "section" and b["text"]["text"] != "Eight sources."]
    assert all(len(s) <= SECTION_TEXT_MAX for s in sections)
    lines = "\n".join(sections).split("\n")
    assert lines[0] == "*Sources*" and len(lines) == 9
    for line in lines[1:]:  # each whole: a complete link, or the label alone when too long
        assert (line.startswith("<https://") and line.endswith(">")) or line.startswith("*[")
    assert sum(line.startswith("<") for line in lines) == 0  # 1,885 + a label of 1,500 escaped > LINE_MAX
    short = [{**p, "heading_path": ["Intro"]} for p in passages]
    (message,) = render_turn(TurnRecord(**{**record.__dict__, "passages": short}))
    lines = "\n".join(b["text"]["text"] for b in message.block_dicts() if b["type"] == "section"
                      and b["text"]["text"] != "Eight sources.").split("\n")
    assert sum(line.startswith("<https://") and line.endswith("Intro>") for line in lines) == 8

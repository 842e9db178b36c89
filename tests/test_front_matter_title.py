"""A front matter `title:` names a Markdown page that has no level-1 heading of its own; a
body with one governs as before; no chunk's text or heading path changes
(docs/decisions/0055-front-matter-title.md: heading the passages with it was measured and dropped)."""

from __future__ import annotations

import pytest

from ingest.chunker import chunk_document
from ingest.loaders import front_matter_title, front_matter_url, load_markdown
from tests.fuzz_support import within_budget


def count_words(text: str) -> int:
    return len(text.split())


@pytest.mark.parametrize(
    ("line", "title"),
    [
        ("title: Advanced sick leave", "Advanced sick leave"),
        ("title:   Advanced sick leave  \t", "Advanced sick leave"),
        ("title: Leave # the old name", "Leave"),
        ("title: C# and F#", "C# and F#"),  # a # without a blank before it is text
        ('title: "Leave: how to ask"', "Leave: how to ask"),
        ("title: 'Leave # policy'  # a comment", "Leave # policy"),
        ("title: 'It''s leave'", "It's leave"),
        ('title: "Say \\"hi\\""', 'Say "hi"'),
        ("title : Spaced key", "Spaced key"),
        ("title:", None),
        ("title:   ", None),
        ("title: ''", None),
        ("title: # only a comment", None),
        ("title: |", None),
        ("title: >-", None),
        ("title: [a, b]", None),
        ("title: {en: Leave}", None),
        ("title: 'unclosed", None),
        ("subtitle: Not the title", None),
        ("  title: nested under another key", None),
    ],
)
def test_the_title_is_read_as_a_one_line_scalar(line, title):
    assert front_matter_title([line]) == title


def test_the_first_title_key_is_the_one_read_and_the_url_is_read_as_before():
    lines = ["layout: page", "title: Travel", "url: https://x.test/travel  # ours", "title: Later"]
    assert front_matter_title(lines) == "Travel"
    assert front_matter_url(lines) == "https://x.test/travel"


PAGE = """---
title: Advanced sick leave   # the page's subject
url: https://handbook.example/leave/
---
You can ask for sick leave in advance.

## Who is eligible

Every employee after 90 days.

### Part-time staff

Prorated by hours.
"""


def _outline(doc) -> list[tuple[tuple[str, ...], list[str]]]:
    return [(s.heading_path, [p.text for p in s.paragraphs]) for s in doc.sections]


def _body(page: str) -> str:
    return page.split("---\n", 2)[2]


def test_a_page_without_a_level_one_heading_is_named_by_its_front_matter_title():
    doc = load_markdown(PAGE, "pages/sick-leave.md")
    assert doc.title == "Advanced sick leave"  # not "Who is eligible", its first heading
    assert doc.url == "https://handbook.example/leave/"
    # The title does not head the passages: measured, it cost the dense arm (0055).
    assert _outline(doc) == [
        ((), ["You can ask for sick leave in advance."]),
        (("Who is eligible",), ["Every employee after 90 days."]),
        (("Who is eligible", "Part-time staff"), ["Prorated by hours."]),
    ]


def test_the_chunks_are_byte_for_byte_those_of_the_page_without_front_matter():
    long = " ".join(f"word{i}" for i in range(120)) + "."
    pages = [PAGE, f"---\ntitle: Leave\nurl: https://x.test/\n---\n{long}\n\n## Part\n\nShort.\n\n## Other\n\n{long}\n"]
    for page in pages:
        after = chunk_document(load_markdown(page, "leave.md"), "d", count_words)
        before = chunk_document(load_markdown(_body(page), "leave.md"), "d", count_words)
        assert [(c.text.encode(), c.heading_path, c.sections) for c in after] == [
            (c.text.encode(), c.heading_path, c.sections) for c in before
        ]
        assert not any("title:" in c.text or "url:" in c.text for c in after)


def test_a_body_with_its_own_level_one_heading_governs():
    page = "---\ntitle: Front matter name\n---\nIntro.\n\n# Own name\n\nText.\n\n## Part\n\nMore.\n"
    doc = load_markdown(page, "own.md")
    without = load_markdown(_body(page), "own.md")
    assert (
        (doc.title, _outline(doc))
        == (without.title, _outline(without))
        == ("Own name", [((), ["Intro."]), (("Own name",), ["Text."]), (("Own name", "Part"), ["More."])])
    )
    setext = load_markdown("---\ntitle: Front\n---\n## Part\n\nx\n\nOwn\n===\n\nText.\n", "s.md")
    assert setext.title == "Part"  # its first heading, as before: the body has a level-1 heading


def test_an_ignored_or_absent_title_leaves_the_page_as_it_was():
    for front in ("title: |\n  Block title\n", "title: [a, b]\n", "title:\n", "layout: page\n"):
        doc = load_markdown(f"---\n{front}---\nIntro.\n\n## Part\n\nText.\n", "pages/leave.md")
        assert doc.title == "Part"  # the first heading, as before
        assert _outline(doc) == [((), ["Intro."]), (("Part",), ["Text."])]
    assert load_markdown("---\nlayout: page\n---\nJust text.\n", "pages/leave.md").title == "leave"  # the stem
    assert load_markdown("---\ntitle: Leave\n---\nJust text.\n", "pages/leave.md").title == "Leave"
    assert load_markdown("title: Leave\n\nJust text.\n", "pages/leave.md").title == "leave"  # no front matter
    text = load_markdown("---\ntitle: Leave\n---\nJust text.\n", "pages/leave.txt", atx=False, fmt="text")
    assert text.title == "leave"  # plain text has no front matter


def test_a_front_matter_title_with_long_blank_runs_is_read_in_linear_time():
    text = "---\ntitle: Leave" + " " * 30_000 + "policy  # a comment" + "\t" * 30_000 + "\n---\nx\n"
    doc = within_budget(lambda: load_markdown(text, "a.md"))
    assert doc.title == "Leave policy"
    quoted = "---\ntitle: '" + "' " * 30_000 + "\n---\nx\n"  # quotes inside quotes, the last one closing
    assert within_budget(lambda: load_markdown(quoted, "a.md")).title == " ".join(["'"] * 29_999)

"""Fuzz pass over the Markdown and HTML loaders: adversarial text of the characters their
patterns care about, in long runs, each input within the per-input budget (tests/fuzz_support.py)."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ingest.loaders import load_html, load_markdown
from search.errors import IngestError
from search.text import joined_terms, name_like, words
from tests.fuzz_support import FUZZ_SETTINGS, within_budget

pytestmark = pytest.mark.fuzz

# Fewer examples than the convention's default: each input is tens of thousands of
# characters, so the pass stays near ten seconds.
LONG_INPUTS = settings(FUZZ_SETTINGS, max_examples=15)

# '#' and the blanks twice: runs of only them are what heading and front matter patterns scan.
_MARKDOWN = ["#", "#", " ", " ", "\t", "*", "_", "`", "[", "]", "<", ">", " ", "\t", "\n", "=", "-", "~", ".", "a", "url:", "title:", "'", "---"]
_HTML = ["<a ", "<a b='", "<", ">", "/", "=", '"', "'", " ", "\n", "#", "*", "_", "`", "[", "]", "&", ";", "a", "p", "li", "h2",
         "main", "role", "<p>", "</p>", "<li>", "<ul>", "</div>", "<h2>", "</h2>", "<a href=\"#x\">", "</a>", "<!--"]


@st.composite
def adversarial(draw, pieces: list[str], openers: list[str], min_chars: int = 30_000,
                max_chars: int = 50_000) -> str:
    """A few long runs, each opened by a line start a pattern looks for ("# ", "url: "…),
    of one to three of the pieces regexes care about repeated (so a run of only blanks and
    #s, or of one character, is drawn often), and ended by a visible piece not in the run:
    the shapes where a backtracking pattern goes quadratic."""
    runs = draw(st.integers(1, 3))
    text = ""
    for _ in range(runs):
        unit = "".join(draw(st.lists(st.sampled_from(pieces), min_size=1, max_size=3)))
        length = draw(st.integers(min_chars // runs, max_chars // runs))
        ends = [p for p in pieces if p.strip() and p not in unit] or ["x"]
        text += draw(st.sampled_from(openers)) + unit * (length // len(unit)) + draw(st.sampled_from(ends))
    return text

_LINE_OPENERS = ["\n", "\n# a", "\n### a", "\nurl: a", "\ntitle: a", "\n    a", "\n```a"]


@LONG_INPUTS
@given(adversarial(_MARKDOWN, _LINE_OPENERS), st.booleans())
@example("# " + " #" * 20_000 + "x", False)  # the heading line that took 39 s at 100 KB
def test_markdown_loader_is_linear_on_adversarial_text(text, front_matter):
    page = f"---{text}\n---\n# Title\n" if front_matter else text
    doc = within_budget(lambda: load_markdown(page, "fuzz.md"))
    assert all(p.text.strip() for s in doc.sections for p in s.paragraphs)


@LONG_INPUTS
@given(adversarial(_HTML, ["", "\n", "<p>", "<h2>", "<li>"]))
def test_html_loader_is_linear_on_adversarial_text(text):
    def parse() -> None:
        try:
            load_html(text, "fuzz.html")
        except IngestError as exc:  # nested past the depth limit: refused, and that is fine
            assert "CITEBOT_INGEST_MAX_DEPTH" in str(exc)

    within_budget(parse)


@LONG_INPUTS
@given(adversarial(_MARKDOWN + [":", "::", "/", "!", "A", "Z9"], ["", " ", ". "], 10_000, 20_000))
def test_lexical_tokens_are_linear_on_adversarial_text(text):
    within_budget(lambda: (words(text), joined_terms(text), name_like(text)))

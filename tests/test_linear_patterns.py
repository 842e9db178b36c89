"""The patterns that read document and question text run in linear time, and mean what the
backtracking regexes they replace meant (each old pattern is kept here as the oracle)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.answer.checks import cited_sentences
from bot.answer.release import settled_ends
from bot.answer.sentences import sentence_spans
from bot.slack.split import split_markdown, split_text
from ingest.loaders import front_matter_url, load_html, load_markdown
from ingest.loaders.pdf import _is_dot_leader, _is_page_number
from search import phrases
from search.retrieval_config import PHRASE_CANDIDATES_MAX
from search.text import _WORD, _starts_sentence, joined_terms, name_like, quoted_terms
from tests.fuzz_support import within_budget

OLD_ATX = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)[ \t#]*$")
OLD_URL_KEY = re.compile(r"^url[ \t]*:[ \t]*(.*?)[ \t]*$")
OLD_DOT_LEADER = re.compile(r"\.{6,}\s*\S+$")
OLD_SENTENCE_START = re.compile(r"(^|[.!?:;]\s+|\n)\W*$")
OLD_JOINED = re.compile(r"[^\W_]+(?:(?:[._/-]|::)+[^\W_]+)+")
OLD_SENTENCE_END = re.compile(r"[.!?\u2026][\"'\u201d\u2019)\]]*(?:\s*\[\d+\])*[.!?]?(?=\s+(?![a-z])|\s*$)|\n\s*\n|\n")


def test_a_100_kb_heading_line_loads_in_linear_time():
    line = "# " + " #" * 50_000 + " closing words"
    doc = within_budget(lambda: load_markdown(line + "\n\nThe text under it.\n", "a.md"))
    assert doc.sections[0].heading_path[0].endswith("# closing words")


def test_a_front_matter_url_with_long_blank_runs_is_read_in_linear_time():
    text = "---\nurl: https://x.test/a" + " " * 30_000 + "b  # a comment" + "\t" * 30_000 + "\n---\n# T\n\nx\n"
    doc = within_budget(lambda: load_markdown(text, "a.md"))
    assert doc.url == "https://x.test/a" + " " * 30_000 + "b"


def test_a_pdf_line_of_dots_is_judged_in_linear_time():
    assert within_budget(lambda: _is_dot_leader("." * 50_000 + " x y")) is False
    assert within_budget(lambda: _is_dot_leader("Introduction " + "." * 50_000 + " 5")) is True


def test_a_page_label_starting_with_a_dash_is_judged_in_linear_time():
    assert within_budget(lambda: _is_page_number("-" * 50_000 + "x", "-")) is False
    assert within_budget(lambda: _is_page_number("— " * 25_000 + "-iv -", "-iv")) is True


def test_question_patterns_are_linear_in_a_long_question():
    assert within_budget(lambda: joined_terms("a" * 50_000 + " b")) == []
    names = within_budget(lambda: name_like(" ".join(["Word"] * 20_000) + "," * 20_000 + " Other"))
    assert names == {"word", "other"}
    # Every opener with no closer in reach, and every quote an opener and a closer.
    assert within_budget(lambda: quoted_terms("'a " * 15_000)) == []
    assert within_budget(lambda: quoted_terms("\"'" * 20_000 + "`")) == []
    assert within_budget(lambda: quoted_terms(" 'x'" * 10_000)) == [("x",)]


def test_a_long_question_of_quoted_and_joined_words_gives_its_candidates_in_linear_time():
    # Thousands of distinct quotations and joined words: each is looked for once in the
    # question's tokens, not by a scan per place (that was 1.8 s for this one).
    quoted = " ".join(f"'w{i} x{i}' a.b{i}" for i in range(3_000))
    grams = within_budget(lambda: phrases.candidates(quoted, phrases.is_phrase, True, quoted_terms(quoted)))
    assert len(grams) == PHRASE_CANDIDATES_MAX
    assert [len(g) for _, g in grams] == sorted((len(g) for _, g in grams), reverse=True)


# The sentence ends of other scripts (bot/answer/sentences.py): a run of Chinese marks whose
# closing brackets run on into the text (read from each mark of the run, 5 s for 40,000
# characters), marks each followed by white space or markers, wrapped lines of wide characters.
@pytest.mark.parametrize("text", [
    "\u3002" * 20_000 + "\u300d" * 20_000 + "x", "\u3002\u300d" * 20_000 + "x", "\uff0e" * 40_000,
    "\uff11\uff0e" * 20_000, "\u0964" * 40_000, "\u0964 " * 20_000, "\u0964" + " " * 40_000 + "x",
    "\u3002" + " " * 40_000 + "[", "\u3002[1]" * 10_000, "\u201c\u597d\u3002\u201d" * 10_000,
    ("\u5b57" * 40 + "\n") * 1_000, "\u3002\"" + " " * 40_000 + "[1", "\u3002\" [" * 10_000,
], ids=["marks-closers", "mark-closer", "fullwidth-stops", "list-numbers", "dandas", "spaced-dandas",
        "danda-blanks", "mark-blanks", "mark-markers", "quotations", "wrapped-wide", "mark-quote-blanks",
        "mark-quote-open-markers"])
def test_sentence_ends_of_other_scripts_are_found_in_linear_time(text):
    within_budget(lambda: sentence_spans(text))
    within_budget(lambda: sentence_spans(text, wrapped=True))
    within_budget(lambda: cited_sentences(text))
    within_budget(lambda: list(settled_ends(text)))
    within_budget(lambda: split_text(text))
    within_budget(lambda: split_markdown(text))


def test_candidates_whose_first_token_is_common_are_found_in_linear_time():
    # Each joined or quoted gram's first token stands at thousands of places before it: a
    # scan of those places per gram took 1.2 s on this question.
    for late in (" ".join(f"x.y{i}" for i in range(300)), " ".join(f"'x y{i}'" for i in range(300))):
        grams = within_budget(lambda late=late: phrases.candidates(
            "x " * 20_000 + late, phrases.is_phrase, True, quoted_terms("x " * 20_000 + late)))
        assert len(grams) == PHRASE_CANDIDATES_MAX
    # Each found where it first stands, as whole tokens ("xx.yy" is not in "bxx yy" or "xx yyy").
    question = "bxx yy then xx yyy and 'yy xx' xx yy xx.yy"
    assert phrases.candidates(question, lambda g: False, True, quoted_terms(question)) == [(6, ("yy", "xx")), (8, ("xx", "yy"))]


@pytest.mark.parametrize("unclosed", ["<a ", "<a\n", "<a b='", "<!--", "</", "<?"])
def test_html_ending_in_a_construct_that_never_closes_loads_in_linear_time(unclosed):
    page = "<p>The rover docks at the bay.</p>Then" + unclosed * (40_000 // len(unclosed))
    doc = within_budget(lambda: load_html(page, "a.html"))
    # As a browser reads it: the unclosed tag or comment runs to the end, and is no text.
    assert [p.text for s in doc.sections for p in s.paragraphs] == ["The rover docks at the bay.", "Then"]


_md_line = st.text(alphabet=" \t#ab\u2028", max_size=14)


@settings(max_examples=400, deadline=None)
@given(_md_line)
def test_atx_headings_read_as_the_old_pattern_read_them(line):
    m = OLD_ATX.match(line)
    if m:
        title = " ".join(m.group(2).split())
        expected = [((title,) if title else (), ["body"])]
    else:
        expected = [((), [line, "body"] if line.strip() else ["body"])]
    doc = load_markdown(line + "\n\nbody\n", "a.md")
    assert [(s.heading_path, [p.text for p in s.paragraphs]) for s in doc.sections] == expected


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=" \t#:urlab'\"", max_size=16))
def test_front_matter_urls_read_as_the_old_patterns_read_them(line):
    def old(lines: list[str]) -> str | None:
        for one in lines:
            m = OLD_URL_KEY.match(one)
            if not m:
                continue
            value = m.group(1)
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
                return value[1:-1]
            return re.sub(r"[ \t]+#.*$", "", value)
        return None

    assert front_matter_url([line]) == old([line])


@settings(max_examples=600, deadline=None)
@given(st.text(alphabet=". a5\t\u00a0", max_size=18))
def test_dot_leaders_are_the_lines_the_old_pattern_found(line):
    assert _is_dot_leader(line) == bool(OLD_DOT_LEADER.search(line))


@settings(max_examples=600, deadline=None)
@given(st.text(alphabet="-–— 5a", max_size=12), st.text(alphabet="-– 5a", max_size=3))
def test_page_numbers_are_the_lines_the_old_pattern_found(line, label):
    old = re.fullmatch(r"[-–—\s]*" + re.escape(label) + r"[-–—\s]*", line)
    assert _is_page_number(line, label) == bool(old)


@settings(max_examples=600, deadline=None)
@given(st.text(alphabet="aB1_.:;!? \n/-é", max_size=18))
def test_question_patterns_find_what_the_old_ones_found(text):
    for m in _WORD.finditer(text):
        assert _starts_sentence(text, m.start()) == bool(OLD_SENTENCE_START.search(text[: m.start()]))
    assert joined_terms(text) == [t for t in _old_joined(text)]


@settings(max_examples=600, deadline=None)
@given(st.lists(st.sampled_from([".", "!", "?", "\u2026", '"', "'", "\u201d", "\u2019", ")", "]", "[1]", "[", " ",
                                 "  ", "\n", "\n\n", "a", "B", "1", "\u00e9", "\u201c", "\t", "\u00a0", "\r",
                                 "\u2028", "\u3000", "\u00ab", "(", "[12]", "z"]), max_size=16).map("".join))
def test_sentence_ends_in_text_without_the_new_marks_are_the_old_ones(text):
    from bot.answer.sentences import SENTENCE_END

    assert [m.span() for m in SENTENCE_END.finditer(text)] == [m.span() for m in OLD_SENTENCE_END.finditer(text)]


def _old_joined(text: str) -> list[tuple[str, ...]]:
    from search.text import STOPWORDS, words

    out: dict[tuple[str, ...], None] = {}
    for m in OLD_JOINED.finditer(text):
        toks = tuple(words(m.group(0)))
        if len(toks) >= 2 and any(len(t) >= 2 and t not in STOPWORDS for t in toks):
            out.setdefault(toks, None)
    return list(out)

"""Python's own word patterns read a word with its combining marks whole, as the index does
(docs/decisions/0061-combining-marks-inside-words.md, "Later: Python's own word patterns"):
Hindi vowel signs and viramas, Thai vowel signs and tone marks, Arabic vowel marks and a
decomposed Latin diacritic ("Mu\u0308ller") stay inside their words."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from bot.answer.cues import answer_cues
from bot.evaluate import overlaps
from bot.slack.inbound import clean_question
from ingest.chunker import cut_paragraph
from search.glossary import Glossary
from search.marks import IN_WORD_CLASS, IN_WORD_SET
from search.retrieve import Retriever
from search.text import STOPWORDS, _starts_sentence, joined_terms, letters_only, name_like, words
from tests.fuzz_support import within_budget

HINDI = "छुट्टी"  # leave: three fragments (छ, ट, ट) to Python's \w
ARABIC = "العَرَبِيَّة"  # vocalised Arabic
THAI = "ข้อมูล"  # data
MULLER = "Mu\u0308ller"  # decomposed: u + COMBINING DIAERESIS, which unicode61 drops


def test_joined_words_are_whole_words_with_their_marks():
    assert joined_terms(f"{HINDI}-नीति क्या है?") == [(HINDI, "नीति")]
    assert joined_terms(f"{ARABIC}-الفصحى") == [(ARABIC, "الفصحى")]
    assert joined_terms(f"is {THAI}.csv here") == [(THAI, "csv")]
    assert joined_terms(f"{MULLER}-Lu\u0308denscheidt") == [("muller", "ludenscheidt")]
    # Each term is the index's own cut of what the writer joined.
    assert joined_terms(f"{HINDI}_नाम") == [tuple(words(f"{HINDI} नाम"))]


def test_names_are_whole_words_with_their_marks():
    assert name_like(f"Wer ist Oskar {MULLER}?") == {"oskar", "muller"}  # not "mu"
    assert name_like(f"{HINDI}2024 कितनी है?") == {HINDI + "2024"}  # not "2024"
    assert name_like(f"{ARABIC} {THAI} हिन्दी") == set()  # no case, no digit: no name
    assert name_like("x A\u0301 b") == name_like("x \u00c1 b") == {"a"}  # decomposed as composed


def test_a_word_of_letters_and_marks_is_letters_only():
    for word in (HINDI, ARABIC, THAI, "ไม่", "עִבְרִית", "café", "новый"):
        assert letters_only(word), word
    for token in ("e417", "2024", "x_y", "", "\u093f", HINDI + "2024"):
        assert not letters_only(token), token
    for token in ("abc", "a1", "A", "snake_case", "1.6", "e", " "):
        assert letters_only(token) == token.isalpha()


def test_the_masked_question_word_is_whole():
    # The question's own word, holding a digit, is masked whole: it is not the time asked for.
    when = answer_cues(f"When is {HINDI}2024?")
    assert [t(f"{HINDI}2024 की सूचना") for t in when] == [False]
    assert [t(f"{HINDI}2024 on 3 May") for t in when] == [True]


def test_a_label_overlap_counts_whole_words():
    # Two Hindi words share one: under half the label. Cut at the marks, the shared word was
    # three fragments, enough for an overlap.
    assert not overlaps(f"{HINDI} बहुत", f"{HINDI} नीति")
    assert overlaps(f"सबको {HINDI} नीति मिली", f"{HINDI} नीति")


def test_identifiers_of_a_fenced_block_are_whole_words():
    # Cut at the marks, they were "user_न" and "इल_स": fragment phrases.
    q = clean_question("क्या है\n```\nerror in user_नाम: फ़ाइल_सूची failed\n```")
    assert q == "क्या है user_नाम फ़ाइल_सूची"
    assert joined_terms(q) == [("user", "नाम"), ("फ़ाइल", "सूची")]


def test_a_hard_cut_keeps_each_mark_with_its_letter():
    text = "ไม่ใช่" * 40  # no blank to cut at
    for limit in range(2, 13):
        pieces = cut_paragraph(text, limit)
        assert "".join(pieces) == text and all(len(p) <= limit for p in pieces)
        assert not any(p[0] in IN_WORD_SET for p in pieces), limit
    assert cut_paragraph("a" * 30, 10) == ["a" * 10] * 3  # no mark: at max_chars, as before


def test_question_patterns_are_linear_in_a_long_word_of_marks():
    assert within_budget(lambda: joined_terms("छु" * 25_000 + " b")) == []
    assert within_budget(lambda: joined_terms("छु" * 25_000 + "-" * 25_000)) == []
    names = within_budget(lambda: name_like(" ".join([MULLER] * 10_000) + "," * 20_000 + " Ka\u0301rma"))
    assert names == {"muller", "karma"}


# The old backtracking patterns with a mark counted as a word character: the oracle.
_W = rf"(?:[^\W_]|{IN_WORD_CLASS})"
_OLD_SENTENCE_START = re.compile(rf"(^|[.!?:;]\s+|\n)(?:(?!{IN_WORD_CLASS})\W)*$")
_OLD_JOINED = re.compile(rf"{_W}+(?:(?:[._/-]|::)+{_W}+)+")


@settings(max_examples=600, deadline=None)
@given(st.text(alphabet="aB1_.:;!? \n/-éछुट्टीไม่\u0308\u064e", max_size=18))
def test_question_patterns_with_marks_find_what_the_old_ones_would(text):
    for m in re.finditer(rf"{_W}+", text):
        assert _starts_sentence(text, m.start()) == bool(_OLD_SENTENCE_START.search(text[: m.start()]))
    out: dict[tuple[str, ...], None] = {}
    for m in _OLD_JOINED.finditer(text):
        toks = tuple(words(m.group(0)))
        if len(toks) >= 2 and any(len(t) >= 2 and t not in STOPWORDS for t in toks):
            out.setdefault(toks, None)
    assert joined_terms(text) == list(out)
    assert name_like(text) <= set(words(text))  # a name is always one of the index's words


def test_a_joined_hindi_term_addresses_its_passage(tmp_path, test_embedder):
    from ingest.pipeline import ingest
    from search.embedded import EmbeddedStore

    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(6):
        (docs / f"niyam-{i}.md").write_text(f"# नियम {i}\n\n{HINDI} और नीति के नियम अलग अलग पन्नों पर हैं।\n")
    (docs / "chhutti.md").write_text(f"# {HINDI}\n\n{HINDI}-नीति: हर साल बीस दिन की {HINDI} मिलती है।\n")
    store = EmbeddedStore(tmp_path / "store")
    ingest([docs], store, test_embedder, progress=False, within=docs)
    retriever = Retriever(store, test_embedder.encode_query, Glossary.empty())
    r = retriever.retrieve(f"{HINDI}-नीति क्या है?")
    assert f"phrase:{HINDI} नीति" in r.addresses
    assert r.hits[0].chunk.source == "chhutti.md" and r.hits[0].reasons == ["address"]
    # A word of letters and marks absent from the collection is fixed to one it holds.
    assert retriever.retrieve("छुट्टि कितनी है?").corrections == {"छुट्टि": HINDI}
    store.close()

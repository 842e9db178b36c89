"""The embedded store's term groups scored in memory (search/embedded_postings.py): the same
rows, order and scores as FTS5's bm25(), whole or under a scope; built only once a version
of the collection has been seen for SETTLE_S, and never used for another version. Also the
spelling index and the banded edit distance (the typo fixes' other cost): the same answers
as a scan of the vocabulary and the full table."""

from __future__ import annotations

import random

import numpy as np
import pytest

from search import embedded_postings
from search.embedded import EmbeddedStore
from search.scope import Scope
from search.types import Chunk, DocumentRecord, LexicalQuery, ModelStamp, WeightedTerms, Window

STAMP = ModelStamp("test/model-a", 4, "a" * 64)
# A small vocabulary, so words repeat within and across chunks and scores tie; words beyond
# ASCII (cut by SQLite itself, search/text.py), two holding combining marks.
VOCAB = ("kettle bollard soak rota badge lunch drill warden milk coffee fridays counters "
         "train herding cats tunnel floor gate meeting визит ключ άδεια छुट्टी ไม่").split()
# And in the text only, a lone combining accent: no word (search.marks leaves the Latin
# diacritics out; listed as words, a lone one was an empty token counted in the length).
TEXT_WORDS = (*VOCAB, "\u0301")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _docs(rng: random.Random, n_docs: int, tag: str = "v1"):
    out = []
    for d in range(n_docs):
        source = f"{'team' if d % 2 else 'site'}/doc{d}.md"
        doc_id = f"d{d}-{tag}"
        chunks, windows = [], []
        for o in range(rng.randint(1, 4)):
            text = " ".join(rng.choice(TEXT_WORDS) for _ in range(rng.randint(3, 40))) + "."
            heading = tuple(rng.choice(VOCAB).title() for _ in range(rng.randint(1, 2)))
            cid = f"{doc_id}-{o}"
            chunks.append(Chunk(cid, doc_id, source, heading, None, o, text, tokens=len(text.split()),
                                overlap_prev=0, overlap_next=0))
            windows.append(Window(cid, 0, 0, len(text), np.ones(4, dtype=np.float32) / 2))
        out.append((DocumentRecord(doc_id, source, f"h-{doc_id}", source, "markdown"), chunks, windows))
    return out


@pytest.fixture()
def store(tmp_path):
    s = EmbeddedStore(tmp_path / "store")
    s.open_for(STAMP)
    for doc in _docs(random.Random(5), 60):
        s.replace_document(*doc)
    yield s
    s.close()


def _queries(rng: random.Random) -> list[list[str]]:
    words = [*VOCAB, "absent", "visitor"]
    return [[rng.choice(words) for _ in range(rng.randint(1, 5))] for _ in range(60)]


def test_in_memory_scores_equal_fts5s_bm25_whole_and_under_a_scope(store):
    store.build_postings()
    postings = store._keeper.built
    assert postings is not None
    scope = Scope(("team/**",))
    from search.text import stem

    compared, tied = 0, 0
    for terms in _queries(random.Random(11)):
        for table, asked in (("chunks_fts", terms), ("chunks_stems", [stem(t) for t in terms])):
            expression = " OR ".join(f'"{t}"' for t in asked)
            ranked = postings.tables[table].top(asked, 100)
            assert ranked == store._match(expression, 100, None, table), asked
            assert postings.tables[table].top(asked, 7, postings.allowed(scope)) == store._match(
                expression, 7, scope, table), asked
            compared += len(ranked)
            tied += len(ranked) - len({s for _, s in ranked})
    assert compared > 5000 and tied > 100  # many rows, and ties broken alike


def test_a_read_uses_the_postings_only_once_built_for_the_version_it_reads(store, tmp_path):
    clock = Clock()
    store._keeper.clock = clock
    query = LexicalQuery((WeightedTerms(("kettle", "ключ")), WeightedTerms(("kettl",), 0.5, stemmed=True)))
    by_fts5 = store.lexical(query, 30)
    assert store._keeper.built is None and not store._keeper.building  # seen once: nothing built
    clock.now += embedded_postings.SETTLE_S - 1
    assert store.lexical(query, 30) == by_fts5 and not store._keeper.building
    clock.now += 1
    store.lexical(query, 30)  # seen for SETTLE_S: the build begins on a thread
    for t in [t for t in __import__("threading").enumerate() if t.name == "citebot-postings"]:
        t.join(timeout=60)
    assert store._keeper.built is not None
    assert store.lexical(query, 30) == by_fts5
    assert store.lexical(LexicalQuery((WeightedTerms(("kettle",)),)), 30, scope=Scope(("site/**",))) == \
        _fts5_only(store, LexicalQuery((WeightedTerms(("kettle",)),)), Scope(("site/**",)))

    # This store writes: what was built is of another version, and a new chunk is found.
    (doc,) = _docs(random.Random(1), 1, tag="new")
    doc[1][0] = Chunk(doc[1][0].chunk_id, doc[0].doc_id, doc[0].source, ("Zebra",), None, 0,
                      "zebra crossing", tokens=2, overlap_prev=0, overlap_next=0)
    store.replace_document(doc[0], doc[1][:1], doc[2][:1])
    assert store._keeper.built is None
    assert [c for c, _ in store.lexical(LexicalQuery((WeightedTerms(("zebra",)),)), 5)] == [doc[1][0].chunk_id]

    # Another process writes the collection (its content version moves): the postings built before are not read.
    store.build_postings()
    assert store._keeper.built is not None
    other = EmbeddedStore(tmp_path / "store")
    (late,) = _docs(random.Random(2), 1, tag="late")
    late[1][0] = Chunk(late[1][0].chunk_id, late[0].doc_id, "late.md", ("Late",), None, 0,
                       "quagga sighting", tokens=2, overlap_prev=0, overlap_next=0)
    other.replace_document(late[0], late[1][:1], late[2][:1])
    other.close()
    assert [c for c, _ in store.lexical(LexicalQuery((WeightedTerms(("quagga",)),)), 5)] == [late[1][0].chunk_id]


def _fts5_only(store: EmbeddedStore, query: LexicalQuery, scope: Scope | None) -> list[tuple[str, float]]:
    built, store._keeper.built = store._keeper.built, None
    try:
        return store.lexical(query, 30, scope=scope)
    finally:
        store._keeper.built = built


def test_a_stem_that_is_a_phrase_is_left_to_fts5(store):
    store.build_postings()
    # "e-mail" stems to two tokens: a phrase, which the postings cannot score.
    query = LexicalQuery((WeightedTerms(("e-mail", "kettle"), stemmed=True),))
    assert store.lexical(query, 30) == _fts5_only(store, query, None)


def test_a_failed_build_leaves_fts5_answering(store, caplog):
    store._keeper.clock = Clock()
    store._db.close()
    store.build_postings()
    assert store._keeper.built is None and not store._keeper.building
    assert "postings were not built" in caplog.text


def test_spelling_candidates_are_a_scan_of_the_vocabulary_whole_and_scoped(store):
    from search.embedded_lexical import SPELLING_MAX_EDITS

    for scope in (None, Scope(("team/**",))):
        vocab = sorted(store.vocabulary(scope=scope))
        terms = ["kettel", "k", "ab", "визт", "bollards", "xx", "", "meeting", "coffe", "ключи"]
        expected = {t: [c for c in vocab if abs(len(c) - len(t)) <= SPELLING_MAX_EDITS and c != t
                        and (c[:1] == t[:1] or c[1:2] == t[1:2])] for t in terms}
        assert store.spelling_candidates(terms, scope=scope) == expected
        assert expected["kettel"] and "kettle" in expected["kettel"]


def test_the_banded_edit_distance_is_the_full_tables_within_the_limit():
    from search.typos import edit_distance_at_most

    def full(a: str, b: str) -> int:
        prev = list(range(len(b) + 1))
        for i, ca in enumerate(a, 1):
            cur = [i] + [0] * len(b)
            for j, cb in enumerate(b, 1):
                cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb))
            prev = cur
        return prev[-1]

    rng = random.Random(3)
    for _ in range(20000):
        a, b = ("".join(rng.choice("abc") for _ in range(rng.randint(0, 8))) for _ in range(2))
        d = full(a, b)
        for limit in (0, 1, 2, 3):
            assert edit_distance_at_most(a, b, limit) == (d if d <= limit else None), (a, b, limit)


def test_a_failed_build_waits_settle_s_before_the_next_and_a_thread_refused_is_no_failure(store, caplog):
    clock = Clock()
    store._keeper.clock = clock
    query = LexicalQuery((WeightedTerms(("kettle",)),))
    expected = store.lexical(query, 30)
    builds = []

    def failing() -> None:
        builds.append(1)
        raise RuntimeError("disk on fire")

    store._read_for_postings = failing  # this store's own reader, not SQLite's
    clock.now += embedded_postings.SETTLE_S
    assert store.lexical(query, 30) == expected
    for t in [t for t in __import__("threading").enumerate() if t.name == "citebot-postings"]:
        t.join(timeout=60)
    assert builds == [1] and store._keeper.built is None and "disk on fire" in caplog.text
    for _ in range(5):  # not again at every read
        assert store.lexical(query, 30) == expected
    assert builds == [1] and not store._keeper.building

    def no_thread(version) -> None:
        raise RuntimeError("can't start new thread")

    store._build_postings_later = no_thread
    clock.now += embedded_postings.SETTLE_S
    assert store.lexical(query, 30) == expected  # the question is answered all the same
    assert not store._keeper.building and "did not start" in caplog.text


def test_a_term_not_as_the_index_cut_it_is_left_to_fts5(store):
    store.build_postings()
    for terms in (("Kettle",), ("kettle-milk",), ("ΆΔΕΙΑ", "ключ")):
        query = LexicalQuery((WeightedTerms(terms),))
        assert store.lexical(query, 30) == _fts5_only(store, query, None), terms
        assert store.lexical(query, 30), terms


def test_a_nan_score_ranks_as_the_full_stable_sort_ranks_it(store):
    matrix, owner, chunk_ids, _ = store._vectors()
    with np.errstate(invalid="ignore"):
        got = [c for c, _ in store.dense(np.full(4, np.nan, dtype=np.float32), 5)]
    assert got == chunk_ids[:5]


def test_words_past_the_kept_characters_are_asked_for_each_text(monkeypatch):
    import sqlite3

    from search import text

    monkeypatch.setattr(text, "LEARN_KEEP", len(text._CUT) - 128)  # keep no more
    kept = len(text._CUT)
    sample = "".join(chr(c) for c in range(0xA000, 0xA060)) + " Ꙁемля ꙁемля"  # Yi, Cyrillic Extended-B
    db = sqlite3.connect(":memory:")
    db.execute(f'CREATE VIRTUAL TABLE f USING fts5(t, tokenize="{text.TOKENIZE}")')
    db.execute("CREATE VIRTUAL TABLE v USING fts5vocab(f, 'instance')")
    db.execute("INSERT INTO f VALUES (?)", (sample,))
    assert text.words(sample) == [r[0] for r in db.execute("SELECT term FROM v ORDER BY offset")]
    assert text.fold("ꙀЕМЛЯ") == "ꙁемля"
    assert len(text._CUT) == kept

"""One contract for every store: the embedded store and Elasticsearch, same writes, same reads.

A tiny hand-made collection with hand-made unit vectors, so every expected answer can be
worked out by reading the test. Writes are followed by commit_ingest(), which is what
makes an ingest run visible on Elasticsearch (a no-op for the embedded store).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace

import numpy as np
import pytest

from search.embedded import EmbeddedStore
from search.errors import DimensionError, ModelMismatchError, StoreError
from search.store import Store
from search.types import Chunk, DocumentRecord, LexicalQuery, ModelStamp, WeightedTerms, Window
from tests import elastic_support
from tests.elastic_support import open_elastic

es_url, es_alias = elastic_support.es_url, elastic_support.es_alias  # fixtures

DIMS = 4
STAMP = ModelStamp("test/model-a", DIMS, "a" * 64)
OTHER = ModelStamp("test/model-b", DIMS, "b" * 64)


def unit(*xs: float) -> np.ndarray:
    v = np.asarray(xs, dtype=np.float32)
    return v / np.linalg.norm(v)


E1, E2, E3, E4 = (unit(*row) for row in np.eye(DIMS))


def make_doc(source: str, sections: list[tuple[tuple[str, ...], str, list[np.ndarray]]],
             content: str = "v1") -> tuple[DocumentRecord, list[Chunk], list[Window]]:
    doc_id = "d-" + source.replace("/", "-").replace(".", "-")
    doc = DocumentRecord(doc_id, source, f"hash-{source}-{content}", source.title(), "markdown")
    chunks, windows = [], []
    for ordinal, (heading, text, vectors) in enumerate(sections):
        cid = f"{doc_id}-{content}-{ordinal}"
        chunks.append(Chunk(cid, doc_id, source, heading, None if ordinal else "i", ordinal,
                            text, tokens=len(text.split()), overlap_prev=0, overlap_next=0))
        step = max(1, len(text) // len(vectors))
        for i, v in enumerate(vectors):
            windows.append(Window(cid, i, i * step, min(len(text), (i + 1) * step), v))
    return doc, chunks, windows


# Ten chunks in three documents. Words that tests look for: "kettle" (text of k0 twice,
# k1 once), "bollard" (b0 text, and only the heading of b1), "herding cats" (one phrase),
# "descale" (one chunk), "Zürich" (diacritics fold to "zurich").
KITCHEN = make_doc("kitchen.md", [
    (("Kitchen", "Kettle"), "The kettle sings in B flat. Fill the kettle before nine.", [E1]),
    (("Kitchen", "Cleaning"), "Descale the kettle on Fridays and wipe the counters.",
     [unit(1, 1, 0, 0), E2]),
    (("Kitchen", "Rota"), "The rota lists who buys milk, coffee and tea each week.", [E2]),
])
SITE = make_doc("site/annex.txt", [
    (("Annex",), "Park beside the yellow bollard by Dock 7 at the Zürich annex.", [E3]),
    (("Annex", "Bollard"), "Visitors sign in at the front desk and wear a badge.", [unit(0, 0, 1, 1)]),
    (("Annex", "Lunch"), "Lunch is served from noon in the canteen on level two.", [unit(0, 1, 1, 0)]),
    (("Annex", "Fire"), "Fire drills happen twice a year; follow the wardens outside.", [E4]),
])
RELEASE = make_doc("release.md", [
    (("Release",), "Shipping without the train is like herding cats in a wind tunnel.", [unit(1, 0, 0, 1)]),
    (("Release", "Soak"), "The soak runs for 72 hours on the test warehouse floor.", [unit(1, 0, 1, 0)]),
    (("Release", "Gate"), "A go or no-go meeting closes each soak before shipping.", [unit(0, 1, 0, 1)]),
])
ALL_DOCS = [RELEASE, KITCHEN, SITE]


class Backend:
    """Opens the same store again, as another process would."""

    def __init__(self, name: str, opener: Callable[[], Store]) -> None:
        self.name = name
        self.opener = opener
        self.opened: list[Store] = []

    def open(self) -> Store:
        store = self.opener()
        self.opened.append(store)
        return store

    def close(self) -> None:
        for store in self.opened:
            store.close()


@pytest.fixture(params=["embedded", pytest.param("elasticsearch", marks=pytest.mark.elasticsearch)])
def backend(request, tmp_path) -> Iterator[Backend]:
    if request.param == "embedded":
        b = Backend("embedded", lambda: EmbeddedStore(tmp_path / "store"))
    else:
        url, alias = request.getfixturevalue("es_url"), request.getfixturevalue("es_alias")
        b = Backend("elasticsearch", lambda: open_elastic(url, alias))
    yield b
    b.close()


def fill(store: Store, docs=ALL_DOCS) -> None:
    store.open_for(STAMP)
    for doc, chunks, windows in docs:
        store.replace_document(doc, chunks, windows)
    store.commit_ingest()


@pytest.fixture()
def store(backend) -> Store:
    """The collection written by one connection and read through another."""
    fill(backend.open())
    return backend.open()


def ids(ranked) -> list[str]:
    return [cid for cid, _ in ranked]


def chunk_ids(doc) -> list[str]:
    return [c.chunk_id for c in doc[1]]


# -- empty store, stamps, widths ---------------------------------------------------------------
def test_an_empty_store_answers_with_nothing(backend):
    store = backend.open()
    assert store.stamp() is None
    assert store.chunk_count() == 0
    assert store.iter_chunks() == [] and store.get_chunks(["nope"]) == []
    assert store.document_hashes() == {}
    assert store.dense(E1, 5) == []
    assert store.lexical(LexicalQuery((WeightedTerms(("kettle",)),)), 5) == []
    assert store.doc_freqs(["kettle"]) == {"kettle": 0}
    assert store.vocabulary() == set()
    assert store.phrase_matches(("herding", "cats"), 3) == []


def test_open_for_stamps_the_store_and_a_reader_sees_the_stamp(backend):
    writer = backend.open()
    writer.open_for(STAMP)
    assert writer.stamp() == STAMP
    fill(writer)
    assert backend.open().stamp() == STAMP


def test_another_models_store_is_refused_naming_both_models(store, backend):
    with pytest.raises(ModelMismatchError) as err:
        backend.open().open_for(OTHER)
    assert "test/model-a" in str(err.value) and "test/model-b" in str(err.value)
    store.open_for(STAMP)  # the right model opens fine


@pytest.mark.parametrize("built, configured", [
    (("onnxruntime", "fp32"), ("onnxruntime", "int8")),
    (("onnxruntime", "int8"), ("onnxruntime", "fp32")),
    (("torch", "fp32"), ("onnxruntime", "int8")),
])
def test_another_precision_is_refused_naming_both(backend, built, configured):
    """Vectors of the same weights at another precision are never queried silently: int8
    vectors sit ~0.01 of cosine away from fp32 ones."""
    writer = backend.open()
    writer.open_for(replace(STAMP, runtime=built[0], precision=built[1]))
    doc, chunks, windows = KITCHEN
    writer.replace_document(doc, chunks, windows)
    writer.commit_ingest()
    with pytest.raises(ModelMismatchError) as err:
        backend.open().open_for(replace(STAMP, runtime=configured[0], precision=configured[1]))
    assert " ".join(built) in str(err.value) and " ".join(configured) in str(err.value)
    backend.open().open_for(replace(STAMP, runtime=built[0], precision=built[1]))


def test_a_store_built_on_torch_at_fp32_opens_on_onnx_runtime_at_fp32(backend):
    """The same arithmetic on the same weights (cosine above 0.99999): an upgrade keeps
    its store."""
    writer = backend.open()
    writer.open_for(replace(STAMP, runtime="torch", precision="fp32"))
    doc, chunks, windows = KITCHEN
    writer.replace_document(doc, chunks, windows)
    writer.commit_ingest()
    backend.open().open_for(replace(STAMP, runtime="onnxruntime", precision="fp32"))


def test_a_stamp_from_before_runtimes_were_recorded_reads_as_torch_fp32():
    old = {"name": STAMP.name, "dims": STAMP.dims, "checksum": STAMP.checksum}
    assert ModelStamp.from_dict(old) == replace(STAMP, runtime="torch", precision="fp32")
    assert ModelStamp.from_dict(STAMP.as_dict()) == STAMP


def test_vectors_of_the_wrong_width_are_refused(backend):
    store = backend.open()
    store.open_for(STAMP)
    doc, chunks, windows = KITCHEN
    bad = [Window(w.chunk_id, w.index, w.start, w.end, np.ones(DIMS + 1, np.float32) / 5)
           for w in windows]
    with pytest.raises(DimensionError):
        store.replace_document(doc, chunks, bad)
    store.replace_document(doc, chunks, windows)
    store.commit_ingest()
    with pytest.raises(DimensionError):
        backend.open().dense(np.ones(DIMS + 2, np.float32) / 3, 3)


def test_writing_before_any_stamp_is_refused(backend):
    doc, chunks, windows = KITCHEN
    with pytest.raises(StoreError):
        backend.open().replace_document(doc, chunks, windows)


# -- writes and reads ----------------------------------------------------------------------------
def test_chunks_come_back_whole_in_reading_order(store):
    expected = sorted((c for d in ALL_DOCS for c in d[1]), key=lambda c: (c.source, c.ordinal))
    assert store.iter_chunks() == expected
    assert store.chunk_count() == 10
    assert store.document_hashes() == {d[0].source: d[0].content_hash for d in ALL_DOCS}


def test_get_chunks_keeps_the_order_asked_and_leaves_out_unknown_ids(store):
    wanted = [chunk_ids(SITE)[2], "no-such-chunk", chunk_ids(KITCHEN)[0]]
    got = store.get_chunks(wanted)
    assert [c.chunk_id for c in got] == [wanted[0], wanted[2]]
    assert got[1] == KITCHEN[1][0]  # heading path, page label, text: all as written
    assert store.get_chunks([]) == []


def test_neighbours_are_the_previous_and_next_chunk_of_the_same_document(store):
    first, middle, last = KITCHEN[1]
    assert store.neighbours(middle) == (first, last)
    assert store.neighbours(first) == (None, middle)
    assert store.neighbours(last) == (middle, None)


def test_replacing_a_document_replaces_all_its_chunks(backend, store):
    new = make_doc("kitchen.md", [(("Kitchen",), "The kettle moved to the annex kitchen.", [E2])],
                   content="v2")
    writer = backend.open()
    writer.open_for(STAMP)
    writer.replace_document(*new)
    writer.commit_ingest()
    reader = backend.open()
    kitchen = [c for c in reader.iter_chunks() if c.source == "kitchen.md"]
    assert kitchen == new[1]
    assert reader.chunk_count() == 8
    assert reader.document_hashes()["kitchen.md"] == "hash-kitchen.md-v2"
    assert reader.get_chunks(chunk_ids(KITCHEN)) == []
    assert reader.doc_freqs(["descale", "moved"]) == {"descale": 0, "moved": 1}
    assert ids(reader.dense(E2, 1)) == [new[1][0].chunk_id]


def test_deleting_documents_removes_chunks_vectors_and_words(backend, store):
    writer = backend.open()
    writer.open_for(STAMP)
    writer.delete_documents(["site/annex.txt", "release.md"])
    writer.commit_ingest()
    reader = backend.open()
    assert [c.source for c in reader.iter_chunks()] == ["kitchen.md"] * 3
    assert set(reader.document_hashes()) == {"kitchen.md"}
    assert reader.doc_freqs(["bollard"]) == {"bollard": 0}
    assert set(ids(reader.dense(E3, 10))) <= set(chunk_ids(KITCHEN))


# -- lexical arm ---------------------------------------------------------------------------------
def test_lexical_ranks_by_bm25_over_text_and_heading(store):
    k0, k1, _ = chunk_ids(KITCHEN)
    ranked = store.lexical(LexicalQuery((WeightedTerms(("kettle",)),)), 10)
    # k0 holds "kettle" twice in its text (and once in its heading), k1 once.
    assert ids(ranked) == [k0, k1]
    assert ranked[0][1] > ranked[1][1] > 0


def test_a_heading_match_counts_for_less_than_a_text_match(store):
    b0, b1, _, _ = chunk_ids(SITE)
    ranked = store.lexical(LexicalQuery((WeightedTerms(("bollard",)),)), 10)
    assert ids(ranked) == [b0, b1]  # b1 has "Bollard" only in its heading


def test_group_weights_scale_each_groups_share(store):
    k0 = chunk_ids(KITCHEN)[0]
    soak_chunks = set(chunk_ids(RELEASE)[1:])
    heavy_soak = LexicalQuery((WeightedTerms(("soak",), 1.0), WeightedTerms(("kettle",), 0.05)))
    assert set(ids(store.lexical(heavy_soak, 10))[:2]) == soak_chunks
    heavy_kettle = LexicalQuery((WeightedTerms(("soak",), 0.05), WeightedTerms(("kettle",), 1.0)))
    assert ids(store.lexical(heavy_kettle, 10))[0] == k0
    assert len(store.lexical(heavy_kettle, 3)) == 3


def test_a_stemmed_group_finds_other_forms_of_a_word_in_text_and_heading(store):
    _, k1, _ = chunk_ids(KITCHEN)
    _, _, r2 = chunk_ids(RELEASE)
    # k1: "Descale the kettle..." under the heading "Cleaning"; r2: "...before shipping".
    assert store.lexical(LexicalQuery((WeightedTerms(("descaling",)),)), 10) == []
    assert ids(store.lexical(LexicalQuery((WeightedTerms(("descaling",), stemmed=True),)), 10)) == [k1]
    assert ids(store.lexical(LexicalQuery((WeightedTerms(("cleaned",), stemmed=True),)), 10)) == [k1]
    shipped = ids(store.lexical(LexicalQuery((WeightedTerms(("shipped",), stemmed=True),)), 10))
    assert set(shipped) == {chunk_ids(RELEASE)[0], r2}  # "Shipping", "shipping"
    # A one-word term whose stem is a stopword searches nothing.
    assert store.lexical(LexicalQuery((WeightedTerms(("whats",), stemmed=True),)), 10) == []


def test_a_stemmed_group_adds_its_weighted_share_to_the_words_group(store):
    k0, k1, _ = chunk_ids(KITCHEN)
    words_only = dict(store.lexical(LexicalQuery((WeightedTerms(("kettle",)),)), 10))
    both = dict(store.lexical(LexicalQuery((WeightedTerms(("kettle",)),
                                            WeightedTerms(("kettle",), 0.5, stemmed=True))), 10))
    assert set(both) == {k0, k1}
    assert all(both[c] > words_only[c] for c in both)


def test_phrases_search_the_text_only(store):
    r0 = chunk_ids(RELEASE)[0]
    ranked = store.lexical(LexicalQuery((), (("herding cats", 1.0),)), 10)
    assert ids(ranked) == [r0]
    assert store.lexical(LexicalQuery((), (("cats herding", 1.0),)), 10) == []
    assert store.phrase_matches(("herding", "cats", "in", "a", "wind", "tunnel"), 3) == [r0]
    assert store.phrase_matches(("kitchen", "kettle"), 3) == []  # a heading is not text


def test_phrase_lookups_in_one_batch_answer_as_one_at_a_time(store):
    batch = [("herding", "cats", "in", "a"), ("herding", "cats"), ("the",), ("cats", "herding", "in"),
             ("cats", "herding"), ("soak",), ()]
    answers = [sorted(ids) for ids in store.phrase_matches_many(batch, 3)]
    assert answers == [sorted(store.phrase_matches(p, 3)) for p in batch]
    assert answers[0] and answers[1] and not answers[3]
    assert store.phrase_matches_many([], 3) == []


def test_the_embedded_store_does_not_read_a_phrase_holding_one_no_chunk_holds(tmp_path):
    read: list[str] = []

    class Recording(EmbeddedStore):
        def _match(self, expression, *args, **kwargs):
            read.append(expression)
            return super()._match(expression, *args, **kwargs)

    store = Recording(tmp_path / "store")
    fill(store)
    found = store.phrase_matches_many([("cats", "herding", "in", "a"), ("herding", "cats"), ("cats", "herding")], 3)
    assert found == [[], [chunk_ids(RELEASE)[0]], []]
    assert read == ['text : "herding cats"', 'text : "cats herding"']
    store.close()


def test_spelling_candidates_are_indexed_words_near_the_term(store):
    offered = store.spelling_candidates(["kettel", "bolard", "qqqqqq"])
    assert "kettle" in offered["kettel"] and "bollard" in offered["bolard"]
    assert offered["qqqqqq"] == []


def test_phrase_matches_returns_at_most_limit_plus_one(store):
    # "the" is in the text of 9 chunks
    assert len(store.phrase_matches(("the",), 2)) == 3
    assert len(store.phrase_matches(("the",), 50)) == 9


def test_diacritics_and_case_fold_as_in_the_query_tokeniser(store):
    b0 = chunk_ids(SITE)[0]
    assert ids(store.lexical(LexicalQuery((WeightedTerms(("zurich",)),)), 5)) == [b0]
    assert store.doc_freqs(["zurich", "zürich"]) == {"zurich": 1, "zürich": 0}


# -- counts and vocabulary ----------------------------------------------------------------------
def test_document_frequencies_count_chunks_holding_the_term_in_text_or_heading(store):
    assert store.doc_freqs(["kettle", "bollard", "soak", "the", "absent", "herding"]) == {
        "kettle": 2, "bollard": 2, "soak": 2, "the": 9, "absent": 0, "herding": 1,
    }
    assert store.doc_freqs([]) == {}


def test_vocabulary_holds_every_indexed_term_of_text_and_headings(store):
    vocab = store.vocabulary()
    assert {"kettle", "bollard", "zurich", "72", "cats", "lunch", "cleaning"} <= vocab
    assert "kettles" not in vocab and "zürich" not in vocab
    assert all(t == t.lower() for t in vocab)


# -- dense arm -----------------------------------------------------------------------------------
def test_dense_ranks_chunks_by_their_best_window_with_cosine_scores(store):
    k0, k1, k2 = chunk_ids(KITCHEN)
    ranked = store.dense(E2, 3)
    # k1 has a window equal to E2 (its other window is between E1 and E2); k2 is E2 too.
    assert set(ids(ranked[:2])) == {k1, k2}
    assert ranked[0][1] == pytest.approx(1.0, abs=1e-4)
    assert ranked[2][1] == pytest.approx(float(unit(0, 1, 1, 0) @ E2), abs=1e-4)
    best = store.dense(unit(1, 0.9, 0, 0), 2)
    assert ids(best) == [k1, k0]  # k1's first window is (1,1,0,0)/√2
    assert best[0][1] == pytest.approx(float(unit(1, 1, 0, 0) @ unit(1, 0.9, 0, 0)), abs=1e-4)


def test_window_scores_are_every_windows_span_and_cosine_in_order(store):
    k0, k1, _ = chunk_ids(KITCHEN)
    q = unit(1, 0.9, 0, 0)
    scores = store.window_scores(q, [k1, "no-such-chunk", k0])
    assert set(scores) == {k0, k1}  # the unknown id is left out
    text = KITCHEN[1][1].text
    half = len(text) // 2
    assert [(w.start, w.end) for w in scores[k1]] == [(0, half), (half, 2 * half)]
    assert [w.score for w in scores[k1]] == pytest.approx(
        [float(unit(1, 1, 0, 0) @ q), float(E2 @ q)], abs=1e-4)
    assert [w.score for w in scores[k0]] == pytest.approx([float(E1 @ q)], abs=1e-4)
    assert store.window_scores(q, []) == {}


def test_window_scores_of_the_wrong_width_are_refused(store):
    with pytest.raises(DimensionError):
        store.window_scores(np.ones(DIMS + 1, dtype=np.float32), chunk_ids(KITCHEN))


def test_dense_returns_k_distinct_chunks(store):
    ranked = store.dense(unit(1, 1, 1, 1), 10)
    assert len(ranked) == 10 and len(set(ids(ranked))) == 10
    assert [s for _, s in ranked] == sorted((s for _, s in ranked), reverse=True)
    assert len(store.dense(E1, 4)) == 4


def test_the_superseded_mark_survives_a_round_trip(backend, store):
    from dataclasses import replace

    doc, chunks, windows = make_doc("old.md", [(("Old",), "The old rota, kept for the record.", [E1])])
    chunks = [replace(c, superseded=True) for c in chunks]
    writer = backend.open()
    writer.open_for(STAMP)
    writer.replace_document(doc, chunks, windows)
    writer.commit_ingest()
    reader = backend.open()
    assert [c.superseded for c in reader.get_chunks([chunks[0].chunk_id])] == [True]
    assert all(not c.superseded for c in reader.iter_chunks() if c.source != "old.md")


# -- collection statistics (the refusal gate's calibration) -----------------------------------
def test_a_statistic_is_stored_with_the_collection_and_read_by_another_connection(store, backend):
    from search import calibration

    assert store.read_stat("gate_null") is None
    null = calibration.calibrate(store, lambda texts: np.stack([unit(1, 1, 0, 0) for _ in texts]))
    assert null is not None and null.n == calibration.NULL_QUESTIONS
    reader = backend.open()
    assert calibration.stored(reader) == null
    assert reader.stamp() == STAMP  # the model stamp beside it is kept
    reader.write_stat("other", {"x": 1})
    assert calibration.stored(backend.open()) == null and backend.open().read_stat("other") == {"x": 1}


def test_a_new_ingest_starts_without_the_old_statistics(backend):
    """A stale calibration cannot outlive the collection it measured: each Elasticsearch
    ingest builds a new index, and each embedded-store write drops the statistics in its
    own transaction (a run killed before measuring them again used to leave the old ones,
    and the next run, finding nothing to write, kept them: tests/test_faults_embedded.py)."""
    writer = backend.open()
    fill(writer, ALL_DOCS[:1])
    writer.write_stat("gate_null", {"version": 1, "mean": 0.4, "std": 0.1, "n": 64})
    fill(writer, ALL_DOCS)
    assert backend.open().read_stat("gate_null") is None


# -- where a chunk opens (search/links.py) ----------------------------------------------------
def test_addresses_and_anchors_survive_a_round_trip_and_a_later_ingest(backend, store):
    doc, chunks, windows = make_doc("guide/install.html", [
        (("Install",), "Install the kettle.", [E1]),
        (("Install", "With pip"), "Run pip and wait.", [E2]),
    ])
    url = "https://kettle.example.org/install.html"
    chunks = [replace(chunks[0], url=url, anchor="install"), replace(chunks[1], url=url, anchor="with-pip")]
    writer = backend.open()
    writer.open_for(STAMP)
    writer.replace_document(doc, chunks, windows)
    writer.commit_ingest()
    reader = backend.open()
    assert reader.get_chunks([c.chunk_id for c in chunks]) == chunks
    assert reader.neighbours(chunks[0]) == (None, chunks[1])
    assert all(c.url is None and c.anchor is None for c in reader.iter_chunks() if c.source != doc.source)
    # Another run rewrites one document; on Elasticsearch the others are copied to a new index.
    writer.replace_document(*make_doc("release.md", [(("Release",), "The train left.", [E4])], "v2"))
    writer.commit_ingest()
    assert [c for c in backend.open().iter_chunks() if c.source == doc.source] == chunks


def _written_before_links(chunk: Chunk) -> Chunk:
    return replace(chunk, url=None, anchor=None)


def test_an_embedded_store_written_before_links_opens_and_reads_without_them(tmp_path):
    import json
    import sqlite3

    from search import embedded, embedded_migrations

    path = tmp_path / "old"
    path.mkdir()
    db = sqlite3.connect(path / embedded.DB_NAME, isolation_level=None)
    db.execute("CREATE TABLE _migrations (name TEXT PRIMARY KEY)")
    before = [(n, step) for n, step in embedded_migrations._MIGRATIONS if n < "m004"]
    assert [n for n, _ in before] == ["m001_initial", "m002_turns", "m003_superseded"]
    for name, step in before:
        step(db)
        db.execute("INSERT INTO _migrations VALUES (?)", (name,))
    doc, chunks, _windows = KITCHEN
    db.execute("INSERT INTO meta VALUES ('model_stamp', ?)",
               (json.dumps({"name": STAMP.name, "dims": STAMP.dims, "checksum": STAMP.checksum}),))
    db.execute("INSERT INTO documents VALUES (?, ?, ?, ?, ?)",
               (doc.doc_id, doc.source, doc.content_hash, doc.title, doc.format))
    for c in chunks:
        db.execute("INSERT INTO chunks (chunk_id, doc_id, source, ordinal, heading_path, page, text,"
                   " tokens, overlap_prev, overlap_next) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                   (c.chunk_id, c.doc_id, c.source, c.ordinal, json.dumps(list(c.heading_path)),
                    c.page, c.text, c.tokens, 0, 0))
    db.close()

    store = EmbeddedStore(path)
    assert store.iter_chunks() == [_written_before_links(c) for c in chunks]
    new_doc, new_chunks, new_windows = make_doc("guide.md", [(("Guide",), "Read me.", [E3])])
    new_chunks = [replace(c, url="https://wiki.example.com/guide") for c in new_chunks]
    store.replace_document(new_doc, new_chunks, new_windows)
    assert store.get_chunks([new_chunks[0].chunk_id]) == new_chunks
    store.close()


# Words beyond Latin script: Cyrillic "й" and "ё", Greek accents and final sigma, an Arabic
# hamza: unicode61 keeps them where Python's NFD folding took them off.
BEYOND_LATIN = make_doc("team/ru-el.md", [
    (("Отпуск", "Άδεια"), "Новый сотрудник получает ключ от офиса. Η άδεια ΜΗΤΡΟΤΗΤΑΣ: δεκαπέντε ημέρες.",
     [E1]),
    (("Праздники",), "Офис закрыт в Новый год; الإثنين يوم عمل.", [E2]),
])


def test_words_beyond_latin_script_are_found_as_the_question_cuts_them(backend):
    from search.text import content_words, query_stems

    fill(backend.open(), [BEYOND_LATIN])
    store = backend.open()
    first, second = chunk_ids(BEYOND_LATIN)
    for question, found in (("Сотрудник?", [first]), ("η άδεια", [first]), ("ключ", [first]),
                            ("الإثنين", [second]), ("новый год", [first, second])):
        terms = content_words(question)
        assert terms and all(n > 0 for n in store.doc_freqs(terms).values()), question
        assert set(ids(store.lexical(LexicalQuery((WeightedTerms(tuple(terms)),)), 5))) == set(found), question
        assert all(query_stems(t) for t in terms)
        stemmed = ids(store.lexical(LexicalQuery((WeightedTerms(tuple(terms), stemmed=True),)), 5))
        assert set(stemmed) == set(found), question
    assert {"новый", "άδεια", "μητροτητασ", "الإثنين"} <= store.vocabulary()


# Words whose combining marks unicode61's default took for separators: Devanagari and Thai
# vowel signs and a virama, Arabic vowel marks (search.text.TOKENIZE keeps them inside).
MARKED = make_doc("team/hi-th.md", [
    (("छुट्टी",), "छुट्टी की नीति: नए कर्मचारी को पहले दिन कुंजी मिलती है। كِتَاب", [E1]),
    (("วันหยุด",), "สำนักงานปิดวันปีใหม่ ไม่ต้องมาทำงาน; छुट्टी", [E2]),
])


def _default_cut(text: str) -> str:
    """Tokens as unicode61's default cut them (combining marks as separators)."""
    import sqlite3

    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE f USING fts5(t, tokenize='unicode61 remove_diacritics 2')")
    db.execute("CREATE VIRTUAL TABLE v USING fts5vocab(f, 'instance')")
    db.execute("INSERT INTO f VALUES (?)", (text,))
    return " ".join(r[0] for r in db.execute("SELECT term FROM v ORDER BY offset"))


def test_words_with_combining_marks_are_found_whole(backend):
    from search.text import content_words

    fill(backend.open(), [MARKED, KITCHEN])
    store = backend.open()
    first, second = chunk_ids(MARKED)
    for question, found in (("छुट्टी?", [first, second]), ("कर्मचारी कुंजी", [first]), ("ไม่ต้องมาทำงาน", [second]),
                            ("สำนักงานปิดวันปีใหม่", [second]), ("كِتَاب", [first])):
        terms = content_words(question)
        assert terms and all(n > 0 for n in store.doc_freqs(terms).values()), question
        assert set(ids(store.lexical(LexicalQuery((WeightedTerms(tuple(terms)),)), 5))) == set(found), question
        stemmed = ids(store.lexical(LexicalQuery((WeightedTerms(tuple(terms), stemmed=True),)), 5))
        assert set(stemmed) == set(found), question
    assert {"छुट्टी", "कर्मचारी", "ไม่ต้องมาทำงาน", "كِتَاب"} <= store.vocabulary()
    assert not {"छ", "ट", "क"} & store.vocabulary()  # the default's fragments


def test_a_phrase_across_a_lone_accent_is_found(backend):
    """A lone combining accent is no word in either store, and holds no position between two."""
    doc = make_doc("accents.md", [(("Accents",), "Type the combining acute \u0301 after the letter.", [E1])])
    fill(backend.open(), [doc, KITCHEN])
    store = backend.open()
    assert store.phrase_matches(("acute", "after"), 5) == chunk_ids(doc)
    assert None not in store.vocabulary() and "" not in store.vocabulary()


def test_an_embedded_store_of_the_default_cut_is_cut_again_when_opened(tmp_path, caplog):
    store = EmbeddedStore(tmp_path / "old")
    fill(store, [KITCHEN, MARKED])
    first, second = chunk_ids(MARKED)
    k0, k1, _ = chunk_ids(KITCHEN)
    kettle = ids(store.lexical(LexicalQuery((WeightedTerms(("kettle", "descaling")),)), 10))
    # As an older citebot wrote them: unicode61's default options, stems cut the default's way.
    db = store._db
    db.execute("DELETE FROM _migrations WHERE name = 'm012_marks_inside_words'")
    rows = db.execute("SELECT rowid, text, heading FROM chunks_fts").fetchall()
    stem_rows = db.execute("SELECT rowid, stems, heading FROM chunks_stems").fetchall()
    for trigger in ("chunks_stems_delete",):
        sql = db.execute("SELECT sql FROM sqlite_master WHERE name = ?", (trigger,)).fetchone()[0]
        db.execute(f"DROP TRIGGER {trigger}")
    db.execute("DROP TABLE chunks_vocab")
    db.execute("DROP TABLE chunks_fts")
    db.execute("DROP TABLE chunks_stems")
    old = "tokenize = 'unicode61 remove_diacritics 2'"
    db.execute(f"CREATE VIRTUAL TABLE chunks_fts USING fts5(text, heading, {old})")
    db.execute(f"CREATE VIRTUAL TABLE chunks_stems USING fts5(stems, heading, {old})")
    db.execute("CREATE VIRTUAL TABLE chunks_vocab USING fts5vocab(chunks_fts, 'row')")
    db.execute(sql)
    db.executemany("INSERT INTO chunks_fts (rowid, text, heading) VALUES (?, ?, ?)", rows)
    marked = {r[0] for r in db.execute("SELECT id FROM chunks WHERE source = 'team/hi-th.md'")}
    db.executemany("INSERT INTO chunks_stems (rowid, stems, heading) VALUES (?, ?, ?)",
                   [(r, _default_cut(t), _default_cut(h)) if r in marked else (r, t, h) for r, t, h in stem_rows])
    # The default's fragments are what the old index holds ("छ", "ट"), not the word.
    assert db.execute("SELECT count(*) FROM chunks_vocab WHERE term = 'छुट्टी'").fetchone()[0] == 0
    assert db.execute("SELECT count(*) FROM chunks_vocab WHERE term = 'छ'").fetchone()[0] == 1
    store.close()

    with caplog.at_level("INFO", logger="citebot.search"):
        reopened = EmbeddedStore(tmp_path / "old")
    assert "wrote the stems of 2 chunks" in caplog.text  # the two holding marks, not KITCHEN's
    for stemmed in (False, True):
        found = reopened.lexical(LexicalQuery((WeightedTerms(("छुट्टी",), stemmed=stemmed),)), 5)
        assert set(ids(found)) == {first, second}
        assert ids(reopened.lexical(LexicalQuery((WeightedTerms(("ไม่ต้องมาทำงาน",), stemmed=stemmed),)), 5)) == [second]
    assert ids(reopened.lexical(LexicalQuery((WeightedTerms(("kettle", "descaling")),)), 10)) == kettle
    assert "छुट्टी" in reopened.vocabulary() and "छ" not in reopened.vocabulary()
    reopened.delete_documents(["team/hi-th.md"])  # the triggers set back: the stems go with their chunks
    assert reopened._db.execute("SELECT count(*) FROM chunks_stems").fetchone()[0] == 3
    assert {k0, k1} <= set(ids(reopened.lexical(LexicalQuery((WeightedTerms(("kettle",), stemmed=True),)), 10)))
    reopened.close()


def test_stems_an_older_citebot_cut_its_own_way_are_written_again_when_opened(tmp_path, caplog):
    """A downgrade after m012: a citebot that took combining marks for separators writes
    chunks with their stems cut its way ("छ ट ट") and clears stems_pending, as this version's
    ingest does. The next open writes those stems again; this version's own are left."""
    import json

    store = EmbeddedStore(tmp_path / "store")
    fill(store, [KITCHEN])
    db = store._db
    doc, chunks, _ = MARKED
    db.execute("INSERT INTO documents VALUES (?, ?, ?, ?, ?)",
               (doc.doc_id, doc.source, doc.content_hash, doc.title, doc.format))
    for c in chunks:  # that citebot's replace_document
        cur = db.execute("INSERT INTO chunks (chunk_id, doc_id, source, ordinal, heading_path, page, text,"
                         " tokens, overlap_prev, overlap_next) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                         (c.chunk_id, c.doc_id, c.source, c.ordinal, json.dumps(list(c.heading_path)),
                          c.page, c.text, c.tokens, 0, 0))
        db.execute("INSERT INTO chunks_fts (rowid, text, heading) VALUES (?, ?, ?)",
                   (cur.lastrowid, c.text, c.heading_text()))
        db.execute("INSERT INTO chunks_stems (rowid, stems, heading) VALUES (?, ?, ?)",
                   (cur.lastrowid, _default_cut(c.text), _default_cut(c.heading_text())))
        db.execute("DELETE FROM stems_pending WHERE chunk_rowid = ?", (cur.lastrowid,))
    stemmed = LexicalQuery((WeightedTerms(("छुट्टी",), stemmed=True),))
    assert ids(store.lexical(stemmed, 5)) == []  # the fragments "छ", "ट"
    store.close()

    with caplog.at_level("INFO", logger="citebot.search"):
        reopened = EmbeddedStore(tmp_path / "store")
    assert "wrote the stems of 2 chunks" in caplog.text  # MARKED's, not KITCHEN's
    assert set(ids(reopened.lexical(stemmed, 5))) == set(chunk_ids(MARKED))
    reopened.replace_document(*make_doc("team/th.md", [(("ไทย",), "ไม่ต้องมาทำงาน", [E3])]))
    reopened.close()
    caplog.clear()
    with caplog.at_level("INFO", logger="citebot.search"):
        EmbeddedStore(tmp_path / "store").close()
    assert "wrote the stems" not in caplog.text


def test_an_embedded_store_whose_stems_were_cut_otherwise_gets_them_again_when_opened(tmp_path, caplog):
    import json

    store = EmbeddedStore(tmp_path / "old")
    fill(store, [KITCHEN, SITE, BEYOND_LATIN])
    first, second = chunk_ids(BEYOND_LATIN)
    # As an older citebot cut them: NFD, combining marks stripped ("новыи", "αδεια").
    db = store._db
    rows = db.execute("SELECT id, text, heading_path FROM chunks WHERE source = 'team/ru-el.md'").fetchall()
    for rowid, text, heading in rows:
        old = [_nfd_words(text), _nfd_words(" ".join(json.loads(heading)))]
        db.execute("DELETE FROM chunks_stems WHERE rowid = ?", (rowid,))
        db.execute("INSERT INTO chunks_stems (rowid, stems, heading) VALUES (?, ?, ?)", (rowid, *old))
    assert ids(store.lexical(LexicalQuery((WeightedTerms(("новый",), stemmed=True),)), 5)) == []
    db.execute("DELETE FROM _migrations WHERE name = 'm011_stems_cut_as_unicode61'")
    store.close()

    with caplog.at_level("INFO", logger="citebot.search"):
        reopened = EmbeddedStore(tmp_path / "old")
    # Only the chunks the two cuts differ on: not SITE's "Zürich", which both cut "zurich".
    assert "wrote the stems of 2 chunks" in caplog.text
    assert set(ids(reopened.lexical(LexicalQuery((WeightedTerms(("новый",), stemmed=True),)), 5))) == {first, second}
    assert ids(reopened.lexical(LexicalQuery((WeightedTerms(("праздники",), stemmed=True),)), 5)) == [second]
    assert ids(reopened.lexical(LexicalQuery((WeightedTerms(("άδεια",), stemmed=True),)), 5)) == [first]
    assert reopened._db.execute("SELECT count(*) FROM stems_pending").fetchone()[0] == 0
    assert reopened._db.execute("SELECT count(*) FROM chunks_stems").fetchone()[0] == 9
    k0, k1, _ = chunk_ids(KITCHEN)  # ASCII chunks: left as they were
    assert ids(reopened.lexical(LexicalQuery((WeightedTerms(("descaling",), stemmed=True),)), 10)) == [k1]
    reopened.close()


def _nfd_words(text: str) -> str:
    """Tokens as citebot cut them before unicode61's own cut (NFD, combining marks dropped)."""
    import re
    import unicodedata

    decomposed = unicodedata.normalize("NFD", text.lower())
    return " ".join(re.findall(r"[^\W_]+", "".join(c for c in decomposed if not unicodedata.combining(c))))


def test_an_embedded_store_written_before_stems_gets_them_when_opened(tmp_path):
    store = EmbeddedStore(tmp_path / "old")
    fill(store, [KITCHEN])
    # Back to the layout before m005: chunks and words, no stemmed table.
    store._db.execute("DROP TABLE chunks_stems")
    store._db.execute("DELETE FROM _migrations WHERE name = 'm005_stems'")
    store.close()

    reopened = EmbeddedStore(tmp_path / "old")
    _, k1, _ = chunk_ids(KITCHEN)
    assert ids(reopened.lexical(LexicalQuery((WeightedTerms(("cleaned",), stemmed=True),)), 10)) == [k1]
    assert ids(reopened.lexical(LexicalQuery((WeightedTerms(("descaling",), stemmed=True),)), 10)) == [k1]
    reopened.close()


def test_chunks_an_older_citebot_writes_or_deletes_get_their_stems_right(tmp_path):
    """A downgrade: a citebot from before the stems writes into a migrated store."""
    import json

    store = EmbeddedStore(tmp_path / "store")
    fill(store, [KITCHEN, SITE])
    db = store._db
    # What that citebot's ingest does: chunks and words, nothing of chunks_stems.
    for source in ("site/annex.txt",):
        rowids = [r[0] for r in db.execute("SELECT id FROM chunks WHERE source = ?", (source,))]
        for i in rowids:
            db.execute("DELETE FROM chunks_fts WHERE rowid = ?", (i,))
            db.execute("DELETE FROM windows WHERE chunk_rowid = ?", (i,))
            db.execute("DELETE FROM chunks WHERE id = ?", (i,))
        db.execute("DELETE FROM documents WHERE source = ?", (source,))
    doc, chunks, _ = make_doc("notes.md", [(("Notes",), "Visitors were descaling the urn.", [E1])])
    db.execute("INSERT INTO documents VALUES (?, ?, ?, ?, ?)",
               (doc.doc_id, doc.source, doc.content_hash, doc.title, doc.format))
    c = chunks[0]
    cur = db.execute("INSERT INTO chunks (chunk_id, doc_id, source, ordinal, heading_path, page, text,"
                     " tokens, overlap_prev, overlap_next) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                     (c.chunk_id, c.doc_id, c.source, c.ordinal, json.dumps(list(c.heading_path)),
                      c.page, c.text, c.tokens, 0, 0))
    db.execute("INSERT INTO chunks_fts (rowid, text, heading) VALUES (?, ?, ?)",
               (cur.lastrowid, c.text, "Notes"))
    store.close()

    reopened = EmbeddedStore(tmp_path / "store")
    _, k1, _ = chunk_ids(KITCHEN)
    found = ids(reopened.lexical(LexicalQuery((WeightedTerms(("descaled",), stemmed=True),)), 10))
    assert set(found) == {k1, c.chunk_id}
    # The annex's chunks are gone from the stems too ("visitor" was only there and in notes).
    assert ids(reopened.lexical(LexicalQuery((WeightedTerms(("visitor",), stemmed=True),)), 10)) == [
        c.chunk_id]
    assert reopened._db.execute("SELECT count(*) FROM stems_pending").fetchone()[0] == 0
    assert reopened._db.execute("SELECT count(*) FROM chunks_stems").fetchone()[0] == 4
    reopened.close()


def _alias_an_index_of_an_earlier_layout(es_url: str, es_alias: str, left_out: tuple[str, ...],
                                        format: int | None = None, docs=None, cut=None) -> None:
    """The KITCHEN document (or `docs`) in an index as an earlier version wrote it: today's
    mapping and chunks without the fields `left_out` (and with that version's index format,
    and its tokens cut by `cut`), behind the alias."""
    from search.elastic import client as elastic_client
    from search.elastic import mapping as elastic_mapping

    client = elastic_client.connect(es_url)
    mapping = elastic_mapping.mapping_for(STAMP, "complete")
    if format is not None:
        mapping["_meta"]["citebot"]["format"] = format
    for name in left_out:
        del mapping["properties"][name]
    old_index = f"{es_alias}-v{'0' * 20}"
    client.indices.create(index=old_index, settings={"number_of_shards": 1}, mappings=mapping)
    actions = []
    for doc, chunks, windows in docs or [KITCHEN]:
        actions.append(elastic_mapping._document_action(old_index, doc))
        for c in chunks:
            action = elastic_mapping._chunk_action(old_index, c, [w for w in windows if w.chunk_id == c.chunk_id])
            if cut is not None:
                src = action["_source"]
                text, heading = cut(c.text), cut(c.heading_text())
                src.update(words=text, heading=heading, stems=text, heading_stems=heading,
                           vocab=sorted(set(text.split()) | set(heading.split())))
            for name in left_out:
                del action["_source"][name]
            actions.append(action)
    for a in actions:
        client.index(index=old_index, id=a["_id"], document=a["_source"])
    client.indices.refresh(index=old_index)
    client.indices.update_aliases(actions=[{"add": {"index": old_index, "alias": es_alias}}])
    client.close()


@pytest.mark.elasticsearch
def test_an_elasticsearch_index_of_format_3_is_refused_for_reading_and_upgraded_by_an_ingest(
        es_url, es_alias):
    _alias_an_index_of_an_earlier_layout(es_url, es_alias, ("stems", "heading_stems"), format=3)
    _, chunks, _ = KITCHEN

    with pytest.raises(StoreError, match=r"format 3, expected 6.*run `citebot ingest`"):
        open_elastic(es_url, es_alias).stamp()
    store = open_elastic(es_url, es_alias)
    store.open_for(STAMP)  # an ingest opens it, finds nothing changed, and commits
    store.commit_ingest()
    reader = open_elastic(es_url, es_alias)
    assert reader.stamp() == STAMP
    assert reader.iter_chunks() == list(chunks)
    _, k1, _ = chunk_ids(KITCHEN)
    assert ids(reader.lexical(LexicalQuery((WeightedTerms(("cleaned",), stemmed=True),)), 10)) == [k1]
    assert reader.window_scores(E2, [k1])[k1][1].score == pytest.approx(1.0)
    store.close()
    reader.close()


def _upgraded_by_an_ingest(es_url: str, es_alias: str) -> tuple[Store, Store]:
    """An ingest opens the index, finds nothing changed, and commits a copy of the current
    format; the store it wrote with, and the index opened again as a reader."""
    store = open_elastic(es_url, es_alias)
    store.open_for(STAMP)
    store.commit_ingest()
    return store, open_elastic(es_url, es_alias)


@pytest.mark.elasticsearch
def test_an_elasticsearch_index_of_format_4_is_read_with_a_warning_and_cut_again_by_an_ingest(
        es_url, es_alias, caplog):
    from search.elastic import client as elastic_client
    from search.elastic import lifecycle

    _alias_an_index_of_an_earlier_layout(es_url, es_alias, (), format=4, docs=[KITCHEN, BEYOND_LATIN],
                                         cut=_nfd_words)
    first, _ = chunk_ids(BEYOND_LATIN)
    k0, _, _ = chunk_ids(KITCHEN)
    lifecycle._warned_formats.clear()
    with caplog.at_level("WARNING", logger="citebot.search"):
        reader = open_elastic(es_url, es_alias)
        assert reader.stamp() == STAMP and reader.stamp() == STAMP
        assert ids(reader.lexical(LexicalQuery((WeightedTerms(("kettle",)),)), 5))[0] == k0
        assert reader.doc_freqs(["новый"]) == {"новый": 0}  # the old cut: "новыи"
    warned = [r.getMessage() for r in caplog.records if "format 4, expected 6" in r.getMessage()]
    assert len(warned) == 1 and "run `citebot ingest`" in warned[0]

    store, again = _upgraded_by_an_ingest(es_url, es_alias)
    assert again.doc_freqs(["новый", "άδεια"]) == {"новый": 2, "άδεια": 1}
    assert ids(again.lexical(LexicalQuery((WeightedTerms(("άδεια",), stemmed=True),)), 5)) == [first]
    client = elastic_client.connect(es_url)
    index = next(iter(client.indices.get_alias(name=es_alias).body))
    assert client.indices.get_mapping(index=index).body[index]["mappings"]["_meta"]["citebot"]["format"] == 6
    client.close()
    for s in (reader, store, again):
        s.close()


@pytest.mark.elasticsearch
def test_an_elasticsearch_index_of_format_5_is_read_with_a_warning_and_cut_again_by_an_ingest(
        es_url, es_alias, caplog):
    from search.elastic import lifecycle

    _alias_an_index_of_an_earlier_layout(es_url, es_alias, (), format=5, docs=[KITCHEN, MARKED], cut=_default_cut)
    first, second = chunk_ids(MARKED)
    lifecycle._warned_formats.clear()
    with caplog.at_level("WARNING", logger="citebot.search"):
        reader = open_elastic(es_url, es_alias)
        assert reader.stamp() == STAMP
        assert reader.doc_freqs(["छुट्टी"]) == {"छुट्टी": 0}  # the default's cut: "छ", "ट", "ट"
    assert sum("format 5, expected 6" in r.getMessage() for r in caplog.records) == 1

    store, again = _upgraded_by_an_ingest(es_url, es_alias)
    assert again.doc_freqs(["छुट्टी", "कर्मचारी"]) == {"छुट्टी": 2, "कर्मचारी": 1}
    assert ids(again.lexical(LexicalQuery((WeightedTerms(("ไม่ต้องมาทำงาน",), stemmed=True),)), 5)) == [second]
    assert set(ids(again.lexical(LexicalQuery((WeightedTerms(("छुट्टी",)),)), 5))) == {first, second}
    for s in (reader, store, again):
        s.close()


@pytest.mark.elasticsearch
def test_an_elasticsearch_index_written_before_links_is_read_and_copied_forward(es_url, es_alias):
    _alias_an_index_of_an_earlier_layout(es_url, es_alias, ("url", "anchor"))
    _, chunks, _ = KITCHEN

    store = open_elastic(es_url, es_alias)
    assert store.iter_chunks() == list(chunks)
    store.open_for(STAMP)
    new_doc, new_chunks, new_windows = make_doc("guide.md", [(("Guide",), "Read me.", [E3])])
    new_chunks = [replace(c, url="https://wiki.example.com/guide", anchor="read") for c in new_chunks]
    store.replace_document(new_doc, new_chunks, new_windows)
    store.commit_ingest()  # the old chunks are copied into an index of today's layout
    reader = open_elastic(es_url, es_alias)
    assert reader.iter_chunks() == sorted([*new_chunks, *chunks], key=lambda c: (c.source, c.ordinal))
    store.close()
    reader.close()


# -- when a chunk's text last changed (stale citations) -----------------------------------------
def test_a_chunk_keeps_its_change_time_while_its_text_stays(backend):
    from search.types import text_hash

    fill(backend.open())
    first = {v.chunk_id: v for v in backend.open().chunk_versions(["kitchen.md", "release.md"])}
    edited = make_doc("kitchen.md", [
        (("Kitchen", "Kettle"), "The kettle sings in B flat. Fill the kettle before nine.", [E1]),
        (("Kitchen", "Cleaning"), "Descale the kettle on Mondays and wipe the counters.", [E2]),
        (("Kitchen", "Rota"), "The rota lists who buys milk, coffee and tea each week.", [E2]),
    ], content="v2")
    writer = backend.open()
    writer.open_for(STAMP)
    writer.replace_document(*edited)
    writer.commit_ingest()
    versions = {v.chunk_id: v for v in backend.open().chunk_versions(["kitchen.md", "release.md", "gone.md"])}
    assert set(versions) == set(chunk_ids(edited)) | set(chunk_ids(RELEASE))
    kettle, cleaning, rota = (versions[c.chunk_id] for c in edited[1])
    old_kettle, _, old_rota = (first[c] for c in chunk_ids(KITCHEN))
    assert (kettle.changed_at, rota.changed_at) == (old_kettle.changed_at, old_rota.changed_at)
    assert cleaning.changed_at > max(v.changed_at for v in first.values())
    assert cleaning.text_hash == text_hash(edited[1][1].text) and cleaning.source == "kitchen.md"
    assert all(versions[c].changed_at == first[c].changed_at for c in chunk_ids(RELEASE))


def test_an_embedded_store_from_before_change_times_gets_hashes_and_unknown_times(tmp_path):
    import json
    import sqlite3

    from search import embedded, embedded_migrations
    from search.types import text_hash

    path = tmp_path / "old"
    path.mkdir()
    db = sqlite3.connect(path / embedded.DB_NAME, isolation_level=None)
    db.execute("CREATE TABLE _migrations (name TEXT PRIMARY KEY)")
    for name, step in embedded_migrations._MIGRATIONS:
        if name == "m009_chunk_changes":
            break
        step(db)
        db.execute("INSERT INTO _migrations VALUES (?)", (name,))
    doc, chunks, _windows = KITCHEN
    db.execute("INSERT INTO documents VALUES (?, ?, ?, ?, ?)",
               (doc.doc_id, doc.source, doc.content_hash, doc.title, doc.format))
    for c in chunks:
        db.execute("INSERT INTO chunks (chunk_id, doc_id, source, ordinal, heading_path, page, text,"
                   " tokens, overlap_prev, overlap_next) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                   (c.chunk_id, c.doc_id, c.source, c.ordinal, json.dumps(list(c.heading_path)),
                    c.page, c.text, c.tokens, 0, 0))
    db.execute("INSERT INTO turns VALUES ('t-old', '2025-01-01T00:00:00+00:00', '{\"question\": \"q\"}')")
    db.close()

    store = EmbeddedStore(path)
    versions = store.chunk_versions(["kitchen.md"])
    assert sorted((v.chunk_id, v.text_hash, v.changed_at) for v in versions) == sorted(
        (c.chunk_id, text_hash(c.text), None) for c in chunks)
    # a chunk an older citebot writes after the upgrade has no hash: computed when read
    store._db.execute("UPDATE chunks SET text_hash = NULL WHERE chunk_id = ?", (chunks[0].chunk_id,))
    assert {v.chunk_id: v.text_hash for v in store.chunk_versions(["kitchen.md"])}[chunks[0].chunk_id] == text_hash(
        chunks[0].text)
    assert [r["turn_id"] for r in store.turns_since("2024-12-31T00:00:00+00:00")] == ["t-old"]
    store.close()


def test_a_schema_step_recorded_by_another_process_meanwhile_is_not_run_again(tmp_path, monkeypatch):
    """migrate() reads the steps done once, then runs each missing one in its own
    transaction, asking again inside it: another process opening the same store may have
    run a step since the first read."""
    import sqlite3
    import threading

    from search import embedded_migrations

    ran: list[str] = []

    def first(db: sqlite3.Connection) -> None:
        ran.append("first")
        # As another process would between this step and the next: it runs and records "second".
        db.execute("INSERT INTO _migrations VALUES ('second')")

    def second(db: sqlite3.Connection) -> None:
        ran.append("second")

    monkeypatch.setattr(embedded_migrations, "_MIGRATIONS", [("first", first), ("second", second)])
    db = sqlite3.connect(tmp_path / "x.sqlite3", isolation_level=None)
    embedded_migrations.migrate(db, threading.RLock())
    assert ran == ["first"]
    assert {r[0] for r in db.execute("SELECT name FROM _migrations")} == {"first", "second"}
    embedded_migrations.migrate(db, threading.RLock())  # and nothing runs twice
    assert ran == ["first"]


def test_a_store_another_process_holds_while_it_needs_a_schema_step_fails_with_a_clear_error(tmp_path, monkeypatch):
    import sqlite3

    from search import embedded

    EmbeddedStore(tmp_path / "store").close()
    other = sqlite3.connect(tmp_path / "store" / embedded.DB_NAME, isolation_level=None)
    other.execute("DELETE FROM _migrations WHERE name = 'm013_stems_of_older_writers'")
    for name in ("TRIGGER chunks_stems_unchecked", "TRIGGER chunks_stems_unchecked_delete", "TABLE stems_unchecked"):
        other.execute(f"DROP {name}")  # as before that step
    other.execute("BEGIN IMMEDIATE")  # another process writing, as an ingest or an upgrade does
    monkeypatch.setattr(embedded, "BUSY_TIMEOUT_MS", 50)
    with pytest.raises(StoreError, match=r"cannot bring the embedded store at .* up to this version.*locked.*"
                                         r"run this again when it is done"):
        EmbeddedStore(tmp_path / "store")
    other.execute("ROLLBACK")
    other.close()
    store = EmbeddedStore(tmp_path / "store")  # nothing was lost: the step runs now
    assert store._db.execute("SELECT count(*) FROM stems_unchecked").fetchone() == (0,)
    store.close()

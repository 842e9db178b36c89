"""The pure parts of benchmarks/fusion_probe.py's dense-arm probes (docs/decisions/0050-handbook-dense-levers.md)."""

import numpy as np
import pytest

from benchmarks.fusion_probe import Probe, front_matter_title, mix_with_document_best
from benchmarks.vocab_probe import VocabNeighbours, collection_vocabulary
from search.focus import focus
from search.retrieval_config import STEM_WEIGHT
from search.text import STOPWORDS, content_words


def test_front_matter_title_read_with_quotes_off():
    text = '---\ntitle: "Account management policy"\nquestions:\n  - iaa\n---\n\nBody text.\n'
    assert front_matter_title(text) == "Account management policy"
    assert front_matter_title("---\nurl: https://x.example/a\ntitle:   Leave  \n---\n") == "Leave"


def test_front_matter_title_empty_without_a_block_or_a_title():
    assert front_matter_title("# Leave\n\ntitle: not front matter\n") == ""
    assert front_matter_title("---\nurl: https://x.example/a\n---\nBody\n") == ""
    assert front_matter_title("---\ntitle: never closed\n") == ""


def test_mix_with_document_best_lifts_a_chunk_by_its_page():
    best = np.array([0.9, 0.2, 0.5, 0.4], dtype=np.float32)
    doc = np.array([0, 0, 1, 1])
    mixed = mix_with_document_best(best, doc, 0.5)
    np.testing.assert_allclose(mixed, [0.9, 0.55, 0.5, 0.45], rtol=1e-6)
    np.testing.assert_allclose(mix_with_document_best(best, doc, 0.0), best)
    # The weaker chunk of the page with the best chunk now outranks the other page's best.
    assert mixed[1] > mixed[2]


# -- vocab_neighbours and focus_lexical (docs/decisions/0056-vocabulary-neighbours.md) --------

PAGES = {
    "benefits.md": "# Benefits\n\nA spouse covered elsewhere may waive our medical plan.\n",
    "family.md": "# Family leave\n\nLeave to care for a spouse or a child.\n",
    "pets.md": "# Pets\n\nA husband once brought a dog; the wifes club meets on 2nd Fridays.\n",
    "travel.md": "# Travel\n\nBook trains through the travel desk. The desk answers the wifes club too.\n",
}


@pytest.fixture()
def tiny(tmp_path):
    from bot.testing.embedder import HashingEmbedder
    from ingest.pipeline import ingest
    from search.embedded import EmbeddedStore

    docs = tmp_path / "docs"
    docs.mkdir()
    for name, text in PAGES.items():
        (docs / name).write_text(text)
    ingest([docs], EmbeddedStore(tmp_path / "store"), HashingEmbedder(), progress=False)
    store = EmbeddedStore(tmp_path / "store")
    yield store, tmp_path / "store"
    store.close()


def test_vocabulary_is_alphabetic_words_of_two_chunks(tiny):
    store, _ = tiny
    vocab = collection_vocabulary(store)
    assert "spouse" in vocab and "desk" not in vocab  # desk: one chunk only
    assert "husband" not in vocab and "2nd" not in vocab
    assert all(w.isalpha() and len(w) >= 3 and w not in STOPWORDS for w in vocab)


def test_a_planted_synonym_is_a_neighbour_and_a_group_at_weight_w(tiny, embedder):
    store, store_dir = tiny
    vocab = VocabNeighbours(store, embedder, store_dir)
    assert not vocab.cached and list(store_dir.parent.glob("store.vocab-*.npz"))
    near = dict(vocab.near("my wife's plan covers me, can i skip ours?", 3, 0.6))
    assert "spouse" in [t for t, _ in near["wife"]]
    assert all(c >= 0.6 for found in near.values() for _, c in found)
    assert "wifes" not in vocab.terms("wife", 5, 0.0)  # its stem is the word's
    assert "plan" not in vocab.terms("my wife's plan", 5, 0.0)  # the question's own word
    again = VocabNeighbours(store, embedder, store_dir)
    assert again.cached
    np.testing.assert_allclose(again.vectors, vocab.vectors)

    probe = Probe(store, embedder.encode_query, probe={"vocab_neighbours": [3, 0.6, 0.3]}, neighbours=vocab)
    question = "does my wife get anything?"
    probe._question = question
    groups, _ = probe._term_groups(probe._analyse(question, None))
    added = [g for g in groups if "spouse" in g.terms]
    assert [(g.weight, g.stemmed) for g in added] == [(0.3, False), (pytest.approx(0.3 * STEM_WEIGHT), True)]
    hits = probe.retrieve(question, mode="lexical", top_k=5).hits
    assert {h.chunk.source for h in hits} >= {"benefits.md", "family.md"}
    # vocab_max_df 0: only the words the collection lacks are expanded ("wife", not "spouse").
    capped = Probe(store, embedder.encode_query, probe={"vocab_neighbours": [3, 0.0, 0.3], "vocab_max_df": 0},
                   neighbours=vocab)
    both = "my wife or spouse"
    capped._question = both
    groups, _ = capped._term_groups(capped._analyse(both, None))
    assert list(vocab.near(both, 3, 0.0, {"wife"})) == ["wife"]
    added = [g.terms for g in groups if g.weight == 0.3 and not g.stemmed]
    assert added == [tuple(vocab.terms(both, 3, 0.0, {"wife"}))] != [tuple(vocab.terms(both, 3, 0.0))]
    plain = Probe(store, embedder.encode_query, probe={})
    assert not {h.chunk.source for h in plain.retrieve(question, mode="lexical", top_k=5).hits} & {"benefits.md"}


def test_focus_lexical_searches_the_question_without_filler(tiny):
    store, _ = tiny
    question = "hey all! quick q, anyone know how to book trains?"
    probe = Probe(store, lambda q: np.zeros(4, np.float32), probe={"focus_lexical": True})
    probe._question = question
    groups, _ = probe._term_groups(probe._analyse(question, None))
    f = focus(question)
    assert f.changed and groups[0].terms == tuple(f.terms) and "quick" not in groups[0].terms
    base = Probe(store, lambda q: np.zeros(4, np.float32), probe={})
    base._question = question
    assert base._term_groups(base._analyse(question, None))[0][0].terms == tuple(content_words(question))
    assert next(g.terms for g in groups if g.stemmed) == tuple(f.terms)


def test_paired_lists_the_items_moved_against_the_base_of_the_same_mode(capsys):
    from benchmarks.fusion_probe import paired

    def row(variant, ranks):
        return {"collection": "c", "variant": variant, "ranks": ranks, "paraphrase": ["p1"]}

    variants = [{}, {"x": 1}, {"mode": "lexical"}, {"mode": "lexical", "x": 1}]
    rows = [row({}, {"p1": 7, "a1": 1}), row({"x": 1}, {"p1": 2, "a1": 1}),
            row({"mode": "lexical"}, {"p1": 1, "a1": None}), row({"mode": "lexical", "x": 1}, {"p1": None, "a1": None})]
    paired(rows, variants)
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 2
    assert out[0].startswith('{"x": 1} minus {} (2 items, 1 paraphrase): R@5 +0.500') and "gained p1; lost none" in out[0]
    assert out[1].startswith('{"mode": "lexical", "x": 1} minus {"mode": "lexical"}') and "gained none; lost p1" in out[1]
    assert "para@5 -1.000" in out[1]


def test_vocab_question_adds_the_words_nearest_the_whole_question(tiny, embedder):
    store, store_dir = tiny
    vocab = VocabNeighbours(store, embedder, store_dir)
    assert vocab.words == ["club", "spouse", "wifes"]
    question = "my wife's club"
    near = vocab.near_vector(embedder.encode_query(question), question, 10, 0.0)
    assert [t for t, _ in near] == ["spouse"]  # "club" is asked, "wifes" has the stem of "wife"
    assert vocab.near_vector(embedder.encode_query(question), question, 10, 0.99) == []
    probe = Probe(store, embedder.encode_query, probe={"vocab_question": [10, 0.0, 0.4]}, neighbours=vocab)
    probe._question = question
    groups, _ = probe._term_groups(probe._analyse(question, None))
    assert [(g.terms, g.weight) for g in groups if "spouse" in g.terms] == [
        (("spouse",), 0.4), (("spouse",), pytest.approx(0.4 * STEM_WEIGHT))]


# -- typo_weight and typo_stem_guard (docs/decisions/0059-typo-fix-weight.md) --------------------

def test_the_typo_probes_reweigh_the_fixes_and_spare_a_word_whose_stem_is_held(tiny):
    store, _ = tiny
    zero = lambda q: np.zeros(4, np.float32)  # noqa: E731
    # "trainz" is no word of the collection, nor its stem: a typo fixed to "trains" by every variant.
    # "spouses" is absent too, but its stem "spous" is held ("spouse"): the guard leaves it.
    question = "can spouses book trainz?"
    plain = Probe(store, zero, probe={})
    asked = plain._analyse(question, None)
    assert asked.corrections == {"spouses": "spouse", "trainz": "trains"}
    guarded = Probe(store, zero, probe={"typo_stem_guard": True})
    assert guarded._analyse(question, None).corrections == {"trainz": "trains"}
    heavy = Probe(store, zero, probe={"typo_weight": 0.35})
    heavy._question = question
    groups, _ = heavy._term_groups(asked)
    fixes = [g for g in groups if g.terms == ("spouse", "trains")]
    assert [(g.weight, g.stemmed) for g in fixes] == [(0.35, False), (0.35 * STEM_WEIGHT, True)]


def test_arm_top_moves_an_arms_first_chunk_to_place_k_after_the_addresses():
    from benchmarks.fusion_probe import arm_top

    order = ["a", "b", "c", "d", "e", "f"]
    # "x" is the lexical arm's first and not fused at all; "d" the dense arm's first, at place 4.
    assert arm_top(order, [["d"], ["x"]], 1, 3, 0, 6) == ["a", "b", "x", "d", "c", "e"]
    # Already within the first k places: nothing moves.
    assert arm_top(order, [["a"], ["b"]], 1, 3, 0, 6) == order
    # Two addresses ahead of place k - 1: the chunk goes after them.
    assert arm_top(order, [["f"]], 1, 1, 2, 4) == ["a", "b", "f", "c"]


def test_normalised_scores_span_zero_to_one_or_are_z_scores():
    from benchmarks.fusion_probe import normalised

    ranking = [("a", 9.0), ("b", 5.0), ("c", 1.0)]
    assert normalised(ranking, "minmax") == {"a": 1.0, "b": 0.5, "c": 0.0}
    z = normalised(ranking, "z")
    assert abs(sum(z.values())) < 1e-12 and z["a"] > z["b"] > z["c"]
    assert normalised([("a", 0.3), ("b", 0.3)], "minmax") == {"a": 1.0, "b": 1.0}
    assert normalised([], "z") == {}

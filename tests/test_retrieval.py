"""Retrieval on the sample handbook: addresses, phrases, aliases, typos, widening, rerank."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from bot.answer.passages import select_passages
from bot.evaluate import paired_bootstrap, parse_config
from search.errors import ConfigError
from search.glossary import Glossary, GlossaryEntry
from search.retrieval_config import RetrievalConfig
from search.retrieve import Retriever
from search.text import joined_terms, name_like
from tests.conftest import EXAMPLES


@pytest.fixture()
def retriever(examples_store, embedder):
    return Retriever(examples_store, embedder.encode_query, Glossary.load(EXAMPLES / "glossary.csv"))


def test_a_rare_name_is_an_address_not_a_vote(retriever):
    r = retriever.retrieve("Who was Oskar Brandvold?")
    assert "rare:brandvold" in r.addresses
    assert "Oskar Brandvold" in r.hits[0].chunk.text
    assert r.hits[0].reasons == ["address"]
    # A name the model cannot read: dense alone ranks it low, the rule puts it first.
    dense = retriever.retrieve("What is Gantry Lark?", mode="dense")
    assert "Gantry Lark" not in dense.hits[0].chunk.text
    hybrid = retriever.retrieve("What is Gantry Lark?")
    assert "Gantry Lark" in hybrid.hits[0].chunk.text and hybrid.hits[0].reasons == ["address"]


def test_an_ordinary_rare_word_is_not_an_address(retriever):
    r = retriever.retrieve("how long after buying something do I have to ask to be reimbursed")
    assert not any(a.startswith("rare:") for a in r.addresses)


def test_name_like_marks_capitalised_words_inside_a_sentence_only():
    assert name_like("Who was Oskar Brandvold? What is error E-417 in BSS?") == {
        "oskar", "brandvold", "e", "417", "bss"}


def test_name_like_marks_mixed_case_identifiers():
    assert name_like("what does worktreeConfig do, and the Kettle?") == {"worktreeconfig", "kettle"}
    assert name_like("what does turning that on buy me") == set()


def test_joined_words_are_the_writers_identifiers():
    assert joined_terms("set extensions.worktreeConfig, PRAGMA analysis_limit, experimental-mode "
                        "or std::fs in src/main.rs; analysis_limit again") == [
        ("extensions", "worktreeconfig"), ("analysis", "limit"), ("experimental", "mode"),
        ("std", "fs"), ("src", "main", "rs")]
    assert joined_terms("no joined words here, none at all, e.g. in 1.6 or i.e. not.") == []


def test_words_written_joined_address_the_passage_that_holds_them(tmp_path, test_embedder):
    from ingest.pipeline import ingest
    from search.embedded import EmbeddedStore

    docs = tmp_path / "docs"
    docs.mkdir()
    filler = "Configuration extensions are described in the configuration chapter. " * 3
    for i in range(6):
        (docs / f"config-{i}.md").write_text(f"# Config {i}\n\n{filler}\n\nExtensions limit nothing.\n")
    (docs / "worktrees.md").write_text(
        "# Worktrees\n\nSet extensions.worktreeConfig to read a worktree's own file.\n")
    store = EmbeddedStore(tmp_path / "store")
    ingest([docs], store, test_embedder, progress=False, within=docs)
    retriever = Retriever(store, test_embedder.encode_query, Glossary.empty())
    question = "extensions.worktreeConfig - what does turning that on buy me"
    r = retriever.retrieve(question)
    assert "phrase:extensions worktreeconfig" in r.addresses
    assert r.hits[0].chunk.source == "worktrees.md" and r.hits[0].reasons == ["address"]
    off = Retriever(store, test_embedder.encode_query, Glossary.empty(),
                    RetrievalConfig(joined_rule=False, rare_rule=False))
    assert not any(a.startswith("phrase:") for a in off.retrieve(question).addresses)
    store.close()


def test_a_phrase_of_stopwords_finds_its_passage(retriever):
    r = retriever.retrieve("Why shouldn't the swap stations be restarted all of them at once?")
    assert any(a.startswith("phrase:") and "all of them at once" in a for a in r.addresses)
    assert "all of them at once" in r.hits[0].chunk.text


def test_phrases_and_rare_names_are_probed_in_one_batch_leaving_out_absent_words(examples_store, embedder):
    batches = []
    probe = examples_store.phrase_matches_many

    def recording(phrases, limit, *, scope=None):
        batches.append(list(phrases))
        return probe(phrases, limit, scope=scope)

    examples_store.phrase_matches_many = recording
    r = Retriever(examples_store, embedder.encode_query).retrieve(
        "Oskar Brandvold says: why shouldn't the swap stations be restartted all of them at once?"
    )
    assert len(batches) == 1 and ("brandvold",) in batches[0]
    assert batches[0] and not any("restartted" in gram for gram in batches[0])
    assert "rare:brandvold" in r.addresses
    assert any(a.startswith("phrase:") and "all of them at once" in a for a in r.addresses)


@pytest.mark.parametrize("gram,ok", [
    (("as", "and", "when", "it", "is"), True),     # a motto made of stopwords
    (("overseas", "per", "diem"), True),           # three content words
    (("back", "to", "a"), False),                  # a question's filler
    (("the", "site", "racks"), False),             # starts with a stopword
    (("what", "is", "the"), False),
])
def test_which_ngrams_count_as_phrases(gram, ok):
    assert Retriever.is_phrase(gram) is ok


def test_alias_in_the_question_expands_at_reduced_weight(retriever):
    r = retriever.retrieve("How does the Firehose handle a burst of frames?")
    assert [(e.found, e.expands_to) for e in r.expansions] == [("the Firehose", "Telemetry Ingestion Pipeline")]


def test_an_alias_that_floods_is_left_out(retriever):
    r = retriever.retrieve("How fast can a robot drive in a shared zone?")
    assert "Quill" in r.flooded
    assert all(e.expands_to != "Quill" for e in r.expansions)


def test_typo_fixed_only_when_the_word_is_absent(retriever):
    r = retriever.retrieve("What does the bootlaoder do on a failed update?")
    assert r.corrections == {"bootlaoder": "bootloader"}
    kept = retriever.retrieve("What does the bootloader do on a failed update?")
    assert kept.corrections == {}


def test_widening_adds_the_neighbour_of_a_hit_cut_at_its_edge(examples_store, retriever):
    chunks = examples_store.iter_chunks()
    # A chunk followed by another of the same section: its last words point past its end.
    cut = next(c for c in chunks if c.overlap_next > 0)
    tail = cut.text.split()[-3:]
    terms = [w.strip(".,;:").lower() for w in tail if len(w) > 3]
    neighbour = retriever.boundary_neighbour(cut, terms)
    assert neighbour is not None and neighbour.ordinal == cut.ordinal + 1

    from search.types import Hit

    passages = select_passages([Hit(cut, 1.0)], 1, widen=lambda c: retriever.boundary_neighbour(c, terms))
    assert [p.chunk.chunk_id for p in passages] == [cut.chunk_id, neighbour.chunk_id]
    # The neighbour's overlap with the hit is stripped by equality before the composer sees it.
    assert passages[1].text == neighbour.text[neighbour.overlap_prev:].lstrip("\n")
    assert not passages[1].text.startswith(neighbour.text[: neighbour.overlap_prev])


def test_glossary_rejects_a_bad_csv(tmp_path):
    bad = tmp_path / "g.csv"
    bad.write_text("name,other\nx,y\n")
    with pytest.raises(ConfigError, match="term,alias"):
        Glossary.load(bad)


def test_glossary_matches_whole_words_both_ways():
    g = Glossary([GlossaryEntry("Incident Commander", "IC")])
    assert [e.expands_to for e in g.expansions("Who is the IC tonight?")] == ["Incident Commander"]
    assert [e.expands_to for e in g.expansions("Who is the incident commander?")] == ["IC"]
    assert g.expansions("Is the ICE machine broken?") == []
    # A name in a script whose words carry combining marks: not inside a longer word that
    # goes on (or began) with a mark, which Python's \w does not count.
    hindi = Glossary([GlossaryEntry("हिन्द महासागर", "IO"), GlossaryEntry("हिन्द", "Hind")])
    assert [e.expands_to for e in hindi.expansions("हिन्दी में बताइए")] == []
    assert [e.expands_to for e in hindi.expansions("किहिन्द?")] == []
    assert [e.expands_to for e in hindi.expansions("हिन्द महासागर कहाँ है?")] == ["IO", "Hind"]
    from search.glossary import with_other_names

    (found,) = hindi.expansions("IO कहाँ है?")
    assert with_other_names("IO कहाँ है?", [found]) == "IO (हिन्द महासागर) कहाँ है?"


def test_a_reranker_without_sentence_transformers_is_refused_with_what_to_install(tmp_path, monkeypatch):
    """The CrossEncoder runs through sentence-transformers, the optional `reference` extra
    (docs/decisions/0037-runtime-without-torch.md); where it is absent, a clear refusal."""
    import sys

    from search.rerank import CrossEncoderReranker

    (tmp_path / "config.json").write_text("{}")
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)  # absent, even if installed
    with pytest.raises(ConfigError, match=r"CITEBOT_RERANKER=.* pip install 'citebot\[reference\]'"):
        CrossEncoderReranker(tmp_path)


def test_reranker_refuses_a_folder_that_is_not_a_model(tmp_path):
    from search.rerank import CrossEncoderReranker

    with pytest.raises(ConfigError, match="not a model folder"):
        CrossEncoderReranker(tmp_path)


def test_paired_bootstrap_interval():
    a = np.array([0, 0, 1, 1, 0, 1, 0, 0, 1, 0], dtype=float)
    same = paired_bootstrap(a, a)
    assert same == (0.0, 0.0, 0.0)
    better = paired_bootstrap(a, np.ones_like(a))
    assert better[0] == pytest.approx(0.6)
    assert 0.2 <= better[1] < 0.6 < better[2] <= 1.0


def test_a_word_finds_its_other_forms_through_the_stems(examples_store, embedder):
    glossary = Glossary.load(EXAMPLES / "glossary.csv")
    stemmed = Retriever(examples_store, embedder.encode_query, glossary)
    plain = Retriever(examples_store, embedder.encode_query, glossary, RetrievalConfig(stemming=False))
    # The handbook says "reimbursed" (once), never "reimbursing".
    assert plain.retrieve("reimbursing", mode="lexical").hits == []
    hits = stemmed.retrieve("reimbursing", mode="lexical").hits
    assert hits and all("reimburs" in h.chunk.text.lower() for h in hits)
    _, off = parse_config("hybrid-stems", RetrievalConfig())
    assert off.stemming is False and RetrievalConfig().stemming is True


def test_parse_config_toggles_features():
    _, cfg = parse_config("hybrid-aliases+rerank", RetrievalConfig())
    assert cfg.mode == "hybrid" and cfg.aliases is False and cfg.rerank is True
    with pytest.raises(ConfigError):
        parse_config("hybrid+magic", RetrievalConfig())
    assert replace(cfg, mode="dense").mode == "dense"


def test_query_words_are_cut_exactly_as_fts5_indexes_them():
    import sqlite3

    from search.text import TOKENIZE, words

    # Text beyond ASCII, and ASCII alone (folded by lower() only: search/text.py's fast path),
    # every one of its 128 characters between words.
    for text in ("Fußballer café x² ⅸ Ångström naïve ÉCOLE İstanbul Ωmega ﬁle don’t 1.6 snake_case",
                 "".join(f"Wd{i}{chr(i)}" for i in range(128))):
        db = sqlite3.connect(":memory:")
        db.execute(f'CREATE VIRTUAL TABLE f USING fts5(t, tokenize="{TOKENIZE}")')
        db.execute("CREATE VIRTUAL TABLE v USING fts5vocab(f, 'row')")
        db.execute("INSERT INTO f VALUES (?)", (text,))
        assert sorted(set(words(text))) == sorted(r[0] for r in db.execute("SELECT term FROM v"))


def test_query_words_are_cut_as_fts5_cuts_them_in_every_script():
    """Beyond ASCII, words() asks SQLite how unicode61 cuts each character (search/text.py):
    random text mixing scripts, combining marks, emoji and separators, cut alike, with no
    empty token (a lone dropped diacritic is no word: search.marks leaves it out)."""
    import random
    import sqlite3

    from search.text import TOKENIZE, words

    pool = [chr(c) for r in ((0x20, 0x7F), (0xA0, 0x250), (0x300, 0x370), (0x370, 0x400), (0x400, 0x530),
                             (0x590, 0x600), (0x600, 0x700), (0x900, 0x980), (0xE00, 0xE60), (0x1E00, 0x1F00),
                             (0x2000, 0x2070), (0x3040, 0x3100), (0x4E00, 0x4E40), (0xAC00, 0xAC40),
                             (0xE000, 0xE010), (0xFB00, 0xFB10), (0x1F600, 0x1F650)) for c in range(*r)]
    rng = random.Random(7)
    db = sqlite3.connect(":memory:")
    db.execute(f'CREATE VIRTUAL TABLE f USING fts5(t, tokenize="{TOKENIZE}")')
    db.execute("CREATE VIRTUAL TABLE v USING fts5vocab(f, 'instance')")
    texts = ["".join(rng.choice(pool) for _ in range(rng.randint(1, 30))) for _ in range(600)]
    texts += ["a \u0301 b", "◌́ x\u0308y \u0300\u0301z", "I ❤️ it 1️⃣ 漢\U000E0100字"]
    db.executemany("INSERT INTO f (rowid, t) VALUES (?, ?)", list(enumerate(texts)))
    cut: dict[int, list[str]] = {}
    for doc, term in db.execute("SELECT doc, term FROM v ORDER BY doc, offset"):
        cut.setdefault(doc, []).append(term)
    assert [words(t) for t in texts] == [cut.get(i, []) for i in range(len(texts))]
    assert all(all(terms) for terms in cut.values())  # no empty token
    assert words("Новый Ёлка ΣΟΦΟΣ άλφα الإثنين") == ["новый", "ёлка", "σοφοσ", "άλφα", "الإثنين"]
    # Marks stay inside their words (Devanagari, Thai, Arabic and Hebrew vowel marks);
    # an emoji's variation selector, the keycap and an ideograph's variant are no word.
    assert words("हिन्दी भाषा ไม่ใช่ عَرَبِيّ עִבְרִית") == ["हिन्दी", "भाषा", "ไม่ใช่", "عَرَبِيّ", "עִבְרִית"]
    assert words("I ❤️ it 1️⃣ 漢\U000E0100字") == ["i", "it", "1", "漢", "字"]
    assert words("e\u0301te ◌́ x\u0332y") == ["ete", "x", "y"]  # script-neutral marks: as before


def test_the_marks_inside_words_are_combining_marks_of_unicode_14_less_the_script_neutral_blocks():
    import unicodedata

    from search.marks import EXCLUDED, MARKS

    listed = {ord(c) for c in MARKS}
    assert len(listed) == len(MARKS) == 1892
    assert all(unicodedata.category(chr(c))[0] == "M" for c in listed)  # marks in any later Unicode too
    assert not any(lo <= c <= hi for c in listed for lo, hi in EXCLUDED)
    if unicodedata.unidata_version == "14.0.0":  # the Unicode the list was written from: all of it
        every = {c for c in range(0x110000) if unicodedata.category(chr(c))[0] == "M"}
        assert listed == {c for c in every if not any(lo <= c <= hi for lo, hi in EXCLUDED)}
    assert {ord(c) for c in "िु्ّ่"} <= listed and not {0x301, 0xFE0F, 0x20E3} & listed


def test_a_superseded_document_ranks_below_its_current_version(retriever):
    r = retriever.retrieve("Which version of Klaxon does the on-call team use?")
    top = r.hits[0].chunk
    assert top.source.endswith("operations/oncall-runbook.md") and not top.superseded
    old = [h for h in r.hits if h.chunk.source.endswith("oncall-runbook-2022.md")]
    assert old and all(h.chunk.superseded and "superseded" in h.reasons for h in old)


def test_superseded_is_read_from_the_title_or_opening_only():
    from ingest.document import LoadedDocument, Paragraph, Section

    def doc(title, first, later="Nothing to see."):
        return LoadedDocument("x.md", title, "markdown", [
            Section((title,), [Paragraph(first), Paragraph("Body text. " * 80), Paragraph(later)])])

    assert doc("Travel Policy (2023)", "Superseded by the 2024 policy.").superseded()
    assert doc("Runbook — DEPRECATED", "Use the new one.").superseded()
    assert not doc("Runbook", "How to page.").superseded()
    # A word far into the text is about something else ("the deprecated API"), not the page.
    assert not doc("API guide", "How to call us.", later="The v1 endpoint is deprecated.").superseded()


def test_fusion_weights_the_arms_ranks():
    from search.fusion import reciprocal_rank

    dense, lexical = [("a", 0.9), ("b", 0.8)], [("b", 9.0), ("c", 7.0)]
    plain = reciprocal_rank((dense, lexical), 10.0)
    assert plain == pytest.approx({"a": 1 / 11, "b": 1 / 12 + 1 / 11, "c": 1 / 12})
    weighted = reciprocal_rank((dense, lexical), 10.0, (2.0, 1.0))
    assert weighted == pytest.approx({"a": 2 / 11, "b": 2 / 12 + 1 / 11, "c": 1 / 12})
    # A first place in the dense arm alone now outranks a first place in the lexical arm alone.
    assert weighted["a"] > reciprocal_rank((lexical,), 10.0)["b"]
    with pytest.raises(ValueError, match="1 weights for 2 rankings"):
        reciprocal_rank((dense, lexical), 10.0, (2.0,))


def test_hybrid_counts_a_dense_rank_dense_weight_times_a_lexical_one(examples_store, embedder):
    from search.retrieval_config import DENSE_WEIGHT, RRF_K

    question = "how many days off do we get when a family member dies?"
    for weight in (1.0, DENSE_WEIGHT):
        r = Retriever(examples_store, embedder.encode_query, config=RetrievalConfig(dense_weight=weight))
        hits = [h for h in r.retrieve(question).hits if not h.reasons]
        assert hits and any(h.dense_rank and h.lexical_rank for h in hits)
        for h in hits:
            expected = (weight / (RRF_K + h.dense_rank) if h.dense_rank else 0.0) + (
                1.0 / (RRF_K + h.lexical_rank) if h.lexical_rank else 0.0
            )
            assert h.score == pytest.approx(expected, abs=1e-6)


def test_which_aliases_flood_is_read_again_after_an_ingest_beside_a_running_bot(tmp_path, test_embedder):
    from ingest.pipeline import ingest
    from search.embedded import EmbeddedStore
    from search.retrieval_config import CALIBRATION_TTL_S

    docs = tmp_path / "docs"
    docs.mkdir()
    words = "The loading dock opens at seven and the night shift hands over to the morning crew there. "
    for i in range(10):  # pages of their own (a paragraph on every page would be furniture)
        (docs / f"plain-{i}.md").write_text(f"# Plain {i}\n\nBay {i} holds pallet row {i * 7}. {words * 4}\n")
    (docs / "widgets.md").write_text("# Widgets\n\n" + "".join(
        f"## Widget step {i}\n\nTurn the widget dial {i} notches. {words * 5}\n\n" for i in range(6)))
    store = EmbeddedStore(tmp_path / "store")
    ingest([docs], store, test_embedder, progress=False, within=docs)
    now = [1000.0]
    retriever = Retriever(store, test_embedder.encode_query, Glossary([GlossaryEntry("widget", "gizmo")]))
    retriever.clock = lambda: now[0]
    question = "how do i reset a gizmo?"
    assert retriever.retrieve(question).flooded == ["widget"]  # one page holds every match

    (docs / "widgets.md").unlink()
    (docs / "one-widget.md").write_text(f"# One widget\n\nThe widget is reset with the red key. {words * 4}\n")
    ingest([docs], store, test_embedder, progress=False, within=docs)
    now[0] += 1
    assert retriever.retrieve(question).flooded == ["widget"]  # kept for a while, as the calibration is
    now[0] += CALIBRATION_TTL_S
    fresh = retriever.retrieve(question)
    assert fresh.flooded == [] and [e.expands_to for e in fresh.expansions] == ["widget"]
    store.close()

"""search/bm25.py reproduces SQLite FTS5's bm25() to the last bit that matters."""

from __future__ import annotations

import random
import sqlite3

import pytest

from search import bm25
from search.text import words

VOCABULARY = ["kettle", "soak", "train", "bollard", "quill", "dock", "annex", "the", "a", "of", "to", "runs", "rota", "café", "zürich"]


def collection(seed: int, rows: int = 40) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    out = []
    for _ in range(rows):
        text = " ".join(rng.choice(VOCABULARY) for _ in range(rng.randint(0, 40)))
        heading = " ".join(rng.choice(VOCABULARY).title() for _ in range(rng.randint(0, 4)))
        out.append((text, heading))
    return out


def fts5(rows: list[tuple[str, str]]) -> sqlite3.Connection:
    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE t USING fts5(text, heading, "
               "tokenize = 'unicode61 remove_diacritics 2')")
    db.executemany("INSERT INTO t (rowid, text, heading) VALUES (?, ?, ?)",
                   [(i + 1, text, heading) for i, (text, heading) in enumerate(rows)])
    return db


def reproduce(rows, phrases, columns):
    table = [bm25.Row((words(text), words(heading))) for text, heading in rows]
    cols = range(2) if columns is None else columns
    hits = [sum(1 for r in table if any(r.occurrences(c, p) for c in cols)) for p in phrases]
    idfs = [bm25.idf(len(table), h) for h in hits]
    avgdl = sum(r.length for r in table) / len(table)
    out = {}
    for i, row in enumerate(table):
        s = bm25.score(row, phrases, idfs, (1.0, 0.5), avgdl, columns)
        if s is not None:
            out[i + 1] = s
    return out


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("query", [
    ['"kettle"'], ['"kettle"', '"soak"', '"zurich"'], ['"the"', '"a"'], ['"runs rota"'],
])
def test_or_of_terms_over_both_columns_scores_as_fts5(seed, query):
    rows = collection(seed)
    db = fts5(rows)
    expected = dict(db.execute(
        "SELECT rowid, -bm25(t, 1.0, 0.5) FROM t WHERE t MATCH ?", (" OR ".join(query),)))
    phrases = [tuple(words(q.strip('"'))) for q in query]
    got = reproduce(rows, phrases, None)
    assert set(got) == set(expected)
    for rowid, score in expected.items():
        assert got[rowid] == pytest.approx(score, rel=1e-12, abs=1e-12)


@pytest.mark.parametrize("seed", range(5))
def test_a_phrase_limited_to_the_text_column_scores_as_fts5(seed):
    rows = collection(seed) + [("the kettle the kettle", "Kettle")]
    db = fts5(rows)
    expected = dict(db.execute(
        "SELECT rowid, -bm25(t, 1.0, 0.5) FROM t WHERE t MATCH ?", ('text : "the kettle"',)))
    got = reproduce(rows, [("the", "kettle")], (0,))
    assert set(got) == set(expected) and expected
    for rowid, score in expected.items():
        assert got[rowid] == pytest.approx(score, rel=1e-12, abs=1e-12)


def test_occurrences_count_overlapping_phrases():
    assert bm25.occurrences(["a", "a", "a"], ("a", "a")) == 2
    assert bm25.occurrences(["a", "b", "a", "b"], ("a", "b")) == 2
    assert bm25.occurrences([], ("a",)) == 0

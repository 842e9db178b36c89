"""What the Home tab says a scope covers, measured on both stores (real Elasticsearch):
only the documents and passages the scope allows, grouped by folder, never a source
outside it."""

from __future__ import annotations

from bot.slack.home import Folder, measure_coverage
from search.scope import Scope
from tests.test_scope_contract import (  # noqa: F401 - fixtures
    DOCS,
    NOT_PEOPLE,
    PEOPLE_ONLY,
    SITE_ONLY,
    backend,
    es_alias,
    es_url,
    store,
)


def passages_of(source: str) -> int:
    return sum(len(chunks) for doc, chunks, _ in DOCS if doc.source == source)


def test_coverage_counts_only_what_the_scope_allows(store):  # noqa: F811 - the fixture
    everything = measure_coverage(store, Scope(("**",), "default"))
    assert everything.documents == len(DOCS)
    assert everything.passages == sum(len(chunks) for _, chunks, _ in DOCS)
    assert {f.name for f in everything.folders} == {"", "people/", "site/"}

    people = measure_coverage(store, PEOPLE_ONLY)
    # every allowed source sits in people/: that folder is the one group, named in full
    assert people.folders == (Folder("people/", 1, ("reviews.md",)),)
    assert (people.documents, people.passages) == (1, passages_of("people/reviews.md"))

    not_people = measure_coverage(store, NOT_PEOPLE)
    named = {f.name for f in not_people.folders} | {e for f in not_people.folders for e in f.examples}
    assert not [n for n in named if "people" in n or "reviews" in n], not_people
    assert not_people.documents == len(DOCS) - 1
    assert not_people.passages == everything.passages - passages_of("people/reviews.md")

    site = measure_coverage(store, SITE_ONLY)
    assert site.folders == (Folder("site/", 1, ("annex.txt",)),)
    assert measure_coverage(store, Scope((), "nothing")).documents == 0

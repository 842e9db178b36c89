"""The Elasticsearch store: the collection in a versioned index behind an alias.

    <alias>  ──▶  <alias>-v20250101120000123456   (complete; what readers search)
                  <alias>-v20250102090000654321   (being built by an ingest run)

Every ingest run that changes anything writes a NEW index and moves the alias to it in
one atomic `_aliases` call in commit_ingest(), so a reader never sees a half-built
collection. Documents the run did not touch are copied from the current index into the
new one at commit (point in time + search_after + bulk: this distribution has no
reindex module), and superseded indices are deleted. A fresh index also means BM25
statistics never count deleted documents.

The package, one job a module: client.py (connect() and the error mapping), mapping.py
(the mapping, its format history and the documents written), lifecycle.py (the stamp,
the writes of an ingest and the commit: build, merge, move the alias, delete the old),
writer.py (the background bulk writer), query.py (the retrieval reads) and store.py
(ElasticStore, which puts them together).
"""

from search.elastic.client import connect
from search.elastic.mapping import INDEX_FORMAT, mapping_for
from search.elastic.store import ElasticStore

__all__ = ["INDEX_FORMAT", "ElasticStore", "connect", "mapping_for"]

"""The one error tree of citebot. Every error says what to fix.

CitebotError                   base class; caught only at the edges (CLI, Slack listener)
 ├── ConfigError               a setting is missing or malformed (raised at start-up)
 ├── StoreError                the store cannot be opened, read or written
 │    ├── ModelMismatchError   the store was built by another embedding model
 │    ├── DimensionError       a vector batch has the wrong width for the store
 │    └── IngestLockedError    another ingest is writing the same store
 ├── SearchBackendError        the search backend failed while answering a query
 ├── IngestError               one file cannot be ingested (reported as skipped, never fatal)
 └── ComposeError              the answer model could not produce an answer within budget
"""

from __future__ import annotations


class CitebotError(Exception):
    """Base class: the message says what went wrong and how to fix it."""


class ConfigError(CitebotError):
    """A setting is missing or malformed; raised once, at start-up."""


class StoreError(CitebotError):
    """The store cannot be opened, read or written."""


class ModelMismatchError(StoreError):
    """The store was built with another embedding model than the one configured."""


class DimensionError(StoreError):
    """A batch of vectors does not have the width the store was built with."""


class IngestLockedError(StoreError):
    """Another ingest holds the store's ingest lock; this one is refused, nothing written."""


class SearchBackendError(CitebotError):
    """The search backend failed while answering a query (down, timeout, bad response)."""


class IngestError(CitebotError):
    """One file cannot be ingested; the pipeline reports it as skipped and goes on."""


class ComposeError(CitebotError):
    """The answer model failed after retries within the time budget."""

"""Fixtures for tests that use the real Elasticsearch at CITEBOT_TEST_ES_URL.

Import the fixtures into a test module (`from tests.elastic_support import es_url, ...`).
They never skip: without the variable a test fails and says how to start the service.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest

from search.elastic import ElasticStore, connect

NOT_CONFIGURED = (
    "CITEBOT_TEST_ES_URL is not set, so the Elasticsearch tests cannot run (they never "
    "skip). Start the test services with `eval \"$(scripts/services start)\"` and run pytest "
    "again, or run `scripts/test`, which does both."
)


@pytest.fixture()
def es_url() -> str:
    url = os.environ.get("CITEBOT_TEST_ES_URL")
    if not url:
        pytest.fail(NOT_CONFIGURED, pytrace=False)
    return url


def drop_alias_indices(url: str, alias: str) -> None:
    """Delete every index a test alias created (wildcard deletes are refused by default)."""
    client = connect(url)
    try:
        found = client.indices.get(index=f"{alias}-v*", allow_no_indices=True,
                                   expand_wildcards="open,closed")
        for name in found:
            client.indices.delete(index=name, ignore_unavailable=True)
    finally:
        client.close()


@pytest.fixture()
def es_alias(es_url) -> Iterator[str]:
    """A fresh alias name for one test; its indices are deleted afterwards."""
    alias = f"citebot-test-{uuid.uuid4().hex[:12]}"
    yield alias
    drop_alias_indices(es_url, alias)


def open_elastic(url: str, alias: str, **options) -> ElasticStore:
    """A store on its own connection, as another process would open it."""
    return ElasticStore(connect(url, **options), alias=alias)

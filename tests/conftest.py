"""Shared fixtures. Tests never touch a real user store: CITEBOT_STORE points at a tmpdir."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"
HANDBOOK = EXAMPLES / "handbook"


@pytest.fixture(autouse=True)
def _isolated_env(tmp_path, monkeypatch):
    """No developer settings leak in: a fresh store dir, no service URLs, no keys."""
    for key in list(os.environ):
        if key.startswith(("CITEBOT_", "SLACK_")) and not key.startswith("CITEBOT_TEST_"):
            monkeypatch.delenv(key)
    for key in ("REDIS_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("CITEBOT_STORE", str(tmp_path / "store"))
    monkeypatch.chdir(tmp_path)  # no .env of the developer's is read


@pytest.fixture(scope="session")
def embedder():
    from ingest.embedder import Embedder

    return Embedder()


@pytest.fixture(scope="session")
def examples_store_dir(tmp_path_factory, embedder) -> Path:
    """The sample handbook ingested once per session into a store of its own."""
    from ingest.pipeline import ingest
    from search.embedded import EmbeddedStore

    root = tmp_path_factory.mktemp("examples-store")
    store = EmbeddedStore(root / "store")
    summary = ingest([HANDBOOK], store, embedder, progress=False)  # sources relative to it
    assert summary.skipped == [], summary.skipped
    store.close()
    return root / "store"


@pytest.fixture()
def examples_store(examples_store_dir, tmp_path):
    """A private copy of the ingested sample store (tests may write turns into it)."""
    from search.embedded import EmbeddedStore

    target = tmp_path / "examples-copy"
    shutil.copytree(examples_store_dir, target)
    store = EmbeddedStore(target)
    yield store
    store.close()

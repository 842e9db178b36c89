"""Shared fixtures. Tests never touch a real user store: CITEBOT_STORE points at a tmpdir."""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path

import pytest
import redis

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"
HANDBOOK = EXAMPLES / "handbook"

pytest_plugins = ["tests.slack_harness"]


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


def _ingest_handbook(root: Path, embedder) -> Path:
    """The sample handbook ingested into a store of its own under root (sources relative to it)."""
    from bot.testing.bench import ingest_handbook

    summary = ingest_handbook(root / "store", embedder)
    assert summary.skipped == [], summary.skipped
    return root / "store"


def _private_copy(store_dir: Path, target: Path):
    """A store of one's own, copied from a session store (tests may write turns into it)."""
    from search.embedded import EmbeddedStore

    shutil.copytree(store_dir, target)
    store = EmbeddedStore(target)
    yield store
    store.close()


@pytest.fixture(scope="session")
def examples_store_dir(tmp_path_factory, embedder) -> Path:
    """The sample handbook ingested once per session with the real model."""
    return _ingest_handbook(tmp_path_factory.mktemp("examples-store"), embedder)


@pytest.fixture()
def examples_store(examples_store_dir, tmp_path):
    """A private copy of the ingested sample store."""
    yield from _private_copy(examples_store_dir, tmp_path / "examples-copy")


@pytest.fixture(scope="session")
def test_embedder():
    """The deterministic test embedder (no model): for tests that do not measure retrieval."""
    from bot.testing.embedder import HashingEmbedder

    return HashingEmbedder()


@pytest.fixture(scope="session")
def small_store_dir(tmp_path_factory, test_embedder) -> Path:
    """The sample handbook ingested once per session with the test embedder (seconds)."""
    return _ingest_handbook(tmp_path_factory.mktemp("small-store"), test_embedder)


@pytest.fixture()
def small_store(small_store_dir, tmp_path):
    """A private copy of the test-embedder store of the sample handbook."""
    yield from _private_copy(small_store_dir, tmp_path / "small-copy")


def real_redis_url() -> str:
    """The real Redis of CITEBOT_TEST_REDIS_URL; without it the calling test fails, never skips."""
    url = os.environ.get("CITEBOT_TEST_REDIS_URL", "")
    if not url:
        pytest.fail("CITEBOT_TEST_REDIS_URL is not set: start the test services with "
                    '`eval "$(scripts/services start)"` (Redis tests fail rather than skip)', pytrace=False)
    return url


@pytest.fixture()
def redis_prefix():
    """A key prefix of this test's own; its keys are deleted afterwards."""
    prefix = f"citebot-test:{uuid.uuid4().hex[:10]}:"
    yield prefix
    url = os.environ.get("CITEBOT_TEST_REDIS_URL")
    if not url:
        return
    client = redis.Redis.from_url(url)
    keys = list(client.scan_iter(match=prefix + "*"))
    if keys:
        client.delete(*keys)
    client.close()


# The fixtures that load the real embedding model; a fast run leaves out every test that
# needs one of them (directly or through another fixture).
_MODEL_FIXTURES = {"embedder", "examples_store_dir"}

# The fast run's count of tests left out. Under pytest-xdist (the fast run's `-n auto`) each
# worker collects and deselects, and the controller's summary no longer counts them: a worker
# hands its count back (workeroutput) and the controller prints it.
_LEFT_OUT = pytest.StashKey[int]()


def pytest_collection_modifyitems(config, items):
    """`scripts/test --fast` (CITEBOT_TEST_FAST=1): no services and no real model.

    Deselects the tests marked elasticsearch, redis, slow or browser and those whose fixtures load
    the model, and says how many it left out; the full run (CI) is unchanged.
    """
    if os.environ.get("CITEBOT_TEST_FAST") != "1":
        return
    kept, left_out = [], []
    for item in items:
        needs_service = any(item.get_closest_marker(m) for m in ("elasticsearch", "redis", "slow", "browser"))
        needs_model = bool(_MODEL_FIXTURES & set(getattr(item, "fixturenames", ())))
        (left_out if needs_service or needs_model else kept).append(item)
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        items[:] = kept
    config.stash[_LEFT_OUT] = len(left_out)


def pytest_sessionfinish(session):
    """An xdist worker hands its count of left-out tests to the controller."""
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None and _LEFT_OUT in session.config.stash:
        workeroutput["citebot_left_out"] = session.config.stash[_LEFT_OUT]


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """An xdist worker finished: keep its count (every worker collects the same tests)."""
    count = getattr(node, "workeroutput", {}).get("citebot_left_out")
    if count is not None:
        node.config.stash[_LEFT_OUT] = count


def pytest_terminal_summary(terminalreporter, config):
    if os.environ.get("CITEBOT_TEST_FAST") == "1" and _LEFT_OUT in config.stash:
        terminalreporter.write_line(f"fast run: {config.stash[_LEFT_OUT]} tests left out (marked elasticsearch, "
                                    "redis, slow or browser, or loading the model); scripts/test runs them")

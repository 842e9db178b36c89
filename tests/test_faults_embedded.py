"""The embedded store under faults: an ingest process killed (SIGKILL) at chosen and at
random points, and two ingests of one store at once.

Each case ingests a copy of the sample handbook (the "old" collection), edits the copy
(files changed, deleted and added: the "new" one, also ingested into a reference store),
then runs the next ingest in a child process (bot/testing/ingest_child.py) that is killed.
Afterwards the store must open and pass an audit of its SQLite file, hold every document
either old or new (whole), no chunk twice, answer a question, and the next ingest must
bring it to exactly the reference: chunks and the gate's calibration. More seeds, and the
ingest timings, are in benchmarks/faults.py.
"""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from bot.testing.store_audit import (
    audit_embedded,
    collection,
    copy_folder,
    duplicated_chunks,
    edit_collection,
    versions,
)
from ingest.pipeline import ingest
from search import calibration
from search.embedded import LOCK_NAME, EmbeddedStore
from search.errors import IngestLockedError
from search.glossary import Glossary
from search.retrieval_config import RetrievalConfig
from search.retrieve import Retriever
from tests.conftest import HANDBOOK, REPO

# Seconds per test (timeouts, killed processes): the fast run leaves them to CI.
pytestmark = pytest.mark.slow

CHILD = [sys.executable, "-m", "bot.testing.ingest_child"]
CHILD_TIMEOUT_S = 120  # a hang guard, not a timing


@dataclass
class Case:
    folder: Path
    store_dir: Path
    old: dict
    new: dict
    old_null: calibration.NullDistribution | None
    new_null: calibration.NullDistribution | None


@pytest.fixture()
def case(tmp_path, test_embedder) -> Case:
    folder = copy_folder(HANDBOOK, tmp_path / "docs")
    store_dir = tmp_path / "store"
    store = EmbeddedStore(store_dir)
    ingest([folder], store, test_embedder, progress=False)
    old, old_null = collection(store), calibration.stored(store)
    store.close()
    edit_collection(folder, seed=1, changed=8)
    ref = EmbeddedStore(tmp_path / "reference")
    ingest([folder], ref, test_embedder, progress=False)
    new, new_null = collection(ref), calibration.stored(ref)
    ref.close()
    assert old != new and old_null != new_null
    return Case(folder, store_dir, old, new, old_null, new_null)


def child(case: Case, *options: str) -> subprocess.Popen:
    return subprocess.Popen([*CHILD, str(case.store_dir), str(case.folder), *options], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_ready(proc: subprocess.Popen) -> None:
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"


def assert_whole_after_the_kill(case: Case, test_embedder) -> dict[str, str]:
    """The store opens, is whole, holds each document old or new, and answers."""
    assert audit_embedded(case.store_dir) == []
    store = EmbeddedStore(case.store_dir)
    try:
        chunks = collection(store)
        held = versions(chunks, case.old, case.new)
        assert "MIXED" not in held.values(), {s: v for s, v in held.items() if v == "MIXED"}
        assert duplicated_chunks(store) == []
        retriever = Retriever(store, test_embedder.encode_query, Glossary.empty(), RetrievalConfig())
        assert retriever.retrieve("How often does the Release Train leave?").hits
        # the calibration describes the collection held, or is gone (measured on next use)
        null = calibration.stored(store)
        assert (null is None or (null == case.old_null and chunks == case.old)
                or (null == case.new_null and chunks == case.new)), (null, held)
    finally:
        store.close()
    return held


def assert_next_ingest_completes(case: Case, test_embedder) -> None:
    store = EmbeddedStore(case.store_dir)
    try:
        ingest([case.folder], store, test_embedder, progress=False)
        assert collection(store) == case.new
        assert calibration.stored(store) == case.new_null
        assert duplicated_chunks(store) == []
    finally:
        store.close()
    assert audit_embedded(case.store_dir) == []


@pytest.mark.parametrize("point", [["--kill-after-docs", "0"], ["--kill-after-docs", "1"],
                                   ["--kill-after-docs", "5"], ["--kill-in-calibration"]],
                         ids=["before-the-first-write", "after-1-document", "after-5-documents",
                              "in-calibration"])
def test_an_ingest_killed_at_a_known_point_leaves_a_whole_store_that_the_next_run_completes(
        case, test_embedder, point):
    proc = child(case, *point)
    proc.wait(CHILD_TIMEOUT_S)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.read() if proc.stderr else ""
    held = assert_whole_after_the_kill(case, test_embedder)
    if point == ["--kill-after-docs", "0"]:
        assert "new" not in held.values()
    if point == ["--kill-in-calibration"]:
        # every document written: the old calibration must not survive (it did: the next
        # run found nothing to write and kept the old collection's null distribution)
        assert "old" not in held.values()
    assert_next_ingest_completes(case, test_embedder)


@pytest.mark.parametrize("seed", [11, 12])
def test_an_ingest_killed_at_a_random_moment_leaves_a_whole_store(case, test_embedder, seed, tmp_path):
    proc = child(case)
    wait_ready(proc)
    time.sleep(random.Random(seed).uniform(0.0, 0.6))  # the run takes 0.3-1 s here
    proc.send_signal(signal.SIGKILL)
    proc.wait(CHILD_TIMEOUT_S)
    assert_whole_after_the_kill(case, test_embedder)
    assert_next_ingest_completes(case, test_embedder)


def test_a_second_ingest_of_the_same_store_is_refused_while_one_runs(case, test_embedder):
    first = child(case, "--slow-s", "0.3")  # ~3 s of writes
    wait_ready(first)
    lock = case.store_dir / LOCK_NAME
    deadline = time.monotonic() + CHILD_TIMEOUT_S
    while "pid" not in (lock.read_text() if lock.exists() else "") and time.monotonic() < deadline:
        time.sleep(0.02)
    second = child(case)
    out, _ = second.communicate(timeout=CHILD_TIMEOUT_S)
    assert second.returncode == 2
    assert f"refused: another ingest is writing the store at {case.store_dir} (pid {first.pid}, started " in out
    assert "wait for it to finish, then run this one again" in out
    # in-process too, the same refusal
    with pytest.raises(IngestLockedError):
        ingest([case.folder], EmbeddedStore(case.store_dir), test_embedder, progress=False)
    out, err = first.communicate(timeout=CHILD_TIMEOUT_S)
    assert first.returncode == 0, err
    store = EmbeddedStore(case.store_dir)
    assert collection(store) == case.new and calibration.stored(store) == case.new_null
    store.close()
    assert lock.read_text() == ""  # released, holder forgotten


def test_a_killed_ingest_releases_its_lock(case, test_embedder):
    first = child(case, "--slow-s", "5")
    wait_ready(first)
    lock = case.store_dir / LOCK_NAME
    deadline = time.monotonic() + CHILD_TIMEOUT_S
    while "pid" not in (lock.read_text() if lock.exists() else "") and time.monotonic() < deadline:
        time.sleep(0.02)
    first.send_signal(signal.SIGKILL)
    first.wait(CHILD_TIMEOUT_S)
    assert_next_ingest_completes(case, test_embedder)  # not refused: the kernel dropped the lock

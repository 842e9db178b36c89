"""The refusal gate: very weak evidence only, calibrated per collection, and a word the
collection never uses is not, alone, a reason."""

from __future__ import annotations

from bot.answer.gate import GATE_BEST_COVERAGE_MAX, Gate
from ingest.pipeline import ingest
from search import calibration
from search.embedded import EmbeddedStore
from search.retrieve import Retriever
from search.support import Support
from tests.conftest import HANDBOOK


def support(**kw) -> Support:
    base = {"dense_top": 0.5, "coverage": 0.5, "addressed": False, "missing": [],
            "best_coverage": 0.5, "dense_z": 1.0, "null_mean": 0.4}
    return Support(**{**base, **kw})


def test_weak_similarity_and_weak_coverage_together_refuse_with_the_reason():
    reason = Gate().refuse(support(dense_top=0.31, dense_z=-0.8, best_coverage=0.2))
    assert reason is not None and "0.31" in reason and "0.40" in reason and "20%" in reason


def test_either_signal_alone_lets_the_question_through():
    assert Gate().refuse(support(dense_z=-2.0, best_coverage=GATE_BEST_COVERAGE_MAX)) is None
    assert Gate().refuse(support(dense_z=0.0, best_coverage=0.0)) is None


def test_a_word_the_collection_never_uses_is_not_alone_a_reason():
    # "how do i nuke my last commit" — the collection says "reset", never "nuke"
    assert Gate().refuse(support(missing=["nuke"], dense_top=0.62, dense_z=1.5)) is None


def test_an_addressed_passage_is_never_refused():
    assert Gate().refuse(support(addressed=True, dense_z=-3.0, best_coverage=0.0)) is None


def test_an_uncalibrated_collection_falls_back_to_the_fixed_floor():
    assert Gate().refuse(support(dense_z=None, null_mean=None, dense_top=0.2, best_coverage=0.1))
    assert Gate().refuse(support(dense_z=None, null_mean=None, dense_top=0.35, best_coverage=0.1)) is None


def test_ingest_stores_the_calibration_and_retrieval_reads_it(tmp_path, test_embedder):
    store = EmbeddedStore(tmp_path / "store")
    ingest([HANDBOOK / "company"], store, test_embedder, progress=False)
    null = calibration.stored(store)
    assert null is not None and null.n == calibration.NULL_QUESTIONS and 0 < null.std < 1
    s = Retriever(store, test_embedder.encode_query).retrieve("Where is the yellow bollard?").support
    assert s.null_mean == null.mean and s.dense_z == round(null.z(s.dense_top), 3)
    # deterministic: the same collection gives the same calibration
    again = EmbeddedStore(tmp_path / "again")
    ingest([HANDBOOK / "company"], again, test_embedder, progress=False)
    assert calibration.stored(again) == null


def test_a_store_without_a_calibration_is_calibrated_on_first_use(tmp_path, test_embedder):
    store = EmbeddedStore(tmp_path / "store")
    ingest([HANDBOOK / "company"], store, test_embedder, progress=False)
    store.write_stat(calibration.STAT_KEY, {})  # as an older ingest left it
    assert calibration.stored(store) is None
    s = Retriever(store, test_embedder.encode_query).retrieve("Where is the yellow bollard?").support
    assert s.dense_z is not None and s.null_mean is not None


def test_a_running_retriever_takes_the_calibration_of_an_ingest_beside_it(small_store, test_embedder):
    """Regression: a retriever kept its first calibration for good, so a bot running while
    the collection was re-ingested judged questions against the old collection's null."""
    from search import calibration
    from search.retrieval_config import CALIBRATION_TTL_S
    from search.retrieve import Retriever

    retriever = Retriever(small_store, test_embedder.encode_query)
    now = [1000.0]
    retriever.clock = lambda: now[0]
    first = retriever.null_distribution()
    assert first == calibration.stored(small_store) and first is not None
    newer = calibration.NullDistribution(first.mean + 0.1, first.std, first.n)
    small_store.write_stat(calibration.STAT_KEY, newer.as_dict())  # what another process's ingest writes
    now[0] += CALIBRATION_TTL_S / 2
    assert retriever.null_distribution() == first  # not read again yet
    now[0] += CALIBRATION_TTL_S
    assert retriever.null_distribution() == newer
    small_store.write_stat(calibration.STAT_KEY, {})  # dropped mid-ingest: the last one stays
    now[0] += CALIBRATION_TTL_S
    assert retriever.null_distribution() == newer

"""The refusal gate's three outcomes: answer, the closest the documents come (on topic, not
close), and the flat refusal only when nothing is near; calibrated per collection, and a
word the collection never uses is not, alone, a reason."""

from __future__ import annotations

from bot.answer.gate import (
    ANSWER,
    CLOSEST,
    CLOSEST_COVERAGE_MIN,
    CLOSEST_Z_MIN,
    GATE_BEST_COVERAGE_MAX,
    GATE_Z_MAX,
    GATE_Z_MAX_BY_MODEL,
    REFUSED,
    Gate,
)
from ingest.embedder import KNOWN_MODELS, MODEL_NAME
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


def test_nothing_near_the_question_is_refused_flatly_with_the_reason():
    v = Gate().judge(support(dense_top=0.21, dense_z=CLOSEST_Z_MIN - 0.1, best_coverage=0.1))
    assert v.outcome == REFUSED and v.reason is not None
    assert "0.21" in v.reason and "0.40" in v.reason and "10%" in v.reason
    assert Gate().refuse(support(dense_top=0.21, dense_z=CLOSEST_Z_MIN - 0.1, best_coverage=0.1)) == v.reason


def test_on_topic_but_not_close_is_the_closest_the_documents_come():
    # The two-outcome gate refused this (dense_z < 0, best_coverage < 0.35).
    v = Gate().judge(support(dense_top=0.38, dense_z=-0.8, best_coverage=0.15))
    assert v.outcome == CLOSEST and "0.38" in v.reason and "15%" in v.reason
    assert Gate().refuse(support(dense_top=0.38, dense_z=-0.8, best_coverage=0.15)) is None
    # Far from the null, but the best passage holds a fair share of the question's words.
    far = support(dense_z=CLOSEST_Z_MIN - 1, best_coverage=CLOSEST_COVERAGE_MIN)
    assert Gate().judge(far).outcome == CLOSEST


def test_coverage_is_read_on_the_question_s_content_when_that_is_more():
    # "just got married!! how do i add my spouse to health insurance?": the preamble's
    # words are in the weight as written, not in the content's.
    s = support(dense_z=-0.5, best_coverage=0.25, focus_coverage=GATE_BEST_COVERAGE_MAX,
                set_aside=["just got married!!"])
    assert s.evidence == GATE_BEST_COVERAGE_MAX and Gate().judge(s).outcome == ANSWER
    assert support(best_coverage=0.3, focus_coverage=0.1).evidence == 0.3


def test_either_signal_alone_answers_the_question():
    assert Gate().judge(support(dense_z=-2.0, best_coverage=GATE_BEST_COVERAGE_MAX)).outcome == ANSWER
    assert Gate().judge(support(dense_z=0.0, best_coverage=0.0)).outcome == ANSWER


def test_a_word_the_collection_never_uses_is_not_alone_a_reason():
    # "how do i nuke my last commit" — the collection says "reset", never "nuke"
    assert Gate().judge(support(missing=["nuke"], dense_top=0.62, dense_z=1.5)).outcome == ANSWER


def test_an_addressed_passage_is_never_refused():
    assert Gate().judge(support(addressed=True, dense_z=-3.0, best_coverage=0.0)).outcome == ANSWER


def test_an_uncalibrated_collection_falls_back_to_the_fixed_floor():
    assert Gate().refuse(support(dense_z=None, null_mean=None, dense_top=0.2, best_coverage=0.1))
    assert Gate().judge(support(dense_z=None, null_mean=None, dense_top=0.35, best_coverage=0.1)).outcome == ANSWER
    uncalibrated = support(dense_z=None, null_mean=None, dense_top=0.2, best_coverage=CLOSEST_COVERAGE_MIN)
    assert Gate().judge(uncalibrated).outcome == CLOSEST


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


def test_each_embedding_model_gets_the_gate_set_on_its_own_cosines():
    mpnet = KNOWN_MODELS["78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658"]
    assert set(GATE_Z_MAX_BY_MODEL) <= set(KNOWN_MODELS.values())
    assert Gate.for_model(MODEL_NAME) == Gate() and Gate().z_max == GATE_Z_MAX
    assert Gate.for_model("some/other-model") == Gate()
    # a question a quarter spread above the null: close for MiniLM, only on topic for mpnet
    near_miss = support(dense_z=0.25, best_coverage=0.1)
    assert Gate.for_model(MODEL_NAME).judge(near_miss).outcome == ANSWER
    assert Gate.for_model(mpnet).judge(near_miss).outcome == CLOSEST
    # the coverage edge and an addressed passage answer whatever the model
    assert Gate.for_model(mpnet).judge(support(dense_z=0.25, best_coverage=GATE_BEST_COVERAGE_MAX)).outcome == ANSWER
    assert Gate.for_model(mpnet).judge(support(dense_z=-3.0, best_coverage=0.0, addressed=True)).outcome == ANSWER


def test_the_answerer_uses_the_gate_of_the_configured_model(small_store):
    from dataclasses import replace

    from bot.evaluate import MemoryTurnLog
    from bot.settings import load_settings
    from bot.testing.embedder import HashingEmbedder
    from bot.wiring import Components

    mpnet = next(iter(GATE_Z_MAX_BY_MODEL))
    for name, z_max in ((mpnet, GATE_Z_MAX_BY_MODEL[mpnet]), (MODEL_NAME, GATE_Z_MAX)):
        embedder = HashingEmbedder()
        embedder.stamp = replace(embedder.stamp, name=name)  # the name the index stamp would carry
        c = Components(load_settings())
        c.embedder = embedder
        answerer = c.make_answerer(Retriever(small_store, embedder.encode_query), MemoryTurnLog())
        assert answerer.gate == Gate.for_model(name) and answerer.gate.z_max == z_max

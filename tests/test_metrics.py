"""Prometheus metrics: a turn moves exactly the counters it should, and /metrics serves them."""

from __future__ import annotations

import socket
import urllib.request

import pytest

from bot.answer.compose import ExtractiveComposer
from bot.answer.turn import Answerer
from bot.memory.redis import connect
from bot.memory.state import InProcessState, RedisState
from bot.metrics import REGISTRY
from search.errors import StoreError
from search.glossary import Glossary
from search.retrieve import Retriever
from tests.slack_harness import CHANNEL, QUESTION, USER, mention

ZERO_STAGES = {"retrieve", "compose", "checks", "total"}


def snapshot() -> dict[tuple[str, tuple], float]:
    """Every citebot sample: counters and histogram counts (bucket series left out)."""
    out = {}
    for metric in REGISTRY.collect():
        for s in metric.samples:
            if s.name.endswith(("_bucket", "_created", "_sum")):
                continue
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def moved(before: dict, after: dict) -> dict[str, float]:
    """What changed, as "name{label=value}" -> delta."""
    out = {}
    for key, v in after.items():
        d = v - before.get(key, 0.0)
        if d:
            name, labels = key
            out[name + ("{" + ",".join(f"{k}={x}" for k, x in labels) + "}" if labels else "")] = d
    return out


def stages(*names: str) -> dict[str, float]:
    return {f"citebot_stage_seconds_count{{stage={n}}}": 1.0 for n in names}


@pytest.fixture()
def answerer(small_store, test_embedder):
    def build(state=None, encode=None) -> Answerer:
        retriever = Retriever(small_store, encode or test_embedder.encode_query, Glossary.empty())
        return Answerer(retriever, ExtractiveComposer(test_embedder.encode_texts), small_store,
                        state or InProcessState())
    return build


def test_an_answered_turn_moves_its_outcome_and_stage_timers_only(answerer):
    before = snapshot()
    record = answerer().ask(QUESTION)
    assert not record.refused and record.error is None
    assert moved(before, snapshot()) == {"citebot_turns_total{outcome=answered}": 1.0,
                                         **stages("retrieve", "compose", "checks", "total")}


def test_a_gate_refusal_is_counted_as_one(answerer):
    before = snapshot()
    record = answerer().ask("recipe for banana bread")
    assert record.refused and record.composer == "gate", record.refusal_reason
    assert moved(before, snapshot()) == {"citebot_turns_total{outcome=refused_gate}": 1.0,
                                         **stages("retrieve", "total")}


def test_the_closest_the_documents_come_is_counted_apart(answerer):
    # On the topic (the handbook's contractors and equipment), close to nothing it says:
    # answered, labelled.
    before = snapshot()
    record = answerer().ask("do contractors get a company car")
    assert record.outcome == "closest" and not record.refused, record.closest_reason
    assert moved(before, snapshot()) == {"citebot_turns_total{outcome=closest}": 1.0,
                                         **stages("retrieve", "compose", "checks", "total")}


def test_a_search_failure_is_an_error_and_a_search_backend_error(answerer):
    def encoder_down(_q: str):
        raise StoreError("cannot reach Elasticsearch at http://127.0.0.1:1")

    before = snapshot()
    record = answerer(encode=encoder_down).ask(QUESTION)
    assert record.error
    assert moved(before, snapshot()) == {"citebot_turns_total{outcome=error}": 1.0,
                                         "citebot_backend_errors_total{backend=search}": 1.0,
                                         **stages("total")}


def test_a_redis_failure_counts_once_as_redis_not_as_search(answerer):
    """Redis down: the turn is answered without its thread's earlier turns (it used to fail),
    and each failed Redis call (the read, then the write) counts once, as Redis."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    down = connect(f"redis://127.0.0.1:{port}/0")
    before = snapshot()
    record = answerer(state=RedisState(down)).ask(QUESTION, thread_key="C1:1.0")
    assert record.error is None
    assert [e.split(":")[0] for e in record.errors] == ["conversation state read failed",
                                                        "conversation state write failed"]
    assert moved(before, snapshot()) == {"citebot_turns_total{outcome=answered}": 1.0,
                                         "citebot_backend_errors_total{backend=redis}": 2.0,
                                         **stages("retrieve", "compose", "checks", "total")}


def test_duplicates_and_rate_limits_are_counted_and_served_at_metrics(standin, start_bot, small_store):
    h = start_bot(small_store, rate_limit_per_minute=1)
    before = snapshot()
    first = mention(standin, QUESTION)
    event_id = h.sender.new_event_id()
    for retry in (None, 1):
        assert h.sender.event(first, event_id=event_id, retry_num=retry).status == 200
    h.drain()
    assert h.sender.event(mention(standin, "And who decides?", user=USER, channel=CHANNEL)).status == 200
    h.drain()
    assert moved(before, snapshot()) == {
        "citebot_dedupe_hits_total": 1.0, "citebot_rate_limited_total": 1.0,
        "citebot_turns_total{outcome=answered}": 1.0,
        **stages("retrieve", "compose", "checks", "total")}
    with urllib.request.urlopen(h.server.url.replace("/slack/events", "/metrics"), timeout=10) as r:
        body = r.read().decode()
        assert r.status == 200 and r.headers["Content-Type"].startswith("text/plain")
    assert "# TYPE citebot_turns_total counter" in body
    assert 'citebot_backend_errors_total{backend="slack"}' in body
    assert 'citebot_stage_seconds_bucket{le="0.01",stage="total"}' in body

"""One contract suite per in-process/Redis pair, run against both (like the store suite):
dedupe, rate limit, recent turns, conversation state and the turn log. The Redis side uses
the real Redis of CITEBOT_TEST_REDIS_URL and fails, never skips, without it; each Redis
implementation also turns a Redis that is down into citebot's StoreError.
"""

from __future__ import annotations

import socket
import time

import pytest
import redis

from bot.answer.record import LoggedTurn, TurnRecord
from bot.memory.redis import connect
from bot.memory.state import HISTORY_TURNS, InProcessState, PriorTurn, RedisState
from bot.memory.turnlog import RedisTurnLog
from bot.slack.dedupe import InProcessDeduper, RedisDeduper
from bot.slack.ratelimit import InProcessRateLimiter, RedisRateLimiter
from bot.slack.recent import RECENT_TURNS_KEPT, InProcessRecentTurns, RedisRecentTurns
from search.embedded import EmbeddedStore
from search.errors import StoreError
from tests.conftest import real_redis_url

BACKENDS = ["in_process", "redis"]


@pytest.fixture()
def client():
    c = redis.Redis.from_url(real_redis_url())
    yield c
    c.close()


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture()
def down():
    """A client for a Redis that is not there."""
    c = connect(f"redis://127.0.0.1:{_closed_port()}/0")
    yield c
    c.close()


def make(kind: str, backend: str, request, **kw):
    if backend == "in_process":
        return {"dedupe": lambda: InProcessDeduper(ttl_s=kw.get("ttl_s", 60)),
                "rate": lambda: InProcessRateLimiter(kw.get("per_minute", 2)),
                "recent": InProcessRecentTurns,
                "state": InProcessState,
                "turnlog": lambda: EmbeddedStore(request.getfixturevalue("tmp_path") / "turns")}[kind]()
    client = request.getfixturevalue("client")
    prefix = request.getfixturevalue("redis_prefix")
    return {"dedupe": lambda: RedisDeduper(client, prefix, ttl_s=kw.get("ttl_s", 60)),
            "rate": lambda: RedisRateLimiter(client, kw.get("per_minute", 2), prefix),
            "recent": lambda: RedisRecentTurns(client, prefix),
            "state": lambda: RedisState(client, prefix + "thread:"),
            "turnlog": lambda: RedisTurnLog(client, prefix=prefix)}[kind]()


# -- dedupe ---------------------------------------------------------------------------------
@pytest.mark.redis
@pytest.mark.parametrize("backend", BACKENDS)
def test_the_first_claim_of_a_key_wins(backend, request):
    deduper = make("dedupe", backend, request)
    assert [deduper.claim("event:Ev1"), deduper.claim("event:Ev1"), deduper.claim("event:Ev2")] == [
        True, False, True]


@pytest.mark.redis
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_claim_expires_after_its_ttl(backend, request):
    deduper = make("dedupe", backend, request, ttl_s=1)
    assert deduper.claim("k") and not deduper.claim("k")
    time.sleep(1.2)
    assert deduper.claim("k")


def test_in_process_claims_are_bounded():
    deduper = InProcessDeduper(ttl_s=60, max_keys=3)
    for key in "abcdef":
        assert deduper.claim(key)
    assert len(deduper) <= 3  # the oldest claims go first


# -- rate limit -----------------------------------------------------------------------------
@pytest.mark.redis
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_user_over_the_limit_is_told_when_to_come_back(backend, request):
    limiter = make("rate", backend, request, per_minute=2)
    decisions = [limiter.check("UALICE") for _ in range(3)]
    assert [d.allowed for d in decisions] == [True, True, False]
    assert 1 <= decisions[2].retry_after_s <= 60 and decisions[2].limit_per_minute == 2
    assert limiter.check("UBOB").allowed  # per user


# -- recent turns ---------------------------------------------------------------------------
@pytest.mark.redis
@pytest.mark.parametrize("backend", BACKENDS)
def test_the_last_turn_of_each_user_is_remembered(backend, request):
    recent = make("recent", backend, request)
    assert recent.last("UALICE") is None
    recent.remember("UALICE", "t-1")
    recent.remember("UALICE", "t-2")
    recent.remember("UBOB", "t-3")
    assert (recent.last("UALICE"), recent.last("UBOB")) == ("t-2", "t-3")


@pytest.mark.redis
@pytest.mark.parametrize("backend", BACKENDS)
def test_each_users_latest_turns_are_listed_newest_first_and_bounded(backend, request):
    recent = make("recent", backend, request)
    assert recent.recent("UALICE", 5) == []
    for n in range(RECENT_TURNS_KEPT + 3):
        recent.remember("UALICE", f"t-{n}")
    recent.remember("UBOB", "t-bob")
    newest = [f"t-{n}" for n in range(RECENT_TURNS_KEPT + 2, -1, -1)]
    assert recent.recent("UALICE", 3) == newest[:3]
    assert recent.recent("UALICE", 100) == newest[:RECENT_TURNS_KEPT]  # older ones are dropped
    assert recent.recent("UBOB", 5) == ["t-bob"] and recent.recent("UCAROL", 5) == []
    assert recent.last("UALICE") == newest[0]


@pytest.mark.redis
def test_a_last_turn_remembered_before_the_list_existed_is_still_listed(client, redis_prefix):
    client.set(f"{redis_prefix}last:UALICE", b"t-old")  # what an older citebot wrote
    assert RedisRecentTurns(client, redis_prefix).recent("UALICE", 5) == ["t-old"]


# -- conversation state ---------------------------------------------------------------------
@pytest.mark.redis
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_thread_keeps_its_last_turns_in_order(backend, request):
    state = make("state", backend, request)
    assert state.history("C1:1.0") == []
    turns = [PriorTurn(f"t-{n}", f"question {n}", f"condensed {n}", f"answer {n} «ü»")
             for n in range(HISTORY_TURNS + 2)]
    for t in turns:
        state.append("C1:1.0", t)
    state.append("C2:2.0", turns[0])
    assert state.history("C1:1.0") == turns[-HISTORY_TURNS:]
    assert state.history("C2:2.0") == [turns[0]]


# -- turn log -------------------------------------------------------------------------------
@pytest.mark.redis
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_turn_round_trips_with_its_feedback(backend, request):
    log = make("turnlog", backend, request)
    record = TurnRecord(turn_id="t-00000000abcd", created_at="2025-01-02T03:04:05+00:00",
                        question="Où est le café?", condensed_query="café", user="UALICE",
                        channel="CGENERAL", surface="slack_mention", answer="Dans la cuisine [1].",
                        passages=[{"number": 1, "chunk_id": "c1", "source": "a.md",
                                   "heading_path": ["A", "B"], "page": "iv", "chars": 10}],
                        timings_ms={"total": 12.5})
    assert log.get_turn(record.turn_id) is None
    log.put_turn(record.turn_id, record.created_at, record.as_dict())
    log.add_feedback(record.turn_id, "2025-01-02T03:05:00+00:00", "UBOB", "helpful")
    log.add_feedback(record.turn_id, "2025-01-02T03:06:00+00:00", None, "not_helpful")
    got = log.get_turn(record.turn_id)
    assert {k: v for k, v in got.items() if k != "feedback"} == record.as_dict()
    assert got["feedback"] == [{"at": "2025-01-02T03:05:00+00:00", "user": "UBOB", "value": "helpful"},
                               {"at": "2025-01-02T03:06:00+00:00", "user": None, "value": "not_helpful"}]
    assert LoggedTurn.from_log(got).record == record


@pytest.mark.redis
@pytest.mark.parametrize("backend", BACKENDS)
def test_turns_since_lists_the_turns_from_a_time_oldest_first(backend, request):
    log = make("turnlog", backend, request)
    times = ["2025-01-03T10:00:00+00:00", "2025-01-01T10:00:00+00:00", "2025-01-02T10:00:00.500000+00:00",
             "2025-01-02T10:00:00+00:00"]
    for n, at in enumerate(times):
        log.put_turn(f"t-since{n}", at, {"question": f"q{n}", "created_at": at})
    log.add_feedback("t-since0", "2025-01-03T11:00:00+00:00", "UBOB", "not_helpful")
    got = list(log.turns_since("2025-01-02T10:00:00+00:00"))
    assert [r["turn_id"] for r in got] == ["t-since3", "t-since2", "t-since0"]
    assert got[-1]["feedback"] == [{"at": "2025-01-03T11:00:00+00:00", "user": "UBOB", "value": "not_helpful"}]
    assert got[0]["feedback"] == [] and list(log.turns_since("2025-02-01T00:00:00+00:00")) == []


@pytest.mark.redis
def test_redis_keys_are_prefixed_and_expire(client, redis_prefix):
    RedisDeduper(client, redis_prefix, ttl_s=60).claim("event:Ev1")
    log = RedisTurnLog(client, prefix=redis_prefix)
    log.put_turn("t-1", "2025-01-01T00:00:00+00:00", {"question": "q"})
    assert 0 < client.ttl(f"{redis_prefix}seen:event:Ev1") <= 60
    assert 0 < client.ttl(f"{redis_prefix}turn:t-1") <= 90 * 24 * 3600
    assert RedisTurnLog(client, prefix=redis_prefix + "other:").get_turn("t-1") is None


# -- Redis down: every Redis implementation says so as a StoreError -------------------------
@pytest.mark.parametrize("call", [
    lambda c: RedisDeduper(c).claim("event:x"),
    lambda c: RedisRateLimiter(c, 2).check("U1"),
    lambda c: RedisRecentTurns(c).remember("U1", "t-1"),
    lambda c: RedisRecentTurns(c).last("U1"),
    lambda c: RedisRecentTurns(c).recent("U1", 5),
    lambda c: RedisState(c).history("C1:1.0"),
    lambda c: RedisState(c).append("C1:1.0", PriorTurn("t-1", "q", "q", "a")),
    lambda c: RedisTurnLog(c).put_turn("t-1", "2025-01-01T00:00:00+00:00", {}),
    lambda c: RedisTurnLog(c).get_turn("t-1"),
    lambda c: RedisTurnLog(c).add_feedback("t-1", "2025-01-01T00:00:00+00:00", None, "helpful"),
], ids=["dedupe", "rate", "remember", "last", "recent", "history", "append", "put_turn", "get_turn", "feedback"])
def test_a_redis_that_is_down_is_a_store_error_naming_the_fix(call, down):
    with pytest.raises(StoreError, match=r"in Redis .*check REDIS_URL"):
        call(down)


def test_a_redis_deduper_that_is_down_still_refuses_a_second_claim_in_this_process(down):
    """Redis down: the first claim says so (the bot answers anyway), a retry of the same
    event to this process is refused here (tests/test_faults_redis.py runs two processes)."""
    deduper = RedisDeduper(down, "citebot-test:", ttl_s=60, poll_s=3600)
    with pytest.raises(StoreError, match="cannot claim 'event:Ev1' in Redis"):
        deduper.claim("event:Ev1")
    assert deduper.claim("event:Ev1") is False
    assert [k for k, _left in deduper.local.claims()] == ["event:Ev1"]

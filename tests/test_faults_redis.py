"""Redis stopped and started again under two bot processes answering retried deliveries
(python -m benchmarks.faults --only redis measures the same).

Two `citebot serve`-like processes (bot/testing/bot_child.py: the real wiring, Bolt and
HTTP server, with the test embedder) share a private redis-server (bot/testing/services.py)
and one Slack stand-in, which records which process made each call. Each event is
delivered once and then retried (X-Slack-Retry-Num 1-3), the deliveries spread over both
processes. What is guaranteed (bot/slack/dedupe.py):
- Redis up: exactly one reply per event;
- Redis down: every delivery acked, every event answered visibly (an answer, not an error),
  at most one reply per event from each process, no process dies; /readyz says Redis is down;
- Redis back (restarted empty): once each process has written its claims back, exactly
  once again, for new events and for retries of events answered before or during the outage.
"""

from __future__ import annotations

import json
import random
import time

import pytest
import redis

from bot.testing.bot_child import BotProcess
from bot.testing.fleet import WAIT_S, fleet_of, per_event, plan_for

pytestmark = pytest.mark.redis


@pytest.fixture()
def fleet(tmp_path, small_store_dir, redis_prefix):
    with fleet_of(["a", "b"], small_store_dir, tmp_path, redis_prefix) as f:
        yield f


def ready(bot: BotProcess) -> dict:
    status, body = bot.get("/readyz")
    return {"status": status, **json.loads(body)}


def test_redis_stopped_and_restarted_under_two_bots_answering_retried_deliveries(fleet):
    rng = random.Random(7)
    names = sorted(fleet.bots)

    # 1. Redis up: exactly one reply per event, whichever process gets which delivery.
    up = fleet.new_events(8, "U")
    assert set(fleet.deliver(plan_for(up, rng, names))) == {200}
    fleet.wait_answered(up)
    assert sorted(per_event(fleet.replies(up)).values()) == [1] * len(up)

    # 2. Redis down: acked, answered, at most one reply per event from each process.
    fleet.redis.stop()
    assert all(ready(b)["status"] == 503 and "Redis" in ready(b)["checks"]["redis"] for b in fleet.bots.values())
    down = fleet.new_events(8, "D")
    plan = plan_for(down, rng, names, both=True)
    assert set(fleet.deliver(plan)) == {200}
    fleet.wait_answered(down)
    fleet.wait_replies(down, {(e.body["ts"], name) for e, _retry, name in plan})
    replies = fleet.replies(down)
    assert max(replies.values()) == 1, replies  # never twice from one process
    assert {ts for ts, _ in replies} == {e.body["ts"] for e in down}  # every event answered
    for e in down:
        assert not fleet.answer(e).startswith("Sorry"), fleet.answer(e)  # answers, not errors
    assert all(b.alive() for b in fleet.bots.values())

    # 3. Redis back, empty (no persistence): both processes write their claims back...
    fleet.redis.start()
    client = redis.Redis.from_url(fleet.redis.url)
    seen = {f"{fleet.prefix}seen:event:{e.event_id}".encode() for e in up + down}
    deadline = time.monotonic() + WAIT_S
    while not seen <= set(client.scan_iter(match=fleet.prefix + "seen:*")) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert seen <= set(client.scan_iter(match=fleet.prefix + "seen:*")), "the claims were not written back"
    assert all(ready(b)["status"] == 200 for b in fleet.bots.values())
    # ...so late retries of every earlier event get no reply at all, and new events one.
    before = sum(fleet.replies(up + down).values())
    late = [(e, 3, rng.choice(names)) for e in up + down for _ in range(2)]
    new = fleet.new_events(8, "N")
    assert set(fleet.deliver(late + plan_for(new, rng, names, both=True))) == {200}
    fleet.wait_answered(new)
    for b in fleet.bots.values():  # the late retries are dropped at once; let them land
        b.get("/healthz")
    time.sleep(1.0)
    assert sum(fleet.replies(up + down).values()) == before
    assert sorted(per_event(fleet.replies(new)).values()) == [1] * len(new)
    assert all(b.alive() for b in fleet.bots.values())
    client.close()

"""Redis stopped and started again under two bot processes answering retried deliveries
(issue 12 part 2).

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
import shutil
import socket
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pytest
import redis

from bot.testing.bot_child import BotProcess
from bot.testing.services import PrivateRedis
from bot.testing.slack_standin import BOT_USER_ID, SlackSender, SlackStandIn

pytestmark = pytest.mark.redis

QUESTIONS = ["How often does the Release Train leave?", "What is the per diem for travel?",
             "Who approves a hotfix?", "How long is the soak?", "What is the on-call rota?",
             "How do I report an incident?", "What is the Klaxon?", "Where is the annex?"]
WAIT_S = 120  # a hang guard for the replies and the resync, never a timing


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Event:
    body: dict
    event_id: str


@dataclass
class Fleet:
    standin: SlackStandIn
    redis: PrivateRedis
    bots: dict[str, BotProcess]
    senders: dict[str, SlackSender]
    prefix: str

    def new_events(self, n: int, tag: str) -> list[Event]:
        out = []
        for i in range(n):
            channel = f"CFAULT{tag}{i % 3}"
            m = self.standin.user_message(channel, f"U{tag}{i}", f"<@{BOT_USER_ID}> {QUESTIONS[i % len(QUESTIONS)]}")
            body = {"type": "app_mention", "user": m["user"], "text": m["text"], "ts": m["ts"],
                    "channel": channel, "event_ts": m["ts"]}
            out.append(Event(body, f"Ev{tag}{i:03d}{random.Random(tag).randrange(10**6):06d}"))
        return out

    def deliver(self, plan: list[tuple[Event, int | None, str]]) -> list[int]:
        """Send (event, retry number, process) deliveries, four at a time; their HTTP statuses."""
        def send(item):
            event, retry, name = item
            return self.senders[name].event(event.body, event_id=event.event_id, retry_num=retry).status
        with ThreadPoolExecutor(4) as pool:
            return list(pool.map(send, plan))

    def replies(self, events: list[Event]) -> Counter:
        """(event ts, process) -> replies posted in the event's thread."""
        wanted = {e.body["ts"]: e for e in events}
        return Counter((c.params.get("thread_ts"), c.replica) for c in self.standin.calls("chat.postMessage")
                       if c.params.get("thread_ts") in wanted)

    def wait_answered(self, events: list[Event]) -> None:
        """Until every event's reply has been posted and then replaced by its answer."""
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            if all(self.answer(e) is not None for e in events):
                return
            time.sleep(0.1)
        raise AssertionError(f"not all answered in {WAIT_S} s: {[e.event_id for e in events if not self.answer(e)]}")

    def answer(self, event: Event) -> str | None:
        ours = [m for m in self.standin.messages(event.body["channel"])
                if m.get("thread_ts") == event.body["ts"] and m.get("bot_id")]
        texts = [m.get("text", "") for m in ours]
        return texts[0] if texts and not any("Looking through" in t for t in texts) else None


def plan_for(events: list[Event], rng: random.Random, names: list[str], *, both: bool = False):
    """Each event once, then retries 1-3, the deliveries on random processes (each process
    at least once per event when `both`), in a stream where retries follow their event."""
    slots = []
    for i, e in enumerate(events):
        targets = [rng.choice(names) for _ in range(4)]
        if both:
            targets[:2] = rng.sample(names, 2)
        for n, name in enumerate(targets):
            slots.append((i + n * rng.uniform(0.5, 3), e, n or None, name))
    return [(e, retry, name) for _, e, retry, name in sorted(slots, key=lambda s: s[0])]


@pytest.fixture()
def fleet(tmp_path, small_store_dir, redis_prefix):
    standin = SlackStandIn().start()
    store = tmp_path / "store"
    shutil.copytree(small_store_dir, store)
    r = PrivateRedis(free_port(), tmp_path / "redis").start()
    bots: dict[str, BotProcess] = {}
    try:
        for name in ("a", "b"):
            bots[name] = BotProcess(tmp_path / f"bot-{name}.log", "--slack-api", standin.replica_api_url(name),
                                    "--store", str(store), "--redis", r.url, "--prefix", redis_prefix)
        yield Fleet(standin, r, bots, {n: SlackSender(b.url) for n, b in bots.items()}, redis_prefix)
    finally:
        for b in bots.values():
            b.stop()
        r.kill()
        standin.stop()


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
    per_event = Counter()
    for (ts, _replica), n in fleet.replies(up).items():
        per_event[ts] += n
    assert sorted(per_event.values()) == [1] * len(up)

    # 2. Redis down: acked, answered, at most one reply per event from each process.
    fleet.redis.stop()
    assert all(ready(b)["status"] == 503 and "Redis" in ready(b)["checks"]["redis"] for b in fleet.bots.values())
    down = fleet.new_events(8, "D")
    assert set(fleet.deliver(plan_for(down, rng, names, both=True))) == {200}
    fleet.wait_answered(down)
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
    per_event = Counter()
    for (ts, _replica), n in fleet.replies(new).items():
        per_event[ts] += n
    assert sorted(per_event.values()) == [1] * len(new)
    assert all(b.alive() for b in fleet.bots.values())
    client.close()

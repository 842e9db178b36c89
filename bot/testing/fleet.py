"""Two or more bot processes sharing a private Redis, fed retried Slack deliveries: the
fleet of tests/test_faults_redis.py and benchmarks/faults.py.

Each process is a bot/testing/bot_child.py (the real wiring and HTTP server, the test
embedder) whose Web API calls reach one Slack stand-in under its own replica name, so
every reply can be traced to the process that posted it.
"""

from __future__ import annotations

import random
import shutil
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from bot.testing.bot_child import BotProcess
from bot.testing.services import PrivateRedis, free_port
from bot.testing.slack_sender import SlackSender
from bot.testing.slack_standin import BOT_USER_ID, SlackStandIn

QUESTIONS = [
    "How often does the Release Train leave?",
    "What is the per diem for travel?",
    "Who approves a hotfix?",
    "How long is the soak?",
    "What is the on-call rota?",
    "How do I report an incident?",
    "What is the Klaxon?",
    "Where is the annex?",
]
WAIT_S = 120  # a hang guard for the replies and the resync, never a timing


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
            body = {
                "type": "app_mention",
                "user": m["user"],
                "text": m["text"],
                "ts": m["ts"],
                "channel": channel,
                "event_ts": m["ts"],
            }
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
        return Counter(
            (c.params.get("thread_ts"), c.replica)
            for c in self.standin.calls("chat.postMessage")
            if c.params.get("thread_ts") in wanted
        )

    def wait_answered(self, events: list[Event]) -> None:
        """Until every event's reply has been posted and then replaced by its answer."""
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            if all(self.answer(e) is not None for e in events):
                return
            time.sleep(0.1)
        raise AssertionError(f"not all answered in {WAIT_S} s: {[e.event_id for e in events if not self.answer(e)]}")

    def wait_replies(self, events: list[Event], pairs: set[tuple[str, str]]) -> None:
        """Until each (event ts, process) of `pairs` has replied: while Redis is down every
        process answers each event it was handed once, and the second process's reply may
        come after the first one's answer (counting before it landed saw a late reply)."""
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            if pairs <= set(self.replies(events)):
                return
            time.sleep(0.1)
        raise AssertionError(f"replies missing after {WAIT_S} s: {sorted(pairs - set(self.replies(events)))}")

    def answer(self, event: Event) -> str | None:
        ours = [
            m
            for m in self.standin.messages(event.body["channel"])
            if m.get("thread_ts") == event.body["ts"] and m.get("bot_id")
        ]
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


@contextmanager
def fleet_of(names: list[str], store_dir: Path, work: Path, prefix: str) -> Iterator[Fleet]:
    """Bot processes on a copy of `store_dir` (built with the test embedder), a private Redis."""
    standin = SlackStandIn().start()
    store = work / "store"
    shutil.copytree(store_dir, store)
    r = PrivateRedis(free_port(), work / "redis").start()
    bots: dict[str, BotProcess] = {}
    try:
        for name in names:
            bots[name] = BotProcess(
                work / f"bot-{name}.log",
                "--slack-api",
                standin.replica_api_url(name),
                "--store",
                str(store),
                "--redis",
                r.url,
                "--prefix",
                prefix,
            )
        yield Fleet(standin, r, bots, {n: SlackSender(b.url) for n, b in bots.items()}, prefix)
    finally:
        for b in bots.values():
            b.stop()
        r.kill()
        standin.stop()


def per_event(replies: Counter) -> Counter:
    """event ts -> replies from every process together."""
    out: Counter = Counter()
    for (ts, _replica), n in replies.items():
        out[ts] += n
    return out

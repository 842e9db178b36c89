"""Exactly-once replies: the first claim of a key wins, across every bot replica.

Slack redelivers an event whose ack was late or lost (X-Slack-Retry-Num 1-3), and a
direct message that mentions the bot may arrive as two events. Before any work, the
Slack adapter claims the event id and the message; only the winner answers. With Redis
the claim is one `SET key 1 NX EX ttl`, shared by every replica; without Redis it is a
TTL dictionary in this process.

While Redis is down (tests/test_faults_redis.py; python -m benchmarks.faults --only redis). Every
claim is also kept in this process, and checked there first, so what is guaranteed is:
- during the outage: at most one reply per event from each process (a replica that has
  seen an event never answers it again); two replicas may both answer one event, since
  answering twice beats never answering; every delivery is still acked and answered;
- once Redis answers again: exactly once. A replica that saw Redis fail polls it every
  RESYNC_POLL_S and, as soon as it answers, writes every claim it holds back with
  `SET NX`, so a retry of an event answered during the outage (or before a restart that
  lost Redis's data) is refused by every replica that has resynced. Between Redis coming
  back and that resync (at most RESYNC_POLL_S) a retry may still be answered twice.
A Redis restart that no replica noticed (no call failed) is not detected: give Redis
persistence (appendonly) if its data must survive restarts.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol

import redis
import structlog

from bot.memory.redis import RedisUnavailable, redis_errors
from bot.metrics import DEDUPE_HITS
from bot.slack.inbound import Question
from search.errors import CitebotError

log = structlog.get_logger("citebot.dedupe")

# Slack retries three times, the last about five minutes after the first delivery;
# an hour covers that with a wide margin and keeps the key set small.
DEDUPE_TTL_S = 3600
# In-process claims kept at most; the oldest are dropped first (a day of busy traffic).
IN_PROCESS_CLAIMS = 100_000
# After a failed claim, how often a replica asks Redis whether it is back (then resyncs).
RESYNC_POLL_S = 0.5
# Claims written back per pipelined round trip when Redis returns.
RESYNC_BATCH = 1000


class Deduper(Protocol):
    def claim(self, key: str) -> bool:
        """True for the first claim of `key` within the TTL, False for every later one."""
        ...


class InProcessDeduper:
    """For one process: claims expire after the TTL; the dictionary is bounded."""

    def __init__(self, ttl_s: float = DEDUPE_TTL_S, max_keys: int = IN_PROCESS_CLAIMS) -> None:
        self.ttl_s = ttl_s
        self.max_keys = max_keys
        self._expiry: dict[str, float] = {}
        self._lock = threading.Lock()

    def claim(self, key: str) -> bool:
        now = time.monotonic()
        with self._lock:
            expires = self._expiry.get(key)
            if expires is not None and expires > now:
                return False
            self._expiry.pop(key, None)
            self._expiry[key] = now + self.ttl_s
            if len(self._expiry) > self.max_keys:
                self._prune(now)
            return True

    def __len__(self) -> int:
        return len(self._expiry)

    def claims(self) -> list[tuple[str, float]]:
        """Every live claim and the seconds it has left."""
        now = time.monotonic()
        with self._lock:
            return [(k, exp - now) for k, exp in self._expiry.items() if exp > now]

    def _prune(self, now: float) -> None:
        for key in [k for k, exp in self._expiry.items() if exp <= now]:
            del self._expiry[key]
        while len(self._expiry) > self.max_keys:  # insertion order: oldest first
            del self._expiry[next(iter(self._expiry))]


class RedisDeduper:
    """Shared by every replica: `SET prefix+key 1 NX EX ttl` is atomic in Redis; claims are
    kept in this process too, for when Redis is down (see the module docstring)."""

    def __init__(
        self, client: redis.Redis, prefix: str = "citebot:", ttl_s: int = DEDUPE_TTL_S, poll_s: float = RESYNC_POLL_S
    ) -> None:
        self.client = client
        self.prefix = prefix + "seen:"
        self.ttl_s = ttl_s
        self.poll_s = poll_s
        self.local = InProcessDeduper(ttl_s)
        self._watcher: threading.Thread | None = None
        self._watch_lock = threading.Lock()
        self.resyncs = 0  # completed write-backs (tests, logs)

    def claim(self, key: str) -> bool:
        if not self.local.claim(key):
            return False  # this process has seen it: never a second reply from here
        try:
            with redis_errors(f"claim {key!r}"):
                return bool(self.client.set(self.prefix + key, b"1", nx=True, ex=self.ttl_s))
        except RedisUnavailable:
            self._watch()
            raise

    def _watch(self) -> None:
        """Start the watcher that resyncs the claims once Redis answers again."""
        with self._watch_lock:
            if self._watcher is None or not self._watcher.is_alive():
                self._watcher = threading.Thread(
                    target=self._resync_when_back, daemon=True, name="citebot-dedupe-resync"
                )
                self._watcher.start()

    def _resync_when_back(self) -> None:
        give_up = time.monotonic() + self.ttl_s  # by then every claim held here has expired
        while time.monotonic() < give_up:
            time.sleep(self.poll_s)
            try:
                self.resync()
                return
            except redis.RedisError:
                continue

    def resync(self) -> int:
        """Write every claim of this process back to Redis (SET NX, its TTL left); how many."""
        claims = self.local.claims()
        for i in range(0, len(claims), RESYNC_BATCH):
            pipe = self.client.pipeline(transaction=False)
            for key, left_s in claims[i : i + RESYNC_BATCH]:
                pipe.set(self.prefix + key, b"1", nx=True, ex=max(1, int(left_s)))
            pipe.execute()
        if not claims:
            self.client.ping()
        self.resyncs += 1
        log.info("dedupe_resynced", claims=len(claims))
        return len(claims)


def claim_question(deduper: Deduper, q: Question) -> bool:
    """First delivery wins: the event id (retries), then the message (one post, two events).
    Called before the question is cleaned, so a dropped retry costs no cleaning."""
    keys = []
    if q.event_id:
        keys.append(f"event:{q.event_id}")
    if q.message_ts:
        keys.append(f"message:{q.channel}:{q.message_ts}")
    for key in keys:
        try:
            if not deduper.claim(key):
                DEDUPE_HITS.inc()
                log.info("slack_duplicate_dropped", key=key, retry_num=q.retry_num)
                return False
        except CitebotError as exc:  # answering twice beats never answering
            log.warning("dedupe_unavailable", error=str(exc))
    return True

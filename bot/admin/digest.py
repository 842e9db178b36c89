"""The weekly gaps digest: on Monday, a message in CITEBOT_GAPS_CHANNEL with the week's top
topics and a link to /admin (CITEBOT_ADMIN_URL).

A thread inside `citebot serve` looks at the clock every CHECK_EVERY_S; from Monday
SEND_HOUR UTC on, the first replica to claim the ISO week sends it. The claim is a Redis
SET NX key per ISO week (`prefix digest:2026-W49`, kept DIGEST_KEY_TTL_S) when REDIS_URL
is set, so replicas send one message between them; a set in this process otherwise. A
digest that fails to post gives its claim back, so a later check (here or on another
replica) sends it. The clock is injectable (tests).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import structlog

from bot.memory.redis import redis_errors
from bot.slack.mrkdwn import escape

log = structlog.get_logger("citebot.admin")

SEND_WEEKDAY = 0  # Monday
# 09:00 UTC: the start of the working day in Europe, before it in the Americas, so owners
# read it at the start of their week (docs/decisions/0040-admin-page.md).
SEND_HOUR = 9
# Five minutes between looks at the clock: a digest is at most that late, and the check
# is one Redis round trip when it is due (docs/decisions/0040-admin-page.md).
CHECK_EVERY_S = 300.0
# A claim outlives its week by a day, so a slow replica's late look cannot send it twice.
# (docs/decisions/0040-admin-page.md)
DIGEST_KEY_TTL_S = 8 * 24 * 3600
TOPICS = 5  # topics in the message
PERIOD = timedelta(days=7)


def week_of(moment: datetime) -> str:
    year, week, _ = moment.isocalendar()
    return f"{year}-W{week:02d}"


class InProcessClaims:
    def __init__(self) -> None:
        self._weeks: set[str] = set()
        self._lock = threading.Lock()

    def claim(self, week: str) -> bool:
        with self._lock:
            if week in self._weeks:
                return False
            self._weeks.add(week)
            return True

    def release(self, week: str) -> None:
        with self._lock:
            self._weeks.discard(week)


class RedisClaims:
    def __init__(self, client: Any, prefix: str) -> None:
        self.client = client
        self.prefix = prefix

    def claim(self, week: str) -> bool:
        with redis_errors("claim the weekly digest"):
            return bool(self.client.set(f"{self.prefix}digest:{week}", b"1", nx=True, ex=DIGEST_KEY_TTL_S))

    def release(self, week: str) -> None:
        with redis_errors("release the weekly digest"):
            self.client.delete(f"{self.prefix}digest:{week}")


def message(report: dict[str, Any], admin_url: str | None) -> str:
    """The digest's text (Slack mrkdwn; questions escaped)."""
    topics = report["topics"][:TOPICS]
    lines = [
        (
            f"*What citebot could not answer well this week* — {len(report['topics'])} topic(s), "
            f"{len(report['stale'])} stale citation(s)"
        )
    ]
    for n, t in enumerate(topics, 1):
        example = f" — “{escape(t['questions'][0]['question'])}”" if t["questions"] else ""
        where = f" (nearest: {escape(t['nearest'][0]['source'])})" if t["nearest"] else ""
        lines.append(f"{n}. {t['size']} question(s), {t['askers']} asker(s){example}{where}")
    if not topics:
        lines.append("Every question was answered well.")
    if admin_url:
        lines.append(f"<{admin_url.rstrip('/')}/admin|The whole report>")
    return "\n".join(lines)


class WeeklyDigest:
    def __init__(
        self,
        *,
        channel: str,
        post: Callable[[str, str], None],
        report: Callable[[timedelta, datetime], dict[str, Any]],
        claims: Any,
        admin_url: str | None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        every_s: float = CHECK_EVERY_S,
    ) -> None:
        self.channel = channel
        self.post = post  # (channel, text)
        self.report = report  # (period, until) -> the gaps report
        self.claims = claims
        self.admin_url = admin_url
        self.clock = clock
        self.every_s = every_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def due(self, now: datetime) -> bool:
        return now.weekday() == SEND_WEEKDAY and now.hour >= SEND_HOUR

    def tick(self) -> bool:
        """Send this week's digest if it is due and no one has; True when this call sent it."""
        now = self.clock().astimezone(UTC)
        if not self.due(now):
            return False
        week = week_of(now)
        if not self.claims.claim(week):
            return False
        try:
            self.post(self.channel, message(self.report(PERIOD, now), self.admin_url))
        except Exception:
            self.claims.release(week)
            raise
        log.info("gaps_digest_sent", week=week, channel=self.channel)
        return True

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.tick()
            except Exception as exc:  # noqa: BLE001 - the thread lives on; the next look retries
                log.error("gaps_digest_failed", error=f"{type(exc).__name__}: {exc}"[:300])
            self._stop.wait(self.every_s)

    def start(self) -> WeeklyDigest:
        self._thread = threading.Thread(target=self._run, name="citebot-gaps-digest", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

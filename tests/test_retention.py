"""Retention: CITEBOT_TURN_RETENTION_DAYS applies to both turn logs and the thread state,
and `citebot turns purge` removes turns by date or by person, with the threads they were
asked in. Each rule runs on the embedded store and on the real Redis."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import redis
from freezegun import freeze_time

from bot.memory.retention import (
    DEFAULT_RETENTION_DAYS,
    EXPIRED_PER_WRITE,
    ExpiringTurnLog,
    cutoff,
    iso,
    parse_before,
    purge,
)
from bot.memory.state import InProcessState, PriorTurn, RedisState, thread_ttl_s
from bot.memory.turnlog import RedisTurnLog
from bot.slack.recent import InProcessRecentTurns, RedisRecentTurns
from search.embedded import EmbeddedStore
from tests.conftest import real_redis_url

REPO = Path(__file__).resolve().parent.parent
NOW = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)
DAY = 24 * 3600


@pytest.fixture()
def client():
    c = redis.Redis.from_url(real_redis_url())
    yield c
    c.close()


def turn_log(backend: str, request, days: int = 30):
    if backend == "embedded":
        return ExpiringTurnLog(EmbeddedStore(request.getfixturevalue("tmp_path") / "store"), days)
    return RedisTurnLog(request.getfixturevalue("client"), prefix=request.getfixturevalue("redis_prefix"),
                        ttl_s=days * DAY)


def state(backend: str, request, ttl_s: int = 7 * DAY):
    if backend == "embedded":
        return InProcessState(ttl_s=ttl_s)
    return RedisState(request.getfixturevalue("client"),
                      prefix=request.getfixturevalue("redis_prefix") + "thread:", ttl_s=ttl_s)


def put(log, turn_id: str, age_days: float, user: str = "U1", thread: str | None = None,
        now: dt.datetime = NOW) -> None:
    created = iso(now - dt.timedelta(days=age_days))
    log.put_turn(turn_id, created, {"turn_id": turn_id, "created_at": created, "user": user,
                                    "channel": "C1", "thread": thread, "question": "q"})


BACKENDS = ["embedded", pytest.param("redis", marks=pytest.mark.redis)]


@pytest.mark.parametrize("backend", BACKENDS)
def test_purge_before_a_date_removes_older_turns_and_their_feedback(backend, request):
    log = turn_log(backend, request, days=3650)
    with freeze_time(NOW):
        put(log, "t-old", 40)
        put(log, "t-new", 2)
        log.add_feedback("t-old", iso(NOW), "U1", "down")
        gone = log.purge_turns(cutoff(30, NOW), ())
    assert [g["user"] for g in gone] == ["U1"]
    with freeze_time(NOW):
        assert log.get_turn("t-old") is None
        assert log.get_turn("t-new") is not None
        put(log, "t-old", 40)  # the same id again: no feedback left over from before
        assert log.get_turn("t-old")["feedback"] == []


@pytest.mark.parametrize("backend", BACKENDS)
def test_purge_by_user_removes_only_that_persons_turns_and_their_threads(backend, request):
    log, threads = turn_log(backend, request), state(backend, request)
    with freeze_time(NOW):
        put(log, "t-a1", 1, user="UA", thread="C1:1.0")
        put(log, "t-a2", 1, user="UA", thread="C1:2.0")
        put(log, "t-b1", 1, user="UB", thread="C1:3.0")
        for key in ("C1:1.0", "C1:2.0", "C1:3.0"):
            threads.append(key, PriorTurn("t", "q", "q", "a"))
        done = purge(log, threads, None, ["UA"])
        assert done.as_dict() == {"turns": 2, "threads": 2}
        assert log.get_turn("t-a1") is None and log.get_turn("t-a2") is None
        assert log.get_turn("t-b1") is not None
        assert threads.history("C1:1.0") == [] and threads.history("C1:2.0") == []
        assert len(threads.history("C1:3.0")) == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_purge_with_no_condition_removes_nothing(backend, request):
    log = turn_log(backend, request)
    with freeze_time(NOW):
        put(log, "t-1", 1)
        assert log.purge_turns(None, ()) == []
        assert log.get_turn("t-1") is not None


def test_the_embedded_log_deletes_expired_turns_as_it_writes(tmp_path):
    store = EmbeddedStore(tmp_path / "store")
    with freeze_time(NOW):
        for i in range(EXPIRED_PER_WRITE + 5):  # written while nothing expired them
            put(store, f"t-old-{i}", 31)
        log = ExpiringTurnLog(store, retention_days=30)
        # Past retention and not yet deleted reads as gone.
        assert log.get_turn("t-old-0") is None
        assert store.get_turn("t-old-0") is not None
        put(log, "t-new-1", 0)  # deletes EXPIRED_PER_WRITE of them, the oldest first
        assert sum(store.get_turn(f"t-old-{i}") is not None for i in range(EXPIRED_PER_WRITE + 5)) == 5
        put(log, "t-new-2", 0)  # and the rest
        assert all(store.get_turn(f"t-old-{i}") is None for i in range(EXPIRED_PER_WRITE + 5))
        assert log.get_turn("t-new-1") is not None and log.get_turn("t-new-2") is not None


@pytest.mark.redis
def test_redis_keys_live_for_the_retention(client, redis_prefix):
    log = RedisTurnLog(client, prefix=redis_prefix, ttl_s=3 * DAY)
    put(log, "t-1", 0)
    log.add_feedback("t-1", iso(NOW), "U1", "up")
    assert 3 * DAY - 5 <= client.ttl(f"{redis_prefix}turn:t-1") <= 3 * DAY
    assert 3 * DAY - 5 <= client.ttl(f"{redis_prefix}feedback:t-1") <= 3 * DAY
    threads = RedisState(client, prefix=redis_prefix + "thread:", ttl_s=thread_ttl_s(3))
    threads.append("C1:1.0", PriorTurn("t", "q", "q", "a"))
    assert 3 * DAY - 5 <= client.ttl(f"{redis_prefix}thread:C1:1.0") <= 3 * DAY


def test_the_setting_defaults_to_the_retention_the_docs_give():
    from bot.settings import Settings

    assert Settings.model_fields["turn_retention_days"].default == DEFAULT_RETENTION_DAYS


def test_a_thread_is_kept_a_week_or_the_retention_when_shorter():
    assert thread_ttl_s(90) == 7 * DAY
    assert thread_ttl_s(2) == 2 * DAY


def test_the_in_process_state_forgets_a_thread_idle_past_its_time():
    threads = InProcessState(ttl_s=DAY)
    with freeze_time(NOW) as clock:
        threads.append("C1:1.0", PriorTurn("t1", "q", "q", "a"))
        clock.tick(DAY - 60)
        assert len(threads.history("C1:1.0")) == 1
        clock.tick(120)
        assert threads.history("C1:1.0") == []
        threads.append("C1:1.0", PriorTurn("t2", "q", "q", "a"))
        assert [t.turn_id for t in threads.history("C1:1.0")] == ["t2"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_purge_by_user_forgets_their_recent_turns(backend, request):
    if backend == "embedded":
        recent = InProcessRecentTurns()
    else:
        recent = RedisRecentTurns(request.getfixturevalue("client"), request.getfixturevalue("redis_prefix"))
    log, threads = turn_log(backend, request), state(backend, request)
    recent.remember("UA", "t-a1")
    recent.remember("UB", "t-b1")
    purge(log, threads, None, ["UA"], recent=recent)
    assert recent.last("UA") is None and recent.recent("UA", 5) == []
    assert recent.last("UB") == "t-b1"


def test_before_takes_a_date_or_a_time_and_names_the_forms_otherwise():
    assert parse_before("2026-01-31") == "2026-01-31T00:00:00.000000+00:00"
    assert parse_before("2026-01-31T09:30:00Z") == "2026-01-31T09:30:00.000000+00:00"
    assert parse_before("2026-01-31T10:30:00+01:00") == "2026-01-31T09:30:00.000000+00:00"
    with pytest.raises(ValueError, match="2026-01-31T09:00:00Z"):
        parse_before("last tuesday")


def _cli(*argv: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bot.cli", *argv], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.parametrize("backend", BACKENDS)
def test_turns_purge_through_the_command_line(backend, request, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CITEBOT_", "REDIS_URL"))}
    env["CITEBOT_STORE"] = str(tmp_path / "store")
    if backend == "embedded":
        log = ExpiringTurnLog(EmbeddedStore(tmp_path / "store"), 3650)
    else:
        prefix = request.getfixturevalue("redis_prefix")
        env["REDIS_URL"], env["CITEBOT_REDIS_PREFIX"] = real_redis_url(), prefix
        log = RedisTurnLog(request.getfixturevalue("client"), prefix=prefix)
    now = dt.datetime.now(dt.UTC)  # the command runs at the real time
    put(log, "t-x", 1, user="UX", now=now)
    put(log, "t-y", 1, user="UY", now=now)
    done = _cli("turns", "purge", "--user", "UX", "--json", env=env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"turns": 1, "threads": 0}
    assert _cli("turns", "show", "t-x", env=env).returncode != 0
    assert _cli("turns", "show", "t-y", env=env).returncode == 0
    bad = _cli("turns", "purge", "--before", "soon", env=env)
    assert bad.returncode == 2 and "2026-01-31" in bad.stderr


def test_a_bad_retention_setting_stops_citebot_with_its_name(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("CITEBOT_")}
    env.update(CITEBOT_STORE=str(tmp_path / "store"), CITEBOT_TURN_RETENTION_DAYS="0")
    done = _cli("turns", "purge", env=env)
    assert done.returncode == 2
    assert "CITEBOT_TURN_RETENTION_DAYS" in done.stderr

"""Thread recall within Slack's limits for apps outside its Marketplace (conversations.replies
at one call a minute, 15 messages): one call of 15 messages, a 429 backs every replica off
(shared through Redis) and is said in the log, and a thread found to be others' is not read
again. Through the real HTTP server against the Web API stand-in."""

from __future__ import annotations

import pytest
from structlog.testing import capture_logs

from bot.slack.recall import RECALL_MESSAGES
from bot.slack.recall_memo import InProcessRecallMemo, RedisRecallMemo
from tests.conftest import real_redis_url
from tests.slack_harness import CHANNEL, FOLLOW_UP, QUESTION, USER, bot_replies, mention, one_answer


def _answered_thread(standin, start_bot, small_store, **settings):
    first = start_bot(small_store, **settings)
    root = mention(standin, QUESTION)
    first.sender.event(root)
    first.drain()
    one_answer(standin, root)
    return root


@pytest.mark.slow
def test_a_recall_reads_one_call_of_at_most_fifteen_messages(standin, start_bot, small_store):
    root = _answered_thread(standin, start_bot, small_store)
    for i in range(30):  # a long thread of people talking after citebot's answer
        standin.user_message(CHANNEL, "UBOB", f"chatter {i}", thread_ts=root["ts"])
    restarted = start_bot(small_store)  # empty in-process state
    reply = standin.user_message(CHANNEL, USER, FOLLOW_UP, thread_ts=root["ts"])
    restarted.sender.event(reply)
    restarted.drain()
    reads = standin.calls("conversations.replies")
    assert len(reads) == 1
    assert int(reads[0].params["limit"]) == RECALL_MESSAGES
    assert len(bot_replies(standin, CHANNEL, root["ts"])) == 2  # recalled, and answered


@pytest.mark.slow
@pytest.mark.parametrize("shared", [False, True])
def test_a_rate_limited_recall_backs_off_and_says_so(standin, start_bot, small_store, shared,
                                                     redis_prefix):
    settings = {"redis_url": real_redis_url(), "redis_prefix": redis_prefix} if shared else {}
    root = _answered_thread(standin, start_bot, small_store, **settings)
    a = start_bot(small_store, **settings)  # in process: a new process forgot the thread
    b = start_bot(small_store, **settings) if shared else a
    if shared:  # two replicas, and Redis forgot the thread
        a.components.state.forget([f"{CHANNEL}:{root['ts']}"])
    standin.fail_http("conversations.replies", status=429, times=5, retry_after=60)
    with capture_logs() as logs:
        a.sender.event(standin.user_message(CHANNEL, USER, FOLLOW_UP, thread_ts=root["ts"]))
        a.drain()
        b.sender.event(standin.user_message(CHANNEL, USER, "and the other one?", thread_ts=root["ts"]))
        b.drain()
    degraded = [e for e in logs if e["event"] == "slack_thread_recall_degraded"]
    assert degraded and degraded[0]["reason"] == "rate_limited"
    assert 0 < degraded[-1]["retry_in_s"] <= 60
    # One call met the 429 (the SDK's retry handler gave up: 60 s is past a turn's
    # allowance); the second question, from the same or another replica, did not call.
    assert len(standin.calls("conversations.replies")) == 1
    assert len(bot_replies(standin, CHANNEL, root["ts"])) == 1  # only the first answer


@pytest.mark.slow
def test_a_thread_that_is_others_is_read_once(standin, start_bot, small_store):
    h = start_bot(small_store)
    root = standin.user_message(CHANNEL, "UBOB", "Lunch plans?")
    for text in ("tacos?", "pizza", "both"):
        h.sender.event(standin.user_message(CHANNEL, USER, text, thread_ts=root["ts"]))
        h.drain()
    assert len(standin.calls("conversations.replies")) == 1
    assert standin.calls("chat.postMessage") == []


@pytest.mark.parametrize("backend", ["in_process", pytest.param("redis", marks=pytest.mark.redis)])
def test_the_recall_memo_backs_off_and_remembers_others_threads(backend, request):
    if backend == "in_process":
        memo = InProcessRecallMemo()
    else:
        import redis

        client = redis.Redis.from_url(real_redis_url())
        request.addfinalizer(client.close)
        memo = RedisRecallMemo(client, request.getfixturevalue("redis_prefix"))
    assert memo.wait_s() == 0
    memo.back_off(30)
    assert 29 < memo.wait_s() <= 30
    assert not memo.foreign("C1:1.0")
    memo.mark_foreign("C1:1.0")
    assert memo.foreign("C1:1.0") and not memo.foreign("C1:2.0")

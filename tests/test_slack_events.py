"""Slack events through the real HTTP server: mentions, retries, signatures, threads,
DMs, other bots, rate limits, and exactly-once replies across replicas sharing Redis."""

from __future__ import annotations

import re
import threading
import time

import pytest

from bot.slack.recall import TURN_EVENT
from bot.slack.render import (
    ACTION_WHY,
)
from bot.testing.slack_sender import SlackSender
from bot.testing.slack_standin import BOT_ID, BOT_USER_ID
from tests.conftest import real_redis_url
from tests.slack_harness import (
    ACK_LIMIT_S,
    CHANNEL,
    FOLLOW_UP,
    QUESTION,
    USER,
    block_text,
    bot_replies,
    buttons,
    feedback_buttons,
    mention,
    one_answer,
    posts_in_thread,
)


# -- mentions -----------------------------------------------------------------------------
@pytest.mark.slow
def test_a_mention_gets_exactly_one_threaded_reply_with_sources_and_turn_id(standin, start_bot,
                                                                            small_store):
    h = start_bot(small_store)
    event = mention(standin, QUESTION)
    delivery = h.sender.event(event)
    assert delivery.status == 200 and delivery.elapsed_s < ACK_LIMIT_S
    h.drain()

    message, turn_id = one_answer(standin, event)
    (placeholder,) = posts_in_thread(standin, CHANNEL, event["ts"])
    assert "Looking through the collection" in placeholder.params["text"]
    assert placeholder.params["metadata"]["event_type"] == "citebot_progress"
    text = block_text(message["blocks"])
    assert "Release Train" in text and re.search(r"\[\d\]", text)  # cites a numbered passage
    assert "*Sources*" in text and "engineering/" in text and " — " in text  # source with heading path
    assert f"turn `{turn_id}`" in text
    assert set(buttons(message["blocks"])) == {ACTION_WHY}
    assert feedback_buttons(message["blocks"]) == {"helpful": f"helpful:{turn_id}",
                                                   "not_helpful": f"not_helpful:{turn_id}"}
    assert message["blocks"][-1]["type"] == "context_actions"  # the feedback controls close it
    assert message["metadata"]["event_type"] == TURN_EVENT
    assert message["metadata"]["event_payload"]["turn_id"] == turn_id

    logged = h.components.turnlog.get_turn(turn_id)
    assert logged["surface"] == "slack_mention" and logged["channel"] == CHANNEL
    assert logged["user"] == USER and logged["question"] == QUESTION  # the mention was stripped
    assert logged["thread"] == f"{CHANNEL}:{event['ts']}"


@pytest.mark.slow
def test_retried_deliveries_still_give_one_reply(standin, start_bot, small_store):
    h = start_bot(small_store)
    event = mention(standin, QUESTION)
    event_id = h.sender.new_event_id()
    statuses = [h.sender.event(event, event_id=event_id, retry_num=n).status for n in (None, 1, 2, 3)]
    assert statuses == [200, 200, 200, 200]
    h.drain()
    one_answer(standin, event)
    assert len(standin.calls("chat.update")) == 1


@pytest.mark.slow
def test_forged_or_stale_signatures_get_401_and_do_no_work(standin, start_bot, small_store):
    h = start_bot(small_store)
    event = mention(standin, QUESTION)
    body = h.sender.envelope(event)
    before = len(standin.calls())
    forged = h.sender.post(body, "application/json", signature="v0=" + "0" * 64)
    wrong_secret = SlackSender(h.server.url, "not-the-secret").post(body, "application/json")
    stale = h.sender.post(body, "application/json", timestamp=int(time.time()) - 600)
    future = h.sender.post(body, "application/json", timestamp=int(time.time()) + 600)
    unsigned = h.sender.post(body, "application/json", signature="")
    assert [d.status for d in (forged, wrong_secret, stale, future, unsigned)] == [401] * 5
    h.drain()
    assert standin.calls()[before:] == []  # nothing reached Slack
    assert "answerer" not in h.components.__dict__  # no turn ever started


@pytest.mark.slow
def test_a_mention_without_a_question_is_answered_with_a_hint(standin, start_bot, small_store):
    h = start_bot(small_store)
    event = mention(standin, "")
    h.sender.event(event)
    h.drain()
    (reply,) = posts_in_thread(standin, CHANNEL, event["ts"])
    assert "Ask me a question" in block_text(reply.params["blocks"]) and "turn `t-" in block_text(
        reply.params["blocks"])

# -- threads, DMs, bots -------------------------------------------------------------------
@pytest.mark.slow
def test_a_thread_follow_up_uses_the_threads_context(standin, start_bot, small_store):
    h = start_bot(small_store)
    first = mention(standin, QUESTION)
    h.sender.event(first)
    h.drain()
    _, first_turn = one_answer(standin, first)

    reply = standin.user_message(CHANNEL, USER, FOLLOW_UP, thread_ts=first["ts"])
    assert h.sender.event(reply).status == 200
    h.drain()
    assert len(posts_in_thread(standin, CHANNEL, first["ts"])) == 2  # one placeholder per turn
    _, message = bot_replies(standin, CHANNEL, first["ts"])
    turn_id = buttons(message["blocks"])[ACTION_WHY]
    logged = h.components.turnlog.get_turn(turn_id)
    assert logged["surface"] == "slack_thread"
    assert "train" in logged["condensed_query"].lower()  # the subject came from the thread
    assert turn_id != first_turn


@pytest.mark.slow
def test_a_follow_up_after_a_restart_reads_the_thread_back(standin, start_bot, small_store):
    first_bot = start_bot(small_store)
    first = mention(standin, QUESTION)
    first_bot.sender.event(first)
    first_bot.drain()
    one_answer(standin, first)

    restarted = start_bot(small_store)  # a new process: empty in-process state
    assert restarted.components.state.history(f"{CHANNEL}:{first['ts']}") == []
    reply = standin.user_message(CHANNEL, USER, FOLLOW_UP, thread_ts=first["ts"])
    restarted.sender.event(reply)
    restarted.drain()
    reads = standin.calls("conversations.replies")
    assert reads and reads[-1].params["ts"] == first["ts"]
    assert str(reads[-1].params["include_all_metadata"]).lower() in ("1", "true")
    _, last = bot_replies(standin, CHANNEL, first["ts"])
    logged = restarted.components.turnlog.get_turn(buttons(last["blocks"])[ACTION_WHY])
    assert logged["surface"] == "slack_thread" and "train" in logged["condensed_query"].lower()


@pytest.mark.slow
def test_threads_citebot_has_not_answered_in_are_left_alone(standin, start_bot, small_store):
    h = start_bot(small_store)
    root = standin.user_message(CHANNEL, "UBOB", "Lunch plans?")
    reply = standin.user_message(CHANNEL, USER, "What about the release train?", thread_ts=root["ts"])
    h.sender.event(reply)
    h.drain()
    assert standin.calls("conversations.replies")  # it looked
    assert standin.calls("chat.postMessage") == []  # and stayed quiet


@pytest.mark.slow
def test_own_and_other_bots_messages_are_ignored(standin, start_bot, small_store):
    h = start_bot(small_store)
    first = mention(standin, QUESTION)
    h.sender.event(first)
    h.drain()
    posted = len(standin.calls("chat.postMessage"))
    thread = {"channel": CHANNEL, "channel_type": "channel", "thread_ts": first["ts"], "type": "message"}
    ours = {**thread, "user": BOT_USER_ID, "bot_id": BOT_ID, "text": "How often does it leave?",
            "ts": standin.next_ts()}
    other_bot = {**thread, "subtype": "bot_message", "bot_id": "BOTHER", "text": "How often does it leave?",
                 "ts": standin.next_ts()}
    other_bot_user = {**thread, "user": "UOTHERBOT", "bot_id": "BOTHER2", "text": "And the soak?",
                      "ts": standin.next_ts()}
    edited = {**thread, "subtype": "message_changed", "ts": standin.next_ts(),
              "message": {"user": USER, "text": "And the soak?"}}
    for event in (ours, other_bot, other_bot_user, edited):
        assert h.sender.event(event).status == 200
    h.drain()
    assert len(standin.calls("chat.postMessage")) == posted
    assert len(standin.calls("chat.update")) == 1


@pytest.mark.slow
def test_a_direct_message_is_answered_in_the_dm(standin, start_bot, small_store):
    h = start_bot(small_store)
    dm = standin.user_message("DALICE", USER, QUESTION, channel_type="im")
    assert h.sender.event(dm).status == 200
    # the same post may also arrive as app_mention: DMs are answered once, from message.im
    h.sender.event({"type": "app_mention", "user": USER, "text": f"<@{BOT_USER_ID}> {QUESTION}",
                    "ts": dm["ts"], "channel": "DALICE", "event_ts": dm["ts"]})
    h.drain()
    (placeholder,) = standin.calls("chat.postMessage")
    assert placeholder.params["channel"] == "DALICE" and placeholder.params.get("thread_ts") is None
    (update,) = standin.calls("chat.update")
    turn_id = buttons(update.params["blocks"])[ACTION_WHY]
    assert h.components.turnlog.get_turn(turn_id)["surface"] == "slack_dm"


@pytest.mark.slow
def test_asking_too_fast_gets_a_friendly_note(standin, start_bot, small_store):
    h = start_bot(small_store, rate_limit_per_minute=1)
    first, second = mention(standin, QUESTION), mention(standin, FOLLOW_UP)
    h.sender.event(first)
    h.drain()
    h.sender.event(second)
    h.drain()
    one_answer(standin, first)
    assert posts_in_thread(standin, CHANNEL, second["ts"]) == []
    (note,) = standin.calls("chat.postEphemeral")
    assert note.params["user"] == USER and note.params["thread_ts"] == second["ts"]
    assert "questions a minute" in note.params["text"] and "turn t-" in note.params["text"]

# -- Redis: exactly once across replicas --------------------------------------------------
@pytest.mark.redis
@pytest.mark.slow
def test_two_bots_sharing_redis_answer_a_duplicated_event_once(standin, start_bot, small_store,
                                                              redis_prefix):
    redis_url = real_redis_url()
    a = start_bot(small_store, redis_url=redis_url, redis_prefix=redis_prefix)
    b = start_bot(small_store, redis_url=redis_url, redis_prefix=redis_prefix)
    assert a.bot.deduper is not b.bot.deduper
    event = mention(standin, QUESTION)
    event_id = a.sender.new_event_id()
    deliveries = []

    def deliver(sender: SlackSender, retry: int | None) -> None:
        deliveries.append(sender.event(event, event_id=event_id, retry_num=retry).status)

    threads = [threading.Thread(target=deliver, args=(s, r))
               for s, r in ((a.sender, None), (b.sender, None), (a.sender, 1), (b.sender, 2), (a.sender, 3))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert deliveries == [200] * 5
    a.drain()
    b.drain()
    _, turn_id = one_answer(standin, event)
    assert len(standin.calls("chat.update")) == 1
    # the turn is in the shared turn log, readable from either replica
    assert a.components.turnlog.get_turn(turn_id)["question"] == QUESTION
    assert b.components.turnlog.get_turn(turn_id)["question"] == QUESTION

"""The Slack bot through its real HTTP server: signed requests in, the real slack_sdk out to a stand-in.

Each test starts the Bolt app on a real HTTP server (port 0) with a WebClient pointed at
tests/slack_standin.py, delivers Slack's requests signed with the signing secret, waits
for the acked work to finish (the bot's worker pool drains), and reads what reached
"Slack". Tests marked `redis` use the real Redis named by CITEBOT_TEST_REDIS_URL and fail,
never skip, without it.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass

import pytest
import redis
import structlog
from hypothesis import given
from hypothesis import settings as hyp_settings
from hypothesis import strategies as st
from structlog.testing import capture_logs

from bot.app import Components
from bot.dedupe import InProcessDeduper, RedisDeduper
from bot.ratelimit import InProcessRateLimiter, RedisRateLimiter
from bot.recent import InProcessRecentTurns, RedisRecentTurns
from bot.render import (
    ACTION_FEEDBACK_DOWN,
    ACTION_FEEDBACK_UP,
    ACTION_SHARE,
    ACTION_WHY,
    MESSAGE_BLOCKS_MAX,
    SECTION_TEXT_MAX,
    escape,
    render_turn,
    split_text,
)
from bot.server import SlackHttpServer
from bot.settings import load_settings
from bot.slack import TURN_EVENT, SlackBot, build_bot, clean_question, parse_command, serve
from bot.turn import TurnRecord
from bot.turnlog import LoggedTurn, RedisTurnLog
from search.errors import ConfigError
from tests.conftest import REPO
from tests.slack_standin import (
    BOT_ID,
    BOT_TOKEN,
    BOT_USER_ID,
    SIGNING_SECRET,
    SlackSender,
    SlackStandIn,
)

QUESTION = "How often does the Release Train leave?"
FOLLOW_UP = "And how long does its soak run?"
USER = "UALICE"
CHANNEL = "CGENERAL"
ACK_LIMIT_S = 3.0  # Slack's: a request not acked in 3 s is retried


# -- harness ------------------------------------------------------------------------------
@dataclass
class Harness:
    components: Components
    bot: SlackBot
    server: SlackHttpServer
    sender: SlackSender

    def drain(self) -> None:
        assert self.bot.drain(90), "the bot's work did not finish in 90 s"


@pytest.fixture()
def standin():
    s = SlackStandIn().start()
    yield s
    s.stop()


@pytest.fixture()
def start_bot(standin, embedder):
    """Start a bot on a real HTTP server; `store=` injects an ingested store."""
    started: list[Harness] = []

    def start(store=None, **overrides) -> Harness:
        settings = load_settings(slack_bot_token=BOT_TOKEN, slack_signing_secret=SIGNING_SECRET,
                                 slack_api_url=standin.api_url, **overrides)
        components = Components(settings)
        components.embedder = embedder  # the session's model: loaded once for the suite
        if store is not None:
            components.store = store
        bot = build_bot(components)
        server = SlackHttpServer(bot.app, host="127.0.0.1", port=0).start()
        harness = Harness(components, bot, server, SlackSender(server.url))
        started.append(harness)
        return harness

    yield start
    for h in started:
        h.server.shutdown()
        h.bot.close(10)


def real_redis_url() -> str:
    """The real Redis of CITEBOT_TEST_REDIS_URL; without it the calling test fails, never skips."""
    url = os.environ.get("CITEBOT_TEST_REDIS_URL", "")
    if not url:
        pytest.fail("CITEBOT_TEST_REDIS_URL is not set: start the test services with "
                    '`eval "$(scripts/services start)"` (Redis tests fail rather than skip)', pytrace=False)
    return url


@pytest.fixture()
def redis_prefix():
    """A key prefix of this test's own; its keys are deleted afterwards."""
    prefix = f"citebot-test:{uuid.uuid4().hex[:10]}:"
    yield prefix
    url = os.environ.get("CITEBOT_TEST_REDIS_URL")
    if not url:
        return
    client = redis.Redis.from_url(url)
    keys = list(client.scan_iter(match=prefix + "*"))
    if keys:
        client.delete(*keys)
    client.close()


def mention(standin: SlackStandIn, text: str, *, channel: str = CHANNEL, user: str = USER,
            thread_ts: str | None = None) -> dict:
    """A person's message mentioning citebot, stored in the channel, as an app_mention event."""
    message = standin.user_message(channel, user, f"<@{BOT_USER_ID}> {text}", thread_ts=thread_ts)
    event = {"type": "app_mention", "user": user, "text": message["text"], "ts": message["ts"],
             "channel": channel, "event_ts": message["ts"], "team": message["team"]}
    if thread_ts:
        event["thread_ts"] = thread_ts
    return event


def posts_in_thread(standin: SlackStandIn, channel: str, thread_ts: str | None) -> list:
    return [c for c in standin.calls("chat.postMessage")
            if c.params.get("channel") == channel and c.params.get("thread_ts") == thread_ts]


def bot_replies(standin: SlackStandIn, channel: str, thread_ts: str) -> list[dict]:
    """citebot's messages in a thread as they stand now (placeholders replaced), oldest first."""
    return [m for m in standin.messages(channel)
            if m.get("thread_ts") == thread_ts and m.get("bot_id") == BOT_ID]


def block_text(blocks: list[dict]) -> str:
    """Every text in the blocks, in order (sections, context elements, buttons)."""
    out: list[str] = []
    for b in blocks:
        if isinstance(b.get("text"), dict):
            out.append(b["text"]["text"])
        for e in b.get("elements", []):
            if isinstance(e.get("text"), dict):
                out.append(e["text"]["text"])
            elif isinstance(e.get("text"), str):
                out.append(e["text"])
    return "\n".join(out)


def buttons(blocks: list[dict]) -> dict[str, str]:
    """action_id -> value of every button."""
    return {e["action_id"]: e["value"] for b in blocks if b["type"] == "actions" for e in b["elements"]}


def one_answer(standin: SlackStandIn, event: dict) -> tuple[dict, str]:
    """The single reply to a mention: its placeholder updated in place; (message, turn id)."""
    thread = event.get("thread_ts") or event["ts"]
    placeholders = posts_in_thread(standin, event["channel"], thread)
    assert len(placeholders) == 1, [c.params.get("text") for c in placeholders]
    updates = [c for c in standin.calls("chat.update") if c.params["channel"] == event["channel"]]
    (message,) = bot_replies(standin, event["channel"], thread)
    assert any(u.params["ts"] == message["ts"] for u in updates), "the placeholder was not replaced"
    return message, buttons(message["blocks"])[ACTION_WHY]


# -- mentions -----------------------------------------------------------------------------
@pytest.mark.slow
def test_a_mention_gets_exactly_one_threaded_reply_with_sources_and_turn_id(standin, start_bot,
                                                                            examples_store):
    h = start_bot(examples_store)
    event = mention(standin, QUESTION)
    delivery = h.sender.event(event)
    assert delivery.status == 200 and delivery.elapsed_s < ACK_LIMIT_S
    h.drain()

    message, turn_id = one_answer(standin, event)
    (placeholder,) = posts_in_thread(standin, CHANNEL, event["ts"])
    assert "Looking through the collection" in placeholder.params["text"]
    assert placeholder.params["metadata"]["event_type"] == "citebot_progress"
    text = block_text(message["blocks"])
    assert "Release Train" in text and "[1]" in text
    assert "*Sources*" in text and "engineering/" in text and " — " in text  # source with heading path
    assert f"turn `{turn_id}`" in text
    assert set(buttons(message["blocks"])) == {ACTION_FEEDBACK_UP, ACTION_FEEDBACK_DOWN, ACTION_WHY}
    assert message["metadata"]["event_type"] == TURN_EVENT
    assert message["metadata"]["event_payload"]["turn_id"] == turn_id

    logged = h.components.turnlog.get_turn(turn_id)
    assert logged["surface"] == "slack_mention" and logged["channel"] == CHANNEL
    assert logged["user"] == USER and logged["question"] == QUESTION  # the mention was stripped
    assert logged["thread"] == f"{CHANNEL}:{event['ts']}"


@pytest.mark.slow
def test_retried_deliveries_still_give_one_reply(standin, start_bot, examples_store):
    h = start_bot(examples_store)
    event = mention(standin, QUESTION)
    event_id = h.sender.new_event_id()
    statuses = [h.sender.event(event, event_id=event_id, retry_num=n).status for n in (None, 1, 2, 3)]
    assert statuses == [200, 200, 200, 200]
    h.drain()
    one_answer(standin, event)
    assert len(standin.calls("chat.update")) == 1


@pytest.mark.slow
def test_forged_or_stale_signatures_get_401_and_do_no_work(standin, start_bot, examples_store):
    h = start_bot(examples_store)
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
def test_a_mention_without_a_question_is_answered_with_a_hint(standin, start_bot, examples_store):
    h = start_bot(examples_store)
    event = mention(standin, "")
    h.sender.event(event)
    h.drain()
    (reply,) = posts_in_thread(standin, CHANNEL, event["ts"])
    assert "Ask me a question" in block_text(reply.params["blocks"]) and "turn `t-" in block_text(
        reply.params["blocks"])


# -- the slash command --------------------------------------------------------------------
@pytest.mark.slow
def test_slash_command_acks_in_time_and_answers_through_response_url(standin, start_bot, examples_store):
    h = start_bot(examples_store)
    response_url = standin.response_url("ask-1")
    delivery = h.sender.command(QUESTION, user=USER, channel=CHANNEL, response_url=response_url)
    assert delivery.status == 200 and delivery.elapsed_s < ACK_LIMIT_S
    ack = delivery.json()
    assert ack["response_type"] == "ephemeral" and "Looking through the collection" in ack["text"]
    h.drain()

    (answer,) = standin.calls("response_url")
    assert answer.path == "/response/ask-1"
    assert answer.params["response_type"] == "ephemeral" and answer.params["replace_original"] is False
    actions = buttons(answer.params["blocks"])
    assert set(actions) == {ACTION_SHARE, ACTION_FEEDBACK_UP, ACTION_FEEDBACK_DOWN, ACTION_WHY}
    turn_id = actions[ACTION_SHARE]
    text = block_text(answer.params["blocks"])
    assert "Release Train" in text and f"turn `{turn_id}`" in text and "*Q:* " + QUESTION in text
    assert standin.calls("chat.postMessage") == []  # ephemeral: nothing in the channel
    assert h.components.turnlog.get_turn(turn_id)["surface"] == "slack_command"

    # "/ask why" explains that last answer from the turn log
    why = h.sender.command("why", user=USER, channel=CHANNEL, response_url=standin.response_url("why"))
    assert why.status == 200
    h.drain()
    explanation = standin.calls("response_url")[-1]
    assert explanation.path == "/response/why"
    text = block_text(explanation.params["blocks"])
    assert f"Why turn `{turn_id}`" in text and "Passages given to the composer" in text
    assert "dense #" in text and "lexical #" in text and "Checks" in text

    # "Share in channel" posts the same answer for everyone and removes the private one
    share = h.sender.action(ACTION_SHARE, turn_id, user=USER, channel=CHANNEL,
                            response_url=standin.response_url("share"), ephemeral=True)
    assert share.status == 200
    h.drain()
    shared = [c for c in standin.calls("response_url") if c.path == "/response/share"]
    assert [c.params.get("response_type") for c in shared] == ["in_channel", None]
    assert shared[1].params["delete_original"] is True
    assert f"<@{USER}> shared" in block_text(shared[0].params["blocks"])
    assert f"turn `{turn_id}`" in block_text(shared[0].params["blocks"])


@pytest.mark.slow
def test_slash_help_is_the_ack_itself(standin, start_bot, examples_store):
    h = start_bot(examples_store, slash_command="/citebot")
    delivery = h.sender.command("help", user=USER, channel=CHANNEL, response_url=standin.response_url(),
                                command="/citebot")
    assert delivery.status == 200
    body = delivery.json()
    assert body["response_type"] == "ephemeral"
    assert "`/citebot why`" in block_text(body["blocks"])
    h.drain()
    assert standin.calls("response_url") == [] and "answerer" not in h.components.__dict__


def test_command_parsing_and_mention_stripping():
    assert parse_command("  ").kind == "help" and parse_command("HELP").kind == "help"
    assert parse_command("why").kind == "why" and parse_command("why?").argument == ""
    assert parse_command("why t-0123456789ab").argument == "t-0123456789ab"
    assert parse_command("why does the train leave on Tuesdays?").kind == "question"
    assert clean_question(f"<@{BOT_USER_ID}> what about <#C123|general> &amp; <!here> "
                          "<https://x.example/a|the docs> &lt;3?") == "what about & the docs <3?"


# -- threads, DMs, bots -------------------------------------------------------------------
@pytest.mark.slow
def test_a_thread_follow_up_uses_the_threads_context(standin, start_bot, examples_store):
    h = start_bot(examples_store)
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
def test_a_follow_up_after_a_restart_reads_the_thread_back(standin, start_bot, examples_store):
    first_bot = start_bot(examples_store)
    first = mention(standin, QUESTION)
    first_bot.sender.event(first)
    first_bot.drain()
    one_answer(standin, first)

    restarted = start_bot(examples_store)  # a new process: empty in-process state
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
def test_threads_citebot_has_not_answered_in_are_left_alone(standin, start_bot, examples_store):
    h = start_bot(examples_store)
    root = standin.user_message(CHANNEL, "UBOB", "Lunch plans?")
    reply = standin.user_message(CHANNEL, USER, "What about the release train?", thread_ts=root["ts"])
    h.sender.event(reply)
    h.drain()
    assert standin.calls("conversations.replies")  # it looked
    assert standin.calls("chat.postMessage") == []  # and stayed quiet


@pytest.mark.slow
def test_own_and_other_bots_messages_are_ignored(standin, start_bot, examples_store):
    h = start_bot(examples_store)
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
def test_a_direct_message_is_answered_in_the_dm(standin, start_bot, examples_store):
    h = start_bot(examples_store)
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
def test_asking_too_fast_gets_a_friendly_note(standin, start_bot, examples_store):
    h = start_bot(examples_store, rate_limit_per_minute=1)
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


# -- no silent failures -------------------------------------------------------------------
@pytest.mark.slow
def test_search_down_gives_a_visible_error_with_the_turn_id(standin, start_bot):
    h = start_bot()  # the configured store is empty: search cannot answer
    event = mention(standin, QUESTION)
    h.sender.event(event)
    h.drain()
    message, turn_id = one_answer(standin, event)
    text = block_text(message["blocks"])
    assert text.startswith("Sorry — I could not answer this: the store is empty")
    assert f"turn {turn_id}" in text and f"turn `{turn_id}`" in text
    assert h.components.turnlog.get_turn(turn_id)["error"].startswith("the store is empty")


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_redis_down_gives_a_visible_error_with_the_turn_id(standin, start_bot, examples_store):
    h = start_bot(examples_store, redis_url=f"redis://127.0.0.1:{_closed_port()}/0")
    event = mention(standin, QUESTION)
    assert h.sender.event(event).status == 200
    h.drain()
    message, turn_id = one_answer(standin, event)
    text = block_text(message["blocks"])
    assert text.startswith("Sorry — something went wrong while answering") and turn_id in text


@pytest.mark.slow
def test_slack_refusing_the_update_still_delivers_the_answer(standin, start_bot, examples_store):
    h = start_bot(examples_store)
    standin.fail("chat.update", "cant_update_message")
    event = mention(standin, QUESTION)
    h.sender.event(event)
    h.drain()
    placeholder, answer = posts_in_thread(standin, CHANNEL, event["ts"])
    assert "Looking through" in placeholder.params["text"]
    assert "Release Train" in block_text(answer.params["blocks"])
    assert len(standin.calls("chat.delete")) == 1  # the stale placeholder was removed
    (remaining,) = bot_replies(standin, CHANNEL, event["ts"])
    assert "Release Train" in block_text(remaining["blocks"])


# -- feedback and the turn log -------------------------------------------------------------
@pytest.mark.slow
def test_a_feedback_click_lands_in_the_turn_log(standin, start_bot, examples_store):
    h = start_bot(examples_store)
    event = mention(standin, QUESTION)
    h.sender.event(event)
    h.drain()
    message, turn_id = one_answer(standin, event)
    actions = buttons(message["blocks"])
    for action_id, who in ((ACTION_FEEDBACK_UP, "UBOB"), (ACTION_FEEDBACK_DOWN, "UCAROL")):
        click = h.sender.action(action_id, actions[action_id], user=who, channel=CHANNEL,
                                response_url=standin.response_url(), message_ts=message["ts"])
        assert click.status == 200
    h.drain()
    feedback = h.components.turnlog.get_turn(turn_id)["feedback"]
    assert [(f["user"], f["value"]) for f in feedback] == [("UBOB", "helpful"), ("UCAROL", "not_helpful")]
    thanks = standin.calls("response_url")
    assert len(thanks) == 2 and all(t.params["response_type"] == "ephemeral" for t in thanks)
    assert all(turn_id in t.params["text"] for t in thanks)


@pytest.mark.slow
def test_one_log_line_per_turn_with_context_and_no_secrets(standin, start_bot, examples_store):
    h = start_bot(examples_store)
    event = mention(standin, QUESTION)
    with capture_logs(processors=[structlog.contextvars.merge_contextvars]) as logs:
        h.sender.event(event)
        h.drain()
    _, turn_id = one_answer(standin, event)
    turns = [e for e in logs if e["event"] == "turn"]
    assert len(turns) == 1
    line = turns[0]
    assert line["turn_id"] == turn_id and line["channel"] == CHANNEL and line["thread"] == event["ts"]
    assert line["surface"] == "slack_mention" and line["timings_ms"]["total"] > 0
    dumped = json.dumps(logs, default=str)
    assert BOT_TOKEN not in dumped and SIGNING_SECRET not in dumped


# -- Redis: exactly once across replicas --------------------------------------------------
@pytest.mark.redis
@pytest.mark.slow
def test_two_bots_sharing_redis_answer_a_duplicated_event_once(standin, start_bot, examples_store,
                                                              redis_prefix):
    redis_url = real_redis_url()
    a = start_bot(examples_store, redis_url=redis_url, redis_prefix=redis_prefix)
    b = start_bot(examples_store, redis_url=redis_url, redis_prefix=redis_prefix)
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


@pytest.mark.redis
def test_claims_limits_and_last_turns_in_redis_and_in_process(redis_prefix):
    client = redis.Redis.from_url(real_redis_url())
    for deduper, limiter, recent in (
        (RedisDeduper(client, redis_prefix, ttl_s=60), RedisRateLimiter(client, 2, redis_prefix),
         RedisRecentTurns(client, redis_prefix)),
        (InProcessDeduper(ttl_s=60), InProcessRateLimiter(2), InProcessRecentTurns()),
    ):
        assert [deduper.claim("event:Ev1"), deduper.claim("event:Ev1"), deduper.claim("event:Ev2")] == [
            True, False, True]
        decisions = [limiter.check("UALICE") for _ in range(3)]
        assert [d.allowed for d in decisions] == [True, True, False]
        assert 1 <= decisions[2].retry_after_s <= 60 and limiter.check("UBOB").allowed
        assert recent.last("UALICE") is None
        recent.remember("UALICE", "t-1")
        recent.remember("UALICE", "t-2")
        assert recent.last("UALICE") == "t-2"
    assert 0 < client.ttl(f"{redis_prefix}seen:event:Ev1") <= 60
    client.close()


def test_an_in_process_claim_expires_after_its_ttl():
    deduper = InProcessDeduper(ttl_s=0.05, max_keys=3)
    assert deduper.claim("a") and not deduper.claim("a")
    time.sleep(0.06)
    assert deduper.claim("a")
    for key in "bcdef":
        assert deduper.claim(key)
    assert len(deduper) <= 3  # bounded: the oldest claims go first


@pytest.mark.redis
def test_redis_turn_log_round_trip(redis_prefix):
    client = redis.Redis.from_url(real_redis_url())
    log = RedisTurnLog(client, prefix=redis_prefix)
    record = TurnRecord(turn_id="t-00000000abcd", created_at="2025-01-02T03:04:05+00:00",
                        question="Où est le café?", condensed_query="café", user=USER, channel=CHANNEL,
                        surface="slack_mention", answer="Dans la cuisine [1].",
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
    assert 0 < client.ttl(f"{redis_prefix}turn:{record.turn_id}") <= 90 * 24 * 3600
    assert LoggedTurn.from_log(got).record == record
    assert RedisTurnLog(client, prefix=redis_prefix + "other:").get_turn(record.turn_id) is None
    client.close()


class ServeProcess:
    """A real `citebot serve --port 0` subprocess, its JSON log lines collected as they come."""

    def __init__(self, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "bot.cli", "serve", "--port", "0"], cwd=REPO,
                                     env=env, stderr=subprocess.PIPE, text=True)
        self.events: list[dict] = []
        self._seen = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            try:
                entry = json.loads(line)
            except ValueError:
                entry = {"event": "unparsed", "line": line}
            with self._seen:
                self.events.append(entry)
                self._seen.notify_all()

    def wait_for(self, event: str, timeout_s: float = 120.0) -> dict:
        with self._seen:
            ok = self._seen.wait_for(lambda: any(e.get("event") == event for e in self.events), timeout_s)
            assert ok, f"no {event!r} from citebot serve in {timeout_s} s: {self.events[-5:]}"
            return next(e for e in self.events if e.get("event") == event)

    def logged(self, event: str) -> list[dict]:
        with self._seen:
            return [e for e in self.events if e.get("event") == event]

    def stop(self) -> int:
        """SIGTERM: stop listening, let the work in progress finish, exit."""
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=60)


@pytest.mark.redis
@pytest.mark.slow
def test_two_citebot_serve_processes_sharing_redis_answer_once(standin, examples_store_dir, tmp_path,
                                                              redis_prefix):
    """Two real `citebot serve` processes, one Redis: a duplicated, retried event is answered once."""
    redis_url = real_redis_url()
    servers: list[ServeProcess] = []
    try:
        for n in range(2):
            store = tmp_path / f"store-{n}"
            shutil.copytree(examples_store_dir, store)
            env = {k: v for k, v in os.environ.items() if not k.startswith(("CITEBOT_", "SLACK_"))}
            env.update(CITEBOT_STORE=str(store), SLACK_BOT_TOKEN=BOT_TOKEN,
                       SLACK_SIGNING_SECRET=SIGNING_SECRET, CITEBOT_SLACK_API_URL=standin.api_url,
                       REDIS_URL=redis_url, CITEBOT_REDIS_PREFIX=redis_prefix, CITEBOT_LOG_FORMAT="json")
            servers.append(ServeProcess(env))
        senders = [SlackSender(f"http://127.0.0.1:{s.wait_for('slack_http_listening')['port']}/slack/events")
                   for s in servers]
        event = mention(standin, QUESTION)
        event_id = f"EvTWOPROC{uuid.uuid4().hex[:8]}"
        deliveries = [s.event(event, event_id=event_id, retry_num=r)
                      for s, r in zip(senders * 2, (None, None, 1, 2))]
        assert [d.status for d in deliveries] == [200] * 4
        assert max(d.elapsed_s for d in deliveries) < ACK_LIMIT_S
        standin.wait_for("chat.update", timeout_s=120)
        for s in servers:
            s.wait_for("warm_up_done")
        assert [s.stop() for s in servers] == [0, 0]
        one_answer(standin, event)
        assert len(standin.calls("chat.update")) == 1
        turn_lines = [e for s in servers for e in s.logged("turn")]
        assert len(turn_lines) == 1 and turn_lines[0]["channel"] == CHANNEL
        assert len([e for s in servers for e in s.logged("slack_duplicate_dropped")]) == 3
        for s in servers:
            assert all(BOT_TOKEN not in json.dumps(e) and SIGNING_SECRET not in json.dumps(e)
                       for e in s.events)
    finally:
        for s in servers:
            if s.proc.poll() is None:
                s.proc.kill()
                s.proc.wait()


# -- serving ------------------------------------------------------------------------------
@pytest.mark.slow
def test_url_verification_and_health(standin, start_bot, examples_store):
    h = start_bot(examples_store)
    body = json.dumps({"token": "x", "challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P",
                       "type": "url_verification"})
    delivery = h.sender.post(body, "application/json")
    assert delivery.status == 200 and b"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P" in delivery.body
    import urllib.request

    with urllib.request.urlopen(h.server.url.replace("/slack/events", "/healthz")) as r:
        assert r.status == 200 and r.read() == b"ok"


def test_serve_refuses_to_start_without_what_it_needs(standin):
    settings = load_settings(slack_api_url=standin.api_url)
    with pytest.raises(ConfigError, match="SLACK_BOT_TOKEN"):
        serve(Components(settings), port=0)
    settings = load_settings(slack_api_url=standin.api_url, slack_bot_token=BOT_TOKEN,
                             slack_signing_secret=SIGNING_SECRET)
    with pytest.raises(ConfigError, match="SLACK_APP_TOKEN"):
        serve(Components(settings), socket=True)
    settings = load_settings(slack_api_url=standin.api_url, slack_bot_token=BOT_TOKEN,
                             slack_app_token="xapp-1-not-accepted")
    with pytest.raises(ConfigError, match="Socket Mode connection .*invalid_auth"):
        serve(Components(settings), socket=True)
    assert standin.calls("apps.connections.open")  # it asked Slack, through the SDK
    settings = load_settings(slack_api_url=standin.api_url, slack_bot_token="xoxb-wrong")
    with pytest.raises(ConfigError, match="invalid_auth"):
        serve(Components(settings), port=0)
    settings = load_settings(slack_api_url=standin.api_url, slack_bot_token=BOT_TOKEN)
    with pytest.raises(ConfigError, match="SLACK_SIGNING_SECRET"):
        serve(Components(settings), port=0)


# -- rendering within Slack's limits ------------------------------------------------------
def _record(answer: str, **kw) -> TurnRecord:
    return TurnRecord(turn_id="t-0123456789ab", created_at="2025-01-01T00:00:00+00:00", question="q?",
                      condensed_query="q?", answer=answer, **kw)


def test_long_answers_split_cleanly_within_limits():
    paragraph = ("The Release Train leaves every other Tuesday [1]. " * 40).strip()
    answer = "\n\n".join([paragraph] * 60) + "\n\n" + "x" * 7000  # ~130,000 chars, one unbroken word
    passages = [{"number": n, "chunk_id": f"c{n}", "source": f"handbook/doc-{n}.md",
                 "heading_path": ["Part <A>", "R&D"], "page": str(n), "chars": 100} for n in range(1, 21)]
    messages = render_turn(_record(answer, passages=passages,
                                   citations=[{"marker": "[1]", "resolved": True, "retrieved": True}]))
    assert len(messages) > 1
    sections: list[str] = []
    for m in messages:
        blocks = m.block_dicts()
        assert len(blocks) <= MESSAGE_BLOCKS_MAX
        for b in blocks:
            if b["type"] == "section":
                assert len(b["text"]["text"]) <= SECTION_TEXT_MAX
                sections.append(b["text"]["text"])
    answer_sections = [s for s in sections if not s.startswith("*Sources*")]
    # nothing lost, nothing doubled: the same characters in order, whitespace aside
    assert "".join("".join(answer_sections).split()) == "".join(answer.split())
    assert " ".join(answer_sections[:60]).split() == " ".join([paragraph] * 60).split()
    assert all(s.endswith((".", "x")) for s in answer_sections[:-1])  # cut at sentence ends
    last = messages[-1].block_dicts()
    assert last[-1]["type"] == "actions" and "turn `t-0123456789ab`" in block_text(last)
    assert "Part &lt;A&gt; › R&amp;D, p. 1" in block_text(last)  # the cited source only
    assert "doc-2.md" not in block_text(last)


def test_source_text_is_escaped_and_entities_never_split():
    answer = "Use <b>bold</b> & \"quotes\" → a<b " + "&" * 5000
    (message,) = render_turn(_record(answer))
    text = block_text(message.block_dicts())
    assert "&lt;b&gt;bold&lt;/b&gt; &amp;" in text and "<b>" not in text
    for piece in split_text(escape("&" * 5000)):
        assert piece.replace("&amp;", "") == ""  # every piece holds whole entities
    assert escape("<@U123> <!channel>") == "&lt;@U123&gt; &lt;!channel&gt;"


@hyp_settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab .!?\n&<>")), max_size=9000),
       st.integers(min_value=20, max_value=3000))
def test_split_text_keeps_every_word_within_the_limit(text, limit):
    escaped = escape(text)
    pieces = split_text(escaped, limit)
    assert all(0 < len(p) <= limit for p in pieces)
    assert "".join("".join(pieces).split()) == "".join(escaped.split())  # every character, in order
    for p in pieces:
        tail = p[p.rfind("&"):] if "&" in p else ""
        assert not tail or tail.startswith(("&amp;", "&lt;", "&gt;"))


def test_errors_and_refusals_render_with_turn_ids():
    (err,) = render_turn(_record("Sorry — I could not answer this: boom (turn t-0123456789ab)",
                                 error="boom"))
    blocks = err.block_dicts()
    assert set(buttons(blocks)) == {ACTION_WHY} and "turn `t-0123456789ab`" in block_text(blocks)
    (ref,) = render_turn(_record("The collection does not cover this question.", refused=True,
                                 passages=[{"number": 1, "source": "a.md", "heading_path": []}]))
    text = block_text(ref.block_dicts())
    assert "not covered by the collection" in text and "*Sources*" not in text
    assert ACTION_FEEDBACK_UP in buttons(ref.block_dicts())


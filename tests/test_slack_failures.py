"""No silent failures: search, Redis or Slack down still ends every turn visibly, and the
one log line per turn carries its context and no secret."""

from __future__ import annotations

import json
import socket

import pytest
import structlog
from structlog.testing import capture_logs

from bot.testing.slack_standin import BOT_TOKEN, SIGNING_SECRET
from tests.slack_harness import (
    CHANNEL,
    QUESTION,
    block_text,
    bot_replies,
    mention,
    one_answer,
    posts_in_thread,
)


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
def test_redis_down_still_answers_with_the_turn_id(standin, start_bot, small_store):
    """Redis down: no thread context, no shared turn log, but the question is answered
    (it used to end in "Sorry — I could not answer this: cannot read … in Redis")."""
    h = start_bot(small_store, redis_url=f"redis://127.0.0.1:{_closed_port()}/0")
    event = mention(standin, QUESTION)
    with capture_logs(processors=[structlog.contextvars.merge_contextvars]) as logs:
        assert h.sender.event(event).status == 200
        h.drain()
    message, turn_id = one_answer(standin, event)
    text = block_text(message["blocks"])
    assert "Release Train" in text and not text.startswith("Sorry")
    assert turn_id in text
    (turn,) = [e for e in logs if e["event"] == "turn"]
    assert turn["turn_id"] == turn_id and turn["error"] is None
    assert any(e.startswith("conversation state read failed: cannot read") and "Redis" in e
               for e in turn["errors"])
    assert any(e.startswith("turn log write failed") for e in turn["errors"])


@pytest.mark.slow
def test_slack_refusing_the_update_still_delivers_the_answer(standin, start_bot, small_store):
    h = start_bot(small_store)
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

@pytest.mark.slow
def test_one_log_line_per_turn_with_context_and_no_secrets(standin, start_bot, small_store):
    h = start_bot(small_store)
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

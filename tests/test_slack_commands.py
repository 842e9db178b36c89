"""The slash command: acks in time, answers through response_url, help, why, share."""

from __future__ import annotations

import pytest

from bot.slack.inbound import clean_question, parse_command
from bot.slack.render import (
    ACTION_SHARE,
    ACTION_WHY,
)
from bot.testing.slack_standin import BOT_USER_ID
from tests.slack_harness import (
    ACK_LIMIT_S,
    CHANNEL,
    QUESTION,
    USER,
    block_text,
    buttons,
    feedback_buttons,
)


# -- the slash command --------------------------------------------------------------------
@pytest.mark.slow
def test_slash_command_acks_in_time_and_answers_through_response_url(standin, start_bot, small_store):
    h = start_bot(small_store)
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
    assert set(actions) == {ACTION_SHARE, ACTION_WHY}
    assert set(feedback_buttons(answer.params["blocks"])) == {"helpful", "not_helpful"}
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
def test_slash_help_is_the_ack_itself(standin, start_bot, small_store):
    h = start_bot(small_store, slash_command="/citebot")
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

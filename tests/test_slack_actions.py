"""Buttons: feedback into the turn log, and a share that Slack refuses."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from bot.slack.render import (
    ACTION_FEEDBACK,
    ACTION_FEEDBACK_DOWN,
    ACTION_FEEDBACK_UP,
    ACTION_SHARE,
    ACTION_WHY,
)
from tests.conftest import real_redis_url
from tests.slack_harness import (
    CHANNEL,
    QUESTION,
    USER,
    block_text,
    buttons,
    feedback_buttons,
    mention,
    one_answer,
)


# -- feedback and the turn log -------------------------------------------------------------
@pytest.mark.slow
def test_native_feedback_is_one_vote_per_person_recorded_without_a_message(standin, start_bot,
                                                                          small_store):
    h = start_bot(small_store)
    event = mention(standin, QUESTION)
    h.sender.event(event)
    h.drain()
    message, turn_id = one_answer(standin, event)
    votes = feedback_buttons(message["blocks"])
    clicks = [("UBOB", "helpful"), ("UCAROL", "not_helpful"), ("UBOB", "helpful"),  # a repeat
              ("UBOB", "not_helpful")]  # Bob changes his mind
    for who, vote in clicks:
        click = h.sender.action(ACTION_FEEDBACK, votes[vote], user=who, channel=CHANNEL,
                                response_url=standin.response_url(), message_ts=message["ts"])
        assert click.status == 200
        h.drain()
    feedback = h.components.turnlog.get_turn(turn_id)["feedback"]
    assert [(f["user"], f["value"]) for f in feedback] == [
        ("UBOB", "helpful"), ("UCAROL", "not_helpful"), ("UBOB", "not_helpful")]
    assert standin.calls("response_url") == [] and standin.calls("chat.postEphemeral") == []
    assert len(standin.calls("chat.postMessage")) == 1  # only the placeholder, ever
    why = h.sender.action(ACTION_WHY, turn_id, user=USER, channel=CHANNEL,
                          response_url=standin.response_url("why"))
    assert why.status == 200
    h.drain()
    assert "*Feedback:* 0 helpful, 2 not helpful" in block_text(standin.calls("response_url")[-1].params["blocks"])


@pytest.mark.slow
def test_a_vote_the_turn_log_cannot_take_is_said(standin, start_bot, small_store):
    h = start_bot(small_store)
    event = mention(standin, QUESTION)
    h.sender.event(event)
    h.drain()
    message, _ = one_answer(standin, event)

    def broken(*args, **kwargs):
        raise RuntimeError("turn log down")

    h.components.turnlog.add_feedback = broken
    h.sender.action(ACTION_FEEDBACK, feedback_buttons(message["blocks"])["helpful"], user="UBOB",
                    channel=CHANNEL, response_url=standin.response_url("vote"), message_ts=message["ts"])
    h.drain()
    (sorry,) = standin.calls("response_url")
    assert "couldn't record your feedback" in sorry.params["text"]


@pytest.mark.slow
def test_legacy_feedback_buttons_of_older_answers_still_land_in_the_turn_log(standin, start_bot,
                                                                            small_store):
    h = start_bot(small_store)
    event = mention(standin, QUESTION)
    h.sender.event(event)
    h.drain()
    message, turn_id = one_answer(standin, event)
    for action_id, who in ((ACTION_FEEDBACK_UP, "UBOB"), (ACTION_FEEDBACK_DOWN, "UCAROL")):
        click = h.sender.action(action_id, turn_id, user=who, channel=CHANNEL,
                                response_url=standin.response_url(), message_ts=message["ts"])
        assert click.status == 200
        h.drain()  # two clicks in flight at once land in either order (CI saw Carol's first)
    feedback = h.components.turnlog.get_turn(turn_id)["feedback"]
    assert [(f["user"], f["value"]) for f in feedback] == [("UBOB", "helpful"), ("UCAROL", "not_helpful")]
    thanks = standin.calls("response_url")
    assert len(thanks) == 2 and all(t.params["response_type"] == "ephemeral" for t in thanks)
    assert all(turn_id in t.params["text"] for t in thanks)


def test_a_share_that_slack_refuses_is_said_not_lost(standin, start_bot, small_store):
    h = start_bot(small_store)
    h.sender.command(QUESTION, user=USER, channel=CHANNEL, response_url=standin.response_url("ask"))
    h.drain()
    turn_id = buttons(standin.calls("response_url")[-1].params["blocks"])[ACTION_SHARE]
    standin.fail("response_url", "expired_url", times=5)
    share = h.sender.action(ACTION_SHARE, turn_id, user=USER, channel=CHANNEL,
                            response_url=standin.response_url("share"), ephemeral=True)
    assert share.status == 200
    h.drain()
    # the share was refused, so the private answer stays and the person is told, privately
    assert not [c for c in standin.calls("response_url") if c.params.get("delete_original")]
    (note,) = standin.calls("chat.postEphemeral")
    assert note.params["user"] == USER and note.params["channel"] == CHANNEL
    assert "was not shared" in note.params["text"] and turn_id in note.params["text"]


@pytest.mark.redis
@pytest.mark.slow
def test_native_votes_land_in_the_shared_turn_log_one_per_person_on_any_replica(
        standin, start_bot, small_store, redis_prefix):
    """Two replicas on one Redis: a person's second click changes their vote wherever it
    lands, a repeat is not recorded, an unknown value is ignored, and nothing is posted."""
    a = start_bot(small_store, redis_url=real_redis_url(), redis_prefix=redis_prefix)
    b = start_bot(small_store, redis_url=real_redis_url(), redis_prefix=redis_prefix)
    event = mention(standin, QUESTION)
    a.sender.event(event)
    a.drain()
    message, turn_id = one_answer(standin, event)
    votes = feedback_buttons(message["blocks"])
    clicks = [(a, "UBOB", votes["helpful"]), (b, "UBOB", votes["helpful"]),  # a repeat, elsewhere
              (b, "UCAROL", votes["helpful"]), (a, "UBOB", votes["not_helpful"]),  # Bob changes
              (b, "UCAROL", f"maybe:{turn_id}")]  # not a vote of ours
    for h, who, value in clicks:
        assert h.sender.action(ACTION_FEEDBACK, value, user=who, channel=CHANNEL,
                               response_url=standin.response_url(),
                               message_ts=message["ts"]).status == 200
        h.drain()
    feedback = b.components.turnlog.get_turn(turn_id)["feedback"]
    assert [(f["user"], f["value"]) for f in feedback] == [
        ("UBOB", "helpful"), ("UCAROL", "helpful"), ("UBOB", "not_helpful")]
    assert standin.calls("response_url") == [] and standin.calls("chat.postEphemeral") == []
    assert len(standin.calls("chat.postMessage")) == 1 and len(standin.calls("chat.update")) == 1


@pytest.mark.slow
def test_a_vote_on_a_turn_the_log_no_longer_holds_is_said_and_not_recorded(standin, start_bot,
                                                                          small_store):
    h = start_bot(small_store)
    gone = "t-00000000dead"
    click = h.sender.action(ACTION_FEEDBACK, f"helpful:{gone}", user="UBOB", channel=CHANNEL,
                            response_url=standin.response_url("vote"), message_ts="1.000001")
    assert click.status == 200
    h.drain()
    (note,) = standin.calls("response_url")
    assert "not in the turn log any more" in note.params["text"] and gone in note.params["text"]
    assert note.params["response_type"] == "ephemeral"
    h.components.turnlog.put_turn(gone, datetime.now(UTC).isoformat(), {"question": "q"})
    assert h.components.turnlog.get_turn(gone)["feedback"] == []  # no orphan vote was kept

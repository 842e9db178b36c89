"""The message shortcut through the real HTTP server: a question about someone's message,
cleaned as Slack wording, answered under that channel's scope to the asker alone in the
message's thread, with Share (the asker only, into that thread); refusals, a conversation
citebot cannot post in, and a turn that fails all end visibly.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.slack.render import ACTION_FEEDBACK, ACTION_SHARE
from bot.slack.shortcut import SHORTCUT_CALLBACK_ID
from bot.testing.slack_standin import BOT_ID, BOT_USER_ID
from tests.slack_harness import ACK_LIMIT_S, block_text, buttons, feedback_buttons

SCOPES = """\
[default]
sources = ["company/**"]

[channels.CENG]
sources = ["engineering/**", "company/**"]

[channels.COFF]
reply = "off"
"""
# Bob's words, as Slack delivers them: emphasis, a link, an emoji and filler around the question.
BOB_SAYS = ("*quick q*: how often does the <https://wiki.example.com/rt|Release Train> leave? "
            ":steam_locomotive: thanks!")
CLEANED = "how often does the Release Train leave?"


@pytest.fixture()
def scopes_file(tmp_path) -> Path:
    path = tmp_path / "scopes.toml"
    path.write_text(SCOPES, encoding="utf-8")
    return path


def message_of(event: dict) -> dict:
    """The message as a message_action payload carries it (no channel inside)."""
    return {k: v for k, v in event.items() if k not in ("channel", "channel_type", "event_ts")}


def use_shortcut(h, standin, message: dict, *, user: str = "UALICE", channel: str = "CENG",
                 name: str = "shortcut"):
    delivery = h.sender.shortcut(SHORTCUT_CALLBACK_ID, message, user=user, channel=channel,
                                 response_url=standin.response_url(name))
    assert delivery.status == 200 and delivery.elapsed_s < ACK_LIMIT_S
    assert not delivery.body.strip(), delivery.body  # the ack carries nothing: work runs after it
    h.drain()


def turn_sources(h, turn_id: str) -> set[str]:
    record = h.components.turnlog.get_turn(turn_id)
    return {c["source"] for c in record["candidates"]} | {p["source"] for p in record["passages"]}


@pytest.mark.slow
def test_the_shortcut_answers_the_asker_alone_in_the_messages_thread_with_share(
        standin, start_bot, small_store, scopes_file):
    h = start_bot(small_store, scopes=scopes_file)
    bob = standin.user_message("CENG", "UBOB", BOB_SAYS)
    use_shortcut(h, standin, message_of(bob))

    assert standin.calls("chat.postMessage") == []  # nothing anyone else sees
    progress, answer = standin.calls("chat.postEphemeral")
    for call in (progress, answer):
        assert (call.params["user"], call.params["channel"], call.params["thread_ts"]) == (
            "UALICE", "CENG", bob["ts"])
    assert "Looking through the collection" in progress.params["text"]
    turn_id = buttons(answer.params["blocks"])[ACTION_SHARE]
    assert f"turn `{turn_id}`" in block_text(answer.params["blocks"])
    record = h.components.turnlog.get_turn(turn_id)
    assert record["question"] == CLEANED and record["user"] == "UALICE"
    assert record["surface"] == "slack_shortcut" and record["scope"]["name"] == "channels.CENG"
    sources = turn_sources(h, turn_id)
    assert sources and all(s.startswith(("engineering/", "company/")) for s in sources), sources
    assert h.components.recent.last("UALICE") == turn_id  # `/ask why` and the Home tab know it

    # a vote on the private answer is recorded and acknowledged without a message
    vote = feedback_buttons(answer.params["blocks"])["helpful"]
    h.sender.action(ACTION_FEEDBACK, vote, user="UALICE", channel="CENG",
                    response_url=standin.response_url("vote"), ephemeral=True)
    h.drain()
    assert [(f["user"], f["value"]) for f in h.components.turnlog.get_turn(turn_id)["feedback"]] \
        == [("UALICE", "helpful")]
    assert standin.calls("response_url") == [] and len(standin.calls("chat.postEphemeral")) == 2

    # Bob may not share Alice's answer; Alice shares it into the thread of Bob's message
    h.sender.action(ACTION_SHARE, turn_id, user="UBOB", channel="CENG",
                    response_url=standin.response_url("share-bob"), ephemeral=True)
    h.drain()
    (refused,) = [c for c in standin.calls("response_url") if c.path == "/response/share-bob"]
    assert "Only the person who asked" in refused.params["text"]
    assert standin.calls("chat.postMessage") == []
    h.sender.action(ACTION_SHARE, turn_id, user="UALICE", channel="CENG",
                    response_url=standin.response_url("share-alice"), ephemeral=True)
    h.drain()
    (shared,) = standin.calls("chat.postMessage")
    assert shared.params["channel"] == "CENG" and shared.params["thread_ts"] == bob["ts"]
    text = block_text(shared.params["blocks"])
    assert "<@UALICE> shared an answer" in text and f"turn `{turn_id}`" in text
    assert ACTION_SHARE not in buttons(shared.params["blocks"])
    (deleted,) = [c for c in standin.calls("response_url") if c.path == "/response/share-alice"]
    assert deleted.params.get("delete_original") is True  # the private copy goes


@pytest.mark.slow
def test_a_reply_in_a_thread_is_answered_in_that_thread(standin, start_bot, small_store):
    h = start_bot(small_store)
    root = standin.user_message("CGENERAL", "UBOB", "Release train questions here")
    reply = standin.user_message("CGENERAL", "UBOB", "How long does the soak run?",
                                 thread_ts=root["ts"])
    use_shortcut(h, standin, message_of(reply), channel="CGENERAL")
    calls = standin.calls("chat.postEphemeral")
    assert len(calls) == 2 and {c.params["thread_ts"] for c in calls} == {root["ts"]}
    turn_id = buttons(calls[-1].params["blocks"])[ACTION_SHARE]
    assert h.components.turnlog.get_turn(turn_id)["question"] == "How long does the soak run?"


@pytest.mark.slow
def test_refusals_wordless_messages_and_our_own_answers_are_said_and_run_no_turn(standin, start_bot,
                                                                      small_store, scopes_file):
    h = start_bot(small_store, scopes=scopes_file)
    standin.shared_channels.add("CEXT")
    for channel in ("COFF", "CEXT"):
        use_shortcut(h, standin, message_of(standin.user_message(channel, "UBOB", BOB_SAYS)),
                     channel=channel)
    use_shortcut(h, standin, message_of(standin.user_message("CENG", "UBOB", ":tada:")))
    ours = {"type": "message", "user": BOT_USER_ID, "bot_id": BOT_ID, "ts": standin.next_ts(),
            "text": "The collection says: … (turn t-0123456789ab)"}
    use_shortcut(h, standin, ours, channel="CGENERAL")
    notices = {c.params["channel"]: c.params["text"] for c in standin.calls("chat.postEphemeral")}
    assert "does not answer in this channel" in notices["COFF"]
    assert "shared with another organisation" in notices["CEXT"]
    assert "no text I can look up" in notices["CENG"]
    assert "one of my own answers" in notices["CGENERAL"]
    assert "`/ask why t-0123456789ab`" in notices["CGENERAL"]
    assert len(standin.calls("chat.postEphemeral")) == 4  # no progress, no answer
    assert h.components.recent.last("UALICE") is None  # no turn ran


@pytest.mark.slow
def test_where_citebot_cannot_post_the_answer_comes_through_the_response_url(standin, start_bot,
                                                                            small_store):
    h = start_bot(small_store)
    message = standin.user_message("DBOBCAROL", "UBOB", BOB_SAYS, channel_type="im")
    standin.fail("chat.postEphemeral", "channel_not_found", times=5)
    use_shortcut(h, standin, message_of(message), channel="DBOBCAROL", name="dm")
    replies = [c for c in standin.calls("response_url") if c.path == "/response/dm"]
    assert len(replies) == 2 and all(r.params["response_type"] == "ephemeral" for r in replies)
    assert "Looking through the collection" in replies[0].params["text"]
    turn_id = buttons(replies[1].params["blocks"])[ACTION_SHARE]
    assert h.components.turnlog.get_turn(turn_id)["question"] == CLEANED


@pytest.mark.slow
def test_a_turn_that_cannot_run_ends_visibly_and_is_logged(standin, start_bot):
    h = start_bot()  # an empty store: the pipeline cannot be built
    use_shortcut(h, standin, message_of(standin.user_message("CGENERAL", "UBOB", BOB_SAYS)),
                 channel="CGENERAL")
    progress, failure = standin.calls("chat.postEphemeral")
    assert failure.params["thread_ts"] == progress.params["thread_ts"]
    assert "Sorry — I could not answer this" in failure.params["text"]
    assert "citebot ingest" in failure.params["text"]
    turn_id = h.components.recent.last("UALICE") or failure.params["text"].split("turn `")[1][:14]
    record = h.components.turnlog.get_turn(turn_id)
    assert record["surface"] == "slack_shortcut" and record["error"]

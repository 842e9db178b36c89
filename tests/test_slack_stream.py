"""Claude's answers streamed into Slack, through the real HTTP server, the Web API stand-in
and the Anthropic stand-in (spoken to through the official SDKs): a status first, then one
checked sentence per append, then sources, turn id and feedback controls on stopStream; the
placeholder path whenever a streaming call fails; nothing lost, one message per thread."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from bot.answer.prompt import CONDENSE_SYSTEM
from bot.slack.recall import TURN_EVENT
from bot.slack.render import ACTION_WHY, escape
from bot.slack.split import MARKDOWN_MAX
from bot.slack.stream import STATUS
from bot.testing import slack_streams
from bot.testing.anthropic_standin import (
    AnthropicStandIn,
    RecordedRequest,
    Reply,
    message,
    passages_in,
    running,
)
from bot.testing.slack_standin import SlackStandIn
from tests.slack_harness import (
    CHANNEL,
    FOLLOW_UP,
    QUESTION,
    USER,
    block_text,
    bot_replies,
    buttons,
    feedback_buttons,
    mention,
    posts_in_thread,
)

pytestmark = pytest.mark.slow

API_KEY = "sk-ant-test-0123456789abcdef"
INVENTED = "departs from platform nine and three quarters"
STREAM_CALLS = ("chat.startStream", "chat.appendStream", "chat.stopStream")


@pytest.fixture()
def anthropic() -> Iterator[AnthropicStandIn]:
    with running() as s:
        yield s


def first_sentence(request: RecordedRequest) -> str:
    """The opening words of passage [1], as a model reading the prompt would quote them."""
    text = passages_in(request)[1]
    span = re.search(r"[A-Za-z][A-Za-z ,']{30,80}[A-Za-z]", text)
    assert span, text[:200]
    return span.group(0)


def claude_answer(request: RecordedRequest) -> str:
    quote = first_sentence(request)
    return (f'The handbook puts it plainly: "{quote}" [1]. '
            f'The Train also "{INVENTED}" [1]. '
            "Changes that miss it wait for the next one [1].")


def start(start_bot, small_store, anthropic, **overrides):
    return start_bot(small_store, anthropic_api_key=API_KEY, anthropic_base_url=anthropic.base_url,
                     anthropic_timeout_s=5.0, anthropic_budget_s=10.0, **overrides)


def stream_text(call) -> str:
    return slack_streams.stream_text(call.params)


def ask(h, standin: SlackStandIn) -> tuple[dict, dict]:
    """A mention answered; (the one bot message in its thread, the logged turn)."""
    event = mention(standin, QUESTION)
    assert h.sender.event(event).status == 200
    h.drain()
    (reply,) = bot_replies(standin, CHANNEL, event["ts"])
    turn_id = buttons(reply["blocks"])[ACTION_WHY]
    return event | {"reply": reply}, h.components.turnlog.get_turn(turn_id)


def test_status_precedes_the_first_streamed_sentence_and_one_message_holds_the_answer(
        standin, start_bot, small_store, anthropic):
    h = start(start_bot, small_store, anthropic)
    anthropic.script(lambda r: message(claude_answer(r)))
    event, turn = ask(h, standin)
    reply = event["reply"]

    order = [c.method for c in standin.calls()
             if c.method in ("assistant.threads.setStatus", *STREAM_CALLS, "chat.postMessage")]
    assert order[0] == "assistant.threads.setStatus" and order[1] == "chat.startStream"
    assert order[-2:] == ["chat.stopStream", "assistant.threads.setStatus"]
    assert standin.statuses(CHANNEL, event["ts"]) == [STATUS, ""]  # shown, then cleared
    assert not posts_in_thread(standin, CHANNEL, event["ts"]), "no placeholder, no second message"
    (status_call,) = standin.calls("assistant.threads.setStatus")[:1]
    assert status_call.params["loading_messages"]

    start_call = standin.calls("chat.startStream")[0]
    assert start_call.params["thread_ts"] == event["ts"]
    assert start_call.params["recipient_user_id"] == USER and start_call.params["recipient_team_id"]
    # one checked sentence per call: the first two stream, the last comes with stopStream
    sent = [stream_text(c) for c in standin.calls() if c.method in STREAM_CALLS]
    assert len(sent) == 3 and sent[0].startswith("The handbook puts it plainly:")
    assert sent[1].strip().startswith("The Train also") and sent[2].strip().startswith("Changes")

    # the message: Claude's text in a markdown block, then sources, checks, turn id, feedback
    assert turn["composer"] == "claude" and turn["error"] is None
    assert reply["text"] == escape(turn["answer"]) == "".join(sent)
    assert reply["blocks"][0] == {"type": "markdown", "text": reply["text"]}
    text = block_text(reply["blocks"])
    assert "*Sources*" in text and f"turn `{turn['turn_id']}`" in text
    assert feedback_buttons(reply["blocks"])["helpful"] == f"helpful:{turn['turn_id']}"
    assert reply["blocks"][-1]["type"] == "context_actions"
    assert reply["metadata"]["event_type"] == TURN_EVENT
    assert reply["metadata"]["event_payload"]["turn_id"] == turn["turn_id"]
    assert "first_sentence" in turn["timings_ms"]  # recorded when a sentence went out early


def test_an_invented_quotation_is_flagged_in_the_very_append_that_shows_it(
        standin, start_bot, small_store, anthropic):
    h = start(start_bot, small_store, anthropic)
    anthropic.script(lambda r: Reply(**{**message(claude_answer(r)).__dict__, "chunk_chars": 3}))
    _, turn = ask(h, standin)
    sent = [stream_text(c) for c in standin.calls() if c.method in STREAM_CALLS]
    showing = [i for i, s in enumerate(sent) if "platform nine" in s]
    assert showing == [1], sent  # one call shows it: the second append of the stream
    assert "⚠️ [quote check failed: not found in passage [1]]" in sent[1]
    assert "⚠️" not in sent[0] and "⚠️" not in sent[2]  # the verified quotation is not flagged
    # the turn's whole-answer checks say the same as what was streamed
    (invented,) = [q for q in turn["quotes"] if not q["verified"]]
    assert invented["text"] == INVENTED
    assert sum(q["verified"] for q in turn["quotes"]) == 1


def test_a_failing_start_stream_falls_back_to_the_placeholder_path(
        standin, start_bot, small_store, anthropic):
    h = start(start_bot, small_store, anthropic)
    anthropic.script(lambda r: message(claude_answer(r)))
    standin.fail("chat.startStream", "not_allowed_token_type")
    event, turn = ask(h, standin)
    reply = event["reply"]
    assert not standin.calls("chat.appendStream") and not standin.calls("chat.stopStream")
    (posted,) = posts_in_thread(standin, CHANNEL, event["ts"])  # the answer, posted fresh
    assert posted.params["metadata"]["event_payload"]["turn_id"] == turn["turn_id"]
    # nothing lost: the whole checked answer, its flag, sources and feedback controls
    assert reply["blocks"][0] == {"type": "markdown", "text": escape(turn["answer"])}
    assert "⚠️ [quote check failed" in reply["blocks"][0]["text"] and INVENTED in reply["blocks"][0]["text"]
    assert "*Sources*" in block_text(reply["blocks"]) and feedback_buttons(reply["blocks"])


def test_a_failing_append_replaces_the_streamed_message_in_place(
        standin, start_bot, small_store, anthropic):
    h = start(start_bot, small_store, anthropic)
    anthropic.script(lambda r: message(claude_answer(r)))
    standin.fail("chat.appendStream", "message_not_in_streaming_state", times=5)
    event, turn = ask(h, standin)
    reply = event["reply"]
    (started,) = standin.calls("chat.startStream")
    (update,) = standin.calls("chat.update")
    assert reply["ts"] == update.params["ts"]  # the streamed message became the whole answer
    assert not posts_in_thread(standin, CHANNEL, event["ts"])
    assert reply["blocks"][0] == {"type": "markdown", "text": escape(turn["answer"])}
    assert reply["metadata"]["event_type"] == TURN_EVENT


def test_a_failing_stop_stream_replaces_the_streamed_message_with_the_whole_answer(
        standin, start_bot, small_store, anthropic):
    h = start(start_bot, small_store, anthropic)
    anthropic.script(lambda r: message(claude_answer(r)))
    standin.fail("chat.stopStream", "internal_error", times=3)
    event, turn = ask(h, standin)
    reply = event["reply"]
    assert len(standin.calls("chat.appendStream")) == 1  # the second sentence streamed
    (update,) = standin.calls("chat.update")
    assert reply["ts"] == update.params["ts"] == standin.calls("chat.appendStream")[0].params["ts"]
    assert reply["blocks"][0] == {"type": "markdown", "text": escape(turn["answer"])}
    assert feedback_buttons(reply["blocks"]) and reply["metadata"]["event_type"] == TURN_EVENT
    assert standin.statuses(CHANNEL, event["ts"])[-1] == ""


def test_a_refused_status_takes_the_placeholder_path(standin, start_bot, small_store, anthropic):
    h = start(start_bot, small_store, anthropic)
    anthropic.script(lambda r: message(claude_answer(r)))
    standin.fail("assistant.threads.setStatus", "missing_scope")
    event, turn = ask(h, standin)
    (placeholder,) = posts_in_thread(standin, CHANNEL, event["ts"])
    assert placeholder.params["metadata"]["event_type"] == "citebot_progress"
    assert not any(standin.calls(m) for m in STREAM_CALLS)
    assert event["reply"]["ts"] == standin.calls("chat.update")[0].params["ts"]
    assert event["reply"]["blocks"][0]["text"] == escape(turn["answer"])


def test_a_model_stream_that_breaks_midway_is_replaced_by_the_labelled_fallback(
        standin, start_bot, small_store, anthropic):
    h = start(start_bot, small_store, anthropic)
    def broken(request: RecordedRequest) -> Reply:  # dies once its first sentence is shown
        text = claude_answer(request)
        return Reply(**{**message(text).__dict__, "chunk_chars": 5,
                        "break_after": text.index("The Train") + 10})

    anthropic.script(broken)
    event, turn = ask(h, standin)
    assert len(anthropic.requests) == 1  # no second answer written after the first began
    (started,) = standin.calls("chat.startStream")
    assert stream_text(started).startswith("The handbook puts it plainly:")
    (update,) = standin.calls("chat.update")
    assert turn["composer"] == "extractive_fallback" and "overloaded" in turn["label"]
    reply = event["reply"]
    assert reply["ts"] == update.params["ts"]  # the streamed message, replaced in place
    assert block_text(reply["blocks"]).startswith("The collection says:")
    assert escape(turn["label"]) in block_text(reply["blocks"])
    assert not posts_in_thread(standin, CHANNEL, event["ts"])


def test_a_refusal_is_never_streamed_before_it_is_known(standin, start_bot, small_store, anthropic):
    h = start(start_bot, small_store, anthropic)
    anthropic.script(message("NOT_COVERED: the passages [1] and [2] discuss trains. Not this [1]. No."))
    event, turn = ask(h, standin)
    assert turn["refused"] and turn["refusal_stage"] == "model"
    sent = [stream_text(c) for c in standin.calls() if c.method in STREAM_CALLS]
    assert sent == [escape(turn["answer"]), ""]  # the refusal, whole, at the end
    assert "NOT_COVERED" not in sent[0]


def test_an_answer_over_12000_characters_streams_into_messages_within_the_limit(
        standin, start_bot, small_store, anthropic):
    h = start(start_bot, small_store, anthropic)
    sentence = "The Release Train is a fixed fortnightly release of fleet software [1]. "
    anthropic.script(message(sentence * 260, output_tokens=4000))  # about 18,500 characters
    event = mention(standin, QUESTION)
    h.sender.event(event)
    h.drain()
    replies = bot_replies(standin, CHANNEL, event["ts"])
    assert len(replies) == 2
    assert all(len(r["text"]) <= MARKDOWN_MAX for r in replies)
    assert all(len(stream_text(c)) <= MARKDOWN_MAX for c in standin.calls() if c.method in STREAM_CALLS)
    assert replies[0]["text"].endswith("[1].") and replies[1]["text"].lstrip().startswith("The Release")
    assert "".join(r["text"] for r in replies) == escape(sentence * 260)
    assert ACTION_WHY in buttons(replies[1]["blocks"]) and ACTION_WHY not in buttons(replies[0]["blocks"])


def test_the_slash_command_keeps_response_url_with_a_markdown_block(
        standin, start_bot, small_store, anthropic):
    h = start(start_bot, small_store, anthropic)
    anthropic.script(lambda r: message(claude_answer(r)))
    h.sender.command(QUESTION, user=USER, channel=CHANNEL, response_url=standin.response_url("ask-1"))
    h.drain()
    (answer,) = standin.calls("response_url")
    assert answer.params["blocks"][1]["type"] == "markdown" and INVENTED in answer.params["blocks"][1]["text"]
    assert not any(standin.calls(m) for m in (*STREAM_CALLS, "assistant.threads.setStatus"))


def test_a_follow_up_after_a_restart_reads_the_streamed_answer_back(
        standin, start_bot, small_store, anthropic):
    def model(request: RecordedRequest) -> Reply:
        if request.system == CONDENSE_SYSTEM:
            return message("How long does the Release Train soak run?")
        return message(claude_answer(request))

    anthropic.always(model)
    first, first_turn = ask(start(start_bot, small_store, anthropic), standin)
    restarted = start(start_bot, small_store, anthropic)  # a new process: empty state
    reply = standin.user_message(CHANNEL, USER, FOLLOW_UP, thread_ts=first["ts"])
    restarted.sender.event(reply)
    restarted.drain()
    (condense,) = [r for r in anthropic.requests if r.system == CONDENSE_SYSTEM]
    assert QUESTION in condense.user_text and "platform nine" in condense.user_text
    replies = bot_replies(standin, CHANNEL, first["ts"])
    assert len(replies) == 2 and all(r["metadata"]["event_type"] == TURN_EVENT for r in replies)
    second = restarted.components.turnlog.get_turn(buttons(replies[1]["blocks"])[ACTION_WHY])
    assert second["surface"] == "slack_thread" and second["turn_id"] != first_turn["turn_id"]

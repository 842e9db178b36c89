"""A streamed answer's stages as task updates, and its sources as URL sources, through the
real HTTP server, the Web API stand-in and the Anthropic stand-in: the stages ride on the
stream's own calls; where Slack refuses task chunks the answer still arrives once, the
refusal is logged once, and later turns name the stage with setStatus instead."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import structlog
from structlog.testing import capture_logs

from bot.slack.stream import STATUS
from bot.slack.tasks import CHECK, CHECKING_STATUS, SEARCH
from bot.testing.anthropic_standin import AnthropicStandIn, message, running
from bot.testing.slack_agent_standin import tasks_sent
from tests.slack_harness import CHANNEL, block_text, bot_replies
from tests.test_slack_stream import STREAM_CALLS, ask, claude_answer, start

pytestmark = pytest.mark.slow

WIKI = "https://wiki.example.com/{path}"


@pytest.fixture()
def anthropic() -> Iterator[AnthropicStandIn]:
    with running() as s:
        yield s


def test_stages_and_url_sources_ride_on_the_streams_own_calls(standin, start_bot, small_store, anthropic):
    h = start(start_bot, small_store, anthropic, source_url=WIKI)
    anthropic.script(lambda r: message(claude_answer(r)))
    event, turn = ask(h, standin)
    calls = [c for c in standin.calls() if c.method in STREAM_CALLS]
    assert [c.method for c in calls] == ["chat.startStream", "chat.appendStream", "chat.stopStream"]
    first, last = tasks_sent(calls[:1]), tasks_sent(calls[2:])
    assert [(t["id"], t["status"]) for t in first] == [(SEARCH, "complete"), (CHECK, "in_progress")]
    (checked,) = last
    assert checked["id"] == CHECK and checked["status"] == "complete"
    assert checked["output"] == "1 check flagged"  # the invented quotation
    sources = checked["sources"]
    cited = {p["source"] for p in turn["passages"]}
    assert sources and all(s["type"] == "url" and s["url"].startswith("https://wiki.example.com/")
                           for s in sources)
    assert {s["text"].split(" — ")[0] for s in sources} <= cited
    # the final message still lists the sources, with the same links
    text = block_text(event["reply"]["blocks"])
    assert "*Sources*" in text and all(s["url"].split("#")[0] in text for s in sources)
    assert standin.statuses(CHANNEL, event["ts"]) == [STATUS, ""]


@pytest.mark.parametrize("error", ["invalid_chunks", "not_allowed"])
def test_refused_task_chunks_cost_one_fallback_then_the_status_names_the_stage(
        standin, start_bot, small_store, anthropic, error):
    standin.agent.refuse["task_update"] = error
    h = start(start_bot, small_store, anthropic)
    anthropic.always(lambda r: message(claude_answer(r)))
    with capture_logs(processors=[structlog.contextvars.merge_contextvars]) as logs:
        first, turn = ask(h, standin)
        second, turn2 = ask(h, standin)
    for event, record in ((first, turn), (second, turn2)):  # each answered once, whole
        (reply,) = bot_replies(standin, CHANNEL, event["ts"])
        assert record["answer"] and record["turn_id"] in block_text(reply["blocks"])
    refused = [e for e in logs if e["event"] == "slack_method_refused"]
    assert [(e["method"], e["error"]) for e in refused] == [("chat.stream task chunks", error)]
    # the second turn carried no task chunks, and its status named the checking stage
    later = [c for c in standin.calls() if c.method in STREAM_CALLS
             and c.params.get("thread_ts", second["ts"]) == second["ts"]][-3:]
    assert tasks_sent(later) == []
    assert standin.statuses(CHANNEL, second["ts"]) == [STATUS, CHECKING_STATUS, ""]

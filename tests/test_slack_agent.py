"""Slack's agent surface through the real HTTP server and the Web API stand-in: opening the
DM greets with suggested prompts drawn from the person's scope, a DM thread's first
question titles it, app_context_changed scopes a DM answer as the viewed channel only
where the person is a member, and a refused method costs nothing but one log line.
Context is kept in this process or in the real Redis (CITEBOT_TEST_REDIS_URL)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import structlog
from structlog.testing import capture_logs

from bot.slack.agent import PROMPTS_MAX, TITLE_MAX, prompt, thread_title, topic
from bot.slack.render import ACTION_WHY
from bot.testing.slack_agent_standin import context_changed_event, thread_started_event
from tests.conftest import real_redis_url
from tests.slack_harness import bot_replies, buttons

pytestmark = pytest.mark.slow

SCOPES = """\
[default]
sources = ["**/company/**"]

[channels.CPEOPLE]
sources = ["**/people/**"]

[channels.CDARK]
sources = ["**/people/**"]
reply = "off"

[channels.GSECRET]
sources = ["**/people/**"]

[users.UHR]
sources = ["**/people/**", "**/company/**"]
"""
PEOPLE_QUESTION = "What happens in the calibration meetings Marcus Hale runs?"
DM = "DAGENT"


@pytest.fixture()
def scopes_file(tmp_path) -> Path:
    path = tmp_path / "scopes.toml"
    path.write_text(SCOPES, encoding="utf-8")
    return path


def prompt_calls(standin, channel: str) -> list:
    return [c for c in standin.calls("assistant.threads.setSuggestedPrompts")
            if c.params["channel_id"] == channel]


def dm_question(h, standin, user: str, text: str, thread_ts: str, channel: str = DM) -> dict:
    """A question in a DM thread, answered; the logged turn."""
    event = standin.user_message(channel, user, text, thread_ts=thread_ts, channel_type="im")
    assert h.sender.event(event).status == 200
    h.drain()
    replies = bot_replies(standin, channel, thread_ts)
    turn_id = buttons(replies[-1]["blocks"])[ACTION_WHY]
    return h.components.turnlog.get_turn(turn_id)


def cited(record: dict) -> set[str]:
    return {p["source"] for p in record["passages"]}


def test_opening_the_dm_suggests_prompts_from_the_persons_own_scope(
        standin, start_bot, small_store, scopes_file):
    h = start_bot(small_store, scopes=scopes_file)
    allowed = {"UHR": ("people/", "company/"), "UBOB": ("company/",)}
    documents = sorted(small_store.document_hashes())
    for user, folders in allowed.items():
        channel = f"D{user}"
        assert h.sender.home_opened(user, channel=channel, tab="messages").status == 200
        h.drain()
        (call,) = prompt_calls(standin, channel)
        assert "thread_ts" not in call.params  # the agent DM itself, not a thread
        prompts = call.params["prompts"]
        assert 1 <= len(prompts) <= PROMPTS_MAX
        for p in prompts:  # every prompt is a document this person's DM may read
            matches = [d for d in documents if prompt(d.split("/")[-2] + "/", d.split("/")[-1]) == p]
            assert matches and all(any(f in d for f in folders) for d in matches), (user, p)
    people = [p for p in prompt_calls(standin, "DUHR")[0].params["prompts"] if "people" in p["title"]]
    assert people  # HR's own table reaches people/; Bob's prompts never name it
    assert not [p for p in prompt_calls(standin, "DUBOB")[0].params["prompts"] if "people" in p["title"]]
    # the Home tab is the Home tab: no prompts there
    h.sender.home_opened("UBOB", channel="DUBOB", tab="home")
    h.drain()
    assert len(prompt_calls(standin, "DUBOB")) == 1 and standin.home.of("UBOB")


def test_the_older_assistant_surface_greets_each_new_thread(standin, start_bot, small_store, scopes_file):
    h = start_bot(small_store, scopes=scopes_file)
    root = standin.next_ts()
    h.sender.event(thread_started_event("UHR", DM, root, viewing="CPEOPLE"))
    h.drain()
    (call,) = prompt_calls(standin, DM)
    assert call.params["thread_ts"] == root and call.params["prompts"]


def test_a_dm_threads_first_question_titles_it_once(standin, start_bot, small_store):
    h = start_bot(small_store)
    root = standin.next_ts()
    long_question = "How often does the Release Train leave, " + "and what happens to late changes " * 5
    dm_question(h, standin, "UALICE", long_question, root)
    dm_question(h, standin, "UALICE", "And how long does its soak run?", root)
    (title,) = standin.calls("assistant.threads.setTitle")
    assert title.params["thread_ts"] == root
    assert standin.agent.titles[(DM, root)] == thread_title(long_question)
    assert len(thread_title(long_question)) <= TITLE_MAX and thread_title(long_question).endswith("…")
    assert topic("engineering/release-train.md") == "release train"


def test_a_dm_answers_as_the_viewed_channel_only_where_the_person_is_a_member(
        standin, start_bot, small_store, scopes_file):
    standin.agent.members["CPEOPLE"] = ["UALICE"]
    standin.agent.members["CDARK"] = ["UALICE"]
    standin.agent.hidden.add("GSECRET")
    h = start_bot(small_store, scopes=scopes_file)
    cases = [("UALICE", "CPEOPLE", "channels.CPEOPLE"),  # a member: the channel's scope
             ("UBOB", "CPEOPLE", "default"),             # not a member: the DM's own
             ("UALICE", "CDARK", "default"),             # citebot is off there
             ("UALICE", "GSECRET", "default"),           # private, citebot not in it
             ("UALICE", None, "default")]                # looking at nothing in particular
    for user, viewing, scope in cases:
        h.sender.event(context_changed_event(user, f"D{user}", viewing))
        h.drain()
        record = dm_question(h, standin, user, PEOPLE_QUESTION, standin.next_ts(), channel=f"D{user}")
        assert record["scope"]["name"] == scope, (user, viewing, record["scope"])
        if scope == "channels.CPEOPLE":
            assert cited(record) and all("people/" in s for s in cited(record))
        else:
            assert all("company/" in s for s in cited(record)), (user, viewing)


def test_the_viewed_channel_is_shared_by_replicas_through_redis(
        standin, start_bot, small_store, scopes_file, redis_prefix):
    standin.agent.members["CPEOPLE"] = ["UALICE"]
    settings = {"scopes": scopes_file, "redis_url": real_redis_url(), "redis_prefix": redis_prefix}
    a, b = start_bot(small_store, **settings), start_bot(small_store, **settings)
    a.sender.event(context_changed_event("UALICE", "DUALICE", "CPEOPLE"))
    a.drain()
    root = standin.next_ts()
    record = dm_question(b, standin, "UALICE", PEOPLE_QUESTION, root, channel="DUALICE")
    assert record["scope"]["name"] == "channels.CPEOPLE"
    dm_question(a, standin, "UALICE", "And who joins them?", root, channel="DUALICE")
    assert len(standin.calls("assistant.threads.setTitle")) == 1  # one title across replicas
    # an older thread's own context wins over the person's latest view
    started = standin.next_ts()
    b.sender.event(thread_started_event("UALICE", "DUALICE", started, viewing="CGENERAL"))
    b.drain()
    record = dm_question(a, standin, "UALICE", PEOPLE_QUESTION, started, channel="DUALICE")
    assert record["scope"]["name"] == "default"


@pytest.mark.parametrize("error", ["not_allowed", "missing_scope", "unknown_method"])
def test_refused_agent_methods_are_logged_once_and_the_answer_still_arrives(
        standin, start_bot, small_store, error):
    for method in ("assistant.threads.setSuggestedPrompts", "assistant.threads.setTitle",
                   "assistant.threads.setStatus", "conversations.members"):
        standin.agent.refuse[method] = error
    h = start_bot(small_store)
    with capture_logs(processors=[structlog.contextvars.merge_contextvars]) as logs:
        for _ in range(2):
            h.sender.home_opened("UALICE", channel="DUALICE", tab="messages")
            h.drain()
            record = dm_question(h, standin, "UALICE", "How often does the Release Train leave?",
                                 standin.next_ts(), channel="DUALICE")
            assert "Release Train" in record["answer"]
    refused = [e for e in logs if e["event"] == "slack_method_refused"]
    assert sorted(e["method"] for e in refused) == ["assistant.threads.setSuggestedPrompts",
                                                    "assistant.threads.setTitle"]
    assert all(e["error"] == error for e in refused)
    assert len(standin.calls("assistant.threads.setSuggestedPrompts")) == 1  # not asked again


@pytest.mark.parametrize("event", [
    {"type": "app_context_changed", "user": "UALICE", "context": {"entities": 5}},
    {"type": "app_context_changed", "user": "UALICE", "context": {"entities": ["x", {"type": 3}]}},
    {"type": "app_context_changed", "user": "UALICE", "context": {"entities": [
        {"type": "slack#/types/channel_id", "value": "<@U1> " + "x" * 5000}]}},
    {"type": "app_context_changed", "user": {"id": "UALICE"}, "context": "CPEOPLE"},
    {"type": "assistant_thread_started", "assistant_thread": "DAGENT"},
    {"type": "assistant_thread_started", "assistant_thread": {"user_id": 1, "channel_id": [],
                                                              "thread_ts": None}},
    {"type": "assistant_thread_context_changed", "assistant_thread": {"channel_id": "DAGENT",
                                                                      "thread_ts": {}}},
])
def test_malformed_agent_events_are_acked_and_change_nothing(standin, start_bot, small_store,
                                                             scopes_file, event, caplog):
    standin.agent.members["CPEOPLE"] = ["UALICE"]
    h = start_bot(small_store, scopes=scopes_file)
    with capture_logs() as logs:
        assert h.sender.event(event).status == 200
        h.drain()
    assert not [e for e in logs if e.get("log_level") in ("error", "critical")], logs
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]  # Bolt's own log
    assert standin.calls("assistant.threads.setSuggestedPrompts") == []
    record = dm_question(h, standin, "UALICE", PEOPLE_QUESTION, standin.next_ts(), channel="DUALICE")
    assert record["scope"]["name"] == "default"  # nothing viewed was taken from them

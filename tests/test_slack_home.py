"""The Home tab through the real HTTP server: what it says a person's scope covers (and
nothing outside it), how to ask, their own latest turns only, and failures (the store, the
turn log, a malformed record, a views.publish Slack refuses) said or logged, never a crash.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from bot.metrics import value
from bot.slack.render import ACTION_WHY
from bot.slack.shortcut import SHORTCUT_NAME
from tests.conftest import real_redis_url
from tests.slack_harness import QUESTION, block_text, buttons, mention, one_answer

SCOPES = """\
[default]
sources = ["company/**"]

[channels.CENG]
sources = ["engineering/**", "company/**"]

[channels.CPEOPLE]
sources = ["people/**"]

[users.UHR]
sources = ["people/**"]
"""
FOLDERS = ("company/", "engineering/", "operations/", "people/")
TURN_ID = re.compile(r"\bt-[0-9a-f]{12}\b")


@pytest.fixture()
def scopes_file(tmp_path) -> Path:
    path = tmp_path / "scopes.toml"
    path.write_text(SCOPES, encoding="utf-8")
    return path


def home_text(standin, user: str) -> str:
    view = standin.home.of(user)
    assert view is not None, f"no Home tab was published for {user}"
    assert view["type"] == "home"
    return block_text(view["blocks"])


def documents_in(store, folder: str) -> int:
    return sum(1 for s in store.document_hashes() if s.startswith(folder))


def failures(part: str) -> float:
    return value("citebot_home_failures_total", part=part)


def ask_a_few(h, standin) -> dict[str, list[str]]:
    """Alice asks in #eng and with /ask in #people; Bob asks in #general: turn ids by person."""
    alice = mention(standin, "What are the company values?", channel="CENG", user="UALICE")
    bob = mention(standin, QUESTION, channel="CGENERAL", user="UBOB")
    for event in (alice, bob):
        assert h.sender.event(event).status == 200
    h.sender.command("Who runs the calibration meetings?", user="UALICE", channel="CPEOPLE",
                     response_url=standin.response_url("ask-people"))
    h.drain()
    command_reply = [c for c in standin.calls("response_url") if c.path == "/response/ask-people"]
    return {"UALICE": [one_answer(standin, alice)[1],
                       buttons(command_reply[-1].params["blocks"])[ACTION_WHY]],
            "UBOB": [one_answer(standin, bob)[1]]}


@pytest.mark.slow
def test_the_home_tab_shows_the_persons_scope_and_their_own_turns_only(standin, start_bot,
                                                                      small_store, scopes_file):
    h = start_bot(small_store, scopes=scopes_file)
    turns = ask_a_few(h, standin)
    for user, channel in (("UALICE", "DALICE"), ("UHR", "DHR")):
        assert h.sender.home_opened(user, channel=channel).status == 200
    h.drain()
    assert {c.params["user_id"] for c in standin.calls("views.publish")} == {"UALICE", "UHR"}

    alice = home_text(standin, "UALICE")  # [default]: company/ only
    assert documents_in(small_store, "company/") == 7
    assert "*7 documents*" in alice
    first = min(s for s in small_store.document_hashes() if s.startswith("company/"))
    assert f"`company/` — 7 documents: {first.removeprefix('company/')}" in alice
    assert not [f for f in FOLDERS if f != "company/" and f in alice], alice
    assert all(t in alice for t in turns["UALICE"]), alice  # her turns, with their ids
    assert turns["UBOB"][0] not in alice  # never anyone else's
    assert "<#CENG>" in alice and "`/ask` in <#CPEOPLE>" in alice
    assert "What are the company values?" in alice
    for way in ("Mention me", "Message me", "/ask", SHORTCUT_NAME, "why"):
        assert way in alice

    hr = home_text(standin, "UHR")  # [users.UHR]: people/ only, no turns yet
    assert f"*{documents_in(small_store, 'people/')} documents*" in hr
    assert "Your direct messages with me" in hr
    assert not [f for f in FOLDERS if f != "people/" and f in hr], hr
    assert "None yet" in hr and not TURN_ID.search(hr)


@pytest.mark.slow
def test_the_messages_tab_publishes_nothing(standin, start_bot, small_store):
    h = start_bot(small_store)
    assert h.sender.home_opened("UALICE", tab="messages").status == 200
    h.drain()
    assert standin.calls("views.publish") == []


@pytest.mark.slow
def test_a_refused_views_publish_is_logged_and_counted_not_a_crash(standin, start_bot,
                                                                   small_store):
    h = start_bot(small_store)
    before = failures("publish")
    standin.fail("views.publish", "invalid_blocks")
    with capture_logs() as logs:
        assert h.sender.home_opened("UALICE").status == 200
        h.drain()
    assert standin.home.of("UALICE") is None
    assert failures("publish") == before + 1
    assert [e for e in logs if e["event"] == "home_publish_failed"
            and e["error"] == "invalid_blocks"], logs
    assert h.sender.home_opened("UALICE").status == 200  # the next opening works
    h.drain()
    assert "What I cover here" in home_text(standin, "UALICE")


@pytest.mark.slow
def test_bad_or_missing_data_is_said_in_the_view_and_counted(standin, start_bot, small_store):
    h = start_bot(small_store)
    event = mention(standin, QUESTION, user="UALICE")
    h.sender.event(event)
    h.drain()
    _, good = one_answer(standin, event)
    now = datetime.now(UTC).isoformat()
    log = h.components.turnlog
    log.put_turn("t-0000000bad01", now, {"question": "no condensed query", "user": "UALICE"})
    log.put_turn("t-0000000b0b01", now, {**log.get_turn(good), "user": "UBOB",
                                          "question": "Bob's question"})
    for listed in ("t-0000000b0b01", "t-0000000gone", "t-0000000bad01"):
        h.components.recent.remember("UALICE", listed)  # another's, expired, malformed

    def broken(*args, **kwargs):
        raise RuntimeError("store unreachable")

    h.components.store.document_hashes = broken
    turns_before, coverage_before = failures("turns"), failures("coverage")
    assert h.sender.home_opened("UALICE").status == 200
    h.drain()
    text = home_text(standin, "UALICE")
    assert "can't read the collection right now" in text
    assert good in text and "1 more I can't read back" in text
    assert "t-0000000b0b01" not in text and "Bob's question" not in text
    assert "t-0000000gone" not in text
    assert (failures("turns"), failures("coverage")) == (turns_before + 1, coverage_before + 1)


@pytest.mark.redis
@pytest.mark.slow
def test_the_home_tab_reads_recent_turns_from_redis(standin, start_bot, small_store, redis_prefix):
    h = start_bot(small_store, redis_url=real_redis_url(), redis_prefix=redis_prefix)
    events = [mention(standin, q, user="UALICE") for q in (QUESTION, "What are the company values?")]
    for event in events:  # one at a time: the pool may finish two concurrent turns in either order
        h.sender.event(event)
        h.drain()
    ids = [one_answer(standin, e)[1] for e in events]
    assert h.components.recent.recent("UALICE", 5) == ids[::-1]  # newest first
    h.sender.home_opened("UALICE")
    h.drain()
    text = home_text(standin, "UALICE")
    assert text.index(ids[1]) < text.index(ids[0])
    assert f"*{len(small_store.document_hashes())} documents*" in text  # no scopes file: all

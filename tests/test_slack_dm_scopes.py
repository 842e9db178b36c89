"""A person's [users] table covers only their own DM with citebot, through the real HTTP
server and the Web API stand-in: `/ask` and the message shortcut in a DM or group DM with
other people are answered under that conversation's scope (its table, else [default]), and
Share posts an answer only where the conversation's scope covers every source it was
written from (a scopes file narrowed since the answer: refused, politely, to the asker).

Globs are written "**/people/**" so they hold whether sources are named relative to the
ingested folder or to the repository (as in tests/test_slack_scopes.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.slack.render import ACTION_SHARE
from bot.slack.scopes import load_scopes
from bot.slack.shortcut import SHORTCUT_CALLBACK_ID
from tests.slack_harness import block_text, buttons

pytestmark = pytest.mark.slow

SCOPES = """\
[default]
sources = ["**/company/**"]

[users.UHR]
sources = ["**/people/**", "**/company/**"]
"""
NARROWED = """\
[default]
sources = ["**/company/**"]
"""
# Only people/ pages name calibration meetings: under [default] no people/ page is read.
PEOPLE_QUESTION = "What happens in the calibration meetings Marcus Hale runs?"
HR_DM = "DHR"  # citebot's own DM with UHR
HR_BOB_DM = "DHRBOB"  # a DM between UHR and UBOB: citebot is not in it
HR_BOB_GROUP = "GHRBOBCAROL"  # a group DM (mpim) of UHR, UBOB and UCAROL, citebot invited


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture()
def scopes_file(tmp_path) -> Path:
    return write(tmp_path, "scopes.toml", SCOPES)


def turn_sources(h, turn_id: str) -> set[str]:
    record = h.components.turnlog.get_turn(turn_id)
    return {c["source"] for c in record["candidates"]} | {p["source"] for p in record["passages"]}


def ask(h, standin, channel: str, name: str, *, user: str = "UHR") -> tuple[str, dict]:
    """`/ask` in a conversation; (turn id, the logged turn)."""
    assert h.sender.command(PEOPLE_QUESTION, user=user, channel=channel,
                            response_url=standin.response_url(name)).status == 200
    h.drain()
    (answer,) = [c for c in standin.calls("response_url") if c.path == f"/response/{name}"]
    turn_id = buttons(answer.params["blocks"])[ACTION_SHARE]
    return turn_id, h.components.turnlog.get_turn(turn_id)


def share(h, standin, turn_id: str, channel: str, name: str, *, user: str = "UHR") -> list:
    """Share clicked; what reached that response_url (the post, then the private copy's delete)."""
    h.sender.action(ACTION_SHARE, turn_id, user=user, channel=channel,
                    response_url=standin.response_url(name), ephemeral=True)
    h.drain()
    return [c for c in standin.calls("response_url") if c.path == f"/response/{name}"]


def test_ask_in_a_dm_or_group_dm_with_others_uses_that_conversations_scope(
        standin, start_bot, small_store, scopes_file):
    standin.ims[HR_DM] = "UHR"
    h = start_bot(small_store, scopes=scopes_file)
    for channel in (HR_BOB_DM, HR_BOB_GROUP):
        turn_id, record = ask(h, standin, channel, channel)
        assert record["scope"]["name"] == "default", (channel, record["scope"])
        sources = turn_sources(h, turn_id)
        assert sources and all("company/" in s for s in sources), (channel, sources)
        posted, _ = share(h, standin, turn_id, channel, f"share-{channel}")
        assert posted.params["response_type"] == "in_channel"  # what the others see
        assert "people/" not in block_text(posted.params["blocks"])
    # the same person in their own DM with citebot: their table
    turn_id, record = ask(h, standin, HR_DM, "own")
    assert record["scope"]["name"] == "users.UHR"
    assert any("people/" in s for s in turn_sources(h, turn_id))
    posted, _ = share(h, standin, turn_id, HR_DM, "share-own")
    assert posted.params["response_type"] == "in_channel"  # only they and citebot are there
    # someone else's DM is never taken for theirs, whoever's table it is
    standin.ims["DBOB"] = "UBOB"
    _, record = ask(h, standin, "DBOB", "not-theirs")
    assert record["scope"]["name"] == "default"


def test_the_shortcut_in_a_dm_with_others_uses_that_conversations_scope(
        standin, start_bot, small_store, scopes_file):
    standin.ims[HR_DM] = "UHR"
    h = start_bot(small_store, scopes=scopes_file)
    bob = standin.user_message(HR_BOB_DM, "UBOB", PEOPLE_QUESTION, channel_type="im")
    message = {k: v for k, v in bob.items() if k not in ("channel", "channel_type", "event_ts")}
    standin.fail("chat.postEphemeral", "channel_not_found", times=5)  # citebot is not in it
    h.sender.shortcut(SHORTCUT_CALLBACK_ID, message, user="UHR", channel=HR_BOB_DM,
                      response_url=standin.response_url("shortcut"))
    h.drain()
    replies = [c for c in standin.calls("response_url") if c.path == "/response/shortcut"]
    turn_id = buttons(replies[-1].params["blocks"])[ACTION_SHARE]
    record = h.components.turnlog.get_turn(turn_id)
    assert record["scope"]["name"] == "default"
    assert all("company/" in s for s in turn_sources(h, turn_id))
    assert "people/" not in block_text(replies[-1].params["blocks"])


def test_share_is_refused_where_the_conversations_scope_does_not_cover_the_answer(
        standin, start_bot, small_store, scopes_file, tmp_path):
    standin.ims[HR_DM] = "UHR"
    h = start_bot(small_store, scopes=scopes_file)
    turn_id, record = ask(h, standin, HR_DM, "own")
    assert record["scope"]["name"] == "users.UHR"
    # the admin narrows the scopes file and citebot restarts: the old answer, still in its
    # private copy, cites people/ pages this DM may no longer read
    narrowed = start_bot(small_store, scopes=write(tmp_path, "narrowed.toml", NARROWED))
    (refused,) = share(narrowed, standin, turn_id, HR_DM, "share-after")
    assert refused.params.get("response_type") != "in_channel"
    assert "this conversation may not read" in refused.params["text"]
    assert refused.params.get("delete_original") is not True  # the private copy stays
    assert standin.calls("chat.postMessage") == []


def test_a_user_table_needs_the_persons_own_dm(scopes_file):
    scopes = load_scopes(scopes_file)
    assert scopes.for_channel(HR_DM, "UHR", own_dm=True).scope.name == "users.UHR"
    assert scopes.for_channel(HR_BOB_DM, "UHR") == scopes.default
    assert scopes.for_channel(HR_BOB_GROUP, "UHR", own_dm=True) == scopes.default  # not a D…
    assert scopes.user_table_may_apply(HR_BOB_DM, "UHR")
    assert not scopes.user_table_may_apply(HR_BOB_DM, "UBOB")  # no table: nothing to ask

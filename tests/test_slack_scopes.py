"""Per-channel scopes through the real HTTP server: what each channel, DM and Slack Connect
channel is answered from, reply modes, who may see why a turn said what it did or share
it, and a scopes file that cannot be used stopping the start with its line and the fix.

Globs are written "**/people/**" so they hold whether sources are named relative to the
ingested folder ("people/…") or to the repository ("examples/handbook/people/…").
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.slack.render import ACTION_SHARE, ACTION_WHY
from bot.slack.scopes import load_scopes
from search.errors import ConfigError
from tests.slack_harness import block_text, buttons, mention, one_answer

SCOPES = """\
# who may read what
[default]
sources = ["**/company/**"]

[channels.CENG]
sources = ["**/engineering/**", "**/company/**"]

[channels.CPEOPLE]
sources = ["**/people/**"]
reply = "ephemeral"

[channels.COFF]
reply = "off"

[channels.CPARTNER]
sources = ["**/company/**"]
shared = true

[users.UHR]
sources = ["**/people/**"]
"""
# Only people/ pages name Marcus Hale and calibration meetings (and company/welcome.md
# names Hale once): under any other scope the question must not reach a people/ page.
PEOPLE_QUESTION = "What happens in the calibration meetings Marcus Hale runs?"


@pytest.fixture()
def scopes_file(tmp_path) -> Path:
    path = tmp_path / "scopes.toml"
    path.write_text(SCOPES, encoding="utf-8")
    return path


def turn_sources(h, turn_id: str) -> set[str]:
    """Every source the turn retrieved or gave the composer, from the turn log."""
    record = h.components.turnlog.get_turn(turn_id)
    return {c["source"] for c in record["candidates"]} | {p["source"] for p in record["passages"]}


def in_folder(sources: set[str], *folders: str) -> bool:
    return all(any(f"{folder}/" in s for folder in folders) for s in sources)


@pytest.mark.slow
def test_each_channel_is_answered_from_its_own_sources_only(standin, start_bot, small_store,
                                                            scopes_file):
    h = start_bot(small_store, scopes=scopes_file)
    eng = mention(standin, PEOPLE_QUESTION, channel="CENG")
    general = mention(standin, PEOPLE_QUESTION, channel="CGENERAL")
    for event in (eng, general):
        assert h.sender.event(event).status == 200
    h.drain()

    _, eng_turn = one_answer(standin, eng)
    sources = turn_sources(h, eng_turn)
    assert sources and in_folder(sources, "engineering", "company"), sources
    record = h.components.turnlog.get_turn(eng_turn)
    assert record["scope"] == {"name": "channels.CENG",
                               "sources": ["**/engineering/**", "**/company/**"]}
    assert "brandvold" not in record["support"].get("missing", [])
    assert "calibration" in record["support"]["missing"]  # a people/ word: absent for the gate

    message, general_turn = one_answer(standin, general)
    general_sources = turn_sources(h, general_turn)
    assert general_sources and in_folder(general_sources, "company"), general_sources
    assert "people/" not in block_text(message["blocks"])


@pytest.mark.slow
def test_an_ephemeral_channel_answers_the_asker_only_with_a_share_button(standin, start_bot,
                                                                         small_store, scopes_file):
    h = start_bot(small_store, scopes=scopes_file)
    event = mention(standin, PEOPLE_QUESTION, channel="CPEOPLE", user="UALICE")
    h.sender.event(event)
    h.drain()
    assert standin.calls("chat.postMessage") == []  # nothing in the channel, no placeholder
    (private,) = standin.calls("chat.postEphemeral")
    assert private.params["user"] == "UALICE" and private.params["thread_ts"] == event["ts"]
    turn_id = buttons(private.params["blocks"])[ACTION_SHARE]
    assert in_folder(turn_sources(h, turn_id), "people")
    assert "Calibration" in block_text(private.params["blocks"]) or "calibration" in block_text(
        private.params["blocks"])
    assert h.components.turnlog.get_turn(turn_id)["surface"] == "slack_ephemeral"

    # someone else in the channel may neither see why it said that nor share it
    why = h.sender.command(f"why {turn_id}", user="UBOB", channel="CPEOPLE",
                           response_url=standin.response_url("why-bob"))
    share = h.sender.action(ACTION_SHARE, turn_id, user="UBOB", channel="CPEOPLE",
                            response_url=standin.response_url("share-bob"), ephemeral=True)
    assert why.status == share.status == 200
    h.drain()
    replies = {c.path: c.params["text"] for c in standin.calls("response_url")}
    assert "asked by someone else" in replies["/response/why-bob"]
    assert "Only the person who asked" in replies["/response/share-bob"]
    assert standin.calls("chat.postMessage") == []
    # the asker may, in the channel where it was asked
    h.sender.action(ACTION_SHARE, turn_id, user="UALICE", channel="CPEOPLE",
                    response_url=standin.response_url("share-alice"), ephemeral=True)
    h.drain()
    shared = [c for c in standin.calls("response_url") if c.path == "/response/share-alice"]
    assert shared[0].params["response_type"] == "in_channel"


@pytest.mark.slow
def test_off_channels_and_slack_connect_channels_say_why_and_answer_nothing(standin, start_bot,
                                                                           small_store, scopes_file):
    h = start_bot(small_store, scopes=scopes_file)
    off = mention(standin, PEOPLE_QUESTION, channel="COFF")
    external = mention(standin, PEOPLE_QUESTION, channel="CGENERAL")
    partner = mention(standin, "What are the company values?", channel="CPARTNER")
    h.sender.event(off)
    h.sender.event(external, shared=True)
    h.sender.event(partner, shared=True)  # shared = true: answered
    standin.shared_channels.add("CEXT")
    h.sender.command(PEOPLE_QUESTION, user="UALICE", channel="CEXT",
                     response_url=standin.response_url("ext"))
    h.drain()
    notices = {c.params["channel"]: c.params["text"] for c in standin.calls("chat.postEphemeral")}
    assert "does not answer in this channel" in notices["COFF"]
    assert "shared with another organisation" in notices["CGENERAL"]
    (ext,) = [c for c in standin.calls("response_url") if c.path == "/response/ext"]
    assert "shared with another organisation" in ext.params["text"]
    assert {c.params["channel"] for c in standin.calls("chat.postMessage")} == {"CPARTNER"}
    _, turn_id = one_answer(standin, partner)
    assert in_folder(turn_sources(h, turn_id), "company")
    assert not [t for t in (h.components.turnlog.get_turn(c.params.get("text", "")) for c in
                            standin.calls("chat.postEphemeral")) if t]  # no turn ran for a refusal


@pytest.mark.slow
def test_dms_use_the_default_scope_unless_the_user_has_a_table(standin, start_bot, small_store,
                                                               scopes_file):
    h = start_bot(small_store, scopes=scopes_file)
    for user, channel in (("UHR", "DHR"), ("UALICE", "DALICE")):
        event = standin.user_message(channel, user, PEOPLE_QUESTION, channel_type="im")
        h.sender.event(event)
    h.drain()
    turns = {}
    for channel in ("DHR", "DALICE"):
        (answer,) = [m for m in standin.messages(channel) if m.get("bot_id")]
        turns[channel] = buttons(answer["blocks"])[ACTION_WHY]
    assert in_folder(turn_sources(h, turns["DHR"]), "people")
    assert in_folder(turn_sources(h, turns["DALICE"]), "company")
    assert h.components.turnlog.get_turn(turns["DHR"])["scope"]["name"] == "users.UHR"


@pytest.mark.slow
def test_why_is_open_to_the_channel_of_a_public_answer_and_closed_elsewhere(standin, start_bot,
                                                                            small_store, scopes_file):
    h = start_bot(small_store, scopes=scopes_file)
    event = mention(standin, "What are the company values?", channel="CENG", user="UALICE")
    h.sender.event(event)
    h.drain()
    _, turn_id = one_answer(standin, event)
    for user, channel, name in (("UBOB", "CENG", "same-channel"), ("UBOB", "CGENERAL", "elsewhere"),
                                ("UALICE", "CGENERAL", "owner")):
        h.sender.command(f"why {turn_id}", user=user, channel=channel,
                         response_url=standin.response_url(name))
    h.drain()
    replies = {c.path: block_text(c.params["blocks"]) for c in standin.calls("response_url")}
    assert f"Why turn `{turn_id}`" in replies["/response/same-channel"]
    assert f"Why turn `{turn_id}`" in replies["/response/owner"]
    assert "asked by someone else" in replies["/response/elsewhere"]


# -- the scopes file ---------------------------------------------------------------------------
@pytest.mark.parametrize(("text", "line", "words"), [
    ('[default]\nsources = ["**"]\n\n[channels.C0ENG]\nsources = ["a/**"]\nreply = "threads"\n',
     6, ['reply = \'threads\' is not one of thread, ephemeral, off', 'fix: reply = "thread"']),
    ('[default]\nsources = ["**"]\n[channels."#general"]\nsources = ["a/**"]\n',
     3, ["is not a channel ID", "by ID"]),
    ('[default]\nsources = "**"\n', 2, ["sources is a string, not a list", 'fix: sources = ["**"]']),
    ('[default]\nsources = ["**"]\n[channels.C0ENG]\nsource = ["a/**"]\n',
     4, ["unknown key 'source'", "use only name, reply, shared, sources"]),
    ('[default]\nsources = ["**"]\n[users.U0HR]\nreply = "off"\n', 4, ["unknown key 'reply'"]),
    ('[default]\nsources = ["**"]\n[channels.C0X]\nsources = ["/srv/docs/**"]\n', 4,
     ["not a source path as citations show it"]),
    ('[default]\nsources = [**]\n', 2, ["not valid TOML", "line 2"]),
])
def test_a_bad_scopes_file_names_the_line_and_the_fix(tmp_path, text, line, words):
    path = tmp_path / "scopes.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        load_scopes(path)
    message = str(err.value)
    assert message.startswith("bad setting: CITEBOT_SCOPES: ") and str(path) in message
    assert f"line {line}" in message, message
    for w in words:
        assert w in message, message


def test_a_scopes_file_without_a_default_says_what_to_add(tmp_path):
    path = tmp_path / "scopes.toml"
    path.write_text('[channels.C0ENG]\nsources = ["a/**"]\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r'no \[default\] table.*sources = \["\*\*"\]'):
        load_scopes(path)


def test_a_bad_scopes_file_stops_the_bot_at_start(standin, start_bot, tmp_path):
    path = tmp_path / "scopes.toml"
    path.write_text('[default]\nsources = ["**"]\nreply = "loud"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match="line 3"):
        start_bot(scopes=path)
    assert standin.calls("auth.test") == []  # it stopped before talking to Slack


def test_a_channel_table_inherits_what_it_does_not_say(scopes_file):
    scopes = load_scopes(scopes_file)
    off = scopes.for_channel("COFF")
    assert off.reply == "off" and off.scope.globs == ("**/company/**",)
    assert scopes.for_channel("CPEOPLE").reply == "ephemeral"
    assert scopes.for_channel("CUNKNOWN") == scopes.default
    assert scopes.for_channel("DHR", "UHR", own_dm=True).scope.name == "users.UHR"
    assert scopes.for_channel("DHR", "UHR") == scopes.default  # not known to be citebot's DM
    assert scopes.for_channel("CGENERAL", "UHR") == scopes.default  # user tables are for DMs

"""Correctly signed bodies of a shape Slack never sends get 400 from citebot's server,
before Bolt reads them (bot/slack/shape.py), with a log line saying what is wrong; Bolt's
middleware answered several of them with 500. Slack's own shapes still pass."""

from __future__ import annotations

import json
import urllib.parse

import pytest
from structlog.testing import capture_logs

from bot.slack.shape import problem
from bot.testing.slack_sender import SlackSender
from tests.slack_harness import CHANNEL, QUESTION, USER, mention
from tests.test_slack_hostile import raw_post, signed_headers

EVENT = {"type": "app_mention", "user": USER, "text": "hi", "ts": "1.1", "channel": CHANNEL}
ACTION = {"action_id": "citebot_why", "value": "t-0123456789ab"}


def _json(body: object) -> tuple[bytes, str]:
    return json.dumps(body).encode(), "application/json"


def _payload(body: object) -> tuple[bytes, str]:
    return urllib.parse.urlencode({"payload": json.dumps(body)}).encode(), "application/x-www-form-urlencoded"


def _callback(**fields: object) -> tuple[bytes, str]:
    return _json({"type": "event_callback", "event_id": "Ev1", **fields})


MALFORMED = {
    # each of these got 500 from Bolt's middleware
    "event is a string": _callback(event="x"),
    "event is null": _callback(event=None),
    "event is a list": _callback(event=[1]),
    "event is a number": _callback(event=5),
    "actions is null": _payload({"type": "block_actions", "actions": None}),
    "actions is a string": _payload({"type": "block_actions", "actions": "x"}),
    "an action is a string": _payload({"type": "block_actions", "actions": ["x"]}),
    "an action is null": _payload({"type": "block_actions", "actions": [None]}),
    "an action has no action_id": _payload({"type": "block_actions", "actions": [{}]}),
    "an action_id is a number": _payload({"type": "block_actions", "actions": [{"action_id": 5}]}),
    "team is a string": _payload({"type": "block_actions", "team": "x", "actions": [ACTION]}),
    "enterprise is a string": _payload({"type": "block_actions", "enterprise": "x", "actions": [ACTION]}),
    "container is a string": _payload({"type": "block_actions", "container": "x", "actions": [ACTION]}),
    "is_enterprise_install is a string": _payload({"type": "block_actions", "is_enterprise_install": "x",
                                                   "actions": [ACTION]}),
    "view is a string": _payload({"type": "view_submission", "view": "x"}),
    "view is null": _payload({"type": "view_submission", "view": None}),
    "view callback_id is a number": _payload({"type": "view_submission", "view": {"callback_id": 5}}),
    "block_suggestion action_id is a number": _payload({"type": "block_suggestion", "action_id": 5}),
    # these reached the listeners (200) and failed there, or got Bolt's 404
    "event text is a number": _callback(event={**EVENT, "text": 5}),
    "event channel is an object": _callback(event={**EVENT, "channel": {"id": CHANNEL}}),
    "event user is an object": _callback(event={**EVENT, "user": {"id": USER}}),
    "event ts is an object": _callback(event={**EVENT, "ts": {"a": 1}}),
    "event has no type": _callback(event={"user": USER}),
    "event type is a number": _callback(event={"type": 5}),
    "event_id is an object": _json({"type": "event_callback", "event": EVENT, "event_id": {"a": 1}}),
    "user is a string": _payload({"type": "block_actions", "user": "x", "actions": [ACTION]}),
    "type is missing": _json({"event": EVENT}),
    "type is a number": _json({"type": 5, "event": EVENT}),
    "type is null": _json({"type": None}),
    "payload has no type": _payload({"actions": [ACTION]}),
    "body is a list": _json([1, 2]),
    "body is a string": _json("x"),
    "body is null": _json(None),
    "payload is a list": _payload([1]),
    "payload is null": _payload(None),
    "authorizations is a string": _callback(event=EVENT, authorizations="x"),
}


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_each_malformed_shape_is_named(name):
    body, content_type = MALFORMED[name]
    assert problem(body, content_type), name


def test_slack_shapes_pass():
    sender = SlackSender("http://127.0.0.1:1/slack/events")
    assert problem(sender.envelope(EVENT).encode(), "application/json") is None
    block_actions = {"type": "block_actions", "user": {"id": USER, "team_id": "T1"}, "team": {"id": "T1"},
                     "enterprise": None, "is_enterprise_install": False, "channel": {"id": CHANNEL},
                     "container": {"type": "message", "message_ts": "1.1", "channel_id": CHANNEL},
                     "actions": [ACTION], "response_url": "https://hooks.slack.com/x", "trigger_id": "1.2"}
    assert problem(*_payload(block_actions)) is None
    command = urllib.parse.urlencode({"command": "/ask", "text": "why", "user_id": USER}).encode()
    assert problem(command, "application/x-www-form-urlencoded") is None
    assert problem(*_json({"type": "url_verification", "challenge": "abc"})) is None
    assert problem(*_callback(event={"type": "reaction_added", "item": {"channel": CHANNEL}})) is None


@pytest.mark.slow
def test_each_malformed_shape_gets_a_400_and_a_log_line(standin, start_bot, small_store):
    h = start_bot(small_store)
    with capture_logs() as logs:
        statuses = {name: raw_post(h.server.url, body, signed_headers(body, content_type)).status
                    for name, (body, content_type) in MALFORMED.items()}
        # and a well-formed mention after them all is answered
        ok = h.sender.event(mention(standin, QUESTION))
        h.drain()
    assert {n: s for n, s in statuses.items() if s != 400} == {}
    refused = [e for e in logs if e["event"] == "slack_request_malformed"]
    assert len(refused) == len(MALFORMED) and all(e["problem"] and e["status"] == 400 for e in refused)
    assert ok.status == 200
    assert not [e for e in logs if e["event"] in ("slack_handler_failed", "slack_turn_failed")]

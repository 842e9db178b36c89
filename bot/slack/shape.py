"""The shape of a signed Slack request body, checked before Bolt reads it.

Bolt's middleware trusts the shape: `"event": "x"`, `"actions": null` or `"team": "x"` in
a correctly signed body raised inside it and came back as HTTP 500 (or, past the ack, as
a listener that failed on `"text": 5`). Slack's own bodies are objects whose `type` is a
string and whose nested parts are objects; `problem` says what in a body is not, and the
server refuses it with 400 (bot.slack.server.guarded) before Bolt sees it. The body is
parsed exactly as Bolt parses it (its `parse_body`), so both read the same thing.

Only what Bolt and citebot read is checked: unknown keys pass, and only the keys Slack
does send as null (`"enterprise": null` in every non-Grid payload) may be null.
"""

from __future__ import annotations

from typing import Any

from slack_bolt.request.internals import extract_content_type, parse_body

# Top-level keys Slack sends as null (outside Enterprise Grid, or with no channel); any
# other key below that is present must hold its kind, never null.
_NULLABLE = (
    "enterprise",
    "enterprise_id",
    "context_enterprise_id",
    "context_team_id",
    "team",
    "team_id",
    "channel",
    "is_enterprise_install",
    "is_ext_shared_channel",
    "container",
    "response_url",
    "trigger_id",
)
# Keys whose value, when present, is an object (Bolt reads `.get` on them).
_OBJECTS = (
    "team",
    "enterprise",
    "user",
    "channel",
    "container",
    "view",
    "message",
    "previous_message",
    "item",
    "assistant_thread",
    "function_data",
    "state",
    "authed_user",
)
# Keys whose value, when present, is a string (ids, tokens, urls, text).
_STRINGS = (
    "type",
    "team_id",
    "enterprise_id",
    "user_id",
    "channel_id",
    "event_id",
    "api_app_id",
    "token",
    "trigger_id",
    "response_url",
    "callback_id",
    "action_id",
    "block_id",
    "challenge",
    "command",
    "text",
    "message_ts",
    "context_team_id",
    "context_enterprise_id",
)
# Keys whose value, when present, is a list of objects.
_LISTS = ("authorizations", "actions", "response_urls")
_BOOLS = ("is_enterprise_install", "is_ext_shared_channel")
# Inside an event citebot handles, these are strings.
_EVENT_STRINGS = (
    "type",
    "user",
    "channel",
    "text",
    "ts",
    "thread_ts",
    "event_ts",
    "channel_type",
    "subtype",
    "bot_id",
    "team",
    "user_team",
    "tab",
)
# Of those, what Slack may send as null, or citebot reads as "" when null (the others it
# reads as strings: `"channel": null` would fail the listener after the ack).
_EVENT_NULLABLE = ("text", "thread_ts", "event_ts", "channel_type", "subtype", "bot_id", "team", "user_team", "tab")
# Inside the objects of _OBJECTS and _LISTS (team.id, view.callback_id, authorizations[].team_id...),
# these are strings or null.
_NESTED_STRINGS = (
    "id",
    "team_id",
    "enterprise_id",
    "callback_id",
    "app_installed_team_id",
    "ts",
    "thread_ts",
    "text",
    "user",
    "message_ts",
    "channel_id",
)
_EVENTS_HANDLED = ("app_mention", "message", "app_home_opened")


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {
        dict: "an object",
        list: "a list",
        str: "a string",
        bool: "a boolean",
        int: "a number",
        float: "a number",
    }.get(type(value), type(value).__name__)


def _absent(obj: dict, key: str, nullable: tuple[str, ...]) -> bool:
    return key not in obj or (obj[key] is None and key in nullable)


def _strings(where: str, obj: dict, keys: tuple[str, ...], nullable: tuple[str, ...] = ()) -> str | None:
    for key in keys:
        if _absent(obj, key, nullable):
            continue
        value = obj[key]
        if not isinstance(value, str):
            return f"{where}{key!r} is {_kind(value)}, not a string"
    return None


def problem(body: bytes, content_type: str | None) -> str | None:
    """What makes a signed body one Slack never sends, or None when its shape is Slack's."""
    try:
        text = body.decode("utf-8")
        kind = extract_content_type({"content-type": [content_type or ""]})
        data = parse_body(text, kind)
    except ValueError as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        return f"unreadable body ({type(exc).__name__})"
    # Bolt's own rule: JSON by its type or a leading "{", else a form with or without a payload
    form = kind != "application/json" and not text.startswith("{") and "payload" not in text
    return shape_problem(data, form=form)


def shape_problem(data: Any, *, form: bool = False) -> str | None:
    """What is wrong with a parsed body (`form`: a slash command's form, which has no
    `type`), or None."""
    if not isinstance(data, dict):
        return f"the body is {_kind(data)}, not an object"
    if form:
        return None  # form fields are strings by construction
    if not isinstance(data.get("type"), str) or not data["type"]:
        return f"'type' is {_kind(data.get('type'))}, not a string"
    found = _strings("", data, _STRINGS, _NULLABLE)
    if found:
        return found
    for key in _BOOLS:
        if not _absent(data, key, _NULLABLE) and not isinstance(data[key], bool):
            return f"{key!r} is {_kind(data[key])}, not a boolean"
    for key in _OBJECTS:
        if _absent(data, key, _NULLABLE):
            continue
        value = data[key]
        if not isinstance(value, dict):
            return f"{key!r} is {_kind(value)}, not an object"
        found = _strings(f"{key}.", value, _NESTED_STRINGS, _NESTED_STRINGS)
        if found:
            return found
    for key in _LISTS:
        if _absent(data, key, _NULLABLE):
            continue
        value = data[key]
        if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
            return f"{key!r} is {_kind(value)}, not a list of objects"
        for v in value:
            strings = ("action_id", "block_id", "type", "team_id", "enterprise_id", "response_url", "value", "user_id")
            found = _strings(f"{key}[].", v, strings, strings)
            if found:
                return found
    if data["type"] == "block_actions" and not all(
        isinstance(a.get("action_id"), str) for a in data.get("actions") or []
    ):
        return "an action of block_actions has no 'action_id'"
    if data["type"] == "event_callback" or "event" in data:
        return _event_problem(data.get("event"))
    return None


def _event_problem(event: Any) -> str | None:
    if not isinstance(event, dict):
        return f"'event' is {_kind(event)}, not an object"
    if not isinstance(event.get("type"), str):
        return f"'event.type' is {_kind(event.get('type'))}, not a string"
    if event["type"] not in _EVENTS_HANDLED:
        return None  # not citebot's to read: Bolt answers it 404 (no listener)
    found = _strings("event.", event, _EVENT_STRINGS, _EVENT_NULLABLE)
    if found:
        return found
    for key in ("message", "previous_message", "view", "item"):
        value = event.get(key, {})
        if not isinstance(value, dict):
            return f"'event.{key}' is {_kind(value)}, not an object"
    return None

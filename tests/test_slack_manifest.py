"""slack/manifest.yml agrees with the code and the docs: the shortcut's callback id and
name (within Slack's 24 characters), the Home tab and its event, and every scope and event
the manifest asks for is named on the Slack app's page (docs/slack.md)."""

from __future__ import annotations

import yaml

from bot.slack.agent import AGENT_EVENTS, AgentSurface
from bot.slack.render import render_help
from bot.slack.shortcut import SHORTCUT_CALLBACK_ID, SHORTCUT_NAME, SHORTCUT_NAME_MAX
from tests.conftest import REPO

MANIFEST = yaml.safe_load((REPO / "slack" / "manifest.yml").read_text(encoding="utf-8"))


def test_the_message_shortcut_is_declared_as_the_code_handles_it():
    (shortcut,) = MANIFEST["features"]["shortcuts"]
    assert shortcut["type"] == "message" and shortcut["callback_id"] == SHORTCUT_CALLBACK_ID
    assert shortcut["name"] == SHORTCUT_NAME and len(SHORTCUT_NAME) <= SHORTCUT_NAME_MAX
    assert "commands" in MANIFEST["oauth_config"]["scopes"]["bot"]  # shortcuts need it
    help_text = " ".join(b["text"]["text"] for b in render_help("/ask", 6).block_dicts())
    assert SHORTCUT_NAME in help_text


def test_the_home_tab_is_enabled_and_its_event_subscribed():
    assert MANIFEST["features"]["app_home"]["home_tab_enabled"] is True
    events = MANIFEST["settings"]["event_subscriptions"]["bot_events"]
    assert {"app_home_opened", "app_mention", "message.im"} <= set(events)
    assert MANIFEST["settings"]["interactivity"]["is_enabled"] is True


def test_the_slack_page_names_every_scope_and_event_the_manifest_asks_for():
    slack = (REPO / "docs" / "slack.md").read_text(encoding="utf-8")
    asked = (MANIFEST["oauth_config"]["scopes"]["bot"]
             + MANIFEST["settings"]["event_subscriptions"]["bot_events"])
    assert [name for name in asked if f"`{name}`" not in slack] == []
    assert SHORTCUT_NAME in slack and SHORTCUT_CALLBACK_ID in slack


def test_the_agent_view_and_its_scope_and_events_are_declared_as_the_code_uses_them():
    agent = MANIFEST["features"]["agent_view"]
    assert "assistant_view" not in MANIFEST["features"]  # Slack is deprecating it
    assert 0 < len(agent["agent_description"]) <= 300  # Slack's limit (the manifest schema)
    assert "assistant:write" in MANIFEST["oauth_config"]["scopes"]["bot"]  # prompts, titles
    events = set(MANIFEST["settings"]["event_subscriptions"]["bot_events"])
    assert set(AGENT_EVENTS) <= events and "app_home_opened" in events
    for name in ("on_context_changed", "on_thread_started", "on_thread_context_changed",
                 "on_home_opened", "greet", "title", "scoped"):
        assert callable(getattr(AgentSurface, name))
    slack = (REPO / "docs" / "slack.md").read_text(encoding="utf-8")
    assert "`agent_view`" in slack and all(f"`{m}`" in slack for m in (
        "assistant.threads.setSuggestedPrompts", "assistant.threads.setTitle", "conversations.members"))

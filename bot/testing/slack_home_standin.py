"""The stand-in's Home tab and message shortcut pieces (bot/testing/slack_standin.py uses
them): views.publish as Slack checks it, and the payloads Slack sends when a person opens
the Home tab or uses a message shortcut."""

from __future__ import annotations

import json
import threading
import time
import uuid
from typing import Any

# Slack's limit: a Home tab holds at most 100 blocks.
HOME_BLOCKS_MAX = 100


class HomeViews:
    """views.publish: each person's Home tab, checked for the shape Slack requires (a
    "home" view with a list of at most 100 blocks) and kept for tests to read."""

    def __init__(self) -> None:
        self._views: dict[str, dict] = {}
        self._lock = threading.Lock()

    def publish(self, p: dict[str, Any]) -> dict[str, Any]:
        view = p.get("view")
        if isinstance(view, str):
            view = json.loads(view)
        user = str(p.get("user_id") or "")
        if (
            not user
            or not isinstance(view, dict)
            or view.get("type") != "home"
            or not isinstance(view.get("blocks"), list)
            or len(view["blocks"]) > HOME_BLOCKS_MAX
        ):
            return {"ok": False, "error": "invalid_arguments"}
        with self._lock:
            self._views[user] = view
        return {"ok": True, "view": {"id": "V" + uuid.uuid4().hex[:10].upper(), **view}}

    def of(self, user: str) -> dict | None:
        """The Home tab last published for `user`, or None."""
        with self._lock:
            view = self._views.get(user)
            return json.loads(json.dumps(view)) if view is not None else None


def home_opened_event(user: str, *, channel: str = "DHOME", tab: str = "home") -> dict:
    """The app_home_opened event of a person opening citebot's Home (or Messages) tab."""
    return {"type": "app_home_opened", "user": user, "channel": channel, "tab": tab, "event_ts": f"{time.time():.6f}"}


def shortcut_payload(
    callback_id: str, message: dict, *, user: str, channel: str, response_url: str, team_id: str, app_id: str
) -> dict:
    """A message_action payload: a message shortcut used on `message` in `channel`."""
    return {
        "type": "message_action",
        "callback_id": callback_id,
        "trigger_id": f"{int(time.time())}.{uuid.uuid4().hex[:8]}",
        "team": {"id": team_id, "domain": "standin"},
        "user": {"id": user, "username": user.lower(), "name": user.lower(), "team_id": team_id},
        "channel": {"id": channel, "name": "general"},
        "api_app_id": app_id,
        "token": "legacy-verification-token",
        "message_ts": message.get("ts", ""),
        "message": message,
        "response_url": response_url,
        "action_ts": str(time.time()),
    }

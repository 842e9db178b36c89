"""The stand-in's agent surface (bot/testing/slack_standin.py uses it):
assistant.threads.setStatus, setTitle and setSuggestedPrompts checked for the arguments
Slack requires, conversations.members with paging, the streaming chunk types (task_update
with its `url` sources, plan_update, markdown_text, blocks) checked for their shape, and
the events Slack sends on the agent surface.

`refuse[method] = error` makes every call of a method fail as a workspace without it
would (not_allowed, missing_scope, unknown_method); `refuse["task_update"]` refuses
streaming calls that carry task or plan chunks, as a Slack without them would.
"""

from __future__ import annotations

import threading
import time
from typing import Any

# The most suggested prompts Slack takes (the manifest schema's agent_view limit).
PROMPTS_MAX = 4
TASK_STATUSES = ("pending", "in_progress", "complete", "error")
_ASSISTANT = ("assistant.threads.setStatus", "assistant.threads.setTitle", "assistant.threads.setSuggestedPrompts")
_STREAMS = ("chat.startStream", "chat.appendStream", "chat.stopStream")


class AgentStandIn:
    def __init__(self) -> None:
        self.members: dict[str, list[str]] = {}  # channel -> members (conversations.members)
        self.hidden: set[str] = set()  # private channels the bot is not in: channel_not_found
        self.refuse: dict[str, str] = {}
        self.titles: dict[tuple[str, str], str] = {}  # (channel, thread_ts) -> title
        self._lock = threading.Lock()

    def handles(self, method: str, p: dict[str, Any]) -> bool:
        """Whether this module answers the call (the rest of the stand-in does otherwise)."""
        if method in _ASSISTANT or method == "conversations.members" or method in self.refuse:
            return True
        return method in _STREAMS and (chunk_problem(p) is not None or ("task_update" in self.refuse and _has_tasks(p)))

    def answer(self, method: str, p: dict[str, Any]) -> dict[str, Any]:
        if method in self.refuse:
            return {"ok": False, "error": self.refuse[method]}
        if method in _STREAMS:
            if "task_update" in self.refuse and _has_tasks(p):
                return {"ok": False, "error": self.refuse["task_update"]}
            return {"ok": False, "error": "invalid_chunks", "detail": chunk_problem(p)}
        if method == "conversations.members":
            return self._members(p)
        channel, thread_ts = str(p.get("channel_id") or ""), p.get("thread_ts")
        if not channel:
            return {"ok": False, "error": "invalid_arguments"}
        if method == "assistant.threads.setSuggestedPrompts":
            prompts = p.get("prompts")
            if (
                not isinstance(prompts, list)
                or not 1 <= len(prompts) <= PROMPTS_MAX
                or not all(
                    isinstance(x, dict)
                    and isinstance(x.get("title"), str)
                    and x["title"]
                    and isinstance(x.get("message"), str)
                    and x["message"]
                    for x in prompts
                )
            ):
                return {"ok": False, "error": "invalid_arguments"}
            return {"ok": True}
        if not thread_ts:
            return {"ok": False, "error": "invalid_arguments"}
        if method == "assistant.threads.setTitle":
            title = p.get("title")
            if not isinstance(title, str) or not title.strip():
                return {"ok": False, "error": "invalid_arguments"}
            with self._lock:
                self.titles[(channel, str(thread_ts))] = title
        return {"ok": True}  # setStatus: the calls are what tests read (SlackStandIn.statuses)

    def _members(self, p: dict[str, Any]) -> dict[str, Any]:
        channel = str(p.get("channel") or "")
        if channel in self.hidden or not channel:
            return {"ok": False, "error": "channel_not_found"}
        everyone = self.members.get(channel, [])
        start = int(p.get("cursor") or 0)
        end = start + int(p.get("limit") or 100)
        more = end < len(everyone)
        return {
            "ok": True,
            "members": everyone[start:end],
            "response_metadata": {"next_cursor": str(end) if more else ""},
        }


def _has_tasks(p: dict[str, Any]) -> bool:
    return any(isinstance(c, dict) and c.get("type") in ("task_update", "plan_update") for c in p.get("chunks") or [])


def chunk_problem(p: dict[str, Any]) -> str | None:
    """What is wrong with a streaming call's chunks as Slack reads them, or None."""
    chunks = p.get("chunks")
    if chunks is None:
        return None
    if not isinstance(chunks, list):
        return "chunks is not a list"
    for c in chunks:
        kind = c.get("type") if isinstance(c, dict) else None
        if kind == "markdown_text" and isinstance(c.get("text"), str):
            continue
        if kind == "blocks" and isinstance(c.get("blocks"), list):
            continue
        if kind == "plan_update" and isinstance(c.get("title"), str):
            continue
        if kind == "task_update":
            if not (
                isinstance(c.get("id"), str) and isinstance(c.get("title"), str) and c.get("status") in TASK_STATUSES
            ):
                return f"task_update needs id, title and a status of {TASK_STATUSES}"
            for s in c.get("sources") or []:
                if not (
                    isinstance(s, dict)
                    and s.get("type") == "url"
                    and str(s.get("url", "")).startswith(("https://", "http://"))
                    and isinstance(s.get("text"), str)
                    and s["text"]
                ):
                    return "a task source must be {type: url, url, text}"
            continue
        return f"unknown chunk {c!r:.80}"
    return None


def tasks_sent(calls: list[Any]) -> list[dict]:
    """Every task_update chunk the streaming calls carried, in order."""
    return [
        c
        for call in calls
        for c in call.params.get("chunks") or []
        if isinstance(c, dict) and c.get("type") == "task_update"
    ]


def thread_started_event(
    user: str, channel: str, thread_ts: str, viewing: str | None = None, team_id: str = "TSTANDIN"
) -> dict:
    """assistant_thread_started: a person opened a new thread on the older assistant surface."""
    context = {"channel_id": viewing, "team_id": team_id} if viewing else {}
    return {
        "type": "assistant_thread_started",
        "event_ts": f"{time.time():.6f}",
        "assistant_thread": {"user_id": user, "channel_id": channel, "thread_ts": thread_ts, "context": context},
    }


def context_changed_event(user: str, channel: str, viewing: str | None) -> dict:
    """app_context_changed: what the person is viewing now (an empty context: nothing)."""
    context = (
        {"entities": [{"type": "slack#/types/channel_id", "value": viewing, "team_id": "TSTANDIN"}]} if viewing else {}
    )
    return {
        "type": "app_context_changed",
        "user": user,
        "channel": channel,
        "context": context,
        "event_ts": f"{time.time():.6f}",
    }

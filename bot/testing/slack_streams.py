"""The chat streaming methods of the Slack stand-in (bot/testing/slack_standin.py):
chat.startStream starts a bot message in a thread, chat.appendStream adds to its text,
chat.stopStream adds the last text, its blocks and metadata and ends it. The message keeps
everything appended as its `text`; once stopped, its blocks are one `markdown` block of that
text followed by the blocks stopStream carried, so conversations.replies reads it back as
Slack shows it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# Slack's: markdown_text of one streaming call, and all markdown blocks of one message.
MARKDOWN_MAX = 12_000


def stream_call(
    messages: list[dict],
    method: str,
    channel: str,
    p: dict[str, Any],
    next_ts: Callable[[], str],
    author: dict[str, str],
) -> dict[str, Any]:
    """Answer one streaming call on a channel's messages (the caller holds its lock)."""
    text = stream_text(p)
    if len(text) > MARKDOWN_MAX:
        return {"ok": False, "error": "msg_too_long"}
    if method == "chat.startStream":
        if not p.get("thread_ts"):
            return {"ok": False, "error": "invalid_arguments"}
        ts = next_ts()
        messages.append(
            {
                "type": "message",
                **author,
                "ts": ts,
                "text": text,
                "blocks": [],
                "thread_ts": p["thread_ts"],
                "streaming": True,
            }
        )
        return {"ok": True, "channel": channel, "ts": ts}
    message = next((m for m in messages if m["ts"] == p.get("ts")), None)
    if message is None:
        return {"ok": False, "error": "message_not_found"}
    if not message.get("streaming"):
        return {"ok": False, "error": "message_not_in_streaming_state"}
    if method not in ("chat.appendStream", "chat.stopStream"):
        return {"ok": False, "error": "unknown_method"}
    message["text"] += text
    if method == "chat.stopStream":
        message["streaming"] = False
        body = [{"type": "markdown", "text": message["text"]}] if message["text"] else []
        message["blocks"] = body + list(p.get("blocks") or [])
        if p.get("metadata"):
            message["metadata"] = p["metadata"]
    return {"ok": True, "channel": channel, "ts": message["ts"]}


def stream_text(p: dict[str, Any]) -> str:
    """The markdown a streaming call carries: markdown_text, then its markdown_text chunks."""
    text = str(p.get("markdown_text") or "")
    for chunk in p.get("chunks") or []:
        if isinstance(chunk, dict) and chunk.get("type") == "markdown_text":
            text += str(chunk.get("text") or "")
    return text


def markdown_chars(p: dict[str, Any]) -> int:
    """Characters in the markdown blocks of a chat.postMessage or chat.update."""
    return sum(
        len(str(b.get("text") or ""))
        for b in p.get("blocks") or []
        if isinstance(b, dict) and b.get("type") == "markdown"
    )

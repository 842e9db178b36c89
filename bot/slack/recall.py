"""Thread recall: whether citebot has answered in a thread, and that thread's earlier turns.

The conversation state normally holds a thread's turns; when it has forgotten them (a
restart without Redis, an expired key, Redis down), they are read back from the thread
itself: citebot's own replies carry the question in their message metadata.
"""

from __future__ import annotations

import structlog
from slack_sdk import WebClient

from bot.memory.state import HISTORY_TURNS, ConversationState, PriorTurn
from bot.slack.client import SLACK_ERRORS, slack_failed
from bot.slack.inbound import Identity, Question
from bot.slack.render import unescape

log = structlog.get_logger("citebot.slack")

# conversations.replies pages read when recalling a thread (200 messages a page).
RECALL_PAGES = 5
# Message metadata (event_type) on citebot's own messages; a thread is read back from it.
PROGRESS_EVENT = "citebot_progress"
TURN_EVENT = "citebot_turn"


class ThreadRecall:
    def __init__(self, client: WebClient, state: ConversationState, identity: Identity) -> None:
        self.client = client
        self.state = state
        self.identity = identity

    def recall(self, q: Question) -> bool:
        """Whether citebot has answered in q's thread; refills the state from it if needed."""
        assert q.thread_key is not None and q.reply_thread_ts is not None
        try:
            if self.state.history(q.thread_key):
                return True
        except Exception as exc:  # noqa: BLE001 - Redis down: read the thread instead
            log.warning("thread_state_unavailable", error=str(exc))
        messages = self._read_thread(q, q.reply_thread_ts)
        if messages is None:
            return False
        ours = [m for m in messages if self.identity.wrote(m)]
        if not ours:
            return False
        turns = [t for t in (self._prior_turn(m) for m in ours) if t is not None]
        try:
            if turns and not self.state.history(q.thread_key):
                for turn in turns[-HISTORY_TURNS:]:
                    self.state.append(q.thread_key, turn)
        except Exception as exc:  # noqa: BLE001 - the turn itself will meet and report this
            log.warning("thread_state_unavailable", error=str(exc))
        log.info("slack_thread_recalled", turns=len(turns), messages=len(messages))
        return True

    def _read_thread(self, q: Question, thread_ts: str) -> list[dict] | None:
        messages: list[dict] = []
        cursor = None
        try:
            for _ in range(RECALL_PAGES):
                r = self.client.conversations_replies(
                    channel=q.channel, ts=thread_ts, include_all_metadata=True, limit=200,
                    cursor=cursor)
                messages += r.get("messages") or []
                cursor = (r.get("response_metadata") or {}).get("next_cursor")
                if not cursor:
                    break
        except SLACK_ERRORS as exc:
            log.warning("slack_thread_read_failed", error=slack_failed(exc))
            return None
        return messages

    @staticmethod
    def _prior_turn(message: dict) -> PriorTurn | None:
        """An earlier answer of citebot's; placeholders and error replies are no turns."""
        meta = message.get("metadata") or {}
        payload = meta.get("event_payload") or {}
        if meta.get("event_type") != TURN_EVENT or payload.get("error"):
            return None
        if not payload.get("question"):
            return None
        return PriorTurn(
            turn_id=str(payload.get("turn_id", "")), question=str(payload["question"]),
            condensed=str(payload.get("condensed_query") or payload["question"]),
            answer=unescape(message.get("text", "")))

"""Thread recall: whether citebot has answered in a thread, and that thread's earlier turns.

The conversation state normally holds a thread's turns; when it has forgotten them (a
restart without Redis, an expired key, Redis down), they are read back from the thread
itself: citebot's own replies carry the question in their message metadata.
"""

from __future__ import annotations

import structlog
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot.memory.state import HISTORY_TURNS, ConversationState, PriorTurn
from bot.slack.client import SLACK_ERRORS, slack_failed
from bot.slack.inbound import Identity, Question
from bot.slack.recall_memo import InProcessRecallMemo, RecallMemo
from bot.slack.render import unescape
from search.errors import CitebotError

log = structlog.get_logger("citebot.slack")

# Messages read when recalling a thread: one call of at most 15, what Slack gives apps
# outside its Marketplace (at one call a minute); citebot's first answers come early in a
# thread, and the state keeps what was read (docs/data.md).
RECALL_MESSAGES = 15
# Slack's limit for those apps is one call a minute: the back-off when a 429 names none.
RATE_LIMITED_WAIT_S = 60.0
# Message metadata (event_type) on citebot's own messages; a thread is read back from it.
PROGRESS_EVENT = "citebot_progress"
TURN_EVENT = "citebot_turn"


class ThreadRecall:
    def __init__(
        self, client: WebClient, state: ConversationState, identity: Identity, memo: RecallMemo | None = None
    ) -> None:
        self.client = client
        self.state = state
        self.identity = identity
        self.memo = memo or InProcessRecallMemo()

    def recall(self, q: Question) -> bool:
        """Whether citebot has answered in q's thread; refills the state from it if needed."""
        assert q.thread_key is not None and q.reply_thread_ts is not None
        try:
            if self.state.history(q.thread_key):
                return True
        except Exception as exc:  # noqa: BLE001 - Redis down: read the thread instead
            log.warning("thread_state_unavailable", error=str(exc))
        try:
            if self.memo.foreign(q.thread_key):
                return False
            wait = self.memo.wait_s()
        except CitebotError as exc:  # Redis down: read (Slack's own 429 still stops us)
            log.warning("thread_recall_memo_unavailable", error=str(exc))
            wait = 0.0
        if wait > 0:
            log.warning("slack_thread_recall_degraded", reason="rate_limited", retry_in_s=round(wait, 1))
            return False
        messages = self._read_thread(q, q.reply_thread_ts)
        if messages is None:
            return False
        ours = [m for m in messages if self.identity.wrote(m)]
        if not ours:
            self._remember_foreign(q.thread_key)
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
        try:
            r = self.client.conversations_replies(
                channel=q.channel, ts=thread_ts, include_all_metadata=True, limit=RECALL_MESSAGES
            )
        except SLACK_ERRORS as exc:
            if isinstance(exc, SlackApiError) and exc.response.status_code == 429:
                wait = _retry_after(exc) or RATE_LIMITED_WAIT_S
                self._back_off(wait)
                log.warning("slack_thread_recall_degraded", reason="rate_limited", retry_in_s=round(wait, 1))
            else:
                log.warning("slack_thread_read_failed", error=slack_failed(exc))
            return None
        return list(r.get("messages") or [])[:RECALL_MESSAGES]

    def _back_off(self, seconds: float) -> None:
        try:
            self.memo.back_off(seconds)
        except CitebotError as exc:
            log.warning("thread_recall_memo_unavailable", error=str(exc))

    def _remember_foreign(self, thread_key: str) -> None:
        try:
            self.memo.mark_foreign(thread_key)
        except CitebotError as exc:
            log.warning("thread_recall_memo_unavailable", error=str(exc))

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
            turn_id=str(payload.get("turn_id", "")),
            question=str(payload["question"]),
            condensed=str(payload.get("condensed_query") or payload["question"]),
            answer=unescape(message.get("text", "")),
        )


def _retry_after(exc: SlackApiError) -> float | None:
    """The seconds a 429 asks to wait, when it says."""
    for key, value in (exc.response.headers or {}).items():
        if key.lower() == "retry-after":
            try:
                return max(0.0, float(value[0] if isinstance(value, list) else value))
            except (TypeError, ValueError):
                return None
    return None

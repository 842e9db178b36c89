"""The stages of a streamed answer as task updates in its message, and its sources as URL
sources (chat streaming chunks: `task_update`, whose `sources` are `url` elements).

Searching is under way from the moment the status goes up (bot.slack.stream); the first
checked sentence starts the message together with two tasks: "Searched the collection"
complete and "Checking quotations" in progress. chat.stopStream completes the checking
task with what the checks found and the cited sources that have links. Where Slack refuses
task chunks, that turn takes the stream's fallback path (the answer arrives in place of the
streamed message), the refusal is logged once (bot.slack.refusals), and later turns name the
checking stage in the status line (setStatus) instead; the sources are in the answer's
final message either way.
"""

from __future__ import annotations

from typing import Any

import structlog
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot.answer.record import TurnRecord
from bot.slack.client import slack_error
from bot.slack.inbound import Question
from bot.slack.refusals import Refusals
from bot.slack.render import cited_numbers, failed_checks
from search.links import link_for

log = structlog.get_logger("citebot.slack")

TASK_CHUNKS = "chat.stream task chunks"  # what bot.slack.refusals remembers as refused
# What a Slack that does not take a chunk type answers a streaming call carrying it (only
# invalid_chunks is seen from the stand-in; the others are Slack's general refusals).
CHUNK_REFUSALS = ("invalid_chunks", "not_allowed", "invalid_arguments")
SEARCH, CHECK = "citebot_search", "citebot_check"
CHECKING_STATUS = "is checking every quotation against its source…"
# URL sources shown with the checking task: the answer's sources line lists them all; a
# task card with more than this many links is a wall (docs/decisions/0041-agent-surface.md).
URL_SOURCES_MAX = 8
LABEL_MAX = 80


def task(task_id: str, title: str, status: str, **extra: Any) -> dict[str, Any]:
    return {
        "type": "task_update",
        "id": task_id,
        "title": title,
        "status": status,
        **{k: v for k, v in extra.items() if v},
    }


def url_sources(record: TurnRecord, url_template: str | None) -> list[dict[str, str]]:
    """The cited passages' links as URL source elements, one per address, in order."""
    cited = cited_numbers(record)
    out: dict[str, dict[str, str]] = {}
    for p in record.passages or []:
        if cited and p.get("number") not in cited:
            continue
        source = str(p.get("source") or "")
        url = p.get("url") if "url" in p else link_for(source, None, None, url_template)
        if not isinstance(url, str) or not url.startswith(("https://", "http://")) or url in out:
            continue
        heading = " › ".join(str(h) for h in (p.get("heading_path") or [])[-1:])
        label = f"{source} — {heading}" if heading else source
        out[url] = {"type": "url", "url": url, "text": label[:LABEL_MAX] or url}
    return list(out.values())[:URL_SOURCES_MAX]


class StageTasks:
    """One streamed answer's stages (one turn worker uses it at a time). The chunks ride on
    the stream's own calls (the first sentence's, and chat.stopStream), so task updates
    cost Slack no extra call."""

    def __init__(self, client: WebClient, q: Question, refusals: Refusals, url_template: str | None) -> None:
        self.client = client
        self.q = q
        self.refusals = refusals
        self.url_template = url_template
        self.checking_said = False
        self.pending: list[dict[str, Any]] = []
        self.carried = False  # the last call took chunks

    def checking(self) -> None:
        """The search is done and the first checked sentence comes next."""
        if self.checking_said:
            return
        self.checking_said = True
        if self.refusals.allowed(TASK_CHUNKS):
            self.pending += [
                task(SEARCH, "Searched the collection", "complete"),
                task(CHECK, "Checking quotations", "in_progress"),
            ]
            return
        thread_ts = self.q.reply_thread_ts or ""
        self.refusals.call(
            "assistant.threads.setStatus",
            lambda: self.client.assistant_threads_setStatus(
                channel_id=self.q.channel, thread_ts=thread_ts, status=CHECKING_STATUS
            ),
        )

    def done(self, record: TurnRecord) -> None:
        """The checks' outcome and the cited sources with links, for the message's end."""
        if not self.refusals.allowed(TASK_CHUNKS):
            return
        failed = failed_checks(record)
        output = (
            "not answered"
            if record.error or record.refused
            else f"{failed} check{'s' if failed != 1 else ''} flagged"
            if failed
            else "every quotation matches its source"
        )
        if not self.checking_said:  # nothing was streamed early: the search ends here too
            self.pending.append(task(SEARCH, "Searched the collection", "complete"))
        self.pending.append(
            task(
                CHECK,
                "Checked quotations",
                "error" if record.error else "complete",
                output=output,
                sources=url_sources(record, self.url_template),
            )
        )

    def take(self) -> list[dict[str, Any]] | None:
        """The chunks for the next streaming call (None: nothing pending)."""
        chunks, self.pending = self.pending, []
        self.carried = bool(chunks)
        return chunks or None

    def failed(self, exc: BaseException) -> None:
        """A streaming call failed: if it carried chunks and Slack refused them, later turns
        name the stage with setStatus instead (this one takes the stream's fallback path)."""
        if self.carried and isinstance(exc, SlackApiError) and slack_error(exc) in CHUNK_REFUSALS:
            self.refusals.refuse(TASK_CHUNKS, slack_error(exc))

"""Slack's agent surface: citebot's DM as an agent conversation.

With `features.agent_view` in the manifest (slack/manifest.yml) the DM opens as an agent
conversation. What citebot does there, beyond answering (bot.slack.bot, as any DM):

- Greeting. When a person opens the DM (app_home_opened with tab "messages"; on the older
  assistant surface, assistant_thread_started) citebot sets up to four suggested prompts
  (assistant.threads.setSuggestedPrompts) drawn from what their DM's scope covers: the
  top folders of the collection within it and an example document of each (the Home
  tab's coverage, bot.slack.home). A source outside the scope never appears.
- Titles. The first question of a DM thread becomes its title (assistant.threads.setTitle),
  cut to TITLE_MAX characters at a word.
- Context. app_context_changed says which channel the person is viewing (remembered per
  person; on the older surface assistant_thread_started / assistant_thread_context_changed
  say it per thread), in bot.slack.viewing (Redis or this process). A question in the DM
  is answered under that channel's scope only when all of these hold: the channel has a
  table of its own in the scopes file, its reply mode is not "off", it is not a Slack
  Connect channel unless its table allows that, and the person is a member of it
  (conversations.members, bot.slack.members). Otherwise the DM's own scope answers. The
  answer stays in the DM either way, where only the person reads it.

Every call here is an extra: refused (not_allowed, missing_scope, unknown_method) it is
logged once (bot.slack.refusals) and the conversation goes on without it.
"""

from __future__ import annotations

import re
from typing import Any

import structlog
from slack_sdk import WebClient

from bot.slack.home import HomeTab
from bot.slack.inbound import SURFACE_DM, Question
from bot.slack.members import Membership
from bot.slack.refusals import Refusals
from bot.slack.scopes import Admission, ChannelPolicy
from bot.slack.turns import TurnRunner
from bot.slack.viewing import Viewing
from search.errors import CitebotError

log = structlog.get_logger("citebot.slack")

# Slack shows at most four suggested prompts (the manifest schema's agent_view limit).
PROMPTS_MAX = 4
# A prompt's title is a button's label; a thread's title a line in the DM's history: both
# are cut at a word so they stay one line wide (docs/decisions/0041-agent-surface.md).
PROMPT_TITLE_MAX = 40
TITLE_MAX = 60
PROMPTS_TITLE = "Ask about what I can answer from for you:"
# The events the agent surface listens to (bot.slack.bot registers them; the manifest
# subscribes them: tests/test_slack_manifest.py).
AGENT_EVENTS = ("app_context_changed", "assistant_thread_started", "assistant_thread_context_changed")
CHANNEL_ENTITY = "slack#/types/channel_id"
MESSAGE_ENTITY = "slack#/types/message_context"
_CHANNEL_ID = re.compile(r"^[CG][A-Z0-9]{2,}$")
_ANY_CONVERSATION = re.compile(r"^[CGD][A-Z0-9]{2,30}$")


class AgentSurface:
    def __init__(
        self,
        client: WebClient,
        runner: TurnRunner,
        home: HomeTab,
        admission: Admission,
        viewing: Viewing,
        refusals: Refusals,
    ) -> None:
        self.client = client
        self.runner = runner
        self.home = home
        self.admission = admission
        self.scopes = admission.scopes
        self.viewing = viewing
        self.refusals = refusals
        self.members = Membership(client)

    # -- listeners -----------------------------------------------------------------------
    def on_home_opened(self, body: dict, event: dict) -> None:
        user, channel = event.get("user"), str(event.get("channel") or "")
        with self.runner.job(user=user, event_id=body.get("event_id"), surface="slack_agent"):
            if event.get("tab") != "messages" or not user or not channel.startswith("D"):
                return  # the Home tab (bot.slack.home), or a payload without a DM
            self.greet(str(user), channel, None)

    def on_thread_started(self, body: dict, event: dict) -> None:
        thread = _object(event.get("assistant_thread"))
        user, channel, ts = thread.get("user_id"), thread.get("channel_id"), thread.get("thread_ts")
        with self.runner.job(user=user, event_id=body.get("event_id"), surface="slack_agent"):
            if not all(isinstance(x, str) and x for x in (user, channel, ts)):
                log.warning("agent_thread_unreadable", keys=sorted(thread)[:10])
                return
            self._note(f"{channel}:{ts}", viewed_channel(thread.get("context")))
            self.greet(str(user), str(channel), str(ts))

    def on_thread_context_changed(self, body: dict, event: dict) -> None:
        thread = _object(event.get("assistant_thread"))
        with self.runner.job(user=thread.get("user_id"), event_id=body.get("event_id"), surface="slack_agent"):
            if isinstance(thread.get("channel_id"), str) and isinstance(thread.get("thread_ts"), str):
                self._note(f"{thread['channel_id']}:{thread['thread_ts']}", viewed_channel(thread.get("context")))

    def on_context_changed(self, body: dict, event: dict) -> None:
        user = event.get("user") if isinstance(event.get("user"), str) else _person(body)
        with self.runner.job(user=user, event_id=body.get("event_id"), surface="slack_agent"):
            if not user:
                log.warning("agent_context_without_person")
                return
            self._note(f"user:{user}", viewed_channel(event.get("context")))

    def _note(self, key: str, channel: str) -> None:
        try:
            self.viewing.note(key, channel)
            log.info("agent_context_noted", viewed=channel or None)
        except CitebotError as exc:  # Redis down: the DM's own scope answers meanwhile
            log.warning("agent_context_not_kept", error=str(exc))

    # -- greeting ------------------------------------------------------------------------
    def greet(self, user: str, channel: str, thread_ts: str | None) -> bool:
        prompts = self.prompts(user, channel)
        if not prompts:
            log.info("agent_no_prompts")
            return False
        done = self.refusals.call(
            "assistant.threads.setSuggestedPrompts",
            lambda: self.client.assistant_threads_setSuggestedPrompts(
                channel_id=channel, thread_ts=thread_ts, title=PROMPTS_TITLE, prompts=prompts
            ),
        )
        if done:
            log.info("agent_prompts_set", prompts=len(prompts))
        return done

    def prompts(self, user: str, channel: str) -> list[dict[str, str]]:
        """Up to PROMPTS_MAX prompts from the top folders the person's DM scope covers."""
        policy = self.scopes.for_channel(channel, user, own_dm=True)
        if policy.reply == "off":
            return []
        try:
            coverage = self.home.coverage(policy.scope)
        except Exception as exc:  # noqa: BLE001 - no prompts; the DM works without them
            log.warning("agent_coverage_failed", error=str(exc))
            return []
        picks: list[tuple[str, str]] = []
        depth = max((len(f.examples) for f in coverage.folders), default=0)
        for i in range(depth):  # each folder's first example, then each one's second, …
            for folder in coverage.folders:
                if i < len(folder.examples) and len(picks) < PROMPTS_MAX:
                    picks.append((folder.name, folder.examples[i]))
        return [prompt(folder, example) for folder, example in picks]

    # -- a question in the DM ------------------------------------------------------------
    def title(self, q: Question) -> None:
        """The thread's first question becomes its title (once per thread, every replica)."""
        if q.surface != SURFACE_DM or not q.reply_thread_ts or not q.text:
            return
        thread_ts = q.reply_thread_ts
        try:
            if not self.viewing.first(f"titled:{q.channel}:{thread_ts}"):
                return
        except CitebotError as exc:
            log.warning("agent_title_skipped", error=str(exc))
            return
        self.refusals.call(
            "assistant.threads.setTitle",
            lambda: self.client.assistant_threads_setTitle(
                channel_id=q.channel, thread_ts=thread_ts, title=thread_title(q.text)
            ),
        )

    def scoped(self, q: Question, policy: ChannelPolicy) -> ChannelPolicy:
        """The DM's policy, or the viewed channel's scope where the person may read it."""
        if q.surface != SURFACE_DM or not q.user:
            return policy
        try:
            viewed = (
                self.viewing.viewed(f"{q.channel}:{q.reply_thread_ts}") if q.reply_thread_ts else ""
            ) or self.viewing.viewed(f"user:{q.user}")
        except CitebotError as exc:
            log.warning("agent_context_unread", error=str(exc))
            return policy
        if not viewed:
            return policy
        why = self._not_usable(viewed, q.user)
        if why:
            log.info("agent_context_not_used", viewed=viewed, reason=why)
            return policy
        chosen = self.scopes.channels[viewed]
        log.info("agent_dm_scoped_as_channel", viewed=viewed, scope=chosen.scope.name)
        return ChannelPolicy(chosen.scope, policy.reply, policy.shared)

    def _not_usable(self, channel: str, user: str) -> str | None:
        if not _CHANNEL_ID.match(channel):
            return "not a channel"
        chosen = self.scopes.channels.get(channel)
        if chosen is None:
            return "no scope of its own"
        if chosen.reply == "off":
            return "citebot is off there"
        if not chosen.shared and self.admission.shared(channel):
            return "shared with another organisation"
        if not self.members.is_member(channel, user):
            return "not a member"
        return None


def viewed_channel(context: Any) -> str:
    """The most relevant channel in an event's context ("" when there is none or it is no
    channel id: whatever else a payload holds is never stored)."""
    found = _first_channel(context)
    return found if _ANY_CONVERSATION.match(found) else ""


def _first_channel(context: Any) -> str:
    if not isinstance(context, dict):
        return ""
    if isinstance(context.get("channel_id"), str):  # assistant_thread.context
        return context["channel_id"]
    entities = context.get("entities")
    for entity in entities if isinstance(entities, list) else []:  # app_context_changed, by relevance
        if not isinstance(entity, dict):
            continue
        value = entity.get("value")
        if entity.get("type") == CHANNEL_ENTITY and isinstance(value, str):
            return value
        if entity.get("type") == MESSAGE_ENTITY and isinstance(value, dict):
            return str(value.get("channel_id") or "")
    return ""


def _object(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _person(body: dict) -> str | None:
    auths = body.get("authorizations")
    for auth in auths if isinstance(auths, list) else []:
        if isinstance(auth, dict) and not auth.get("is_bot") and auth.get("user_id"):
            return str(auth["user_id"])
    return None


def cut_at_word(text: str, limit: int) -> str:
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    head = text[: limit - 1]
    return (head.rsplit(" ", 1)[0] if " " in head else head).rstrip(" ,;:.-") + "…"


def thread_title(question: str) -> str:
    return cut_at_word(question, TITLE_MAX) or "Question"


def topic(example: str) -> str:
    """A document's name as words: `release-train.md` -> "release train"."""
    stem = example.rsplit("/", 1)[-1].rsplit(".", 1)[0]
    return " ".join(re.sub(r"[-_.]+", " ", stem).split()) or stem


def prompt(folder: str, example: str) -> dict[str, str]:
    label = " ".join(re.sub(r"[-_]+", " ", folder.rstrip("/").rsplit("/", 1)[-1]).split())
    subject = topic(example)
    title = f"{label}: {subject}" if label else subject
    where = f"the {label} documents" if label else "our documents"
    return {"title": cut_at_word(title, PROMPT_TITLE_MAX), "message": f"What do {where} say about {subject}?"}

"""What arrives from Slack, parsed: who citebot is, questions, slash commands.

Mentions, links and Slack's escapes are taken out of the text before it becomes a
question; where the answer goes (thread, DM, ephemeral) travels with the question.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

import structlog

from bot.answer.prompt import PROMPT_QUESTION_CHARS
from bot.slack.emphasis import strip_emphasis
from bot.slack.render import unescape
from search.marks import IN_WORD_RANGES
from search.text import W_CLASS

log = structlog.get_logger("citebot.slack")

SURFACE_MENTION = "slack_mention"
SURFACE_THREAD = "slack_thread"
SURFACE_DM = "slack_dm"
SURFACE_COMMAND = "slack_command"
SURFACE_EPHEMERAL = "slack_ephemeral"  # a mention in a channel whose reply mode is "ephemeral"
SURFACE_SHORTCUT = "slack_shortcut"  # the message shortcut: ephemeral, in the message's thread
# Turns everyone in the channel saw: anyone there may ask why they said what they did.
PUBLIC_SURFACES = (SURFACE_MENTION, SURFACE_THREAD)

# A question is cut to the prompt's question size before anything reads it. Slack allows
# 40,000 characters in a message; each step after (cleaning, retrieval, composing) costs in
# proportion to the text, so the cut bounds a turn's cost.
QUESTION_MAX_CHARS = PROMPT_QUESTION_CHARS

# Neither class admits "<": a stray "<" (Slack escapes a typed one as &lt;) ends the scan,
# so a text of many unclosed "<@" or "<http:" is read once, not once per "<".
_MENTION = re.compile(r"<[@#!][^<>]*>")
_LINK = re.compile(r"<((?:https?|mailto):[^|<>]+)(?:\|([^<>]+))?>")
# Slack wording, taken out before retrieval (a question is searched by its words, and
# "hey", ":pray:" or a pasted stack trace's punctuation are not the question's words):
_FENCE = re.compile(r"```(.*?)(?:```|$)", re.DOTALL)
_CODE = re.compile(r"`([^`\n]+)`")
# :emoji: and :emoji::skin-tone-2:, but never "10:30:00" (a name holds a letter).
_EMOJI = re.compile(r":(?=[a-z0-9_+'-]*[a-z])[a-z0-9_+'-]+:", re.IGNORECASE)
# *bold*, _italic_, ~strike~ markers at word edges: bot.slack.emphasis (linear, not a regex).
# Blanks before a quote mark on its line; not \s, which would run across every blank line below.
_QUOTE = re.compile(r"^[ \t]*(?:&gt;|>)[ \t]?", re.MULTILINE)
# Opening and closing filler: "hey @citebot quick q:", "sorry to bother, …", "… thanks!".
_P = r"[\s,:;!.\-–—]"  # punctuation and spaces after filler
_FILLER_START = re.compile(
    r"^(?:"
    rf"(?:hey|heya|hi|hiya|hello|yo|morning|good (?:morning|afternoon|evening))"
    rf"(?:\s+(?:all|team|folks|everyone|there|y'all|@?citebot))?\b{_P}*"  # a greeting
    rf"|@?citebot\b{_P}*"  # the name typed out
    rf"|(?:(?:quick|random|dumb|silly|stupid|noob|small|tiny)\s+)?(?:q|qq|question|query)"
    rf"\s*[:,\-–—]+\s*"  # "quick q:"
    rf"|sorry to bother(?: you)?\b{_P}*"
    rf"|(?:(?:ok|okay|so|um+|uh+)\b\s*)+[,:;!.\-–—]+\s*"  # "ok so," "um,"
    r")+",
    re.IGNORECASE,
)
# The run before "thanks" is matched from its first character only ((?<!…)): searched from
# every character of a long run of punctuation, it would read the run once per character.
_FILLER_END = re.compile(
    r"(?:(?<![\s,;.!\-–—])[\s,;.!\-–—]+)?\b(?:thanks?(?: a lot| so much)?|thx|ty|cheers|pls|please"
    r"|tia)[\s!.]*$",
    re.IGNORECASE,
)
# In a fenced block (a pasted log, config or trace) only identifier-like tokens are kept:
# snake_case, dotted.names, CamelCase, ALL_CAPS, codes with digits, --flags. A word
# character is \w or a mark a word holds (search.marks): "user_नाम" is kept whole, not
# as "user_न" (docs/decisions/0061-combining-marks-inside-words.md).
_W = W_CLASS
_IDENTIFIER = re.compile(
    rf"--?[A-Za-z][\w{IN_WORD_RANGES}-]+|[A-Za-z_]{_W}*(?:[._:/-][A-Za-z_0-9]{_W}*)+|[A-Za-z]+\d{_W}*"
    rf"|\d+[A-Za-z]{_W}*|[a-z]+[A-Z]{_W}*|[A-Z][a-z0-9]+[A-Z]{_W}*|[A-Z][A-Z0-9_]{{1,}}|{_W}+_{_W}+"
)
FENCE_IDENTIFIERS_MAX = 12
# Identifiers are looked for inside runs of identifier characters only (no match crosses
# one), and a run longer than this is no identifier (a pasted hash or base64 blob): read
# whole, _IDENTIFIER's alternatives would try each start of a long run to its end.
_IDENTIFIER_RUN = re.compile(rf"[\w{IN_WORD_RANGES}.:/-]+")
IDENTIFIER_MAX_CHARS = 80
_WHY = re.compile(r"why(?:\s+(t-[0-9a-f]{6,32}))?\s*[?.!]?", re.IGNORECASE)
_HELP_WORDS = {"", "help", "?", "-h", "--help"}


@dataclass(frozen=True)
class Identity:
    """Who citebot is in this workspace (from auth.test)."""

    bot_user_id: str | None
    bot_id: str | None
    team_id: str | None = None

    def wrote(self, message: dict) -> bool:
        """Whether citebot itself posted this message."""
        return bool(
            (self.bot_id and message.get("bot_id") == self.bot_id)
            or (self.bot_user_id and message.get("user") == self.bot_user_id)
        )

    def from_a_bot(self, event: dict) -> bool:
        """Bots, citebot included, never trigger a turn."""
        return bool(
            event.get("bot_id")
            or event.get("bot_profile")
            or event.get("subtype") == "bot_message"
            or self.wrote(event)
        )


@dataclass(frozen=True)
class Question:
    """A question as it arrived from Slack, cleaned, with where its answer goes.

    Built from an event, it holds Slack's text cut to QUESTION_MAX_CHARS and not yet
    cleaned (`raw`): the adapter claims the event first, so a retried delivery costs no
    cleaning, then calls `cleaned`."""

    text: str
    user: str | None
    channel: str
    surface: str
    reply_thread_ts: str | None  # the thread to answer in; None = top level (a DM)
    thread_key: str | None  # the conversation-state key; None = a standalone question
    message_ts: str | None = None
    event_id: str | None = None
    retry_num: str | None = None
    shared: bool = False  # the channel is shared with another organisation (Slack Connect)
    raw: bool = False  # text is Slack's, cut but not cleaned yet
    cut_from: int | None = None  # the text's length in Slack when it was cut to QUESTION_MAX_CHARS

    @property
    def in_thread(self) -> bool:
        return self.reply_thread_ts is not None and self.reply_thread_ts != self.message_ts


@dataclass(frozen=True)
class Command:
    """A parsed slash command: help, why [turn id], or a question."""

    kind: str  # "help" | "why" | "question"
    argument: str = ""
    note: str = ""  # said with the ack: that only the text's start was read (cut_notice)


def _fence_terms(block: str) -> str:
    """The identifiers of a fenced block, in order, without repeats (at most a dozen)."""
    seen: dict[str, None] = {}
    for run in _IDENTIFIER_RUN.finditer(unescape(block)):
        if run.end() - run.start() <= IDENTIFIER_MAX_CHARS:
            for m in _IDENTIFIER.finditer(run.group(0)):
                seen.setdefault(m.group(0), None)
    return " ".join(list(seen)[:FENCE_IDENTIFIERS_MAX])


def cut(text: object) -> tuple[str, int | None]:
    """Slack's text cut to QUESTION_MAX_CHARS, and its length before when it was cut (else
    None); a text that is not a string (a malformed event) is empty."""
    if not isinstance(text, str):
        return "", None
    if len(text) <= QUESTION_MAX_CHARS:
        return text, None
    return text[:QUESTION_MAX_CHARS], len(text)


def cut_notice(chars: int) -> str:
    """What the asker is told when their text was cut."""
    return (
        f"✂️ Your message is {chars:,} characters long; I read only its first "
        f"{QUESTION_MAX_CHARS:,} and answer from those."
    )


def cleaned(q: Question) -> Question:
    """The question with its text cleaned (clean_question), once; a cut one is logged."""
    if q.cut_from is not None and q.raw:
        log.warning("question_cut", chars=q.cut_from, kept=QUESTION_MAX_CHARS)
    return replace(q, text=clean_question(q.text), raw=False) if q.raw else q


def clean_question(text: str) -> str:
    """The question as a person would say it: without user, channel and special mentions,
    links as their labels, no :emoji:, emphasis markers or quote marks, inline `code` as its
    text, a fenced block as the identifiers it holds, and no "hey @citebot quick q:" or
    "thanks!" around it. Only the first QUESTION_MAX_CHARS characters are read (the callers
    that build a Question cut it first and tell the person: `cut`)."""
    text, cut_from = cut(text)
    if cut_from is not None:
        log.warning("question_cut", chars=cut_from, kept=QUESTION_MAX_CHARS)
    return clean_text(text)


def clean_text(text: str) -> str:
    """clean_question without the cut: linear in the text's length, whatever its markup."""
    text = _FENCE.sub(lambda m: " " + _fence_terms(m.group(1)) + " ", text)
    codes: list[str] = []

    def keep(m: re.Match[str]) -> str:  # code is verbatim: no emoji or emphasis rules inside
        codes.append(m.group(1))
        return f"\x00{len(codes) - 1}\x00"

    text = _CODE.sub(keep, text)
    text = _MENTION.sub(" ", text)
    text = _LINK.sub(lambda m: m.group(2) or m.group(1), text)
    text = _EMOJI.sub(" ", text)
    text = _QUOTE.sub("", text)
    for _ in range(2):  # *_nested_* emphasis
        text = strip_emphasis(text)
    text = re.sub("\x00(\\d+)\x00", lambda m: codes[int(m.group(1))], text)
    text = " ".join(unescape(text).split())
    stripped = _FILLER_END.sub("", _FILLER_START.sub("", text)).strip()
    return stripped if stripped else text


def parse_command(text: str) -> Command:
    t = clean_question(text)
    if t.lower() in _HELP_WORDS:
        return Command("help")
    m = _WHY.fullmatch(t)
    if m:
        return Command("why", m.group(1) or "")
    chars = cut(text)[1]
    return Command("question", t, f"\n{cut_notice(chars)}" if chars is not None else "")


def mention_question(event: dict, event_id: str | None, retry_num: str | None) -> Question:
    """An @mention in a channel: answered in the message's thread."""
    channel = event.get("channel", "")
    ts = event.get("ts")
    thread_ts = event.get("thread_ts") or ts
    text, cut_from = cut(event.get("text"))
    return Question(
        text=text,
        user=event.get("user"),
        channel=channel,
        surface=SURFACE_MENTION,
        reply_thread_ts=thread_ts,
        thread_key=f"{channel}:{thread_ts}",
        message_ts=ts,
        event_id=event_id,
        retry_num=retry_num,
        raw=True,
        cut_from=cut_from,
    )


def message_question(
    event: dict, event_id: str | None, retry_num: str | None, bot_user_id: str | None
) -> Question | None:
    """A direct message, or a reply in a thread (which may be one citebot answered in);
    None for anything citebot does not answer from a message event."""
    channel = event.get("channel", "")
    ts = event.get("ts")
    thread_ts = event.get("thread_ts")
    given = event.get("text")
    whole = given if isinstance(given, str) else ""
    text, cut_from = cut(whole)
    if event.get("channel_type") == "im":
        return Question(
            text=text,
            user=event.get("user"),
            channel=channel,
            surface=SURFACE_DM,
            reply_thread_ts=thread_ts,
            thread_key=f"{channel}:{thread_ts}" if thread_ts else channel,
            message_ts=ts,
            event_id=event_id,
            retry_num=retry_num,
            raw=True,
            cut_from=cut_from,
        )
    if not thread_ts or thread_ts == ts:
        return None  # channel chatter; citebot answers mentions there
    if bot_user_id and f"<@{bot_user_id}" in whole:
        return None  # a mention anywhere in it, past the cut too: app_mention answers it
    return Question(
        text=text,
        user=event.get("user"),
        channel=channel,
        surface=SURFACE_THREAD,
        reply_thread_ts=thread_ts,
        thread_key=f"{channel}:{thread_ts}",
        message_ts=ts,
        event_id=event_id,
        retry_num=retry_num,
        raw=True,
        cut_from=cut_from,
    )

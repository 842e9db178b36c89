"""Block Kit rendering of turns within Slack's limits: answers, explanations, help, notices.

Slack's limits (api.slack.com/reference/block-kit): a section's text is at most 3,000
characters, a message's markdown blocks 12,000 in all, and a message at most 50 blocks.
Claude's text goes in `markdown` blocks, ours in mrkdwn sections. Longer answers split
cleanly (bot.slack.split) into more blocks and, past a message's limits, more messages;
the sources, turn id and buttons always close the last one. Every piece of text that
came from a document or a person is escaped (&, <, >) so it can never become a mention,
a link or a broken entity, and a link written in an answer's text is shown with its
address (bot.answer.textlinks): the only links are citebot's own sources.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from slack_sdk.models.blocks import (
    ActionsBlock,
    Block,
    ButtonElement,
    ContextActionsBlock,
    ContextBlock,
    DividerBlock,
    FeedbackButtonObject,
    FeedbackButtonsElement,
    MarkdownBlock,
    MarkdownTextObject,
    SectionBlock,
)

from bot.answer.gate import CLOSEST
from bot.answer.record import LoggedTurn, TurnRecord
from bot.answer.textlinks import visible_links
from bot.owners.stale import WORDING as STALE_WORDING
from bot.slack.mrkdwn import escape, pack_lines, passage_line, unescape  # noqa: F401 (unescape: re-exported)
from bot.slack.split import MARKDOWN_MAX, SECTION_TEXT_MAX, split_markdown, split_text

MESSAGE_BLOCKS_MAX = 50
# The notification text of a message; Slack would truncate at 40,000, people read far less.
FALLBACK_TEXT_MAX = 3000
# A quoted question or passage line in a context element stays readable at this length.
SNIPPET_MAX = 300
# Candidates listed by an explanation; the whole list is in `citebot turns show`.
EXPLAIN_CANDIDATES = 8

# Native feedback (a context_actions block with feedback_buttons): value "<vote>:<turn id>".
ACTION_FEEDBACK = "citebot_feedback"
# The 👍/👎 buttons of answers posted before native feedback; still understood.
ACTION_FEEDBACK_UP = "citebot_feedback_up"
ACTION_FEEDBACK_DOWN = "citebot_feedback_down"
ACTION_SHARE = "citebot_share"
ACTION_WHY = "citebot_why"
FEEDBACK_VALUES = {ACTION_FEEDBACK_UP: "helpful", ACTION_FEEDBACK_DOWN: "not_helpful"}


@dataclass(frozen=True)
class SlackMessage:
    """One message to post: notification text and its blocks (SDK models, validated)."""

    text: str
    blocks: tuple[Block, ...] = field(default_factory=tuple)

    def block_dicts(self) -> list[dict]:
        return [b.to_dict() for b in self.blocks]


def truncate(text: str, limit: int) -> str:
    """At most `limit` characters, cut at a word boundary with an ellipsis."""
    if len(text) <= limit:
        return text
    cut = text.rfind(" ", 0, limit - 1)
    if cut < limit // 2:
        cut = limit - 1
    return text[:cut].rstrip() + "…"


def _sections(text: str) -> list[Block]:
    return [SectionBlock(text=MarkdownTextObject(text=p)) for p in split_text(text)]


def _context(*texts: str) -> ContextBlock:
    return ContextBlock(elements=[MarkdownTextObject(text=truncate(t, SECTION_TEXT_MAX)) for t in texts])


def _button(text: str, action_id: str, turn_id: str, style: str | None = None) -> ButtonElement:
    return ButtonElement(text=text, action_id=action_id, value=turn_id, style=style)


def _heading(heading_path: list[str] | tuple[str, ...]) -> str:
    return " › ".join(heading_path)


def feedback_value(vote: str, turn_id: str) -> str:
    return f"{vote}:{turn_id}"


def parse_feedback(value: str) -> tuple[str, str] | None:
    """(vote, turn id) from a feedback button's value; None when it is not one of ours."""
    vote, _, turn_id = value.partition(":")
    if vote not in FEEDBACK_VALUES.values() or not turn_id:
        return None
    return vote, turn_id


def cited_numbers(record: TurnRecord) -> set[int]:
    out: set[int] = set()
    for c in record.citations:
        m = re.fullmatch(r"\[(\d+)\]", str(c.get("marker", "")))
        if m and c.get("resolved"):
            out.add(int(m.group(1)))
    return out


def failed_checks(record: TurnRecord) -> int:
    return sum(1 for q in record.quotes if not q.get("verified")) + sum(
        1 for c in record.citations if not (c.get("resolved") and c.get("retrieved"))
    )


def _checks_summary(record: TurnRecord) -> str:
    if record.error:
        return "⚠️ not answered: an error stopped this turn"
    if record.refused:
        return "🚫 not covered by the collection"
    parts = [
        "🔎 the closest the documents come: they may not answer this directly" if record.outcome == CLOSEST else ""
    ]
    ok_citations = sum(1 for c in record.citations if c.get("resolved") and c.get("retrieved"))
    if ok_citations:
        parts.append(f"✅ {ok_citations} citation{'s' if ok_citations != 1 else ''} resolve")
    ok_quotes = sum(1 for q in record.quotes if q.get("verified"))
    if ok_quotes:
        parts.append(f"✅ {ok_quotes} quotation{'s' if ok_quotes != 1 else ''} found in the source")
    failed = failed_checks(record)
    if failed:
        parts.append(f"⚠️ {failed} check{'s' if failed != 1 else ''} failed (flagged inline)")
    if record.unsupported:
        parts.append("⚠️ unsupported")
    return " · ".join(p for p in parts if p) or "no checks applied"


def _markdown_chars(blocks: list[Block]) -> int:
    return sum(len(b.text) for b in blocks if isinstance(b, MarkdownBlock))


def _pack(head: list[Block], trailer: list[Block], texts: list[str]) -> list[SlackMessage]:
    """Messages of at most 50 blocks and 12,000 characters of markdown blocks: head blocks
    in order, the trailer whole in the last one."""
    groups: list[list[Block]] = []
    current: list[Block] = []
    for block in head:
        if len(current) == MESSAGE_BLOCKS_MAX or (current and _markdown_chars([*current, block]) > MARKDOWN_MAX):
            groups.append(current)
            current = []
        current.append(block)
    if len(current) + len(trailer) > MESSAGE_BLOCKS_MAX:
        groups.append(current)
        current = []
    groups.append(current + trailer)
    messages = []
    for i, blocks in enumerate(groups):
        text = texts[min(i, len(texts) - 1)] if i == 0 else f"(continued {i + 1}/{len(groups)})"
        messages.append(SlackMessage(text=text, blocks=tuple(blocks)))
    return messages


def render_turn(
    record: TurnRecord,
    *,
    ephemeral: bool = False,
    shared_by: str | None = None,
    show_question: bool = False,
    url_template: str | None = None,
) -> list[SlackMessage]:
    """The answer (or refusal, or error) with sources (links with CITEBOT_SOURCE_URL),
    checks, turn id, buttons and Slack's native feedback buttons."""
    head: list[Block] = []
    if shared_by:
        head.append(_context(f"<@{escape(shared_by)}> shared an answer from citebot"))
    if show_question or shared_by:
        head.append(_context("*Q:* " + escape(truncate(record.question, SNIPPET_MAX))))
    head.extend(answer_blocks(record))
    fallback = escape(truncate(visible_links(record.answer), FALLBACK_TEXT_MAX - 40))
    if record.turn_id not in fallback:  # a failure's text names its turn already
        fallback += f" (turn {escape(record.turn_id)})"
    return _pack(head, turn_trailer(record, ephemeral=ephemeral, url_template=url_template), [fallback])


def written_by_model(record: TurnRecord) -> bool:
    """Claude's own text (not a refusal, an error or an extractive fallback)."""
    return record.model is not None and not record.refused and not record.error


def answer_blocks(record: TurnRecord) -> list[Block]:
    """The answer's text: Claude's in `markdown` blocks (Slack renders its Markdown), one
    per message's 12,000 characters; ours in mrkdwn sections. Either way a link the text
    writes is shown with its address (bot.answer.textlinks): only the sources are links."""
    text = escape(visible_links(record.answer)) or "(empty answer)"
    if written_by_model(record):
        return [MarkdownBlock(text=piece) for piece in split_markdown(text, MARKDOWN_MAX)]
    return _sections(text)


def turn_trailer(record: TurnRecord, *, ephemeral: bool = False, url_template: str | None = None) -> list[Block]:
    """What closes an answer: sources, checks, turn id, buttons and native feedback."""
    trailer: list[Block] = []
    if record.passages and not record.refused and not record.error:
        cited = cited_numbers(record)
        shown = [p for p in record.passages if p.get("number") in cited] or record.passages
        lines = [passage_line(p, url_template) for p in shown]
        trailer.append(DividerBlock())
        trailer.extend(
            SectionBlock(text=MarkdownTextObject(text=t)) for t in pack_lines("*Sources*", lines, SECTION_TEXT_MAX)
        )
    details = [_checks_summary(record)]
    if record.label and not record.error:
        details.append(escape(record.label))
    details.append(f"turn `{escape(record.turn_id)}`")
    trailer.append(_context(" · ".join(details)))
    buttons: list[ButtonElement] = []
    if ephemeral and not record.error:
        buttons.append(_button("Share in channel", ACTION_SHARE, record.turn_id, "primary"))
    buttons.append(_button("Why this answer?", ACTION_WHY, record.turn_id))
    trailer.append(ActionsBlock(block_id=f"citebot_turn_{record.turn_id}", elements=buttons))
    if not record.error:
        trailer.append(
            ContextActionsBlock(
                block_id=f"citebot_feedback_{record.turn_id}",
                elements=[
                    FeedbackButtonsElement(
                        action_id=ACTION_FEEDBACK,
                        positive_button=FeedbackButtonObject(
                            text="Helpful",
                            value=feedback_value("helpful", record.turn_id),
                            accessibility_label="This answer helped",
                        ),
                        negative_button=FeedbackButtonObject(
                            text="Not helpful",
                            value=feedback_value("not_helpful", record.turn_id),
                            accessibility_label="This answer did not help",
                        ),
                    )
                ],
            )
        )
    return trailer


def render_progress(turn_id: str, question: str) -> SlackMessage:
    """The placeholder shown at once and replaced in place by the answer."""
    text = f"🔎 Looking through the collection for: _{escape(truncate(question, SNIPPET_MAX))}_"
    return SlackMessage(
        text=f"Looking through the collection… (turn {turn_id})", blocks=(_context(text, f"turn `{escape(turn_id)}`"),)
    )


def render_notice(text: str, turn_id: str | None = None) -> SlackMessage:
    """A short message of our own (rate limit, missing question); `text` is already mrkdwn."""
    blocks: list[Block] = list(_sections(text))
    if turn_id:
        blocks.append(_context(f"turn `{escape(turn_id)}`"))
    plain = truncate(text, FALLBACK_TEXT_MAX)
    if turn_id and turn_id not in plain:  # a failure's text names its turn already
        plain += f" (turn {turn_id})"
    return SlackMessage(text=plain, blocks=tuple(blocks))


def render_help(command: str, per_minute: int) -> SlackMessage:
    c = escape(command)
    text = (
        "*citebot* answers from the team's documents; every claim is cited, every quotation "
        "checked against its source, and it says so when the documents do not cover a question.\n\n"
        f"• `{c} How often does the release train leave?` — an answer only you see, with a "
        "button to share it in the channel\n"
        f"• `{c} why` — why my last answer said what it did (passages, ranks, checks); "
        f"`{c} why t-…` for a given turn\n"
        f"• `{c} help` — this message\n"
        "• Mention me in a channel — the answer arrives in the thread; reply in that thread "
        "to ask a follow-up\n"
        "• Send me a direct message — a private conversation\n"
        "• On any message, ⋮ → *Ask citebot about this* — an answer about it only you see\n\n"
        f"Each answer ends with its turn id and 👍/👎 buttons; up to {per_minute} questions "
        "a minute per person."
    )
    return SlackMessage(text="How to use citebot", blocks=tuple(_sections(text)))


def current_votes(turn: LoggedTurn) -> dict[str | None, str]:
    """One vote per person: their latest click (the turn log keeps every click, in order)."""
    votes: dict[str | None, str] = {}
    for f in turn.feedback:
        votes[f.user] = f.value
    return votes


def _ms(value: object) -> str:
    return f"{float(value):.0f} ms" if isinstance(value, (int, float)) else "?"


def render_explanation(turn: LoggedTurn, stale: Sequence[dict] = ()) -> SlackMessage:
    """Why a turn said what it did: query, support, passages, ranks, checks, feedback, and
    the cited passages that have changed since (`stale`, bot/owners/stale.py)."""
    r = turn.record
    e = escape
    parts: list[str] = [f"*Why turn `{e(r.turn_id)}` said what it did*"]
    if stale:
        sources = sorted({str(s.get("source")) for s in stale})
        parts.append(f"⚠️ *Stale:* {STALE_WORDING} ({e(', '.join(sources))}).")
    who = [f"<@{e(r.user)}>" if r.user else None, f"<#{e(r.channel)}>" if r.channel else None]
    parts.append(
        f"*Question* ({', '.join(w for w in who if w) or r.surface}, {e(r.created_at[:19])}Z): "
        + e(truncate(r.question, SNIPPET_MAX))
        + (
            f"\n*Searched for:* {e(truncate(r.condensed_query, SNIPPET_MAX))}"
            if r.condensed_query != r.question
            else ""
        )
    )
    if r.error:
        outcome = f"*Outcome:* not answered — {e(truncate(r.error, SNIPPET_MAX))}"
    elif r.refused:
        outcome = f"*Outcome:* refused — {e(r.refusal_reason or 'no reason recorded')}"
    elif r.outcome == CLOSEST:
        outcome = (
            f"*Outcome:* the closest the documents come, by the {e(r.composer or '?')} composer"
            f" — {e(r.closest_reason or 'no reason recorded')}"
        )
    else:
        outcome = (
            f"*Outcome:* answered by the {e(r.composer or '?')} composer"
            + (f" ({e(r.model)})" if r.model else "")
            + (f" — {e(r.label)}" if r.label else "")
        )
    if r.support:
        s = r.support
        dense = s.get("dense_top")
        coverage = s.get("coverage")
        bits = []
        if isinstance(dense, (int, float)):
            bits.append(f"best similarity {dense:.2f}")
        if isinstance(coverage, (int, float)):
            bits.append(f"{coverage:.0%} of the question's words found")
        if s.get("addressed"):
            bits.append("a rare term or phrase points at a passage")
        if bits:
            outcome += "\n*Support:* " + ", ".join(bits)
    parts.append(outcome)
    if r.passages:
        # As text, not links: this part is cut into sections anywhere, and could cut a link.
        lines = [passage_line({**p, "url": None}) for p in r.passages]
        parts.append("*Passages given to the composer*\n" + "\n".join("• " + ln for ln in lines))
    if r.candidates:
        given = {p.get("chunk_id"): p.get("number") for p in r.passages}
        lines = []
        for i, c in enumerate(r.candidates[:EXPLAIN_CANDIDATES], 1):
            ranks = f"dense #{c.get('dense_rank') or '–'} · lexical #{c.get('lexical_rank') or '–'}"
            score = c.get("score")
            fused = f"fused {score:.4f}" if isinstance(score, (int, float)) else "fused ?"
            reasons = f" ({e(', '.join(c.get('reasons') or []))})" if c.get("reasons") else ""
            number = given.get(c.get("chunk_id"))
            passage = f" → passage [{number}]" if number is not None else ""
            lines.append(f"{i}. {e(str(c.get('source', '')))} — {fused} · {ranks}{reasons}{passage}")
        more = len(r.candidates) - EXPLAIN_CANDIDATES
        parts.append(
            "*Retrieval ranking* (both arms, fused)\n" + "\n".join(lines) + (f"\n…and {more} more" if more > 0 else "")
        )
    checks = []
    for c in r.citations:
        ok = c.get("resolved") and c.get("retrieved")
        state = (
            "resolves to a passage given"
            if ok
            else ("points to no passage given" if not c.get("resolved") else "cites a passage not retrieved")
        )
        checks.append(f"{'✅' if ok else '⚠️'} {e(str(c.get('marker')))} {state}")
    for q in r.quotes:
        snippet = e(truncate(visible_links(str(q.get("text", ""))), 120))
        verdict = "found in its passage" if q.get("verified") else e(str(q.get("reason") or "not found"))
        mark = "✅" if q.get("verified") else "⚠️"
        checks.append(f"{mark} “{snippet}” {e(str(q.get('marker', '')))} {verdict}")
    if checks:
        parts.append("*Checks*\n" + "\n".join(checks))
    if r.expansions or r.corrections:
        notes = [f"{e(x.get('found', ''))} → {e(x.get('expands_to', ''))}" for x in r.expansions]
        notes += [f"{e(k)} → {e(v)} (spelling)" for k, v in r.corrections.items()]
        parts.append("*Query rewrites:* " + "; ".join(notes))
    if turn.feedback:
        votes = current_votes(turn)
        up = sum(1 for v in votes.values() if v == "helpful")
        parts.append(f"*Feedback:* {up} helpful, {len(votes) - up} not helpful")
    timings = r.timings_ms
    if timings:
        stages = {
            "retrieve": timings.get("retrieve_total"),
            "compose": timings.get("compose"),
            "checks": timings.get("checks"),
        }
        main = ", ".join(f"{k} {_ms(v)}" for k, v in stages.items() if v is not None)
        parts.append(f"*Time:* {_ms(timings.get('total'))}" + (f" ({main})" if main else ""))
    parts.append(f"Whole record: `citebot turns show {e(r.turn_id)}`")
    blocks = _sections("\n\n".join(parts))[:MESSAGE_BLOCKS_MAX]
    return SlackMessage(text=f"Why turn {r.turn_id} said what it did", blocks=tuple(blocks))

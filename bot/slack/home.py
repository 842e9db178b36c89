"""The Home tab: what citebot covers for this person, how to ask it, and their latest turns.

Published with views.publish when a person opens the tab (app_home_opened, tab "home").
What it covers is read from the store under the scope this person's direct messages use
(their [users.U…] table, else [default]): documents and passages in that scope, by folder,
never a source outside it and nothing about other channels' scopes. The latest turns are
theirs only (bot.slack.recent, each checked against who asked it in the turn log), shown by
question, place, outcome and turn id, never by sources: a turn asked in another channel may
cite sources this scope does not reach.

A part that cannot be read (the store, the turn log, a malformed record) is said in the
view, logged and counted (citebot_home_failures_total{part}); a views.publish that Slack
refuses is logged and counted too. Nothing here fails the listener.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

import structlog
from slack_sdk import WebClient
from slack_sdk.models.blocks import Block, ContextBlock, DividerBlock, HeaderBlock, MarkdownTextObject, SectionBlock
from slack_sdk.models.views import View

from bot.answer.gate import CLOSEST
from bot.answer.record import LoggedTurn, TurnRecord
from bot.metrics import HOME_FAILURES
from bot.owners.stale import WORDING as STALE_WORDING
from bot.owners.stale import cited, stale_of
from bot.slack.client import SLACK_ERRORS, slack_failed
from bot.slack.inbound import SURFACE_COMMAND, SURFACE_SHORTCUT
from bot.slack.render import SECTION_TEXT_MAX, SNIPPET_MAX, escape, failed_checks, truncate
from bot.slack.scopes import ChannelPolicy, Scopes
from bot.slack.shortcut import SHORTCUT_NAME
from bot.slack.turns import TurnRunner
from search.scope import Scope, limiting
from search.store import Store

log = structlog.get_logger("citebot.slack")

# Turns listed; `/ask why t-…` explains any of them.
HOME_TURNS = 5
# Folders listed by name (the rest are counted), and example documents named per folder.
FOLDERS_SHOWN = 12
EXAMPLES_PER_FOLDER = 3
# People open the tab far more often than anyone ingests, and the Elasticsearch store reads
# every document record to count them: a count a minute old is good enough.
COVERAGE_TTL_S = 60.0


@dataclass(frozen=True)
class Folder:
    """One folder of the collection as a scope sees it ("" = documents at the top)."""

    name: str
    documents: int
    examples: tuple[str, ...]


@dataclass(frozen=True)
class Coverage:
    """What one scope may read: documents, passages, and the documents by folder."""

    documents: int
    passages: int
    folders: tuple[Folder, ...]


def measure_coverage(store: Store, scope: Scope) -> Coverage:
    """Documents and passages the scope allows, grouped by the first folder below the
    folder every allowed source shares (so `examples/handbook/people/x.md` counts under
    `people/` when the whole collection sits in `examples/handbook/`)."""
    sources = sorted(s for s in store.document_hashes() if scope.allows(s))
    passages = store.chunk_count(scope=limiting(scope))
    common = _common_folder(sources)
    groups: dict[str, list[str]] = {}
    for source in sources:
        rest = source[len(common) :]
        folder, sep, _ = rest.partition("/")
        groups.setdefault(folder + "/" if sep else "", []).append(rest)
    folders = tuple(
        Folder(
            common + name if name else common,
            len(members),
            tuple(m[len(name) :] for m in members[:EXAMPLES_PER_FOLDER]),
        )
        for name, members in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    )
    return Coverage(len(sources), passages, folders)


def _common_folder(sources: list[str]) -> str:
    """The longest folder prefix ("a/b/") of every source; "" when they share none."""
    if not sources:
        return ""
    parts = [s.split("/")[:-1] for s in sources]
    common: list[str] = []
    for names in zip(*parts, strict=False):
        if len(set(names)) != 1:
            break
        common.append(names[0])
    return "".join(n + "/" for n in common)


class HomeTab:
    """Builds and publishes each person's Home tab: the store, the turn log and the recent
    turns are read through the bot's TurnRunner."""

    def __init__(
        self,
        runner: TurnRunner,
        client: WebClient,
        scopes: Scopes,
        command: str,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.runner = runner
        self.client = client
        self.scopes = scopes
        self.command = command
        self.clock = clock
        self._coverage: dict[tuple[str, ...], tuple[float, Coverage]] = {}
        self._lock = threading.Lock()

    # -- the listener --------------------------------------------------------------------
    def on_opened(self, body: dict, event: dict) -> None:
        user = event.get("user")
        with self.runner.job(user=user, event_id=body.get("event_id"), surface="slack_home"):
            if event.get("tab") != "home" or not user:
                return  # the Messages tab, or a payload without a person
            self.publish(str(user), str(event.get("channel") or ""))

    def publish(self, user: str, channel: str = "") -> bool:
        """Build and publish the view; False (logged and counted) when that failed."""
        try:
            view = self.view(user, channel)
        except Exception:  # a bug in building: logged, counted, not raised
            HOME_FAILURES.labels("publish").inc()
            log.exception("home_view_failed")
            return False
        try:
            self.client.views_publish(user_id=user, view=view.to_dict())
        except SLACK_ERRORS as exc:
            HOME_FAILURES.labels("publish").inc()
            log.error("home_publish_failed", error=slack_failed(exc))
            return False
        log.info("home_published", blocks=len(view.blocks or []))
        return True

    # -- the view ------------------------------------------------------------------------
    def view(self, user: str, channel: str = "") -> View:
        # The app's DM with this person is a D… channel; its policy is their [users] table,
        # else the default (a table for that very channel wins, as for any DM).
        policy = self.scopes.for_channel(channel if channel.startswith("D") else "D", user, own_dm=True)
        blocks: list[Block] = [HeaderBlock(text="citebot")]
        blocks.append(
            _section(
                "I answer questions from the team's documents. Every claim cites the passage it "
                "comes from, every quotation is checked against the source, and when the documents "
                "do not cover a question I say so and show the nearest passages instead of guessing."
            )
        )
        blocks.append(DividerBlock())
        blocks.extend(self._covers(policy))
        blocks.append(DividerBlock())
        blocks.append(_section(self._how_to_ask()))
        blocks.append(DividerBlock())
        blocks.extend(self._turns(user))
        return View(type="home", blocks=blocks)

    def _covers(self, policy: ChannelPolicy) -> list[Block]:
        users_table = policy.scope.name.startswith("users.")
        where = (
            "Your direct messages with me"
            if users_table
            else "Direct messages, and channels without a scope of their own,"
        )
        head = "*What I cover here*\n"
        if policy.reply == "off":
            return [
                _section(head + "Direct messages are turned off in this workspace; ask me in a channel where I answer.")
            ]
        try:
            cov = self.coverage(policy.scope)
        except Exception as exc:  # said in the view, the cause in the log
            HOME_FAILURES.labels("coverage").inc()
            log.error("home_coverage_failed", error=str(exc), exc_info=exc)
            return [
                _section(
                    head + "I can't read the collection right now, so I can't say "
                    "what it holds. Questions may fail too; please try again later."
                )
            ]
        if cov.documents == 0:
            return [
                _section(
                    head + f"{where} are answered from no documents yet: nothing in the collection is open to them."
                )
            ]
        plural = "s" if cov.documents != 1 else ""
        lines = [f"{where} are answered from *{cov.documents} document{plural}* " + f"({cov.passages} passages):"]
        for folder in cov.folders[:FOLDERS_SHOWN]:
            name = f"`{escape(folder.name)}`" if folder.name else "at the top"
            more = folder.documents - len(folder.examples)
            examples = ", ".join(escape(e) for e in folder.examples) + (f" and {more} more" if more > 0 else "")
            lines.append(f"• {name} — {folder.documents} document{'s' if folder.documents != 1 else ''}: {examples}")
        rest = cov.folders[FOLDERS_SHOWN:]
        if rest:
            lines.append(f"• …and {len(rest)} more folders ({sum(f.documents for f in rest)} documents)")
        blocks: list[Block] = [_section(head + "\n".join(lines))]
        blocks.append(
            ContextBlock(
                elements=[
                    MarkdownTextObject(
                        text="A channel may be answered from a different part of the collection; ask there "
                        "to see what it covers."
                    )
                ]
            )
        )
        return blocks

    def coverage(self, scope: Scope) -> Coverage:
        """The scope's coverage, measured at most once a COVERAGE_TTL_S per scope."""
        now = self.clock()
        with self._lock:
            cached = self._coverage.get(scope.key)
        if cached and cached[0] > now:
            return cached[1]
        store = self.runner.answerer().retriever.store
        measured = measure_coverage(store, scope)
        with self._lock:
            self._coverage[scope.key] = (now + COVERAGE_TTL_S, measured)
        return measured

    def _how_to_ask(self) -> str:
        c = escape(self.command)
        return (
            "*How to ask*\n"
            "• *Mention me* in a channel I'm in — `@citebot how often does the release train "
            "leave?` — and the answer arrives in the thread; reply in that thread to follow up.\n"
            "• *Message me* in the Messages tab — a private conversation.\n"
            f"• *`{c} your question`* in any channel — an answer only you see, with a button to "
            "share it.\n"
            f"• *{escape(SHORTCUT_NAME)}* on any message (its ⋮ menu) — an answer about that "
            "message, only you see it, in its thread, with a button to share it.\n"
            f"• `{c} why` explains my last answer to you, `{c} why t-…` any turn of yours; "
            f"`{c} help` lists the commands."
        )

    def _turns(self, user: str) -> list[Block]:
        head = "*Your latest questions*"
        try:
            turn_ids = self.runner.recent.recent(user, HOME_TURNS)
        except Exception as exc:  # noqa: BLE001 - said in the view, the cause in the log
            HOME_FAILURES.labels("turns").inc()
            log.error("home_turns_failed", error=str(exc))
            return [_section(head + "\nI can't read your recent turns right now.")]
        lines: list[str] = []
        unreadable = 0
        for turn_id in turn_ids:
            try:
                line = self._turn_line(turn_id, user)
            except Exception as exc:  # noqa: BLE001 - one bad record never hides the others
                HOME_FAILURES.labels("turns").inc()
                log.warning("home_turn_unreadable", listed_turn=turn_id[:40], error=str(exc))
                unreadable += 1
                continue
            if line:
                lines.append(line)
        if unreadable:
            lines.append(f"_{unreadable} more I can't read back from the turn log right now._")
        if not lines:
            return [
                _section(
                    head + "\nNone yet — ask me something, and your questions will be listed here with their turn ids."
                )
            ]
        blocks: list[Block] = [_section(head)]
        blocks.extend(_section(line) for line in lines)
        blocks.append(
            ContextBlock(
                elements=[
                    MarkdownTextObject(
                        text=f"Only you see this list. `{escape(self.command)} why t-…` explains a turn; "
                        "`citebot turns show t-…` prints its whole record."
                    )
                ]
            )
        )
        return blocks

    def _turn_line(self, turn_id: str, user: str) -> str | None:
        """One turn as a line; None for a turn the log no longer holds or another person's."""
        raw = self.runner.turnlog.get_turn(turn_id)
        if raw is None:
            return None  # expired
        if not isinstance(raw, dict):
            raise TypeError(f"the turn log holds a {type(raw).__name__}, not a record")
        record = LoggedTurn.from_log(raw).record
        if record.user != user:
            log.warning("home_turn_not_theirs", listed_turn=turn_id)
            return None
        where = _where(record, self.command)
        stale = f" · ⚠️ {STALE_WORDING}" if self._stale(raw) else ""
        return (
            f"`{escape(str(record.turn_id))}` · {_when(record.created_at)} · {where}"
            f" · {_outcome(record)}{stale}\n>{escape(truncate(str(record.question), SNIPPET_MAX))}"
        )

    def _stale(self, raw: dict) -> bool:
        """Whether a passage the turn cited has changed since (bot/owners/stale.py); a store
        that cannot be read leaves the line as it was, and the log says why."""
        if not cited(raw):
            return False
        try:
            return bool(stale_of(self.runner.answerer().retriever.store, raw))
        except Exception as exc:  # noqa: BLE001 - the line stands without it
            log.warning("home_stale_check_failed", error=str(exc))
            return False


def _section(text: str) -> SectionBlock:
    return SectionBlock(text=MarkdownTextObject(text=truncate(text, SECTION_TEXT_MAX)))


def _when(created_at: object) -> str:
    """Slack's own date formatting (in the reader's time zone), with a UTC fallback."""
    try:
        at = datetime.fromisoformat(str(created_at))
        fallback = at.strftime("%Y-%m-%d %H:%M UTC")
        return f"<!date^{int(at.timestamp())}^{{date_short_pretty}} {{time}}|{fallback}>"
    except (TypeError, ValueError, OverflowError):
        return escape(str(created_at)[:19]) or "?"


def _where(record: TurnRecord, command: str) -> str:
    channel = str(record.channel or "")
    if not channel:
        return "the command line" if record.surface == "cli" else "?"
    if channel.startswith("D"):
        return "a direct message"
    place = f"<#{escape(channel)}>"
    if record.surface == SURFACE_COMMAND:
        return f"`{escape(command)}` in {place}"
    if record.surface == SURFACE_SHORTCUT:
        return f"{escape(SHORTCUT_NAME)} in {place}"
    return place


def _outcome(record: TurnRecord) -> str:
    if record.error:
        return "⚠️ not answered (an error)"
    if record.refused:
        return "🚫 not covered by the collection"
    failed = failed_checks(record)
    return ("🔎 the closest the documents come" if record.outcome == CLOSEST else "✅ answered") + (
        f", ⚠️ {failed} check{'s' if failed != 1 else ''} flagged" if failed else ""
    )

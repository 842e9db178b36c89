"""Releasing a streamed answer one checked sentence at a time.

While the model writes, the text so far is cut where the checks cut it (a sentence end, not
inside a quotation: bot.answer.checks.cited_sentences), and each finished sentence is
checked (its citations and quotations) and handed on with its flags, so a reader never sees
a quotation before its check, and its flag arrives with it.

A sentence end is final only once the text after it shows it cannot grow: a sentence ends
after its closing quotes, its [N] markers and a full stop after those, and "e.g. the" is no
end, so the end is settled when a character that none of those can start follows it (not a
`[`, and after white space; a Chinese or Japanese mark's end needs no white space). Nothing
is released:
- before the first sentence with a citation that passes (an answer that cites nothing given
  is shown whole at the end, behind the turn's "Unsupported" warning);
- while the reply may still be the refusal format (`NOT_COVERED: …`), which is never shown;
- when the claims are judged (the judge reads the finished answer; it is then shown whole).

The turn's own checks still run on the whole answer, exactly as without streaming, and its
answer is the one that counts: what was released is, by construction, its beginning (each
piece is checked alone, and a piece holds whole quotations and markers, so its checks and
flags are the whole answer's), and the Slack adapter shows the rest of it after them, or,
should they ever differ (the model's stream broke and another answer was served), replaces
the streamed message with it.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator

import structlog

from bot.answer import sentences
from bot.answer.checks import check_answer, flag_inline
from bot.answer.prompt import REFUSAL_TOKEN

log = structlog.get_logger("citebot.turn")

Sink = Callable[[str], None]

_LEAD = re.compile(r"^\s*\W*")  # what the refusal format allows before its token
# A straight quote after a Chinese or Japanese mark is the end's once a [N] marker follows
# it (bot.answer.sentences): until the marker is whole or something else follows, it may be.
_QUOTE_BEFORE_MARKER = re.compile(r'"\s*(?:\[\d*)?')


def may_be_refusal(text: str) -> bool:
    """Whether the reply so far is, or may still become, `NOT_COVERED: …`."""
    head = _LEAD.sub("", text, count=1)
    return REFUSAL_TOKEN.startswith(head[: len(REFUSAL_TOKEN)])


def settled(text: str, m: re.Match[str]) -> bool:
    """Whether a sentence end (a match of SENTENCE_END) is final, whatever text comes after."""
    rest = text[m.end() :]
    following = rest.lstrip()
    if not following or following[0] == "[":  # nothing yet, or more markers may follow
        return False
    # Straight after the end (no white space) only a line break's end can stand, or a Chinese
    # or Japanese mark's (。！？), which needs no space: "。」" or "。[1]" is matched whole
    # before what follows it is looked at.
    if sentences.unspaced(m.group(0)):
        return _QUOTE_BEFORE_MARKER.fullmatch(rest) is None
    return rest[0].isspace() or m.group(0)[-1] == "\n"


def settled_ends(text: str, after: int = 0) -> Iterator[int]:
    """The final sentence ends of the text so far past `after`, in order (the checks'
    sentence ends: none inside a quotation unless it is a blank line). `after` is 0 or a
    settled end, where the scan may start (the matches after it are the same)."""
    counted = 0  # inside_quotation(text, end), counted on from the last end (linear, not n²)
    straight = opening = closing = 0
    for m in sentences.SENTENCE_END.finditer(text, after):
        end = m.end()
        if end <= after:
            continue
        blank_line = not m.group(0).strip() and m.group(0) != "\n"
        piece, counted = text[counted:end], end
        straight += piece.count('"')
        opening += piece.count("\u201c")
        closing += piece.count("\u201d")
        if not blank_line and (straight % 2 == 1 or opening > closing):
            continue
        if not settled(text, m):
            return
        yield end


class SentenceRelease:
    """Fed the model's text as it streams; hands each checked, flagged sentence to `sink`.

    `passages` and `retrieved` are what the turn's checks use. A sink that fails stops the
    release (the rest of the answer is then delivered whole, by the caller's fallback)."""

    def __init__(
        self, sink: Sink, passages: dict[int, tuple[str, str]], retrieved: set[str], *, started: float | None = None
    ) -> None:
        self.sink = sink
        self.passages = passages
        self.retrieved = retrieved
        self.text = ""
        self.released = 0  # characters of the model's text released
        self.shown = ""  # what was handed to the sink: those characters with their flags
        self.pieces = 0
        self.stopped: str | None = None
        self.started = time.perf_counter() if started is None else started
        self.first_ms: float | None = None  # from `started` to the first piece released

    def feed(self, delta: str) -> None:
        self.text += delta
        if self.stopped is None and not may_be_refusal(self.text):
            self._release()

    def _release(self) -> None:
        for end in settled_ends(self.text, self.released):
            piece = self.text[self.released : end]
            report = check_answer(piece, self.passages, self.retrieved)
            if not self.shown and report.valid_citations == 0:
                continue  # held: it goes out with the first sentence whose citation passes
            flagged = flag_inline(piece, report)
            try:
                self.sink(flagged)
            except Exception as exc:  # noqa: BLE001 - the sink is the caller's; it logs its own
                self.stopped = f"{type(exc).__name__}: {exc}"
                log.warning("release_stopped", error=self.stopped, pieces=self.pieces)
                return
            self.released = end
            self.shown += flagged
            self.pieces += 1
            if self.first_ms is None:
                self.first_ms = round((time.perf_counter() - self.started) * 1000, 2)

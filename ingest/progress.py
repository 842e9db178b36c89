"""The ingest progress line: files, chunks and windows, the rate and an ETA.

Drawn on stderr only when it is a terminal (and never with --json): one line rewritten
in place, at most every REDRAW_S seconds, cleared at the end.

The ETA is measured in characters of the documents still to embed, not in files: a
collection's files differ by orders of magnitude in size (one 400-page manual beside
pages of a paragraph), while the model's work follows the text's length. Characters
done over seconds spent gives the rate; what is left over that rate, the ETA.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

REDRAW_S = 0.5


def eta_seconds(done: float, total: float, elapsed_s: float) -> float | None:
    """Seconds left at the rate so far; None before anything is done (no rate yet)."""
    if done <= 0 or elapsed_s <= 0:
        return None
    left = max(total - done, 0.0)
    return left * elapsed_s / done


def format_duration(seconds: float | None) -> str:
    """`42s`, `3m05s`, `2h07m`; `?` when unknown."""
    if seconds is None:
        return "?"
    s = round(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{(s % 3600) // 60:02d}m"


class Progress:
    """Counts what an ingest has done and draws it; a no-op when disabled."""

    def __init__(
        self, files: int, chars: int, *, enabled: bool, stream: TextIO | None = None, clock=time.monotonic
    ) -> None:
        self.files_total, self.chars_total = files, chars
        self.files = self.chunks = self.windows = self.chars = 0
        self.enabled = enabled
        self.stream = stream if stream is not None else sys.stderr
        self._clock = clock
        self._started = clock()
        self._drawn = float("-inf")
        self._width = 0

    def advance(self, *, files: int = 0, chunks: int = 0, windows: int = 0, chars: int = 0) -> None:
        self.files += files
        self.chunks += chunks
        self.windows += windows
        self.chars += chars
        if self.enabled and self._clock() - self._drawn >= REDRAW_S:
            self._draw()

    def _counts(self) -> str:
        return f"ingest {self.files}/{self.files_total} files · {self.chunks:,} chunks · {self.windows:,} windows"

    def line(self) -> str:
        elapsed = self._clock() - self._started
        rate = self.windows / elapsed if elapsed > 0 else 0.0
        eta = eta_seconds(self.chars, self.chars_total, elapsed)
        return (
            f"{self._counts()} · {rate:.1f} windows/s · "
            f"ETA {format_duration(eta) if self.chars < self.chars_total else '0s'}"
        )

    def _draw(self, text: str | None = None) -> None:
        text = self.line() if text is None else text
        self.stream.write("\r" + text.ljust(self._width))
        self.stream.flush()
        self._width = len(text)
        self._drawn = self._clock()

    def finishing(self) -> None:
        """Say that the writing is done and the store is completing the collection: an
        Elasticsearch build merges its segments then, minutes at 100k+ chunks (the merge
        of 1M chunks took 21 min, search/elastic/lifecycle.py MERGE_TIMEOUT_S)."""
        if self.enabled:
            self._draw(f"{self._counts()} · finishing the collection")

    def close(self) -> None:
        if self.enabled and self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()

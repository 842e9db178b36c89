"""A month of turns for the gaps report's tests and benchmark: labelled questions asked
through the real answer path (an Answerer with the extractive composer), each at its own
frozen time (freezegun), by several people in several channels.

examples/gap-questions.jsonl holds paraphrase groups of facts the sample handbook does
not hold (a group per fact) and stray questions (group "stray"); the answerable
questions of examples/questions.jsonl are asked too, so the month holds answers with
citations (for stale citations) beside the gaps.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
START = datetime(2026, 11, 3, 9, 0, tzinfo=UTC)  # a month ending on 2026-12-03
DAYS = 30
CHANNELS = ("C0PEOPLE", "C0ENG", "C0OPS")
USERS = tuple(f"U0ASKER{n}" for n in range(1, 9))


@dataclass(frozen=True)
class Asked:
    group: str  # the paraphrase group, "stray", or "answerable"
    turn_id: str
    question: str
    user: str
    channel: str
    created_at: datetime


def labelled(per_group: int | None = None, strays: int | None = None) -> list[tuple[str, str]]:
    """(group, question) of the gap questions, in file order: at most `per_group` of each
    paraphrase group and `strays` stray questions (None: all)."""
    rows = [json.loads(line) for line in (EXAMPLES / "gap-questions.jsonl").read_text().splitlines() if line.strip()]
    out: list[tuple[str, str]] = []
    for r in rows:
        cap = strays if r["group"] == "stray" else per_group
        if cap is None or sum(1 for g, _ in out if g == r["group"]) < cap:
            out.append((r["group"], r["question"]))
    return out


def answerable(limit: int, folder: Path | None = None) -> list[str]:
    """Answerable questions of examples/questions.jsonl; with `folder`, only those whose
    expected words are in one of its Markdown files (a collection cut to a few folders)."""
    rows = [json.loads(line) for line in (EXAMPLES / "questions.jsonl").read_text().splitlines() if line.strip()]
    texts = [p.read_text(errors="replace") for p in folder.rglob("*.md")] if folder else []
    out = [
        r["question"]
        for r in rows
        if r["kind"] != "unanswerable" and (folder is None or any(s in t for s in r["must_contain"] for t in texts))
    ]
    return out[:limit]


def plan(
    per_group: int | None = None, strays: int | None = None, again: int = 2, extra: Sequence[str] = ()
) -> list[tuple[str, str, str, str, datetime]]:
    """(group, question, user, channel, time) for the month, deterministic: a group's
    questions are spread over the month, by different people in different channels, and
    `again` of each group's questions are asked once more in the last week; `extra`
    (answerable questions) are asked once each."""
    out = []
    items = labelled(per_group, strays) + [("answerable", q) for q in extra]
    seen: dict[str, int] = {}
    for n, (group, question) in enumerate(items):
        day = (n * 7) % DAYS
        when = START + timedelta(days=day, minutes=17 * n)
        out.append((group, question, USERS[n % len(USERS)], CHANNELS[n % len(CHANNELS)], when))
        seen[group] = seen.get(group, 0) + 1
        if group not in ("stray", "answerable") and seen[group] <= again:
            later = START + timedelta(days=DAYS - 1 - n % 6, hours=n % 5)
            out.append((group, question, USERS[(n + 3) % len(USERS)], CHANNELS[(n + 1) % len(CHANNELS)], later))
    return sorted(out, key=lambda row: row[4])


def ask_month(answerer: Any, rows: Sequence[tuple[str, str, str, str, datetime]]) -> list[Asked]:
    """Every planned question asked through `answerer` at its planned time."""
    from freezegun import freeze_time

    asked = []
    with freeze_time(START) as frozen:  # started once: each start scans every loaded module
        for group, question, user, channel, when in rows:
            frozen.move_to(when)
            record = answerer.ask(question, user=user, channel=channel, surface="slack")
            asked.append(Asked(group, record.turn_id, question, user, channel, when))
    return asked

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


def labelled() -> list[tuple[str, str]]:
    """(group, question) of the gap questions, in file order."""
    rows = [json.loads(line) for line in (EXAMPLES / "gap-questions.jsonl").read_text().splitlines() if line.strip()]
    return [(r["group"], r["question"]) for r in rows]


def answerable(limit: int = 12) -> list[str]:
    rows = [json.loads(line) for line in (EXAMPLES / "questions.jsonl").read_text().splitlines() if line.strip()]
    return [r["question"] for r in rows if r["kind"] != "unanswerable"][:limit]


def plan(limit_answerable: int = 12) -> list[tuple[str, str, str, str, datetime]]:
    """(group, question, user, channel, time) for the month, deterministic: a group's
    questions are spread over the month, by different people in different channels; the
    last week (from START + 23 days) holds most of the paraphrases asked again."""
    out = []
    items = labelled() + [("answerable", q) for q in answerable(limit_answerable)]
    for n, (group, question) in enumerate(items):
        day = (n * 7) % DAYS
        when = START + timedelta(days=day, minutes=17 * n)
        out.append((group, question, USERS[n % len(USERS)], CHANNELS[n % len(CHANNELS)], when))
        if group not in ("stray", "answerable"):  # each missing fact is asked again in the last week
            again = START + timedelta(days=DAYS - 1 - n % 6, hours=n % 5)
            out.append((group, question, USERS[(n + 3) % len(USERS)], CHANNELS[(n + 1) % len(CHANNELS)], again))
    return sorted(out, key=lambda row: row[4])


def ask_month(answerer: Any, limit_answerable: int = 12) -> list[Asked]:
    """Every planned question asked through `answerer` at its planned time."""
    from freezegun import freeze_time

    asked = []
    with freeze_time(START) as frozen:  # started once: each start scans every loaded module
        for group, question, user, channel, when in plan(limit_answerable):
            frozen.move_to(when)
            record = answerer.ask(question, user=user, channel=channel, surface="slack")
            asked.append(Asked(group, record.turn_id, question, user, channel, when))
    return asked

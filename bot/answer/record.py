"""The turn record: everything about one turn, as logged and as read back.

Also the one failure path's words: every turn that fails, wherever it fails (the answer
pipeline, the Slack adapter before the pipeline could start), is answered with
`failure_text` and recorded the same way.
"""

from __future__ import annotations

import base64
import uuid
from dataclasses import asdict, dataclass, field, fields
from typing import Any

import numpy as np

from search.errors import CitebotError


def new_turn_id() -> str:
    return "t-" + uuid.uuid4().hex[:12]


def failure_text(exc: BaseException, turn_id: str) -> str:
    """What a person is told when a turn fails: the reason when it is ours to say."""
    if isinstance(exc, CitebotError):
        return f"Sorry — I could not answer this: {exc} (turn {turn_id})"
    return f"Sorry — something went wrong while answering (turn {turn_id})."


def pack_vector(vector: np.ndarray) -> str:
    """A unit vector as base64 of its float16 values (768 bytes for 384 dimensions)."""
    return base64.b64encode(np.asarray(vector, np.float16).tobytes()).decode("ascii")


def unpack_vector(text: object, dims: int) -> np.ndarray | None:
    """The vector pack_vector wrote, or None when there is none of this width."""
    if not isinstance(text, str) or not text:
        return None
    try:
        raw = base64.b64decode(text, validate=True)
    except ValueError:
        return None
    if len(raw) != 2 * dims:
        return None
    return np.frombuffer(raw, np.float16).astype(np.float32)


def error_text(exc: BaseException) -> str:
    """The error as recorded in the turn log."""
    return str(exc) if isinstance(exc, CitebotError) else f"{type(exc).__name__}: {exc}"


@dataclass
class TurnRecord:
    """Everything about one turn: enough to answer "why did it say that?" afterwards."""

    turn_id: str
    created_at: str
    question: str
    condensed_query: str
    user: str | None = None
    channel: str | None = None
    thread: str | None = None
    surface: str = "cli"
    scope: dict[str, Any] | None = None  # {"name", "sources"}: the scope it was answered under
    answer: str = ""
    raw_answer: str = ""
    refused: bool = False
    # "answer", "closest" (labelled: the closest the documents come, bot.answer.gate),
    # "refused" (by the gate or the composer) or "error".
    outcome: str = "answer"
    closest_reason: str | None = None  # why the gate judged it "closest"
    refusal_reason: str | None = None
    refusal_stage: str | None = None  # "gate" (before composing) or "model" (it declined)
    unsupported: bool = False
    composer: str | None = None
    model: str | None = None
    label: str | None = None
    prompt_chars: int = 0
    usage: dict[str, int] = field(default_factory=dict)
    candidates: list[dict[str, Any]] = field(default_factory=list)
    passages: list[dict[str, Any]] = field(default_factory=list)
    support: dict[str, Any] = field(default_factory=dict)
    expansions: list[dict[str, str]] = field(default_factory=list)
    corrections: dict[str, str] = field(default_factory=dict)
    addresses: list[str] = field(default_factory=list)
    citations: list[dict[str, Any]] = field(default_factory=list)
    quotes: list[dict[str, Any]] = field(default_factory=list)
    claims: dict[str, Any] = field(default_factory=dict)  # the claim judge's report, when on
    timings_ms: dict[str, float] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    error: str | None = None
    # The searched question's vector (pack_vector), so the gaps report need not encode it again.
    question_vector: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def contract_json(self) -> dict[str, Any]:
        """The `citebot ask --json` contract (docs/contracts.md), plus a few extra fields."""
        return {
            "turn_id": self.turn_id,
            "answer": self.answer,
            "refused": self.refused,
            "outcome": self.outcome,
            "closest_reason": self.closest_reason,
            "citations": self.citations,
            "quotes": self.quotes,
            "timings_ms": self.timings_ms,
            "refusal_reason": self.refusal_reason,
            "unsupported": self.unsupported,
            "label": self.label,
            "passages": self.passages,
            "error": self.error,
        }


@dataclass(frozen=True)
class Feedback:
    """One click on an answer's feedback buttons."""

    at: str
    user: str | None
    value: str


@dataclass(frozen=True)
class LoggedTurn:
    """A turn as read back from a turn log: the record and the feedback it received."""

    record: TurnRecord
    feedback: tuple[Feedback, ...] = ()

    @classmethod
    def from_log(cls, raw: dict) -> LoggedTurn:
        """Fields this version does not know are ignored, so old and new records both load."""
        known = {f.name for f in fields(TurnRecord)}
        record = TurnRecord(**{k: v for k, v in raw.items() if k in known})
        if "outcome" not in raw:  # logged before there were three outcomes
            record.outcome = "error" if record.error else "refused" if record.refused else "answer"
        feedback = tuple(
            Feedback(str(f.get("at", "")), f.get("user"), str(f.get("value", ""))) for f in raw.get("feedback") or []
        )
        return cls(record, feedback)

"""Anthropic faults, through the real SDK against the stand-in: every one ends the turn
with a labelled fallback answer, its error in the turn log, and no hang.

The faults: 429 with retry-after, 500, 529 overloaded, a connection
reset, a read timeout (a silent server, and one that drips its body a byte at a time so
that no single read times out), and malformed bodies (cut off, not JSON, the wrong shape).
Each turn runs on a thread watched by HANG_S: a turn still running then is a hang.
How long each fault's turn takes against the budget is measured by benchmarks/faults.py
(timings are not asserted here).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from bot.answer.claude import FALLBACK, ClaudeComposer
from bot.answer.record import TurnRecord
from bot.answer.turn import Answerer
from bot.settings import load_settings
from bot.testing.anthropic_standin import (
    AnthropicStandIn,
    Reply,
    drip,
    fault_catalogue,
    message,
    running,
)
from bot.wiring import Components

# Seconds per test (timeouts, killed processes): the fast run leaves them to CI.
pytestmark = pytest.mark.slow

API_KEY = "sk-ant-test-0123456789abcdef"
MODEL = "claude-test-model"
QUESTION = "When does a Release Train depart, and what happens to changes that miss the cut-off?"
TIMEOUT_S = 0.5
BUDGET_S = 2.0
# A turn still running after this is a hang: the budget plus generous room for a loaded
# machine (retrieval, the extractive fallback). The drip fault took 43 s before the
# deadline transport (bot/answer/deadline.py).
HANG_S = 30.0


def good() -> Reply:
    return message("A Release Train departs every two weeks [1].")


FAULTS = fault_catalogue(BUDGET_S)


@pytest.fixture()
def standin() -> Iterator[AnthropicStandIn]:
    with running() as s:
        yield s


@pytest.fixture()
def answerer(small_store, test_embedder, standin) -> Answerer:
    settings = load_settings(anthropic_api_key=API_KEY, anthropic_base_url=standin.base_url,
                             anthropic_model=MODEL, anthropic_timeout_s=TIMEOUT_S,
                             anthropic_budget_s=BUDGET_S, store=small_store.directory)
    components = Components(settings)
    components.__dict__.update(store=small_store, embedder=test_embedder)
    built = components.answerer
    assert isinstance(built.composer, ClaudeComposer)
    return built


def ask_watched(answerer: Answerer, question: str = QUESTION) -> TurnRecord:
    """The turn on a thread; failing (not blocking the suite) when it outlives HANG_S."""
    out: list[TurnRecord] = []
    worker = threading.Thread(target=lambda: out.append(answerer.ask(question)), daemon=True)
    worker.start()
    worker.join(HANG_S)
    assert not worker.is_alive(), f"the turn was still running after {HANG_S:g} s: a hang"
    return out[0]


@pytest.mark.parametrize("fault", list(FAULTS))
def test_every_anthropic_fault_ends_in_a_labelled_fallback_logged_with_its_error(answerer, standin, fault):
    reply, why = FAULTS[fault]
    standin.always(lambda _request: reply())
    record = ask_watched(answerer)

    assert record.error is None, record.error
    assert record.composer == FALLBACK and record.model is None
    assert record.label and record.label.startswith(f"fallback: Claude ({MODEL}) gave no usable answer")
    assert why in record.label, record.label
    assert record.answer.startswith("The collection says:")
    assert record.quotes and all(q["verified"] for q in record.quotes)
    attempts = [e for e in record.errors if e.startswith("attempt ")]
    assert len(standin.requests) >= 1
    # a failed call is one "attempt N:" line each; a 200 reply the SDK parsed but that holds
    # no usable text is said in the fallback line (the call itself returned)
    parsed = fault in ("body-wrong-shape", "body-text-block-without-text")
    assert len(attempts) == (0 if parsed else len(standin.requests))
    # the turn log holds the same failure: the label, every attempt's error and the fallback
    logged = answerer.turnlog.get_turn(record.turn_id)
    assert logged is not None
    assert logged["label"] == record.label and logged["composer"] == FALLBACK
    assert [e for e in logged["errors"] if e.startswith("attempt ")] == attempts
    assert any(e.startswith("fallback to extractive: ") for e in logged["errors"])


@pytest.mark.parametrize("fault", ["429-retry-after", "500", "529-overloaded", "connection-reset",
                                   "read-timeout-drip", "body-cut-off"])
def test_a_transient_fault_is_retried_and_the_next_good_reply_answers(answerer, standin, fault):
    """One failed attempt, then a good reply: the model's answer, with the failure on record."""
    reply, _why = FAULTS[fault]
    standin.script(reply(), good())
    record = ask_watched(answerer)
    assert record.error is None and record.composer == "claude", (record.label, record.errors)
    assert len(standin.requests) == 2
    assert len(record.errors) == 1 and record.errors[0].startswith("attempt 1: ")


def test_a_dripped_body_is_cut_at_the_attempt_timeout_not_read_to_the_end(answerer, standin):
    """Regression: httpx's timeout is per read, so a body sent a byte every 0.2 s never timed
    out and one 0.5 s attempt lasted 43 s; the deadline transport ends it at the timeout."""
    standin.always(lambda _request: drip(good(), every_s=0.2))
    record = ask_watched(answerer)
    assert record.errors[0] == f"attempt 1: timed out after {TIMEOUT_S:.1f} s"
    assert record.composer == FALLBACK

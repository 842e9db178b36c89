"""The "closest" outcome end to end: composed and verified as usual, and labelled wherever
the turn is shown (the CLI's JSON, the turn log, Slack's blocks, the explanation, eval)."""

from __future__ import annotations

import json

import pytest

from bot.answer.compose import ExtractiveComposer
from bot.answer.gate import CLOSEST, CLOSEST_LABEL, Gate
from bot.answer.prompt import CLOSEST_SYSTEM, answer_prompt
from bot.answer.record import LoggedTurn
from bot.answer.turn import Answerer, labelled
from bot.evaluate import Item, Outcome, figures
from bot.memory.state import InProcessState
from bot.slack.render import render_explanation, render_turn
from search.glossary import Glossary
from search.retrieve import Retriever
from tests.conftest import EXAMPLES

# A gate whose edges put every question a name or phrase did not address in "closest":
# the real gate, with its constants moved, so the turn takes that path on the real store.
ALWAYS_CLOSEST = Gate(z_max=99.0, best_coverage_max=2.0, closest_z_min=-99.0)


@pytest.fixture()
def answerer(examples_store, embedder):
    retriever = Retriever(examples_store, embedder.encode_query, Glossary.load(EXAMPLES / "glossary.csv"))
    return Answerer(retriever, ExtractiveComposer(embedder.encode_texts), examples_store, InProcessState(),
                    gate=ALWAYS_CLOSEST)


def _texts(blocks: list) -> str:
    return json.dumps([b.to_dict() for b in blocks], ensure_ascii=False)


def test_a_closest_turn_is_answered_verified_and_labelled_everywhere(answerer):
    record = answerer.ask("how often does the release train leave, roughly?")
    assert record.outcome == CLOSEST and not record.refused and record.error is None
    assert record.closest_reason and "on the topic" in record.closest_reason
    assert record.answer.startswith(CLOSEST_LABEL + "\n")
    assert record.quotes and all(q["verified"] for q in record.quotes)
    assert record.citations and all(c["resolved"] and c["retrieved"] for c in record.citations)
    # `citebot ask --json` prints contract_json
    out = record.contract_json()
    assert out["outcome"] == CLOSEST and out["refused"] is False and out["answer"].startswith(CLOSEST_LABEL)
    # the turn log (`citebot turns show`)
    logged = answerer.turnlog.get_turn(record.turn_id)
    assert logged["outcome"] == CLOSEST and logged["closest_reason"] == record.closest_reason
    assert LoggedTurn.from_log(logged).record.outcome == CLOSEST
    # Slack: the label opens the answer, the checks line says so, the sources are shown
    (message,) = render_turn(record)
    shown = _texts(list(message.blocks))
    assert CLOSEST_LABEL in shown and "the closest the documents come" in shown and "*Sources*" in shown
    explained = render_explanation(LoggedTurn.from_log(logged))
    assert "the closest the documents come" in _texts(list(explained.blocks))


def test_a_record_logged_before_three_outcomes_reads_back_with_its_outcome():
    old = {"turn_id": "t-1", "created_at": "2026-01-01T00:00:00", "question": "q", "condensed_query": "q",
           "refused": True}
    assert LoggedTurn.from_log(old).record.outcome == "refused"
    assert LoggedTurn.from_log({**old, "refused": False}).record.outcome == "answer"


def test_the_prompt_tells_the_model_the_evidence_is_weak_in_our_instructions_only():
    weak = answer_prompt("is whisky a gift?", [], [], [], closest=True)
    assert CLOSEST_SYSTEM in weak.system and CLOSEST_SYSTEM not in weak.user
    assert CLOSEST_SYSTEM not in answer_prompt("is whisky a gift?", [], [], []).system


def test_a_streamed_closest_answer_opens_with_its_label():
    sent: list[str] = []
    sink = labelled(sent.append)
    sink('"First." [1] ')
    sink('"Second." [2]')
    assert sent == [CLOSEST_LABEL + "\n", '"First." [1] ', '"Second." [2]']


def test_eval_counts_closest_apart_from_refusals():
    def item(answerable: bool, n: int) -> Item:
        return Item(f"i{n}", "paraphrase" if answerable else "unanswerable", "q",
                    ("x",) if answerable else ())

    outcomes = [Outcome(item(True, 1), [1], "answer", None),  # type: ignore[arg-type]
                Outcome(item(True, 2), [1], "closest", None),  # type: ignore[arg-type]
                Outcome(item(True, 3), [], "refused", None),  # type: ignore[arg-type]
                Outcome(item(False, 4), [], "closest", None),  # type: ignore[arg-type]
                Outcome(item(False, 5), [], "refused", None),  # type: ignore[arg-type]
                Outcome(item(False, 6), [], "answer", None)]  # type: ignore[arg-type]
    f = figures(outcomes).as_dict()
    assert f["false_refusals"] == 1  # only the flat refusal of an answerable question
    assert f["closest_answerable"] == 1 and f["closest_unanswerable"] == 1
    assert f["refused_unanswerable"] == 1 and f["missed_refusals"] == 1  # answered outright
    # right: an answerable one not refused, an unanswerable one not answered outright
    assert f["refusal_accuracy"] == round(4 / 6, 4)

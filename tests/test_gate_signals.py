"""The refusal gate's measurement (benchmarks/gate_signals.py): the answer-level signals
say what they claim, and the ceiling and the joint rule are the bounds they claim to be."""

from __future__ import annotations

from benchmarks import gate_signals as signals
from search.types import Chunk, Hit


def hit(text: str, n: int, dense_rank: int | None = None, lexical_rank: int | None = None) -> Hit:
    chunk = Chunk(chunk_id=f"c{n}", doc_id="d", source="a.md", heading_path=(), page=None,
                  ordinal=n, text=text, tokens=len(text.split()))
    return Hit(chunk=chunk, score=1.0, dense_rank=dense_rank, lexical_rank=lexical_rank)


# A collection of 100 chunks: "savepoints" and "nesting" are rare, "sqlite" is everywhere.
DFS = {"savepoints": 3, "nesting": 5, "sqlite": 90, "deep": 20}
QUESTION = "how deep can sqlite savepoints nesting go"


def test_one_sentence_holding_the_rare_words_covers_the_question():
    text = "Savepoints support nesting in SQLite to any deep level you like. Other text follows here."
    s = signals.answer_signals(QUESTION, [hit(text, 1)], DFS, 100)
    # "go" is absent from the collection and weighs most, so no sentence covers it all
    assert 0.5 < s["sentence_coverage"] == s["window_coverage"] < 1.0
    assert s["focus_together"] == 1.0


def test_words_spread_over_far_sentences_cover_less_and_are_not_together():
    text = ("Savepoints are named transactions. This sentence is about something else entirely. "
            "Another sentence says nothing useful. Nesting is described for triggers only.")
    spread = signals.answer_signals(QUESTION, [hit(text, 1)], DFS, 100)
    together = signals.answer_signals(QUESTION, [hit("Savepoints allow nesting deep in sqlite.", 1)], DFS, 100)
    assert spread["sentence_coverage"] < together["sentence_coverage"]
    assert spread["focus_together"] == 0.0
    # the neighbour window joins a sentence to the next one, not to one three away
    assert spread["window_coverage"] == spread["sentence_coverage"]


def test_neighbouring_sentences_count_together_in_the_window():
    text = "Savepoints are named transactions. Their nesting has no fixed limit."
    s = signals.answer_signals(QUESTION, [hit(text, 1)], DFS, 100)
    assert s["window_coverage"] > s["sentence_coverage"]
    assert s["focus_together"] == 1.0


def test_arm_agreement_is_the_share_of_the_dense_top_five_in_the_lexical_top_five():
    hits = [hit("a b c d e", 1, 1, 2), hit("a b c d e", 2, 2, None), hit("a b c d e", 3, 3, 1),
            hit("a b c d e", 4, None, 3), hit("a b c d e", 5, 6, 4)]
    assert signals.answer_signals("a b", hits, {}, 10)["arm_agreement"] == 2 / 5


def row(value: float, answerable: bool, addressed: bool = False, z: float | None = 0.0) -> dict:
    return {"s": value, "answerable": answerable, "addressed": addressed, "dense_z": z}


def test_the_ceiling_refuses_below_the_answerable_value_that_keeps_false_refusals_at_five_percent():
    # 20 answerable at 0.1 .. 2.0: one may be refused, so t is the second lowest (0.2)
    rows = [row(0.1 * (i + 1), True) for i in range(20)]
    rows += [row(0.05, False), row(0.15, False), row(0.25, False), row(0.5, False)]
    assert signals.ceiling(rows, "s") == 2 / 4


def test_an_addressed_question_is_never_below_the_ceiling_threshold():
    rows = [row(0.0, True, addressed=True)] + [row(1.0, True) for _ in range(19)]
    rows += [row(0.5, False), row(0.0, False, addressed=True)]
    # one false refusal allowed, but the lowest answerable is addressed (never refused): t = 1.0
    assert signals.ceiling(rows, "s") == 1 / 2


def test_the_joint_rule_keeps_false_refusals_down_on_every_collection():
    good = [row(1.0, True, z=1.0) for _ in range(10)] + [row(0.1, False, z=-2.0), row(0.2, False, z=-2.0)]
    # here an answerable question looks exactly like the unanswerable ones: refusing them
    # would refuse 1 of 10 answerable questions (10% > 5%)
    hard = ([row(1.0, True, z=1.0) for _ in range(9)] + [row(0.1, True, z=-1.0)]
            + [row(0.1, False, z=-1.0), row(2.0, False, z=2.0)])
    best = signals.best_joint_rule({"good": good, "hard": hard}, "s")
    assert best["per_collection"]["hard"]["false_refusals"] <= signals.CEILING_FALSE_REFUSALS
    assert best["per_collection"]["good"]["false_refusals"] <= signals.CEILING_FALSE_REFUSALS
    assert best["per_collection"]["good"]["unanswerable_refused"] == 1.0
    assert best["per_collection"]["hard"]["unanswerable_refused"] == 0.0
    assert best["mean_unanswerable_refused"] == 0.5


def test_the_flat_refusal_grid_refuses_only_what_the_answer_rule_leaves_and_nothing_near():
    def r(z: float, evidence: float, answerable: bool, addressed: bool = False) -> dict:
        return {"dense_z": z, "evidence": evidence, "answerable": answerable, "addressed": addressed,
                "dense_top": 0.4}

    rows = {"c": [r(-2.0, 0.1, True), r(-0.5, 0.1, True), r(0.5, 0.0, True),
                  r(-3.0, 0.05, False), r(-1.0, 0.3, False), r(-3.0, 0.0, False, addressed=True)]}
    cell = {(g["z_below"], g["evidence_below"]): g for g in signals.flat_refusal_grid(rows)}
    g = cell[(-1.5, 0.2)]
    # answerable: only the first is far and thin; unanswerable: only the first (the third is addressed)
    assert g["per_collection"]["c"] == (round(1 / 3, 3), round(1 / 3, 3))
    assert cell[(-3.0, 0.1)]["per_collection"]["c"] == (0.0, 0.0)  # dense_z < -3 holds for none


def test_the_gate_edge_grid_judges_each_question_with_the_gate_at_those_edges():
    from search.support import Support

    def support(z: float) -> Support:
        return Support(dense_top=0.5, coverage=0.0, addressed=False, dense_z=z)

    items = {"c": [(True, support(2.2)), (True, support(0.7)), (True, support(-2.0)),
                   (False, support(1.2)), (False, None)]}
    grid = {(g["z_max"], g["closest_z_min"]): g for g in signals.gate_edge_grid(items)}
    now = grid[(0.0, -1.5)]["per_collection"]["c"]
    # today's edges: 2.2 and 0.7 answered, -2.0 refused; the unanswerable 1.2 answered
    assert now == {"false_refusals": 0.333, "closest_answerable": 0.0, "unanswerable_answered": 0.5}
    raised = grid[(1.5, -1.5)]["per_collection"]["c"]
    # answering from 1.5 up: 0.7 becomes "closest", the unanswerable 1.2 too; no hits stays refused
    assert raised == {"false_refusals": 0.333, "closest_answerable": 0.333, "unanswerable_answered": 0.0}
    assert all(g["closest_z_min"] <= g["z_max"] for g in grid.values())

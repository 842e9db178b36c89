"""benchmarks/quality.py's logic that needs no collection: store names and settings per
encoder precision, and the paired figures of a comparison."""

from __future__ import annotations

from pathlib import Path

from benchmarks import quality


def _target(tmp_path: Path) -> quality.Target:
    return quality.Target("demo", tmp_path, tmp_path / "questions.jsonl", None, True, "test")


def test_int8_runs_in_stores_of_its_own_with_the_setting_passed(tmp_path, monkeypatch):
    monkeypatch.setenv("CITEBOT_ENCODER_PRECISION", "int8")  # the caller's own setting never leaks in
    t = _target(tmp_path)
    fp32 = quality.Runner("embedded", "abc")
    int8 = quality.Runner("embedded", "abc", precision="int8")
    assert fp32.store(t).name == "demo-store"
    assert int8.store(t).name == "demo-int8-store"
    assert fp32.env(t)["CITEBOT_ENCODER_PRECISION"] == "fp32"
    assert int8.env(t)["CITEBOT_ENCODER_PRECISION"] == "int8"
    mpnet = quality.Runner("embedded", "abc", model=tmp_path / "all-mpnet-base-v2", precision="int8")
    assert mpnet.store(t).name == "demo-all-mpnet-base-v2-int8-store"


def _item(i: int, kind: str, rank: int | None, outcome: str, answerable: bool = True) -> dict:
    return {"mode": "hybrid", "collection": "demo", "id": str(i), "kind": kind, "split": "heldout",
            "answerable": answerable, "rank": rank, "refused": outcome == "refused", "outcome": outcome,
            "question_key": f"k{i}"}


def test_comparison_pairs_every_figure_per_item():
    base = [_item(0, "paraphrase", 3, "answer"), _item(1, "rare", 7, "answer"), _item(2, "alias", 1, "answer"),
            _item(3, "fact", None, "refused"), _item(4, "unanswerable", None, "refused", answerable=False),
            _item(5, "unanswerable", None, "closest", answerable=False)]
    now = [_item(0, "paraphrase", 8, "answer"), _item(1, "rare", 2, "answer"), _item(2, "alias", 1, "answer"),
           _item(3, "fact", 4, "answer"), _item(4, "unanswerable", None, "answer", answerable=False),
           _item(5, "unanswerable", None, "closest", answerable=False)]
    res = quality.compare(base, now)["modes"]["hybrid"]["demo"]
    assert res["r5"]["n"] == 4 and res["r5"]["a"] == 0.5 and res["r5"]["b"] == 0.75
    assert res["r10"]["a"] == 0.75 and res["r10"]["b"] == 1.0
    assert res["para_r5"] == {**res["para_r5"], "n": 1, "a": 1.0, "b": 0.0, "diff": -1.0}
    assert res["rare_r5"]["n"] == 1 and res["rare_r5"]["diff"] == 1.0
    assert res["alias_r5"]["diff"] == 0.0
    assert res["false_refusal"]["n"] == 4 and res["false_refusal"]["diff"] == -0.25
    assert res["near_miss_through"]["n"] == 2 and res["near_miss_through"]["a"] == 0.0
    assert res["near_miss_through"]["b"] == 0.5
    lo, hi = res["r5"]["ci95"]
    assert lo <= res["r5"]["diff"] <= hi

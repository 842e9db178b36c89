"""Releasing a streamed answer sentence by sentence (bot/answer/release.py): what is shown
is always the beginning of the answer the whole-answer checks produce, each quotation
arrives with its verdict, and nothing is shown before a citation passes or of a refusal."""

from __future__ import annotations

import pytest

from bot.answer.checks import check_answer, flag_inline
from bot.answer.release import SentenceRelease, may_be_refusal, settled_ends

PASSAGES = {
    1: ("c1", "The Release Train departs every second Tuesday at 10:00. It waits for no one."),
    2: ("c2", "Soak runs last 36 hours on the staging fleet, e.g. the quay-2.example.com hosts."),
    3: ("c3", "Rollbacks need two approvals."),
}
RETRIEVED = {"c1", "c2", "c3"}

ANSWERS = [
    'The train "departs every second Tuesday at 10:00." [1] Soak runs "last 36 hours" [2].',
    'It leaves every two weeks [1]. It "departs from platform nine" [1]. Then "rollbacks need '
    'two approvals" [3].\n\n- a list item [2]\n- "last 36 hours on the staging fleet" [2]',
    'Per the handbook, e.g. the schedule, it "waits for no one." [1]. Also [7] says so.',
    'Note: "It waits. For no one" [1] and "It waits for no one" [2][1].\nDone [3].',
    'Intro without citations. Then the train "departs every second Tuesday" [1]. More text '
    'follows here [2]',
    'Hosts like quay-2.example.com are used [2]. 1.4 billion rows [3]? No "rows at all" [3]!',
    'Soak "runs last 36 hours"  [2]  \nNext line [1].',
]


def _final(text: str) -> str:
    return flag_inline(text, check_answer(text, PASSAGES, RETRIEVED))


def _stream(text: str, step: int) -> SentenceRelease:
    pieces: list[str] = []
    release = SentenceRelease(pieces.append, PASSAGES, RETRIEVED)
    for at in range(0, len(text), step):
        release.feed(text[at:at + step])
    assert "".join(pieces) == release.shown
    return release


@pytest.mark.parametrize("text", ANSWERS)
@pytest.mark.parametrize("step", [1, 2, 5, 13, 1000])
def test_what_is_released_is_the_start_of_the_checked_answer(text, step):
    release = _stream(text, step)
    final = _final(text)
    assert release.shown, "a cited answer releases something before it ends"
    assert final.startswith(release.shown)
    assert release.released < len(text)  # the last sentence waits for the end (or more text)


def test_an_invented_quotation_arrives_with_its_flag_in_the_same_piece():
    pieces: list[str] = []
    release = SentenceRelease(pieces.append, PASSAGES, RETRIEVED)
    for ch in ANSWERS[1]:
        release.feed(ch)
    (with_quote,) = [p for p in pieces if "platform nine" in p]
    assert "⚠️ [quote check failed: not found in passage [1]]" in with_quote
    assert not any("⚠️" in p for p in pieces if "platform nine" not in p and "rollbacks" not in p)


def test_sentences_are_released_one_at_a_time_after_the_first_citation():
    pieces: list[str] = []
    release = SentenceRelease(pieces.append, PASSAGES, RETRIEVED)
    for ch in ANSWERS[4] + ". Last one.":
        release.feed(ch)
    # the uncited intro is held and goes out with the first cited sentence
    assert pieces[0].startswith("Intro without citations.") and "[1]" in pieces[0]
    assert len(pieces) == 2 and pieces[1].strip() == "More text follows here [2]."


def test_nothing_is_released_without_a_passing_citation_or_of_a_refusal():
    for text in ("No citations here. None at all. Still none.\n\nThe end.",
                 "Cites only a stranger [9]. And again [8]. Done here.",
                 "NOT_COVERED: the passages [1] and [2] are about trains. Not this [1]. Really."):
        assert _stream(text, 3).shown == ""
    assert may_be_refusal("") and may_be_refusal("**NOT_COV") and not may_be_refusal("The NOT")


def test_a_sentence_end_waits_for_what_may_extend_it():
    assert list(settled_ends('It "leaves." ')) == []  # a marker may follow
    assert list(settled_ends('It "leaves." [1')) == []
    assert list(settled_ends('It "leaves." [1] ')) == []  # a second marker may follow
    assert list(settled_ends('It "leaves." [1] T')) == [len('It "leaves." [1]')]
    assert list(settled_ends("See e.g. ")) == []  # "e.g. the" is no end
    assert list(settled_ends("See e.g. the bay. X")) == [len("See e.g. the bay.")]
    assert list(settled_ends('He said "Go. Now" and left. X')) == [len('He said "Go. Now" and left.')]


def test_a_failing_sink_stops_the_release():
    calls = []

    def sink(piece: str) -> None:
        calls.append(piece)
        raise OSError("slack is down")

    release = SentenceRelease(sink, PASSAGES, RETRIEVED)
    for ch in ANSWERS[0]:
        release.feed(ch)
    assert len(calls) == 1 and release.shown == "" and release.stopped.startswith("OSError")

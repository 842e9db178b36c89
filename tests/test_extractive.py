"""The extractive composer: which sentences it quotes, how it writes them, how fast, and
the answer-level eval that measures it (`citebot eval --answers`)."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace

import pytest
from click.testing import CliRunner

from bot.answer.checks import check_answer, normalise, quote_in
from bot.answer.compose import (
    EMBED_MAX_CHARS,
    LABEL,
    SHORTLIST,
    ExtractiveComposer,
)
from bot.answer.passages import Passage, with_windows
from bot.answer.quoting import quotation
from bot.answer.sentences import sentence_spans, split_sentences
from bot.cli import cli
from bot.evaluate import overlaps
from search.types import Chunk, WindowScore
from tests.conftest import EXAMPLES, REPO


def passage(number: int, text: str, source: str = "guide.txt", heading: tuple[str, ...] = ("Guide",)) -> Passage:
    chunk = Chunk(chunk_id=f"c{number}", doc_id=source, source=source, heading_path=heading, page=None,
                  ordinal=number, text=text, tokens=len(text.split()))
    return Passage(number, chunk, text)


def compose(question: str, *passages: Passage, encode=None):
    comp = ExtractiveComposer(encode).compose(question, list(passages), [], [])
    given = {p.number: (p.chunk.chunk_id, p.text) for p in passages}
    report = check_answer(comp.text, given, {p.chunk.chunk_id for p in passages})
    return comp, report


def assert_all_verified(report) -> None:
    assert report.quotes, "the answer quotes nothing"
    assert all(q.verified for q in report.quotes), [(q.text, q.reason) for q in report.quotes]
    assert all(c.resolved and c.retrieved for c in report.citations)
    # Every citation is a quotation's: the group headers carry no marker of their own.
    assert len(report.citations) == len(report.quotes)


# -- the one splitter -------------------------------------------------------------------

WRAPPED = (
    "Once in a while, someone reports that after a system reboot, the service\n"
    "was not started, and that once they start it by hand it works. The fix is\n"
    "to allow binding to non-local addresses by setting the nonlocal_bind sysctl\n"
    "to 1 before the service starts.\n"
    "\n"
    "Options:\n"
    "  -sf <pid> : send the finish signal to older processes after boot\n"
    "  -st <pid> : send the terminate signal\n"
)


def test_wrapped_prose_is_one_sentence_for_the_composer_only():
    as_composer = [WRAPPED[a:b] for a, b in sentence_spans(WRAPPED, wrapped=True)]
    assert any(s.startswith("The fix is\nto allow") and s.endswith("starts.") for s in as_composer)
    # list items, option lines and a lead-in stay sentences of their own
    assert "Options:" in as_composer
    assert any(s.startswith("-sf <pid>") for s in as_composer)
    # the checks and Slack keep cutting at every line break, as before
    assert split_sentences(WRAPPED) == [WRAPPED[a:b] for a, b in sentence_spans(WRAPPED)]
    assert "to 1 before the service starts." in split_sentences(WRAPPED)


def test_a_wrapped_answer_is_quoted_whole_and_verified():
    _, report = compose("service not started after reboot, what is the fix?", passage(1, WRAPPED))
    assert_all_verified(report)
    assert any("nonlocal_bind sysctl to 1" in q.text for q in report.quotes)


# -- what is quoted ---------------------------------------------------------------------

def test_inner_double_quotes_are_quoted_as_single_quotes_and_verified():
    text = ('If a request is rejected because it is malformed, the best thing to do is to '
            'connect to the CLI and issue "show errors", which will report the faulty request.')
    q = quotation(text)
    assert '"' not in q and "…" not in q and "issue 'show errors', which" in q and quote_in(q, text)
    _, report = compose("request rejected as malformed, how do i see the error", passage(1, text))
    assert_all_verified(report)
    assert overlaps(report.quotes[0].text, 'connect to the CLI and issue "show errors", which will')


def test_curly_inner_quotes_become_curly_single_quotes_and_the_demo_reads_them():
    text = ("The Fleet Orchestration Service (FOS), known to almost everyone in the building as "
            "“the Conductor”, is the software that decides which Quill does which pick task.")
    q = quotation(text)
    assert "as ‘the Conductor’, is the software" in q and quote_in(q, text)
    _, report = compose("what is the Conductor", passage(1, text))
    assert_all_verified(report)
    assert "‘the Conductor’" in report.quotes[0].text


def test_the_normaliser_reads_every_quote_mark_as_one():
    marks = "\"'‘’‚‛“”„‟«»"
    assert len({normalise(f"a {m}b{m} c") for m in marks}) == 1
    assert quote_in("as 'the Conductor', is", 'as "the Conductor", is')
    assert quote_in('as “the Conductor”, is', "as 'the Conductor', is")
    assert not quote_in("as 'the Driver', is", 'as "the Conductor", is')


def test_a_short_definition_line_brings_its_explanation():
    text = ("tune.lua.forced-yield <nb>\n"
            "This directive forces the Lua engine to yield after this many instructions, so "
            "that other work can run.\n\n"
            "Unrelated paragraph about something else entirely, long enough to be quoted.")
    _, report = compose("what does tune.lua.forced-yield do", passage(1, text))
    assert_all_verified(report)
    assert "yield after this many instructions" in report.quotes[0].text


def _section(path: str, heading: str) -> str:
    """A section of a sample-handbook Markdown file, as the passage that holds it."""
    text = (EXAMPLES / "handbook" / path).read_text(encoding="utf-8")
    return text.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0].strip()


@pytest.mark.parametrize("question, answer", [
    # The demo's own question: the alarm's description holds "Annex" and "alarm"; the
    # assembly point, two sentences on, holds none of the question's words.
    ("Where do people gather at the Annex if the alarm goes off?", "the yellow bollard by Dock 7"),
    ("Where should I go at the Annex when the fire alarm sounds?", "the yellow bollard by Dock 7"),
])
def test_a_where_question_quotes_the_place_after_the_sentence_that_names_its_subject(question, answer):
    emergencies = passage(1, _section("company/annex-site-guide.md", "Emergencies"),
                          source="company/annex-site-guide.md", heading=("The Annex", "Emergencies"))
    _, report = compose(question, emergencies)
    assert_all_verified(report)
    assert any(answer in q.text for q in report.quotes), [q.text for q in report.quotes]


def test_the_place_must_be_more_than_the_questions_own_words():
    from bot.answer.cues import answer_cues

    (where,) = answer_cues("Where do people gather at the Annex if the alarm goes off?")
    assert not where("The fire alarm at the Annex is a continuous bell with flashing white beacons.")
    assert where("The assembly point for the whole site is the yellow bollard by Dock 7.")
    assert not where("Leave by the nearest marked exit without collecting belongings.")
    assert answer_cues("What does the Conductor do?") == []


def test_a_lead_in_with_a_colon_brings_the_line_after_it():
    text = ("To rotate the pager key on the bastion host, run the following command:\n"
            "pager-rotate --host bastion --force\n\n"
            "The pager key was introduced in 2021 for the night shift rotation.")
    _, report = compose("how do I rotate the pager key on the bastion", passage(1, text))
    assert_all_verified(report)
    assert "pager-rotate --host bastion --force" in report.quotes[0].text


def test_how_many_prefers_the_sentence_with_a_number():
    text = ("Each swap station holds packs in a carousel that rotates to the next slot.\n\n"
            "Each swap station holds eight packs in a carousel.")
    _, report = compose("how many packs does a swap station hold in its carousel", passage(1, text))
    assert report.quotes[0].text == "Each swap station holds eight packs in a carousel."


def test_a_question_is_never_quoted_as_its_answer():
    text = "How often does a Train depart?\n\nA new Train departs every second Tuesday at noon."
    _, report = compose("How often does the Train depart?", passage(1, text))
    assert report.quotes[0].text == "A new Train departs every second Tuesday at noon."


def test_rare_question_terms_outweigh_common_ones():
    text = ("The service restarts the worker when the worker fails the health check.\n\n"
            "The worker is restarted after the backoff window.\n\n"
            "A worker restart resets the E-417 counter.")
    _, report = compose("does a worker restart reset the E-417 counter?", passage(1, text))
    assert "E-417" in report.quotes[0].text


def test_the_window_nearest_the_question_in_meaning_decides_between_equal_word_matches():
    # Two paragraphs, each with one sentence sharing the same question words; the store
    # says the second paragraph's window lies nearest the question (Passage.windows).
    first = "The rota is kept on the board by the door and changes every month."
    second = "The rota names who waters the plants in the lobby while we are away."
    text = first + "\n\n" + second
    cut = len(first) + 2
    plain = passage(1, text)
    near_second = replace(plain, windows=(WindowScore(0, cut, 0.1), WindowScore(cut, len(text), 0.8)))
    near_first = replace(plain, windows=(WindowScore(0, cut, 0.8), WindowScore(cut, len(text), 0.1)))
    question = "who is on the rota while we are out?"
    assert compose(question, near_second)[1].quotes[0].text == second
    assert compose(question, near_first)[1].quotes[0].text == first


def test_window_spans_follow_the_passage_when_its_overlap_is_stripped():
    chunk = Chunk(chunk_id="c2", doc_id="d", source="guide.txt", heading_path=("Guide",), page=None,
                  ordinal=2, text="Shared paragraph.\n\nOwn paragraph here.", tokens=5, overlap_prev=19)
    own = "Own paragraph here."
    (p,) = with_windows([Passage(1, chunk, own)], {"c2": [WindowScore(0, 17, 0.9), WindowScore(19, 38, 0.4)],
                                                   "other": [WindowScore(0, 5, 1.0)]})
    assert p.windows == (WindowScore(0, 19, 0.4),)  # the shared window is not in this passage
    assert own[p.windows[0].start:p.windows[0].end] == own


# -- how it is written ------------------------------------------------------------------

def test_quotes_are_grouped_by_source_with_the_heading_best_first():
    a = passage(1, "The Release Train leaves every second Tuesday from the main branch.",
                source="release.md", heading=("Release Train", "Timetable"))
    b = passage(2, "A Release Train that misses its slot leaves on the next Tuesday instead.",
                source="hotfix.md", heading=("Hotfixes",))
    comp, report = compose("when does the release train leave", a, b)
    assert_all_verified(report)
    lines = comp.text.splitlines()
    assert lines[0] == "The collection says:"
    assert "From release.md — Release Train › Timetable:" in lines
    assert lines[1].startswith("From release.md")  # the group of the most direct quote first
    assert comp.label == LABEL and "no model wrote this" in comp.label


def test_a_lead_restates_the_question_when_the_quote_holds_none_of_its_words():
    text = "Packs are charged from fifteen to ninety-five percent in under two hours."

    def encode(texts):  # meaning says this sentence answers, though it shares no word
        import numpy as np

        return np.ones((len(texts), 4), dtype=np.float32) / 2

    comp, report = compose("whats the top up window for batteries", passage(1, text), encode=encode)
    assert comp.text.startswith("You asked: whats the top up window for batteries\nThe collection says:")
    assert_all_verified(report)


def test_headers_never_read_as_quotes_or_citations():
    p = passage(1, "The [2] marker and a \"quoted\" heading never confuse the checks at all.",
                source='odd "name" [3].md', heading=('A "quoted" [1] heading',))
    comp, report = compose("do markers confuse the checks", p)
    header = [ln for ln in comp.text.splitlines() if ln.startswith("From ")]
    assert header and '"' not in header[0] and "[" not in header[0]
    assert_all_verified(report)


# -- how fast ---------------------------------------------------------------------------

def test_only_a_shortlist_is_embedded_and_no_text_exceeds_the_model_window():
    import numpy as np

    calls: list[list[str]] = []

    def encode(texts):
        calls.append(list(texts))
        return np.ones((len(texts), 4), dtype=np.float32) / 2

    long_sentence = "word " * 400 + "ends here."
    many = " ".join(f"Sentence number {i} talks about the pager rotation schedule." for i in range(60))
    compose("pager rotation schedule", passage(1, many), passage(2, long_sentence), encode=encode)
    (texts,) = calls
    assert len(texts) == 1 + SHORTLIST
    assert max(len(t) for t in texts) <= EMBED_MAX_CHARS


def test_the_command_line_imports_nothing_heavy():
    code = ("import sys, bot.cli; heavy = [m for m in ('torch', 'sentence_transformers', 'numpy', "
            "'slack_bolt', 'redis', 'pydantic_settings', 'structlog') if m in sys.modules]; print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_cli_modes_match_the_retriever():
    from bot.cli import MODES
    from search.retrieval_config import MODES as RETRIEVER_MODES

    assert MODES == RETRIEVER_MODES


# -- the answer-level eval --------------------------------------------------------------

def test_overlap_needs_a_run_of_half_the_label():
    label = "fetches, converters and action have a default timeout of 4s"
    assert overlaps("- fetches, converters and action have a default timeout of 4s,", label)
    assert overlaps("Lua actions have a default timeout of 4s in this release.", label)  # 6 of 10 words
    assert not overlaps("The default timeout is 4s.", label)
    assert not overlaps("anything", "")


@pytest.fixture()
def runner(examples_store, monkeypatch):
    monkeypatch.setenv("CITEBOT_STORE", str(examples_store.directory))
    monkeypatch.setenv("CITEBOT_GLOSSARY", str(EXAMPLES / "glossary.csv"))
    return CliRunner()


def test_eval_answers_json_per_item_and_summary(runner, tmp_path):
    items = tmp_path / "q.jsonl"
    items.write_text(
        json.dumps({"id": "x1", "kind": "paraphrase", "question": "How often does the Release Train leave?",
                    "must_contain": ["A new Train departs every second Tuesday"]}) + "\n"
        # A question nothing in the collection touches: the flat refusal. Near misses such
        # as examples a-29 (Kubernetes on the site racks) or b-33 (a sabbatical) are
        # answered as "the closest the documents come" by the three-outcome gate
        # (0033-three-outcome-gate.md), so they no longer show a refusal's empty lists.
        + json.dumps({"id": "x2", "kind": "unanswerable",
                      "question": "How do I tune the carburettor of a vintage motorcycle?",
                      "must_contain": []}) + "\n")
    result = runner.invoke(cli, ["eval", str(items), "--answers", "--json"])
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    first, second, summary = rows
    assert set(first) >= {"id", "hits", "answer", "refused", "quotes", "passages", "label_given", "label_quoted"}
    assert first["label_given"] and first["label_quoted"] and not first["refused"]
    assert first["quotes"] and all(isinstance(q, str) for q in first["quotes"])
    assert first["passages"] and all(isinstance(p, str) for p in first["passages"])
    assert second["refused"] and second["quotes"] == [] and second["passages"] == []
    whole = summary["summary"]["all"]
    assert whole["answer_quotes_label"] == 1 and whole["label_given"] == 1
    assert whole["label_given_not_quoted"] == 0 and whole["quoted_when_given_rate"] == 1.0
    assert summary["answers"] is True


def test_eval_answers_and_compare_do_not_combine(runner, tmp_path):
    items = tmp_path / "q.jsonl"
    items.write_text(json.dumps({"id": "x", "kind": "rare", "question": "q", "must_contain": ["a"]}) + "\n")
    result = runner.invoke(cli, ["eval", str(items), "--answers", "--compare", "hybrid", "lexical"])
    assert result.exit_code == 2 and "do not combine" in result.output

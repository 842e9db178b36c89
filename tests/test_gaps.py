"""The gaps report and stale citations, on a month of turns asked through the real answer
path (an Answerer with the extractive composer and the real model) at frozen times:
paraphrase groups of facts the handbook lacks become one topic each and rank above
stray questions; re-ingesting edited documents marks stale exactly the turns that cited
an edited passage; channels' scopes filter the report; user ids only with --with-users.
Both backends: the embedded store (its turn log beside it), and Elasticsearch with Redis.
"""

from __future__ import annotations

import json
import shutil
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner
from freezegun import freeze_time

from bot.answer.compose import ExtractiveComposer
from bot.answer.turn import Answerer
from bot.memory.state import InProcessState
from bot.memory.turnlog import RedisTurnLog
from bot.owners.cluster import purity
from bot.owners.gaps import build_report, contract
from bot.owners.outcome import DOWN_VOTES
from bot.owners.stale import stale_citations
from bot.slack.render import ACTION_FEEDBACK_DOWN, FEEDBACK_VALUES
from bot.slack.scopes import load_scopes
from bot.testing.gaps_month import DAYS, START, answerable, ask_month, plan
from ingest.pipeline import ingest
from search.embedded import EmbeddedStore
from search.glossary import Glossary
from search.retrieve import Retriever
from tests.conftest import HANDBOOK, real_redis_url
from tests.elastic_support import drop_alias_indices, es_url, open_elastic  # noqa: F401 (fixture)

END = START + timedelta(days=DAYS)
MONTH = timedelta(days=DAYS)
FOLDERS = ("people", "company")  # the handbook cut to two folders: one ingest per backend stays short
SCOPES = '[default]\nsources = ["**"]\n\n[channels.C0PEOPLE]\nsources = ["people/**"]\n'


def _handbook(into: Path) -> Path:
    for folder in FOLDERS:
        shutil.copytree(HANDBOOK / folder, into / folder)
    return into


def _month(store, turnlog, embedder, folder: Path, **plan_args):
    answerer = Answerer(Retriever(store, embedder.encode_query, Glossary.empty()),
                        ExtractiveComposer(embedder.encode_texts), turnlog, InProcessState())
    return ask_month(answerer, plan(extra=answerable(6, folder), **plan_args))


def _edit_cited(store, turnlog, asked, folder: Path, documents: int = 2):
    """Edit one quoted sentence in each of `documents` Markdown files that answers cited;
    returns the edited strings (old text) and the chunk texts as they were."""
    edits: dict[Path, str] = {}
    for a in asked:
        record = turnlog.get_turn(a.turn_id)
        for q in record.get("quotes") or []:
            chunk = store.get_chunks([q["chunk_id"]])
            if not chunk or not q.get("verified"):
                continue
            path = folder / chunk[0].source
            text = path.read_text() if path.suffix == ".md" else ""
            if path not in edits and len(q["text"]) > 20 and text.count(q["text"]) == 1:
                edits[path] = q["text"]
            if len(edits) == documents:  # an answer may quote several files: no more than asked
                break
        if len(edits) == documents:
            break
    assert len(edits) == documents, "the month cites too few Markdown passages to edit"
    for path, quoted in edits.items():
        path.write_text(path.read_text().replace(quoted, quoted + " This changed in the latest revision."))
    return list(edits.values())


def _expected_stale(store_before: dict[str, str], turnlog, asked, edited: list[str]) -> set[str]:
    """Turns that cited (quoted or cited by marker) a chunk whose text held an edited sentence."""
    out = set()
    for a in asked:
        record = turnlog.get_turn(a.turn_id)
        if record.get("refused"):
            continue
        ids = {c.get("chunk_id") for c in record.get("citations") or []} | {
            q.get("chunk_id") for q in record.get("quotes") or []}
        if any(s in store_before.get(i, "") for i in ids if i for s in edited):
            out.add(a.turn_id)
    return out


def _check_topics(report, asked):
    group_of = {a.turn_id: a.group for a in asked}
    labels, truth = [], []
    for n, topic in enumerate(report["topics"]):
        for turn_id in topic["_turn_ids"]:
            g = group_of[turn_id]
            labels.append(n)
            truth.append(g if g not in ("stray", "answerable") else f"{g}:{turn_id}")
    import numpy as np

    paraphrased = [i for i, t in enumerate(truth) if ":" not in t]
    assert purity(np.array([labels[i] for i in paraphrased]), [truth[i] for i in paraphrased]) >= 0.9
    groups = sorted({a.group for a in asked} - {"stray", "answerable"})
    top = report["topics"][:len(groups)]
    # every paraphrase group is one of the top topics, which hold nothing but paraphrases
    assert sorted({group_of[t["_turn_ids"][0]] for t in top}) == groups
    for topic in report["topics"][len(groups):]:
        assert {group_of[i] for i in topic["_turn_ids"]} <= {"stray", "answerable"}, topic
    for topic in top:
        group = group_of[topic["_turn_ids"][0]]
        assert len(topic["_turn_ids"]) == sum(1 for a in asked if a.group == group)  # all of it, in one
        assert topic["askers"] > 1 and topic["size"] >= topic["askers"]
        assert 1 <= len(topic["questions"]) <= 3 and topic["nearest"]
        assert all(q["question"] in {a.question for a in asked} for q in topic["questions"])


# -- the embedded store ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def embedded_month(tmp_path_factory, embedder):
    root = tmp_path_factory.mktemp("gaps")
    folder = _handbook(root / "handbook")
    store = EmbeddedStore(root / "store")
    ingest([folder], store, embedder, progress=False)
    store = EmbeddedStore(root / "store")
    asked = _month(store, store, embedder, folder, per_group=4, strays=5, again=2)
    yield root, folder, store, asked
    store.close()


def test_paraphrase_groups_are_one_topic_each_above_strays(embedded_month, embedder):
    _root, _folder, store, asked = embedded_month
    assert all(store.get_turn(a.turn_id)["question_vector"] for a in asked)  # recorded when searched
    report = build_report(store, store, embedder.encode_texts, period=MONTH, now=END, dims=embedder.stamp.dims)
    _check_topics(report, asked)
    _check_topics(build_report(store, store, embedder.encode_texts, period=MONTH, now=END), asked)  # encoded anew
    as_json = contract(report)
    assert set(as_json) == {"topics", "stale"}
    assert set(as_json["topics"][0]) == {"size", "askers", "channels", "questions", "nearest", "change"}
    assert set(as_json["topics"][0]["questions"][0]) == {"turn_id", "question", "outcome"}
    assert "U0ASKER" not in json.dumps(as_json)


def test_the_change_counts_the_period_before(embedded_month, embedder):
    _root, _folder, store, asked = embedded_month
    week = timedelta(days=7)
    report = build_report(store, store, embedder.encode_texts, period=week, now=END)
    group_of = {a.turn_id: a.group for a in asked}
    checked = 0
    for topic in report["topics"]:
        group = group_of[topic["_turn_ids"][0]]
        if group in ("stray", "answerable"):
            continue
        now = sum(1 for a in asked if a.group == group and a.created_at >= END - week)
        before = sum(1 for a in asked if a.group == group and END - 2 * week <= a.created_at < END - week)
        assert (topic["size"], topic["change"]) == (now, now - before)
        checked += 1
    assert checked


def test_a_channel_sees_its_turns_and_the_sources_of_its_scope(embedded_month, embedder, tmp_path):
    _root, _folder, store, asked = embedded_month
    (tmp_path / "scopes.toml").write_text(SCOPES)
    scopes = load_scopes(tmp_path / "scopes.toml")
    report = build_report(store, store, embedder.encode_texts, period=MONTH, now=END, channels=["C0PEOPLE"],
                          scope_of=lambda ch: scopes.for_channel(ch).scope)
    channel_of = {a.turn_id: a.channel for a in asked}
    assert report["topics"]
    assert {channel_of[i] for t in report["topics"] for i in t["_turn_ids"]} == {"C0PEOPLE"}
    nearest = [d["source"] for t in report["topics"] for d in t["nearest"]]
    assert nearest and all(s.startswith("people/") for s in nearest)
    everyone = build_report(store, store, embedder.encode_texts, period=MONTH, now=END)
    assert any(not d["source"].startswith("people/") for t in everyone["topics"] for d in t["nearest"])


def test_the_command_prints_user_ids_only_when_asked(embedded_month, monkeypatch):
    from bot.cli import cli

    root, _folder, _store, _asked = embedded_month
    monkeypatch.setenv("CITEBOT_STORE", str(root / "store"))
    with freeze_time(END):
        plain = CliRunner().invoke(cli, ["gaps", "--since", "30d", "--json"])
        users = CliRunner().invoke(cli, ["gaps", "--since", "30d", "--json", "--with-users"])
        text = CliRunner().invoke(cli, ["gaps", "--since", "4w"])
        bad = CliRunner().invoke(cli, ["gaps", "--since", "soon"])
    assert plain.exit_code == 0, plain.output
    assert json.loads(plain.output)["topics"] and "U0ASKER" not in plain.output
    assert users.exit_code == 0 and "U0ASKER" in users.output
    assert json.loads(users.output)["topics"][0]["questions"][0]["user"].startswith("U0ASKER")
    assert text.exit_code == 0 and "Gaps in the last 28 days" in text.output and "U0ASKER" not in text.output
    assert bad.exit_code == 2 and "not a period" in bad.output


def test_edited_passages_make_exactly_their_turns_stale(embedded_month, embedder):
    root, folder, store, asked = embedded_month
    before = {c.chunk_id: c.text for c in store.iter_chunks()}
    assert stale_citations(store, [store.get_turn(a.turn_id) for a in asked]) == []
    edited = _edit_cited(store, store, asked, folder)
    expected = _expected_stale(before, store, asked, edited)
    ingest([folder], store, embedder, progress=False)
    store = EmbeddedStore(root / "store")
    got = {s.turn_id for s in stale_citations(store, [store.get_turn(a.turn_id) for a in asked])}
    assert expected and got == expected
    report = build_report(store, store, embedder.encode_texts, period=MONTH, now=END)
    assert {s["turn_id"] for s in report["stale"]} == expected
    unchanged = {c.chunk_id for c in store.iter_chunks()} & set(before)
    versions = {v.chunk_id: v for v in store.chunk_versions(sorted({c.source for c in store.iter_chunks()}))}
    assert all(versions[i].changed_at is not None for i in unchanged)
    changed = set(versions) - set(before)
    assert changed and all(versions[i].changed_at > max(versions[u].changed_at for u in unchanged) for i in changed)
    store.close()


def test_turns_show_marks_a_stale_turn(embedded_month, monkeypatch):
    from bot.cli import cli

    root, _folder, store, asked = embedded_month
    stale = stale_citations(store, [store.get_turn(a.turn_id) for a in asked])
    assert stale, "runs after the edit test"
    monkeypatch.setenv("CITEBOT_STORE", str(root / "store"))
    shown = json.loads(CliRunner().invoke(cli, ["turns", "show", stale[0].turn_id]).output)
    assert shown["stale"] and shown["stale"][0]["chunk_id"] == stale[0].chunk_id
    fresh = next(a.turn_id for a in asked if a.turn_id not in {s.turn_id for s in stale})
    assert json.loads(CliRunner().invoke(cli, ["turns", "show", fresh]).output)["stale"] == []


def test_ask_why_and_the_home_tab_mark_a_stale_turn(embedded_month):
    from types import SimpleNamespace

    from bot.answer.record import LoggedTurn
    from bot.owners.stale import WORDING
    from bot.slack.actions import TurnActions
    from bot.slack.home import HomeTab
    from bot.slack.render import render_explanation
    from bot.slack.scopes import Scopes

    _root, _folder, store, asked = embedded_month
    stale_ids = {s.turn_id for s in stale_citations(store, [store.get_turn(a.turn_id) for a in asked])}
    assert stale_ids, "runs after the edit test"
    actions = TurnActions(None, store, "/ask", None, store=lambda: store)  # type: ignore[arg-type]
    runner = SimpleNamespace(turnlog=store, answerer=lambda: SimpleNamespace(retriever=SimpleNamespace(store=store)))
    home = HomeTab(runner, None, Scopes.everything(), "/ask")  # type: ignore[arg-type]
    for a in asked:
        raw = store.get_turn(a.turn_id)
        why = render_explanation(LoggedTurn.from_log(raw), actions._stale(raw))
        said = " ".join(str(b.to_dict()) for b in why.blocks)
        line = home._turn_line(a.turn_id, a.user) or ""
        assert (WORDING in said) == (a.turn_id in stale_ids) == (WORDING in line), a


def test_the_thumbs_down_value_is_the_one_the_report_counts():
    assert DOWN_VOTES == {FEEDBACK_VALUES[ACTION_FEEDBACK_DOWN]}


def _stamped_turns(directory: Path, stamp, questions, vectors) -> EmbeddedStore:
    """A store stamped for `stamp`'s model, its turn log holding one refused turn a question,
    each with the vector its retrieval searched with."""
    from bot.answer.record import pack_vector

    store = EmbeddedStore(directory)
    store.open_for(stamp)
    for i, (question, vector) in enumerate(zip(questions, vectors, strict=True)):
        at = (END - timedelta(days=1 + i % 20)).isoformat()
        store.put_turn(f"t-model{i:03d}", at, {"turn_id": f"t-model{i:03d}", "created_at": at, "question": question,
                                               "refused": True, "question_vector": pack_vector(vector)})
    return store


def test_each_embedding_model_clusters_at_its_own_threshold(tmp_path, embedder):
    """The report clusters at the threshold of the store's model (its index stamp): the
    sample questions, one fact each, encoded by the real MiniLM and stamped as MiniLM, as
    all-mpnet-base-v2 (no mpnet weights needed: the vectors are recorded) and as a model
    without a threshold of its own."""
    from dataclasses import replace

    from bot.owners.cluster import THRESHOLD, THRESHOLD_BY_MODEL, threshold_for
    from ingest.embedder import KNOWN_MODELS, MODEL_NAME

    mpnet = KNOWN_MODELS["78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658"]
    assert set(THRESHOLD_BY_MODEL) <= set(KNOWN_MODELS.values())
    assert threshold_for(MODEL_NAME) == THRESHOLD == 0.45
    assert threshold_for("some/other-model") == threshold_for(None) == THRESHOLD
    assert threshold_for(mpnet) == THRESHOLD_BY_MODEL[mpnet] > THRESHOLD
    rows = [json.loads(line) for line in (HANDBOOK.parent / "questions.jsonl").read_text().splitlines() if line]
    questions = [r["question"] for r in rows]
    vectors = embedder.encode_texts(questions)

    def never(texts):
        raise AssertionError(f"encoded {len(texts)} questions: every turn recorded its vector")

    topics = {}
    for name in (MODEL_NAME, mpnet, "some/other-model"):
        stamp = replace(embedder.stamp, name=name)
        store = _stamped_turns(tmp_path / name.replace("/", "-"), stamp, questions, vectors)
        report = build_report(store, store, never, period=MONTH, now=END, dims=stamp.dims)
        topics[name] = sorted(sorted(t["_turn_ids"]) for t in report["topics"])
        assert sum(len(t) for t in topics[name]) == len(questions)
        if name == MODEL_NAME:  # the same store at mpnet's threshold, asked for explicitly
            at_mpnet = build_report(store, store, never, period=MONTH, now=END, dims=stamp.dims,
                                    threshold=THRESHOLD_BY_MODEL[mpnet])
            at_mpnet_topics = sorted(sorted(t["_turn_ids"]) for t in at_mpnet["topics"])
        store.close()
    assert topics["some/other-model"] == topics[MODEL_NAME]
    assert topics[mpnet] == at_mpnet_topics
    # a higher threshold merges fewer of these distinct facts: more topics
    assert len(topics[mpnet]) > len(topics[MODEL_NAME])


# -- Elasticsearch and Redis ----------------------------------------------------------------
@pytest.mark.elasticsearch
@pytest.mark.redis
def test_elasticsearch_and_redis_report_and_mark_stale(tmp_path, embedder, es_url, redis_prefix):  # noqa: F811
    import redis

    alias = f"citebot-test-gaps-{uuid.uuid4().hex[:10]}"
    client = redis.Redis.from_url(real_redis_url())
    folder = _handbook(tmp_path / "handbook")
    try:
        ingest([folder], open_elastic(es_url, alias), embedder, progress=False)
        store = open_elastic(es_url, alias)
        turnlog = RedisTurnLog(client, prefix=redis_prefix)
        asked = _month(store, turnlog, embedder, folder, per_group=3, strays=3, again=1)
        listed = list(turnlog.turns_since(START.isoformat()))
        assert [r["turn_id"] for r in listed] == [a.turn_id for a in asked]  # oldest first
        assert client.ttl(f"{redis_prefix}turns:by_time") > 0
        report = build_report(turnlog, store, embedder.encode_texts, period=MONTH, now=END,
                              dims=embedder.stamp.dims)
        _check_topics(report, asked)
        before = {c.chunk_id: c.text for c in store.iter_chunks()}
        edited = _edit_cited(store, turnlog, asked, folder, documents=1)
        expected = _expected_stale(before, turnlog, asked, edited)
        ingest([folder], store, embedder, progress=False)
        store = open_elastic(es_url, alias)
        got = {s.turn_id for s in stale_citations(store, list(turnlog.turns_since(START.isoformat())))}
        assert expected and got == expected
        store.close()
    finally:
        client.close()
        drop_alias_indices(es_url, alias)

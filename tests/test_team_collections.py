"""Each workspace its own collection (bot/team_collections.py): the contract, on the embedded
store and on the real Elasticsearch, that one workspace's question never reads another's
collection, and that CITEBOT_TEAM points a command at one workspace's collection."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.settings import load_settings
from bot.slack.workspace import Workspace, bound
from bot.team_collections import NoWorkspace, TeamCollections, TeamScopes
from bot.testing.embedder import HashingEmbedder
from bot.wiring import Components, open_store
from ingest.pipeline import ingest
from search.errors import StoreError
from tests.elastic_support import drop_alias_indices, es_url  # noqa: F401 - a fixture

ALPHA, BETA = "TALPHA", "TBETA"
DOCS = {
    ALPHA: ("alpha.md", "# Alpha launch\n\nThe Alpha launch code is ORCHID and it changes every Monday.\n"),
    BETA: ("beta.md", "# Beta vault\n\nThe Beta vault combination is MAGNOLIA and only Beta staff hold it.\n"),
}
BETA_QUESTION = "What is the Beta vault combination?"


def _workspace(team: str) -> Workspace:
    return Workspace(team=team, team_id=team, enterprise_id=None, bot_token=None,
                     bot_user_id=None, bot_id=None)


def _ingest_each(settings, tmp_path: Path, embedder) -> None:
    """Each workspace's documents into its own collection, as `CITEBOT_TEAM=… citebot ingest` does."""
    for team, (name, text) in DOCS.items():
        folder = tmp_path / "docs" / team
        folder.mkdir(parents=True)
        (folder / name).write_text(text)
        store = open_store(Components(settings.model_copy(update={"team": team})).settings)
        try:
            summary = ingest([folder], store, embedder, progress=False)
        finally:
            store.close()
        assert summary.skipped == []


def _sources(collections: TeamCollections, team: str, question: str) -> set[str]:
    with bound(_workspace(team)):
        retrieval = collections.answerer().retriever.retrieve(question)
    return {h.chunk.source for h in retrieval.hits}


def _contract(settings, tmp_path: Path, test_embedder) -> None:
    embedder = HashingEmbedder()
    _ingest_each(settings, tmp_path, embedder)
    components = Components(settings)
    components.embedder = test_embedder
    collections = TeamCollections(components)
    assert _sources(collections, BETA, BETA_QUESTION) == {"beta.md"}
    # Alpha asks Beta's question word for word: only Alpha's collection is read.
    assert _sources(collections, ALPHA, BETA_QUESTION) <= {"alpha.md"}
    assert _sources(collections, ALPHA, "Alpha launch code") == {"alpha.md"}
    with bound(_workspace(ALPHA)):
        record = collections.answerer().ask(BETA_QUESTION, surface="cli")
    assert "MAGNOLIA" not in record.answer and all(
        p.get("source") != "beta.md" for p in record.passages)
    with pytest.raises(NoWorkspace):
        collections.answerer()  # outside any workspace: no collection at all
    with bound(_workspace("TNOBODY")), pytest.raises(StoreError, match="empty"):
        collections.answerer()  # a workspace without a collection gets none, not another's


def test_embedded_collections_are_apart(tmp_path, test_embedder):
    settings = load_settings(store_template=str(tmp_path / "stores" / "{team}"))
    _contract(settings, tmp_path, test_embedder)
    assert sorted(p.name for p in (tmp_path / "stores").iterdir()) == [ALPHA, BETA]


@pytest.mark.elasticsearch
def test_elasticsearch_collections_are_apart(tmp_path, test_embedder, es_url):  # noqa: F811
    prefix = f"citebot-test-{tmp_path.name[-12:].lower().replace('_', '-')}"
    settings = load_settings(es_url=es_url, es_index_template=prefix + "-{team}",
                             store=tmp_path / "turns")
    try:
        _contract(settings, tmp_path, test_embedder)
    finally:
        for team in (ALPHA, BETA):
            drop_alias_indices(es_url, f"{prefix}-{team.lower()}")


def test_each_workspace_has_its_own_scopes(tmp_path, small_store, test_embedder):
    (tmp_path / f"scopes-{ALPHA}.toml").write_text('[default]\nsources = ["people/**"]\n')
    (tmp_path / f"scopes-{BETA}.toml").write_text('[default]\nsources = ["engineering/**"]\n')
    settings = load_settings(scopes_template=str(tmp_path / "scopes-{team}.toml"))
    collections = TeamCollections(Components(settings))
    scopes = TeamScopes(collections)
    with bound(_workspace(ALPHA)):
        alpha = scopes.for_channel("CANY").scope
    with bound(_workspace(BETA)):
        beta = scopes.for_channel("CANY").scope
    assert alpha.allows("people/travel.md") and not alpha.allows("engineering/deploys.md")
    assert beta.allows("engineering/deploys.md") and not beta.allows("people/travel.md")


@pytest.mark.parametrize("team", ["../etc", "talpha", "T/1"])
def test_a_team_id_never_becomes_a_path_of_its_own(tmp_path, team):
    settings = load_settings(store_template=str(tmp_path / "{team}"))
    with pytest.raises(Exception, match="not a Slack workspace"):
        settings.for_team(team)

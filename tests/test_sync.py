"""`citebot sync` with real parts: git repositories made here (commits, a rename, a deletion,
a force-push, a branch switch, a submodule), a folder, zip archives, the embedded store and
Elasticsearch, the real CLI, and a sync killed part-way."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from bot.slack.scopes import load_scopes
from bot.testing.embedder import HashingEmbedder
from ingest.sources import Source, load_sources
from ingest.sync import sync, sync_source
from search import calibration
from search.embedded import EmbeddedStore
from tests.elastic_support import es_alias, es_url  # noqa: F401  # fixtures

REPO = Path(__file__).resolve().parent.parent
EMBEDDER = HashingEmbedder()


def git(cwd: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True,
                          text=True).stdout.strip()


def doc(title: str, body: str) -> str:
    return f"# {title}\n\n{body}\n"


def make_repo(path: Path, files: dict[str, str]) -> Path:
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    commit(path, files, "first")
    return path


def commit(repo: Path, files: dict[str, str | None], message: str) -> str:
    for name, text in files.items():
        target = repo / name
        if text is None:
            git(repo, "rm", "-q", name)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, "utf-8")
        git(repo, "add", name)
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def hashes(store: EmbeddedStore) -> dict[str, str]:
    return dict(store.document_hashes())


@pytest.fixture()
def store(tmp_path):
    s = EmbeddedStore(tmp_path / "store")
    yield s
    s.close()


def run(source: Source, store, tmp_path, **kw):
    return sync_source(source, store, EMBEDDER, tmp_path / "cache", progress=False, **kw)


def test_git_commits_renames_deletions_and_a_force_push(tmp_path, store):
    up = make_repo(tmp_path / "up", {"content/pager/rotation.md": doc("Rotation", "The pager rotates on Mondays."),
                                     "content/leave.md": doc("Leave", "Ask your lead two weeks ahead."),
                                     "README.md": doc("Readme", "Outside the content folder.")})
    source = Source("handbook", "git", str(up), path="content")
    first = run(source, store, tmp_path)
    assert first.error is None and first.commit == git(up, "rev-parse", "HEAD")
    assert (first.added, first.changed, first.deleted) == (2, 0, 0)
    assert set(hashes(store)) == {"handbook/pager/rotation.md", "handbook/leave.md"}
    again = run(source, store, tmp_path)
    assert (again.added, again.changed, again.deleted) == (0, 0, 0)

    git(up, "mv", "content/leave.md", "content/time-off.md")
    commit(up, {"content/pager/rotation.md": doc("Rotation", "The pager rotates on Tuesdays now.")}, "edit")
    second = run(source, store, tmp_path)
    assert (second.added, second.changed, second.deleted) == (1, 1, 1)
    assert set(hashes(store)) == {"handbook/pager/rotation.md", "handbook/time-off.md"}
    assert "Tuesdays" in " ".join(c.text for c in store.iter_chunks())

    commit(up, {"content/time-off.md": None}, "delete")
    third = run(source, store, tmp_path)
    assert (third.added, third.changed, third.deleted) == (0, 0, 1)

    # A force-push to a bare remote: history rewritten to the first commit plus another change.
    remote = tmp_path / "remote.git"
    git(tmp_path, "clone", "-q", "--bare", str(up), str(remote))
    pushed = Source("handbook", "git", str(remote), path="content")
    assert run(pushed, store, tmp_path).error is None
    git(up, "reset", "-q", "--hard", first.commit)
    rewritten = commit(up, {"content/leave.md": doc("Leave", "Ask your lead three weeks ahead.")}, "rewrite")
    git(up, "push", "-q", "--force", str(remote), "main")
    forced = run(pushed, store, tmp_path)
    assert forced.error is None and forced.commit == rewritten
    assert set(hashes(store)) == {"handbook/pager/rotation.md", "handbook/leave.md"}
    text = " ".join(c.text for c in store.iter_chunks())
    assert "three weeks" in text and "Mondays" in text and "Tuesdays" not in text


def test_a_branch_switch_and_a_submodule_skipped_with_its_reason(tmp_path, store):
    sub = make_repo(tmp_path / "sub", {"inner.md": doc("Inner", "Text of another repository.")})
    up = make_repo(tmp_path / "up", {"a.md": doc("A", "On main.")})
    git(up, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(sub), "vendored")
    git(up, "commit", "-q", "-m", "submodule")
    git(up, "checkout", "-q", "-b", "drafts")
    commit(up, {"b.md": doc("B", "Only on drafts.")}, "draft")
    git(up, "checkout", "-q", "main")
    main = run(Source("hb", "git", str(up)), store, tmp_path)
    assert main.error is None and main.added == 1
    [skipped] = [s for s in main.skipped if s.source == "hb/vendored"]
    assert "submodule" in skipped.reason and "source of its own" in skipped.reason
    assert not any(s.startswith("hb/vendored/") for s in hashes(store))
    drafts = run(Source("hb", "git", str(up), branch="drafts"), store, tmp_path)
    assert drafts.error is None and drafts.added == 1
    assert set(hashes(store)) == {"hb/a.md", "hb/b.md"}
    back = run(Source("hb", "git", str(up), branch="main"), store, tmp_path)
    assert (back.added, back.deleted) == (0, 1) and set(hashes(store)) == {"hb/a.md"}


def test_git_documents_link_to_their_file_at_the_commit_they_last_changed(tmp_path, store):
    up = make_repo(tmp_path / "up", {"docs/a.md": doc("A", "Alpha."), "docs/b b.md": doc("B", "Beta.")})
    template = "https://git.example.com/org/hb/src/{commit}/{path}"
    first = run(Source("hb", "git", str(up), path="docs", link=template), store, tmp_path)
    later = commit(up, {"docs/a.md": doc("A", "Alpha, edited.")}, "edit")
    second = run(Source("hb", "git", str(up), path="docs", link=template), store, tmp_path)
    assert (second.changed, second.added) == (1, 0)
    urls = {c.source: c.url for c in store.iter_chunks()}
    assert urls["hb/a.md"] == f"https://git.example.com/org/hb/src/{later}/docs/a.md"
    assert urls["hb/b b.md"] == f"https://git.example.com/org/hb/src/{first.commit}/docs/b%20b.md"
    plain = run(Source("local", "git", str(up)), store, tmp_path)  # a local path: no link
    assert plain.error is None and all(c.url is None for c in store.iter_chunks() if c.source.startswith("local/"))


def test_a_failed_sync_keeps_the_documents_and_the_other_sources_still_sync(tmp_path, store):
    up = make_repo(tmp_path / "up", {"a.md": doc("A", "Alpha.")})
    folder = tmp_path / "runbooks"
    (folder / "pager").mkdir(parents=True)
    (folder / "pager" / "rotation.md").write_text(doc("Rotation", "Weekly."), "utf-8")
    good = [Source("hb", "git", str(up)), Source("runbooks", "folder", str(folder))]
    assert all(r.error is None for r in sync(good, store, EMBEDDER, tmp_path / "cache", progress=False))
    before = hashes(store)
    (folder / "pager" / "new.md").write_text(doc("New", "Fresh."), "utf-8")
    bad = [Source("hb", "git", str(up), branch="no-such-branch"), Source("runbooks", "folder", str(folder)),
           Source("gone", "git", str(tmp_path / "nowhere"))]
    reports = sync(bad, store, EMBEDDER, tmp_path / "cache", progress=False)
    assert "no-such-branch" in (reports[0].error or "") or "couldn't find remote ref" in (reports[0].error or "")
    assert reports[1].error is None and reports[1].added == 1
    assert reports[2].error and "git fetch" in reports[2].error
    assert {s: h for s, h in hashes(store).items() if s != "runbooks/pager/new.md"} == before


def test_a_missing_folder_keeps_its_documents(tmp_path, store):
    folder = tmp_path / "runbooks"
    folder.mkdir()
    (folder / "a.md").write_text(doc("A", "Alpha."), "utf-8")
    assert run(Source("runbooks", "folder", str(folder)), store, tmp_path).added == 1
    folder.rename(tmp_path / "elsewhere")
    report = run(Source("runbooks", "folder", str(folder)), store, tmp_path)
    assert report.error and "does not exist" in report.error
    assert set(hashes(store)) == {"runbooks/a.md"}


def make_zip(path: Path, members: dict[str, str]) -> Path:
    with zipfile.ZipFile(path, "w") as z:
        for name, text in members.items():
            z.writestr(name, text)
    return path


def test_an_archive_is_read_again_only_when_its_checksum_changes(tmp_path, store):
    archive = make_zip(tmp_path / "eng.zip", {"Space/home.html": "<h1>Home</h1><p>Welcome to ENG.</p>",
                                              "Space/deploy.md": doc("Deploy", "Deploys go out on Wednesdays.")})
    source = Source("eng-wiki", "archive", str(archive))
    first = run(source, store, tmp_path)
    assert first.error is None and first.added == 2
    assert set(hashes(store)) == {"eng-wiki/Space/home.html", "eng-wiki/Space/deploy.md"}
    same = run(source, store, tmp_path)
    assert (same.added, same.changed, same.deleted) == (0, 0, 0)
    other = EmbeddedStore(tmp_path / "other-store")  # the same cache, a store without them
    try:
        assert run(source, other, tmp_path).added == 2
    finally:
        other.close()
    make_zip(archive, {"Space/home.html": "<h1>Home</h1><p>Welcome to ENG.</p>",
                       "Space/deploy.md": doc("Deploy", "Deploys go out on Thursdays.")})
    changed = run(source, store, tmp_path)
    assert (changed.added, changed.changed, changed.deleted) == (0, 1, 0)

    evil = make_zip(tmp_path / "evil.zip", {"ok.md": doc("Ok", "Fine."), "../../escape.md": doc("X", "Out.")})
    before = hashes(store)
    refused = run(Source("eng-wiki", "archive", str(evil)), store, tmp_path)
    assert refused.error and "outside" in refused.error and "refused" in refused.error
    assert hashes(store) == before
    assert not (tmp_path / "escape.md").exists() and not (tmp_path / "cache" / "escape.md").exists()
    broken = tmp_path / "broken.zip"
    broken.write_bytes(b"PK\x03\x04 not really a zip")
    assert "cannot be read" in (run(Source("eng-wiki", "archive", str(broken)), store, tmp_path).error or "")
    assert hashes(store) == before


def test_two_sources_share_a_store_and_scopes_read_them_by_name(tmp_path, store):
    one = make_repo(tmp_path / "one", {"guide.md": doc("Guide", "The first guide.")})
    two = tmp_path / "two"
    two.mkdir()
    (two / "guide.md").write_text(doc("Guide", "The second guide."), "utf-8")
    reports = sync([Source("handbook", "git", str(one)), Source("runbooks", "folder", str(two))],
                   store, EMBEDDER, tmp_path / "cache", progress=False)
    assert [r.added for r in reports] == [1, 1]
    assert set(hashes(store)) == {"handbook/guide.md", "runbooks/guide.md"}
    assert calibration.stored(store) is not None  # measured once, after the last source
    scopes = tmp_path / "scopes.toml"
    scopes.write_text('[default]\nsources = ["**"]\n[channels.C0RUN]\nsources = ["runbooks/*"]\n', "utf-8")
    scope = load_scopes(scopes).for_channel("C0RUN").scope
    assert [s for s in sorted(hashes(store)) if scope.allows(s)] == ["runbooks/guide.md"]
    # Re-syncing one source never deletes the other's documents.
    (two / "guide.md").unlink()
    assert sync([Source("runbooks", "folder", str(two))], store, EMBEDDER, tmp_path / "cache",
                progress=False)[0].deleted == 1
    assert set(hashes(store)) == {"handbook/guide.md"}


def test_a_sync_killed_mid_ingest_leaves_whole_documents_and_the_next_completes_it(tmp_path):
    files = {f"d{i:02}.md": doc(f"Doc {i}", f"Paragraph {i} " * 40) for i in range(12)}
    up = make_repo(tmp_path / "up", files)
    sources = tmp_path / "sources.toml"
    sources.write_text(f'[sources.hb]\ngit = "{up}"\n', "utf-8")
    child = [sys.executable, "-m", "bot.testing.sync_child", str(tmp_path / "store"), str(tmp_path / "cache"),
             str(sources)]
    killed = subprocess.run([*child, "--kill-after-docs", "5"], check=False, cwd=REPO, capture_output=True, text=True,
                            timeout=300)
    assert killed.returncode == -9
    store = EmbeddedStore(tmp_path / "store")
    try:
        partial = store.document_hashes()
        assert len(partial) == 5
        chunks = {c.source for c in store.iter_chunks()}
        assert chunks == set(partial)  # every stored document has its chunks
    finally:
        store.close()
    done = subprocess.run(child, check=False, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    [report] = json.loads(done.stdout.split("done ", 1)[1])["sources"]
    assert (report["added"], report["changed"], report["deleted"]) == (7, 0, 0)
    store = EmbeddedStore(tmp_path / "store")
    try:
        assert set(store.document_hashes()) == {f"hb/{n}" for n in files}
    finally:
        store.close()


def _cli_sync(tmp_path: Path, extra_env: dict[str, str]) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CITEBOT_") or k.startswith("CITEBOT_TEST_")}
    env.update(CITEBOT_SOURCES=str(tmp_path / "sources.toml"), CITEBOT_STORE=str(tmp_path / "store"),
               CITEBOT_SYNC_CACHE=str(tmp_path / "cache"), **extra_env)
    return subprocess.run([sys.executable, "-m", "bot.cli", "sync", "--json"], check=False,
                          cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=900)


def _cli_case(tmp_path: Path) -> Path:
    up = make_repo(tmp_path / "up", {"content/pager.md": doc("Pager", "The pager rotates on Mondays.")})
    (tmp_path / "sources.toml").write_text(
        f'[sources.handbook]\ngit = "{up}"\npath = "content"\n'
        f'[sources.broken]\narchive = "{tmp_path / "missing.zip"}"\n', "utf-8")
    return up


def _check_cli(proc: subprocess.CompletedProcess, up: Path) -> None:
    assert proc.returncode == 1, proc.stderr  # the broken source fails; the other synced
    out = json.loads(proc.stdout)
    handbook, broken = out["sources"]
    assert set(handbook) >= {"name", "kind", "commit", "added", "changed", "deleted", "skipped", "seconds"}
    assert (handbook["name"], handbook["kind"], handbook["added"]) == ("handbook", "git", 1)
    assert handbook["commit"] == git(up, "rev-parse", "HEAD") and handbook["error"] is None
    assert broken["name"] == "broken" and "does not exist" in broken["error"]


def test_citebot_sync_json_through_the_cli_on_the_embedded_store(tmp_path):
    up = _cli_case(tmp_path)
    _check_cli(_cli_sync(tmp_path, {}), up)
    store = EmbeddedStore(tmp_path / "store")
    try:
        assert set(store.document_hashes()) == {"handbook/pager.md"}
    finally:
        store.close()


@pytest.mark.elasticsearch
def test_citebot_sync_json_through_the_cli_on_elasticsearch(tmp_path, es_url, es_alias):  # noqa: F811
    from tests.elastic_support import open_elastic

    up = _cli_case(tmp_path)
    _check_cli(_cli_sync(tmp_path, {"CITEBOT_ES_URL": es_url, "CITEBOT_INDEX": es_alias}), up)
    store = open_elastic(es_url, es_alias)
    try:
        assert set(store.document_hashes()) == {"handbook/pager.md"}
    finally:
        store.close()


def test_sources_file_round_trip_and_serve_sync_interval(tmp_path):
    from click import BadParameter

    from bot.sync import parse_every

    assert parse_every("1h") == 3600 and parse_every("15m") == 900
    for bad in ("30s", "hourly", "1w", ""):
        with pytest.raises(BadParameter):
            parse_every(bad)
    path = tmp_path / "s.toml"
    path.write_text('[sources.a]\nfolder = "/x"\n', "utf-8")
    assert load_sources(path) == [Source("a", "folder", "/x")]


def test_the_servers_periodic_sync_runs_one_at_a_time_and_logs_failures(tmp_path, monkeypatch):
    from bot.settings import load_settings
    from bot.sync import Syncer
    from bot.wiring import Components

    folder = tmp_path / "runbooks"
    folder.mkdir()
    (folder / "a.md").write_text(doc("A", "Alpha."), "utf-8")
    (tmp_path / "sources.toml").write_text(
        f'[sources.runbooks]\nfolder = "{folder}"\n[sources.gone]\nfolder = "{tmp_path / "gone"}"\n', "utf-8")
    monkeypatch.setenv("CITEBOT_SOURCES", str(tmp_path / "sources.toml"))
    syncer = Syncer(Components(load_settings()), 3600)
    syncer.components.embedder = HashingEmbedder()  # type: ignore[misc]  # the Embedder's surface
    reports = syncer.tick()
    assert reports is not None and [r.error is None for r in reports] == [True, False]
    assert set(syncer.components.store.document_hashes()) == {"runbooks/a.md"}
    with syncer.running:  # a sync in progress: the next tick is let go, not queued
        assert syncer.tick() is None


def test_a_git_source_and_the_same_files_as_a_folder_give_the_same_chunks(tmp_path):
    """The sample handbook committed to a repository and the same files as a folder: one
    store's chunks are the other's, text, heading, page, order and overlap alike."""
    import shutil

    folder = tmp_path / "folder"
    shutil.copytree(REPO / "examples" / "handbook", folder)
    repo = tmp_path / "repo"
    shutil.copytree(REPO / "examples" / "handbook", repo)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "the handbook")
    chunks = {}
    for kind, path in (("git", repo), ("folder", folder)):
        s = EmbeddedStore(tmp_path / f"store-{kind}")
        try:
            result = run(Source("hb", kind, str(path)), s, tmp_path / kind)
            assert result.error is None and result.added > 30, result
            chunks[kind] = sorted((c.source, c.heading_path, c.page, c.ordinal, c.text, c.tokens,
                                   c.overlap_prev, c.overlap_next) for c in s.iter_chunks())
        finally:
            s.close()
    assert len(chunks["git"]) > 300 and chunks["git"] == chunks["folder"]

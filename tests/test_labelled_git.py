"""Git-sourced labelled collections (benchmarks/collection_source.py): a real repository
made here, read at a commit from a mirror folder (or cloned), exported to docs/, validated;
a wrong commit, a reserved repository and a clone that cannot happen are clear errors."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from benchmarks import collection_source as source
from benchmarks import labelled

PAGES = {f"handbook/page{n:02}.md": f"# Page {n}\n\nThe rule numbered {n} says: bring token{n} to desk {n}.\n"
         for n in range(30)}


def git(cwd: Path, *args: str) -> str:
    r = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True,
                       env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org", "GIT_COMMITTER_NAME": "t",
                            "GIT_COMMITTER_EMAIL": "t@example.org", "HOME": str(cwd), "PATH": "/usr/bin:/bin"})
    return r.stdout.strip()


@pytest.fixture()
def repo(tmp_path, monkeypatch):
    """A repository with two commits, mirrored bare as acme+handbook/repo; the mirrors folder
    in CITEBOT_GIT_MIRRORS and the collections cache under tmp_path."""
    src = tmp_path / "src"
    for rel, text in PAGES.items() | {"handbook/sub/deep.md": "# Deep\n\nA page one folder down.\n",
                                      "handbook/notes.txt": "not Markdown\n",
                                      "README.md": "# Outside the root\n"}.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text(text, encoding="utf-8")
    git(src, "init", "-q", "-b", "main")
    git(src, "add", ".")
    git(src, "commit", "-q", "-m", "first")
    first = git(src, "rev-parse", "HEAD")
    (src / "handbook" / "page00.md").write_text("# Page 0\n\nRewritten in the second commit.\n", encoding="utf-8")
    git(src, "commit", "-q", "-am", "second")
    second = git(src, "rev-parse", "HEAD")
    mirrors = tmp_path / "mirrors"
    git(tmp_path, "clone", "-q", "--bare", str(src), str(mirrors / "acme+handbook" / "repo"))
    monkeypatch.setenv("CITEBOT_GIT_MIRRORS", str(mirrors))
    monkeypatch.setattr(source, "CACHE", tmp_path / "cache")
    return {"src": src, "first": first, "second": second, "mirrors": mirrors}


def collection(folder: Path, **keys: object) -> labelled.Collection:
    folder.mkdir(parents=True, exist_ok=True)
    lines = [f"name = {json.dumps(folder.name)}", 'kind = "Markdown"', "heldout = false",
             'description = "a test collection"']
    lines += [f"{k} = {json.dumps(v)}" for k, v in keys.items()]
    (folder / "collection.toml").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return labelled.load_collection(folder)


def items(extra: list[dict] | None = None) -> str:
    """42 valid items over the pages of the first commit, a third of them held out."""
    kinds = ["paraphrase"] * 14 + ["rare"] * 4 + ["phrase"] * 4 + ["alias"] * 4
    out = [{"id": f"q{n}", "kind": kind, "question": f"where does token{n} go?",
            "must_contain": [f"bring token{n} to desk {n}."], "split": "heldout" if n % 3 == 0 else "dev"}
           for n, kind in enumerate(kinds)]
    out += [{"id": f"u{n}", "kind": "unanswerable", "question": f"what is rule {n + 100}?", "must_contain": [],
             "split": "heldout" if n % 3 == 0 else "dev"} for n in range(16)]
    return "".join(json.dumps(i) + "\n" for i in out + (extra or []))


def test_fetch_exports_the_root_at_the_commit_and_reuses_it(repo, tmp_path):
    c = collection(tmp_path / "acme", repo="acme/handbook", commit=repo["first"], root="handbook",
                   include=["*.md"])
    docs = labelled.fetch(c, quiet=True)
    assert docs == tmp_path / "cache" / "acme" / "docs"
    got = sorted(p.relative_to(docs).as_posix() for p in docs.rglob("*") if p.is_file())
    assert got == sorted([r.removeprefix("handbook/") for r in PAGES] + ["sub/deep.md"])
    assert (docs / "page00.md").read_text(encoding="utf-8") == PAGES["handbook/page00.md"]
    assert c.version() == f"acme/handbook {repo['first']}"
    stamp = json.loads((c.cache / "fetched.json").read_text(encoding="utf-8"))
    assert stamp["files"] == 31 and stamp["version"] == repo["first"]
    # The same selection again: docs/ is reused as it is, not rebuilt
    (docs / "marker.md").write_text("left alone\n", encoding="utf-8")
    assert labelled.fetch(c, quiet=True) == docs and (docs / "marker.md").exists()
    # Another commit: rebuilt, with that commit's text
    c2 = collection(tmp_path / "acme", repo="acme/handbook", commit=repo["second"], root="handbook",
                    include=["*.md"])
    docs = labelled.fetch(c2, quiet=True)
    assert not (docs / "marker.md").exists()
    assert "Rewritten in the second commit." in (docs / "page00.md").read_text(encoding="utf-8")
    assert c2.version() == f"acme/handbook {repo['second']}"


def test_validate_passes_on_good_items_and_names_a_string_the_pages_lack(repo, tmp_path):
    c = collection(tmp_path / "acme", repo="acme/handbook", commit=repo["first"], root="handbook",
                   include=["*.md"])
    c.questions.write_text(items(), encoding="utf-8")
    rep = labelled.validate(c)
    assert rep.problems == []
    assert rep.notes[0].startswith(f"acme/handbook {repo['first']}: 31 documents")
    # Rewritten in the second commit only, so absent at the first
    c.questions.write_text(items([{"id": "late", "kind": "paraphrase", "question": "what changed?",
                                   "must_contain": ["Rewritten in the second commit."], "split": "dev"}]),
                           encoding="utf-8")
    rep = labelled.validate(c)
    assert len(rep.problems) == 1
    assert "(late): must_contain 'Rewritten in the second commit.' occurs nowhere" in rep.problems[0]


def test_a_commit_the_mirror_lacks_is_a_clear_error(repo, tmp_path):
    c = collection(tmp_path / "acme", repo="acme/handbook", commit="0123456789" * 4, root="handbook")
    with pytest.raises(labelled.CollectionError) as err:
        labelled.fetch(c, quiet=True)
    assert f"commit {'0123456789' * 4} is not in the mirror {repo['mirrors'] / 'acme+handbook' / 'repo'}" \
        in str(err.value)
    assert not c.docs.exists()


def test_a_root_the_commit_lacks_is_a_clear_error(repo, tmp_path):
    c = collection(tmp_path / "acme", repo="acme/handbook", commit=repo["first"], root="pages")
    with pytest.raises(labelled.CollectionError, match=r"root 'pages' is not a folder of acme/handbook at"):
        labelled.fetch(c, quiet=True)


def test_a_mirror_with_a_work_tree_is_read_through_its_git_folder(repo, tmp_path):
    git(tmp_path, "clone", "-q", str(repo["src"]), str(repo["mirrors"] / "acme+wiki" / "repo"))
    assert (repo["mirrors"] / "acme+wiki" / "repo" / ".git").is_dir()
    c = collection(tmp_path / "wiki", repo="acme/wiki", commit=repo["second"])  # no root, no include
    docs = labelled.fetch(c, quiet=True)
    assert (docs / "README.md").read_text(encoding="utf-8") == "# Outside the root\n"
    assert (docs / "handbook" / "notes.txt").exists()


def test_without_a_mirror_the_repository_is_cloned_and_a_failed_clone_says_what_to_do(repo, tmp_path,
                                                                                      monkeypatch):
    host = tmp_path / "host"
    git(tmp_path, "clone", "-q", "--bare", str(repo["src"]), str(host / "acme" / "cloned"))
    monkeypatch.setattr(source, "GIT_HOST", host.as_uri())
    c = collection(tmp_path / "cloned", repo="acme/cloned", commit=repo["first"], root="handbook")
    docs = labelled.fetch(c, quiet=True)
    assert (docs / "sub" / "deep.md").exists()
    assert (tmp_path / "cache" / "git" / "acme+cloned.git" / "HEAD").is_file()
    monkeypatch.delenv("CITEBOT_GIT_MIRRORS")
    c = collection(tmp_path / "gone", repo="acme/gone", commit=repo["first"])
    with pytest.raises(labelled.CollectionError) as err:
        labelled.fetch(c, quiet=True)
    message = str(err.value)
    assert message.startswith("acme/gone: CITEBOT_GIT_MIRRORS is not set, and git clone")
    assert "set CITEBOT_GIT_MIRRORS to a folder holding acme+gone/repo" in message


# The reserved repository's name comes from the refusal list itself: nothing here names,
# fetches or reads it.
@pytest.mark.parametrize("name", [labelled.RESERVED_REPOS[0], labelled.RESERVED_REPOS[0].title()])
def test_the_reserved_repository_is_refused(tmp_path, name):
    with pytest.raises(labelled.CollectionError, match="is reserved"):
        collection(tmp_path / "r", repo=name, commit="a" * 40)


@pytest.mark.parametrize(("keys", "says"), [
    ({"repo": "acme/handbook", "commit": "a" * 40, "package": "git-doc"}, "not both or neither"),
    ({"repo": "acme/handbook", "commit": "main"}, "must be a full commit id"),
    ({"repo": "acme", "commit": "a" * 40}, "must be owner/name"),
    ({"repo": "acme/handbook"}, "missing key 'commit'"),
    ({"package": "git-doc", "commit": "a" * 40, "root": "x", "include": ["*"]}, "'commit' goes with 'repo'"),
    ({"repo": "acme/handbook", "commit": "a" * 40, "root": "../up"}, "must be a folder inside the repository"),
])
def test_a_bad_git_collection_toml_says_what_to_fix(tmp_path, keys, says):
    with pytest.raises(labelled.CollectionError, match=says):
        collection(tmp_path / "bad", **keys)

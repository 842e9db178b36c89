"""The sources file (CITEBOT_SOURCES, ingest/sources.py): what it accepts, the line and fix
of what it refuses, forge links, and tokens kept off command lines and out of messages."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bot.settings import source_tokens
from ingest import git
from ingest.sources import forge_link, load_sources
from search.errors import ConfigError

REPO = Path(__file__).resolve().parent.parent

GOOD = """\
[sources.handbook]            # stored as handbook/<path>
git = "https://github.com/org/handbook.git"
branch = "main"
path = "content"
[sources.runbooks]
folder = "/srv/runbooks"
[sources.eng-wiki]
archive = "/exports/confluence-ENG.zip"
"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "sources.toml"
    path.write_text(text, "utf-8")
    return path


def test_the_documented_example_reads_as_three_sources(tmp_path):
    sources = load_sources(_write(tmp_path, GOOD))
    assert [(s.name, s.kind, s.location) for s in sources] == [
        ("handbook", "git", "https://github.com/org/handbook.git"),
        ("runbooks", "folder", "/srv/runbooks"), ("eng-wiki", "archive", "/exports/confluence-ENG.zip")]
    handbook = sources[0]
    assert (handbook.branch, handbook.path) == ("main", "content")
    assert handbook.link == "https://github.com/org/handbook/blob/{commit}/{path}"


@pytest.mark.parametrize(("text", "line", "words"), [
    ('[sources."../etc"]\nfolder = "/x"\n', 1, "not a plain path segment"),
    ('[sources.a]\nfolder = "/x"\n[sources."b c"]\nfolder = "/y"\n', 3, "not a plain path segment"),
    ('[sources.a]\nfolder = "/x"\ngit = "/y"\n', 1, "names git and folder"),
    ('[sources.a]\nbranch = "main"\n', 1, "names no kind"),
    ('[sources.a]\nfolder = "/x"\nbranch = "main"\n', 3, "unknown key 'branch'"),
    ('[sources.a]\narchive = "/x.tar"\n', 2, "not a .zip"),
    ('[sources.a]\ngit = "https://me:hunter2@git.example.com/r.git"\n', 2, "carries credentials"),
    ('[sources.a]\ngit = "https://h/r.git"\nbranch = "--upload-pack=x"\n', 3, "not a branch name"),
    ('[sources.a]\ngit = "https://h/r.git"\npath = "../up"\n', 3, "not a folder of the repository"),
    ('[sources.a]\ngit = "https://h/r.git"\ntoken_env = "ghp_abc123!"\n', 3, "not an environment variable"),
    ('[sources.a]\ngit = "/local/repo"\ntoken_env = "TOKEN"\n', 3, "over https only"),
    ('[sources.a]\ngit = "/r"\nlink = "https://h/{path}"\n', 3, "not a link template"),
])
def test_a_bad_source_names_its_line_and_the_fix(tmp_path, text, line, words):
    path = _write(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        load_sources(path)
    message = str(err.value)
    assert message.startswith(f"bad setting: CITEBOT_SOURCES: {path} line {line} ")
    assert words in message and "fix:" in message
    assert "hunter2" not in message


def test_a_file_that_is_not_toml_or_names_nothing_says_so(tmp_path):
    with pytest.raises(ConfigError, match=r"is not valid TOML: .* line 2"):
        load_sources(_write(tmp_path, "[sources.a]\nfolder = /x\n"))
    with pytest.raises(ConfigError, match="names no source"):
        load_sources(_write(tmp_path, "# nothing yet\n"))
    with pytest.raises(ConfigError, match="is a directory"):
        load_sources(tmp_path)


@pytest.mark.parametrize(("url", "link"), [
    ("https://github.com/org/hb.git", "https://github.com/org/hb/blob/{commit}/{path}"),
    ("git@github.com:org/hb.git", "https://github.com/org/hb/blob/{commit}/{path}"),
    ("https://gitlab.com/group/sub/hb", "https://gitlab.com/group/sub/hb/-/blob/{commit}/{path}"),
    ("ssh://git@codeberg.org/org/hb.git", "https://codeberg.org/org/hb/src/commit/{commit}/{path}"),
    ("https://gitea.example.com/org/hb.git", "https://gitea.example.com/org/hb/src/commit/{commit}/{path}"),
    ("https://bitbucket.org/team/hb.git", "https://bitbucket.org/team/hb/src/{commit}/{path}"),
    ("https://git.example.com/org/hb.git", None),
    ("/srv/git/handbook", None),
])
def test_known_forges_get_a_link_to_the_file_at_the_commit(url, link):
    assert forge_link(url) == link


def test_a_token_comes_from_its_variable_and_a_missing_one_stops_the_start(tmp_path, monkeypatch):
    sources = load_sources(_write(tmp_path, '[sources.hb]\ngit = "https://h.example/r.git"\n'
                                            'token_env = "HB_TOKEN"\n'))
    monkeypatch.delenv("HB_TOKEN", raising=False)
    with pytest.raises(ConfigError, match="token_env names HB_TOKEN, which is not set"):
        source_tokens(sources)
    monkeypatch.setenv("HB_TOKEN", "s3cr3t-token")
    assert source_tokens(sources) == {"hb": "s3cr3t-token"}


def test_a_token_reaches_git_through_its_environment_only_and_is_masked_in_errors(tmp_path):
    env = git._env("s3cr3t-token", "x-access-token")
    assert env["GIT_CONFIG_KEY_0"] == "http.extraHeader"
    assert env["GIT_CONFIG_VALUE_0"].startswith("Authorization: Basic ")
    assert env["GIT_TERMINAL_PROMPT"] == "0"
    # git quotes what it was given; a token in its message is masked in ours.
    repo = tmp_path / "r"
    git.run(["init", "--bare", "--quiet", str(repo)])
    with pytest.raises(git.GitError) as err:
        git.run(["fetch", str(tmp_path / "s3cr3t-token")], cwd=repo, token="s3cr3t-token")
    assert "s3cr3t-token" not in str(err.value) and "***" in str(err.value)
    assert "s3cr3t" not in (repo / "config").read_text()


def test_citebot_stops_at_start_on_a_bad_sources_file(tmp_path):
    path = _write(tmp_path, '[sources.a]\nfolder = "/x"\nbranch = "main"\n')
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONPATH": str(REPO),"CITEBOT_STORE": str(tmp_path / "store"),
           "CITEBOT_SOURCES": str(path)}
    proc = subprocess.run([sys.executable, "-m", "bot.cli", "sync"], check=False, cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert f"citebot: bad setting: CITEBOT_SOURCES: {path} line 3 ([sources.a]): unknown key" in proc.stderr
    unset = subprocess.run([sys.executable, "-m", "bot.cli", "sync"], check=False, cwd=tmp_path,
                           env={k: v for k, v in env.items() if k != "CITEBOT_SOURCES"},
                           capture_output=True, text=True, timeout=120)
    assert unset.returncode == 2 and "CITEBOT_SOURCES is unset" in unset.stderr

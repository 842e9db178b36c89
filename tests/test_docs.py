"""The documentation: the MkDocs site builds with --strict (a broken link, a missing anchor
or a page left out of the nav fails it), README.md stays a short introduction, what a
reader reads points only inside the repository, and no file of the tree (code, docs,
scripts, configuration) carries session or issue numbers."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO

README_MAX_LINES = 200
# The words of the project's own bookkeeping, which mean nothing to a reader of the code or docs.
BOOKKEEPING = re.compile(r"session [0-9]|issue #?[0-9]", re.IGNORECASE)
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
INDENTED = re.compile(r"^(?: {4}|\t).*$", re.MULTILINE)
INLINE_CODE = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"\]\(([^)\s]+)\)")
URL = re.compile(r"\b[a-z][a-z0-9+.-]*://", re.IGNORECASE)


def _markdown_files() -> list[Path]:
    """Every Markdown file of the checkout that git knows or would add (not ignored ones)."""
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "*.md"],
                            cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    return sorted({REPO / name for name in listed if (REPO / name).is_file()})


def _tree_files() -> list[Path]:
    """Every file of the checkout that git knows or would add: the whole tree but .git and
    what .gitignore leaves out (the environment, caches, built sites)."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            cwd=REPO, capture_output=True, text=True, check=True).stdout.split("\0")
    return sorted({REPO / name for name in listed if name and (REPO / name).is_file()})


def _prose(text: str) -> str:
    """The text a reader follows links in: code blocks and inline code taken out."""
    return INLINE_CODE.sub("", INDENTED.sub("", FENCE.sub("", text)))


def _build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    # Not --quiet: it drops the warnings --strict counts, and a broken link would pass.
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict",
                           "-f", str(config), "-d", str(site)],
                          cwd=config.parent, capture_output=True, text=True, timeout=300, env=env,
                          check=False)


def test_the_docs_site_builds_strictly(tmp_path):
    result = _build(REPO / "mkdocs.yml", tmp_path / "site")
    assert result.returncode == 0, result.stdout + result.stderr
    assert (tmp_path / "site" / "index.html").is_file()
    assert (tmp_path / "site" / "decisions" / "index.html").is_file()


def test_a_broken_link_fails_the_strict_build(tmp_path):
    """The strict build is what catches a broken link: the same site with one fails."""
    shutil.copytree(REPO / "docs", tmp_path / "docs")
    shutil.copy(REPO / "mkdocs.yml", tmp_path / "mkdocs.yml")
    index = tmp_path / "docs" / "index.md"
    index.write_text(index.read_text(encoding="utf-8") + "\nSee [nowhere](no-such-page.md).\n",
                     encoding="utf-8")
    result = _build(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert result.returncode != 0
    assert "no-such-page.md" in result.stdout + result.stderr


def test_the_readme_is_a_short_introduction():
    lines = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines; move detail into docs/"
    text = "\n".join(lines)
    for command in ("scripts/demo", "scripts/test"):
        assert f"    {command}\n" in text, f"README.md no longer shows {command} as a command"


def test_no_file_of_the_tree_carries_session_or_issue_numbers():
    """Code, docs, scripts and configuration alike: a comment says what was measured and
    links its record, not who measured it or when. Binary files (a NUL byte) are skipped."""
    offenders = []
    for path in _tree_files():
        data = path.read_bytes()
        if b"\0" in data:
            continue
        offenders += [f"{path.relative_to(REPO)}:{n}: {line.strip()[:120]}"
                      for n, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1)
                      if BOOKKEEPING.search(line)]
    assert offenders == [], "reword these to say what was measured:\n" + "\n".join(offenders)


def test_what_a_reader_reads_links_only_inside_the_repository():
    """No URL to hosted docs in the prose, and every relative link names a file that exists.
    (Example values such as `https://wiki.example.com/{path}` stand in code, not as links.
    The sample collection's own documents are test data, not docs.)"""
    offenders = []
    for path in _markdown_files():
        rel = path.relative_to(REPO).as_posix()
        if rel.startswith("examples/handbook/"):
            continue
        prose = _prose(path.read_text(encoding="utf-8"))
        offenders += [f"{rel}: {m.group(0)}…" for m in URL.finditer(prose)]
        for target in LINK.findall(prose):
            file_part = target.split("#", 1)[0]
            if file_part and not (path.parent / file_part).exists():
                offenders.append(f"{rel}: link to {target} names no file")
    assert offenders == []


# Documents, models, graphs and stores are fetched or built at run time, never committed:
# the largest file the project writes itself (docs/benchmarks.md) is 44 KB.
MAX_TRACKED_FILE_BYTES = 1_000_000


def test_no_file_of_the_tree_is_a_large_artefact():
    large = [f"{path.relative_to(REPO)} ({path.stat().st_size:,} bytes)" for path in _tree_files()
             if path.stat().st_size > MAX_TRACKED_FILE_BYTES]
    assert not large, "fetched or built artefacts do not belong in the repository: " + ", ".join(large)

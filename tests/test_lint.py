"""The linter, the formatter's check and the type checker pass over bot, ingest and search (as docs/getting-started.md
asks before a commit), so CI fails on a new finding instead of letting them pile up."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    # Generous: a cold mypy run over the three packages takes well under a minute here.
    return subprocess.run([sys.executable, "-m", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=600, check=False)


def test_ruff_finds_nothing():
    result = _run("ruff", "check", "bot", "ingest", "search", "benchmarks")
    assert result.returncode == 0, f"ruff check failed:\n{result.stdout}{result.stderr}"


def test_the_code_is_as_ruff_formats_it():
    result = _run("ruff", "format", "--check", "bot", "ingest", "search")
    assert result.returncode == 0, f"run `ruff format bot ingest search`:\n{result.stdout}{result.stderr}"


def test_mypy_finds_nothing():
    # -p, not directories: given search/, mypy would take search/types.py for stdlib types.
    result = _run("mypy", "-p", "bot", "-p", "ingest", "-p", "search")
    assert result.returncode == 0, f"mypy failed:\n{result.stdout}{result.stderr}"
    assert "Success: no issues found" in result.stdout

"""The house rules that hold the layout together, as tests."""

from __future__ import annotations

import re
import subprocess
import sys

import grimp
import pytest

from tests.conftest import REPO

LINT_IMPORTS = "from importlinter.cli import lint_imports_command; lint_imports_command()"


def test_imports_flow_one_way():
    """The import-linter contracts of pyproject.toml: bot -> ingest -> search, bot's
    sub-packages in layers, and no production module importing bot.testing."""
    result = subprocess.run([sys.executable, "-c", LINT_IMPORTS], cwd=REPO, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert re.search(r"Contracts: (\d+) kept, 0 broken", result.stdout)
    assert int(re.search(r"Contracts: (\d+) kept", result.stdout).group(1)) >= 3


def test_no_module_imports_itself_through_others():
    """No import circle between modules of bot, ingest and search (imports made only for type
    checking included): a circle means a module cannot be read, tested or replaced on its own."""
    graph = grimp.build_graph("bot", "ingest", "search")
    circles = sorted(f"{importer} -> {imported} -> … -> {importer}"
                     for importer in graph.modules
                     for imported in graph.find_modules_directly_imported_by(importer)
                     if graph.chain_exists(importer=imported, imported=importer))
    assert circles == []


def test_nothing_a_user_reads_points_outside_the_repository():
    tracked = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True,
                             check=True).stdout.split()
    offenders = []
    for name in tracked:
        if (not name.endswith((".md", ".py", ".toml", ".yml", ".yaml", ".txt")) or name.startswith("tests/")
                or not (REPO / name).is_file()):
            continue
        text = (REPO / name).read_text(encoding="utf-8", errors="replace")
        if re.search(r"\.\./shared|shared/DESIGN\.md|shared/STYLE\.md", text):
            offenders.append(name)
    assert offenders == []


# Lines a module may hold (as `ruff format` lays it out) before it has grown several jobs;
# a benchmark is one script that measures one thing end to end.
MODULE_MAX_LINES = {"bot": 500, "ingest": 500, "search": 500, "benchmarks": 600}


@pytest.mark.parametrize("package", sorted(MODULE_MAX_LINES))
def test_no_module_has_grown_several_jobs(package):
    sizes = {p.relative_to(REPO).as_posix(): len(p.read_text(encoding="utf-8").splitlines())
             for p in (REPO / package).rglob("*.py")}
    limit = MODULE_MAX_LINES[package]
    assert {name: n for name, n in sizes.items() if n > limit} == {}

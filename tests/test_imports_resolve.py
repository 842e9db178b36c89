"""Every `from <project module> import name` in the repository names something that exists,
including the imports inside functions, which importing a module never runs (a benchmark's
section imports its stand-ins late; a moved name would otherwise fail only when CI runs it)."""

from __future__ import annotations

import ast
import importlib
import subprocess

from tests.conftest import REPO

PROJECT = ("bot", "ingest", "search", "benchmarks", "tests")
OPTIONAL = {"torch", "transformers", "sentence_transformers"}  # the `reference` extra


def _from_imports():
    files = subprocess.run(["git", "ls-files", "*.py"], cwd=REPO, capture_output=True, text=True,
                           check=True).stdout.split()
    for name in files:
        tree = ast.parse((REPO / name).read_text(encoding="utf-8"), filename=name)
        for node in ast.walk(tree):
            if (isinstance(node, ast.ImportFrom) and node.level == 0 and node.module
                    and node.module.split(".")[0] in PROJECT):
                yield name, node


def test_every_imported_name_exists():
    missing = []
    for name, node in _from_imports():
        try:
            module = importlib.import_module(node.module)
        except ModuleNotFoundError as exc:
            if exc.name in OPTIONAL:
                continue
            missing.append(f"{name}:{node.lineno}: {node.module} ({exc})")
            continue
        for alias in node.names:
            if alias.name == "*" or hasattr(module, alias.name):
                continue
            try:
                importlib.import_module(f"{node.module}.{alias.name}")
            except ModuleNotFoundError:
                missing.append(f"{name}:{node.lineno}: {node.module}.{alias.name}")
    assert missing == []

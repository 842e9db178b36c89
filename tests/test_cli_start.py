"""No command imports torch, transformers or sentence-transformers; those that need no model
import none of the model's libraries either. None of the three is in the runtime lock
(docs/decisions/0037-runtime-without-torch.md); this keeps a stray import from coming back.
On the embedded, extractive default, `ask`, `search` and `chunks` import none of Redis,
the graph builder, Claude, Slack and Elasticsearch either.

Checked in a fresh process through sys.modules at exit, not by timing (timings are for
benchmarks/cli_start.py): importing torch is a second on a quiet machine, and
sentence-transformers four.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
HEAVY = ("torch", "transformers", "sentence_transformers")

# What the embedded, extractive default never uses: Redis (REDIS_URL unset), the graph
# builder (the graph is cached), Claude, Slack and Elasticsearch. redis-py was 0.08 s of
# every `citebot ask` when bot.memory imported it whether or not REDIS_URL was set.
# pydantic-settings is no dependency any more: its import was 0.1 s of every command
# (docs/decisions/0051-settings-without-pydantic-settings.md).
UNUSED_BY_DEFAULT = ("redis", "onnx", "anthropic", "slack_bolt", "slack_sdk", "elasticsearch", "pydantic_settings")

_RUN = (
    "import atexit, json, sys\n"
    "watch = json.loads(sys.argv[2])\n"
    "atexit.register(lambda: print('HEAVY ' + json.dumps([m for m in watch if m in sys.modules]),"
    " file=sys.stderr))\n"
    "from bot.cli import main\n"
    "sys.argv = ['citebot', *json.loads(sys.argv[1])]\n"
    "main()\n"
)


def heavy_modules(args: list[str], store: Path, watch: tuple[str, ...] = HEAVY) -> list[str]:
    env = dict(os.environ, CITEBOT_STORE=str(store))
    for name in ("CITEBOT_ES_URL", "REDIS_URL", "ANTHROPIC_API_KEY"):
        env.pop(name, None)
    out = subprocess.run([sys.executable, "-c", _RUN, json.dumps(args), json.dumps(watch)], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=600, check=False)
    (line,) = [x for x in out.stderr.splitlines() if x.startswith("HEAVY ")]
    return json.loads(line.removeprefix("HEAVY "))


@pytest.mark.parametrize("args", [["--help"], ["chunks"], ["chunks", "--json"],
                                  ["turns", "show", "t-000000000000"], ["ingest", "--help"]])
def test_commands_without_a_model_import_no_model_library(args, small_store):
    assert heavy_modules(args, small_store.directory) == []


@pytest.mark.slow
@pytest.mark.parametrize("args", [["search", "who picks the tasks for each robot"],
                                  ["ask", "who picks the tasks for each robot"]])
def test_commands_that_embed_a_question_import_no_torch_either(args, examples_store):
    """The model runs on ONNX Runtime (docs/decisions/0030-onnx-runtime-encoder.md)."""
    assert heavy_modules(args, examples_store.directory) == []


@pytest.mark.slow
@pytest.mark.parametrize("args", [["ask", "who picks the tasks for each robot"],
                                  ["search", "who picks the tasks for each robot"], ["chunks"]])
def test_the_embedded_default_imports_no_redis_claude_slack_or_elasticsearch(args, examples_store):
    """Each is imported where it is used, and the default uses none of them."""
    assert heavy_modules(args, examples_store.directory, UNUSED_BY_DEFAULT) == []


@pytest.mark.slow
def test_an_ingest_imports_no_torch_either(tmp_path, embedder):
    """The ingest embeds every window on ONNX Runtime, into a store of its own."""
    assert heavy_modules(["ingest", str(REPO / "examples" / "handbook" / "people")], tmp_path / "store") == []
    assert any((tmp_path / "store").iterdir())  # it did ingest


_GC = (
    "import atexit, gc, json, sys\n"
    "atexit.register(lambda: print('GC ' + json.dumps(gc.isenabled()), file=sys.stderr))\n"
    "from bot.cli import main\n"
    "sys.argv = ['citebot', *json.loads(sys.argv[1])]\n"
    "main()\n"
)


def collects_garbage(args: list[str], store: Path) -> bool:
    """Whether the command's process still had cyclic garbage collection on at exit."""
    out = subprocess.run([sys.executable, "-c", _GC, json.dumps(args)], cwd=REPO, timeout=600, check=False,
                         env=dict(os.environ, CITEBOT_STORE=str(store)), capture_output=True, text=True)
    (line,) = [x for x in out.stderr.splitlines() if x.startswith("GC ")]
    return json.loads(line.removeprefix("GC "))


def test_commands_that_go_on_keep_collecting_garbage(small_store):
    """Only a one-question command turns the collector off (bot.cli.ONE_QUESTION_COMMANDS)."""
    assert collects_garbage(["chunks"], small_store.directory)
    assert collects_garbage(["turns", "show", "t-000000000000"], small_store.directory)


@pytest.mark.slow
def test_one_question_runs_without_the_garbage_collector(examples_store):
    """Its imports' objects were walked again and again: decision 0051."""
    assert not collects_garbage(["ask", "who picks the tasks for each robot"], examples_store.directory)

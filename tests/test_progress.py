"""The ingest progress line: drawn on a terminal only, never with --json; honest ETA."""

from __future__ import annotations

import io
import json
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

from ingest.pipeline import ingest
from ingest.progress import Progress, eta_seconds, format_duration
from search.embedded import EmbeddedStore

REPO = Path(__file__).resolve().parent.parent


def test_eta_is_what_is_left_at_the_rate_so_far():
    assert eta_seconds(0, 1000, 5.0) is None  # no rate yet
    assert eta_seconds(250, 1000, 10.0) == pytest.approx(30.0)  # 25/s, 750 left
    assert eta_seconds(1000, 1000, 40.0) == 0.0
    assert eta_seconds(1200, 1000, 40.0) == 0.0  # never negative
    assert [format_duration(s) for s in (None, 4.4, 65, 3 * 3600 + 7 * 60)] == ["?", "4s", "1m05s", "3h07m"]


def test_the_line_counts_files_chunks_windows_with_rate_and_eta():
    now = [100.0]
    out = io.StringIO()
    bar = Progress(files=10, chars=4000, enabled=True, stream=out, clock=lambda: now[0])
    now[0] = 110.0
    bar.advance(files=2, chunks=30, windows=50, chars=1000)
    line = bar.line()
    assert line == "ingest 2/10 files · 30 chunks · 50 windows · 5.0 windows/s · ETA 30s"
    assert out.getvalue().startswith("\r" + line)
    bar.finishing()
    assert out.getvalue().endswith("\ringest 2/10 files · 30 chunks · 50 windows · finishing the collection")
    bar.close()
    assert out.getvalue().endswith("\r")


def test_nothing_is_drawn_when_stderr_is_not_a_terminal(tmp_path, test_embedder, capsys):
    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(3):
        (docs / f"d{i}.md").write_text(f"# Doc {i}\n\nSome text about pagers, number {i}.\n")
    summary = ingest([docs], EmbeddedStore(tmp_path / "s"), test_embedder)  # progress=None: ask stderr
    assert summary.documents == 3
    captured = capsys.readouterr()
    assert captured.err == "" and captured.out == ""


def _ingest_on_a_terminal(tmp_path: Path, *args: str) -> tuple[str, str]:
    """`citebot ingest` with stderr on a pseudo-terminal: (stdout, what the terminal got)."""
    docs = tmp_path / "docs"
    docs.mkdir(exist_ok=True)
    (docs / "a.md").write_text("# Pager\n\nRotate the pager every Monday at nine.\n")
    leader, follower = pty.openpty()
    env = dict(os.environ, CITEBOT_STORE=str(tmp_path / f"store{len(args)}"))
    proc = subprocess.Popen([sys.executable, "-m", "bot.cli", "ingest", str(docs), *args], cwd=REPO,
                            env=env, stdout=subprocess.PIPE, stderr=follower, text=True)
    os.close(follower)
    seen = b""
    while True:
        try:
            data = os.read(leader, 4096)
        except OSError:  # the child closed its end
            break
        if not data:
            break
        seen += data
    stdout, _ = proc.communicate(timeout=300)
    os.close(leader)
    assert proc.returncode == 0, seen.decode(errors="replace")
    return stdout, seen.decode(errors="replace")


@pytest.mark.slow
def test_a_terminal_gets_the_line_and_json_gets_only_the_summary(tmp_path):
    stdout, terminal = _ingest_on_a_terminal(tmp_path)
    assert "ingest 1/1 files · 1 chunks · 1 windows" in terminal and "windows/s · ETA" in terminal
    # The commit (an Elasticsearch merge can take minutes) is announced, then cleared.
    assert "1 windows · finishing the collection" in terminal
    assert "Ingested 1 document(s)" in stdout

    stdout, terminal = _ingest_on_a_terminal(tmp_path, "--json")
    assert "windows/s" not in terminal
    summary = json.loads(stdout)
    assert set(summary) == {"documents", "unchanged", "deleted", "chunks", "skipped", "warnings", "seconds"}
    assert summary["documents"] == 1

"""What a sync costs after a small edit, beside the full ingest of the same repository.

    .venv/bin/python -m benchmarks.sync [--docs 1000] [--edit-percent 1] [--model] [--json]

A git repository of N generated Markdown documents (three sections of a few paragraphs
each, words drawn from a fixed vocabulary with a fixed seed) is made in a temporary folder
and synced into a fresh embedded store as a git source (`citebot sync`'s code path,
ingest/sync.py): the full ingest. Then 1% of the documents (at least one) get one paragraph
edited, the change is committed, and the source is synced again.

Printed: the seconds of each, their ratio (the goal is under 10%), the windows embedded by
each (counted at the embedder: a sync should embed only the edited documents' windows),
the documents the second sync reports changed, and the calibration texts each encoded (the
gate is measured again whenever the collection changes, search/calibration.py).

By default the embedder is the test embedder (bot/testing/embedder.py: a hash per word, no
model), so the figures are the pipeline's own cost: staging, reading, hashing, chunking,
writing. With --model the real model embeds (minutes for 1,000 documents on a shared
2-core machine); the model's cost falls almost all on the full ingest, so the ratio
with it is lower still. docs/decisions/0035-sources-and-sync.md has the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

WORDS = ("pager rotation incident runbook deploy release review budget travel leave policy "
         "laptop access badge office holiday expense approval manager team customer support "
         "escalation severity outage backup restore database network vendor contract invoice "
         "onboarding training security password token audit retention privacy quarter goal").split()


def _paragraph(rng: random.Random, n: int = 45) -> str:
    words = [rng.choice(WORDS) for _ in range(n)]
    return " ".join(words).capitalize() + "."


def _document(rng: random.Random, i: int) -> str:
    parts = [f"# Document {i}\n"]
    for s in range(3):
        parts.append(f"## Section {s}\n")
        parts += [_paragraph(rng) + "\n" for _ in range(3)]
    return "\n".join(parts)


def _git(repo: Path, *args: str) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@example.com",
           "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "bench@example.com"}
    subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True)


class Counting:
    """The embedder, counting the windows and calibration texts it encodes."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.windows = 0
        self.texts = 0

    def __getattr__(self, name: str):
        return getattr(self.inner, name)

    def encode_jobs(self, jobs):
        self.windows += len(jobs)
        return self.inner.encode_jobs(jobs)

    def encode_texts(self, texts):
        self.texts += len(texts)
        return self.inner.encode_texts(texts)


def measure(docs: int, edit_percent: float, model: bool) -> dict[str, Any]:
    from ingest.sources import Source
    from ingest.sync import sync_source
    from search.embedded import EmbeddedStore

    if model:
        from ingest.embedder import Embedder

        inner: Any = Embedder()
    else:
        from bot.testing.embedder import HashingEmbedder

        inner = HashingEmbedder()
    rng = random.Random(35)
    with tempfile.TemporaryDirectory(prefix="citebot-bench-sync-") as tmp:
        repo = Path(tmp) / "handbook"
        (repo / "content").mkdir(parents=True)
        _git(repo, "init", "-q", "-b", "main")
        for i in range(docs):
            (repo / "content" / f"doc-{i:05}.md").write_text(_document(rng, i), "utf-8")
        _git(repo, "add", ".")
        _git(repo, "commit", "-q", "-m", "generated")
        store = EmbeddedStore(Path(tmp) / "store")
        source = Source("handbook", "git", str(repo), path="content")
        embedder = Counting(inner)
        full = sync_source(source, store, embedder, Path(tmp) / "cache", progress=False)  # type: ignore[arg-type]
        assert full.error is None, full.error
        full_windows, full_texts = embedder.windows, embedder.texts
        edited = max(1, round(docs * edit_percent / 100))
        for i in rng.sample(range(docs), edited):
            path = repo / "content" / f"doc-{i:05}.md"
            text = path.read_text("utf-8").split("\n")
            text[3] = _paragraph(rng)  # the first section's first paragraph
            path.write_text("\n".join(text), "utf-8")
        _git(repo, "commit", "-q", "-am", "edit")
        embedder.windows = embedder.texts = 0
        again = sync_source(source, store, embedder, Path(tmp) / "cache", progress=False)  # type: ignore[arg-type]
        assert again.error is None, again.error
        chunks = store.chunk_count()
        store.close()
    return {
        "docs": docs, "edited": edited, "embedder": "model" if model else "test",
        "chunks": chunks,
        "full_seconds": round(full.seconds, 3), "sync_seconds": round(again.seconds, 3),
        "ratio": round(again.seconds / full.seconds, 4),
        "full_windows": full_windows, "sync_windows": embedder.windows,
        "sync_changed": again.changed, "sync_added": again.added, "sync_deleted": again.deleted,
        "full_calibration_texts": full_texts, "sync_calibration_texts": embedder.texts,
        "load": [round(x, 2) for x in os.getloadavg()],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=1000)
    parser.add_argument("--edit-percent", type=float, default=1.0)
    parser.add_argument("--model", action="store_true", help="embed with the real model")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    started = time.perf_counter()
    out = measure(args.docs, args.edit_percent, args.model)
    if args.json:
        print(json.dumps(out))
        return
    print(f"{out['docs']} documents ({out['chunks']} chunks), {out['edited']} edited, {out['embedder']} embedder")
    print(f"full ingest  {out['full_seconds']:8.2f} s  {out['full_windows']:6} windows embedded")
    print(f"sync         {out['sync_seconds']:8.2f} s  {out['sync_windows']:6} windows embedded "
          f"(changed {out['sync_changed']}, added {out['sync_added']}, deleted {out['sync_deleted']})")
    print(f"ratio        {out['ratio']:.2%}  (goal: under 10%)")
    print(f"calibration texts encoded: full {out['full_calibration_texts']}, sync {out['sync_calibration_texts']}")
    print(f"load average {out['load']}; {time.perf_counter() - started:.0f} s in all")


if __name__ == "__main__":
    main()

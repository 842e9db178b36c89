"""The owners' page (/admin, bot/admin/): the time and size of each page on a turn log of
N synthetic turns over two weeks (benchmarks/gaps.py's: a third not answered well, a
tenth of the answers citing a changed chunk), the sample handbook ingested with the real
model (the width of the question vectors the turns record). Each page is requested
through the WSGI application with a bearer token, as a browser's request reaches it; the
time is the whole response (reading the log, the gaps report, stale citations, rendering).

    .venv/bin/python -m benchmarks.admin_page --turns 10000
"""

from __future__ import annotations

import argparse
import io
import json
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import bot  # noqa: F401 - first: numpy's BLAS threads as in citebot (bot/__init__.py)
from benchmarks.gaps import synthetic_turns
from bot.admin.app import admin_pages
from bot.admin.data import Reader
from bot.testing.bench import ingest_handbook
from bot.testing.gaps_month import labelled
from ingest.embedder import Embedder
from search.embedded import EmbeddedStore
from search.scope import Scope

TOKEN = "benchmark-token-0123456789"
ALL = Scope(("**",), "benchmark")  # unused: the token is bound to no channel
PAGES = ("/admin", "/admin/turns?filter=all", "/admin/turns?filter=stale")


def _request(app, path: str) -> tuple[str, bytes]:
    target, _, query = path.partition("?")
    environ = {"REQUEST_METHOD": "GET", "PATH_INFO": target, "QUERY_STRING": query,
               "HTTP_AUTHORIZATION": f"Bearer {TOKEN}", "wsgi.input": io.BytesIO()}
    status: list[str] = []
    body = b"".join(app(environ, lambda s, _h, _e=None: status.append(s)))
    return status[0], body


def time_pages(n: int) -> list[dict]:
    now = datetime.now(UTC)
    embedder = Embedder()
    base = embedder.encode_texts([q for _, q in labelled()])
    with tempfile.TemporaryDirectory() as tmp:
        ingest_handbook(Path(tmp) / "store", embedder)  # the store's width is the vectors' the turns record
        store = EmbeddedStore(Path(tmp) / "store")
        synthetic_turns(store, n, now, base)
        reader = Reader(turnlog=store, store=lambda: store, encode=embedder.encode_texts,
                        scope_of=lambda _c: ALL)
        app = admin_pages([(TOKEN, None)], reader)(lambda *_a: [b""])
        out = []
        for path in PAGES:
            t = time.perf_counter()
            status, body = _request(app, path)
            out.append({"page": path, "status": status, "seconds": round(time.perf_counter() - t, 2),
                        "kilobytes": round(len(body) / 1024, 1)})
        store.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=10_000)
    args = parser.parse_args()
    for row in time_pages(args.turns):
        print(json.dumps({"turns": args.turns, **row}))


if __name__ == "__main__":
    main()

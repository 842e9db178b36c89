"""A `citebot serve` in a process of its own, for fault tests and benchmarks.

    python -m bot.testing.bot_child --slack-api URL (--store DIR | --es-url URL [--index NAME])
        [--redis URL --prefix P] [--es-timeout-s S]

The same pieces `citebot serve` runs (bot.wiring: Components, build_bot; the HTTP server
with /slack/events, /healthz, /readyz, /metrics), with two differences for speed: the test
embedder instead of the model (bot/testing/embedder.py; the store must be built with it)
and port 0. Prints `listening <url>` once it serves and the model is "loaded"; SIGTERM
stops it as `citebot serve` stops (accepting ends, work in progress drains).
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path

from bot.logs import configure
from bot.settings import load_settings
from bot.slack.server import SlackHttpServer
from bot.testing.embedder import HashingEmbedder
from bot.testing.slack_standin import BOT_TOKEN, SIGNING_SECRET
from bot.wiring import Components, build_bot

REPO = Path(__file__).resolve().parents[2]


class BotProcess:
    """A bot_child started from a test or a benchmark: its URL, its log, stop and kill."""

    def __init__(self, log_path: Path, *args: str) -> None:
        self.log_path = Path(log_path)
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed by stop()
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bot.testing.bot_child", *args],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=self._log,
            env=env,
            text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().strip()
        if not line.startswith("listening "):
            self.proc.kill()
            raise RuntimeError(f"the bot did not start ({line!r}); its log: {self.log_path}")
        self.url = line.removeprefix("listening ")  # …/slack/events
        self.base_url = self.url.rsplit("/slack/events", 1)[0]
        threading.Thread(target=self._drain_stdout, daemon=True).start()

    def _drain_stdout(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._log.write(line.encode())
            self._log.flush()

    def get(self, path: str) -> tuple[int, str]:
        """GET a probe path: (status, body)."""
        try:
            with urllib.request.urlopen(self.base_url + path, timeout=30) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self, timeout_s: float = 30) -> int:
        if self.alive():
            self.proc.terminate()
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout_s)
        self._log.close()
        return self.proc.returncode


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--slack-api", required=True)
    parser.add_argument("--store")
    parser.add_argument("--es-url")
    parser.add_argument("--index", default="citebot")
    parser.add_argument("--es-timeout-s", type=float, default=30.0)
    parser.add_argument("--redis")
    parser.add_argument("--prefix", default="citebot:")
    args = parser.parse_args()
    configure("json", level=logging.INFO)
    chosen = {"store": args.store} if args.store else {}
    settings = load_settings(
        slack_bot_token=BOT_TOKEN,
        slack_signing_secret=SIGNING_SECRET,
        slack_api_url=args.slack_api,
        es_url=args.es_url,
        index=args.index,
        es_timeout_s=args.es_timeout_s,
        redis_url=args.redis,
        redis_prefix=args.prefix,
        rate_limit_per_minute=10_000,
        **chosen,
    )
    components = Components(settings)
    components.embedder = HashingEmbedder()  # type: ignore[assignment]  # the Embedder's surface
    bot = build_bot(components)
    server = SlackHttpServer(
        bot.app, signing_secret=SIGNING_SECRET, host="127.0.0.1", port=0, readiness=components.readiness
    )
    bot.warm_up()
    stopping = threading.Event()

    def stop(*_: object) -> None:
        if not stopping.is_set():
            stopping.set()
            threading.Thread(target=server.stop, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    print(f"listening {server.url}", flush=True)
    server.serve_forever()
    server.close()
    bot.close(10)


if __name__ == "__main__":
    main()

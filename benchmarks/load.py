"""Load: concurrent questions from several channels and hundreds of retried deliveries
against two bot processes sharing one real Redis.

Two `--worker` subprocesses each run the real bot (Bolt on its HTTP server, loopback)
with REDIS_URL and one key prefix, against the Slack Web API stand-in of
bot/testing/slack_standin.py run by this process. Each worker embeds with the test
embedder (bot/testing/embedder.py) over the sample handbook ingested with it: the
figures measure the Slack adapter, dedupe and state under load, not MiniLM on a shared
CPU (with the real model two processes would spend the run embedding questions).

The load: `--questions` questions (default 50) from `--channels` channels (default 5),
all sent at once, each to a random worker; then `--retries` redeliveries (default 300) of
those same events (X-Slack-Retry-Num 1-3, the retry reason http_timeout) from 10 sender
threads to random workers, while the first answers are still being worked out.

Prints ack latency over every delivery (p50, p99, max; Slack retries an ack slower than
3 s) and for each phase; replies per event (exactly one placeholder, replaced in place
by the answer); turns in the shared turn log (one per event, found by the turn id each
answer shows) and `turn` log lines of the workers; duplicates dropped by the workers.
Exits 1 when a promise is broken: ack p99 over 3 s, an event without exactly one reply,
a turn missing from the log.

    .venv/bin/python -m benchmarks.load --redis redis://127.0.0.1:6390/0
    .venv/bin/python -m benchmarks.load --quick   # CI: 20 + 60, a private redis-server
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from benchmarks.common import REPO, percentile
from bot.testing.bench import ingest_handbook

ACK_LIMIT_S = 3.0  # Slack's: a request not acked in 3 s is delivered again
QUESTIONS = [json.loads(line)["question"] for line in
             (REPO / "examples" / "questions.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]


# -- the worker: one bot process -------------------------------------------------------------
def worker(args: argparse.Namespace) -> None:
    import logging

    from bot.logs import configure
    from bot.settings import load_settings
    from bot.slack.server import SlackHttpServer
    from bot.testing.embedder import HashingEmbedder
    from bot.testing.slack_standin import BOT_TOKEN, SIGNING_SECRET
    from bot.wiring import Components, build_bot

    configure("json", level=logging.INFO)
    settings = load_settings(store=args.store, slack_bot_token=BOT_TOKEN, slack_signing_secret=SIGNING_SECRET,
                             slack_api_url=args.slack_api, redis_url=args.redis, redis_prefix=args.prefix,
                             rate_limit_per_minute=100_000)
    components = Components(settings)
    components.embedder = HashingEmbedder()
    bot = build_bot(components)
    server = SlackHttpServer(bot.app, signing_secret=SIGNING_SECRET, host="127.0.0.1", port=0, readiness=components.readiness)
    bot.warm_up()
    stopper = threading.Thread(target=server.stop, daemon=True)
    signal.signal(signal.SIGTERM, lambda *_: stopper.ident is None and stopper.start())
    print(json.dumps({"port": server.port}), flush=True)
    server.serve_forever()
    server.close()
    bot.close(120)


# -- the driver -------------------------------------------------------------------------------
class Worker:
    def __init__(self, n: int, store: Path, slack_api: str, redis_url: str, prefix: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.load", "--worker", "--store", str(store), "--slack-api", slack_api,
             "--redis", redis_url, "--prefix", prefix],
            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={k: v for k, v in os.environ.items() if not k.startswith(("CITEBOT_", "SLACK_", "REDIS_URL"))})
        self.n = n
        self.lines: list[dict] = []
        threading.Thread(target=self._read_log, daemon=True).start()
        assert self.proc.stdout is not None
        first = self.proc.stdout.readline()
        if not first:
            raise SystemExit(f"worker {n} did not start: {self.lines[-5:]}")
        self.port = json.loads(first)["port"]

    def _read_log(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            try:
                self.lines.append(json.loads(line))
            except ValueError:
                self.lines.append({"event": "unparsed", "line": line.rstrip()})

    def logged(self, event: str) -> list[dict]:
        return [e for e in self.lines if e.get("event") == event]

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=180)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--redis", help="Redis URL shared by the two workers (default: a private redis-server for the run)")
    parser.add_argument("--questions", type=int, default=50, help="questions sent at once (default 50)")
    parser.add_argument("--channels", type=int, default=5, help="channels they come from (default 5)")
    parser.add_argument("--retries", type=int, default=300, help="retried deliveries (default 300)")
    parser.add_argument("--senders", type=int, default=10, help="threads sending the retries (default 10)")
    parser.add_argument("--quick", action="store_true", help="20 questions and 60 retries (CI)")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--store", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--slack-api", help=argparse.SUPPRESS)
    parser.add_argument("--prefix", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args)
        return
    if args.quick:
        args.questions, args.retries = 20, 60
    if args.redis:
        sys.exit(run(args))
    # No --redis: a private redis-server of its own for the run (what CI does).
    from bot.testing.services import PrivateRedis, free_port

    server = PrivateRedis(free_port(), Path(tempfile.mkdtemp(prefix="citebot-load-redis-"))).start()
    try:
        args.redis = server.url
        sys.exit(run(args))
    finally:
        server.stop()


def run(args: argparse.Namespace) -> int:
    import redis

    from bot.memory.turnlog import RedisTurnLog
    from bot.slack.render import ACTION_WHY
    from bot.testing.slack_sender import SlackSender
    from bot.testing.slack_standin import BOT_ID, BOT_USER_ID, SlackStandIn

    rng = random.Random(12)
    tmp = Path(tempfile.mkdtemp(prefix="citebot-load-"))
    prefix = f"citebot-load:{uuid.uuid4().hex[:8]}:"
    client = redis.Redis.from_url(args.redis)
    standin = SlackStandIn().start()
    workers: list[Worker] = []
    try:
        print("ingesting examples/handbook with the test embedder (not measured)…", file=sys.stderr)
        base = tmp / "store"
        ingest_handbook(base)
        for n in range(2):
            shutil.copytree(base, tmp / f"store-{n}")
            workers.append(Worker(n, tmp / f"store-{n}", standin.api_url, args.redis, prefix))
        senders = [SlackSender(f"http://127.0.0.1:{w.port}/slack/events") for w in workers]

        events = []
        for i in range(args.questions):
            channel = f"CLOAD{i % args.channels}"
            message = standin.user_message(channel, f"ULOAD{i % 17}",
                                           f"<@{BOT_USER_ID}> {QUESTIONS[i % len(QUESTIONS)]}")
            events.append(({"type": "app_mention", "user": message["user"], "text": message["text"],
                            "ts": message["ts"], "channel": channel, "event_ts": message["ts"]},
                           senders[0].new_event_id()))
        acks: dict[str, list[tuple[float, int]]] = {"burst": [], "retries": []}
        lock = threading.Lock()

        def deliver(phase: str, index: int, retry: int | None, barrier: threading.Barrier | None = None) -> None:
            event, event_id = events[index]
            sender = rng.choice(senders)
            if barrier is not None:
                barrier.wait()
            d = sender.event(event, event_id=event_id, retry_num=retry)
            with lock:
                acks[phase].append((d.elapsed_s, d.status))

        started = time.perf_counter()
        barrier = threading.Barrier(args.questions)
        burst = [threading.Thread(target=deliver, args=("burst", i, None, barrier)) for i in range(args.questions)]
        for t in burst:
            t.start()
        for t in burst:
            t.join()
        plan = [(rng.randrange(args.questions), rng.randint(1, 3)) for _ in range(args.retries)]
        with ThreadPoolExecutor(max_workers=args.senders) as pool:
            for index, retry in plan:
                pool.submit(deliver, "retries", index, retry)
        sent_s = time.perf_counter() - started

        # Every event's answer: its placeholder replaced (chat.update), within 5 minutes.
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and len(standin.calls("chat.update")) < args.questions:
            time.sleep(0.2)
        answered_s = time.perf_counter() - started
        codes = [w.stop() for w in workers]

        # Figures.
        all_acks = [a for phase in acks.values() for a, _ in phase]
        replies, turn_ids, missing_turns = [], [], []
        for event, _ in events:
            placeholders = [c for c in standin.calls("chat.postMessage")
                            if c.params.get("channel") == event["channel"] and c.params.get("thread_ts") == event["ts"]]
            replies.append(len(placeholders))
            ours = [m for m in standin.messages(event["channel"])
                    if m.get("thread_ts") == event["ts"] and m.get("bot_id") == BOT_ID]
            ids = [e["value"] for m in ours for b in m.get("blocks", []) if b.get("type") == "actions"
                   for e in b["elements"] if e.get("action_id") == ACTION_WHY]
            turn_ids.extend(ids)
            if not ids:
                missing_turns.append(event["ts"])
        log = RedisTurnLog(client, prefix=prefix)
        logged = [t for t in turn_ids if log.get_turn(t) is not None]
        turn_lines = sum(len(w.logged("turn")) for w in workers)
        dropped = sum(len(w.logged("slack_duplicate_dropped")) for w in workers)
        errors = sum(1 for event, _ in events for m in standin.messages(event["channel"])
                     if m.get("thread_ts") == event["ts"] and m.get("bot_id") == BOT_ID
                     and m.get("text", "").startswith("Sorry"))

        def summary(values: list[float]) -> dict:
            ms = [v * 1000 for v in values]
            return {"p50": round(percentile(ms, 50), 1), "p99": round(percentile(ms, 99), 1),
                    "max": round(max(ms), 1) if ms else None}

        figures = {
            "workers": 2, "embedder": "test (HashingEmbedder)", "questions": args.questions,
            "channels": args.channels, "retries": args.retries,
            "deliveries": len(all_acks), "non_200": sum(1 for p in acks.values() for _, s in p if s != 200),
            "ack_ms": summary(all_acks), "ack_burst_ms": summary([a for a, _ in acks["burst"]]),
            "ack_retries_ms": summary([a for a, _ in acks["retries"]]),
            "events_with_one_reply": sum(1 for r in replies if r == 1),
            "events_without_reply": sum(1 for r in replies if r == 0),
            "duplicate_replies": sum(r - 1 for r in replies if r > 1),
            "turns_shown": len(turn_ids), "turns_in_log": len(logged), "turn_log_lines": turn_lines,
            "duplicates_dropped": dropped, "error_replies": errors,
            "sent_s": round(sent_s, 1), "all_answered_s": round(answered_s, 1), "worker_exit": codes,
        }
    finally:
        for w in workers:
            if w.proc.poll() is None:
                w.proc.kill()
                w.proc.wait()
        standin.stop()
        keys = list(client.scan_iter(match=prefix + "*"))
        if keys:
            client.delete(*keys)
        shutil.rmtree(tmp, ignore_errors=True)

    broken = []
    if not figures["ack_ms"]["p99"] < ACK_LIMIT_S * 1000:
        broken.append(f"ack p99 {figures['ack_ms']['p99']} ms is over {ACK_LIMIT_S * 1000:.0f} ms")
    if figures["events_with_one_reply"] != args.questions:
        broken.append(f"{args.questions - figures['events_with_one_reply']} event(s) without exactly one reply")
    if not (figures["turns_in_log"] == figures["turn_log_lines"] == args.questions):
        broken.append(f"turns: {figures['turns_in_log']} in the log, {figures['turn_log_lines']} logged lines, "
                      f"{args.questions} events")
    if figures["non_200"] or codes != [0, 0]:
        broken.append(f"{figures['non_200']} non-200 ack(s), worker exit codes {codes}")
    figures["broken"] = broken
    if args.json:
        print(json.dumps(figures))
    else:
        a, b, r = figures["ack_ms"], figures["ack_burst_ms"], figures["ack_retries_ms"]
        print(f"2 workers sharing Redis, test embedder; {args.questions} questions from {args.channels} channels "
              f"at once, then {args.retries} retried deliveries from {args.senders} senders")
        print(f"ack latency, all {figures['deliveries']}: p50 {a['p50']:7.1f} ms  p99 {a['p99']:7.1f} ms  "
              f"max {a['max']:7.1f} ms  (non-200: {figures['non_200']})")
        print(f"  burst of {args.questions}:          p50 {b['p50']:7.1f} ms  p99 {b['p99']:7.1f} ms  max {b['max']:7.1f} ms")
        print(f"  {args.retries} retries:             p50 {r['p50']:7.1f} ms  p99 {r['p99']:7.1f} ms  max {r['max']:7.1f} ms")
        print(f"replies: {figures['events_with_one_reply']}/{args.questions} events with exactly one, "
              f"{figures['events_without_reply']} without, {figures['duplicate_replies']} duplicates, "
              f"{errors} error replies")
        print(f"turn log: {figures['turns_in_log']}/{figures['turns_shown']} shown turn ids found, "
              f"{turn_lines} turn lines logged; duplicates dropped {dropped}")
        print(f"sent in {sent_s:.1f} s, all answered after {answered_s:.1f} s; worker exit codes {codes}")
        for b_ in broken:
            print(f"BROKEN: {b_}")
    return 1 if broken else 0


if __name__ == "__main__":
    main()

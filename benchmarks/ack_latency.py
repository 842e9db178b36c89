"""Ack latency and time to first visible progress of the Slack bot, over 200+ signed deliveries.

Runs the real bot (Bolt on its HTTP server, loopback) against the local Web API stand-in
of bot/testing/slack_standin.py, and delivers signed app_mention events at a steady rate from a
few sender threads; a share of the questions is delivered again as Slack retries
(X-Slack-Retry-Num 1-3). Every delivery triggers a real turn on the sample handbook, so
the acks are measured while the answers are being worked out behind them.

Prints, per delivery: ack latency (request sent -> HTTP response read) p50/p99/max; per
question: time to first visible progress (first delivery sent -> the placeholder's
chat.postMessage reaching the stand-in) and time to the answer (-> its chat.update); and
duplicates (replies beyond one per question) over all the retried deliveries.

    .venv/bin/python -m benchmarks.ack_latency                 # in-process dedupe and state
    .venv/bin/python -m benchmarks.ack_latency --redis redis://127.0.0.1:6390/0
    .venv/bin/python -m benchmarks.ack_latency --store ~/.local/share/citebot/store

Without --store, the sample handbook is ingested into a temporary store first (a couple
of minutes, not measured).
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import statistics
import sys
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from benchmarks.common import REPO, percentile
from bot.logs import configure
from bot.settings import load_settings
from bot.slack.server import SlackHttpServer
from bot.testing.slack_sender import SlackSender
from bot.testing.slack_standin import BOT_TOKEN, BOT_USER_ID, SIGNING_SECRET, SlackStandIn
from bot.wiring import Components, build_bot

QUESTIONS = [json.loads(line)["question"] for line in
             (REPO / "examples" / "questions.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]


@dataclass(frozen=True)
class Sent:
    question: int  # index of the unique question
    retry_num: int | None
    sent_at: float
    ack_s: float
    status: int


def ingest_sample(into: Path) -> Path:
    from ingest.embedder import Embedder
    from ingest.pipeline import ingest
    from search.embedded import EmbeddedStore

    store = EmbeddedStore(into)
    print(f"ingesting examples/handbook into {into} (not measured)…", file=sys.stderr)
    import os

    cwd = os.getcwd()
    os.chdir(REPO)
    try:
        ingest([REPO / "examples" / "handbook"], store, Embedder(), progress=False)
    finally:
        os.chdir(cwd)
    store.close()
    return into


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=200, help="unique questions (default 200)")
    parser.add_argument("--retry-share", type=float, default=0.25,
                        help="share of questions delivered again as retries 1-3 (default 0.25)")
    parser.add_argument("--rate", type=float, default=20.0, help="deliveries per second (default 20)")
    parser.add_argument("--senders", type=int, default=4, help="concurrent sender threads (default 4)")
    parser.add_argument("--store", type=Path, help="an ingested embedded store (default: ingest the sample)")
    parser.add_argument("--redis", help="Redis URL for dedupe, state and turn log (default: in-process)")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    args = parser.parse_args()
    configure("json", level=logging.WARNING)
    rng = random.Random(5)

    tmp = tempfile.TemporaryDirectory(prefix="citebot-bench-")
    store = args.store or ingest_sample(Path(tmp.name) / "store")
    prefix = f"citebot-bench:{uuid.uuid4().hex[:8]}:"
    standin = SlackStandIn().start()
    settings = load_settings(store=store, slack_bot_token=BOT_TOKEN, slack_signing_secret=SIGNING_SECRET,
                             slack_api_url=standin.api_url, rate_limit_per_minute=10_000,
                             redis_url=args.redis, redis_prefix=prefix)
    components = Components(settings)
    bot = build_bot(components)
    server = SlackHttpServer(bot.app, signing_secret=SIGNING_SECRET, host="127.0.0.1", port=0).start()
    sender = SlackSender(server.url)
    bot.warm_up()
    components.answerer.ask(QUESTIONS[0])  # first-turn costs (caches, allocations) aside

    # The deliveries: every question once, a share of them again as retries, in a steady stream.
    events = []
    for i in range(args.questions):
        channel = f"CBENCH{i % 7}"
        q = QUESTIONS[i % len(QUESTIONS)]
        message = standin.user_message(channel, f"UBENCH{i % 50}", f"<@{BOT_USER_ID}> {q}")
        events.append(({"type": "app_mention", "user": message["user"], "text": message["text"],
                        "ts": message["ts"], "channel": channel, "event_ts": message["ts"]},
                       sender.new_event_id()))
    # (position in the stream, question, retry): a retry follows its question a few deliveries later
    slots: list[tuple[float, int, int | None]] = [(float(i), i, None) for i in range(args.questions)]
    for i in rng.sample(range(args.questions), int(args.questions * args.retry_share)):
        for n in range(1, rng.randint(1, 3) + 1):
            slots.append((i + n * rng.uniform(1, 8), i, n))
    plan = [(i, retry) for _, i, retry in sorted(slots)]

    sent: list[Sent] = []
    lock = threading.Lock()

    def deliver(index: int, retry: int | None) -> None:
        event, event_id = events[index]
        d = sender.event(event, event_id=event_id, retry_num=retry)
        with lock:
            sent.append(Sent(index, retry, d.sent_at, d.elapsed_s, d.status))

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=args.senders) as pool:
        for n, (index, retry) in enumerate(plan):  # bounded: exactly len(plan) deliveries
            delay = started + n / args.rate - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            pool.submit(deliver, index, retry)
    send_s = time.perf_counter() - started
    if not bot.drain(600):
        print("warning: work still running after 600 s", file=sys.stderr)
    total_s = time.perf_counter() - started

    # Figures.
    acks = [s.ack_s * 1000 for s in sent]
    first_sent = {}
    for s in sorted(sent, key=lambda s: s.sent_at):
        first_sent.setdefault(s.question, s.sent_at)
    posts = standin.calls("chat.postMessage")
    updates = {c.params["ts"]: c.at for c in standin.calls("chat.update")}
    by_thread: dict[tuple[str, str], list] = {}
    for c in posts:
        by_thread.setdefault((c.params["channel"], c.params.get("thread_ts")), []).append(c)
    progress, answered = [], []
    duplicates = missing = errors = 0
    for i, (event, _) in enumerate(events):
        replies = by_thread.get((event["channel"], event["ts"]), [])
        if not replies:
            missing += 1
            continue
        duplicates += len(replies) - 1
        progress.append((replies[0].at - first_sent[i]) * 1000)
        ours = [m for m in standin.messages(event["channel"])
                if m.get("thread_ts") == event["ts"] and m.get("bot_id")]
        if ours and ours[0]["ts"] in updates:
            answered.append((updates[ours[0]["ts"]] - first_sent[i]) * 1000)
            errors += ours[0]["text"].startswith("Sorry")
    retried = sum(1 for _, r in plan if r)
    figures = {
        "deliveries": len(sent), "unique_questions": args.questions, "retried_deliveries": retried,
        "non_200": sum(1 for s in sent if s.status != 200),
        "ack_ms": {"p50": round(percentile(acks, 50), 2), "p99": round(percentile(acks, 99), 2),
                   "max": round(max(acks), 2), "mean": round(statistics.fmean(acks), 2)},
        "first_progress_ms": {"p50": round(percentile(progress, 50), 1),
                              "p99": round(percentile(progress, 99), 1), "max": round(max(progress), 1)},
        "answer_ms": {"p50": round(percentile(answered, 50), 1), "p99": round(percentile(answered, 99), 1),
                      "max": round(max(answered), 1) if answered else None},
        "answered": len(answered), "error_replies": errors, "duplicates": duplicates, "missing": missing,
        "send_s": round(send_s, 1), "total_s": round(total_s, 1), "rate_per_s": args.rate,
        "senders": args.senders, "dedupe": "redis" if args.redis else "in-process",
    }
    server.shutdown()
    bot.close(10)
    standin.stop()
    if args.redis:
        client = components.redis
        keys = list(client.scan_iter(match=prefix + "*"))
        if keys:
            client.delete(*keys)
    tmp.cleanup()

    if args.json:
        print(json.dumps(figures))
        return
    a, p, w = figures["ack_ms"], figures["first_progress_ms"], figures["answer_ms"]
    print(f"deliveries {figures['deliveries']} ({args.questions} questions + {retried} retries, "
          f"{args.rate:g}/s from {args.senders} senders; dedupe {figures['dedupe']}); non-200: {figures['non_200']}")
    print(f"ack latency            p50 {a['p50']:8.2f} ms   p99 {a['p99']:8.2f} ms   max {a['max']:8.2f} ms")
    print(f"first visible progress p50 {p['p50']:8.1f} ms   p99 {p['p99']:8.1f} ms   max {p['max']:8.1f} ms")
    print(f"answer in place        p50 {w['p50']:8.1f} ms   p99 {w['p99']:8.1f} ms   max {w['max']:8.1f} ms")
    print(f"replies: answered {figures['answered']}/{args.questions} ({errors} of them errors), "
          f"duplicates {duplicates}, "
          f"missing {missing}; sent in {send_s:.1f} s, all answered after {total_s:.1f} s")


if __name__ == "__main__":
    main()

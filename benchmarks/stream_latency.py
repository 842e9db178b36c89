"""Time to the first checked sentence on screen, streamed, against the whole answer.

Runs the real bot (Bolt on its HTTP server, loopback) against the Slack Web API stand-in
and the Anthropic stand-in, which streams a scripted answer at a model's pace
(`--delta-ms` per delta of `--delta-chars` characters; 12 characters in 40 ms is about
75 tokens a second). Each question is asked twice in the same run: streamed (status, then
one checked sentence per chat.appendStream), and on the placeholder path (the stand-in
refuses assistant.threads.setStatus, so the whole answer replaces a placeholder). Prints,
from the mention sent: the first progress (status or placeholder), the first sentence on
screen (chat.startStream) and the whole answer (chat.stopStream), against the answer on the
placeholder path (chat.update), p50 over the runs, and the ratio first sentence / answer.

    .venv/bin/python -m benchmarks.stream_latency [--runs 10] [--sentences 8] [--json]

The store is the sample handbook ingested with the test embedder (seconds, not measured):
retrieval quality plays no part here.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks.common import REPO
from bot.logs import configure
from bot.settings import load_settings
from bot.slack.server import SlackHttpServer
from bot.testing.anthropic_standin import Reply, message, passages_in, running
from bot.testing.embedder import HashingEmbedder
from bot.testing.slack_sender import SlackSender
from bot.testing.slack_standin import BOT_TOKEN, BOT_USER_ID, SIGNING_SECRET, SlackStandIn
from bot.wiring import Components, build_bot

QUESTION = "How often does the Release Train leave?"


def scripted(sentences: int, delta_chars: int, delta_s: float):
    """A model that quotes passage [1] and writes `sentences` cited sentences."""
    def reply(request) -> Reply:
        words = passages_in(request)[1].split()[:8]
        quote = " ".join(w for w in words if '"' not in w and "[" not in w)
        text = f'The handbook says "{quote}" [1]. ' + " ".join(
            f"Sentence {i} restates what passage one says about the train [1]." for i in range(sentences - 1))
        return Reply(**{**message(text).__dict__, "chunk_chars": delta_chars, "chunk_delay_s": delta_s})
    return reply


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--sentences", type=int, default=8)
    parser.add_argument("--delta-chars", type=int, default=12)
    parser.add_argument("--delta-ms", type=float, default=40.0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    configure("json", level=logging.WARNING)

    from ingest.pipeline import ingest
    from search.embedded import EmbeddedStore

    embedder = HashingEmbedder()
    with tempfile.TemporaryDirectory() as tmp, running() as model:
        store = EmbeddedStore(Path(tmp) / "store")
        ingest([REPO / "examples" / "handbook"], store, embedder, progress=False)
        slack = SlackStandIn().start()
        settings = load_settings(slack_bot_token=BOT_TOKEN, slack_signing_secret=SIGNING_SECRET,
                                 slack_api_url=slack.api_url, anthropic_api_key="sk-ant-bench",
                                 anthropic_base_url=model.base_url, anthropic_timeout_s=30.0,
                                 anthropic_budget_s=60.0, store=Path(tmp) / "store",
                                 rate_limit_per_minute=1000)
        components = Components(settings)
        components.embedder, components.store = embedder, store
        bot = build_bot(components)
        server = SlackHttpServer(bot.app, host="127.0.0.1", port=0, readiness=components.readiness).start()
        sender = SlackSender(server.url)
        model.always(scripted(args.sentences, args.delta_chars, args.delta_ms / 1000))
        rows: dict[str, list[float]] = {k: [] for k in ("progress", "first", "answer", "placeholder_answer")}
        try:
            for run in range(args.runs * 2):
                streamed = run % 2 == 0
                if not streamed:
                    slack.fail("assistant.threads.setStatus", "missing_scope")
                before = len(slack.calls())
                msg = slack.user_message(f"CBENCH{run}", "UBENCH", f"<@{BOT_USER_ID}> {QUESTION}")
                event = {"type": "app_mention", "user": "UBENCH", "text": msg["text"], "ts": msg["ts"],
                         "channel": f"CBENCH{run}", "event_ts": msg["ts"], "team": msg["team"]}
                sent = time.perf_counter()
                sender.event(event)
                assert bot.drain(120), "the turn did not finish"
                calls = slack.calls()[before:]

                def at(method: str, calls=calls, sent=sent) -> float:
                    return next(c.at for c in calls if c.method == method) - sent

                if streamed:
                    rows["progress"].append(at("assistant.threads.setStatus"))
                    rows["first"].append(at("chat.startStream"))
                    rows["answer"].append(at("chat.stopStream"))
                else:
                    rows["placeholder_answer"].append(at("chat.update"))
        finally:
            server.shutdown()
            bot.close(10)
            slack.stop()
    p50 = {k: round(statistics.median(v) * 1000, 1) for k, v in rows.items()}
    out = {"runs": args.runs, "sentences": args.sentences, "delta_chars": args.delta_chars,
           "delta_ms": args.delta_ms, "progress_p50_ms": p50["progress"],
           "first_sentence_p50_ms": p50["first"], "streamed_answer_p50_ms": p50["answer"],
           "placeholder_answer_p50_ms": p50["placeholder_answer"],
           "first_sentence_over_placeholder_answer": round(p50["first"] / p50["placeholder_answer"], 3)}
    if args.json:
        print(json.dumps(out))
    else:
        for key, value in out.items():
            print(f"{key:40} {value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

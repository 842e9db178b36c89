"""Elasticsearch, Redis, Anthropic and embedded-store faults, run for their figures: what each
does to citebot, and how long.

Prints one table, fault | expected | observed | figure, and with --json one object with
every row's raw figures. Nothing here touches the shared test services: Redis and
Elasticsearch run as private processes on free ports (bot/testing/services.py), and the
bots, ingests and models are the fault suite's (bot/testing/: test embedder, stand-ins).

    .venv/bin/python -m benchmarks.faults --quick    # CI (scripts/test runs it): ~2-4 min
    .venv/bin/python -m benchmarks.faults            # every kill point, 20 seeds, 50 events
    .venv/bin/python -m benchmarks.faults --only anthropic,embedded

Sections: anthropic (every fault of the stand-in's catalogue, one turn each: the turn's
seconds against its budget), embedded (an ingest SIGKILLed at known points and at random
moments, then audited; two ingests at once), redis (two bot processes, Redis stopped and
restarted under retried deliveries), elasticsearch (the node SIGKILLed at each point of an
ingest and during a turn; a frozen node during a turn). The exit status is 1 when any
row's observation differs from its expectation, so CI fails on a regression.
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
from dataclasses import asdict, dataclass, field
from pathlib import Path

from benchmarks.common import REPO
from bot.testing.bench import ingest_handbook

HANDBOOK = REPO / "examples" / "handbook"
SECTIONS = ("anthropic", "embedded", "redis", "elasticsearch")


@dataclass
class Row:
    section: str
    fault: str
    expected: str
    observed: str
    ok: bool
    figures: dict = field(default_factory=dict)
    command: str = ""


def small_store(work: Path) -> Path:
    """The sample handbook ingested with the test embedder (under a second)."""
    ingest_handbook(work / "small-store")
    return work / "small-store"


# -- Anthropic ---------------------------------------------------------------------------
def anthropic_rows(work: Path, quick: bool) -> list[Row]:
    from bot.answer.claude import FALLBACK
    from bot.settings import load_settings
    from bot.testing.anthropic_standin import fault_catalogue, running
    from bot.testing.embedder import HashingEmbedder
    from bot.wiring import Components
    from search.embedded import EmbeddedStore

    timeout_s, budget_s, hang_s = 0.5, 2.0, 30.0
    store_dir = small_store(work / "anthropic")
    rows = []
    with running() as standin:
        settings = load_settings(anthropic_api_key="sk-ant-bench-0000", anthropic_base_url=standin.base_url,
                                 anthropic_model="claude-bench", anthropic_timeout_s=timeout_s,
                                 anthropic_budget_s=budget_s, store=store_dir)
        components = Components(settings)
        store = EmbeddedStore(store_dir)
        components.__dict__.update(store=store, embedder=HashingEmbedder())
        answerer = components.answerer
        for fault, (reply, why) in fault_catalogue(budget_s).items():
            standin.reset()
            standin.always(lambda _r, reply=reply: reply())
            out = []
            started = time.perf_counter()
            worker = threading.Thread(target=lambda out=out: out.append(answerer.ask(
                "When does a Release Train depart, and what happens to changes that miss the cut-off?")),
                daemon=True)
            worker.start()
            worker.join(hang_s)
            seconds = time.perf_counter() - started
            if worker.is_alive():
                rows.append(Row("anthropic", fault, "labelled fallback within the budget", f"HANG (> {hang_s:g} s)",
                                False, {"turn_s": seconds}))
                continue
            record = out[0]
            logged = answerer.turnlog.get_turn(record.turn_id) or {}
            ok = (record.error is None and record.composer == FALLBACK and bool(record.label)
                  and why in (record.label or "") and logged.get("label") == record.label)
            model_s = record.timings_ms.get("compose_model", 0) / 1000
            rows.append(Row(
                "anthropic", fault, f"labelled fallback, error in the turn log, model wait <= budget {budget_s:g} s",
                f"{'labelled fallback' if ok else 'NOT a labelled fallback'}; {len(standin.requests)} attempt(s); "
                f"model {model_s:.2f} s, turn {seconds:.2f} s", ok and model_s <= budget_s + 0.5,
                {"attempts": len(standin.requests), "model_s": round(model_s, 3), "turn_s": round(seconds, 3),
                 "budget_s": budget_s, "timeout_s": timeout_s, "label": record.label}))
        store.close()
    return rows


# -- the embedded store ------------------------------------------------------------------
def _embedded_case(work: Path, seed: int):
    from bot.testing.embedder import HashingEmbedder
    from bot.testing.store_audit import collection, copy_folder, edit_collection
    from ingest.pipeline import ingest
    from search import calibration
    from search.embedded import EmbeddedStore

    embedder = HashingEmbedder()
    folder = copy_folder(HANDBOOK, work / "docs")
    store = EmbeddedStore(work / "store")
    ingest([folder], store, embedder, progress=False)
    old, old_null = collection(store), calibration.stored(store)
    store.close()
    edit_collection(folder, seed=seed, changed=8)
    ref = EmbeddedStore(work / "reference")
    ingest([folder], ref, embedder, progress=False)
    new, new_null = collection(ref), calibration.stored(ref)
    ref.close()
    return folder, work / "store", old, new, old_null, new_null


def _child(store: Path, folder: Path, *options: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "bot.testing.ingest_child", str(store), str(folder), *options],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _judge_embedded(store_dir: Path, folder: Path, old, new, old_null, new_null) -> tuple[bool, str, dict]:
    from bot.testing.embedder import HashingEmbedder
    from bot.testing.store_audit import audit_embedded, collection, duplicated_chunks, versions
    from ingest.pipeline import ingest
    from search import calibration
    from search.embedded import EmbeddedStore
    from search.glossary import Glossary
    from search.retrieval_config import RetrievalConfig
    from search.retrieve import Retriever

    embedder = HashingEmbedder()
    problems = audit_embedded(store_dir)
    store = EmbeddedStore(store_dir)
    chunks = collection(store)
    held = versions(chunks, old, new)
    mixed = sum(1 for v in held.values() if v == "MIXED")
    dup = len(duplicated_chunks(store))
    hits = len(Retriever(store, embedder.encode_query, Glossary.empty(), RetrievalConfig())
               .retrieve("How often does the Release Train leave?").hits)
    null = calibration.stored(store)
    stale = null is not None and not ((null == old_null and chunks == old) or (null == new_null and chunks == new))
    started = time.perf_counter()
    ingest([folder], store, embedder, progress=False)
    rerun_s = time.perf_counter() - started
    completed = collection(store) == new and calibration.stored(store) == new_null
    store.close()
    counts = {k: sum(1 for v in held.values() if v == k) for k in ("old", "new", "both", "absent", "MIXED")}
    ok = not problems and not mixed and not dup and hits > 0 and not stale and completed
    observed = (f"opens; audit {'clean' if not problems else problems}; docs old {counts['old']} / new "
                f"{counts['new']} / mixed {mixed}; {dup} duplicated; answers ({hits} hits); "
                f"{'stale calibration; ' if stale else ''}next run {'completes' if completed else 'DOES NOT complete'}")
    return ok, observed, {**counts, "duplicated": dup, "audit": problems, "hits": hits,
                          "stale_calibration": stale, "completed": completed, "rerun_s": round(rerun_s, 3)}


def embedded_rows(work: Path, quick: bool) -> list[Row]:
    from search.embedded import LOCK_NAME

    rows = []
    points = [("kill after 0 documents", ["--kill-after-docs", "0"]), ("kill after 1 document", ["--kill-after-docs", "1"]),
              ("kill after 5 documents", ["--kill-after-docs", "5"]), ("kill in calibration", ["--kill-in-calibration"])]
    # the same-run baseline: how long an uninterrupted child run takes, ready -> exit
    case = work / "embedded-baseline"
    folder, store, *_ = _embedded_case(case, 0)
    proc = _child(store, folder)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    started = time.perf_counter()
    proc.wait(120)
    run_s = time.perf_counter() - started
    seeds = range(3) if quick else range(20)
    for name, options in points + [(f"kill at random moment (seed {s})", ["random", str(s)]) for s in seeds]:
        case = work / f"embedded-{len(rows)}"
        folder, store, old, new, old_null, new_null = _embedded_case(case, 1)
        if options[0] == "random":
            delay = random.Random(int(options[1])).uniform(0, run_s)
            proc = _child(store, folder)
            assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
            time.sleep(delay)
            proc.send_signal(signal.SIGKILL)
            proc.wait(120)
            figures = {"kill_after_s": round(delay, 3), "run_s": round(run_s, 3), "killed": proc.returncode == -9}
        else:
            proc = _child(store, folder, *options)
            proc.wait(120)
            figures = {"killed": proc.returncode == -9}
        ok, observed, more = _judge_embedded(store, folder, old, new, old_null, new_null)
        rows.append(Row("embedded", name, "opens, whole (each document old or new), answers; next run completes",
                        observed + ("" if figures["killed"] else " (finished before the kill)"), ok,
                        {**figures, **more}))
    # two ingests at once
    case = work / "embedded-concurrent"
    folder, store, old, new, old_null, new_null = _embedded_case(case, 1)
    first = _child(store, folder, "--slow-s", "0.3")
    assert first.stdout is not None and first.stdout.readline().strip() == "ready"
    lock = store / LOCK_NAME
    while "pid" not in (lock.read_text() if lock.exists() else ""):
        time.sleep(0.02)
    second = _child(store, folder)
    out, _ = second.communicate(timeout=120)
    first.communicate(timeout=120)
    ok, observed, more = _judge_embedded(store, folder, old, new, old_null, new_null)
    said = next((line for line in out.splitlines() if line.startswith("refused: ")), "")
    refused = second.returncode == 2 and "another ingest is writing the store" in said
    said = said.replace(str(store), "STORE")
    rows.append(Row("embedded", "two ingests of one store at once", "the second refused with a clear message, never interleaved",
                    (f"exit 2, `{said}`; " if refused else "NOT refused; ") + observed, ok and refused,
                    {"second_exit": second.returncode, **more}))
    return rows


# -- Redis -------------------------------------------------------------------------------
def redis_rows(work: Path, quick: bool) -> list[Row]:
    import redis as redis_lib

    from bot.testing.fleet import fleet_of, per_event, plan_for

    n = 8 if quick else 50
    rng = random.Random(7)
    prefix = f"citebot-faults:{uuid.uuid4().hex[:8]}:"
    rows = []
    with fleet_of(["a", "b"], small_store(work / "redis"), work / "redis", prefix) as fleet:
        names = sorted(fleet.bots)

        def acks(plan):
            started = time.perf_counter()
            statuses = fleet.deliver(plan)
            return statuses, time.perf_counter() - started

        up = fleet.new_events(n, "U")
        statuses, _ = acks(plan_for(up, rng, names))
        fleet.wait_answered(up)
        counts = per_event(fleet.replies(up))
        ok = set(statuses) == {200} and sorted(counts.values()) == [1] * n
        rows.append(Row("redis", f"Redis up: {n} events, {len(statuses)} deliveries over 2 processes",
                        "exactly one reply per event", f"replies per event: {sorted(set(counts.values()))}", ok,
                        {"deliveries": len(statuses), "events": n}))

        fleet.redis.stop()
        down = fleet.new_events(n, "D")
        started = time.perf_counter()
        plan = plan_for(down, rng, names, both=True)
        statuses, _ = acks(plan)
        fleet.wait_answered(down)
        answered_s = time.perf_counter() - started
        fleet.wait_replies(down, {(e.body["ts"], name) for e, _retry, name in plan})
        replies = fleet.replies(down)
        per_process = max(replies.values())
        total = per_event(replies)
        errors = sum(1 for e in down if (fleet.answer(e) or "").startswith("Sorry"))
        alive = all(b.alive() for b in fleet.bots.values())
        ok = (set(statuses) == {200} and per_process == 1 and len(total) == n and errors == 0 and alive)
        rows.append(Row("redis", f"Redis stopped: {n} events, {len(statuses)} deliveries, each event on both",
                        "all acked and answered; at most 1 reply per event per process; no crash",
                        f"non-200 {sum(s != 200 for s in statuses)}; max per process {per_process}; events answered "
                        f"{len(total)}/{n} (twice: {sum(1 for v in total.values() if v > 1)}); error replies {errors}; "
                        f"processes alive: {alive}", ok,
                        {"answered_s": round(answered_s, 2), "answered_twice": sum(1 for v in total.values() if v > 1)}))

        started = time.perf_counter()
        fleet.redis.start()
        client = redis_lib.Redis.from_url(fleet.redis.url)
        seen = {f"{prefix}seen:event:{e.event_id}".encode() for e in up + down}
        deadline = time.monotonic() + 120
        while not seen <= set(client.scan_iter(match=prefix + "seen:*")) and time.monotonic() < deadline:
            time.sleep(0.05)
        resync_s = time.perf_counter() - started
        before = sum(fleet.replies(up + down).values())
        late = [(e, 3, rng.choice(names)) for e in up + down for _ in range(2)]
        new = fleet.new_events(n, "N")
        statuses, _ = acks(late + plan_for(new, rng, names, both=True))
        fleet.wait_answered(new)
        time.sleep(1.0)  # the late retries are dropped after their ack: let them land
        extra = sum(fleet.replies(up + down).values()) - before
        counts = per_event(fleet.replies(new))
        ok = set(statuses) == {200} and extra == 0 and sorted(counts.values()) == [1] * n
        rows.append(Row("redis", f"Redis restarted empty: {len(late)} late retries of earlier events, {n} new events",
                        "exactly once again (claims written back)",
                        f"claims back {resync_s:.1f} s after the start; late retries answered {extra}; new events: replies "
                        f"{sorted(set(counts.values()))}", ok, {"resync_s": round(resync_s, 2), "late_answered": extra}))
        client.close()
    return rows


# -- Elasticsearch -----------------------------------------------------------------------
def elasticsearch_rows(work: Path, quick: bool) -> list[Row]:
    from bot.testing.bench import ingest_handbook_into
    from bot.testing.bot_child import BotProcess
    from bot.testing.es_faults import KILL_POINTS, delete_alias_indices, kill_during_ingest
    from bot.testing.es_proxy import ElasticProxy
    from bot.testing.services import PrivateElasticsearch, free_port_pair
    from bot.testing.slack_sender import SlackSender
    from bot.testing.slack_standin import BOT_USER_ID, SlackStandIn
    from search.elastic import ElasticStore, connect

    rows = []
    folder = Path(tempfile.mkdtemp(prefix="citebot-es-faults-", dir=os.environ.get("CITEBOT_RUN_DIR")))
    es = PrivateElasticsearch(free_port_pair(), folder / "node")
    started = time.perf_counter()
    es.start()
    first_start_s = time.perf_counter() - started
    proxy = ElasticProxy(es.port).start()
    try:
        points = ["moving-the-alias"] if quick else list(KILL_POINTS)
        for point in points:
            result = kill_during_ingest(es, proxy, HANDBOOK, work / f"es-{point}", point, f"faults-{point}")
            expected = KILL_POINTS[point][2]
            ok = result.served_after_restart == expected and result.duplicated == 0 and result.completed
            rows.append(Row("elasticsearch", f"node SIGKILLed while {point.replace('-', ' ')} ({result.killed_at})",
                            f"alias serves the {expected} collection whole, 0 duplicated; next ingest completes",
                            f"serves {result.served_after_restart}; {result.duplicated} duplicated; next ingest "
                            f"{'completes' if result.completed else 'DOES NOT complete'}; left behind: "
                            f"{len(result.leftover_indices)} index(es); node back in {result.restart_s:.0f} s",
                            ok, asdict(result)))
            delete_alias_indices(es.url, f"faults-{point}")

        # a turn whose first search meets a dead node, then the node back
        alias = "faults-turn"
        ingest_handbook_into(ElasticStore(connect(es.url), alias=alias))
        standin = SlackStandIn().start()
        bot = BotProcess(work / "es-bot.log", "--slack-api", standin.api_url, "--es-url", proxy.url,
                         "--index", alias, "--es-timeout-s", "2", "--store", str(work / "es-turns"))
        sender = SlackSender(bot.url)

        def ask(text: str) -> tuple[str, float]:
            m = standin.user_message("CFAULTES", "UES", f"<@{BOT_USER_ID}> {text}")
            sent = time.perf_counter()
            sender.event({"type": "app_mention", "user": "UES", "text": m["text"], "ts": m["ts"],
                          "channel": "CFAULTES", "event_ts": m["ts"]})
            deadline = time.monotonic() + 300
            while time.monotonic() < deadline:
                ours = [x for x in standin.messages("CFAULTES") if x.get("thread_ts") == m["ts"] and x.get("bot_id")]
                if ours and "Looking through" not in ours[0]["text"]:
                    return ours[0]["text"], time.perf_counter() - sent
                time.sleep(0.05)
            return "NO REPLY", time.perf_counter() - sent

        try:
            ask("How often does the Release Train leave?")
            proxy.arm(lambda r: "/_search" in r.path, es.kill)
            text, failed_s = ask("What is the per diem for travel?")
            ready_down = bot.get("/readyz")[0]
            started = time.perf_counter()
            es.start()
            node_s = time.perf_counter() - started
            started = time.perf_counter()
            while bot.get("/readyz")[0] != 200 and time.perf_counter() - started < 300:
                time.sleep(0.2)
            ready_s = time.perf_counter() - started
            again, answer_s = ask("How often does the Release Train leave?")
            ok = (text.startswith("Sorry") and "(turn t-" in text and ready_down == 503
                  and not again.startswith("Sorry") and bot.alive())
            rows.append(Row("elasticsearch", "node SIGKILLed as a turn's first search reaches it",
                            "turn ends visibly with its turn id; /readyz 503 then 200; answers again, no restart",
                            f"error reply with turn id after {failed_s:.2f} s; /readyz {ready_down}, then 200 "
                            f"{ready_s:.1f} s after the node was healthy again (its restart: {node_s:.0f} s); "
                            f"next answer in {answer_s:.2f} s", ok,
                            {"failed_reply_s": round(failed_s, 3), "ready_after_healthy_s": round(ready_s, 2),
                             "node_restart_s": round(node_s, 1),
                             "reply": text[:160]}))
            # a frozen node (SIGSTOP): the turn's first request waits out CITEBOT_ES_TIMEOUT_S, once
            es.freeze()
            text, frozen_s = ask("What is the per diem for travel?")
            es.thaw()
            ok = text.startswith("Sorry") and "(turn t-" in text
            rows.append(Row("elasticsearch", "node frozen (SIGSTOP) during a turn, CITEBOT_ES_TIMEOUT_S=2",
                            "turn ends visibly with its turn id",
                            f"error reply after {frozen_s:.1f} s (= timeout × {frozen_s / 2:.1f}; a timed-out "
                            "request is not retried)", ok, {"frozen_reply_s": round(frozen_s, 2),
                                                                  "reply": text[:160]}))
        finally:
            bot.stop()
            standin.stop()
    finally:
        proxy.stop()
        es.remove()
        shutil.rmtree(folder, ignore_errors=True)
    rows.insert(0, Row("elasticsearch", "private node start (baseline)", "-", f"{first_start_s:.0f} s", True,
                       {"start_s": round(first_start_s, 1)}))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer seeds, events and kill points (CI)")
    parser.add_argument("--only", help=f"comma-separated sections of {', '.join(SECTIONS)}")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    import logging

    from bot.logs import configure

    configure("json", level=logging.CRITICAL)
    for name in ("elastic_transport", "elasticsearch", "urllib3"):  # the faults' retries, expected
        logging.getLogger(name).setLevel(logging.CRITICAL)
    sections = args.only.split(",") if args.only else list(SECTIONS)
    run = {"anthropic": anthropic_rows, "embedded": embedded_rows, "redis": redis_rows,
           "elasticsearch": elasticsearch_rows}
    rows: list[Row] = []
    seconds = {}
    with tempfile.TemporaryDirectory(prefix="citebot-faults-") as tmp:
        for name in sections:
            started = time.perf_counter()
            rows += run[name](Path(tmp) / name, args.quick)
            seconds[name] = round(time.perf_counter() - started, 1)
    bad = [r for r in rows if not r.ok]
    if args.json:
        print(json.dumps({"rows": [asdict(r) for r in rows], "seconds": seconds, "failed": len(bad)}))
    else:
        print("| section | fault | expected | observed | ok |\n|---|---|---|---|---|")
        for r in rows:
            print(f"| {r.section} | {r.fault} | {r.expected} | {r.observed} | {'yes' if r.ok else '**NO**'} |")
        print(f"\nsections took {seconds} s; {len(bad)} row(s) not as expected")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

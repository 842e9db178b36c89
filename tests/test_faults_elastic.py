"""Elasticsearch killed (SIGKILL) in the middle of an ingest and stopped during a turn
(python -m benchmarks.faults --only elasticsearch measures the same), on a private node of this
module's own (bot/testing/services.py), never the shared test node.

An ingest killed before its alias moves leaves the alias serving the old collection whole
(no chunk lost, none twice); killed after, the new one; the next ingest completes the
work (bot/testing/es_faults.py; every kill point, with restart times, runs in
benchmarks/faults.py). A turn whose search meets a dead node ends visibly with its turn
id, /readyz says the store is unreachable, and the same bot process answers again once
the node is back.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path

import pytest

from bot.testing.bench import ingest_handbook_into
from bot.testing.bot_child import BotProcess
from bot.testing.es_faults import KILL_POINTS, delete_alias_indices, kill_during_ingest
from bot.testing.es_proxy import ElasticProxy
from bot.testing.services import PrivateElasticsearch, free_port_pair
from bot.testing.slack_sender import SlackSender
from bot.testing.slack_standin import BOT_USER_ID, SlackStandIn
from search.elastic import ElasticStore, connect
from tests.conftest import HANDBOOK

pytestmark = pytest.mark.elasticsearch
WAIT_S = 180  # hang guard (a node restart took 6-35 s on the loaded CI machine)


@pytest.fixture(scope="module")
def node():
    # Not under pytest's basetemp: a concurrent pytest run of the same user prunes old
    # basetemps, and it deleted a running node's data folder (access_denied on write.lock).
    folder = Path(tempfile.mkdtemp(prefix="citebot-es-faults-", dir=os.environ.get("CITEBOT_RUN_DIR")))
    es = PrivateElasticsearch(free_port_pair(), folder / "node").start()
    proxy = ElasticProxy(es.port).start()
    yield es, proxy
    proxy.stop()
    es.remove()
    shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.parametrize("point", ["third-document-write"])  # the other points: benchmarks/faults.py
def test_a_node_killed_mid_ingest_leaves_one_whole_collection_and_the_next_ingest_completes(
        node, tmp_path, point):
    es, proxy = node
    alias = f"faults-{point}"
    result = kill_during_ingest(es, proxy, HANDBOOK, tmp_path, point, alias)
    assert result.killed_at, "the kill point was never reached"
    assert "unreachable" in result.ingest_error and es.url.split("//")[1] not in result.ingest_error
    assert result.served_after_restart == KILL_POINTS[point][2], result
    assert result.duplicated == 0
    assert result.completed and result.calibrated, result
    delete_alias_indices(es.url, alias)


def test_a_node_stopped_during_a_turn_ends_it_visibly_and_the_bot_recovers_without_a_restart(
        node, tmp_path):
    es, proxy = node
    alias = "faults-turn"
    ingest_handbook_into(ElasticStore(connect(es.url, timeout_s=30), alias=alias))
    standin = SlackStandIn().start()
    bot = BotProcess(tmp_path / "bot.log", "--slack-api", standin.api_url, "--es-url", proxy.url,
                     "--index", alias, "--es-timeout-s", "5", "--store", str(tmp_path / "turns"))
    sender = SlackSender(bot.url)
    try:
        def ask(text: str) -> tuple[str, str]:
            m = standin.user_message("CFAULTES", "UES", f"<@{BOT_USER_ID}> {text}")
            event = {"type": "app_mention", "user": "UES", "text": m["text"], "ts": m["ts"],
                     "channel": "CFAULTES", "event_ts": m["ts"]}
            assert sender.event(event).status == 200
            deadline = time.monotonic() + WAIT_S
            while time.monotonic() < deadline:
                ours = [x for x in standin.messages("CFAULTES") if x.get("thread_ts") == m["ts"] and x.get("bot_id")]
                if ours and "Looking through" not in ours[0]["text"]:
                    return ours[0]["text"], json.dumps(ours[0]["blocks"])
                time.sleep(0.1)
            raise AssertionError(f"no reply in {WAIT_S} s")

        text, _ = ask("How often does the Release Train leave?")
        assert not text.startswith("Sorry") and bot.get("/readyz")[0] == 200

        # the node dies as the turn's first search reaches it
        proxy.arm(lambda r: "/_search" in r.path, es.kill)
        text, blocks = ask("What is the per diem for travel?")
        assert proxy.fired, "the turn never searched"
        assert text.startswith("Sorry — I could not answer this: Elasticsearch at"), text
        assert "unreachable" in text and "(turn t-" in text
        assert text.count("(turn ") == 1  # the notification text named the turn twice
        turn_id = text.split("(turn ")[1].split(")")[0].strip("`")
        assert turn_id in blocks
        status, body = bot.get("/readyz")
        assert status == 503 and "unreachable" in json.loads(body)["checks"]["store"]
        assert bot.get("/healthz")[0] == 200 and bot.alive()

        es.start()
        deadline = time.monotonic() + WAIT_S
        while bot.get("/readyz")[0] != 200 and time.monotonic() < deadline:
            time.sleep(0.5)
        assert bot.get("/readyz")[0] == 200, bot.get("/readyz")
        text, _ = ask("How often does the Release Train leave?")
        assert not text.startswith("Sorry"), text  # the same process answers again
        assert bot.alive()
    finally:
        bot.stop()
        standin.stop()
        delete_alias_indices(es.url, alias)
        shutil.rmtree(tmp_path / "turns", ignore_errors=True)

"""Serving: real `citebot serve` processes, URL verification, probes, start-up refusals."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import urllib.error
import urllib.request
import uuid

import pytest

from bot.settings import load_settings
from bot.testing.slack_sender import SlackSender
from bot.testing.slack_standin import BOT_TOKEN, SIGNING_SECRET
from bot.wiring import Components, serve
from search.errors import ConfigError
from tests.conftest import REPO, real_redis_url
from tests.slack_harness import (
    ACK_LIMIT_S,
    CHANNEL,
    QUESTION,
    mention,
    one_answer,
)


class ServeProcess:
    """A real `citebot serve --port 0` subprocess, its JSON log lines collected as they come."""

    def __init__(self, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "bot.cli", "serve", "--port", "0"], cwd=REPO,
                                     env=env, stderr=subprocess.PIPE, text=True)
        self.events: list[dict] = []
        self._seen = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            try:
                entry = json.loads(line)
            except ValueError:
                entry = {"event": "unparsed", "line": line}
            with self._seen:
                self.events.append(entry)
                self._seen.notify_all()

    def wait_for(self, event: str, timeout_s: float = 120.0) -> dict:
        with self._seen:
            ok = self._seen.wait_for(lambda: any(e.get("event") == event for e in self.events), timeout_s)
            assert ok, f"no {event!r} from citebot serve in {timeout_s} s: {self.events[-5:]}"
            return next(e for e in self.events if e.get("event") == event)

    def logged(self, event: str) -> list[dict]:
        with self._seen:
            return [e for e in self.events if e.get("event") == event]

    def stop(self) -> int:
        """SIGTERM: stop listening, let the work in progress finish, exit."""
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=60)


@pytest.mark.redis
@pytest.mark.slow
def test_two_citebot_serve_processes_sharing_redis_answer_once(standin, examples_store_dir, tmp_path,
                                                              redis_prefix):
    """Two real `citebot serve` processes, one Redis: a duplicated, retried event is answered once."""
    redis_url = real_redis_url()
    servers: list[ServeProcess] = []
    try:
        for n in range(2):
            store = tmp_path / f"store-{n}"
            shutil.copytree(examples_store_dir, store)
            env = {k: v for k, v in os.environ.items() if not k.startswith(("CITEBOT_", "SLACK_"))}
            env.update(CITEBOT_STORE=str(store), SLACK_BOT_TOKEN=BOT_TOKEN,
                       SLACK_SIGNING_SECRET=SIGNING_SECRET, CITEBOT_SLACK_API_URL=standin.api_url,
                       REDIS_URL=redis_url, CITEBOT_REDIS_PREFIX=redis_prefix, CITEBOT_LOG_FORMAT="json")
            servers.append(ServeProcess(env))
        senders = [SlackSender(f"http://127.0.0.1:{s.wait_for('slack_http_listening')['port']}/slack/events")
                   for s in servers]
        event = mention(standin, QUESTION)
        event_id = f"EvTWOPROC{uuid.uuid4().hex[:8]}"
        deliveries = [s.event(event, event_id=event_id, retry_num=r)
                      for s, r in zip(senders * 2, (None, None, 1, 2))]
        assert [d.status for d in deliveries] == [200] * 4
        assert max(d.elapsed_s for d in deliveries) < ACK_LIMIT_S
        standin.wait_for("chat.update", timeout_s=120)
        for s, sender in zip(servers, senders):
            s.wait_for("warm_up_done")
            assert _get(f"http://{sender.host}:{sender.port}/readyz") == (
                200, {"ready": True, "checks": {"model": "ok", "store": "ok", "redis": "ok"}})
        assert [s.stop() for s in servers] == [0, 0]
        one_answer(standin, event)
        assert len(standin.calls("chat.update")) == 1
        turn_lines = [e for s in servers for e in s.logged("turn")]
        assert len(turn_lines) == 1 and turn_lines[0]["channel"] == CHANNEL
        assert len([e for s in servers for e in s.logged("slack_duplicate_dropped")]) == 3
        for s in servers:
            assert all(BOT_TOKEN not in json.dumps(e) and SIGNING_SECRET not in json.dumps(e)
                       for e in s.events)
    finally:
        for s in servers:
            if s.proc.poll() is None:
                s.proc.kill()
                s.proc.wait()

# -- serving ------------------------------------------------------------------------------
@pytest.mark.slow
def test_url_verification_and_health(standin, start_bot, small_store):
    h = start_bot(small_store)
    body = json.dumps({"token": "x", "challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P",
                       "type": "url_verification"})
    delivery = h.sender.post(body, "application/json")
    assert delivery.status == 200 and b"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P" in delivery.body

    with urllib.request.urlopen(h.server.url.replace("/slack/events", "/healthz")) as r:
        assert r.status == 200 and r.read() == b"ok"


def test_serve_refuses_to_start_without_what_it_needs(standin):
    settings = load_settings(slack_api_url=standin.api_url)
    with pytest.raises(ConfigError, match="SLACK_BOT_TOKEN"):
        serve(Components(settings), port=0)
    settings = load_settings(slack_api_url=standin.api_url, slack_bot_token=BOT_TOKEN,
                             slack_signing_secret=SIGNING_SECRET)
    with pytest.raises(ConfigError, match="SLACK_APP_TOKEN"):
        serve(Components(settings), socket=True)
    settings = load_settings(slack_api_url=standin.api_url, slack_bot_token=BOT_TOKEN,
                             slack_app_token="xapp-1-not-accepted")
    with pytest.raises(ConfigError, match="Socket Mode connection .*invalid_auth"):
        serve(Components(settings), socket=True)
    assert standin.calls("apps.connections.open")  # it asked Slack, through the SDK
    settings = load_settings(slack_api_url=standin.api_url, slack_bot_token="xoxb-wrong")
    with pytest.raises(ConfigError, match="invalid_auth"):
        serve(Components(settings), port=0)
    settings = load_settings(slack_api_url=standin.api_url, slack_bot_token=BOT_TOKEN)
    with pytest.raises(ConfigError, match="SLACK_SIGNING_SECRET"):
        serve(Components(settings), port=0)


def _get(url: str) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_readiness_waits_for_the_model_and_the_store(standin, start_bot, small_store):
    h = start_bot(small_store)
    ready = h.server.url.replace("/slack/events", "/readyz")
    status, body = _get(ready)
    assert status == 503 and body["ready"] is False and body["checks"]["model"].startswith("loading")
    h.bot.warm_up()
    status, body = _get(ready)
    assert (status, body) == (200, {"ready": True, "checks": {"model": "ok", "store": "ok"}})


def test_readiness_judges_the_store_as_opening_it_does(standin, start_bot, small_store):
    """A store built on another runtime at fp32 is served (the same vectors), so it is ready;
    another precision is not."""
    import dataclasses

    from bot.testing.embedder import HashingEmbedder

    h = start_bot(small_store)
    h.bot.warm_up()
    ready = h.server.url.replace("/slack/events", "/readyz")
    for runtime, precision, expected in (("onnxruntime", "fp32", "ok"),
                                         ("onnxruntime", "int8", "empty or built with another model")):
        other = HashingEmbedder()
        other.stamp = dataclasses.replace(other.stamp, runtime=runtime, precision=precision)
        h.components.embedder = other
        _status, body = _get(ready)
        assert body["checks"]["store"] == expected, (runtime, precision, body)


def test_readiness_reports_an_empty_store_and_a_redis_that_is_down(standin, start_bot, tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    h = start_bot(redis_url=f"redis://127.0.0.1:{closed}/0")
    h.components.__dict__["answerer"] = object()  # as if warm-up had run
    status, body = _get(h.server.url.replace("/slack/events", "/readyz"))
    assert status == 503 and body["checks"]["store"] == "empty or built with another model"
    assert body["checks"]["redis"].startswith("cannot answer a ping in Redis")


def test_socket_mode_probes_have_a_port_of_their_own():
    from bot.slack.server import ProbeServer

    checks = {"model": "ok", "store": "ok"}
    probes = ProbeServer(host="127.0.0.1", port=0, readiness=lambda: dict(checks)).start()
    try:
        base = f"http://127.0.0.1:{probes.port}"
        with urllib.request.urlopen(base + "/healthz", timeout=10) as r:
            assert r.status == 200 and r.read() == b"ok"
        assert _get(base + "/readyz") == (200, {"ready": True, "checks": checks})
        checks["store"] = "cannot reach Elasticsearch"
        assert _get(base + "/readyz")[0] == 503
        try:
            urllib.request.urlopen(base + "/slack/events", timeout=10)
            raise AssertionError("the probe port must not serve Slack's events")
        except urllib.error.HTTPError as err:
            assert err.code == 404
    finally:
        probes.shutdown()

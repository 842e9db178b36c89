"""Smoke test of citebot's image on loopback (scripts/check-deploy runs it).

1. `citebot ingest` from the image reads examples/handbook into a fresh volume.
2. `citebot serve` from the image, on that volume, as the chart runs it: uid 10001,
   read-only root filesystem, writable /tmp and $HOME only, all capabilities dropped,
   no network for anything but loopback (host networking, so it reaches the stand-in).
3. Waits for /readyz (falls back to /healthz while the image has no /readyz yet, and
   says so), delivers one app_mention signed with the signing secret as Slack signs it,
   and requires exactly one threaded reply at the Web API stand-in: the placeholder,
   replaced in place by an answer that cites the handbook and names its turn.
4. Stops the container with SIGTERM (it must exit 0) and removes it and the volume.

    .venv/bin/python scripts/deploy_smoke.py --image localhost/citebot:check
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bot.testing import slack_standin as slack  # the one place that names the stand-in's modules
from bot.testing.slack_sender import SlackSender

QUESTION = "How often does the Release Train leave?"
CHANNEL, USER = "CSMOKE", "USMOKE"
READY_TIMEOUT_S = 300   # the model loads in ~10 s on a quiet machine; CI's may be busy
ANSWER_TIMEOUT_S = 180
# What the chart's securityContext gives the pod, in podman's words.
HARDENED = ["--user", "10001:10001", "--read-only", "--tmpfs", "/tmp", "--tmpfs", "/home/citebot",
            "--cap-drop", "ALL", "--security-opt", "no-new-privileges"]


def log(msg: str) -> None:
    print(f"[deploy-smoke {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def podman(*args: str, check: bool = True, capture: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["podman", *args], check=check, text=True,
                          capture_output=capture)


def logs(container: str) -> str:
    out = podman("logs", container, check=False)
    return (out.stdout + out.stderr)[-4000:]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, r.read().decode(errors="replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")
    except OSError as e:
        return 0, str(e)


def wait_ready(base: str, container: str) -> str:
    """The probe path that answered 200; fails if the container exits or time runs out."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    path, last = "/readyz", ""
    while time.monotonic() < deadline:
        state = podman("inspect", "--format", "{{.State.Running}}", container).stdout.strip()
        if state != "true":
            raise SystemExit(f"the container stopped before it was ready:\n{logs(container)}")
        status, body = get(base + path)
        if status == 200:
            return path
        if status == 404 and path == "/readyz":
            log("/readyz answers 404 (this image predates it): waiting for /healthz instead")
            path = "/healthz"
            continue
        last = f"{status} {body[:200]}"
        time.sleep(1)
    raise SystemExit(f"{path} did not answer 200 in {READY_TIMEOUT_S} s (last: {last})")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--image", required=True)
    args = ap.parse_args()

    run = uuid.uuid4().hex[:8]
    volume, container = f"citebot-smoke-{run}", f"citebot-smoke-{run}"
    standin = slack.SlackStandIn().start()
    port = free_port()
    env_file = Path(tempfile.mkstemp(prefix="citebot-smoke-", suffix=".env")[1])
    env_file.write_text(f"SLACK_BOT_TOKEN={slack.BOT_TOKEN}\nSLACK_SIGNING_SECRET={slack.SIGNING_SECRET}\n"
                        f"CITEBOT_SLACK_API_URL={standin.api_url}\nCITEBOT_LOG_FORMAT=json\n"
                        f"CITEBOT_GLOSSARY=/examples/glossary.csv\n")
    os.chmod(env_file, 0o600)
    mounts = ["-v", f"{volume}:/data", "-v", f"{ROOT / 'examples'}:/examples:ro"]
    started = time.monotonic()
    try:
        podman("volume", "create", volume)
        log(f"ingest examples/handbook into the volume {volume}")
        t = time.monotonic()
        ingest = podman("run", "--rm", "--network=none", *HARDENED, "--env-file", str(env_file), *mounts,
                        args.image, "ingest", "--json", "/examples/handbook", check=False)
        if ingest.returncode != 0:
            raise SystemExit(f"citebot ingest failed ({ingest.returncode}):\n{ingest.stderr[-3000:]}")
        summary = json.loads(ingest.stdout.strip().splitlines()[-1])
        log(f"ingested in {time.monotonic() - t:.0f} s: {summary}")

        log(f"serve on 127.0.0.1:{port} (host network), Web API stand-in at {standin.api_url}")
        podman("run", "-d", "--name", container, "--network=host", *HARDENED, "--env-file", str(env_file),
               *mounts, args.image, "serve", "--port", str(port))
        base = f"http://127.0.0.1:{port}"
        t = time.monotonic()
        probe = wait_ready(base, container)
        log(f"{probe} answered 200 after {time.monotonic() - t:.0f} s")

        message = standin.user_message(CHANNEL, USER, f"<@{slack.BOT_USER_ID}> {QUESTION}")
        event = {"type": "app_mention", "user": USER, "text": message["text"], "ts": message["ts"],
                 "channel": CHANNEL, "event_ts": message["ts"], "team": message["team"]}
        delivery = SlackSender(base + "/slack/events").event(event)
        assert delivery.status == 200, f"the signed event got {delivery.status}: {delivery.body!r}"
        forged = SlackSender(base + "/slack/events", signing_secret="not-the-secret").event(event)
        assert forged.status == 401, f"a wrongly signed event got {forged.status}, not 401"

        standin.wait_for("chat.update", 1, timeout_s=ANSWER_TIMEOUT_S)
        time.sleep(2)  # anything else the bot would (wrongly) post arrives now
        posts = [c for c in standin.calls("chat.postMessage") if c.params.get("channel") == CHANNEL]
        replies = [m for m in standin.messages(CHANNEL) if m.get("bot_id") == slack.BOT_ID]
        assert len(posts) == 1 and posts[0].params.get("thread_ts") == event["ts"], \
            f"expected one post, in the thread; got {[(c.params.get('thread_ts'), c.params.get('text')) for c in posts]}"
        assert len(replies) == 1 and replies[0].get("thread_ts") == event["ts"], replies
        text = json.dumps(replies[0].get("blocks", [])) + replies[0].get("text", "")
        assert "Release Train" in text and "engineering/" in text and "turn `" in text, text[:2000]
        log(f"one threaded reply, {len(text)} characters, citing the handbook; 401 for a forged signature")

        t = time.monotonic()
        podman("stop", "-t", "30", container)
        code = podman("inspect", "--format", "{{.State.ExitCode}}", container).stdout.strip()
        assert code == "0", f"citebot exited {code} on SIGTERM:\n{logs(container)}"
        log(f"stopped on SIGTERM in {time.monotonic() - t:.1f} s, exit 0; smoke test passed "
            f"in {time.monotonic() - started:.0f} s")
    finally:
        podman("rm", "-f", container, check=False)
        podman("volume", "rm", "-f", volume, check=False)
        standin.stop()
        env_file.unlink(missing_ok=True)


if __name__ == "__main__":
    main()

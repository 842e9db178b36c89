"""`citebot serve`'s resident memory once ready, idle and after answering, beside baselines.

    .venv/bin/python -m benchmarks.serve_memory [--questions 5] [--json]

The sample handbook is ingested into a temporary embedded store; `citebot serve` (HTTP
mode, the Slack Web API stand-in of bot/testing/) starts on it as a process of its own.
Its VmRSS is read from /proc once /readyz answers 200 and it has been idle for two seconds
("idle"), then again after it has answered --questions signed app_mention events
("after answering"). Baselines in the same run: a bare interpreter, and one that has
imported numpy and onnxruntime (what any process that embeds a question carries).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from benchmarks.common import REPO, rss_bytes

QUESTIONS = (
    "How often does the Release Train leave?",
    "who do I ask about expenses",
    "what's the wifi password policy for guests",
    "where do people gather if the alarm goes off",
    "can i work from another country for a few weeks",
)
READY_TIMEOUT_S = 180
BIN = Path(sys.executable).parent


def rss_mb(pid: int) -> float:
    rss = rss_bytes(pid)
    if not rss:
        raise RuntimeError(f"no resident memory reported for process {pid}")
    return rss / 2**20


def baseline(code: str) -> float:
    """VmRSS of a fresh interpreter that ran `code` and then waits."""
    proc = subprocess.Popen([sys.executable, "-c", f"{code}\nimport sys; print('ready', flush=True); sys.stdin.read()"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        proc.stdout.readline()
        return rss_mb(proc.pid)
    finally:
        proc.kill()
        proc.wait()


def wait_ready(url: str, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"citebot serve exited with {proc.returncode} before it was ready")
        try:
            if urllib.request.urlopen(url + "/readyz", timeout=2).status == 200:
                return
        except OSError:
            pass
        time.sleep(0.5)
    raise SystemExit(f"citebot serve was not ready after {READY_TIMEOUT_S} s")


def measure(questions: int) -> dict:
    from bot.testing import slack_standin as slack
    from bot.testing.services import free_port
    from bot.testing.slack_sender import SlackSender

    tmp = Path(tempfile.mkdtemp(prefix="citebot-serve-memory-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CITEBOT_", "SLACK_"))}
    env["CITEBOT_STORE"] = str(tmp / "store")
    subprocess.run([str(BIN / "citebot"), "ingest", str(REPO / "examples" / "handbook"), "--json"], env=env,
                   check=True, capture_output=True)
    standin = slack.SlackStandIn().start()
    env.update(SLACK_BOT_TOKEN=slack.BOT_TOKEN, SLACK_SIGNING_SECRET=slack.SIGNING_SECRET,
               CITEBOT_SLACK_API_URL=standin.api_url)
    port = free_port()
    proc = subprocess.Popen([str(BIN / "citebot"), "serve", "--port", str(port)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_ready(url, proc)
        time.sleep(2)
        idle = rss_mb(proc.pid)
        sender = SlackSender(url + "/slack/events")
        for i in range(questions):
            event = {"type": "app_mention", "user": "UMEMORY", "channel": "CMEMORY",
                     "text": f"<@{slack.BOT_USER_ID}> {QUESTIONS[i % len(QUESTIONS)]}", "ts": f"{time.time():.6f}"}
            assert sender.event(event).status == 200
        standin.wait_for("chat.postMessage", count=questions, timeout_s=120)
        settled, seen = time.monotonic(), len(standin.calls())
        while time.monotonic() - settled < 2:  # the answers are in once Slack hears nothing more
            time.sleep(0.2)
            if len(standin.calls()) != seen:
                settled, seen = time.monotonic(), len(standin.calls())
        after = rss_mb(proc.pid)
    finally:
        proc.terminate()
        proc.wait(30)
        standin.stop()
    return {"serve_idle_mb": round(idle, 1), "serve_after_answering_mb": round(after, 1), "questions": questions}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = {
        "python_mb": round(baseline("pass"), 1),
        "numpy_onnxruntime_mb": round(baseline("import numpy, onnxruntime"), 1),
        **measure(args.questions),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }
    result["idle_over_numpy_onnxruntime"] = round(result["serve_idle_mb"] / result["numpy_onnxruntime_mb"], 2)
    if args.json:
        print(json.dumps(result))
        return
    print(f"python, bare                     {result['python_mb']:7.1f} MB")
    print(f"python + numpy + onnxruntime     {result['numpy_onnxruntime_mb']:7.1f} MB")
    print(f"citebot serve, ready and idle    {result['serve_idle_mb']:7.1f} MB  "
          f"({result['idle_over_numpy_onnxruntime']:.2f}x the numpy+onnxruntime baseline)")
    print(f"after answering {args.questions} questions      {result['serve_after_answering_mb']:7.1f} MB")
    print(f"load average {result['load_average']}")


if __name__ == "__main__":
    main()

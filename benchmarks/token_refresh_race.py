"""Token refresh across replicas: how many refresh tokens are spent twice, with the lock per
workspace (bot/slack/oauth.py) and without it (docs/decisions/0042-many-workspaces.md).

Several "replicas" (each its own installation store object, rotator and lock, as separate
processes would have) read one installation whose bot token is due, all at once, from
several threads, against the many-workspace stand-in of the Web API; a refresh token works
once there, as Slack's do. Prints, per backend and variant: refreshes Slack granted,
refreshes it refused (a refresh token spent twice), the distinct bot tokens the readers came
away with (one a round is right), and the reads that failed (a request that would go
unanswered).

    .venv/bin/python -m benchmarks.token_refresh_race                       # embedded store
    .venv/bin/python -m benchmarks.token_refresh_race --redis redis://127.0.0.1:6490/0
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import tempfile
import threading
import uuid
from pathlib import Path

from slack_sdk.oauth.installation_store import Installation

from bot.slack.installs import EmbeddedRows, RedisRows, RowsInstallationStore
from bot.slack.oauth import ProcessLocks, RedisLocks, RotatingInstallationStore, rotator
from bot.slack.workspace import TeamClient
from bot.testing.slack_oauth_standin import CLIENT_ID, CLIENT_SECRET, ManyWorkspacesStandIn, Team
from search.embedded import EmbeddedStore

TEAM = Team("TRACE")
REPLICAS = 4
READERS = 16
ROUNDS = 5


def _round(rows_of, lock_of, locked: bool) -> tuple[int, int, int, int]:
    standin = ManyWorkspacesStandIn(rotating=True, token_life_s=600).start()  # due at once
    try:
        basic = "Basic " + base64.b64encode(f"{CLIENT_ID}:{CLIENT_SECRET}".encode()).decode()
        first = standin._oauth({"code": standin.consent(TEAM)}, basic)
        RowsInstallationStore(rows_of()).save(Installation(
            app_id="A", team_id=TEAM.id, bot_token=first["access_token"],
            bot_refresh_token=first["refresh_token"], bot_token_expires_in=first["expires_in"],
            bot_id=TEAM.bot_id, bot_user_id=TEAM.bot_user_id, user_id="UINSTALLER"))
        standin.token_life_s = 12 * 3600
        web = TeamClient(base_url=standin.api_url)
        no_lock = lambda owner: contextlib.nullcontext()
        replicas = [RotatingInstallationStore(RowsInstallationStore(rows_of()),
                                              rotator(web, CLIENT_ID, CLIENT_SECRET),
                                              lock_of() if locked else no_lock)
                    for _ in range(REPLICAS)]
        tokens: set[str] = set()
        failed: list[int] = []
        go = threading.Barrier(READERS)

        def read(i: int) -> None:
            go.wait()
            try:
                bot = replicas[i % REPLICAS].find_bot(enterprise_id=None, team_id=TEAM.id)
                if bot is not None and bot.bot_token:
                    tokens.add(bot.bot_token)
            except Exception:  # noqa: BLE001 - a refused refresh fails that request
                failed.append(i)

        threads = [threading.Thread(target=read, args=(i,)) for i in range(READERS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        return standin.refreshes, standin.refresh_refused, len(tokens), len(failed)
    finally:
        standin.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--redis", help="a Redis URL: the Redis backend and lock")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if args.redis:
            import redis

            client = redis.Redis.from_url(args.redis)
            prefix = f"citebot-bench:{uuid.uuid4().hex[:8]}:"
            backend = "redis"
            rows_of = lambda: RedisRows(client, prefix)
            lock_of = lambda: RedisLocks(client, prefix)
        else:
            store = EmbeddedStore(Path(tmp) / "store")
            shared = ProcessLocks()
            backend = "embedded"
            rows_of = lambda: EmbeddedRows(store)
            lock_of = lambda: shared
        print(f"{backend}: {REPLICAS} replicas, {READERS} readers at once, {ROUNDS} rounds")
        for locked in (True, False):
            totals = [0, 0, 0, 0]
            for _ in range(ROUNDS):
                for i, n in enumerate(_round(rows_of, lock_of, locked)):
                    totals[i] += n
                if args.redis:
                    for key in client.scan_iter(match=prefix + "*"):
                        client.delete(key)
            print(f"  {'with the lock   ' if locked else 'without the lock'}: granted {totals[0]}, "
                  f"refused {totals[1]}, distinct tokens read {totals[2]}, failed reads {totals[3]} "
                  f"of {READERS * ROUNDS}")


if __name__ == "__main__":
    main()

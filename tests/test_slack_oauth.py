"""citebot installed in many workspaces (bot/slack/many.py): Bolt's OAuth v2 flow through
the real HTTP server, installations in Redis or the embedded store, each workspace answered
with its own token, uninstalls that forget a workspace, token rotation without a race.
Slack is the many-workspace stand-in (bot/testing/slack_oauth_standin.py)."""

from __future__ import annotations

import http.client
import json
import re
import threading
import time
from pathlib import Path

import pytest
import yaml

from bot.settings import BOT_SCOPES, load_settings
from bot.slack.installs import (
    EmbeddedRows,
    RedisRows,
    RowsInstallationStore,
)
from bot.slack.oauth import ProcessLocks, RedisLocks, RotatingInstallationStore, rotator
from bot.slack.server import SlackHttpServer
from bot.slack.workspace import TeamClient
from bot.testing.slack_oauth_standin import (
    CLIENT_ID,
    CLIENT_SECRET,
    ManyWorkspacesStandIn,
    Team,
    envelope,
)
from bot.testing.slack_sender import SlackSender
from bot.testing.slack_standin import SIGNING_SECRET
from bot.wiring import Components, build_bot
from search.embedded import EmbeddedStore
from search.errors import ConfigError
from tests.conftest import real_redis_url

ALPHA = Team("TALPHA")
BETA = Team("TBETA")
ORG = Team("EORG", enterprise_id="EORG", org_wide=True)
IN_ORG = Team("TINORG", enterprise_id="EORG", org_wide=True)  # a workspace of ORG's org
QUESTION = "How often does the Release Train leave?"
ROOT = Path(__file__).resolve().parents[1]


class Running:
    def __init__(self, components: Components, bot, server: SlackHttpServer) -> None:
        self.components, self.bot, self.server = components, bot, server
        self.sender = SlackSender(server.url)
        self.base = f"http://127.0.0.1:{server.port}"

    def get(self, path: str, cookie: str = "") -> tuple[int, str, str]:
        conn = http.client.HTTPConnection("127.0.0.1", self.server.port, timeout=30)
        try:
            conn.request("GET", path, headers={"Cookie": cookie} if cookie else {})
            r = conn.getresponse()
            return r.status, r.read().decode(), r.getheader("Set-Cookie") or ""
        finally:
            conn.close()

    def install(self, standin: ManyWorkspacesStandIn, team: Team) -> tuple[int, str]:
        """A person opens /slack/install, allows the app in `team`, and comes back."""
        status, page, cookie = self.get("/slack/install")
        assert status == 200, page
        state = re.search(r"state=([\w-]+)", page)
        assert state, page
        code = standin.consent(team)
        status, page, _ = self.get(f"/slack/oauth_redirect?code={code}&state={state.group(1)}",
                                   cookie.split(";")[0])
        return status, page

    def event(self, team: Team, event: dict) -> None:
        body = envelope(team, event, self.sender.new_event_id())
        r = self.sender.post(json.dumps(body), "application/json")
        assert r.status == 200, r.body

    def drain(self) -> None:
        assert self.bot.drain(90)


@pytest.fixture()
def standin():
    s = ManyWorkspacesStandIn().start()
    yield s
    s.stop()


@pytest.fixture(params=["embedded", pytest.param("redis", marks=pytest.mark.redis)])
def backend(request):
    return request.param


@pytest.fixture()
def start(standin, test_embedder, small_store, backend, redis_prefix, tmp_path):
    started: list[Running] = []

    def go(**overrides) -> Running:
        settings = dict(slack_client_id=CLIENT_ID, slack_client_secret=CLIENT_SECRET,
                        slack_signing_secret=SIGNING_SECRET, slack_api_url=standin.api_url,
                        store=tmp_path / "state-store")
        if backend == "redis":
            settings |= dict(redis_url=real_redis_url(), redis_prefix=redis_prefix)
        components = Components(load_settings(**settings, **overrides))
        components.embedder = test_embedder
        components.store = small_store
        bot = build_bot(components)
        server = SlackHttpServer(bot.app, signing_secret=SIGNING_SECRET, host="127.0.0.1", port=0).start()
        started.append(Running(components, bot, server))
        return started[-1]

    yield go
    for r in started:
        r.server.shutdown()
        r.bot.close(10)


def mention(standin, team: Team, channel: str, user: str = "UALICE", text: str = QUESTION) -> dict:
    message = standin.user_message(channel, user, f"<@{team.bot_user_id}> {text}")
    return {"type": "app_mention", "user": user, "text": message["text"], "ts": message["ts"],
            "channel": channel, "event_ts": message["ts"], "team": team.id}


def posted_by(standin, team: Team, method: str = "chat.postMessage") -> int:
    return sum(1 for m, t in standin.team_calls if m == method and t == team.id)


# -- settings ---------------------------------------------------------------------------
def test_the_default_scopes_are_the_manifests_bot_scopes():
    manifest = yaml.safe_load((ROOT / "slack" / "manifest.yml").read_text())
    assert list(BOT_SCOPES) == manifest["oauth_config"]["scopes"]["bot"]
    assert load_settings().slack_scopes == ",".join(BOT_SCOPES)


@pytest.mark.parametrize(("given", "says"), [
    ({"slack_client_id": "1.2"}, "bad setting: SLACK_CLIENT_SECRET: is not set but SLACK_CLIENT_ID is"),
    ({"slack_client_secret": "s"}, "bad setting: SLACK_CLIENT_SECRET: is set but SLACK_CLIENT_ID is not"),
    ({"slack_client_id": "app", "slack_client_secret": "s"}, "bad setting: SLACK_CLIENT_ID: is not a Slack client id"),
    ({"slack_scopes": "chat:write,no such"}, "bad setting: SLACK_SCOPES: 'no such' is not a scope"),
])
def test_bad_oauth_settings_stop_citebot(given, says):
    with pytest.raises(ConfigError) as caught:
        load_settings(**given)
    assert str(caught.value).startswith(says)


def test_single_token_mode_stays_the_default():
    settings = load_settings(slack_bot_token="xoxb-1")
    assert not settings.oauth_enabled()


# -- install, answer, uninstall through the HTTP server -----------------------------------
def test_each_workspace_installs_and_is_answered_with_its_own_token(start, standin):
    running = start()
    for team in (ALPHA, BETA):
        status, page = running.install(standin, team)
        assert status == 200, page
    store = running.bot.app.installation_store
    assert store.find_bot(enterprise_id=None, team_id=ALPHA.id).bot_token in standin.tokens_of(ALPHA.id)
    assert store.find_bot(enterprise_id=None, team_id=BETA.id).bot_user_id == BETA.bot_user_id
    assert posted_by(standin, ALPHA, "auth.test") == 1  # Bolt asked who the new bot is

    running.event(ALPHA, mention(standin, ALPHA, "CALPHA"))
    running.event(BETA, mention(standin, BETA, "CBETA"))
    running.drain()
    assert posted_by(standin, ALPHA) == 1 and posted_by(standin, BETA) == 1
    alpha_posts = [c for c in standin.calls("chat.postMessage") if c.params["channel"] == "CALPHA"]
    assert len(alpha_posts) == 1
    answer = standin.messages("CALPHA")[-1]
    assert "Release Train" in answer["text"] or answer["blocks"], answer


def test_a_forged_or_reused_state_installs_nothing(start, standin):
    running = start()
    status, page, cookie = running.get("/slack/install")
    state = re.search(r"state=([\w-]+)", page).group(1)
    status, _, _ = running.get(f"/slack/oauth_redirect?code={standin.consent(ALPHA)}&state=forged",
                               cookie.split(";")[0])
    assert status >= 400
    assert running.bot.app.installation_store.find_bot(enterprise_id=None, team_id=ALPHA.id) is None
    code = standin.consent(ALPHA)
    assert running.get(f"/slack/oauth_redirect?code={code}&state={state}", cookie.split(";")[0])[0] == 200
    again = running.get(f"/slack/oauth_redirect?code={standin.consent(ALPHA)}&state={state}",
                        cookie.split(";")[0])
    assert again[0] >= 400  # a state is good once


def test_an_org_wide_install_is_found_by_enterprise_id(start, standin):
    running = start()
    assert running.install(standin, ORG)[0] == 200
    store = running.bot.app.installation_store
    bot = store.find_bot(enterprise_id="EORG", team_id="TANY", is_enterprise_install=True)
    assert bot is not None and bot.bot_token in standin.tokens_of(ORG.id)
    running.event(IN_ORG, mention(standin, IN_ORG, "CORG"))
    running.drain()
    assert posted_by(standin, ORG) == 1  # the org's token answered a workspace of the org


def test_uninstall_forgets_the_workspace_and_only_it(start, standin):
    running = start()
    for team in (ALPHA, BETA):
        running.install(standin, team)
        running.event(team, mention(standin, team, "C" + team.id))
    running.drain()
    turnlog = running.components.turnlog
    kept = {t["team"] for t in turnlog.turns_since("2000-01-01")}
    assert kept == {ALPHA.id, BETA.id}
    state = running.components.state
    alpha_thread = next(t["thread"] for t in turnlog.turns_since("2000-01-01") if t["team"] == ALPHA.id)
    assert state.history(alpha_thread)

    running.event(ALPHA, {"type": "app_uninstalled"})
    running.drain()
    store = running.bot.app.installation_store
    assert store.find_bot(enterprise_id=None, team_id=ALPHA.id) is None
    assert store.find_installation(enterprise_id=None, team_id=ALPHA.id) is None
    assert store.find_bot(enterprise_id=None, team_id=BETA.id) is not None
    assert {t["team"] for t in turnlog.turns_since("2000-01-01")} == {BETA.id}
    assert not state.history(alpha_thread)

    running.event(BETA, {"type": "tokens_revoked", "tokens": {"bot": [BETA.bot_user_id]}})
    running.drain()
    assert store.owners() == []
    assert list(turnlog.turns_since("2000-01-01")) == []


# -- token rotation ---------------------------------------------------------------------
def _installed(standin: ManyWorkspacesStandIn, store: RowsInstallationStore, team: Team) -> None:
    """Install as the OAuth flow does, with a token that is already due for refresh."""
    from slack_sdk.oauth.installation_store import Installation

    answer = standin._oauth({"code": standin.consent(team)}, _basic())
    store.save(Installation(
        app_id=answer["app_id"], enterprise_id=team.enterprise_id, team_id=team.id,
        bot_token=answer["access_token"], bot_refresh_token=answer.get("refresh_token"),
        bot_token_expires_in=answer.get("expires_in"), bot_id=team.bot_id,
        bot_user_id=team.bot_user_id, bot_scopes="chat:write", user_id="UINSTALLER"))


def _basic() -> str:
    import base64

    return "Basic " + base64.b64encode(f"{CLIENT_ID}:{CLIENT_SECRET}".encode()).decode()


def test_replicas_refresh_a_due_token_once(backend, redis_prefix, tmp_path):
    """Several replicas (each its own store object, lock and rotator) read a due installation
    at once: one refresh, no refresh token spent twice, everyone gets the new token."""
    standin = ManyWorkspacesStandIn(rotating=True, token_life_s=600).start()  # due: 10 min left
    try:
        if backend == "redis":
            import redis

            client = redis.Redis.from_url(real_redis_url())

            def rows():
                return RedisRows(client, redis_prefix)

            def locks():
                return RedisLocks(client, redis_prefix)
        else:
            embedded = EmbeddedStore(tmp_path / "store")

            def rows():
                return EmbeddedRows(embedded)

            shared = ProcessLocks()

            def locks():
                return shared
        plain = RowsInstallationStore(rows())
        _installed(standin, plain, ALPHA)
        first = plain.find_bot(enterprise_id=None, team_id=ALPHA.id).bot_token
        standin.token_life_s = 12 * 3600  # the refreshed token is not due
        web = TeamClient(base_url=standin.api_url)
        replicas = [RotatingInstallationStore(RowsInstallationStore(rows()),
                                              rotator(web, CLIENT_ID, CLIENT_SECRET), locks())
                    for _ in range(4)]
        seen: list[str] = []
        go = threading.Barrier(8)

        def read(replica: RotatingInstallationStore, by_bot: bool) -> None:
            go.wait()
            found = (replica.find_bot(enterprise_id=None, team_id=ALPHA.id) if by_bot
                     else replica.find_installation(enterprise_id=None, team_id=ALPHA.id))
            seen.append(found.bot_token)

        threads = [threading.Thread(target=read, args=(replicas[i % 4], i % 2 == 0)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert standin.refreshes == 1 and standin.refresh_refused == 0
        assert len(seen) == 8 and len(set(seen)) == 1 and seen[0] != first
        assert plain.find_installation(enterprise_id=None, team_id=ALPHA.id).bot_token == seen[0]
        assert plain.find_installation(enterprise_id=None, team_id=ALPHA.id,
                                       user_id="UINSTALLER").bot_token == seen[0]
    finally:
        standin.stop()


def test_a_due_token_is_refreshed_before_the_answer(start, standin):
    standin.rotating, standin.token_life_s = True, 600
    running = start()
    running.install(standin, ALPHA)
    installed = standin.tokens_of(ALPHA.id)
    standin.token_life_s = 12 * 3600
    running.event(ALPHA, mention(standin, ALPHA, "CALPHA"))
    running.drain()
    assert standin.refreshes == 1
    fresh = running.bot.app.installation_store.find_bot(enterprise_id=None, team_id=ALPHA.id)
    assert fresh.bot_token not in installed and fresh.bot_token_expires_at > time.time() + 11 * 3600
    assert posted_by(standin, ALPHA) == 1



# -- a collection per workspace ----------------------------------------------------------
def test_a_workspace_is_answered_from_its_own_collection(start, standin, tmp_path):
    from bot.testing.embedder import HashingEmbedder
    from ingest.pipeline import ingest

    docs = {ALPHA.id: "The Alpha launch code is ORCHID.", BETA.id: "The Beta vault combination is MAGNOLIA."}
    for team, text in docs.items():
        (tmp_path / "docs" / team).mkdir(parents=True)
        (tmp_path / "docs" / team / "notes.md").write_text(f"# Notes\n\n{text}\n")
        store = EmbeddedStore(tmp_path / "stores" / team)
        ingest([tmp_path / "docs" / team], store, HashingEmbedder(), progress=False)
        store.close()
    running = start(store_template=str(tmp_path / "stores" / "{team}"))
    for team in (ALPHA, BETA):
        running.install(standin, team)
    running.event(ALPHA, mention(standin, ALPHA, "CALPHA", text="What is the Beta vault combination?"))
    running.event(BETA, mention(standin, BETA, "CBETA", text="What is the Beta vault combination?"))
    running.drain()
    alpha = json.dumps(standin.messages("CALPHA")[-1])
    beta = json.dumps(standin.messages("CBETA")[-1])
    assert "MAGNOLIA" not in alpha
    assert "MAGNOLIA" in beta
    assert running.get("/readyz")[0] == 200


def test_a_streamed_answer_names_the_asking_workspace(start, standin):
    from bot.testing.anthropic_standin import message, running

    with running() as anthropic:
        anthropic.script(lambda r: message("The Release Train leaves every two weeks [1]."))
        live = start(anthropic_api_key="sk-ant-test-0123456789abcdef",
                     anthropic_base_url=anthropic.base_url, anthropic_timeout_s=5.0)
        live.install(standin, BETA)
        live.event(BETA, mention(standin, BETA, "CBETA"))
        live.drain()
    (opened,) = standin.calls("chat.startStream")
    assert opened.params["recipient_team_id"] == BETA.id
    assert posted_by(standin, BETA, "chat.startStream") == 1


# -- the stores' contract -------------------------------------------------------------------
@pytest.fixture()
def rows(backend, redis_prefix, tmp_path):
    if backend == "redis":
        import redis

        client = redis.Redis.from_url(real_redis_url())
        yield RedisRows(client, redis_prefix)
        client.close()
    else:
        store = EmbeddedStore(tmp_path / "store")
        yield EmbeddedRows(store)
        store.close()


def _installation(team: Team, user: str, token: str):
    from slack_sdk.oauth.installation_store import Installation

    return Installation(app_id="A", enterprise_id=team.enterprise_id,
                        team_id=None if team.org_wide else team.id, user_id=user, bot_token=token,
                        bot_id=team.bot_id, bot_user_id=team.bot_user_id,
                        is_enterprise_install=team.org_wide)


def test_installers_are_kept_apart_and_a_revoked_one_goes_alone(rows):
    store = RowsInstallationStore(rows)
    store.save(_installation(ALPHA, "UANN", "xoxb-1"))
    store.save(_installation(ALPHA, "UBOB", "xoxb-2"))
    store.save(_installation(ORG, "UCAT", "xoxb-org"))
    assert store.find_installation(enterprise_id=None, team_id=ALPHA.id).user_id == "UBOB"
    assert store.find_installation(enterprise_id=None, team_id=ALPHA.id, user_id="UANN").bot_token == "xoxb-2"
    assert store.find_bot(enterprise_id="EORG", team_id="TWHATEVER", is_enterprise_install=True).bot_token == "xoxb-org"
    assert store.find_bot(enterprise_id="EORG", team_id="TWHATEVER") is None  # not org-wide: no such workspace
    store.delete_installation(enterprise_id=None, team_id=ALPHA.id, user_id="UANN")
    assert store.find_installation(enterprise_id=None, team_id=ALPHA.id, user_id="UANN") is None
    assert store.find_installation(enterprise_id=None, team_id=ALPHA.id, user_id="UBOB") is not None
    store.delete_installation(enterprise_id=None, team_id=ALPHA.id)
    assert store.find_installation(enterprise_id=None, team_id=ALPHA.id) is None
    assert store.find_bot(enterprise_id=None, team_id=ALPHA.id).bot_token == "xoxb-2"  # the bot stays
    store.delete_all(enterprise_id="EORG", team_id=None)
    assert store.owners() == ["-/" + ALPHA.id]


def test_socket_mode_cannot_serve_the_install_pages():
    from bot.wiring import serve

    settings = load_settings(slack_client_id=CLIENT_ID, slack_client_secret=CLIENT_SECRET,
                             slack_app_token="xapp-1")
    with pytest.raises(ConfigError, match="Socket Mode cannot serve"):
        serve(Components(settings), socket=True)

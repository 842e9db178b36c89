"""The owners' page at /admin and the weekly gaps digest, on a real `citebot serve` HTTP
server (the Slack app with /admin in front, tests/slack_harness.py) and real turns asked
through the answer path: opened in Debian's chromium (headless) and read as rendered;
access by bearer token, signed cookie and channel-bound token; markup in questions and in
document headings shown as text. Both turn logs: the embedded store's and Redis's.
"""

from __future__ import annotations

import http.client
import shutil
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import quote

import pytest

from bot.admin.auth import COOKIE
from bot.admin.setup import admin_for, digest_for
from bot.settings import load_settings
from bot.slack.server import ProbeServer, SlackHttpServer
from bot.testing.slack_standin import SIGNING_SECRET
from ingest.pipeline import ingest
from search.embedded import EmbeddedStore
from search.errors import ConfigError
from tests.conftest import HANDBOOK, REPO, real_redis_url
from tests.test_docs_browser import _browse, _chromium

TOKEN = "all-channels-token-0123456789"
PEOPLE_TOKEN = "people-only-token-0123456789"
SCRIPT_Q = "<script>document.title='pwned'</script> How many vacation days do I get?"
HOSTILE = "Sabbatical <img src=x onerror=alert(1)> <b>leave</b>"
SCOPES = '[default]\nsources = ["**"]\n\n[channels.CPEOPLE]\nsources = ["people/**"]\n'
BACKENDS = ["embedded", pytest.param("redis", marks=pytest.mark.redis)]


def _docs(root: Path, weeks: str = "twelve") -> Path:
    docs = root / "docs"
    if not docs.exists():
        shutil.copytree(HANDBOOK / "people", docs / "people")
        shutil.copytree(HANDBOOK / "company", docs / "company")
    (docs / "notes").mkdir(exist_ok=True)
    (docs / "notes" / "sabbatical.md").write_text(
        f"# {HOSTILE}\n\nThe sabbatical leave lasts {weeks} weeks after five years of service. "
        "Ask your manager for sabbatical leave a quarter ahead.\n", "utf-8")
    return docs


@pytest.fixture()
def site(start_bot, test_embedder, tmp_path, request, redis_prefix):
    """A served bot with /admin, a store with a hostile heading, and turns asked into it."""
    docs = _docs(tmp_path)
    store = EmbeddedStore(tmp_path / "admin-store")
    ingest([docs], store, test_embedder, progress=False)
    scopes = tmp_path / "scopes.toml"
    scopes.write_text(SCOPES, "utf-8")
    extra = {"redis_url": real_redis_url(), "redis_prefix": redis_prefix} if request.param == "redis" else {}
    h = start_bot(store=store, admin_token=f"{TOKEN},{PEOPLE_TOKEN}:CPEOPLE", scopes=scopes, **extra)
    c = h.components
    asked = {}
    for key, question, channel in [("script", SCRIPT_Q, "CGENERAL"),
                                   ("parental", "What is the parental leave policy?", "CPEOPLE"),
                                   ("nonsense", "Zyxwv qrstuv plmkn?", "CGENERAL"),
                                   ("sabbatical", "How long is the sabbatical leave?", "CGENERAL")]:
        record = c.answerer.ask(question, user="UALICE", channel=channel, surface="mention",
                                scope=c.scopes.for_channel(channel).scope)
        asked[key] = record
    c.turnlog.add_feedback(asked["sabbatical"].turn_id, datetime.now(UTC).isoformat(), "UBOB", "not_helpful")
    ingest([_docs(tmp_path, "sixteen")], store, test_embedder, progress=False)  # the cited sentence changes
    server = SlackHttpServer(h.bot.app, signing_secret=SIGNING_SECRET, host="127.0.0.1", port=0,
                             readiness=c.readiness, admin=admin_for(c)).start()
    yield server, asked, h
    server.shutdown()


def _get(server, path: str, headers: dict | None = None) -> tuple[int, dict, str]:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    conn.request("GET", path, headers=headers or {})
    response = conn.getresponse()
    body = response.read().decode()
    conn.close()
    return response.status, dict(response.getheaders()), body


def _bearer(token: str) -> dict:
    return {"Authorization": f"Bearer {token}"}


def _dom(server, token: str, page: str, *extra: str) -> str:
    url = f"http://127.0.0.1:{server.port}/admin/login?token={token}&next={quote(page)}"
    result = _browse(_chromium(), *extra, "--dump-dom", url)
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


@pytest.mark.browser
@pytest.mark.parametrize("site", BACKENDS, indirect=True)
def test_the_pages_render_in_a_browser_with_markup_shown_as_text(site):
    server, asked, _h = site
    dom = _dom(server, TOKEN, "/admin")
    assert "citebot for document owners" in dom  # the cookie from /admin/login was sent after the redirect
    for section in ("Answers per day by outcome", "Coverage by folder", "Ingest history", "Gaps: topics"):
        assert section in dom, section
    assert "<svg" in dom and "<rect" in dom and "answered" in dom  # the chart, drawn
    assert "How long is the sabbatical leave?" in dom  # the voted-down turn is a gap topic ...
    assert "notes/sabbatical.md" in dom and "Sabbatical &lt;img src=x onerror=alert(1)&gt;" in dom  # ... near its heading
    assert "<img" not in dom and "<b>leave" not in dom
    assert "<td>notes</td>" in dom and "<td>people</td>" in dom
    turns = _dom(server, TOKEN, "/admin/turns?filter=all")
    assert "&lt;script&gt;document.title='pwned'&lt;/script&gt;" in turns
    assert "<script" not in turns.lower() and "pwned</title>" not in turns
    stale = _dom(server, TOKEN, "/admin/turns?filter=stale")
    assert asked["sabbatical"].turn_id in stale and asked["script"].turn_id not in stale
    refused = _dom(server, TOKEN, "/admin/turns?filter=refused")
    assert asked["nonsense"].turn_id in refused and asked["parental"].turn_id not in refused
    why = _dom(server, TOKEN, f"/admin/turns/{asked['script'].turn_id}")
    assert "Why turn" in why and "Outcome:" in why and "&lt;script&gt;" in why and "<script" not in why.lower()
    shot = server_shot(server)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000


def server_shot(server) -> Path:
    artefacts = REPO / ".artefacts"
    artefacts.mkdir(exist_ok=True)
    shot = artefacts / "admin-overview.png"
    url = f"http://127.0.0.1:{server.port}/admin/login?token={TOKEN}&next=/admin"
    result = _browse(_chromium(), f"--screenshot={shot}", url)
    assert result.returncode == 0, result.stderr[-2000:]
    return shot


@pytest.mark.browser
@pytest.mark.parametrize("site", ["embedded"], indirect=True)
def test_a_channel_token_sees_only_that_channel_and_its_scope(site):
    server, asked, _h = site
    dom = _dom(server, PEOPLE_TOKEN, "/admin/turns?filter=all")
    assert "Channel CPEOPLE only" in dom
    assert asked["parental"].turn_id in dom and asked["script"].turn_id not in dom
    overview = _dom(server, PEOPLE_TOKEN, "/admin")
    assert "<td>people</td>" in overview and "notes" not in overview and "company" not in overview
    status, _, body = _get(server, f"/admin/turns/{asked['script'].turn_id}", _bearer(PEOPLE_TOKEN))
    assert status == 404 and "vacation" not in body


@pytest.mark.parametrize("site", BACKENDS, indirect=True)
def test_without_a_valid_token_or_cookie_nothing_is_shown(site):
    server, asked, _h = site
    turn = asked["script"].turn_id
    for headers in ({}, _bearer("wrong-token-0123456789"), _bearer(TOKEN[:-1]),
                    {"Cookie": f"{COOKIE}=v1.0000000000000000.9999999999.00"}):
        status, got, body = _get(server, f"/admin/turns/{turn}", headers)
        assert status == 401 and "vacation" not in body and turn not in body, headers
    status, got, body = _get(server, f"/admin/login?token={TOKEN}&next=//evil.example/x")
    assert status == 303 and got["Location"] == "/admin"
    cookie = got["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and TOKEN not in cookie
    value = cookie.split(";")[0]
    status, got, body = _get(server, f"/admin/turns/{turn}", {"Cookie": value})
    assert status == 200 and "vacation days" in body and "script-src" not in got["Content-Security-Policy"]
    assert got["Content-Security-Policy"].startswith("default-src 'none'")
    tampered = value[:-1] + ("0" if value[-1] != "0" else "1")
    assert _get(server, f"/admin/turns/{turn}", {"Cookie": tampered})[0] == 401
    status, _, body = _get(server, "/admin", _bearer(TOKEN))
    assert status == 200 and "Coverage by folder" in body
    assert _get(server, "/healthz")[0] == 200  # the probes and Slack's path still behind it


@pytest.mark.parametrize("site", ["embedded"], indirect=True)
def test_in_socket_mode_the_probe_port_serves_admin(site):
    _server, asked, h = site
    probes = ProbeServer(host="127.0.0.1", port=0, readiness=h.components.readiness,
                         admin=admin_for(h.components)).start()
    try:
        assert _get(probes, "/admin")[0] == 401
        status, _, body = _get(probes, "/admin/turns?filter=voted_down", _bearer(TOKEN))
        assert status == 200 and asked["sabbatical"].turn_id in body and asked["script"].turn_id not in body
        assert _get(probes, "/healthz")[0] == 200
    finally:
        probes.shutdown()


def test_admin_is_off_without_a_token(start_bot, small_store):
    h = start_bot(store=small_store)
    server = SlackHttpServer(h.bot.app, signing_secret=SIGNING_SECRET, host="127.0.0.1", port=0,
                             admin=admin_for(h.components)).start()
    try:
        for path in ("/admin", "/admin/login?token=" + TOKEN, "/admin/turns"):
            status, _, body = _get(server, path, _bearer(TOKEN))
            assert status == 404 and body == "not found", path
    finally:
        server.shutdown()


@pytest.mark.parametrize("value, says", [
    ("short", "at least 16 characters"), (f"{TOKEN}:general", "channel id"),
    (f"{TOKEN},{TOKEN}:C0PEOPLE", "appears twice"), (f"{TOKEN} x", "no space")])
def test_bad_admin_tokens_stop_the_start_without_showing_them(monkeypatch, value, says):
    monkeypatch.setenv("CITEBOT_ADMIN_TOKEN", value)
    with pytest.raises(ConfigError) as err:
        load_settings()
    assert str(err.value).startswith("bad setting: CITEBOT_ADMIN_TOKEN: ") and says in str(err.value)
    assert TOKEN not in str(err.value) and "short" not in str(err.value)


def test_bad_digest_settings_stop_the_start(monkeypatch):
    monkeypatch.setenv("CITEBOT_GAPS_CHANNEL", "#general")
    with pytest.raises(ConfigError, match="bad setting: CITEBOT_GAPS_CHANNEL: .*not a channel id"):
        load_settings()
    monkeypatch.delenv("CITEBOT_GAPS_CHANNEL")
    monkeypatch.setenv("CITEBOT_ADMIN_URL", "citebot.example.com")
    with pytest.raises(ConfigError, match="bad setting: CITEBOT_ADMIN_URL: .*not a URL"):
        load_settings()


@pytest.mark.parametrize("site", BACKENDS, indirect=True)
def test_the_weekly_digest_is_sent_once_per_week_through_slack(site, standin):
    _server, _asked, h = site
    c = h.components
    c.settings = c.settings.model_copy(update={"gaps_channel": "COWNERS",
                                               "admin_url": "https://citebot.example.com/"})
    today = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    monday = today + timedelta(days=7 - today.weekday())  # the next Monday: this week's turns are in its report
    now = [monday.replace(hour=8)]
    first = digest_for(c, h.bot.client, clock=lambda: now[0])
    replica = digest_for(c, h.bot.client, clock=lambda: now[0])
    assert not first.tick() and standin.messages("COWNERS") == []  # Monday before the hour: not yet
    now[0] = monday.replace(hour=10)
    assert first.tick()
    assert not first.tick()  # once a week
    if c.redis is not None:  # a second replica sees this week's claim in Redis
        assert not replica.tick()
    texts = [m["text"] for m in standin.messages("COWNERS")]
    assert len(texts) == 1, texts
    assert "How long is the sabbatical leave?" in texts[0] and "<https://citebot.example.com/admin|" in texts[0]
    later = datetime(2031, 1, 6, 9, 30, tzinfo=UTC)  # a later Monday: the thread sends that week's
    sent = len(standin.messages("COWNERS"))
    running = digest_for(c, h.bot.client, clock=lambda: later, every_s=0.05).start()
    try:
        deadline = time.monotonic() + 30
        while len(standin.messages("COWNERS")) == sent and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)  # more looks at the clock send nothing more
    finally:
        running.stop()
    assert len(standin.messages("COWNERS")) == sent + 1
    assert "Every question was answered well" in standin.messages("COWNERS")[-1]["text"]

"""`citebot serve`: run a built SlackBot in HTTP mode or Socket Mode until SIGTERM.

On SIGTERM the server stops accepting and answers in progress get DRAIN_TIMEOUT_S to
finish. In Socket Mode a small HTTP server on the probe port answers /healthz and /readyz
for orchestrators (HTTP mode serves them on its own port).
"""

from __future__ import annotations

import signal
import threading

import structlog
from pydantic import SecretStr

from bot.slack.bot import SlackBot
from bot.slack.client import SLACK_ERRORS, slack_error
from bot.slack.server import Middleware, ProbeServer, Readiness, SlackHttpServer
from search.errors import ConfigError

log = structlog.get_logger("citebot.slack")


def run(
    bot: SlackBot,
    *,
    port: int = 3000,
    host: str = "0.0.0.0",
    socket: bool = False,
    app_token: SecretStr | None = None,
    probe_port: int = 0,
    readiness: Readiness | None = None,
    admin: Middleware | None = None,
) -> None:
    """Serve until SIGTERM (or Ctrl-C), then drain the work in progress and stop. `admin`:
    the /admin pages (bot/admin/), on the HTTP port, or the probe port in Socket Mode."""
    warm_up = threading.Thread(target=bot.warm_up, name="citebot-warm-up", daemon=True)
    if socket:
        _run_socket_mode(bot, warm_up, app_token, host, probe_port, readiness, admin)
    else:
        server = SlackHttpServer(
            bot.app,
            signing_secret=bot.config.signing_secret or "",
            host=host,
            port=port,
            readiness=readiness,
            admin=admin,
        )
        warm_up.start()
        stopper = threading.Thread(target=server.stop, name="citebot-stop", daemon=True)

        def stop_once(*_: object) -> None:
            if stopper.ident is None:
                stopper.start()

        signal.signal(signal.SIGTERM, stop_once)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        server.close()
    log.info("slack_draining")
    bot.close()
    log.info("slack_stopped")


def _run_socket_mode(
    bot: SlackBot,
    warm_up: threading.Thread,
    app_token: SecretStr | None,
    host: str,
    probe_port: int,
    readiness: Readiness | None,
    admin: Middleware | None = None,
) -> None:
    from slack_bolt.adapter.socket_mode import SocketModeHandler

    if app_token is None:
        raise ConfigError(
            "Socket Mode needs SLACK_APP_TOKEN: create an app-level token with the "
            "connections:write scope (xapp-…) on the app's Basic Information page"
        )
    handler = SocketModeHandler(bot.app, app_token.get_secret_value())
    try:
        handler.connect()
    except SLACK_ERRORS as exc:
        bot.close(0)
        raise ConfigError(
            f"Slack refused the Socket Mode connection ({slack_error(exc)}); check that "
            "SLACK_APP_TOKEN is an app-level token (xapp-…) with connections:write and that "
            "Socket Mode is enabled for the app"
        ) from exc
    log.info("slack_socket_mode_connected")
    probes = ProbeServer(host=host, port=probe_port, readiness=readiness, admin=admin).start() if probe_port else None
    warm_up.start()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        while not stop.wait(1.0):
            pass
    except KeyboardInterrupt:
        pass
    handler.close()
    if probes is not None:
        probes.shutdown()

"""The /admin middleware and the weekly digest built from citebot's components (bot.wiring
calls these for `citebot serve`)."""

from __future__ import annotations

from typing import Any

from bot.admin.app import admin_pages
from bot.admin.data import Reader
from bot.admin.digest import InProcessClaims, RedisClaims, WeeklyDigest
from bot.owners.gaps import build_report
from bot.settings import admin_tokens


def reader_for(components: Any) -> Reader:
    return Reader(
        turnlog=components.turnlog,
        store=components.reading_store,
        encode=lambda texts: components.embedder.encode_texts(texts),
        scope_of=lambda channel: components.scopes.for_channel(channel).scope,
    )


def admin_for(components: Any) -> Any:
    """Middleware serving /admin (404 there when CITEBOT_ADMIN_TOKEN is unset)."""
    secret = components.settings.admin_token
    tokens = admin_tokens(secret.get_secret_value()) if secret is not None else None
    return admin_pages(tokens, reader_for(components))


def digest_for(components: Any, client: Any, **kwargs: Any) -> WeeklyDigest | None:
    """The weekly digest when CITEBOT_GAPS_CHANNEL is set (posted with `client`), else None."""
    settings = components.settings
    if not settings.gaps_channel:
        return None
    reader = reader_for(components)

    def report(period: Any, now: Any) -> dict[str, Any]:
        store = components.reading_store()
        stamp = store.stamp()
        # Only sources the digest channel's scope may read are named; its questions come
        # from every channel (the channel is the owners' own).
        scope = reader.scope_of(settings.gaps_channel)
        return build_report(
            components.turnlog,
            store,
            reader.encode,
            period=period,
            scope_of=lambda _c: scope,
            dims=stamp.dims if stamp else None,
            now=now,
        )

    claims = RedisClaims(components.redis, components.prefix) if components.redis is not None else InProcessClaims()
    return WeeklyDigest(
        channel=settings.gaps_channel,
        claims=claims,
        admin_url=settings.admin_url,
        post=lambda channel, text: client.chat_postMessage(channel=channel, text=text),
        report=report,
        **kwargs,
    )

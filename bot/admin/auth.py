"""Who may read /admin: a token of CITEBOT_ADMIN_TOKEN, sent as `Authorization: Bearer …`
or as the signed cookie that /admin/login sets.

The cookie holds `v1.<token id>.<expiry>.<signature>`: the token id is the first 16 hex
digits of the token's SHA-256 (which token, never the token), the signature an
HMAC-SHA256 of the rest under a key derived from that token. Nothing is stored on the
server; changing a token ends its cookies. Every comparison is constant-time
(hmac.compare_digest). A token bound to a channel (TOKEN:CHANNEL) gives an Access with
that channel: the pages then show only that channel's turns and the sources its scope
may read (the rule of `citebot gaps --channel`).
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from http.cookies import CookieError, SimpleCookie

COOKIE = "citebot_admin"
# A login lasts a working day: long enough not to ask twice, short enough that a cookie
# left on a shared machine stops working (docs/decisions/0040-admin-page.md).
COOKIE_MAX_AGE_S = 12 * 3600
_KEY_LABEL = b"citebot admin cookie v1"


@dataclass(frozen=True)
class Access:
    """What a request may see: every channel (channel None) or one channel's."""

    channel: str | None


def _token_id(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()[:16]


def _sign(token: str, message: str) -> str:
    key = hmac.new(token.encode(), _KEY_LABEL, hashlib.sha256).digest()
    return hmac.new(key, message.encode(), hashlib.sha256).hexdigest()


class Gate:
    """Checks requests against the configured tokens; `clock` is injectable for tests."""

    def __init__(self, tokens: Sequence[tuple[str, str | None]], clock: Callable[[], float] = time.time) -> None:
        self._tokens = list(tokens)
        self._by_id = {_token_id(t): (t, ch) for t, ch in tokens}
        self._clock = clock

    def by_token(self, presented: str) -> Access | None:
        """The access of a presented token, comparing with every token in constant time."""
        found: Access | None = None
        digest = hashlib.sha256(presented.encode()).digest()  # equal lengths: no length leak
        for token, channel in self._tokens:
            if hmac.compare_digest(hashlib.sha256(token.encode()).digest(), digest):
                found = Access(channel)
        return found

    def cookie_for(self, presented: str) -> str | None:
        """The Set-Cookie value for a valid token, else None."""
        if self.by_token(presented) is None:
            return None
        message = f"v1.{_token_id(presented)}.{int(self._clock()) + COOKIE_MAX_AGE_S}"
        value = f"{message}.{_sign(presented, message)}"
        return f"{COOKIE}={value}; Path=/admin; Max-Age={COOKIE_MAX_AGE_S}; HttpOnly; SameSite=Strict"

    def by_cookie(self, value: str) -> Access | None:
        parts = value.split(".")
        if len(parts) != 4 or parts[0] != "v1" or not parts[2].isdigit():
            return None
        entry = self._by_id.get(parts[1])
        if entry is None:
            return None
        token, channel = entry
        if not hmac.compare_digest(_sign(token, ".".join(parts[:3])), parts[3]):
            return None
        return Access(channel) if int(parts[2]) > self._clock() else None

    def access(self, environ: dict) -> Access | None:
        """The request's access from its bearer token or cookie; None: not allowed."""
        header = str(environ.get("HTTP_AUTHORIZATION") or "")
        if header[:7].lower() == "bearer ":
            return self.by_token(header[7:].strip())
        try:
            jar = SimpleCookie(str(environ.get("HTTP_COOKIE") or ""))
        except CookieError:
            return None
        morsel = jar.get(COOKIE)
        return self.by_cookie(morsel.value) if morsel is not None else None

"""What a setting points at, read and named safely.

`read_setting_file` reads the file a setting names (CITEBOT_SCOPES, CITEBOT_GLOSSARY, .env)
whole, as text: every way that fails (missing, a directory, a device or pipe, unreadable,
not UTF-8) is a ConfigError naming the variable, the file and, for an encoding error, the
byte offset and line. `redact_url` is how any message shows a URL setting: credentials in
it masked, even when the URL is malformed (no scheme, a missing colon, a raw "@" or "/" in
the password), since a malformed URL is exactly the one an error message quotes.
"""

from __future__ import annotations

import re
import stat
from pathlib import Path

from search.errors import ConfigError

MASK = "***"

# Where the credentials of a URL may start: after a scheme and its slashes ("redis://",
# "http:/"); else at the start ("elastic:pw@…" has no scheme, "elastic" is the user).
_AUTHORITY_START = re.compile(r"^(?:[A-Za-z][A-Za-z0-9+.-]*:(?=/))?/*")
# A query or fragment parameter whose name looks like a credential has its value masked.
_PARAM_SPLIT = re.compile(r"([?&;#])")
_SECRET_NAME = re.compile(r"key|token|secret|pass|pwd|auth|sig|cred|session", re.IGNORECASE)


def redact_url(value: str) -> str:
    """The URL with its password (or a lone user part, which may be a token), any
    non-numeric "port" (a password whose host was left out) and credential-like query
    parameters replaced by ***. Everything from the authority's start to the last "@"
    counts as credentials: a malformed URL is masked too much rather than too little."""
    start = _AUTHORITY_START.match(value).end()  # type: ignore[union-attr]  # always matches
    at = value.rfind("@", start)
    if at >= 0:
        user, sep, _ = value[start:at].partition(":")
        head = value[:start] + (user + ":" + MASK if sep else MASK) + "@"
        rest = value[at + 1 :]
    else:  # no credentials but maybe a password as the "port" ("redis//elastic:pw")
        slashes = value.find("//")
        start = slashes + 2 if slashes >= 0 else start
        head, rest = value[:start], value[start:]
    end = len(rest)
    for stop in "/?#":
        found = rest.find(stop)
        if found >= 0:
            end = min(end, found)
    host, tail = rest[:end], rest[end:]
    bracket = host.rfind("]")  # an IPv6 host, [::1]:9200: its colons are not a port's
    colon = host.rfind(":")
    if colon > bracket and not host[colon + 1 :].isdigit() and host[colon + 1 :]:
        host = host[: colon + 1] + MASK
    return head + host + _mask_params(tail)


def _mask_params(tail: str) -> str:
    pieces = _PARAM_SPLIT.split(tail)  # path, "?", "a=1", "&", "token=…", …
    for i in range(2, len(pieces), 2):
        name, eq, _ = pieces[i].partition("=")
        if eq and _SECRET_NAME.search(name):
            pieces[i] = name + "=" + MASK
    return "".join(pieces)


def read_setting_file(path: Path | str, variable: str, what: str, *, encoding: str = "utf-8") -> str:
    """The text of the file `variable` names; a ConfigError saying what to fix otherwise.
    `what` names the expected file in the fix, e.g. "the scopes TOML file"."""
    path = Path(path)
    prefix = f"bad setting: {variable}: "
    fix = f"point {variable} at {what}"
    try:
        mode = path.stat().st_mode
        if stat.S_ISDIR(mode):
            raise ConfigError(f"{prefix}{path} is a directory, not a file; {fix}")
        if not stat.S_ISREG(mode):  # a pipe or device would block or never end
            raise ConfigError(f"{prefix}{path} is not a regular file; {fix}")
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{prefix}cannot read {path}: {exc.strerror or exc}; {fix}") from None
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ConfigError(
            f"{prefix}{path} is not UTF-8 text: byte {exc.start} (line {line}, "
            f"0x{data[exc.start]:02x}) cannot be decoded; save the file as UTF-8"
        ) from None


def scrub(text: str, url: str) -> str:
    """A client library's message about `url` with the URL, and its credentials wherever
    they appear alone, masked as redact_url masks them."""
    start = _AUTHORITY_START.match(url).end()  # type: ignore[union-attr]  # always matches
    at = url.rfind("@", start)
    user, colon, password = url[start:at].partition(":") if at >= 0 else ("", "", "")
    secret = password if colon else user
    text = text.replace(url, redact_url(url))
    return text.replace(secret, MASK) if secret else text

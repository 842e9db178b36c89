"""Where a person can open a source: a document's own URL, the CITEBOT_SOURCE_URL template,
and the anchor of a chunk's heading.

A document may name its address (`url:` front matter in Markdown, `<link rel="canonical">`
in HTML); ingest checks it once (`document_url`) and stores it with every chunk, beside the
anchor of the chunk's heading where the HTML has ids. Whoever shows a source asks `link_for`:
the document's own URL wins over the template, and a known anchor is appended to either.
Only http(s) addresses are ever links; anything else is refused with a reason, never shown.
"""

from __future__ import annotations

import re
from urllib.parse import quote, urljoin, urlsplit, urlunsplit

# Longest address kept. A source line (link and label) must fit one Slack section of
# 3,000 characters (bot/slack/render.py) so that sources split between lines, never inside
# a link; 2,000 leaves a line room for its label. Browsers and the sitemap protocol
# (2,048) draw the line at about the same length.
URL_MAX_CHARS = 2000
# Longest anchor kept (an id is a name, not a text); longer ones are dropped with the rest.
ANCHOR_MAX_CHARS = 200

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# What may stand unencoded in an address (RFC 3986 reserved and unreserved characters, and
# "%" of the escapes already there); everything else, | < > " space among them, is
# percent-encoded, so an address can never close or split a Slack link.
_SAFE = "!#$%&'()*+,/:;=?@[]~-._"
_FRAGMENT_SAFE = "!$&'()*+,/:;=?@~-._"


class BadURL(ValueError):
    """A document's address that cannot be a link; the message says why and what to write."""


def normalise(url: str) -> str:
    """The address with every character outside URL syntax percent-encoded (a non-ASCII host
    in its IDNA form); BadURL when it is not an absolute http(s) address of a host."""
    if _CONTROL.search(url):
        raise BadURL(f"the address {_shown(url)} holds a control character (a line break?)")
    m = _SCHEME.match(url)
    if not m or m.group(1).lower() not in ("http", "https"):
        raise BadURL(f"the address {_shown(url)} is not an http(s) address")
    parts = urlsplit(url)
    if not parts.hostname:
        raise BadURL(f"the address {_shown(url)} names no host")
    netloc = parts.netloc
    if not netloc.isascii():
        try:
            host = parts.hostname.encode("idna").decode("ascii")
        except UnicodeError as exc:
            raise BadURL(f"the address {_shown(url)} has a host name that cannot be encoded") from exc
        netloc = netloc.replace(parts.hostname, host) if parts.hostname in netloc else host
    out = urlunsplit(
        (
            parts.scheme.lower(),
            netloc,
            quote(parts.path, safe=_SAFE),
            quote(parts.query, safe=_SAFE),
            quote(parts.fragment, safe=_SAFE),
        )
    )
    if len(out) > URL_MAX_CHARS:
        raise BadURL(f"the address {_shown(url)} is {len(out)} characters long, over {URL_MAX_CHARS}")
    return out


def template_url(template: str, source: str) -> str:
    """CITEBOT_SOURCE_URL ("https://wiki.example.com/{path}") for one source, the path
    percent-encoded."""
    return template.replace("{path}", quote(source.lstrip("/"), safe="/"))


def document_url(raw: str | None, source: str, template: str | None) -> str | None:
    """A document's own address as ingest stores it, or None when it names none. A relative
    address is resolved against the source's CITEBOT_SOURCE_URL address; BadURL otherwise."""
    if raw is None or not raw.strip():
        return None
    raw = raw.strip()
    if not _SCHEME.match(raw):
        if template is None:
            raise BadURL(
                f"the address {_shown(raw)} is relative and CITEBOT_SOURCE_URL is "
                "unset, so there is nothing to resolve it against; write an "
                "absolute https:// address"
            )
        raw = urljoin(template_url(template, source), raw)
    return normalise(raw)


def clean_anchor(anchor: str | None) -> str | None:
    """An element id usable as a URL fragment, or None."""
    if anchor is None:
        return None
    anchor = anchor.strip()
    if not anchor or len(anchor) > ANCHOR_MAX_CHARS or _CONTROL.search(anchor):
        return None
    return anchor


def link_for(source: str, url: str | None, anchor: str | None, template: str | None) -> str | None:
    """Where to open a chunk: its document's own URL, else the template's address of its
    source, with the heading's anchor when known; None when neither is there (or the result
    is not a usable address)."""
    if url:
        base = url
    elif template:
        base = template_url(template, source)
    else:
        return None
    anchor = clean_anchor(anchor)
    if anchor:
        base = base.split("#", 1)[0] + "#" + quote(anchor, safe=_FRAGMENT_SAFE)
    try:
        return normalise(base)
    except BadURL:
        return None


def _shown(url: str) -> str:
    """An address quoted in a reason: its start only (a refused one may be very long)."""
    return repr(url if len(url) <= 80 else url[:77] + "...")

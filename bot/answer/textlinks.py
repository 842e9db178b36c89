"""Links written in answer text, shown as text with their address visible.

The links in an answer come from citebot's own source records only (the sources list, built
from each chunk's address or CITEBOT_SOURCE_URL). A link the model wrote, or one quoted from
a document, could hide where it goes behind friendly words ("[the official wiki](https://
evil.example.com/sso)"), and a quotation checked against its source would vouch for it. So
every link form is turned into its words and its address, in the open:

- Markdown inline links and images, `[words](address "title")` -> `words (address)`;
- reference definitions, `[label]: address` at a line's start -> `label: address` (without
  a definition, `[words][label]` and `[label]`, citation markers included, stay plain text);
- Slack's `<address|words>` -> `words (address)`, and autolinks `<address>` -> `address`;
- invisible format characters (zero-width, bidirectional controls) inside a bare address,
  which could make the address Slack links differ from the one a person reads, are removed.

What no pattern above took whole is still broken where a link would hinge: `](` becomes
`] (` and a `]:` that closes no `[` on its line becomes `] :`, so that text cut into pieces
(a streamed answer, one checked sentence at a time: bot.slack.stream) never joins into a
link. A bare address is left as it is: Slack shows it as the link it is. The Slack adapter
escapes &, < and > after this (bot.slack.mrkdwn.escape).

The checks compare quotations with their sources through the same function on both sides
(bot.answer.checks.quote_in), so a quotation that holds such a link is still found.
"""

from __future__ import annotations

import re
import unicodedata

# Link text: any characters but brackets, or one level of balanced brackets inside.
_TEXT = r"(?:[^\[\]\\]|\\.|\[[^\[\]\\]*\])*"
# A destination: <anything but <>newline>, or non-space without unbalanced parentheses
# (one level of balanced ones, as in Wikipedia addresses), and an optional title.
_DEST = r"<[^<>\n]*>|[^\s()<>]*(?:\([^\s()<>]*\)[^\s()<>]*)*"
_TITLE = r"\"[^\"]*\"|'[^']*'|\([^()]*\)"
_INLINE = re.compile(rf"!?\[({_TEXT})\]\(\s*({_DEST})(?:\s+(?:{_TITLE}))?\s*\)", re.DOTALL)
_DEFINITION = re.compile(r"^( {0,3})\[([^\[\]]+)\]:", re.MULTILINE)
_ANGLE = re.compile(r"<([a-zA-Z][a-zA-Z0-9+.\-]{1,31}:[^<>|\s]*|[^<>|\s@]+@[^<>|\s@]+)(?:\|([^<>]*))?>")
_HINGE = re.compile(r"\]\(")
_LOOSE_CLOSE = re.compile(r"^([^\[\]\n]*)\]:", re.MULTILINE)
_BARE = re.compile(r"(?:https?|ftp)://[^\s<>]+|www\.[^\s<>]+", re.IGNORECASE)


def _invisible(ch: str) -> bool:
    return unicodedata.category(ch) == "Cf"


def _address(url: str) -> str:
    return "".join(ch for ch in url.strip() if not _invisible(ch))


def _words_and_address(words: str, address: str) -> str:
    words = words.strip()
    address = _address(address.removeprefix("<").removesuffix(">"))
    if not address:
        return words
    if not words or words == address:
        return address
    return f"{words} ({address})"


def _inline(m: re.Match[str]) -> str:
    return _words_and_address(m.group(1), m.group(2))


def _angle(m: re.Match[str]) -> str:
    return _words_and_address(m.group(2) or "", m.group(1))


def _bare(m: re.Match[str]) -> str:
    return _address(m.group(0))


def visible_links(text: str) -> str:
    """The text with every link it writes shown as words and address (module docstring)."""
    if not any(c in text for c in "[]<") and "://" not in text and "www." not in text.lower():
        return text  # the common case: nothing that could be a link
    for _ in range(3):  # a link inside a link's words comes out on the next pass
        done = _INLINE.sub(_inline, text)
        if done == text:
            break
        text = done
    text = _ANGLE.sub(_angle, text)
    text = _DEFINITION.sub(lambda m: f"{m.group(1)}{m.group(2)}:", text)
    text = _BARE.sub(_bare, text)  # before the hinges: taking a character out could join one
    text = _HINGE.sub("] (", text)
    return _LOOSE_CLOSE.sub(lambda m: f"{m.group(1)}] :", text)


def visible_piece(sent: str, piece: str) -> str:
    """The next piece of a text sent in pieces, its links shown; `sent` is what was sent
    before it (its last character matters): a piece never starts with the `(` or `:` that
    would make a `]` sent last a link's hinge."""
    text = visible_links(piece)
    if sent.endswith("]") and text.startswith(("(", ":")):
        return " " + text
    return text

"""Slack's mrkdwn: escaping, links, and the source lines of answers built from them.

Slack reads `<…>` as a link, mention or command and `&…;` as an entity, so text from a
document or a person has its &, < and > escaped (api.slack.com/reference/surfaces/formatting).
A link is `<address|label>`: the label is escaped text without "|"; the address may hold no
"|", "<", ">" or space (those are percent-encoded, search/links.py) and has its & escaped,
which Slack undoes. Only http(s) addresses become links; anything else is shown as text.
"""

from __future__ import annotations

from search.links import BadURL, link_for, normalise

# A source line must fit one section of Slack text (3,000 characters) with room for the
# "*Sources*" title, so that sources are packed into sections by whole lines and a link is
# never cut in two: labels are cut at LABEL_MAX characters (at most 5 times longer once
# escaped), and a link longer than LINE_MAX is shown as its label alone.
LABEL_MAX = 300
LINE_MAX = 2900


def escape(text: str) -> str:
    """Slack's three control characters, as its docs ask: & first, then < and >."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def unescape(text: str) -> str:
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def link_target(url: str | None) -> str | None:
    """The address as it stands inside `<…|…>`, or None when it must not be a link."""
    if not url:
        return None
    try:
        return escape(normalise(url))
    except BadURL:
        return None


def link(url: str | None, label: str) -> str:
    """`<url|label>` with the label (plain text) escaped; the escaped label alone when the
    address cannot be a link or the link would be longer than LINE_MAX."""
    if len(label) > LABEL_MAX:
        label = label[: LABEL_MAX - 1].rstrip() + "…"
    text = escape(label)
    target = link_target(url)
    if target is None or len(target) + len(text) + 3 > LINE_MAX:
        return text
    return f"<{target}|{text.replace('|', '¦')}>"


def source_label(source: str, heading_path: list[str], page: str | None) -> str:
    """`handbook/x.md — Section › Subsection, p. iv`, as plain text."""
    label = source
    heading = " › ".join(heading_path)
    if heading:
        label += " — " + heading
    if page:
        label += f", p. {page}"
    return label


def source_line(
    number: int | None, source: str, heading_path: list[str], page: str | None, url: str | None = None
) -> str:
    """`*[1]* handbook/x.md — Section › Subsection, p. iv`, escaped; with a usable address a
    Slack link, `<url|[1] handbook/x.md — Section › Subsection>` (a label holds no formatting)."""
    label = source_label(source, heading_path, page)
    marker = f"[{number}] " if number is not None else ""
    line = link(url, marker + label)
    if line.startswith("<"):  # a link: an escaped label never starts with "<"
        return line
    return (f"*[{number}]* " if number is not None else "") + link(None, label)


def pack_lines(title: str, lines: list[str], limit: int) -> list[str]:
    """The title and lines as texts of at most `limit` characters, cut between lines only
    (a source line is at most LINE_MAX long)."""
    texts: list[str] = []
    current = title
    for line in lines:
        if len(current) + 1 + len(line) > limit:
            texts.append(current)
            current = line
        else:
            current += "\n" + line
    texts.append(current)
    return texts


def passage_line(passage: dict, url_template: str | None = None) -> str:
    """A passage entry of a turn record, as a source line. Its recorded `url` is the link
    (None: no link); a record written before links were recorded links by the template."""
    source = str(passage.get("source", ""))
    if "url" in passage:
        url = passage.get("url")
    else:
        url = link_for(source, None, None, url_template)
    return source_line(passage.get("number"), source, list(passage.get("heading_path") or []), passage.get("page"), url)

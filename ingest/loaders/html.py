"""HTML pages into sections: the text as displayed (entities decoded, white space collapsed as
a browser does), headings as the heading path with their anchors, page furniture left out
(ingest/furniture.py), and only the main landmark when a page has one.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urljoin

from ingest import furniture
from ingest.document import LoadedDocument
from ingest.limits import DEFAULT_LIMITS, Limits, over
from ingest.loaders.common import Outline


class _HTMLOutline(HTMLParser):
    """Headings and paragraphs of an HTML page, page furniture left out (ingest/furniture.py)."""

    BLOCKS = frozenset(
        {
            "p",
            "li",
            "pre",
            "blockquote",
            "dd",
            "dt",
            "tr",
            "figcaption",
            "caption",
            "div",
            "section",
            "article",
            "td",
            "th",
            "br",
            "table",
            "ul",
            "ol",
            "dl",
            "hr",
            "nav",
            "header",
            "footer",
            "aside",
            "main",
            "form",
        }
    )
    SKIP = frozenset({"script", "style", "noscript", "template", "head"})
    VOID = frozenset(
        {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param", "source", "track", "wbr"}
    )
    # An open element of these is closed by the next one of the same kind.
    SELF_CLOSING = frozenset({"li", "dt", "dd", "tr", "td", "th", "p", "option"})
    NEVER_FURNITURE = frozenset({"html", "body", "main", "article"})
    # Real pages nest at most 63 elements deep (sqlite's changelog); an unbounded scan let
    # "<ul><li><div>" + "<span>" * 990 + "<li>x</li>" * 100_000 (1 MB) take 23.7 s.
    SCOPE_SCAN = 128

    def __init__(
        self,
        main_only: bool = False,
        max_depth: int = DEFAULT_LIMITS.max_depth,
        extra_names: frozenset[str] = frozenset(),
    ) -> None:
        super().__init__(convert_charrefs=True)
        # Furniture names of one generator only (a Confluence export's), besides the common ones.
        self.furniture_names = furniture.FURNITURE_NAMES | extra_names
        self.outline = Outline()
        self.max_depth = max_depth
        # How many of each tag are open: an end tag with none open is dropped at once (a
        # scan of the stack for each stray end tag made "<div>"*10000 + "</span>"*10000
        # quadratic: 2.6 s, and minutes at 100,000).
        self.open_tags: dict[str, int] = {}
        # The paragraph being read, as (text, kind) segments: kind is "text", "link"
        # (a link to another page), "anchor" (a link within the page) or "nav".
        self.buf: list[list[str]] = []
        self.heading_level: int | None = None
        self.heading_buf: list[list[str]] = []
        self.title: list[str] = []
        self.in_title = False
        self.cells: list[str] | None = None
        self.main_only = main_only  # the page has a main landmark: text outside it is furniture
        # Open elements: (tag, muted, content, main, opened while silent or muted).
        self.stack: list[tuple[str, bool, bool, bool, bool]] = []
        self.muted = 0
        self.content = 0
        self.main = 0
        self.links: list[tuple[list[list[str]], int, dict[str, str | None]]] = []
        # The outermost open list: [section count and paragraph count at its start, whether
        # every item only links within the page, items read]; nested lists add [].
        self.lists: list[list] = []
        # The stack depth of a level 1-2 heading read inside furniture (see handle_starttag).
        self.furniture_heading: int | None = None
        # Addresses: <link rel="canonical"> and <base> hrefs; ids that may name the next
        # heading, each with the paragraph count when it was seen (see _open_heading); and
        # the open heading's own id, <a id|name> and <a href="#…"> (a permalink) inside it.
        self.canonical: str | None = None
        self.base: str | None = None
        self.ids: list[tuple[str, int]] = []
        self.heading_ids: dict[str, str] = {}

    # -- element stack -------------------------------------------------------------
    def _is_furniture(self, tag: str, attrs: dict[str, str | None]) -> bool:
        if tag in self.NEVER_FURNITURE:
            return False
        role = (attrs.get("role") or "").lower()
        names = furniture.names_of(attrs)
        page_level = self.content == 0
        if tag in furniture.FURNITURE_TAGS or role in furniture.FURNITURE_ROLES:
            return True
        if names & self.furniture_names or {"contents", "topic"} <= names:
            return True
        if page_level and (tag in furniture.PAGE_LEVEL_TAGS or names & furniture.PAGE_LEVEL_NAMES):
            return True
        return tag == "a" and furniture.MARKER_TITLE.match(attrs.get("title") or "") is not None

    def _push(self, tag: str, attrs: dict[str, str | None]) -> None:
        mute = tag in self.SKIP or self._is_furniture(tag, attrs)
        role = (attrs.get("role") or "").lower()
        content = tag in furniture.CONTENT_TAGS or role in furniture.CONTENT_ROLES
        main = tag == "main" or role == "main"
        if len(self.stack) >= self.max_depth:
            raise _TooDeep(len(self.stack) + 1)
        self.stack.append((tag, mute, content, main, mute or self._silent))
        self.open_tags[tag] = self.open_tags.get(tag, 0) + 1
        self.muted += mute
        self.content += content
        self.main += main

    def _pop_to(self, tag: str) -> bool:
        if not self.open_tags.get(tag):
            return False
        for i in range(len(self.stack) - 1, -1, -1):
            if self.stack[i][0] == tag:
                while len(self.stack) > i:
                    t, mute, content, main, silent = self.stack.pop()
                    self.open_tags[t] -= 1
                    self.muted -= mute
                    self.content -= content
                    self.main -= main
                    if self.furniture_heading == len(self.stack):
                        self.furniture_heading = None
                        self._closed(t)
                    elif not silent:
                        self._closed(t)
                return True
        return False

    @property
    def _silent(self) -> bool:
        return bool(self.muted) or (self.main_only and not self.main)

    # -- parser callbacks ----------------------------------------------------------
    def handle_starttag(self, tag: str, attr_list: list) -> None:
        attrs = {k.lower(): v for k, v in attr_list}
        self._addresses(tag, attrs)
        if tag == "title":
            self.in_title = True
        if tag == "body":
            self._pop_to("head")  # an unclosed <head> ends where the body starts
        if tag in self.SELF_CLOSING and self.open_tags.get(tag):
            # <li> closes an open <li> of the same list, <p> an open <p>, and so on; looked
            # for among the nearest SCOPE_SCAN open elements only.
            for t, *_ in reversed(self.stack[-self.SCOPE_SCAN :]):
                if t == tag:
                    self._pop_to(tag)
                    break
                if t in ("ul", "ol", "dl", "table", "div", "section", "body"):
                    break
        was_silent = self._silent
        if tag in self.VOID:
            if not was_silent and tag in self.BLOCKS:
                self._flush()
            return
        self._push(tag, attrs)
        if self._silent:
            if not was_silent and tag in self.BLOCKS:
                self._flush()  # furniture starts here: what was read before is a paragraph
            if (
                tag in ("h1", "h2")
                and self.muted
                and self.furniture_heading is None
                and (not self.main_only or self.main)
            ):
                # Still a heading: sqlite.org wraps its page titles (h2) in its furniture
                # marker, while sidebars title their boxes at level 3 and below (Sphinx).
                self._flush()
                self.furniture_heading = len(self.stack) - 1
                self._open_heading(tag, attrs)
            return
        ident = attrs.get("id") or (attrs.get("name") if tag == "a" else None)
        if ident and self.heading_level is None and not re.fullmatch(r"h[1-6]", tag):
            self.ids.append((ident, self.outline.paragraph_count))
        if tag == "a":
            target = self.heading_buf if self.heading_level is not None else self.buf
            self.links.append((target, len(target), attrs))
        elif re.fullmatch(r"h[1-6]", tag):
            self._flush()
            self._open_heading(tag, attrs)
        elif tag == "tr":
            self._flush()
            self.cells = []
        elif tag in ("td", "th") and self.cells is not None:
            self.buf.clear()
        elif tag in ("ul", "ol"):
            self._flush()
            if not self.lists:
                self.lists.append([len(self.outline.sections), len(self.outline.sections[-1].paragraphs), True, 0])
            else:
                self.lists.append([])  # nested: judged with the outermost list
        elif tag in self.BLOCKS:
            self._flush()

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self.in_title = False
        if tag in self.VOID:
            return
        if re.fullmatch(r"h[1-6]", tag):
            # Any heading end tag closes the open heading, as browsers do ("<h2>…</h1>").
            for t, *_ in reversed(self.stack):
                if re.fullmatch(r"h[1-6]", t):
                    tag = t
                    break
        self._pop_to(tag)

    def _closed(self, tag: str) -> None:
        """An element opened outside furniture ended (explicitly or implied by its parent's end)."""
        if tag == "a" and self.links:
            target, start, attrs = self.links.pop()
            text = "".join(t for t, _ in target[start:])
            if furniture.is_marker_link(text, attrs):
                del target[start:]
            else:
                href = attrs.get("href") or ""
                kind = "nav" if furniture.is_nav_link(text, attrs) else "anchor" if href.startswith("#") else "link"
                for seg in target[start:]:
                    seg[1] = kind
        elif re.fullmatch(r"h[1-6]", tag) and self.heading_level is not None:
            found = self.heading_ids
            anchor = found.get("own") or found.get("inner") or found.get("outer") or found.get("permalink")
            self.outline.heading(self.heading_level, "".join(t for t, _ in self.heading_buf), anchor)
            self.heading_level = None
            if self.lists:
                self.lists[0][2] = False  # a list holding headings is not a table of contents
        elif tag in ("td", "th") and self.cells is not None:
            self.cells.append(" ".join("".join(t for t, _ in self.buf).split()))
            self.buf.clear()
        elif tag == "tr" and self.cells is not None:
            row = " | ".join(c for c in self.cells if c)
            self.cells = None
            if row:
                self.outline.paragraph(row)
        elif tag in ("ul", "ol") and self.lists:
            self._flush()
            outer = self.lists.pop()
            if not self.lists and outer[2] and outer[3] and outer[0] == len(self.outline.sections):
                # Every item only links within the page: a table of contents.
                del self.outline.sections[-1].paragraphs[outer[1] :]
        elif tag in self.BLOCKS:
            self._flush()

    # -- addresses -----------------------------------------------------------------
    def _addresses(self, tag: str, attrs: dict[str, str | None]) -> None:
        """The page's canonical address and <base>; ids and permalinks inside a heading."""
        href = (attrs.get("href") or "").strip()
        if tag == "link" and "canonical" in (attrs.get("rel") or "").lower().split() and href:
            self.canonical = self.canonical or href
        elif tag == "base" and href:
            self.base = self.base or href
        elif tag == "a" and self.heading_level is not None:
            ident = attrs.get("id") or attrs.get("name")
            if ident:
                self.heading_ids.setdefault("inner", ident)
            if href.startswith("#") and len(href) > 1:
                self.heading_ids.setdefault("permalink", href[1:])

    def _open_heading(self, tag: str, attrs: dict[str, str | None]) -> None:
        """A heading starts. Its anchor: its own id; else an <a id|name> inside it (DocBook);
        else the nearest id opened since the last paragraph (Sphinx's <section id>, an empty
        <a name> before it); else a permalink inside it (<a href="#…">, mdBook, Sphinx ¶)."""
        self.heading_level = int(tag[1])
        self.heading_buf = []
        recent = [i for i, count in self.ids if count == self.outline.paragraph_count]
        self.heading_ids = {k: v for k, v in (("own", attrs.get("id")), ("outer", recent[-1] if recent else None)) if v}
        self.ids.clear()

    def address(self) -> str | None:
        """The canonical address as written, resolved against <base> when that is absolute."""
        if self.canonical and self.base and "://" in self.base:
            return urljoin(self.base, self.canonical)
        return self.canonical

    def handle_data(self, data: str) -> None:
        if self.in_title:
            self.title.append(data)
        if self._silent and self.furniture_heading is None:
            return
        if self.heading_level is not None:
            self.heading_buf.append([data, "text"])
        else:
            self.buf.append([data, "text"])

    def close(self) -> None:
        # What feed() left unparsed starts with a construct that never ends ("<a " with no
        # ">", "<!--" with no "-->"). Python 3.11's close() re-scans it to the end from every
        # "<" after it, quadratic ("x" + "<a " * 13,000 took 18 s); a browser reads it as an
        # unclosed tag or comment running to the end of the file (HTML5: EOF in tag), no text.
        if self.rawdata.startswith("<") and len(self.rawdata) > 1:
            self.rawdata = ""
        super().close()
        self._pop_to("html")
        while self.stack:
            self._pop_to(self.stack[-1][0])
        self._flush()

    # -- paragraphs ----------------------------------------------------------------
    def _flush(self) -> None:
        segments = [(t, k) for t, k in self.buf]
        self.buf.clear()
        text = " ".join("".join(t for t, _ in segments).split())
        if not text:
            return
        if self.lists:
            outer = self.lists[0]
            outer[3] += 1
            other = "".join(t for t, k in segments if k != "anchor")
            if not re.fullmatch(r"[\s\d.§:;,()]*", other):
                outer[2] = False
        if self._furniture_paragraph(segments, text):
            return
        self.outline.paragraph(text)

    @staticmethod
    def _furniture_paragraph(segments: list[tuple[str, str]], text: str) -> bool:
        """A paragraph that is only a navigation bar, a breadcrumb trail or a build stamp."""
        if furniture.is_page_stamp(text):
            return True
        links = [k for _, k in segments if k != "text"]
        if not links:
            return False
        between = "".join(t for t, k in segments if k == "text")
        if "nav" in links and furniture.SEPARATORS.match(between):
            return True
        # A breadcrumb trail: links joined by » › > → /, perhaps ending in the page's own
        # name as plain text ("Home › Guide › Page"). Runs of link segments count once.
        runs = sum(1 for i, (_, k) in enumerate(segments) if k != "text" and (i == 0 or segments[i - 1][1] == "text"))
        tail = segments[-1][0] if segments[-1][1] == "text" else ""
        lead = tail[: len(tail) - len(tail.lstrip(" \t\n»›>→/"))]
        if furniture.BREADCRUMB_SEPARATOR.search(lead) and len(tail.split()) <= 8:
            between = between[: len(between) - len(tail)] + lead
        return (
            runs >= 2
            and bool(furniture.SEPARATORS.match(between))
            and bool(furniture.BREADCRUMB_SEPARATOR.search(between))
        )


_MAIN_LANDMARK = re.compile(r"<main[\s>]|\brole\s*=\s*[\"']?main\b", re.IGNORECASE)


class _TooDeep(Exception):
    def __init__(self, depth: int) -> None:
        self.depth = depth


def _parse_html(
    text: str, source: str, main_only: bool, limits: Limits, extra_names: frozenset[str] = frozenset()
) -> _HTMLOutline:
    parser = _HTMLOutline(main_only=main_only, max_depth=limits.max_depth, extra_names=extra_names)
    try:
        parser.feed(text)
        parser.close()
    except _TooDeep as exc:
        raise over(
            f"{source}: HTML nested", f"{exc.depth:,} elements deep", limits.max_depth, "CITEBOT_INGEST_MAX_DEPTH"
        ) from None
    return parser


def load_html(
    text: str, source: str, limits: Limits = DEFAULT_LIMITS, extra_names: frozenset[str] = frozenset()
) -> LoadedDocument:
    """An HTML page as sections; with a main landmark, only what is inside it. `extra_names`:
    class and id names that are furniture in this page's generator only."""
    parser = _parse_html(text, source, bool(_MAIN_LANDMARK.search(text)), limits, extra_names)
    if parser.main_only and not parser.outline.result():  # an empty main: read the whole page
        parser = _parse_html(text, source, False, limits, extra_names)
    title = " ".join("".join(parser.title).split()) or parser.outline.first_heading()
    return LoadedDocument(source, title or Path(source).stem, "html", parser.outline.result(), url=parser.address())

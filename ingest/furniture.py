"""Page furniture: what a site generator puts on every page around the text.

Navigation bars, breadcrumbs, site headers and footers, sidebars, tables of contents,
skip links, previous/next links, permalink (¶) and edit markers never become chunk
text. Two kinds of evidence, neither tuned to one collection:

- structure, read while an HTML page is parsed (ingest/loaders/html.py): landmark elements
  and ARIA roles, and the class and id names the common generators give their
  furniture (the names below, each with the generator that uses it);
- repetition across one ingested folder: a paragraph that stands verbatim on most pages
  of the folder, or of one of its subfolders, is furniture (`repeated_blocks`).

What is removed is whole paragraphs and whole inline marker links; what remains is
the page's text exactly as the loader extracts it, so chunk text stays verbatim.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from pathlib import PurePosixPath

# ARIA landmark roles that are never the page's own text.
FURNITURE_ROLES = frozenset(
    {"navigation", "banner", "contentinfo", "complementary", "search", "menubar", "menu", "toolbar"}
)
# Elements that are furniture wherever they stand (form controls are not text either).
FURNITURE_TAGS = frozenset({"nav", "select", "button", "textarea"})
# Landmarks that are furniture only at page level: inside an article, main or section
# they introduce or close that part (docutils puts footnotes and sidebars in <aside>).
PAGE_LEVEL_TAGS = frozenset({"header", "footer", "aside"})
# Elements whose descendants are the page's own content: below them a PAGE_LEVEL name
# is part of the text.
CONTENT_TAGS = frozenset({"article", "main", "section"})
CONTENT_ROLES = frozenset({"main", "article"})

# Class and id names of furniture, compared as whole tokens, case-insensitively.
FURNITURE_NAMES = frozenset(
    {
        # generic, hand-written sites and most themes
        "nav",
        "navbar",
        "navigation",
        "topnav",
        "top-nav",
        "bottomnav",
        "bottom-nav",
        "subnav",
        "sub-nav",
        "sidenav",
        "side-nav",
        "nav-list",
        "navlist",
        "sub-nav-list",
        "subnavlist",
        "breadcrumb",
        "breadcrumbs",
        "skip",
        "skip-link",
        "skiplink",
        "skip-links",
        "skip-nav",
        "skipnav",
        "skip-to-content",
        "skiptocontent",
        "pagination",
        "pager",
        "prev-next",
        "prevnext",
        "page-nav",
        "footer-nav",
        "menu",
        "mainmenu",
        "submenu",
        "menubar",
        "toc",
        "table-of-contents",
        "tableofcontents",
        "page-toc",
        "local-toc",
        "localtoc",
        "toctitle",
        "searchbox",
        "search-box",
        "searchform",
        "search-form",
        "searchmenu",
        "edit-link",
        "editlink",
        "edit-this-page",
        "edit-page",
        "back-to-top",
        "backtotop",
        "to-top",
        "headerlink",
        "permalink",
        "anchor-link",
        "anchorjs-link",
        "hash-link",
        "header-anchor",
        # Sphinx (basic, alabaster, sphinx13, Read the Docs, pydata, furo themes)
        "related",
        "sphinxsidebar",
        "sphinxsidebarwrapper",
        "toctree-wrapper",
        "viewcode-link",
        "viewcode-back",
        "rst-footer-buttons",
        "rst-versions",
        "wy-nav-side",
        "wy-nav-top",
        "wy-breadcrumbs",
        "wy-side-nav-search",
        "bd-header",
        "bd-sidebar",
        "bd-sidebar-primary",
        "bd-sidebar-secondary",
        "bd-footer",
        "prev-next-area",
        "prev-next-footer",
        "sidebar-drawer",
        "toc-drawer",
        "related-pages",
        "mobile-header",
        "view-this-page",
        # DocBook XSL and Publican
        "navheader",
        "navfooter",
        "docnav",
        "list-of-tables",
        "list-of-figures",
        "list-of-examples",
        "list-of-procedures",
        "list-of-equations",
        # mdBook
        "menu-bar",
        "nav-wrapper",
        "nav-wide-wrapper",
        "nav-chapters",
        "mobile-nav-chapters",
        "sidebar-scrollbox",
        "left-buttons",
        "right-buttons",
        # rustdoc: the "since 1.4.0 · source" stamp beside every item of an API page (its
        # text became 7-character chunks, 476 of a 10,060-chunk rust-doc selection), the sticker
        # above the old book's pages (59 chunks of "Rust 1.63.0" alone) and the top-right bar
        "rightside",
        "out-of-band",
        "since",
        "srclink",
        "versioninfo",
        # and the label of a toggle that is open ("Expand description", in 124 chunks)
        "hideme",
        # Javadoc (current and pre-JDK 9 names)
        "skip-navbar-top",
        "navbar-top",
        "navbar-bottom",
        "nav-list-search",
        "legal-copy",
        "legalcopy",
        "navbarcell1",
        "navbarcell1rev",
        "fixednav",
        # sqlite.org: the author marks what the site's own search leaves out
        "nosearch",
        "tagline",
        "fancy_toc",
        # MkDocs Material, Docusaurus, Docsy, Doxygen, MediaWiki
        "md-header",
        "md-sidebar",
        "md-footer",
        "md-tabs",
        "md-nav",
        "md-source",
        "pagination-nav",
        "theme-doc-sidebar-container",
        "theme-doc-breadcrumbs",
        "theme-edit-this-page",
        "theme-doc-toc-desktop",
        "theme-doc-toc-mobile",
        "td-sidebar",
        "td-sidebar-toc",
        "td-page-meta",
        "navpath",
        "navrow",
        "mw-editsection",
        "mw-jump-link",
        "mw-navigation",
        "mw-panel",
        "printfooter",
        "catlinks",
    }
)
# Names that are furniture only at page level (see PAGE_LEVEL_TAGS): AsciiDoc's
# id="footer" and Sphinx's "footer" close the page, but an article may have its own.
# Not "sidebar": DocBook and Publican render a <sidebar> (tips, cautions, "going further"
# boxes) as <div class="sidebar"> in the page's flow, outside any article element, and
# it is the book's text; a site's navigation sidebar repeats on every page, which the
# repetition rule catches, or carries role="complementary".
PAGE_LEVEL_NAMES = frozenset({"footer", "pageheader", "site-header", "site-footer", "page-footer", "masthead"})

# Link texts that are navigation, after arrows and brackets are stripped.
NAV_WORDS = frozenset(
    {
        "prev",
        "previous",
        "next",
        "up",
        "home",
        "top",
        "back",
        "contents",
        "table of contents",
        "index",
        "start",
        "first",
        "last",
        "previous page",
        "next page",
        "previous topic",
        "next topic",
        "previous chapter",
        "next chapter",
        "back to top",
        "go to top",
        "toc",
    }
)
NAV_RELS = frozenset(
    {"prev", "previous", "next", "up", "home", "contents", "index", "start", "first", "last", "top", "toc"}
)
# accesskey values DocBook and Publican give their Prev/Up/Home/Next links.
NAV_ACCESSKEYS = frozenset({"p", "n", "u", "h"})
# An inline link that is a marker, not text: permalink glyphs, edit and source links.
MARKER_LINK = re.compile(
    r"^(?:[¶#§🔗⚓]+|\[?(?:edit|edit source|source|docs|permalink)\]?|edit (?:this page|on \w+)"
    r"|view (?:page )?source|show source|improve this page|suggest an edit"
    r"|read more(?:\.\.\.|…)?)$",  # rustdoc's after every summary (4,250 rust-doc chunks)
    re.IGNORECASE,
)
MARKER_TITLE = re.compile(r"^(?:permalink|permanent link|link to this|direct link)", re.IGNORECASE)
SKIP_LINK = re.compile(r"^(?:skip|jump) to\b", re.IGNORECASE)
_ARROWS = "«»‹›<>←→↑↓⇐⇒◀▶◄►⏮⏭|[]()·•:–—-"
# Text between the links of a navigation bar or breadcrumb trail: only separators.
SEPARATORS = re.compile(r"^[\s|/»«›‹><→←↑·•:,.–—\-\[\]()]*$")
BREADCRUMB_SEPARATOR = re.compile(r"[»›>→/]")
# "Last updated 2024-05-31 00:35:55 UTC", "This page last modified on 2022-01-20": a
# stamp of when the page was built, never the page's subject.
PAGE_STAMP = re.compile(
    r"^(?:this page |page )?(?:was )?last (?:updated|modified|changed|edited|generated|built)\b"
    r"[^.]{0,60}\d",
    re.IGNORECASE,
)
PAGE_STAMP_MAX_WORDS = 15


def names_of(attrs: dict[str, str | None]) -> set[str]:
    """The class tokens and the id of an element, lower-cased."""
    names = set((attrs.get("class") or "").lower().split())
    if attrs.get("id"):
        names.add((attrs["id"] or "").lower())
    return names


def is_nav_link(text: str, attrs: dict[str, str | None]) -> bool:
    """Whether a link is a previous/next/up/home link by its rel, accesskey or text."""
    rels = set((attrs.get("rel") or "").lower().split())
    if rels & NAV_RELS or (attrs.get("accesskey") or "").lower() in NAV_ACCESSKEYS:
        return True
    words = " ".join(text.strip(_ARROWS + " \t\n").lower().split())
    return words in NAV_WORDS or bool(re.match(r"^(?:prev|previous|next|up)\s*[:»›→]", text.strip(), re.IGNORECASE))


def is_marker_link(text: str, attrs: dict[str, str | None]) -> bool:
    """Whether a link is a permalink, edit, source or skip marker rather than text."""
    t = " ".join(text.split())
    return bool(MARKER_LINK.match(t) or SKIP_LINK.match(t) or MARKER_TITLE.match(attrs.get("title") or ""))


def is_page_stamp(text: str) -> bool:
    return len(text.split()) <= PAGE_STAMP_MAX_WORDS and bool(PAGE_STAMP.match(text))


# The repetition rule. A paragraph is furniture when it frames pages (stands among the
# first or last FRAME_PARAGRAPHS paragraphs of a page) verbatim on at least REPEAT_SHARE
# of the pages of a scope, and on at least REPEAT_MIN_PAGES pages. Scopes: the ingested
# folder and each subfolder, each counted twice, with and without its subfolders.
# Generator text frames 68-100% of its pages, real text framing under a third; the floor
# keeps small collections out of reach (docs/decisions/0014-page-furniture.md).
# Judged: HTML, Markdown and text pages (ingest/reading.py REPETITION_FORMATS).
FRAME_PARAGRAPHS = 3
REPEAT_SHARE = 0.5
REPEAT_MIN_PAGES = 8


def repeated_blocks(pages: dict[str, list[str]]) -> dict[str, set[str]]:
    """Per page (by source), the paragraphs that are furniture by repetition.

    `pages` maps each page's source (its path relative to the ingested folder) to its
    paragraph texts in reading order; a paragraph counts once per page.
    """
    frames = {source: set(paras[:FRAME_PARAGRAPHS]) | set(paras[-FRAME_PARAGRAPHS:]) for source, paras in pages.items()}
    scopes: dict[tuple[str, bool], list[str]] = defaultdict(list)
    for source in pages:
        folder = str(PurePosixPath(source).parent)
        scopes[(folder, False)].append(source)
        for parent in (PurePosixPath(source).parent, *PurePosixPath(source).parent.parents):
            scopes[(str(parent), True)].append(source)
    furniture: dict[str, set[str]] = defaultdict(set)
    for members in scopes.values():
        if len(members) < REPEAT_MIN_PAGES:
            continue
        counts = Counter(t for source in members for t in frames[source])
        needed = max(REPEAT_MIN_PAGES, REPEAT_SHARE * len(members))
        common = {t for t, n in counts.items() if n >= needed}
        for source in members:
            if frames[source] & common:
                furniture[source] |= frames[source] & common
    return dict(furniture)

"""Wiki exports recognised inside a source (an archive, or a folder holding an unzipped
export), by the names of their files, and staged under the names a citation should show.

- **Confluence** (Space tools > Export > HTML): an `index.html` beside pages named
  `Title_<page id>.html` (or `<page id>.html`). The index page (the space's
  details and page tree), the style sheets and Confluence's icons (`images/`) are left out
  with their reason; an attachment (`attachments/<page id>/<id>.<ext>`) is ingested when
  citebot reads its format, else left out saying so. Pages keep their names; their
  furniture is left out by the page loader (ingest/loaders/confluence.py).
- **Notion** (Settings > Export > Markdown & CSV): pages and databases named
  `Title <32 hex digits>.md|.csv`, sub-pages in `Title <32 hex>/` folders, perhaps under an
  `Export-<uuid>/` folder. The ids are removed from every file and folder name (a nested
  page keeps its folder path: `Projects/Launch/Checklist.md`); two siblings whose names
  would then be the same keep the first 8 digits of their ids, `Notes (1a2b3c4d).md`. A
  database comes as `Name <id>.csv` (the rows its view shows) and `Name <id>_all.csv` (all
  of them): the second is staged as `Name.csv`, the first left out saying so. Attachments
  of a format citebot does not read are left out saying so.

Anything else is staged as it is (docs/decisions/0039-wiki-exports.md).
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from ingest.discovery import Skipped
from ingest.loaders import FORMATS

# "Title 0123456789abcdef0123456789abcdef" (a Notion id: 32 lower-case hex digits after a
# space), with "_all" after it on a database's complete CSV.
_NOTION = re.compile(r"^(?P<title>.*?) ?(?P<id>[0-9a-f]{32})(?P<all>_all)?$")
# The folder a Notion export wraps everything in: Export-<uuid>.
_NOTION_WRAPPER = re.compile(r"^Export-[0-9a-f]{8}(?:-[0-9a-f]{4}){3}-[0-9a-f]{12}$")
# A Confluence page file: Title_<page id>.html, or <page id>.html (older servers).
_CONFLUENCE_PAGE = re.compile(r"(?:^|_)\d+\.html$")
# The digits of a Notion id kept when two siblings would share a name: 8 hex digits
# (32 bits) tell a handful of same-named pages apart (docs/decisions/0039-wiki-exports.md).
SHORT_ID = 8
UNTITLED = "Untitled"


@dataclass
class ExportPlan:
    """What a source's files are staged as: kind ("confluence", "notion" or None), each kept
    file's staged name, and the files left out with their reasons."""

    kind: str | None
    names: dict[str, str] = field(default_factory=dict)
    skipped: list[Skipped] = field(default_factory=list)


def _unreadable(name: str) -> Skipped | None:
    suffix = PurePosixPath(name).suffix.lower()
    if suffix in FORMATS:
        return None
    return Skipped(
        name, f"an attachment of a format citebot does not read ({suffix or 'no extension'}); left out of the export"
    )


def _confluence_root(names: list[str]) -> str | None:
    """The folder ('' or 'SPACE/') of a Confluence export among these names, or None: one
    holding index.html and pages named by their ids (read in one pass over the names)."""
    by_folder: dict[str, list[str]] = defaultdict(list)
    for n in names:
        folder, _, base = n.rpartition("/")
        by_folder[folder + "/" if folder else ""].append(base)
    for root, files in sorted(by_folder.items()):
        if "index.html" in files and any(_CONFLUENCE_PAGE.search(f) for f in files):
            return root
    return None


def _notion_ids(names: list[str]) -> int:
    """How many Markdown and CSV files are named with a Notion id."""
    return sum(
        1 for n in names if PurePosixPath(n).suffix.lower() in (".md", ".csv") and _NOTION.match(PurePosixPath(n).stem)
    )


def plan(names: list[str]) -> ExportPlan:
    """The staging plan of a source's files (POSIX paths relative to it)."""
    root = _confluence_root(names)
    if root is not None:
        return _plan_confluence(names, root)
    pages = [n for n in names if PurePosixPath(n).suffix.lower() in (".md", ".csv")]
    ided = _notion_ids(names)
    # Most of its pages carry an id: a folder where one file happens to end in 32 hex
    # digits is not an export.
    if ided and ided * 2 >= len(pages):
        return _plan_notion(names)
    return ExportPlan(None, {n: n for n in names})


def _plan_confluence(names: list[str], root: str) -> ExportPlan:
    p = ExportPlan("confluence")
    for n in names:
        rel = n[len(root) :] if n.startswith(root) else None
        if rel == "index.html":
            p.skipped.append(
                Skipped(
                    n,
                    "the index page of the Confluence export (the space's details and its page "
                    "tree: navigation, no text of its own)",
                )
            )
        elif rel is not None and rel.startswith(("styles/", "images/", "attachments/thumbnails/")):
            p.skipped.append(Skipped(n, "the Confluence export's style sheets, icons and thumbnails"))
        elif (s := _unreadable(n)) is not None and rel is not None and rel.startswith("attachments/"):
            p.skipped.append(s)
        else:
            p.names[n] = n
    return p


def _clean(segment: str, is_file: bool) -> tuple[str, str | None, bool]:
    """(the name without its Notion id, the id or None, whether it is a database's _all CSV)."""
    stem, suffix = (
        (segment[: -len(PurePosixPath(segment).suffix)], PurePosixPath(segment).suffix)
        if is_file and PurePosixPath(segment).suffix
        else (segment, "")
    )
    m = _NOTION.match(stem)
    if not m or (m.group("all") and suffix.lower() != ".csv"):
        return segment, None, False
    title = m.group("title").strip() or UNTITLED
    return title + suffix, m.group("id"), bool(m.group("all"))


def _plan_notion(names: list[str]) -> ExportPlan:
    p = ExportPlan("notion")
    tops = {n.split("/", 1)[0] for n in names}
    wrapper = (
        next(iter(tops)) + "/"
        if len(tops) == 1 and _NOTION_WRAPPER.match(next(iter(tops))) and all("/" in n for n in names)
        else ""
    )
    # Every folder and file of the export, by its parent folder: siblings' clean names are
    # compared, files with files and folders with folders.
    children: dict[str, set[tuple[str, bool]]] = defaultdict(set)
    for n in names:
        parts = n[len(wrapper) :].split("/")
        for i, part in enumerate(parts):
            children["/".join(parts[:i])].add((part, i == len(parts) - 1))
    cleaned: dict[tuple[str, str, bool], str] = {}
    full_csv: set[tuple[str, str]] = set()  # (parent, id) of databases with an _all CSV
    for parent, kids in children.items():
        clean = {(seg, f): _clean(seg, f) for seg, f in kids}
        for (_seg, f), (_name, ident, complete) in clean.items():
            if f and complete and ident:
                full_csv.add((parent, ident))
        taken = Counter(
            (name, f)
            for (seg, f), (name, ident, complete) in clean.items()
            if not (f and ident and not complete and (parent, ident) in full_csv and seg.lower().endswith(".csv"))
        )
        for (seg, f), (name, ident, _complete) in clean.items():
            if ident and taken[(name, f)] > 1:
                stem, suffix = (
                    (name[: -len(PurePosixPath(name).suffix)], PurePosixPath(name).suffix)
                    if f and PurePosixPath(name).suffix
                    else (name, "")
                )
                name = f"{stem} ({ident[:SHORT_ID]}){suffix}"
            cleaned[(parent, seg, f)] = name
    for n in names:
        parts = n[len(wrapper) :].split("/")
        parent = "/".join(parts[:-1])
        name, ident, complete = _clean(parts[-1], True)
        if ident and not complete and parts[-1].lower().endswith(".csv") and (parent, ident) in full_csv:
            p.skipped.append(
                Skipped(
                    n,
                    f"the rows one view of the database shows; all of its rows are in "
                    f"{PurePosixPath(parts[-1]).stem}_all.csv, staged as {name}",
                )
            )
            continue
        if (s := _unreadable(n)) is not None:
            p.skipped.append(s)
            continue
        staged = [cleaned[("/".join(parts[:i]), part, i == len(parts) - 1)] for i, part in enumerate(parts)]
        p.names[n] = "/".join(staged)
    return p

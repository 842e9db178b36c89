"""The per-file budget of inflated PDF streams, charged before any text is extracted.

pypdf stops one stream at the per-stream limit (Limits.max_inflated_bytes), but a file of
many streams each under it inflates to their sum: 20 pages of 70 MB each took 173 s and
1.87 GB. Text extraction decodes each page's content streams, the form XObjects they
draw (nested forms too) and the fonts' ToUnicode maps; this decodes exactly those, once
each (pypdf keeps what it decoded, so extraction does not decode them again), and adds
up their sizes page by page. Past Limits.max_inflated_file_bytes the file is refused
before any page is parsed, with at most that much, plus one stream, held in memory.
"""

from __future__ import annotations

from typing import Any

from ingest.limits import Limits
from ingest.loaders.common import InflationBudget


def charge_pages(pages: Any, source: str, limits: Limits) -> int:
    """Decode what text extraction of these pages (pypdf PageObjects) will read; the total
    inflated bytes, or IngestError once it passes limits.max_inflated_file_bytes."""
    from pypdf.generic import ArrayObject, DictionaryObject, IndirectObject, StreamObject

    seen: set[tuple[int, int]] = set()
    budget = InflationBudget(source, "PDF streams", limits)

    def first_visit(ref: Any) -> bool:
        if isinstance(ref, IndirectObject):
            key = (ref.idnum, ref.generation)
            if key in seen:
                return False
            seen.add(key)
        return True

    for number, page in enumerate(pages, start=1):
        todo: list[Any] = [page.get("/Contents"), page.get("/Resources")]
        while todo:
            ref = todo.pop()
            if ref is None or not first_visit(ref):
                continue
            obj = ref.get_object()
            if isinstance(obj, ArrayObject):  # content streams in parts
                todo.extend(obj)
            elif isinstance(obj, StreamObject) and obj.get("/Subtype") != "/Image":
                # pypdf's per-stream limit applies to get_data()
                budget.charge(len(obj.get_data()), f"page {number}")
                if obj.get("/Subtype") == "/Form":
                    todo.append(obj.get("/Resources"))
            elif isinstance(obj, DictionaryObject):
                _resources(obj, todo)
    return budget.total


def _resources(resources: Any, todo: list[Any]) -> None:
    """The streams a resource dictionary lends text extraction: form XObjects, ToUnicode maps."""
    from pypdf.generic import DictionaryObject

    xobjects = resources.get("/XObject")
    if xobjects is not None and isinstance(xobjects.get_object(), DictionaryObject):
        todo.extend(xobjects.get_object().values())
    fonts = resources.get("/Font")
    if fonts is not None and isinstance(fonts.get_object(), DictionaryObject):
        for font in fonts.get_object().values():
            font = font.get_object()
            if isinstance(font, DictionaryObject) and "/ToUnicode" in font:
                todo.append(font["/ToUnicode"])

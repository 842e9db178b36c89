"""Office files (.docx, .pptx, .odt) are zip packages of XML parts; this opens one and
parses its parts within bounds, by the standard library alone (zipfile and expat; no lxml,
python-docx or odfpy: docs/decisions/0028-office-files.md says why).

Refused with a reason, before the cost: a package of more members than
Limits.max_zip_members (counted from the zip's end record, before its directory is parsed);
an encrypted member or one compressed by anything but deflate; a part that inflates past
Limits.max_inflated_bytes, or parts that together pass Limits.max_inflated_file_bytes
(charged by their declared sizes before a byte is inflated, as pdf_budget.py charges a
PDF's streams before a page is parsed: zipfile never inflates a member past its declared
size, so a zip that lies is cut short and fails its CRC); XML with a DOCTYPE
(entity declarations live there: an entity bomb is refused at its first line); elements
nested deeper than Limits.max_depth, or more of them than Limits.max_xml_elements (counted
by their start tags as the part inflates, before it is parsed).
Parts are parsed as a stream (expat), so a part costs its parser's state, not its tree.
"""

from __future__ import annotations

import io
import posixpath
import struct
import zipfile
import zlib
from collections.abc import Callable
from typing import IO, Protocol
from xml.parsers import expat

from ingest.limits import Limits, over
from ingest.loaders.common import InflationBudget
from search.errors import IngestError

# Read this much of a part at a time: the budget is charged before the parser sees it.
_PIECE = 1 << 16
# Namespaces the loaders name, by the prefixes their specifications use; an element of any
# other namespace keeps its full URI (never matched).
NAMESPACES = {
    "http://schemas.openxmlformats.org/wordprocessingml/2006/main": "w",
    "http://purl.oclc.org/ooxml/wordprocessingml/main": "w",  # strict OOXML
    "http://schemas.openxmlformats.org/presentationml/2006/main": "p",
    "http://purl.oclc.org/ooxml/presentationml/main": "p",
    "http://schemas.openxmlformats.org/drawingml/2006/main": "a",
    "http://purl.oclc.org/ooxml/drawingml/main": "a",
    "http://schemas.openxmlformats.org/officeDocument/2006/relationships": "r",
    "http://purl.oclc.org/ooxml/officeDocument/relationships": "r",
    "http://schemas.openxmlformats.org/package/2006/relationships": "rel",
    "http://schemas.openxmlformats.org/markup-compatibility/2006": "mc",
    "http://purl.org/dc/elements/1.1/": "dc",
    "urn:oasis:names:tc:opendocument:xmlns:office:1.0": "office",
    "urn:oasis:names:tc:opendocument:xmlns:text:1.0": "text",
    "urn:oasis:names:tc:opendocument:xmlns:table:1.0": "table",
    "urn:oasis:names:tc:opendocument:xmlns:drawing:1.0": "draw",
    "urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0": "svg",
}
# A zip's end of central directory record, and an OLE2 compound file's magic (a legacy
# .doc/.ppt, or a password-protected .docx/.pptx, which Office wraps in OLE2).
_END_RECORD = b"PK\x05\x06"
_OLE2 = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
# What zipfile raises on a damaged zip (a mangled header: a negative seek, an unknown
# version or flag, a name not in its declared encoding, a bad CRC), besides BadZipFile.
_DAMAGED = (
    zipfile.BadZipFile,
    zipfile.LargeZipFile,
    zlib.error,
    EOFError,
    OSError,
    ValueError,
    NotImplementedError,
    RuntimeError,
    struct.error,
)


Start = Callable[[dict[str, str]], None]
End = Callable[[], None]


class Handler(Protocol):
    """What a part's parse calls, by element name ("prefix:local", NAMESPACES): `starts` and
    `ends` hold only the elements a loader reads (a dictionary lookup for the rest), `text`
    gets all character data."""

    starts: dict[str, Start]
    ends: dict[str, End]

    def text(self, data: str) -> None: ...


class Simple:
    """A handler of a few elements: starts and ends given, text ignored unless overridden."""

    def __init__(self, starts: dict[str, Start] | None = None, ends: dict[str, End] | None = None) -> None:
        self.starts, self.ends = starts or {}, ends or {}

    def text(self, data: str) -> None:
        pass


class _Refused(Exception):
    """Raised inside an expat callback; carries the IngestError out of Parse()."""

    def __init__(self, error: IngestError) -> None:
        self.error = error


def _declared_members(data: bytes) -> int | None:
    """The member count a zip's end record declares (None without a record); 0xFFFF
    (ZIP64) counts as that many. Read before zipfile parses the whole directory."""
    at = data.rfind(_END_RECORD, max(0, len(data) - 65_557))  # the record plus a comment
    if at < 0 or at + 22 > len(data):
        return None
    return int(struct.unpack_from("<H", data, at + 10)[0])


class Package:
    """One office file's zip, opened within the limits; parts parsed by `parse`."""

    def __init__(self, data: bytes, source: str, kind: str, suffix: str, limits: Limits) -> None:
        self.source, self.kind, self.limits = source, kind, limits
        if data.startswith(_OLE2):
            raise IngestError(
                f"{source}: an OLE2 file, not a {kind}: password-protected, or a legacy "
                f"binary file renamed {suffix}; save it without a password as {suffix}"
            )
        if not data.startswith(b"PK\x03\x04"):
            raise IngestError(f"{source}: not a {kind} (no zip header)")
        declared = _declared_members(data)
        if declared is not None and declared > limits.max_zip_members:
            raise over(
                f"{source}: zip of", f"{declared:,} members", limits.max_zip_members, "CITEBOT_INGEST_MAX_ZIP_MEMBERS"
            )
        try:
            self.zip = zipfile.ZipFile(io.BytesIO(data))
            infos = self.zip.infolist()
        except _DAMAGED as exc:
            raise IngestError(f"{source}: unreadable {kind} (a damaged zip: {exc})") from exc
        if len(infos) > limits.max_zip_members:
            raise over(
                f"{source}: zip of", f"{len(infos):,} members", limits.max_zip_members, "CITEBOT_INGEST_MAX_ZIP_MEMBERS"
            )
        self.members = {i.filename: i for i in infos}
        self.budget = InflationBudget(source, f"{kind} parts", limits)
        self.elements = 0
        self._names: dict[str, str] = {}
        self._rels: dict[str, list[tuple[str, str, str]]] = {}

    def has(self, name: str) -> bool:
        return name in self.members

    def read(self, name: str, max_bytes: int = 1_000) -> bytes:
        """A small part's bytes (the ODF mimetype), at most max_bytes of them."""
        try:
            with self._open(name) as f:
                return f.read(max_bytes)
        except _DAMAGED as exc:
            raise IngestError(f"{self.source}: unreadable {self.kind} ({name}: {exc})") from None

    def _open(self, name: str, charge: bool = True) -> IO[bytes]:
        info = self.members.get(name)
        if info is None:
            raise IngestError(f"{self.source}: no {name} in the package: not a {self.kind}, or a damaged one")
        if info.flag_bits & 0x1:
            raise IngestError(f"{self.source}: {name} is encrypted; save the file without a password")
        if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            raise IngestError(
                f"{self.source}: {name} is compressed by method {info.compress_type}, "
                "not deflate, which office suites write"
            )
        # zipfile inflates a member to its declared size and no further (past it, a CRC or
        # length error): the declared sizes are charged before any byte is inflated.
        if info.file_size > self.limits.max_inflated_bytes:
            raise over(
                f"{self.source}: {name} inflates to",
                f"{info.file_size:,} bytes (a zip bomb?)",
                self.limits.max_inflated_bytes,
                "CITEBOT_INGEST_MAX_INFLATED_BYTES",
            )
        if charge:
            self.budget.charge(info.file_size, name)
        return self.zip.open(info)

    def _count_elements(self, name: str, stop_after: int) -> int:
        """The elements of a part, counted before it is parsed: its start tags ("<" not
        followed by "/", "?" or "!"), by bytes.count as it inflates. Each element has one start
        tag and text holds no raw "<", so this is at least the count expat finds; more only
        for a "<" inside a comment or CDATA section, which office suites do not write. Stops
        once the count passes stop_after."""
        count, last = 0, b""
        with self._open(name) as f:  # the first pass charges the budget, before inflating
            while piece := f.read(_PIECE):
                joined = last + piece  # a two-byte pattern may straddle the pieces
                count += piece.count(b"<") - joined.count(b"</") - joined.count(b"<?") - joined.count(b"<!")
                last = piece[-1:]
                if count > stop_after:
                    break
        return count

    def _name(self, name: str) -> str:
        """An expat name ("uri local") as "prefix:local"; memoised, since names repeat."""
        found = self._names.get(name)
        if found is None:
            uri, _, local = name.rpartition(" ")
            found = f"{NAMESPACES.get(uri, uri)}:{local}" if uri else local
            self._names[name] = found
        return found

    def parse(self, name: str, handler: Handler) -> None:
        """Stream one XML part into handler, within the limits; IngestError says why not."""
        limits, source = self.limits, self.source
        parser = expat.ParserCreate(namespace_separator=" ")
        parser.buffer_text = True
        parser.buffer_size = _PIECE
        depth = 0
        max_depth = limits.max_depth
        names = self._name
        starts, ends = handler.starts, handler.ends
        # Each expat name once: its start and end callbacks (None for elements not read).
        seen: dict[str, tuple[Start | None, End | None]] = {}

        def refuse(error: IngestError) -> None:
            raise _Refused(error)

        def doctype(*_: object) -> None:
            refuse(
                IngestError(
                    f"{source}: {name} has a DOCTYPE, which office suites never write "
                    "(its entities could expand without bound); refused"
                )
            )

        def callbacks(raw: str) -> tuple[Start | None, End | None]:
            tag = names(raw)
            found = seen[raw] = (starts.get(tag), ends.get(tag))
            return found

        def start(raw: str, attrs: dict[str, str]) -> None:
            nonlocal depth
            depth += 1
            if depth > max_depth:
                refuse(
                    over(f"{source}: {name} nested", f"{depth:,} elements deep", max_depth, "CITEBOT_INGEST_MAX_DEPTH")
                )
            on_start = (seen.get(raw) or callbacks(raw))[0]
            if on_start is not None:
                on_start({names(k): v for k, v in attrs.items()} if attrs else {})

        def end(raw: str) -> None:
            nonlocal depth
            depth -= 1
            on_end = (seen.get(raw) or callbacks(raw))[1]
            if on_end is not None:
                on_end()

        parser.StartDoctypeDeclHandler = doctype
        parser.EntityDeclHandler = doctype
        parser.StartElementHandler = start
        parser.EndElementHandler = end
        parser.CharacterDataHandler = handler.text
        try:
            # The element count first: a flood of empty elements would cost seconds to parse.
            self.elements += self._count_elements(name, limits.max_xml_elements - self.elements)
            if self.elements > limits.max_xml_elements:
                raise over(
                    f"{source}: XML of",
                    f"over {limits.max_xml_elements:,} elements by {name} (start tags, counted before parsing)",
                    limits.max_xml_elements,
                    "CITEBOT_INGEST_MAX_XML_ELEMENTS",
                )
            with self._open(name, charge=False) as f:  # charged by the count
                while piece := f.read(_PIECE):
                    parser.Parse(piece, False)
                parser.Parse(b"", True)
        except _Refused as exc:
            raise exc.error from None
        except expat.ExpatError as exc:
            raise IngestError(f"{source}: {name} is not well-formed XML ({exc})") from None
        except _DAMAGED as exc:
            raise IngestError(f"{source}: unreadable {self.kind} ({name}: {exc})") from None

    def relationships(self, part: str) -> list[tuple[str, str, str]]:
        """A part's relationships (OOXML _rels/NAME.rels): (id, type's last word, target part
        resolved against the part's folder); none when it has no .rels, external ones left out."""
        if part in self._rels:
            return self._rels[part]
        folder, base = posixpath.split(part)
        rels = posixpath.join(folder, "_rels", base + ".rels")
        found: list[tuple[str, str, str]] = []
        self._rels[part] = found
        if not self.has(rels):
            return found

        def relationship(attrs: dict[str, str]) -> None:
            if attrs.get("TargetMode") != "External":
                target = attrs.get("Target", "")
                resolved = posixpath.normpath(
                    target.lstrip("/") if target.startswith("/") else posixpath.join(folder, target)
                )
                found.append((attrs.get("Id", ""), attrs.get("Type", "").rsplit("/", 1)[-1], resolved))

        self.parse(rels, Simple({"rel:Relationship": relationship}))
        return found

    def related(self, part: str, kind: str) -> str | None:
        """The first target of a part's relationships of this type ("styles", "notesSlide")."""
        return next((t for _, k, t in self.relationships(part) if k == kind), None)

    def title(self, part: str | None) -> str | None:
        """The first dc:title of a metadata part: docProps/core.xml (docx, pptx) or meta.xml
        (odt), both Dublin Core; None when the part or the title is missing or blank."""
        if part is None or not self.has(part):
            return None
        reader = _TitleReader()
        self.parse(part, reader)
        return " ".join("".join(reader.seen).split()) or None


class _TitleReader(Simple):
    """The text of the first dc:title."""

    def __init__(self) -> None:
        super().__init__({"dc:title": self._open}, {"dc:title": self._close})
        self.seen: list[str] = []
        self.state = "before"  # "in", then "after"

    def _open(self, attrs: dict[str, str]) -> None:
        if self.state == "before":
            self.state = "in"

    def _close(self) -> None:
        if self.state == "in":
            self.state = "after"

    def text(self, data: str) -> None:
        if self.state == "in":
            self.seen.append(data)

"""The labelled collections of the generalisation harness: fetch, validate, list.

Each collection is a folder benchmarks/collections/<name>/ with collection.toml (which
Debian package ships the documents and which of its files to take), questions.jsonl and
optionally glossary.csv. The documents themselves are fetched at run time and never
committed:

    apt-get download <package>    -> ~/.cache/citebot/collections/debs/
    dpkg-deb -x                   -> ~/.cache/citebot/collections/<name>/pkg/
    the included files            -> ~/.cache/citebot/collections/<name>/docs/
                                     (.gz files decompressed, the suffix dropped)

docs/ is the folder citebot ingests; docs/../VERSION names the package version the
figures were measured on. Fetching is idempotent: a docs/ folder built from the same
package file with the same root/include/exclude is reused as it is.

    python -m benchmarks.labelled fetch [NAME...]      # prints each docs/ path
    python -m benchmarks.labelled validate [NAME...]   # non-zero exit on any problem
    python -m benchmarks.labelled list

(Load it from other scripts with importlib under another name: the file name shadows the
standard library's `collections` for `import`.)
"""

from __future__ import annotations

import argparse
import fnmatch
import functools
import gzip
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from benchmarks.common import REPO

COLLECTIONS_DIR = REPO / "benchmarks" / "collections"
CACHE = Path(os.environ.get("CITEBOT_COLLECTIONS_CACHE",
                            Path.home() / ".cache" / "citebot" / "collections"))

# Reserved for independent measurement: never tuned, tested or benchmarked on.
RESERVED_PACKAGES = ("postgresql-doc*", "python3*-doc", "bible-kjv*")

KINDS = ("paraphrase", "rare", "phrase", "alias", "unanswerable")
ITEM_KEYS = {"id", "kind", "question", "must_contain", "split"}
SPLITS = ("dev", "heldout")
# Counts COLLECTIONS.md asks for: 40+ questions, 10+ unanswerable, "about 15" paraphrase
# (12 is the floor of "about"), "several" (3+) of rare, phrase and alias.
MIN_ITEMS = 40
MIN_PER_KIND = {"unanswerable": 10, "paraphrase": 12, "rare": 3, "phrase": 3, "alias": 3}
# "About one third" held out in a tuned collection: 15 of 45 is 0.33; a band of
# 0.25-0.42 lets 40-60 item sets land within a few items of a third.
HELDOUT_SHARE = (0.25, 0.42)
# A must_contain string found in more documents than this is probably page furniture or
# too generic to point at one passage (a warning, not a problem).
MANY_DOCUMENTS = 5


class CollectionError(Exception):
    """A collection that cannot be used as it is: the message says what to fix."""


@dataclass(frozen=True)
class Collection:
    name: str
    package: str
    root: str
    include: tuple[str, ...]
    exclude: tuple[str, ...]
    kind: str
    heldout: bool
    description: str
    folder: Path

    @property
    def questions(self) -> Path:
        return self.folder / "questions.jsonl"

    @property
    def glossary(self) -> Path | None:
        path = self.folder / "glossary.csv"
        return path if path.exists() else None

    @property
    def cache(self) -> Path:
        return CACHE / self.name

    @property
    def docs(self) -> Path:
        return self.cache / "docs"

    def version(self) -> str | None:
        path = self.cache / "VERSION"
        return path.read_text(encoding="utf-8").strip() if path.exists() else None

    def selection(self) -> dict:
        """What decides the contents of docs/, besides the package file."""
        return {"package": self.package, "root": self.root, "include": list(self.include),
                "exclude": list(self.exclude)}


def reserved(package: str) -> str | None:
    """The reserved pattern a package name matches, if any."""
    for pattern in RESERVED_PACKAGES:
        if fnmatch.fnmatchcase(package, pattern):
            return pattern
    return None


def load_collection(folder: Path) -> Collection:
    toml_path = folder / "collection.toml"
    try:
        raw = tomllib.loads(toml_path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise CollectionError(f"{toml_path}: unreadable ({exc.strerror or exc})") from exc
    except tomllib.TOMLDecodeError as exc:
        raise CollectionError(f"{toml_path}: not valid TOML ({exc})") from exc

    def need(key: str, kind: type, default: object = None):
        value = raw.get(key, default)
        if value is None:
            raise CollectionError(f"{toml_path}: missing key {key!r}")
        if not isinstance(value, kind):
            raise CollectionError(f"{toml_path}: {key!r} must be a {kind.__name__}, not {value!r}")
        return value

    unknown = set(raw) - {"name", "package", "root", "include", "exclude", "kind", "heldout",
                          "description"}
    if unknown:
        raise CollectionError(f"{toml_path}: unknown keys {sorted(unknown)}")
    name = need("name", str)
    if name != folder.name:
        raise CollectionError(f"{toml_path}: name {name!r} must equal the folder name {folder.name!r}")
    package = need("package", str)
    pattern = reserved(package)
    if pattern:
        raise CollectionError(
            f"{toml_path}: package {package!r} is reserved ({pattern}: kept for independent "
            f"measurement, never used for tuning, tests or benchmarks); choose another package")
    include = need("include", list)
    exclude = need("exclude", list, [])
    for key, globs in (("include", include), ("exclude", exclude)):
        if not all(isinstance(g, str) and g for g in globs):
            raise CollectionError(f"{toml_path}: {key!r} must be a list of non-empty glob strings")
    if not include:
        raise CollectionError(f"{toml_path}: 'include' names no files")
    root = need("root", str).strip("/")
    if PurePosixPath(root).is_absolute() or ".." in PurePosixPath(root).parts:
        raise CollectionError(f"{toml_path}: root {root!r} must be a folder inside the package")
    return Collection(
        name=name, package=package, root=root, include=tuple(include), exclude=tuple(exclude),
        kind=need("kind", str), heldout=need("heldout", bool), description=need("description", str),
        folder=folder,
    )


def folders() -> list[Path]:
    """Every folder under benchmarks/collections/ that holds a collection.toml."""
    if not COLLECTIONS_DIR.is_dir():
        return []
    return [p for p in sorted(COLLECTIONS_DIR.iterdir()) if p.is_dir() and (p / "collection.toml").exists()]


def all_collections() -> list[Collection]:
    return [load_collection(p) for p in folders()]


def named_folders(names: list[str]) -> list[Path]:
    """The named collections' folders (all when none is named); an unknown name is an error."""
    if not names:
        return folders()
    out = []
    for name in names:
        folder = COLLECTIONS_DIR / name
        if not (folder / "collection.toml").exists():
            known = ", ".join(p.name for p in folders()) or "none"
            raise CollectionError(f"no collection {name!r} (no {folder}/collection.toml); known: {known}")
        out.append(folder)
    return out


# -- fetching ---------------------------------------------------------------------------

def _run(cmd: list[str], cwd: Path | None = None) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False)
    except FileNotFoundError as exc:
        raise CollectionError(f"{cmd[0]} is not installed ({exc}); fetching needs Debian's "
                              "apt-get and dpkg-deb") from exc


def _compare_versions(a: str, b: str) -> int:
    if _run(["dpkg", "--compare-versions", a, "lt", b]).returncode == 0:
        return -1
    return 0 if a == b else 1


def _deb_version(deb: Path) -> str:
    r = _run(["dpkg-deb", "-f", str(deb), "Version"])
    if r.returncode != 0:
        raise CollectionError(f"{deb} is not a readable package ({r.stderr.strip()}); delete it and fetch again")
    return r.stdout.strip()


def package_file(package: str) -> Path:
    """The package's .deb in the cache (the newest there), downloaded when there is none."""
    debs = CACHE / "debs"
    debs.mkdir(parents=True, exist_ok=True)
    found = sorted(debs.glob(f"{package}_*.deb"))
    if not found:
        r = _run(["apt-get", "download", package], cwd=debs)
        found = sorted(debs.glob(f"{package}_*.deb"))
        if r.returncode != 0 or not found:
            detail = (r.stderr.strip().splitlines() or ["no message"])[-1]
            raise CollectionError(
                f"apt-get download {package} failed (exit {r.returncode}: {detail}). If the "
                f"package list is old or missing, run `apt-get update` and try again; "
                f"`apt-cache policy {package}` shows whether Debian has the package")
    if len(found) == 1:
        return found[0]
    versions = {deb: _deb_version(deb) for deb in found}
    return max(found, key=functools.cmp_to_key(lambda a, b: _compare_versions(versions[a], versions[b])))


def _swap_in(tmp: Path, target: Path) -> None:
    """Replace target by tmp with renames, so a reader never sees a half-built folder."""
    old = target.with_name(f"{target.name}.old-{os.getpid()}")
    if target.exists():
        target.rename(old)
    tmp.rename(target)
    shutil.rmtree(old, ignore_errors=True)


def unpacked(collection: Collection, deb: Path) -> Path:
    """The package unpacked under <name>/pkg/ (again only when the .deb changed)."""
    pkg = collection.cache / "pkg"
    stamp = collection.cache / "pkg.deb"
    if pkg.is_dir() and stamp.exists() and stamp.read_text(encoding="utf-8").strip() == deb.name:
        return pkg
    collection.cache.mkdir(parents=True, exist_ok=True)
    tmp = collection.cache / f"pkg.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    r = _run(["dpkg-deb", "-x", str(deb), str(tmp)])
    if r.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        raise CollectionError(f"dpkg-deb -x {deb} failed: {r.stderr.strip()}; delete the file and fetch again")
    _swap_in(tmp, pkg)
    stamp.write_text(deb.name + "\n", encoding="utf-8")
    return pkg


def _matches(rel: str, globs: tuple[str, ...]) -> bool:
    names = {rel, rel.removesuffix(".gz")}
    return any(fnmatch.fnmatchcase(n, g) for n in names for g in globs)


def _resolve_in(pkg: Path, path: Path) -> Path | None:
    """A file of the unpacked package, following symlinks inside the package only
    (an absolute link names the installed system; resolve it under pkg/)."""
    for _ in range(40):
        if not path.is_symlink():
            return path if path.is_file() else None
        target = Path(os.readlink(path))
        path = pkg / target.relative_to("/") if target.is_absolute() else path.parent / target
    return None


def selected_files(collection: Collection, pkg: Path) -> tuple[list[tuple[str, Path]], list[str]]:
    """(relative name in docs/, file in pkg/) for every included file, and notes on
    included entries that could not be used (dangling links)."""
    root = pkg / collection.root
    if not root.is_dir():
        raise CollectionError(f"{collection.folder / 'collection.toml'}: root {collection.root!r} is not "
                              f"a folder of package {collection.package} (looked in {root})")
    chosen: list[tuple[str, Path]] = []
    notes: list[str] = []
    used: set[str] = set()
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames.sort()
        for fname in sorted(filenames + [d for d in dirnames if (Path(dirpath) / d).is_symlink()]):
            path = Path(dirpath) / fname
            rel = path.relative_to(root).as_posix()
            if not _matches(rel, collection.include) or _matches(rel, collection.exclude):
                continue
            used.update(g for g in collection.include if _matches(rel, (g,)))
            real = _resolve_in(pkg, path)
            if real is None:
                notes.append(f"{rel}: a link to nothing inside the package, left out")
                continue
            chosen.append((rel.removesuffix(".gz"), real))
    for glob in collection.include:
        if glob not in used:
            notes.append(f"include glob {glob!r} matches no file")
    return chosen, notes


def fetch(collection: Collection, quiet: bool = False) -> Path:
    """docs/ of the collection, built when missing or when its selection changed."""
    deb = package_file(collection.package)
    stamp_path = collection.cache / "fetched.json"
    wanted = collection.selection() | {"deb": deb.name}
    if collection.docs.is_dir() and stamp_path.exists() and (collection.cache / "VERSION").exists():
        try:
            if json.loads(stamp_path.read_text(encoding="utf-8")).get("selection") == wanted:
                return collection.docs
        except json.JSONDecodeError:
            pass
    pkg = unpacked(collection, deb)
    files, notes = selected_files(collection, pkg)
    for note in notes:
        if not quiet:
            print(f"{collection.name}: {note}", file=sys.stderr)
    if not files:
        raise CollectionError(
            f"{collection.folder / 'collection.toml'}: include {list(collection.include)} matches no "
            f"file under {collection.root} in {collection.package} (after exclude {list(collection.exclude)})")
    tmp = collection.cache / f"docs.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    for rel, src in files:
        dest = tmp / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        if src.name.endswith(".gz"):
            with gzip.open(src, "rb") as fin, dest.open("wb") as fout:
                shutil.copyfileobj(fin, fout)
        else:
            shutil.copyfile(src, dest)
    _swap_in(tmp, collection.docs)
    version = _deb_version(deb)
    (collection.cache / "VERSION").write_text(f"{collection.package} {version}\n", encoding="utf-8")
    stamp_path.write_text(json.dumps({"selection": wanted, "version": version, "files": len(files),
                                      "notes": notes},
                                     indent=1) + "\n", encoding="utf-8")
    return collection.docs


# -- validating -------------------------------------------------------------------------

@dataclass
class Report:
    problems: list[str]
    warnings: list[str]
    notes: list[str]


def extracted_texts(docs: Path) -> tuple[dict[str, list[str]], list[str]]:
    """Per file of docs/, the section texts citebot's loaders extract (paragraphs joined
    as the chunker joins them), and the files the loaders refuse."""
    from ingest.chunker import PARAGRAPH_SEPARATOR
    from ingest.loaders import FORMATS, load
    from search.errors import IngestError

    texts: dict[str, list[str]] = {}
    refused: list[str] = []
    for path in sorted(p for p in docs.rglob("*") if p.is_file()):
        rel = path.relative_to(docs).as_posix()
        if path.suffix.lower() not in FORMATS:
            refused.append(f"{rel}: not a format citebot ingests")
            continue
        try:
            doc = load(path, rel)
        except IngestError as exc:
            refused.append(str(exc))
            continue
        texts[rel] = [PARAGRAPH_SEPARATOR.join(p.text for p in s.paragraphs) for s in doc.sections]
        texts[rel + "\x00paragraphs"] = [p.text for s in doc.sections for p in s.paragraphs]
    return texts, refused


_WORD = re.compile(r"\w+")


def check_items(collection: Collection, lines: list[str], texts: dict[str, list[str]]) -> Report:
    rep = Report([], [], [])
    where = collection.questions.relative_to(REPO) if collection.questions.is_relative_to(REPO) \
        else collection.questions
    items: list[dict] = []
    ids: Counter[str] = Counter()
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        at = f"{where}:{n}"
        try:
            raw = json.loads(line)
        except json.JSONDecodeError as exc:
            rep.problems.append(f"{at}: not JSON ({exc.msg})")
            continue
        if not isinstance(raw, dict):
            rep.problems.append(f"{at}: not a JSON object")
            continue
        if set(raw) != ITEM_KEYS:
            missing, extra = ITEM_KEYS - set(raw), set(raw) - ITEM_KEYS
            rep.problems.append(f"{at}: keys must be exactly {sorted(ITEM_KEYS)}"
                                + (f"; missing {sorted(missing)}" if missing else "")
                                + (f"; unexpected {sorted(extra)}" if extra else ""))
            continue
        iid, kind, question, must, split = (raw[k] for k in ("id", "kind", "question", "must_contain", "split"))
        at = f"{at} ({iid})"
        ok = True
        if not isinstance(iid, str) or not iid:
            rep.problems.append(f"{at}: id must be a non-empty string")
            ok = False
        if kind not in KINDS:
            rep.problems.append(f"{at}: kind {kind!r} is not one of {', '.join(KINDS)}")
            ok = False
        if not isinstance(question, str) or not question.strip():
            rep.problems.append(f"{at}: question must be a non-empty string")
            ok = False
        if split not in SPLITS:
            rep.problems.append(f"{at}: split {split!r} must be dev or heldout")
            ok = False
        elif collection.heldout and split != "heldout":
            rep.problems.append(f"{at}: {collection.name} is a held-out collection, so every split is heldout")
        if not isinstance(must, list) or not all(isinstance(s, str) and s.strip() for s in must):
            rep.problems.append(f"{at}: must_contain must be a list of non-empty strings")
            ok = False
        elif kind == "unanswerable" and must:
            rep.problems.append(f"{at}: an unanswerable item must have must_contain = [] (it has {must!r})")
        elif kind in KINDS and kind != "unanswerable" and not must:
            rep.problems.append(f"{at}: an answerable ({kind}) item needs at least one must_contain string")
        if isinstance(iid, str):
            ids[iid] += 1
        if ok:
            items.append(raw)
            for s in must:
                docs_with = [rel for rel, secs in texts.items()
                             if not rel.endswith("\x00paragraphs") and any(s in t for t in secs)]
                if not docs_with:
                    rep.problems.append(f"{at}: must_contain {s!r} occurs nowhere in the text the "
                                        f"loaders extract from {collection.docs}")
                    continue
                in_paragraph = any(s in p for rel in docs_with for p in texts[rel + "\x00paragraphs"])
                if not in_paragraph:
                    rep.warnings.append(f"{at}: must_contain {s!r} spans two paragraphs (a chunk "
                                        "boundary may fall between them)")
                if len(docs_with) > MANY_DOCUMENTS:
                    rep.warnings.append(f"{at}: must_contain {s!r} occurs in {len(docs_with)} documents "
                                        "(page furniture, or too generic to point at one passage?)")
    for iid, count in ids.items():
        if count > 1:
            rep.problems.append(f"{where}: id {iid!r} is used {count} times")
    kinds = Counter(i["kind"] for i in items)
    if len(items) < MIN_ITEMS:
        rep.problems.append(f"{where}: {len(items)} valid items; at least {MIN_ITEMS} are needed")
    for kind, least in MIN_PER_KIND.items():
        if kinds[kind] < least:
            rep.problems.append(f"{where}: {kinds[kind]} {kind} items; at least {least} are needed")
    if items and not collection.heldout:
        share = sum(i["split"] == "heldout" for i in items) / len(items)
        if not HELDOUT_SHARE[0] <= share <= HELDOUT_SHARE[1]:
            rep.problems.append(f"{where}: {share:.0%} of items are heldout; about one third should be "
                                f"({HELDOUT_SHARE[0]:.0%}-{HELDOUT_SHARE[1]:.0%})")
    vocabulary = {w.casefold() for rel, secs in texts.items() if not rel.endswith("\x00paragraphs")
                  for t in secs for w in _WORD.findall(t)}
    unanswerable = [i for i in items if i["kind"] == "unanswerable"]
    near = [i for i in unanswerable
            if all(w.casefold() in vocabulary for w in _WORD.findall(i["question"]))]
    rep.notes.append(
        f"{len(items)} items: " + ", ".join(f"{kinds[k]} {k}" for k in KINDS)
        + f"; {sum(i['split'] == 'heldout' for i in items)} heldout; "
        f"{len(near)} of {len(unanswerable)} unanswerable use only words the documents use")
    return rep


def check_glossary(collection: Collection) -> list[str]:
    if collection.glossary is None:
        return []
    from search.errors import CitebotError
    from search.glossary import Glossary

    try:
        Glossary.load(collection.glossary)
    except CitebotError as exc:
        return [str(exc)]
    return []


def validate(collection: Collection) -> Report:
    docs = fetch(collection, quiet=True)
    texts, refused = extracted_texts(docs)
    try:
        lines = collection.questions.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        return Report([f"{collection.questions}: unreadable ({exc.strerror or exc})"], [], [])
    rep = check_items(collection, lines, texts)
    rep.problems.extend(check_glossary(collection))
    try:
        fetched = json.loads((collection.cache / "fetched.json").read_text(encoding="utf-8"))
        rep.warnings.extend(f"fetch: {note}" for note in fetched.get("notes", []))
    except (OSError, json.JSONDecodeError):
        pass
    if refused:
        rep.warnings.append(f"{len(refused)} files of docs/ the loaders refuse (not ingested): "
                            + "; ".join(refused[:5]) + (" ..." if len(refused) > 5 else ""))
    rep.notes.insert(0, f"{collection.version() or collection.package}: "
                        f"{sum(1 for r in texts if not r.endswith(chr(0) + 'paragraphs'))} documents in {docs}")
    return rep


# -- command line -----------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name, help_text in (("fetch", "fetch the documents; prints each docs/ folder"),
                            ("validate", "check collection.toml, questions.jsonl and glossary.csv")):
        p = sub.add_parser(name, help=help_text)
        p.add_argument("names", nargs="*", metavar="NAME", help="collections (default: all)")
    sub.add_parser("list", help="the collections and what is fetched")
    args = parser.parse_args(argv)
    try:
        if args.command == "list":
            for folder in folders():
                try:
                    c = load_collection(folder)
                except CollectionError as exc:
                    print(f"{folder.name:18} unusable: {exc}")
                    continue
                n = sum(1 for line in c.questions.read_text(encoding="utf-8").splitlines() if line.strip()) \
                    if c.questions.exists() else 0
                role = "held-out" if c.heldout else "tuned"
                print(f"{c.name:18} {role:9} {n:>3} questions  {c.package:20} "
                      f"{c.version() or 'not fetched':34} {c.kind}")
            return 0
        chosen = named_folders(args.names)
        if not chosen:
            print(f"no collections under {COLLECTIONS_DIR}", file=sys.stderr)
            return 1
        if args.command == "fetch":
            for folder in chosen:
                print(fetch(load_collection(folder)))
            return 0
        failed = 0
        for folder in chosen:
            try:
                c = load_collection(folder)
                rep = validate(c)
            except CollectionError as exc:
                print(f"{folder.name}: FAILED\n  problem: {exc}")
                failed += 1
                continue
            status = "FAILED" if rep.problems else "ok"
            print(f"{c.name}: {status}")
            for line in rep.notes:
                print(f"  {line}")
            for line in rep.problems:
                print(f"  problem: {line}")
            for line in rep.warnings:
                print(f"  warning: {line}")
            failed += bool(rep.problems)
        return 1 if failed else 0
    except CollectionError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

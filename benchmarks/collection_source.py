"""Where a labelled collection's documents come from: a Debian package or a git repository.

Either way the chosen files land in ~/.cache/citebot/collections/<name>/docs/ (the folder
citebot ingests) with VERSION beside it, and fetched.json records the selection they were
built from; `fresh` is the one check that decides whether docs/ can be reused as it is.

Debian (collection.toml names `package`):

    apt-get download <package>    -> ~/.cache/citebot/collections/debs/
    dpkg-deb -x                   -> ~/.cache/citebot/collections/<name>/pkg/
    the included files            -> docs/ (.gz files decompressed, the suffix dropped)
    VERSION                       =  "<package> <version>"

git (collection.toml names `repo = "owner/name"` and `commit`):

    $CITEBOT_GIT_MIRRORS/<owner>+<name>/repo[/.git]   a bare git directory, used as it is;
    else git clone --bare https://github.com/<owner>/<name> -> ~/.cache/citebot/collections/git/
    the included files at the commit -> docs/ (git ls-tree and cat-file: no work tree)
    VERSION                       =  "<owner>/<name> <commit>"
"""

from __future__ import annotations

import fnmatch
import functools
import gzip
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from benchmarks.labelled import Collection

CACHE = Path(os.environ.get("CITEBOT_COLLECTIONS_CACHE",
                            Path.home() / ".cache" / "citebot" / "collections"))
# Where a repository is cloned from when no mirror holds it.
GIT_HOST = "https://github.com"
MIRRORS_VARIABLE = "CITEBOT_GIT_MIRRORS"
REPO_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9_.-]+")
COMMIT = re.compile(r"[0-9a-f]{40}")


class CollectionError(Exception):
    """A collection that cannot be used as it is: the message says what to fix."""


def _run(cmd: list[str], cwd: Path | None = None, env: dict[str, str] | None = None,
         stdin: bytes | None = None, text: bool = True) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(cmd, cwd=cwd, capture_output=True, text=text, check=False,
                              env=env, input=stdin)
    except FileNotFoundError as exc:
        raise CollectionError(f"{cmd[0]} is not installed ({exc}); fetching needs Debian's "
                              "apt-get and dpkg-deb, or git") from exc


def _last_line(stderr: str) -> str:
    return (stderr.strip().splitlines() or ["no message"])[-1]


# -- shared: freshness, selection, publishing --------------------------------------------

def fresh(collection: Collection, wanted: dict) -> bool:
    """Whether docs/ was built from exactly this selection (and is whole)."""
    stamp = collection.cache / "fetched.json"
    if not (collection.docs.is_dir() and stamp.exists() and (collection.cache / "VERSION").exists()):
        return False
    try:
        return json.loads(stamp.read_text(encoding="utf-8")).get("selection") == wanted
    except (OSError, json.JSONDecodeError):
        return False


def _swap_in(tmp: Path, target: Path) -> None:
    """Replace target by tmp with renames, so a reader never sees a half-built folder."""
    old = target.with_name(f"{target.name}.old-{os.getpid()}")
    if target.exists():
        target.rename(old)
    tmp.rename(target)
    shutil.rmtree(old, ignore_errors=True)


def matches(rel: str, globs: tuple[str, ...]) -> bool:
    names = {rel, rel.removesuffix(".gz")}
    return any(fnmatch.fnmatchcase(n, g) for n in names for g in globs)


def chosen(collection: Collection, rels: list[str]) -> tuple[list[str], list[str]]:
    """The names (relative to root) that include takes and exclude leaves, and a note per
    include glob that took nothing."""
    out, used = [], set()
    for rel in rels:
        if not matches(rel, collection.include) or matches(rel, collection.exclude):
            continue
        used.update(g for g in collection.include if matches(rel, (g,)))
        out.append(rel)
    return out, [f"include glob {g!r} matches no file" for g in collection.include if g not in used]


def publish(collection: Collection, wanted: dict, version: str, version_line: str, notes: list[str],
            write: Callable[[Path], int], quiet: bool) -> Path:
    """Build docs/ in a temporary folder with write(folder) (which returns how many files it
    wrote), swap it in, and record VERSION and fetched.json."""
    for note in notes:
        if not quiet:
            print(f"{collection.name}: {note}", file=sys.stderr)
    collection.cache.mkdir(parents=True, exist_ok=True)
    tmp = collection.cache / f"docs.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        count = write(tmp)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if not count:
        shutil.rmtree(tmp, ignore_errors=True)
        raise CollectionError(
            f"{collection.folder / 'collection.toml'}: include {list(collection.include)} matches no "
            f"file under {collection.root or 'the top'} of {collection.origin} "
            f"(after exclude {list(collection.exclude)})")
    _swap_in(tmp, collection.docs)
    (collection.cache / "VERSION").write_text(version_line + "\n", encoding="utf-8")
    (collection.cache / "fetched.json").write_text(
        json.dumps({"selection": wanted, "version": version, "files": count, "notes": notes}, indent=1) + "\n",
        encoding="utf-8")
    return collection.docs


def fetch(collection: Collection, quiet: bool = False) -> Path:
    """docs/ of the collection, built when missing or when its selection changed."""
    if collection.repo:
        return fetch_git(collection, quiet)
    return fetch_debian(collection, quiet)


# -- Debian packages --------------------------------------------------------------------

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
            raise CollectionError(
                f"apt-get download {package} failed (exit {r.returncode}: {_last_line(r.stderr)}). If the "
                f"package list is old or missing, run `apt-get update` and try again; "
                f"`apt-cache policy {package}` shows whether Debian has the package")
    if len(found) == 1:
        return found[0]
    versions = {deb: _deb_version(deb) for deb in found}
    return max(found, key=functools.cmp_to_key(lambda a, b: _compare_versions(versions[a], versions[b])))


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
    rels: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames.sort()
        for fname in sorted(filenames + [d for d in dirnames if (Path(dirpath) / d).is_symlink()]):
            rels.append((Path(dirpath) / fname).relative_to(root).as_posix())
    taken, notes = chosen(collection, rels)
    files: list[tuple[str, Path]] = []
    left_out: list[str] = []
    for rel in taken:
        real = _resolve_in(pkg, root / rel)
        if real is None:
            left_out.append(f"{rel}: a link to nothing inside the package, left out")
            continue
        files.append((rel.removesuffix(".gz"), real))
    return files, left_out + notes


def fetch_debian(collection: Collection, quiet: bool) -> Path:
    deb = package_file(collection.package or "")
    wanted = collection.selection() | {"deb": deb.name}
    if fresh(collection, wanted):
        return collection.docs
    files, notes = selected_files(collection, unpacked(collection, deb))

    def write(tmp: Path) -> int:
        for rel, src in files:
            dest = tmp / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            if src.name.endswith(".gz"):
                with gzip.open(src, "rb") as fin, dest.open("wb") as fout:
                    shutil.copyfileobj(fin, fout)
            else:
                shutil.copyfile(src, dest)
        return len(files)

    version = _deb_version(deb)
    return publish(collection, wanted, version, f"{collection.package} {version}", notes, write, quiet)


# -- git repositories -------------------------------------------------------------------

def _git(git_dir: Path, *args: str, stdin: bytes | None = None, text: bool = True) -> subprocess.CompletedProcess:
    return _run(["git", f"--git-dir={git_dir}", *args], stdin=stdin, text=text,
                env=os.environ | {"GIT_TERMINAL_PROMPT": "0"})


def mirrored(repo: str) -> tuple[Path | None, list[Path]]:
    """The repository's bare git directory in CITEBOT_GIT_MIRRORS (None when no mirror holds
    it), and the places looked in."""
    looked: list[Path] = []
    for base in filter(None, os.environ.get(MIRRORS_VARIABLE, "").split(os.pathsep)):
        folder = Path(base) / repo.replace("/", "+") / "repo"
        for candidate in (folder / ".git", folder):
            looked.append(candidate)
            if (candidate / "objects").is_dir() and (candidate / "HEAD").is_file():
                return candidate, looked
    return None, looked


def _cloned(repo: str, commit: str, looked: list[Path]) -> Path:
    """A bare clone in the cache holding the commit (cloned, or fetched into, as needed)."""
    url = f"{GIT_HOST}/{repo}"
    target = CACHE / "git" / (repo.replace("/", "+") + ".git")
    where = (f"no mirror holds it (looked in {', '.join(map(str, looked))})" if looked
             else f"{MIRRORS_VARIABLE} is not set")

    def failed(what: str, r: subprocess.CompletedProcess) -> CollectionError:
        return CollectionError(
            f"{repo}: {where}, and {what} failed (exit {r.returncode}: {_last_line(r.stderr)}). "
            f"Without a network, set {MIRRORS_VARIABLE} to a folder holding "
            f"{repo.replace('/', '+')}/repo (a bare git directory of {url})")

    if not target.is_dir():
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f"{target.name}.tmp-{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        r = _run(["git", "clone", "--bare", "--quiet", url, str(tmp)], env=os.environ | {"GIT_TERMINAL_PROMPT": "0"})
        if r.returncode != 0:
            shutil.rmtree(tmp, ignore_errors=True)
            raise failed(f"git clone {url}", r)
        tmp.rename(target)
    if _git(target, "cat-file", "-e", f"{commit}^{{commit}}").returncode != 0:
        r = _git(target, "fetch", "--quiet", url, commit)
        if r.returncode != 0:
            raise failed(f"git fetch {url} {commit}", r)
    return target


def git_dir(repo: str, commit: str) -> Path:
    """A git directory holding the repository at the commit: a mirror's, else a clone."""
    found, looked = mirrored(repo)
    if found is None:
        return _cloned(repo, commit, looked)
    if _git(found, "cat-file", "-e", f"{commit}^{{commit}}").returncode != 0:
        raise CollectionError(
            f"{repo}: commit {commit} is not in the mirror {found}; check `commit` in collection.toml "
            f"(`git --git-dir={found} log --oneline` lists the commits there) or refresh the mirror")
    return found


def fetch_git(collection: Collection, quiet: bool) -> Path:
    repo, commit = collection.repo or "", collection.commit or ""
    wanted = collection.selection()
    if fresh(collection, wanted):
        return collection.docs
    gd = git_dir(repo, commit)
    spec = f"{commit}:{collection.root}" if collection.root else f"{commit}^{{tree}}"
    if _git(gd, "cat-file", "-e", spec).returncode != 0 or \
            _git(gd, "cat-file", "-t", spec).stdout.strip() != "tree":
        raise CollectionError(f"{collection.folder / 'collection.toml'}: root {collection.root!r} is not a "
                              f"folder of {repo} at {commit} (in {gd})")
    r = _git(gd, "ls-tree", "-r", "-z", spec, text=False)
    if r.returncode != 0:
        raise CollectionError(f"git ls-tree {spec} in {gd} failed: {r.stderr.decode(errors='replace').strip()}")
    entries: dict[str, tuple[str, str]] = {}
    for record in filter(None, r.stdout.split(b"\0")):
        meta, _, path = record.partition(b"\t")
        mode, kind, sha = meta.decode().split()
        entries[path.decode("utf-8", errors="surrogateescape")] = (mode, sha if kind == "blob" else "")
    taken, notes = chosen(collection, sorted(entries))
    blobs: list[tuple[str, str]] = []
    left_out: list[str] = []
    for rel in taken:
        mode, sha = entries[rel]
        if mode not in ("100644", "100755"):
            left_out.append(f"{rel}: a {'link' if mode == '120000' else 'submodule'} in the repository, left out")
            continue
        blobs.append((rel, sha))
    notes = left_out + notes

    def write(tmp: Path) -> int:
        if not blobs:
            return 0
        out = _git(gd, "cat-file", "--batch", stdin="".join(f"{sha}\n" for _, sha in blobs).encode(), text=False)
        if out.returncode != 0:
            raise CollectionError(f"git cat-file --batch in {gd} failed: "
                                  f"{out.stderr.decode(errors='replace').strip()}")
        data, at = out.stdout, 0
        for rel, sha in blobs:
            header_end = data.index(b"\n", at)
            got, _, size = data[at:header_end].decode().split()
            if got != sha:
                raise CollectionError(f"git cat-file --batch in {gd} answered {got} for {sha}")
            start = header_end + 1
            dest = tmp / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(data[start:start + int(size)])
            at = start + int(size) + 1
        return len(blobs)

    return publish(collection, wanted, commit, f"{repo} {commit}", notes, write, quiet)

"""git for `citebot sync`: the command-line git, run as a subprocess.

git itself rather than a library: it is on every machine that holds a repository, it
authenticates by the usual means (SSH keys and agents, credential helpers, .netrc), and it
adds no dependency (docs/decisions/0035-sources-and-sync.md). Every command runs with a
timeout and GIT_TERMINAL_PROMPT=0 (a missing credential fails, never waits for a person).

A source's repository is cloned once (a bare repository in the sync cache); each sync
fetches the branch (or the remote's default) by its URL, so a force-push upstream simply
gives another commit. A token (`token_env`) goes to git as an http.extraHeader through
GIT_CONFIG_COUNT/KEY/VALUE in that one command's environment: never on a command line
(which `ps` shows), never in a file, never in a log line.
"""

from __future__ import annotations

import base64
import hashlib
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from search.config import redact_url
from search.errors import CitebotError

# How long one git command may take. A fetch of a large repository over a slow link is the
# longest; ten minutes is far above the seconds a handbook takes and still ends a hung one
# (docs/decisions/0035-sources-and-sync.md).
GIT_TIMEOUT_S = 600.0


class GitError(CitebotError):
    """A git command that failed; the message says which and why (credentials masked)."""


@dataclass(frozen=True)
class Entry:
    """One entry of a commit's tree under the source's folder."""

    mode: str  # 100644, 100755, 120000 (symbolic link), 160000 (submodule)
    sha: str  # the object's id (a blob's, or a submodule's commit)
    size: int | None  # bytes of a blob
    path: str  # relative to the source's folder


def blob_id(data: bytes) -> str:
    """The id git gives this content as a blob (to tell a staged file git would not change)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


def _env(token: str | None, user: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_CONFIG_")}
    env.update(
        GIT_TERMINAL_PROMPT="0",
        GIT_ASKPASS="",
        SSH_ASKPASS="",
        LC_ALL="C",
        GIT_SSH_COMMAND=env.get("GIT_SSH_COMMAND", "ssh -o BatchMode=yes"),
    )
    if token:
        basic = base64.b64encode(f"{user}:{token}".encode()).decode()
        env.update(
            GIT_CONFIG_COUNT="1",
            GIT_CONFIG_KEY_0="http.extraHeader",
            GIT_CONFIG_VALUE_0=f"Authorization: Basic {basic}",
        )
    return env


def run(
    args: list[str],
    *,
    cwd: Path | None = None,
    token: str | None = None,
    user: str = "x-access-token",
    timeout: float = GIT_TIMEOUT_S,
    shown: str = "",
) -> bytes:
    """Run `git ARGS`; its stdout, or GitError with git's own last line."""
    what = shown or " ".join(args[:2])
    try:
        proc = subprocess.run(
            ["git", *args],
            cwd=cwd,
            env=_env(token, user),
            capture_output=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except FileNotFoundError:
        raise GitError("git is not installed: install git to sync git sources") from None
    except subprocess.TimeoutExpired:
        raise GitError(f"git {what} took over {timeout:.0f} s and was stopped") from None
    if proc.returncode != 0:
        lines = [ln.strip() for ln in proc.stderr.decode("utf-8", "replace").splitlines() if ln.strip()]
        reason = next(
            (ln for ln in reversed(lines) if ln.startswith(("fatal:", "error:"))),
            lines[-1] if lines else f"exit status {proc.returncode}",
        )
        if token:
            reason, what = reason.replace(token, "***"), what.replace(token, "***")
        raise GitError(f"git {what} failed: {reason}")
    return proc.stdout


def fetch(repo: Path, url: str, branch: str | None, *, token: str | None = None, user: str = "x-access-token") -> str:
    """Clone once (a bare repository at `repo`), fetch the branch (the remote's default when
    None) and return its commit."""
    if not (repo / "HEAD").exists():
        repo.parent.mkdir(parents=True, exist_ok=True)
        run(["init", "--bare", "--quiet", str(repo)])
    ref = f"refs/heads/{branch}" if branch else "HEAD"
    # --force: a force-pushed branch is fetched as it is now; the URL is given each time so
    # nothing of it (or a token) is kept in the repository's config.
    run(
        ["fetch", "--quiet", "--force", "--no-tags", "--no-recurse-submodules", "--", url, ref],
        cwd=repo,
        token=token,
        user=user,
        shown=f"fetch {redact_url(url)} {branch or '(default branch)'}",
    )
    return run(["rev-parse", "--verify", "FETCH_HEAD^{commit}"], cwd=repo).decode().strip()


def entries(repo: Path, commit: str, sub: str) -> list[Entry]:
    """The files, links and submodules of the commit under `sub` (all when "")."""
    args = ["ls-tree", "-r", "-l", "-z", "--full-tree", commit]
    if sub:
        args += ["--", sub + "/"]
    out = []
    for record in run(args, cwd=repo).split(b"\0"):
        if not record:
            continue
        meta, _tab, raw = record.partition(b"\t")
        mode, _type, sha, size = meta.decode().split()
        path = raw.decode("utf-8", "surrogateescape")
        out.append(Entry(mode, sha, int(size) if size.isdigit() else None, path[len(sub) + 1 :] if sub else path))
    return out


def blobs(repo: Path, shas: list[str]) -> Iterator[tuple[str, bytes]]:
    """The contents of these blobs, read through one `git cat-file --batch`."""
    if not shas:
        return
    with subprocess.Popen(
        ["git", "cat-file", "--batch"],
        cwd=repo,
        env=_env(None, ""),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    ) as proc:
        assert proc.stdin is not None and proc.stdout is not None
        try:
            for sha in shas:
                proc.stdin.write(sha.encode() + b"\n")
                proc.stdin.flush()
                header = proc.stdout.readline().split()
                if len(header) != 3 or header[1] != b"blob":
                    raise GitError(f"git cat-file: object {sha} is missing from the fetched commit")
                data = proc.stdout.read(int(header[2]))
                proc.stdout.read(1)  # the newline after each object
                yield sha, data
        finally:
            proc.stdin.close()
            proc.kill()


def has_folder(repo: Path, commit: str, sub: str) -> bool:
    """Whether the commit holds the folder `sub` (a missing one is a configuration error)."""
    if not sub:
        return True
    return bool(run(["ls-tree", "-d", commit, "--", sub], cwd=repo).strip())

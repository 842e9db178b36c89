"""`citebot sync` and `citebot serve --sync-every`: the named sources (CITEBOT_SOURCES,
ingest/sources.py) brought up to date in the store (ingest/sync.py).

In the server a sync runs in a thread of its own with its own store connection and its own
copy of the model, so it never holds the lock the answers' query encoding takes: one sync
at a time (a tick that finds one running is let go), a failure logged, never fatal.
"""

from __future__ import annotations

import re
import sys
import threading
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from bot.wiring import Components
    from ingest.sync import SyncReport

_DURATION = re.compile(r"^\s*(\d+)\s*([smhd])\s*$")
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
# The shortest interval --sync-every takes: a git fetch and a re-read of every file each
# minute is already more than any team's documents change (docs/decisions/0035-sources-and-sync.md).
MIN_SYNC_EVERY_S = 60


def parse_every(value: str) -> int:
    """Seconds of a "30m", "1h", "1d" interval; click.BadParameter with the fix otherwise."""
    m = _DURATION.match(value or "")
    if not m:
        raise click.BadParameter(f"{value!r} is not an interval: write a number and s, m, h or d, e.g. 1h")
    seconds = int(m.group(1)) * _SECONDS[m.group(2)]
    if seconds < MIN_SYNC_EVERY_S:
        raise click.BadParameter(f"{value!r} is under a minute: sync at most once a minute, e.g. 15m")
    return seconds


def _selected(c: Components, names: tuple[str, ...]):
    sources = c.sources
    if c.settings.sources is None:
        raise click.UsageError(
            "CITEBOT_SOURCES is unset: point it at a TOML file of [sources.NAME] "
            'tables (docs/using.md, "Sources and sync")'
        )
    known = {s.name for s in sources}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise click.UsageError(
            f"no source named {', '.join(unknown)} in {c.settings.sources} (it names {', '.join(sorted(known))})"
        )
    return [s for s in sources if not names or s.name in names]


def run_sync(
    c: Components, names: tuple[str, ...] = (), *, progress: bool | None = None, on_report=None
) -> list[SyncReport]:
    """Sync the named sources (all when none are named) with these components."""
    from ingest.sync import sync

    sources = _selected(c, names)
    s = c.settings
    return sync(
        sources,
        c.store,
        c.embedder,
        s.sync_folder(),
        tokens=c.source_tokens,
        limits=s.ingest_limits(),
        progress=progress,
        source_url=s.source_url,
        on_report=on_report,
    )


def _line(r: SyncReport) -> str:
    at = f" {r.commit[:12]}" if r.commit else ""
    if r.error:
        return f"{r.name} ({r.kind}{at}): FAILED, its documents are kept as they were: {r.error}"
    return (
        f"{r.name} ({r.kind}{at}): added {r.added}, changed {r.changed}, deleted {r.deleted}, "
        f"skipped {len(r.skipped)} in {r.seconds:.1f} s"
    )


@click.command("sync")
@click.argument("names", nargs=-1)
@click.option("--json", "as_json", is_flag=True, help='Print {"sources": [...]} as JSON.')
@click.pass_obj
def sync_command(obj, names: tuple[str, ...], as_json: bool) -> None:
    """Bring the sources of CITEBOT_SOURCES (or the NAMEs given) up to date in the store."""
    import json

    def show(r: SyncReport) -> None:
        if as_json:
            return
        click.echo(_line(r))
        for sk in r.skipped:
            click.echo(f"  skipped {sk.source}: {sk.reason}")
        for w in r.warnings:
            click.echo(f"  warning {w.source}: {w.reason}")

    reports = run_sync(obj.components, names, progress=None if not as_json else False, on_report=show)
    if as_json:
        click.echo(json.dumps({"sources": [r.as_json() for r in reports]}, ensure_ascii=False))
    if any(r.error for r in reports):
        sys.exit(1)


class Syncer:
    """The server's periodic sync: a daemon thread, one sync at a time, failures logged."""

    def __init__(self, components: Components, every_s: int) -> None:
        from bot.wiring import Components as Fresh

        self.every_s = every_s
        self.components = Fresh(components.settings)  # its own store and model (see the docstring)
        self.components.sources  # noqa: B018  # a bad sources file stops the start, here
        self.running = threading.Lock()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="citebot-sync", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def _loop(self) -> None:
        """A sync at start (a restarted server catches up), then one every interval."""
        while True:
            self.tick()
            if self.stop.wait(self.every_s):
                return

    def tick(self) -> list[SyncReport] | None:
        """One sync now, unless one is running (then None)."""
        import structlog

        log = structlog.get_logger("citebot.sync")
        if not self.running.acquire(blocking=False):
            log.info("sync_skipped", reason="a sync is still running")
            return None
        try:
            reports = run_sync(self.components, progress=False)
            for r in reports:
                fields = r.as_json()
                (log.warning if r.error else log.info)("sync_source", **fields)
            return reports
        except Exception as exc:  # noqa: BLE001 - the server keeps answering; the log says why
            log.error("sync_failed", error=str(exc))
            return None
        finally:
            self.running.release()

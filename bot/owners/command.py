"""`citebot gaps`: the gaps report on the command line (bot/owners/gaps.py builds it)."""

from __future__ import annotations

import json
from typing import Any

import click


def _period(_ctx: click.Context, _param: click.Parameter, value: str):
    from bot.owners.gaps import parse_period

    try:
        return parse_period(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


def render(report: dict[str, Any], label: str) -> str:
    """The report for a person to read."""
    period = report.get("period") or {}
    lines = [
        (
            f"Gaps in the last {label} (since {str(period.get('since', ''))[:16]} UTC): "
            f"{len(report['topics'])} topics from {period.get('turns', 0)} turns; "
            f"{len(report['stale'])} stale citations"
        )
    ]
    for n, t in enumerate(report["topics"], 1):
        change = f"{t['change']:+d} on the {label} before"
        lines.append(
            f"\n{n}. {_n(t['size'], 'question')}, {_n(t['askers'], 'asker')}, "
            f"{_n(t['channels'], 'channel')} ({change})"
            + (f"; asked by {', '.join(t['users'])}" if t.get("users") else "")
        )
        for q in t["questions"]:
            who = f" {q['user']}" if q.get("user") else ""
            lines.append(f'   "{q["question"]}"  ({q["outcome"]}, {q["turn_id"]}{who})')
        for d in t["nearest"]:
            lines.append(
                f"   nearest: {d['source']}" + (f" — {' > '.join(d['heading_path'])}" if d["heading_path"] else "")
            )
    if report["stale"]:
        lines.append("\nStale citations (the passage an answer quoted has changed since):")
        lines += [f"   {s['turn_id']}  {s['source']}  chunk {s['chunk_id']}" for s in report["stale"]]
    return "\n".join(lines)


@click.command()
@click.option(
    "--since",
    "period",
    default="7d",
    show_default=True,
    callback=_period,
    help="The period to report: hours, days or weeks (24h, 7d, 2w).",
)
@click.option(
    "--channel",
    "channels",
    multiple=True,
    metavar="ID",
    help="Only this channel's turns, naming only sources its scope may read (repeatable).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON (docs/contracts.md).")
@click.option("--with-users", is_flag=True, help="Print the askers' user ids (left out otherwise).")
@click.pass_obj
def gaps(obj: Any, period, channels: tuple[str, ...], as_json: bool, with_users: bool) -> None:
    """What citebot could not answer well, by topic, and answers gone stale."""
    from bot.owners.gaps import build_report, contract

    c = obj.components
    scopes = c.scopes
    store = c.reading_store()
    report = build_report(
        c.turnlog,
        store,
        c.embedder.encode_texts,
        period=period,
        channels=channels,
        scope_of=(lambda ch: scopes.for_channel(ch).scope) if channels else (lambda _c: None),
        with_users=with_users,
        dims=store.stamp().dims if store.stamp() else None,
    )
    if as_json:
        click.echo(json.dumps(contract(report), ensure_ascii=False))
    else:
        click.echo(render(report, _label(period)))


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _label(period) -> str:
    seconds = int(period.total_seconds())
    for unit, size in (("days", 86400), ("hours", 3600)):
        if seconds % size == 0:
            n = seconds // size
            return _n(n, unit[:-1])
    return f"{seconds} seconds"

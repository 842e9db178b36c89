"""The /admin pages as HTML strings: server-rendered, inline SVG charts, no JavaScript.

Everything that comes from a person or a document (questions, sources, headings, answers)
passes through `e` (html.escape, quotes included) before it is written, and the server
sends a Content-Security-Policy that allows no script at all (bot/admin/app.py), so a
question holding markup shows as text.
"""

from __future__ import annotations

import html
from collections import Counter
from collections.abc import Sequence
from typing import Any
from urllib.parse import quote, urlencode

from bot.admin.data import DAY_OUTCOMES, FILTERS

# One colour per outcome, bottom of the bar first (DAY_OUTCOMES); chosen to stay apart
# for the common kinds of colour blindness (Okabe-Ito palette).
COLOURS = {
    "answered": "#009E73",
    "weak": "#F0E442",
    "voted_down": "#E69F00",
    "failed_check": "#D55E00",
    "refused": "#56B4E9",
    "failed": "#999999",
}
CHART_W, CHART_H = 760, 180

STYLE = """
body{font:15px/1.45 system-ui,sans-serif;margin:1.5em auto;max-width:1100px;padding:0 1em;color:#222}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:1.8em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;width:100%}td,th{padding:.25em .5em;border-bottom:1px solid #eee;
text-align:left;vertical-align:top}th{background:#f6f6f6}nav a{margin-right:1em}
.n{text-align:right}.q{font-style:italic}pre{white-space:pre-wrap;background:#f8f8f8;padding:1em}
.muted{color:#666}.tag{font-size:.85em;padding:0 .4em;border-radius:3px;background:#eee}
"""


def e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def page(title: str, body: str, scope_note: str) -> str:
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{e(title)} — citebot</title><style>{STYLE}</style></head><body>"
        '<nav><a href="/admin">Overview</a><a href="/admin/turns">Turns</a></nav>'
        f'<h1>{e(title)}</h1><p class="muted">{e(scope_note)}</p>{body}</body></html>'
    )


def _link(path: str, **params: str) -> str:
    return e(path + ("?" + urlencode(params) if params else ""))


def chart(days: Sequence[tuple[str, Counter]]) -> str:
    """Answers per day, stacked by outcome, as an inline SVG with a legend."""
    top = max([sum(c.values()) for _, c in days] + [1])
    slot = CHART_W / max(len(days), 1)
    bars = []
    for i, (day, counts) in enumerate(days):
        y = float(CHART_H)
        for kind in DAY_OUTCOMES:
            if not counts[kind]:
                continue
            h = counts[kind] / top * (CHART_H - 10)
            y -= h
            bars.append(
                f'<rect x="{i * slot + 2:.1f}" y="{y:.1f}" width="{max(slot - 4, 1):.1f}" '
                f'height="{h:.1f}" fill="{COLOURS[kind]}"><title>{e(day)}: '
                f"{counts[kind]} {e(kind.replace('_', ' '))}</title></rect>"
            )
        if len(days) <= 31 and (i % max(len(days) // 10, 1) == 0):
            bars.append(f'<text x="{i * slot + 2:.1f}" y="{CHART_H + 14}" font-size="10">{e(day[5:])}</text>')
    legend = " ".join(
        f'<span class="tag" style="background:{COLOURS[k]}">{e(k.replace("_", " "))}</span>' for k in DAY_OUTCOMES
    )
    total = sum(sum(c.values()) for _, c in days)
    return (
        f'<svg role="img" aria-label="answers per day by outcome" width="{CHART_W}" '
        f'height="{CHART_H + 20}" viewBox="0 0 {CHART_W} {CHART_H + 20}">'
        f'<line x1="0" y1="{CHART_H}" x2="{CHART_W}" y2="{CHART_H}" stroke="#888"/>'
        + "".join(bars)
        + f'</svg><p>{legend} <span class="muted">{total} turns; '
        f"tallest bar {top}</span></p>"
    )


def topics(report: dict[str, Any]) -> str:
    if not report["topics"]:
        return "<p>No questions went unanswered in this period.</p>"
    items = []
    for n, t in enumerate(report["topics"], 1):
        questions = "".join(
            f'<li class="q">“{e(q["question"])}” <a href="{_link("/admin/turns/" + quote(str(q["turn_id"])))}">'
            f"{e(q['outcome'].replace('_', ' '))}</a></li>"
            for q in t["questions"]
        )
        nearest = "".join(
            f"<li>{e(d['source'])}" + (f" — {e(' > '.join(d['heading_path']))}" if d["heading_path"] else "") + "</li>"
            for d in t["nearest"]
        )
        items.append(
            f"<li><b>{t['size']} question{'s' * (t['size'] != 1)}</b>, {t['askers']} asker(s), "
            f"{t['channels']} channel(s), {t['change']:+d} on the period before"
            f"<ul>{questions}</ul>" + (f"<p>Nearest documents:</p><ul>{nearest}</ul>" if nearest else "") + "</li>"
        )
    return "<ol>" + "".join(items) + "</ol>"


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], numeric: Sequence[int] = ()) -> str:
    """Cells are HTML already (callers escape); `numeric`: columns aligned right."""
    head = "".join(f"<th>{e(h)}</th>" for h in headers)
    body = "".join(
        "<tr>" + "".join(f"<td{' class=n' if i in numeric else ''}>{c}</td>" for i, c in enumerate(r)) + "</tr>"
        for r in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def overview(
    report: dict[str, Any],
    days: Sequence[tuple[str, Counter]],
    cover: Sequence[dict[str, Any]],
    history: dict[str, Any],
    label: str,
) -> str:
    stale = len(report["stale"])
    parts = [
        "<h2>Answers per day by outcome</h2>",
        chart(days),
        f"<h2>Gaps: topics citebot could not answer well (last {e(label)})</h2>",
        topics(report),
        (
            f'<p><a href="{_link("/admin/turns", filter="stale")}">{stale} stale citation(s)</a>: '
            "answers whose quoted passage has changed since.</p>"
        ),
        "<h2>Coverage by folder</h2>",
        table(
            ["Folder", "Documents", "Chunks", "Turns citing it", "Gaps nearest it"],
            [[e(c["folder"]), str(c["documents"]), str(c["chunks"]), str(c["cited"]), str(c["gaps"])] for c in cover],
            numeric=(1, 2, 3, 4),
        ),
        "<h2>Ingest history</h2>",
        (
            f"<p>{history['documents']} documents; model {e(history['model'] or 'none')}. Chunks written "
            "with a new text, by day (what the store records of ingests and syncs):</p>"
        ),
        table(
            ["Day (UTC)", "Chunks written", "Documents"],
            [[e(d["day"]), str(d["chunks"]), str(d["documents"])] for d in history["days"]],
            numeric=(1, 2),
        ),
    ]
    if history["unrecorded"]:
        parts.append(f'<p class="muted">{history["unrecorded"]} chunks were stored before citebot recorded when.</p>')
    return "".join(parts)


def turns(rows: Sequence[dict[str, Any]], which: str, stale: set[str], outcome_of: Any, label: str) -> str:
    links = " ".join(
        f"<b>{e(f)}</b>" if f == which else f'<a href="{_link("/admin/turns", filter=f)}">{e(f)}</a>' for f in FILTERS
    )
    body = [
        [
            f'<a href="{_link("/admin/turns/" + quote(str(r.get("turn_id"))))}">{e(r.get("turn_id"))}</a>',
            e(str(r.get("created_at") or "")[:16].replace("T", " ")),
            e(r.get("channel") or r.get("surface") or ""),
            f"<span class=q>{e(r.get('question') or '')}</span>",
            e(outcome_of(r).replace("_", " ")) + (" <span class=tag>stale</span>" if r.get("turn_id") in stale else ""),
        ]
        for r in rows
    ]
    return (
        f"<p>Filter: {links}</p><p class=muted>{len(rows)} turn(s) in the last {e(label)}, newest first.</p>"
        + table(["Turn", "Asked (UTC)", "Channel", "Question", "Outcome"], body)
    )


def explanation(text: str, turn_id: str) -> str:
    """A turn's explanation as `/ask why` shows it (its Slack text, shown as plain text)."""
    return f"<pre>{e(text)}</pre><p class=muted>The whole record: <code>citebot turns show {e(turn_id)}</code></p>"


def login_form(message: str = "") -> str:
    return page(
        "Sign in",
        (f"<p>{e(message)}</p>" if message else "") + '<form method="post" action="/admin/login"><label>Admin token '
        '<input type="password" name="token" autocomplete="off"></label> '
        "<button>Sign in</button></form>",
        "The token is CITEBOT_ADMIN_TOKEN's.",
    )

"""The `citebot` command line: ingest, sync, chunks, search, ask, chat, eval, turns, gaps, serve.

Settings come from the environment (CITEBOT_ prefix) and .env, read once here; the
components are built from them and handed on. Errors exit non-zero with the message.
"""

from __future__ import annotations

import gc
import json
import logging
import sys
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

import click

from bot.sync import sync_command
from search.errors import CitebotError

if TYPE_CHECKING:
    from bot.settings import Settings
    from bot.wiring import Components

# The retrieval modes (search.retrieval_config.MODES; tests/test_extractive.py checks they agree).
# Spelled here so `citebot --help` imports neither numpy nor the retriever: a command
# imports only what it uses (see bot/wiring.py).
MODES = ("dense", "lexical", "hybrid")
# One question, then the process ends: no cyclic garbage collection while these run. Their
# imports make some 600 modules' objects, which the collector walked again and again: about
# 80 ms of `ask`'s CPU at load 7 (docs/decisions/0051-settings-without-pydantic-settings.md).
ONE_QUESTION_COMMANDS = ("ask", "search")


def _emit(obj: object) -> None:
    click.echo(json.dumps(obj, ensure_ascii=False))


def _link(obj: _Context, chunk, section=None) -> str | None:
    """Where a person opens a chunk: its document's address or CITEBOT_SOURCE_URL, with its
    anchor (or with a section's, for a chunk that joins short sections)."""
    from search.links import link_for

    anchor = chunk.anchor if section is None else section.anchor
    return link_for(chunk.source, chunk.url, anchor, obj.components.settings.source_url)


class _Context:
    def __init__(self, settings: Settings) -> None:
        from bot.wiring import Components

        self.components: Components = Components(settings)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--store",
    type=click.Path(path_type=Path),
    envvar="CITEBOT_STORE",
    help="Embedded store directory (env CITEBOT_STORE).",
)
@click.pass_context
def cli(ctx: click.Context, store: Path | None) -> None:
    """citebot: answers from your documents, every claim cited and checked."""
    if ctx.invoked_subcommand in ONE_QUESTION_COMMANDS:
        gc.disable()
    from bot.logs import configure
    from bot.settings import load_settings

    overrides = {"store": store} if store else {}
    settings = load_settings(**overrides)
    configure(settings.log_format)
    ctx.obj = _Context(settings)


@cli.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@click.pass_obj
def ingest(obj: _Context, paths: tuple[Path, ...], as_json: bool) -> None:
    """Ingest files and folders into the configured store (idempotent)."""
    from ingest.pipeline import ingest as run_ingest

    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        raise click.UsageError(f"no such file or folder: {', '.join(missing)}")
    c = obj.components
    summary = run_ingest(
        paths,
        c.store,
        c.embedder,
        progress=None if not as_json else False,
        source_url=c.settings.source_url,
        limits=c.settings.ingest_limits(),
    )
    if as_json:
        _emit(summary.as_json())
        return
    click.echo(
        f"Ingested {summary.documents} document(s), {summary.chunks} chunk(s) in "
        f"{summary.seconds:.1f} s; unchanged {summary.unchanged}, deleted {summary.deleted}, "
        f"skipped {len(summary.skipped)}."
    )
    for s in summary.skipped:
        click.echo(f"  skipped {s.source}: {s.reason}")
    for w in summary.warnings:
        click.echo(f"  warning {w.source}: {w.reason}")


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="One JSON object per chunk.")
@click.pass_obj
def chunks(obj: _Context, as_json: bool) -> None:
    """What the store holds, in reading order."""
    for c in obj.components.store.iter_chunks():
        if as_json:
            _emit(
                {
                    "chunk_id": c.chunk_id,
                    "source": c.source,
                    "heading_path": list(c.heading_path),
                    "page": c.page,
                    "ordinal": c.ordinal,
                    "tokens": c.tokens,
                    "text": c.text,
                    "url": _link(obj, c),
                    **(
                        {
                            "sections": [
                                {"start": s.start, "heading_path": list(s.heading_path), "url": _link(obj, c, s)}
                                for s in c.sections
                            ]
                        }
                        if c.sections
                        else {}
                    ),
                }
            )
        else:
            page = f" p.{c.page}" if c.page else ""
            url = _link(obj, c)
            click.echo(
                f"{c.chunk_id}  {c.source}#{c.ordinal}{page}  {c.tokens} tok  "
                f"{' > '.join(c.heading_path)}" + (f"  {url}" if url else "")
            )


def _channel_option(f):
    return click.option(
        "--channel",
        default=None,
        metavar="ID",
        help="Answer under this Slack channel's scope (CITEBOT_SCOPES), e.g. C0123ENG.",
    )(f)


def _channel_scope(c: Components, channel: str | None):
    """The scope of a channel in CITEBOT_SCOPES; None (the whole collection) without --channel."""
    if channel is None:
        return None
    policy = c.scopes.for_channel(channel)
    click.echo(
        f"scope {policy.scope.name}: {policy.scope.describe()}"
        + (' (citebot does not reply in this channel: reply = "off")' if policy.reply == "off" else ""),
        err=True,
    )
    return policy.scope


def _mode_option(f):
    return click.option(
        "--mode", type=click.Choice(MODES), default="hybrid", show_default=True, help="Which arm(s) to use."
    )(f)


@cli.command()
@click.argument("query")
@_mode_option
@click.option("-k", "--top-k", type=int, default=None, help="How many hits.")
@_channel_option
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
def search(obj: _Context, query: str, mode: str, top_k: int | None, channel: str | None, as_json: bool) -> None:
    """Retrieval only: the passages a question would get."""
    scope = _channel_scope(obj.components, channel)
    retriever = obj.components.retriever()
    r = retriever.retrieve(query, mode=mode, top_k=top_k, scope=scope)
    if as_json:
        _emit(
            {
                "hits": [
                    {
                        "chunk_id": h.chunk.chunk_id,
                        "source": h.chunk.source,
                        "heading_path": list(h.chunk.heading_path),
                        "page": h.chunk.page,
                        "text": h.chunk.text,
                        "url": _link(obj, h.chunk),
                        "score": h.score,
                        "ranks": {"dense": h.dense_rank, "lexical": h.lexical_rank},
                        "reasons": h.reasons,
                    }
                    for h in r.hits
                ],
                "timings_ms": r.timings_ms,
                "support": {
                    "dense_top": r.support.dense_top,
                    "coverage": r.support.coverage,
                    "addressed": r.support.addressed,
                },
                "expansions": [{"found": e.found, "expands_to": e.expands_to} for e in r.expansions],
                "corrections": r.corrections,
                "addresses": r.addresses,
            }
        )
        return
    for i, h in enumerate(r.hits, 1):
        page = f" p.{h.chunk.page}" if h.chunk.page else ""
        first = " ".join(h.chunk.text.split())[:160]
        click.echo(
            f"{i:2}. {h.score:.4f} [dense {h.dense_rank or '-'} lexical {h.lexical_rank or '-'}]"
            f"{' ' + ','.join(h.reasons) if h.reasons else ''}  {h.chunk.source}{page} — "
            f"{' > '.join(h.chunk.heading_path)}\n    {first}…"
            + (f"\n    {url}" if (url := _link(obj, h.chunk)) else "")
        )


def _print_turn(record, as_json: bool) -> None:
    if as_json:
        _emit(record.contract_json())
        return
    click.echo(record.answer)
    if record.label:
        click.echo(f"({record.label})")
    if record.passages and not record.refused:
        click.echo("Sources:")
        for p in record.passages:
            page = f", p. {p['page']}" if p["page"] else ""
            old = " (superseded)" if p.get("superseded") else ""
            url = f"  {p['url']}" if p.get("url") else ""
            click.echo(f"  [{p['number']}] {p['source']} — {' > '.join(p['heading_path'])}{page}{old}{url}")
    click.echo(f"turn {record.turn_id}")


@cli.command()
@click.argument("question")
@_channel_option
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
def ask(obj: _Context, question: str, channel: str | None, as_json: bool) -> None:
    """One grounded turn: an answer with checked citations, or an earned refusal."""
    scope = _channel_scope(obj.components, channel)
    record = obj.components.answerer.ask(question, surface="cli", channel=channel, scope=scope)
    _print_turn(record, as_json)
    if record.error:
        sys.exit(1)


@cli.command()
@click.pass_obj
def chat(obj: _Context) -> None:
    """A console conversation: each line continues one thread (empty line or Ctrl-D ends)."""
    answerer = obj.components.answerer
    thread = "chat-" + uuid.uuid4().hex[:8]
    interactive = sys.stdin.isatty()
    if sys.stderr.isatty():
        # The per-turn log line is for servers; on a terminal it would interleave with
        # the conversation. The turn is still recorded in the turn log.
        logging.getLogger("citebot.turn").setLevel(logging.WARNING)
    if interactive:
        click.echo("citebot chat — ask about the collection; follow-ups continue the thread. Ctrl-D to leave.")
    while True:
        try:
            line = input("you> " if interactive else "")
        except EOFError:
            break
        question = line.strip()
        if not question:
            if interactive:
                continue
            break
        if not interactive:
            click.echo(f"you> {question}")
        record = answerer.ask(question, thread_key=thread, surface="chat")
        click.echo("citebot> ", nl=False)
        _print_turn(record, False)
        click.echo("")


@cli.command(name="eval")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@_mode_option
@click.option(
    "--split",
    type=click.Choice(["all", "dev", "heldout"]),
    default="all",
    show_default=True,
    help="Which part of the labelled set (tune on dev only).",
)
@click.option(
    "--compare",
    nargs=2,
    metavar="A B",
    default=None,
    help="Compare two configurations, e.g. --compare hybrid-aliases hybrid "
    "(mode, then +/-aliases, typos, rare, phrase, joined, stems, rerank, widen): each metric "
    "with B - A and a paired-bootstrap 95% interval (10,000 resamples).",
)
@click.option(
    "--answers",
    is_flag=True,
    help="Also run the whole turn per item (a fresh thread each) and measure what "
    "the answer quotes: a label given, a label quoted.",
)
@click.option("--json", "as_json", is_flag=True, help="Per-item JSON lines, then the summary.")
@click.pass_obj
def eval_cmd(
    obj: _Context, file: Path, mode: str, split: str, compare: tuple[str, str] | None, answers: bool, as_json: bool
) -> None:
    """Quality figures for a labelled set: Recall@1/5, MRR, refusal accuracy, per kind;
    with --answers, how often the answer quotes the labelled passage."""
    from dataclasses import replace

    from bot.answer.gate import Gate
    from bot.evaluate import MemoryTurnLog, load_items, outcome_json, parse_config, run_answer_item, run_item, summarise
    from bot.evaluate import compare as compare_outcomes

    if answers and compare:
        raise click.UsageError("--answers and --compare do not combine: run --answers per configuration")
    items = load_items(file, split)
    if not items:
        raise click.UsageError(f"{file} has no items in split {split!r}")
    c = obj.components
    base = c.retrieval_config()
    gate = Gate.for_model(c.embedder.stamp.name)
    if compare:
        runs = []
        for spec in compare:
            _, cfg = parse_config(spec, base)
            retriever = c.retriever(cfg)
            runs.append([run_item(item, retriever, gate) for item in items])
        result = compare_outcomes(runs[0], runs[1])
        if as_json:
            _emit({"a": compare[0], "b": compare[1], "split": split, "n": len(items), "metrics": result})
            return
        click.echo(f"A={compare[0]}  B={compare[1]}  split={split} items={len(items)}")
        click.echo(f"{'metric':18}{'A':>8}{'B':>8}{'B-A':>8}   95% interval (paired bootstrap)")
        for metric, f in result.items():
            click.echo(
                f"{metric:18}{f['a']:>8.3f}{f['b']:>8.3f}{f['diff']:>+8.3f}   "
                f"[{f['ci95'][0]:+.3f}, {f['ci95'][1]:+.3f}]"
            )
        return
    retriever = c.retriever(replace(base, mode=mode))
    if answers:
        # One log line per eval turn would bury the figures; the turns are the items' JSON.
        logging.getLogger("citebot.turn").setLevel(logging.WARNING)
        answerer = c.make_answerer(retriever, MemoryTurnLog())
        outcomes = [run_answer_item(item, retriever, answerer, gate, mode) for item in items]
    else:
        outcomes = [run_item(item, retriever, gate, mode) for item in items]
    summary = summarise(outcomes)
    if as_json:
        for o in outcomes:
            _emit(outcome_json(o))
        _emit({"summary": summary, "mode": mode, "split": split, "answers": answers})
        return
    click.echo(f"mode={mode} split={split} items={len(items)}")
    head = f"{'':14}{'n':>4}{'R@1':>7}{'R@5':>7}{'MRR':>7}{'refusal':>9}{'closest':>9}"
    if answers:
        head += f"{'quoted':>8}{'given':>7}{'q|given':>9}"
    click.echo(head)
    rows = [("all", summary["all"])] + list(summary["by_split"].items()) + list(summary["by_kind"].items())
    for name, f in rows:
        line = (
            f"{name:14}{f['n']:>4}{f['recall@1']:>7.3f}{f['recall@5']:>7.3f}{f['mrr']:>7.3f}"
            f"{f['refusal_accuracy']:>9.3f}{f['closest_answerable'] + f['closest_unanswerable']:>9}"
        )
        if answers and f["answerable"]:
            line += f"{f['quotes_label_rate']:>8.3f}{f['label_given']:>7}{f['quoted_when_given_rate']:>9.3f}"
        click.echo(line)


@cli.group()
def turns() -> None:
    """The turn log."""


@turns.command("show")
@click.argument("turn_id")
@click.pass_obj
def turns_show(obj: _Context, turn_id: str) -> None:
    """One logged turn, whole."""
    from bot.owners.stale import stale_of

    record = obj.components.turnlog.get_turn(turn_id)
    if record is None:
        raise click.ClickException(f"no turn {turn_id} in the turn log")
    # The cited passages that changed or vanished since (bot/owners/stale.py).
    record["stale"] = stale_of(obj.components.store, record)
    _emit(record) if not sys.stdout.isatty() else click.echo(json.dumps(record, indent=2, ensure_ascii=False))


@turns.command("purge")
@click.option("--before", help="Delete turns asked before this date (2026-01-31) or time (UTC).")
@click.option("--user", "users", multiple=True, help="Delete every turn of this Slack user id (repeatable).")
@click.option("--json", "as_json", is_flag=True, help='Print {"turns", "threads"} removed.')
@click.pass_obj
def turns_purge(obj: _Context, before: str | None, users: tuple[str, ...], as_json: bool) -> None:
    """Delete turns and the thread state they were asked in. Without options: what the
    retention (CITEBOT_TURN_RETENTION_DAYS) has expired."""
    from bot.memory.retention import cutoff, parse_before, purge

    settings = obj.components.settings
    if before is not None:
        try:
            before = parse_before(before)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--before") from None
    elif not users:
        before = cutoff(settings.turn_retention_days)
    done = purge(obj.components.turnlog, obj.components.state, before, users, recent=obj.components.recent)
    if as_json:
        _emit(done.as_dict())
    else:
        click.echo(f"purged {done.turns} turns and {done.threads} threads")


@cli.command()
@click.option("--port", type=int, default=3000, show_default=True)
@click.option("--socket", is_flag=True, help="Socket Mode (needs SLACK_APP_TOKEN).")
@click.option(
    "--sync-every",
    default=None,
    metavar="INTERVAL",
    help="Also run `citebot sync` every INTERVAL (e.g. 1h) in the background.",
)
@click.pass_obj
def serve(obj: _Context, port: int, socket: bool, sync_every: str | None) -> None:
    """The Slack bot: HTTP mode on --port, or Socket Mode with --socket."""
    from bot.wiring import serve as run_server

    syncer = None
    if sync_every is not None:
        from bot.sync import Syncer, parse_every

        syncer = Syncer(obj.components, parse_every(sync_every))
    elif obj.components.settings.sources is not None:
        obj.components.sources  # noqa: B018  # a bad sources file stops the start
    if syncer is not None:
        syncer.start()
    run_server(obj.components, port=port, socket=socket)


cli.add_command(sync_command)


def _add_owner_commands() -> None:
    from bot.owners.command import gaps

    cli.add_command(gaps)


_add_owner_commands()


def main() -> None:
    try:
        cli(standalone_mode=True)
    except CitebotError as exc:
        click.echo(f"citebot: {exc}", err=True)
        sys.exit(2)


if __name__ == "__main__":
    main()

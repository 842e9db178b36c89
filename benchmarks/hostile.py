"""Hostile files at full size: what each costs the ingest, and that the others still go in.

Generates, in a temporary folder (bot/testing/hostile.py; never committed): a 200 MB
text file, a PDF of 5,000 pages, HTML nested 10,000 deep, a PDF whose FlateDecode stream
inflates to 2 GB (a 2 MB file), a text file that is not UTF-8, a file appended to while
it is ingested, and HTML built to make a naive parser quadratic (stray end tags under
a deep stack: valid, so it is ingested); and the format attacks (_format_cases): a 100 KB
Markdown heading line, a PDF of 20 streams each inflating to 70 MB, a 4.9 M-character
paragraph; and office files (_office_cases): a .docx zip bomb (200 MB inflated, --quick
the same), an .odt entity bomb, an .odt of 5 M empty paragraphs. Then names and links,
each in a folder of its own beside company/ and people/ pages: a symbolic link from
company/ into people/ (its name must not be stored with the people's text), a hard link across them, a symbolic link loop, a name that is not UTF-8
and one with a line break. Each is ingested with one ordinary page in a subprocess of its own,
with the default limits of ingest/limits.py and the test embedder (the loaders are
measured, not MiniLM); the subprocess reports its peak RSS (resource.getrusage), and a
run with the ordinary page alone is the same-run baseline.

Prints per file: the reason the summary gives, peak RSS and its excess over the baseline,
seconds, and whether the ordinary page was ingested. Without --quick, `citebot ingest
--json` (the real command, the real model) also runs once over the whole folder. Exits 1
when a file is not skipped with a reason, the ordinary page is lost, or a subprocess's
peak RSS exceeds the baseline by more than RSS_BOUND_MB. Beside the files, in-process
cases for what reaches Slack (`hostile_conversations`): a model's answer writing
hidden-target links must arrive with every address visible, whole and streamed, and a
person's [users] table must not answer in a DM with other people; exit 1 when one breaks.

    .venv/bin/python -m benchmarks.hostile            # full size (about a minute)
    .venv/bin/python -m benchmarks.hostile --quick    # CI: the bomb inflates to 200 MB, no CLI run
    .venv/bin/python -m benchmarks.hostile --slack-only  # the hostile Slack event alone

Then, in both modes, hostile settings and request bodies (`settings_and_requests_section`):
URL settings holding a password (a missing colon, a word for a port, another scheme) and a
scopes and a glossary file that are not UTF-8, each through the real command line, must
give one `bad setting: VAR:` line, exit 2, no traceback and no secret; correctly signed
bodies of shapes Slack never sends must get a 4xx from the real HTTP server. And a hostile Slack event (the section at the end of this file): a
40,000-character mention of "*a " repeated, with three retries, and a normal mention from
someone else sent meanwhile, against the real bot on its HTTP server (the Web API
stand-in, the test embedder). Exits 1 when the normal one is not acked within Slack's
3 s, or either is not answered exactly once.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from pathlib import Path

from benchmarks.common import REPO

# A subprocess may use this much more memory than the one that ingests the ordinary page
# alone. pypdf inflates a stream up to the 75 MB limit before it stops; bytes, its copies
# and the text extraction come to about 3x that.
RSS_BOUND_MB = 400


def child(paths: list[str]) -> None:
    """Ingest these files with the default limits; print the summary and the peak RSS."""
    from bot.testing.embedder import HashingEmbedder
    from ingest.pipeline import ingest
    from search.embedded import EmbeddedStore

    store_dir = Path(tempfile.mkdtemp(prefix="citebot-hostile-store-"))
    started = time.perf_counter()
    summary = ingest([Path(p) for p in paths], EmbeddedStore(store_dir), HashingEmbedder(), progress=False)
    seconds = time.perf_counter() - started
    stored = sorted(EmbeddedStore(store_dir).document_hashes())
    max_chunk_chars = max((len(c.text) for c in EmbeddedStore(store_dir).iter_chunks()), default=0)
    shutil.rmtree(store_dir, ignore_errors=True)
    rss_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"summary": summary.as_json(), "rss_mb": round(rss_kb / 1024, 1), "seconds": round(seconds, 2),
                      "stored": stored, "max_chunk_chars": max_chunk_chars}))


def run_child(paths: list[Path], while_running=None) -> dict:
    proc = subprocess.Popen([sys.executable, "-m", "benchmarks.hostile", "--child", *map(str, paths)], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stop = threading.Event()
    helper = None
    if while_running is not None:
        helper = threading.Thread(target=while_running, args=(stop,), daemon=True)
        helper.start()
    out, err = proc.communicate(timeout=1800)
    stop.set()
    if helper is not None:
        helper.join()
    if proc.returncode != 0:
        raise SystemExit(f"child failed ({proc.returncode}): {err[-2000:]}")
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller bomb, no CLI run (CI)")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    parser.add_argument("--slack-only", action="store_true", help="only the hostile Slack event")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child)
        return
    if args.slack_only:
        sys.exit(slack_section(args.json))
    status = run(args)
    status = max(status, settings_and_requests_section(args.json))
    sys.exit(max(status, slack_section(args.json)))


def run(args: argparse.Namespace) -> int:
    from bot.testing import hostile

    tmp = Path(tempfile.mkdtemp(prefix="citebot-hostile-"))
    try:
        return _run(args, tmp, hostile)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _run(args: argparse.Namespace, tmp: Path, hostile) -> int:
    folder = tmp / "docs"
    folder.mkdir()
    good = hostile.good_markdown(folder / "good.md")
    bomb_bytes = 200_000_000 if args.quick else 2_000_000_000
    started = time.perf_counter()
    files = {
        "200 MB text": hostile.big_text(folder / "big.txt", 200_000_000),
        "PDF of 5,000 pages": hostile.many_pages_pdf(folder / "pages.pdf", 5_000),
        "HTML nested 10,000 deep": hostile.deep_html(folder / "deep.html", 10_000),
        f"PDF bomb ({bomb_bytes / 1e9:g} GB inflated)": hostile.pdf_bomb(folder / "bomb.pdf", bomb_bytes),
        "invalid UTF-8": hostile.invalid_utf8(folder / "latin1.md"),
        "stray end tags, 4 MB (valid: ingested)": _stray(folder / "stray.html"),
        "file appended to while ingested": hostile.big_text(folder / "growing.txt", 20_000_000),
        **_format_cases(folder, args.quick, hostile),
        **_office_cases(folder),
    }
    generated_s = time.perf_counter() - started

    def append(path: Path):
        def writer(stop: threading.Event) -> None:
            with path.open("ab") as out:
                while not stop.is_set():
                    out.write(b"Another line of the log being written.\n" * 100)
                    out.flush()
                    time.sleep(0.001)
        return writer

    baseline = run_child([good])
    rows = []
    for name, path in files.items():
        writer = append(path) if name.startswith("file appended") else None
        result = run_child([path, good], writer)
        skipped = {s["source"]: s["reason"] for s in result["summary"]["skipped"]}
        valid = name.endswith("(valid: ingested)")
        rows.append({"file": name, "bytes": path.stat().st_size, "valid": valid,
                     "reason": skipped.get(path.name, "ingested" if valid else None),
                     "good_ingested": result["summary"]["documents"] == (2 if valid else 1),
                     "rss_mb": result["rss_mb"], "rss_over_baseline_mb": round(result["rss_mb"] - baseline["rss_mb"], 1),
                     "seconds": result["seconds"], "max_chunk_chars": result["max_chunk_chars"]})
    rows += [_name_or_link(case, tmp, baseline) for case in NAMES_AND_LINKS]
    cli = None
    if not args.quick:
        for name, path in files.items():  # the appended file is still now: leave it out
            if name.startswith("file appended"):
                path.unlink()
        env = {k: v for k, v in os.environ.items() if not k.startswith(("CITEBOT_", "SLACK_"))}
        env["CITEBOT_STORE"] = str(tmp / "cli-store")
        t = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "bot.cli", "ingest", str(folder), "--json"], cwd=REPO,
                              check=False, env=env, capture_output=True, text=True, timeout=1800)
        cli = {"exit": proc.returncode, "seconds": round(time.perf_counter() - t, 1),
               "rss_mb": round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, 1),
               "output": json.loads(proc.stdout.strip().splitlines()[-1]) if proc.returncode == 0 else proc.stderr[-500:]}

    conversations = hostile_conversations()
    broken = [f"{c['case']}: {c['failed']}" for c in conversations if c["failed"]]
    broken += [f"{r['file']}: not skipped with a reason" for r in rows if not r["reason"]]
    broken += [f"{r['file']}: skipped" for r in rows if r["valid"] and r["reason"] != "ingested"]
    broken += [f"{r['file']}: the ordinary page was not ingested" for r in rows if not r["good_ingested"]]
    broken += [f"{r['file']}: peak RSS {r['rss_over_baseline_mb']} MB over the baseline (bound {RSS_BOUND_MB})"
               for r in rows if r["rss_over_baseline_mb"] > RSS_BOUND_MB]
    broken += _format_promises(rows)
    if cli is not None and (cli["exit"] != 0 or cli["output"]["documents"] != 2):
        broken.append(f"citebot ingest --json: {cli}")
    figures = {"baseline_rss_mb": baseline["rss_mb"], "generated_s": round(generated_s, 1), "files": rows,
               "conversations": conversations,
               "cli": cli, "rss_bound_mb": RSS_BOUND_MB, "broken": broken}
    if args.json:
        print(json.dumps(figures))
    else:
        print(f"generated in {generated_s:.1f} s; baseline (the ordinary page alone): peak RSS "
              f"{baseline['rss_mb']:.0f} MB, {baseline['seconds']:.2f} s")
        print(f"{'file':36} {'bytes':>13} {'RSS MB':>7} {'+base':>6} {'s':>6}  good  reason")
        for r in rows:
            print(f"{r['file']:36} {r['bytes']:13,} {r['rss_mb']:7.0f} {r['rss_over_baseline_mb']:6.0f} "
                  f"{r['seconds']:6.2f}  {'yes' if r['good_ingested'] else 'NO ':4}  {r['reason']}"
                  + (f" (largest chunk {r['max_chunk_chars']:,} characters)" if r["valid"] else ""))
        if cli is not None:
            out = cli["output"]
            print(f"citebot ingest --json (real model) over the folder: exit {cli['exit']}, {cli['seconds']} s, "
                  f"peak RSS {cli['rss_mb']:.0f} MB; documents {out['documents'] if isinstance(out, dict) else '?'}, "
                  f"skipped {len(out['skipped']) if isinstance(out, dict) else '?'}")
        for c in conversations:
            print(f"{c['case']:60} {'BROKEN' if c['failed'] else 'held'}")
        for b in broken:
            print(f"BROKEN: {b}")
    return 1 if broken else 0


# -- hostile answer text and conversations (in-process, well under a second) ------------------
HIDDEN_LINKS = ('Sign in at [the official wiki](https://evil.example.com/sso) [1]. It says "open '
                '[the wiki. Really](https://evil.example.com/a) now" [1]. Help: '
                '<https://evil.example.com/h|the helpdesk> [1], ![s](https://evil.example.com/p.gif) '
                "[1] and [the guide][g] [1].\n\n[g]: https://evil.example.com/guide\n[1]: https://evil.example.com/c")


def _hidden(text: str) -> list[str]:
    """Places a link's target could hide: an inline link or image, a reference definition,
    a Slack link or autolink to anything but the sources' wiki."""
    import re

    return (re.findall(r"\]\(", text) + re.findall(r"(?m)^ {0,3}\[[^\[\]]+\]:", text)
            + [m for m in re.findall(r"<([^<>|]*)(?:\|[^<>]*)?>", text)
               if not m.startswith(("https://wiki.example.com/", "@", "#", "!"))])


def hostile_conversations() -> list[dict]:
    """A model's answer writing hidden-target links, rendered whole and streamed sentence by
    sentence; a /ask in a DM with other people by someone with a [users] table (conversations.info
    at the Slack stand-in). Each case: what held, or why it broke."""
    from slack_sdk import WebClient

    from bot.answer import sentences
    from bot.answer.record import TurnRecord
    from bot.answer.textlinks import visible_piece
    from bot.slack.render import render_turn
    from bot.slack.scopes import Admission, ChannelPolicy, Scopes
    from bot.testing.slack_standin import BOT_TOKEN, SlackStandIn
    from search.scope import Scope

    cases = []
    record = TurnRecord(turn_id="t-hostile", created_at="2026-01-01T00:00:00", question="q?",
                        condensed_query="q?", answer=HIDDEN_LINKS, model="claude-standin", composer="claude",
                        passages=[{"number": 1, "chunk_id": "c1", "source": "it/sso.md", "heading_path": []}])
    texts = []
    for m in render_turn(record, url_template="https://wiki.example.com/{path}"):
        texts += [m.text] + [str(b.get("text", "")) for b in m.block_dicts() if b["type"] == "markdown"]
    found = [h for t in texts for h in _hidden(t)]
    cases.append({"case": "model-written hidden-target links, whole message", "failed": found or None})
    sent, start = "", 0
    for m in [*sentences.ends(HIDDEN_LINKS), None]:
        end = m.end() if m else len(HIDDEN_LINKS)
        sent += visible_piece(sent, HIDDEN_LINKS[start:end])
        start = end
    cases.append({"case": "model-written hidden-target links, streamed by sentence",
                  "failed": _hidden(sent) or None})
    standin = SlackStandIn().start()
    try:
        standin.ims["DHR"] = "UHR"
        scopes = Scopes(ChannelPolicy(Scope(("company/**",), "default")),
                        users={"UHR": Scope(("people/**",), "users.UHR")})
        admission = Admission(WebClient(token=BOT_TOKEN, base_url=standin.api_url), scopes)
        got = {c: admission.policy(c, "UHR").scope.name for c in ("DHRBOB", "GHRBOB", "DHR")}
    finally:
        standin.stop()
    want = {"DHRBOB": "default", "GHRBOB": "default", "DHR": "users.UHR"}
    cases.append({"case": "a [users] table in DMs with others (/ask, shortcut)",
                  "failed": None if got == want else f"scopes {got}, want {want}"})
    return cases


def _stray(path: Path) -> Path:
    """A deep stack under a flood of end tags that close nothing (quadratic for a naive parser)."""
    path.write_text("<html><body>" + "<div>" * 900 + "<p>Deep down, the rover docks.</p>" + "</span>" * 570_000,
                    encoding="utf-8")
    return path


# -- names and links ------------------------------------------------------------------------
# Each case: its name, what it adds to a folder of company/, people/ and the ordinary page,
# the name the summary skips it under, and the sources that must be stored (no more).
def _pages(folder: Path) -> Path:
    from bot.testing import hostile

    (folder / "company").mkdir(parents=True)
    (folder / "people").mkdir()
    hostile.good_markdown(folder / "good.md")
    hostile.good_markdown(folder / "company" / "values.md", "Values board")
    (folder / "people" / "salaries.md").write_text("# Salaries\n\nOskar Brandvold earns ninety thousand.\n")
    return folder


def _raw(folder: Path, name: bytes) -> Path:
    path = Path(os.fsdecode(os.path.join(os.fsencode(folder), name)))
    path.write_bytes(b"# Cafe\n\nCoffee at ten.\n")
    return path


PAGES = ["company/values.md", "good.md", "people/salaries.md"]
NAMES_AND_LINKS = [
    ("symlink into another folder", lambda d: (d / "company" / "notes.md").symlink_to("../people/salaries.md"),
     "company/notes.md", PAGES),
    ("hard link into another folder", lambda d: os.link(d / "people" / "salaries.md", d / "company" / "hard.md"),
     "company/hard.md", ["company/values.md", "good.md"]),
    ("symlink loop", lambda d: ((d / "a.md").symlink_to("b.md"), (d / "b.md").symlink_to("a.md")), "a.md", PAGES),
    ("name not UTF-8", lambda d: _raw(d, b"caf\xe9.md"), "b'caf\\xe9.md'", PAGES),
    ("name with a line break", lambda d: _raw(d, b"x\nsource: people salaries.md"),
     repr("x\nsource: people salaries.md"), PAGES),
]


def _name_or_link(case, tmp: Path, baseline: dict) -> dict:
    """One case ingested as a folder: the entry skipped with a reason, exactly the pages stored."""
    name, make, source, expected = case
    folder = _pages(tmp / f"names-{NAMES_AND_LINKS.index(case)}")
    make(folder)
    result = run_child([folder])
    skipped = {s["source"]: s["reason"] for s in result["summary"]["skipped"]}
    return {"file": name, "bytes": 0, "valid": False, "reason": skipped.get(source),
            "good_ingested": result["stored"] == expected, "rss_mb": result["rss_mb"],
            "rss_over_baseline_mb": round(result["rss_mb"] - baseline["rss_mb"], 1), "seconds": result["seconds"]}


# -- a hostile Slack event --------------------------------------------------------------
# Slack's: a request not acked within this long is delivered again.
SLACK_ACK_LIMIT_S = 3.0


def slack_section(as_json: bool = False) -> int:
    """The 40,000-character '*a ' mention, its retries and a normal mention meanwhile."""
    import logging

    from structlog.testing import capture_logs

    from bot.settings import load_settings
    from bot.slack.server import SlackHttpServer
    from bot.testing.bench import ingest_handbook
    from bot.testing.embedder import HashingEmbedder
    from bot.testing.slack_sender import SlackSender
    from bot.testing.slack_standin import BOT_TOKEN, BOT_USER_ID, SIGNING_SECRET, SlackStandIn
    from bot.wiring import Components, build_bot

    logging.disable(logging.WARNING)  # Bolt's own logger; the figures are what is printed
    tmp = Path(tempfile.mkdtemp(prefix="citebot-hostile-slack-"))
    standin = SlackStandIn().start()
    try:
        embedder = HashingEmbedder()
        ingest_handbook(tmp / "store", embedder)
        settings = load_settings(slack_bot_token=BOT_TOKEN, slack_signing_secret=SIGNING_SECRET,
                                 slack_api_url=standin.api_url, store=tmp / "store", rate_limit_per_minute=10_000)
        components = Components(settings)
        components.embedder = embedder
        bot = build_bot(components)
        server = SlackHttpServer(bot.app, signing_secret=SIGNING_SECRET, host="127.0.0.1", port=0).start()
        sender = SlackSender(server.url)

        def event(user: str, text: str) -> dict:
            m = standin.user_message("CGENERAL", user, f"<@{BOT_USER_ID}> {text}")
            return {"type": "app_mention", "user": user, "text": m["text"], "ts": m["ts"], "channel": "CGENERAL",
                    "event_ts": m["ts"]}

        def ack_s(e: dict, **kwargs) -> float:
            """Seconds to the ack; infinity when none came within the sender's 30 s."""
            try:
                return sender.event(e, **kwargs).elapsed_s
            except OSError:
                return float("inf")

        hostile, normal = event("UMALLORY", "*a " * 13_333), event("UALICE", "How often does the Release Train leave?")
        event_id = sender.new_event_id()
        acks: dict[str, float] = {}
        cpu = time.process_time()
        with capture_logs():
            # The hostile delivery and Slack's retries of it, and meanwhile (0.5 s on) a normal one.
            hostiles = [threading.Thread(target=lambda n=n: acks.__setitem__(
                f"retry {n}" if n else "hostile", ack_s(hostile, event_id=event_id, retry_num=n or None)))
                for n in (0, 1, 2, 3)]
            for t in hostiles:
                t.start()
                time.sleep(0.1)
            time.sleep(0.2)
            acks["normal"] = ack_s(normal)
            for t in hostiles:
                t.join()
            drained = bot.drain(120)
        cpu = time.process_time() - cpu
        replies = {name: len([c for c in standin.calls("chat.postMessage") if c.params.get("thread_ts") == e["ts"]])
                   for name, e in (("hostile", hostile), ("normal", normal))}
        server.shutdown()
        bot.close(10)
    finally:
        standin.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    broken = [f"the normal mention was acked in {acks['normal']:.2f} s, not within Slack's {SLACK_ACK_LIMIT_S} s"] \
        if acks["normal"] >= SLACK_ACK_LIMIT_S else []
    broken += [f"the {name} mention got {n} replies, not 1" for name, n in replies.items() if n != 1]
    broken += ["the bot's work did not finish within 120 s"] if not drained else []
    figures = {"mention_chars": len(hostile["text"]), "ack_s": {k: round(v, 3) if v < 1e9 else None
                                                                for k, v in acks.items()},
               "replies": replies, "process_cpu_s": round(cpu, 2), "broken": broken}
    if as_json:
        print(json.dumps({"slack": figures}))
    else:
        print(f"hostile Slack event: a {figures['mention_chars']:,}-character '*a ' mention, 3 retries, "
              f"a normal mention meanwhile; process CPU {figures['process_cpu_s']} s")
        print("  acks (s): " + ", ".join(f"{k} {v if v is not None else 'none in 30'}"
                                          for k, v in figures["ack_s"].items())
              + f"; replies: hostile {replies['hostile']}, normal {replies['normal']}")
        for b in broken:
            print(f"BROKEN: {b}")
    return 1 if broken else 0


# -- formats: a backtracking pattern, a PDF of many streams, a huge paragraph ----------------
# A valid file of these must go in within this many seconds (the loaders are linear: the
# 100 KB heading line took 39 s when the ATX pattern backtracked).
FORMAT_MAX_S = 20


def _format_cases(folder: Path, quick: bool, hostile) -> dict[str, Path]:
    """The format attacks: a 100 KB Markdown heading line; a PDF whose pages each inflate
    near the per-stream limit (20 x 70 MB; --quick 3 x 40 MB, still past the per-file
    budget); a single 4.9 M-character paragraph (its chunks must stay within the char cap)."""
    heading = folder / "heading.md"
    heading.write_text("# a" + " #" * 50_000 + "x\n\nThe rover docks at the bay.\n", encoding="utf-8")
    pages, per_page = (3, 40_000_000) if quick else (20, 70_000_000)
    paragraph = folder / "paragraph.md"
    sentence = "The rover docks at the charging bay before each shift and reports its battery level. "
    paragraph.write_text("# One paragraph\n\n" + sentence * (4_900_000 // len(sentence)) + "\n", encoding="utf-8")
    return {
        "100 KB heading line (valid: ingested)": heading,
        f"PDF of {pages} streams x {per_page / 1e6:g} MB inflated": hostile.pdf_pages_bomb(
            folder / "pages-bomb.pdf", pages, per_page),
        "4.9 M-character paragraph (valid: ingested)": paragraph,
    }


def _office_cases(folder: Path) -> dict[str, Path]:
    """Office files (ingest/loaders/package.py), each refused by its own limit: OFFICE_REASONS."""
    from bot.testing import office_files

    return {"docx zip bomb (200 MB inflated)": office_files.zip_bomb(folder / "bomb.docx", 200_000_000),
            "odt entity bomb (10^9 laughs)": office_files.entity_bomb(folder / "laughs.odt", "odt"),
            "odt of 5 M empty paragraphs": office_files.empty_paragraphs(folder / "empty.odt", 5_000_000)}


# What each office row's reason must name (the limit that stopped it).
OFFICE_REASONS = {"docx zip bomb": "CITEBOT_INGEST_MAX_INFLATED_BYTES", "odt entity bomb": "has a DOCTYPE",
                  "odt of 5 M": "CITEBOT_INGEST_MAX_XML_ELEMENTS"}


def _format_promises(rows: list[dict]) -> list[str]:
    from ingest.chunker import MAX_CHUNK_CHARS

    broken = []
    for r in rows:
        if r["file"].startswith("100 KB heading") and r["seconds"] > FORMAT_MAX_S:
            broken.append(f"{r['file']}: {r['seconds']} s (bound {FORMAT_MAX_S} s)")
        if r["file"].startswith("PDF of") and "streams x" in r["file"] and "INFLATED_FILE_BYTES" not in (r["reason"] or ""):
            broken.append(f"{r['file']}: not refused by the per-file inflated budget ({r['reason']})")
        if r["file"].startswith("4.9 M-character") and r["max_chunk_chars"] > MAX_CHUNK_CHARS:
            broken.append(f"{r['file']}: a chunk of {r['max_chunk_chars']:,} characters (cap {MAX_CHUNK_CHARS:,})")
        broken += [f"{r['file']}: not refused by its limit ({r['reason']})" for start, names in OFFICE_REASONS.items()
                   if r["file"].startswith(start) and names not in (r["reason"] or "")]
    return broken


# -- hostile settings and request bodies ------------------------------------------------------
# A secret every hostile setting below holds: no message may show it.
SETTINGS_SECRET = "Zq7xS3cretPW"


def _settings_cases(folder: Path) -> dict[str, tuple[dict[str, str], list[str]]]:
    """Settings an unlucky operator writes, each with a command that reads it: a URL missing
    its colon or with a word for a port (each with a password in it), a scopes and a
    glossary file that are not UTF-8, a Redis URL of another scheme."""
    (folder / "scopes.toml").write_bytes(b'[default]\nsources = ["caf\xe9/**"]\n')
    (folder / "glossary.csv").write_bytes(b"term,alias\nPTO,cong\xe9\n")
    pw = SETTINGS_SECRET
    chunks, search = ["chunks"], ["search", "--channel", "C0123ENG", "anything"]
    return {
        "REDIS_URL without its colon": ({"REDIS_URL": f"redis//:{pw}@127.0.0.1:6390/0"}, chunks),
        "CITEBOT_ES_URL with a word for a port": (
            {"CITEBOT_ES_URL": f"http://elastic:{pw}@127.0.0.1:notaport"}, chunks),
        "scopes file not UTF-8": ({"CITEBOT_SCOPES": str(folder / "scopes.toml"), "CITEBOT_ES_PASSWORD": pw}, search),
        "glossary file not UTF-8": ({"CITEBOT_GLOSSARY": str(folder / "glossary.csv"), "SLACK_BOT_TOKEN": pw},
                                    search),
        "REDIS_URL of another scheme": ({"REDIS_URL": f"http://:{pw}@127.0.0.1:6390/0"}, ["turns", "show", "x"]),
    }


def settings_and_requests_section(as_json: bool = False) -> int:
    """Bad settings through the real command line (one `bad setting: VAR:` line, exit 2, no
    traceback, no secret), and correctly signed bodies of shapes Slack never sends at the
    real HTTP server (each a 4xx)."""
    import logging

    from structlog.testing import capture_logs

    from bot.settings import load_settings
    from bot.slack.server import SlackHttpServer
    from bot.testing.bench import ingest_handbook
    from bot.testing.embedder import HashingEmbedder
    from bot.testing.slack_sender import SlackSender
    from bot.testing.slack_standin import BOT_TOKEN, SIGNING_SECRET, SlackStandIn
    from bot.wiring import Components, build_bot

    rows: list[dict] = []
    tmp = Path(tempfile.mkdtemp(prefix="citebot-hostile-settings-"))
    try:
        base = {k: v for k, v in os.environ.items() if not k.startswith(("CITEBOT_", "SLACK_", "REDIS_"))}
        for name, (env, argv) in _settings_cases(tmp).items():
            proc = subprocess.run([sys.executable, "-m", "bot.cli", *argv], cwd=tmp, capture_output=True,
                                  text=True, timeout=120, check=False,
                                  env={**base, "PYTHONPATH": str(REPO), "CITEBOT_STORE": str(tmp / "store"), **env})
            out = proc.stdout + proc.stderr
            failed = [why for why, bad in (
                (f"exit {proc.returncode}, not 2", proc.returncode != 2),
                ("no 'bad setting:' line", "bad setting:" not in out),
                ("a traceback", "Traceback" in out),
                ("the secret is shown", SETTINGS_SECRET in out)) if bad]
            rows.append({"case": f"setting: {name}", "failed": "; ".join(failed) or None,
                         "said": out.strip().splitlines()[-1][:160] if out.strip() else ""})

        logging.disable(logging.WARNING)  # Bolt's own logger; the figures are what is printed
        standin = SlackStandIn().start()
        try:
            embedder = HashingEmbedder()
            ingest_handbook(tmp / "bot-store", embedder)
            settings = load_settings(slack_bot_token=BOT_TOKEN, slack_signing_secret=SIGNING_SECRET,
                                     slack_api_url=standin.api_url, store=tmp / "bot-store")
            components = Components(settings)
            components.embedder = embedder
            bot = build_bot(components)
            server = SlackHttpServer(bot.app, signing_secret=SIGNING_SECRET, host="127.0.0.1", port=0).start()
            sender = SlackSender(server.url)
            callback = {"type": "event_callback", "event_id": "Ev1"}
            form = "application/x-www-form-urlencoded"
            bodies = {
                '"event": "x"': (json.dumps({**callback, "event": "x"}), "application/json"),
                '"event": null': (json.dumps({**callback, "event": None}), "application/json"),
                '"actions": null': (urllib.parse.urlencode(
                    {"payload": json.dumps({"type": "block_actions", "actions": None})}), form),
                "payload not an object": (urllib.parse.urlencode({"payload": "[1, 2]"}), form),
                '"text": 5 in an event': (json.dumps({**callback, "event": {
                    "type": "app_mention", "user": "U1", "text": 5, "ts": "1.1", "channel": "C1"}}),
                    "application/json"),
            }
            with capture_logs():
                for name, (body, content_type) in bodies.items():
                    status = sender.post(body, content_type).status
                    rows.append({"case": f"signed body: {name}", "said": f"HTTP {status}",
                                 "failed": None if 400 <= status < 500 else f"HTTP {status}, not a 4xx"})
                bot.drain(30)
            server.shutdown()
            bot.close(10)
        finally:
            standin.stop()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    broken = [f"{r['case']}: {r['failed']}" for r in rows if r["failed"]]
    if as_json:
        print(json.dumps({"settings_and_requests": rows, "broken": broken}))
    else:
        for r in rows:
            print(f"{r['case']:48} {'BROKEN' if r['failed'] else 'held'}  {r['said']}")
        for b in broken:
            print(f"BROKEN: {b}")
    return 1 if broken else 0


if __name__ == "__main__":
    main()

"""End-to-end answer quality: what the answer quotes, per labelled collection.

For each collection of the generalisation harness (benchmarks/collections/<name>/) and for
examples/, this runs `citebot eval QUESTIONS --answers --json` through the command line
(one whole turn per item, a fresh thread each) and prints, held-out collections first:

- end to end: the share of answerable questions whose answer quotes a label (a quotation
  that overlaps a must_contain string; bot/evaluate.py `overlaps`);
- given: how many answerable questions had a labelled passage among those given;
- when given: of those, the share whose answer quotes a label (sentence choice alone);
- refusal accuracy, and the p50 / p90 of the compose stage over the answered turns.

    .venv/bin/python -m benchmarks.answers [--collections django,sqlite] [--save run.json]
        [--baseline earlier-run.json] [--json]

Documents and stores are the harness's: the documents in
~/.cache/citebot/collections/<name>/docs (fetched by `python -m benchmarks.labelled fetch NAME`)
and the embedded store ~/.cache/citebot/quality/<name>-store (examples/ is ingested into
examples-store). A missing store is ingested here with `citebot ingest`; an existing one is
reused as it is (ingest is idempotent, and re-embedding costs minutes on 2 cores).

--baseline compares with a --save file from another revision: per collection, the
end-to-end and when-given rates with the paired-bootstrap 95% interval of this run minus
the baseline (bot/evaluate.py paired_bootstrap: 10,000 resamples, fixed seed). When-given
pairs the items whose label was given in both runs, so it measures sentence choice alone.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from benchmarks import common
from benchmarks.common import REPO
from bot.evaluate import paired_bootstrap

CACHE = Path.home() / ".cache" / "citebot"
COLLECTIONS = REPO / "benchmarks" / "collections"


class AnswersError(Exception):
    """Something this benchmark cannot go on without; the message says what to do."""


@dataclass(frozen=True)
class Target:
    name: str
    docs: Path
    questions: Path
    glossary: Path | None
    heldout: bool

    @property
    def store(self) -> Path:
        return Path(os.environ.get("CITEBOT_QUALITY_CACHE", CACHE / "quality")) / f"{self.name}-store"


def targets(names: list[str] | None) -> list[Target]:
    """The collections to run (all when names is None), held-out ones first."""
    found: dict[str, Target] = {}
    for folder in sorted(p for p in COLLECTIONS.iterdir() if (p / "collection.toml").exists()):
        meta = tomllib.loads((folder / "collection.toml").read_text(encoding="utf-8"))
        glossary = folder / "glossary.csv"
        found[folder.name] = Target(folder.name, CACHE / "collections" / folder.name / "docs",
                                    folder / "questions.jsonl", glossary if glossary.exists() else None,
                                    bool(meta.get("heldout", False)))
    glossary = REPO / "examples" / "glossary.csv"
    found["examples"] = Target("examples", REPO / "examples" / "handbook", REPO / "examples" / "questions.jsonl",
                               glossary if glossary.exists() else None, False)
    wanted = names or list(found)
    unknown = [n for n in wanted if n not in found]
    if unknown:
        raise AnswersError(f"unknown collection(s) {', '.join(unknown)}; known: {', '.join(found)}")
    return sorted((found[n] for n in wanted), key=lambda t: (not t.heldout, wanted.index(t.name)))


def citebot_command() -> str:
    for candidate in (Path(sys.executable).parent / "citebot", REPO / ".venv" / "bin" / "citebot"):
        if candidate.exists():
            return str(candidate)
    raise AnswersError("no citebot command: run scripts/bootstrap first")


def run_citebot(t: Target, args: list[str]) -> list[dict]:
    """citebot ARGS in the docs folder (sources are named relative to it), as JSON lines."""
    env = {k: v for k, v in os.environ.items() if k not in ("CITEBOT_ES_URL", "CITEBOT_INDEX", "CITEBOT_GLOSSARY")}
    env.update({"CITEBOT_STORE": str(t.store), "CITEBOT_LOG_FORMAT": "json",
                # Retrieval breaks some ties by set order (see benchmarks/quality.py): a fixed
                # hash seed makes a run repeatable, so a baseline comparison measures the code.
                "PYTHONHASHSEED": "0"})
    if t.glossary:
        env["CITEBOT_GLOSSARY"] = str(t.glossary)
    r = subprocess.run([citebot_command(), *args], cwd=t.docs, env=env, capture_output=True, text=True, check=False)
    if r.returncode != 0:
        tail = "\n".join(r.stderr.strip().splitlines()[-5:])
        raise AnswersError(f"{t.name}: citebot {' '.join(args)} failed (exit {r.returncode}):\n{tail}")
    return [json.loads(line) for line in r.stdout.splitlines() if line.strip()]


def ensure_store(t: Target) -> None:
    if not t.docs.is_dir():
        raise AnswersError(f"{t.name}: no documents at {t.docs}; fetch them with "
                           f"`python -m benchmarks.labelled fetch {t.name}`")
    if not (t.store / "citebot.sqlite3").exists():
        run_citebot(t, ["ingest", ".", "--json"])


def percentile(values: list[float], q: float) -> float | None:
    return common.percentile(values, q) if values else None


def run_target(t: Target) -> tuple[list[dict], dict]:
    ensure_store(t)
    lines = run_citebot(t, ["eval", str(t.questions), "--answers", "--json"])
    if not lines or "summary" not in lines[-1]:
        raise AnswersError(f"{t.name}: citebot eval --answers --json ended without a summary line")
    items = [{**line, "collection": t.name, "answerable": None} for line in lines[:-1]]
    questions = {str(json.loads(x)["id"]): json.loads(x) for x in t.questions.read_text().splitlines() if x.strip()}
    for it in items:
        it["answerable"] = bool(questions[str(it["id"])]["must_contain"])
        it.pop("hits", None)  # retrieval's chunk texts: large, and quality.py measures them
    return items, lines[-1]["summary"]


def row(t: Target, items: list[dict], summary: dict) -> dict:
    whole = summary["all"]
    compose = [it["compose_ms"] for it in items if it.get("compose_ms") is not None]
    return {"collection": t.name, "heldout": t.heldout, "n": whole["n"], "answerable": whole["answerable"],
            "end_to_end": whole["quotes_label_rate"], "given": whole["label_given"],
            "when_given": whole["quoted_when_given_rate"], "refusal_accuracy": whole["refusal_accuracy"],
            "compose_p50_ms": percentile(compose, 50), "compose_p90_ms": percentile(compose, 90)}


def compare(base: list[dict], now: list[dict]) -> dict:
    """Per collection: end to end and when given, this run minus the baseline, paired."""
    before = {(o["collection"], o["id"]): o for o in base}
    out = {}
    for name in dict.fromkeys(o["collection"] for o in now):
        pairs = [(before[(name, o["id"])], o) for o in now
                 if o["collection"] == name and o["answerable"] and (name, o["id"]) in before]
        res = {}
        for metric, ps in (("end_to_end", pairs),
                           ("when_given", [(a, b) for a, b in pairs if a["label_given"] and b["label_given"]])):
            va = np.array([1.0 if a["label_quoted"] else 0.0 for a, _ in ps])
            vb = np.array([1.0 if b["label_quoted"] else 0.0 for _, b in ps])
            d, lo, hi = paired_bootstrap(va, vb)
            res[metric] = {"n": len(ps), "a": float(va.mean()) if len(va) else None,
                           "b": float(vb.mean()) if len(vb) else None, "diff": d, "ci95": [lo, hi]}
        out[name] = res
    return out


def fmt(v: float | None, spec: str = ".3f") -> str:
    return "-" if v is None else format(v, spec)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--collections", help="comma-separated names (default: all)")
    ap.add_argument("--save", type=Path, help="write the per-item outcomes and rows to this JSON file")
    ap.add_argument("--baseline", type=Path, help="a --save file from another revision to compare with")
    ap.add_argument("--json", action="store_true", help="print the result as one JSON object")
    args = ap.parse_args()
    try:
        ts = targets(args.collections.split(",") if args.collections else None)
        baseline = json.loads(args.baseline.read_text()) if args.baseline else None
        result: dict = {"rows": [], "items": []}
        for t in ts:
            started = time.perf_counter()
            items, summary = run_target(t)
            result["items"].extend(items)
            result["rows"].append(row(t, items, summary))
            print(f"{t.name}: {len(items)} items in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    except (AnswersError, OSError, json.JSONDecodeError) as exc:
        print(f"answers.py: {exc}", file=sys.stderr)
        return 2
    if baseline is not None:
        result["comparison"] = compare(baseline["items"], result["items"])
    if args.save:
        args.save.write_text(json.dumps(result, ensure_ascii=False, indent=1))
    if args.json:
        print(json.dumps({k: v for k, v in result.items() if k != "items"}, ensure_ascii=False))
        return 0
    print(f"{'collection':18}{'held':>5}{'answerable':>11}{'end-to-end':>11}{'given':>6}{'when-given':>11}"
          f"{'refusal':>8}{'compose p50':>12}{'p90':>7}")
    for r in result["rows"]:
        print(f"{r['collection']:18}{'yes' if r['heldout'] else 'no':>5}{r['answerable']:>11}"
              f"{fmt(r['end_to_end']):>11}{r['given']:>6}{fmt(r['when_given']):>11}"
              f"{fmt(r['refusal_accuracy']):>8}{fmt(r['compose_p50_ms'], '.0f'):>9} ms"
              f"{fmt(r['compose_p90_ms'], '.0f'):>7}")
    if baseline is not None:
        print("\nthis run minus the baseline (paired bootstrap, 95% interval)")
        for name, res in result["comparison"].items():
            for metric, f in res.items():
                print(f"{name:18}{metric:11} n={f['n']:<4} {fmt(f['a'])} -> {fmt(f['b'])}  "
                      f"{f['diff']:+.3f} [{f['ci95'][0]:+.3f}, {f['ci95'][1]:+.3f}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())

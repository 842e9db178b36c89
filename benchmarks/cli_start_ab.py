"""`citebot ask` cold start of two revisions, interleaved in one run, and what reading the
settings costs on top of what `ask` imports anyway.

    git archive main | (mkdir -p /tmp/base && tar -x -C /tmp/base)
    .venv/bin/python -m benchmarks.cli_start_ab --base /tmp/base --store DIR [--runs 9] [--python PY] [--json]

Each round runs, in fresh processes and in turn: `python -c pass`, then for this checkout and
--base (each process's working directory is its tree, so `-m bot.cli` imports that tree's
code) `ask` as `citebot ask` runs it and `ask` with `rich` hidden (`sys.modules['rich'] =
None`): structlog.dev imports rich where it is installed, which the dev environment is
(import-linter needs it) and the runtime lock and the image are not. Medians of wall and
CPU time (user + system) per command, and the median of each round's difference (base minus
this checkout), which load that comes and goes cancels out of. Then, `--runs` × 2 times in
turn per tree: a process that first imports what `ask` imports anyway (asyncio,
importlib.metadata, structlog, click, numpy, pydantic) and times `import bot.settings;
load_settings()` alone. --python runs both trees (default: this interpreter); a base that
imports pydantic-settings needs one that has it, e.g. a venv on main's deps
(docs/decisions/0051-settings-without-pydantic-settings.md). DIR is an embedded store,
e.g. `citebot ingest examples/handbook` into it.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.cli_start import QUESTION, command_env, compile_bytecode
from benchmarks.common import REPO

NO_RICH = "import sys; sys.modules['rich'] = None\n"
ASK = "import runpy, sys\nsys.argv = ['citebot', *sys.argv[1:]]\nrunpy.run_module('bot.cli', run_name='__main__')\n"
SETTINGS = (
    "import time\n"
    "import asyncio, importlib.metadata, logging, structlog, click, numpy, pydantic, ingest.limits, search.links\n"
    "class Warm(pydantic.BaseModel):\n    a: int = 1\nWarm()\n"
    "t, c = time.perf_counter(), time.process_time()\n"
    "import bot.settings\nbot.settings.load_settings()\n"
    "print(time.perf_counter() - t, time.process_time() - c)\n"
)


def timed(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds (user + system) of one process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def median_ms(values: list[float]) -> float:
    return round(statistics.median(values) * 1000, 1)


def measure(py: str, trees: dict[str, Path], store: Path, runs: int) -> dict:
    env = command_env(store)
    cmds: dict[str, tuple[Path, list[str]]] = {"python -c pass": (REPO, [py, "-c", "pass"])}
    for name, tree in trees.items():
        cmds[f"ask {name}"] = (tree, [py, "-c", ASK, "ask", QUESTION, "--json"])
        cmds[f"ask {name}, rich hidden"] = (tree, [py, "-c", NO_RICH + ASK, "ask", QUESTION, "--json"])
    for tree in trees.values():  # bytecode first, as the image has it; then one warm-up each
        compile_bytecode(py, tree)
    for cwd, argv in cmds.values():
        timed(argv, cwd, env)
    load_before = os.getloadavg()
    wall: dict[str, list[float]] = {n: [] for n in cmds}
    cpu: dict[str, list[float]] = {n: [] for n in cmds}
    for _ in range(runs):
        for name, (cwd, argv) in cmds.items():
            w, c = timed(argv, cwd, env)
            wall[name].append(w)
            cpu[name].append(c)
    settings: dict[str, list[float]] = {name: [] for name in trees}
    for _ in range(2 * runs):
        for name, tree in trees.items():
            out = subprocess.run([py, "-c", NO_RICH + SETTINGS], cwd=tree, env=env, capture_output=True, text=True,
                                 check=True).stdout.split()
            settings[name].append(float(out[0]))
    out: dict = {"runs": runs, "load_before": [round(x, 2) for x in load_before], "commands": {
        name: {"wall_median_ms": median_ms(wall[name]), "wall_min_ms": round(min(wall[name]) * 1000, 1),
               "cpu_median_ms": median_ms(cpu[name])} for name in cmds}}
    for suffix in ("", ", rich hidden"):
        base, this = f"ask base{suffix}", f"ask this{suffix}"
        out["commands"][f"base minus this{suffix}"] = {
            "wall_median_ms": median_ms([b - t for b, t in zip(wall[base], wall[this], strict=True)]),
            "cpu_median_ms": median_ms([b - t for b, t in zip(cpu[base], cpu[this], strict=True)]),
            "rounds_this_faster_cpu": sum(b > t for b, t in zip(cpu[base], cpu[this], strict=True))}
    out["settings_after_the_rest_ms"] = {name: {"median": median_ms(ts), "min": round(min(ts) * 1000, 1)}
                                         for name, ts in settings.items()}
    out["load_after"] = [round(x, 2) for x in os.getloadavg()]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=Path, required=True, help="the other revision's tree")
    parser.add_argument("--store", type=Path, required=True, help="an embedded store holding examples/handbook")
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--python", default=sys.executable, help="the interpreter both trees run on")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    out = measure(args.python, {"this": REPO, "base": args.base.resolve()}, args.store, args.runs)
    if args.json:
        print(json.dumps(out))
        return
    print(f"{args.runs} rounds, interleaved; load {out['load_before']} → {out['load_after']}")
    for name, f in out["commands"].items():
        rest = f"min {f['wall_min_ms']}" if "wall_min_ms" in f else f"this faster in {f['rounds_this_faster_cpu']} (CPU)"
        print(f"  {name:30} wall {f['wall_median_ms']:7.1f} ms  CPU {f['cpu_median_ms']:7.1f} ms  ({rest})")
    for name, f in out["settings_after_the_rest_ms"].items():
        print(f"  settings after the rest, {name:5} {f['median']:6.1f} ms (min {f['min']})")


if __name__ == "__main__":
    main()

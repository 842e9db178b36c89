"""How long one-shot commands take, end to end, beside same-run baselines.

    .venv/bin/python -m benchmarks.cli_start [--store DIR] [--runs 5] [--json]

Each command runs as a fresh process (`python -m bot.cli …`, what `.venv/bin/citebot`
runs), `--runs` times, interleaved with the baselines, and the median wall time is
printed with the load average: `python -c pass` (the interpreter), `import numpy`,
`import torch` (what a command that embeds a question must load) and `import
sentence_transformers` (what it loaded before ingest/minilm.py). `ask` and `search` answer
from the sample handbook in the embedded store: DIR, or a temporary store ingested
first. Goals (quiet 2-core machine): ask ≤ 1 s (the ONNX Runtime encoder's; 4 s in
docs/decisions/0021-cli-start.md, with torch), search ≤ 3 s, --help, chunks and turns ≤ 1 s.
On a busy machine compare the ratios to `import torch`.
citebot's modules are compiled to bytecode first (`compileall`), as the image's build does.
torch and sentence-transformers are the optional `reference` extra, in neither lock
(docs/decisions/0037-runtime-without-torch.md): without it their baselines are skipped,
said in the output, and `over_import_torch` is null.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import REPO

QUESTION = "how do I rotate the on-call pager?"
GOALS_S = {"--help": 1.0, "chunks": 1.0, "turns show": 1.0, "search": 3.0, "ask": 1.0}


def reference_installed() -> bool:
    return all(importlib.util.find_spec(m) is not None for m in ("torch", "sentence_transformers"))


def commands(py: str) -> dict[str, list[str]]:
    cli = [py, "-m", "bot.cli"]
    reference = {"import torch": [py, "-c", "import torch"],
                 "import sentence_transformers": [py, "-c", "import sentence_transformers"]}
    return {
        "python -c pass": [py, "-c", "pass"],
        "import numpy": [py, "-c", "import numpy"],
        **(reference if reference_installed() else {}),
        "--help": [*cli, "--help"],
        "chunks": [*cli, "chunks"],
        "turns show": [*cli, "turns", "show", "t-000000000000"],  # an unknown turn: exits 1
        "search": [*cli, "search", QUESTION, "--json"],
        "ask": [*cli, "ask", QUESTION, "--json"],
    }


def timed(argv: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - started


def command_env(store: Path) -> dict[str, str]:
    """The environment of a measured command: the embedded store at `store`, no services."""
    env = dict(os.environ, CITEBOT_STORE=str(store), CITEBOT_LOG_FORMAT="json")
    for name in ("CITEBOT_ES_URL", "REDIS_URL", "ANTHROPIC_API_KEY"):
        env.pop(name, None)
    return env


def compile_bytecode(py: str, tree: Path) -> None:
    """Bytecode first, as the image's build and any run without PYTHONDONTWRITEBYTECODE leave
    it: otherwise every measured run compiles citebot's own modules from source again."""
    subprocess.run([py, "-m", "compileall", "-q", "bot", "ingest", "search"], cwd=tree, check=True)


def measure(store: Path, runs: int) -> dict:
    env = command_env(store)
    cmds = commands(sys.executable)
    load_before = os.getloadavg()
    times: dict[str, list[float]] = {name: [] for name in cmds}
    for _ in range(runs):
        for name, argv in cmds.items():  # interleaved: load drift falls on every command alike
            times[name].append(timed(argv, env))
    torch_s = statistics.median(times["import torch"]) if "import torch" in times else None
    out = {
        name: {"median_s": round(statistics.median(ts), 3), "min_s": round(min(ts), 3),
               "over_import_torch": round(statistics.median(ts) / torch_s, 2) if torch_s else None,
               **({"goal_s": GOALS_S[name]} if name in GOALS_S else {})}
        for name, ts in times.items()
    }
    return {"runs": runs, "load_before": [round(x, 2) for x in load_before],
            "load_after": [round(x, 2) for x in os.getloadavg()], "commands": out}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", type=Path, help="an embedded store holding examples/handbook")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    compile_bytecode(sys.executable, REPO)
    with tempfile.TemporaryDirectory() as tmp:
        store = args.store
        if store is None:
            store = Path(tmp) / "store"
            subprocess.run([sys.executable, "-m", "bot.cli", "ingest", "examples/handbook", "--json"],
                           cwd=REPO, env=dict(os.environ, CITEBOT_STORE=str(store)), check=True,
                           stdout=subprocess.DEVNULL)
        out = measure(store, args.runs)
    if args.json:
        print(json.dumps(out))
        return
    print(f"{args.runs} runs each, median wall seconds; load {out['load_before']} → {out['load_after']}")
    for name, f in out["commands"].items():
        goal = f"   goal ≤ {f['goal_s']} s" if "goal_s" in f else ""
        ratio = f"; {f['over_import_torch']:.2f}× import torch" if f["over_import_torch"] else ""
        print(f"  {name:30} {f['median_s']:7.3f} s  (min {f['min_s']:.3f}{ratio}){goal}")
    if not reference_installed():
        print("import torch and import sentence_transformers skipped: not installed "
              "(pip install 'citebot[reference]' for them)")


if __name__ == "__main__":
    main()

"""The embedding encoder on each runtime and precision: query latency, window throughput, memory.

Every configuration (ONNX Runtime fp32 and int8 at each thread count asked for; torch's
forward pass, ingest/minilm.py, only where the optional `reference` extra is installed:
citebot's runtime lock leaves torch out, and the output then says its rows are skipped) runs in a process of its own,
loaded once; the parent then interleaves them round by round on the same texts, so a
burst of load on the shared machine lands on all of them alike. A round: each question
encoded alone (Embedder.encode_query, as a turn does), then the windows in the ingest's
batches (Embedder.encode_jobs). Texts: windows of the sample handbook (examples/handbook)
and questions of examples/questions.jsonl. One warm-up round is not counted.

    .venv/bin/python -m benchmarks.encoder [--quick] [--json] [--threads 1,2] [--contention N]
        [--model DIR] [--only-onnx]

--model DIR adds the model folder's configuration (ONNX Runtime fp32) beside the
bundled model's, interleaved alike, each planning the windows with its own tokenizer (as
its ingest would); --only-onnx leaves torch out (docs/decisions/0038-mpnet-second-model.md).

--contention N runs N CPU-bound busy processes beside it for the whole run (they stop by
themselves after --contention-max-s even if this process dies). Prints a table, or with
--json one object per configuration: {"runtime", "precision", "model", "threads",
"query_p50_ms", "query_p95_ms", "windows_per_s", "rss_bytes"} (rss_bytes: the process's
peak resident memory, model loaded and run). Figures: docs/decisions/0030-onnx-runtime-encoder.md.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import multiprocessing as mp
import os
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.common import REPO, percentile

BUSY = ("import os, time\nend = time.time() + {limit}\nparent = {parent}\n"
        "while time.time() < end and os.getppid() == parent:\n"
        "    for _ in range(100000):\n        pass\n")


def texts(quick: bool, planner=None) -> tuple[list, list[str]]:
    """The handbook's windows (planned, tokenised by `planner`, default the bundled
    model's embedder) and the questions."""
    from ingest.chunker import chunk_document, doc_id_for
    from ingest.embedder import Embedder
    from ingest.loaders import load

    handbook = REPO / "examples" / "handbook"
    planner = planner or Embedder()
    chunks = []
    for path in sorted(handbook.rglob("*.md")):
        name = path.relative_to(handbook).as_posix()
        chunks += chunk_document(load(path, name), doc_id_for(name), planner.count_tokens)
    jobs = planner.plan(chunks)
    lines = (REPO / "examples" / "questions.jsonl").read_text().splitlines()
    questions = [json.loads(line)["question"] for line in lines]
    if quick:
        return jobs[::8][:64], questions[:10]
    return jobs[::2][:256], questions[:40]


def peak_rss() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


def worker(conn, runtime: str, precision: str, threads: int, model: str, quick: bool) -> None:
    import bot  # noqa: F401  # OpenBLAS on one thread, as in citebot (bot/__init__.py)
    from ingest.embedder import Embedder

    if runtime == "torch":
        import torch

        torch.set_num_threads(threads)
    embedder = Embedder(Path(model) if model else None, runtime=runtime, precision=precision, threads=threads)
    jobs, questions = texts(quick, embedder)
    conn.send("ready")
    while conn.recv() == "round":
        query_ms = []
        for q in questions:
            t = time.perf_counter()
            embedder.encode_query(q)
            query_ms.append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        embedder.encode_jobs(jobs)
        conn.send({"query_ms": query_ms, "windows": len(jobs), "windows_s": time.perf_counter() - t,
                   "rss_bytes": peak_rss(), "model": embedder.stamp.name})


def configurations(threads: list[int], model: str = "", torch: bool = True) -> list[tuple[str, str, int, str]]:
    """(runtime, precision, threads, model folder; "" for the bundled model)."""
    # The other model at fp32 only: int8 is refused for MPNet (ingest/onnx_encoder.py).
    configs = [("onnxruntime", p, t, "") for p in ("fp32", "int8") for t in threads]
    configs += [("onnxruntime", "fp32", t, model) for t in threads] if model else []
    if torch and torch_installed():
        configs += [("torch", "fp32", t, "") for t in threads]
    return configs


def torch_installed() -> bool:
    return all(importlib.util.find_spec(m) is not None for m in ("torch", "safetensors"))


def run(args: argparse.Namespace) -> list[dict]:
    threads = [int(t) for t in args.threads.split(",")]
    rounds = 2 if args.quick else 4  # the first is the warm-up
    ctx = mp.get_context("spawn")
    workers = {}
    for config in configurations(threads, str(args.model or ""), not args.only_onnx):
        parent, child = ctx.Pipe()
        process = ctx.Process(target=worker, args=(child, *config, args.quick), daemon=True)
        process.start()
        if parent.recv() != "ready":
            raise SystemExit(f"{config} did not start")
        workers[config] = (parent, process)
    results: dict[tuple, list[dict]] = {c: [] for c in workers}
    try:
        for n in range(rounds):
            for config, (conn, _) in workers.items():
                conn.send("round")
                out = conn.recv()
                if n:
                    results[config].append(out)
    finally:
        for conn, process in workers.values():
            conn.send("stop")
            process.join(30)
    rows = []
    for (runtime, precision, t, _), outs in results.items():
        query_ms = [ms for o in outs for ms in o["query_ms"]]
        rows.append({"runtime": runtime, "precision": precision, "model": outs[0]["model"], "threads": t,
                     "query_p50_ms": round(percentile(query_ms, 50), 2),
                     "query_p95_ms": round(percentile(query_ms, 95), 2),
                     "windows_per_s": round(sum(o["windows"] for o in outs) / sum(o["windows_s"] for o in outs), 1),
                     "rss_bytes": max(o["rss_bytes"] for o in outs)})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="64 windows, 10 questions, 1 round")
    parser.add_argument("--json", action="store_true", help="one JSON object per configuration")
    parser.add_argument("--threads", default="1", help="intra-op thread counts, e.g. 1,2")
    parser.add_argument("--model", type=Path, help="another model folder to measure beside the bundled one")
    parser.add_argument("--only-onnx", action="store_true", help="leave the torch configuration out")
    parser.add_argument("--contention", type=int, default=0, metavar="N",
                        help="N busy processes beside the run")
    parser.add_argument("--contention-max-s", type=float, default=1800,
                        help="the busy processes stop after this many seconds at most")
    args = parser.parse_args()
    busy = [subprocess.Popen([sys.executable, "-c", BUSY.format(limit=args.contention_max_s,
                                                                parent=os.getpid())])
            for _ in range(args.contention)]
    try:
        rows = run(args)
    finally:
        for p in busy:
            p.kill()
            p.wait()
    skipped = "" if torch_installed() else (
        "torch rows skipped: torch is not installed (pip install 'citebot[reference]' for them)")
    if args.json:
        for row in rows:
            print(json.dumps({**row, "contention": args.contention}))
        if skipped:
            print(skipped, file=sys.stderr)
        return
    print(f"{'model':40} {'runtime':12} {'precision':9} {'threads':>7} {'query p50 ms':>12} {'p95 ms':>8} "
          f"{'windows/s':>9} {'peak RSS MB':>11}   (busy processes beside it: {args.contention})")
    for r in rows:
        print(f"{r['model']:40} {r['runtime']:12} {r['precision']:9} {r['threads']:>7} {r['query_p50_ms']:>12} "
              f"{r['query_p95_ms']:>8} {r['windows_per_s']:>9} {r['rss_bytes'] / 1e6:>11.0f}")
    if skipped:
        print(skipped)


if __name__ == "__main__":
    main()

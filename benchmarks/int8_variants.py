"""int8 graphs of the bundled model quantising more of it, against fp32 and the kept int8.

The kept int8 graph (ingest/onnx_encoder.py `_quantise`) quantises the attention's
projections only; this builds, from the cached fp32 graph, the same with each layer's
feed-forward intermediate MatMul added, and with both feed-forward MatMuls added, and
measures each in one process, alternated round by round, one intra-op thread: the worst
and mean cosine to sentence-transformers' vectors (tests/fixtures/reference-vectors.npz,
int8's floor 0.99), a question's p50 (the fixture's questions one by one) and windows per
second (its windows in the ingest's length-sorted batches of 32). Figures:
docs/decisions/0063-int8-feed-forward.md.

    .venv/bin/python -m benchmarks.int8_variants [--rounds 3]
"""

from __future__ import annotations

import argparse
import logging
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common import REPO

FIXTURE = REPO / "tests" / "fixtures" / "reference-vectors.npz"
FLOOR = 0.99  # int8's floor in tests/test_onnx_encoder.py


def _variants(fp32: Path, folder: Path) -> dict[str, Path]:
    """The graphs to compare: fp32 as cached, and three int8 ones written into `folder`."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from ingest.onnx_graph import quantisable_matmuls

    model = onnx.load_model(str(fp32))
    weights = {i.name for i in model.graph.initializer}

    def matmuls(part: str) -> list[str]:
        return [
            n.name
            for n in model.graph.node
            if n.op_type == "MatMul" and len(n.input) > 1 and n.input[1] in weights and part in n.input[1]
        ]

    kept = quantisable_matmuls(model)
    ffn_in = matmuls(".intermediate.dense.weight")
    ffn_out = [n for n in matmuls(".output.dense.weight") if n not in kept]
    chosen = {
        "int8, attention only (kept)": kept,
        "int8, + feed-forward in": kept + ffn_in,
        "int8, + feed-forward in and out": kept + ffn_in + ffn_out,
    }
    out = {"fp32": fp32}
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)  # the quantiser's advice on pre-processing, every call
    try:
        for i, (name, nodes) in enumerate(chosen.items()):
            path = folder / f"variant{i}.onnx"
            quantize_dynamic(
                fp32,
                path,
                weight_type=QuantType.QInt8,
                per_channel=True,
                op_types_to_quantize=["MatMul", "Attention"],
                nodes_to_quantize=nodes,
                extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
            )
            out[name] = path
    finally:
        root.setLevel(level)
    return out


def _session(path: Path) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def _encode(session: Any, ids: list[list[int]]) -> np.ndarray:
    tokens = np.zeros((len(ids), max(len(s) for s in ids)), np.int64)
    mask = np.zeros_like(tokens)
    for i, s in enumerate(ids):
        tokens[i, : len(s)] = s
        mask[i, : len(s)] = 1
    return np.asarray(session.run(["embedding"], {"input_ids": tokens, "attention_mask": mask})[0], np.float32)


def _cosines(ours: np.ndarray, theirs: np.ndarray) -> np.ndarray:
    theirs = theirs.astype(np.float32)
    return (ours * theirs).sum(1) / np.linalg.norm(ours, axis=1) / np.linalg.norm(theirs, axis=1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)

    from ingest.embedder import Embedder
    from ingest.onnx_encoder import OnnxModel

    embedder = Embedder()
    fp32 = OnnxModel(embedder.model_dir, embedder.stamp.checksum, precision="fp32").path
    reference = np.load(FIXTURE)
    windows = [list(s) for s in embedder._ids(list(reference["window_texts"]))]
    order = sorted(range(len(windows)), key=lambda i: -len(windows[i]))
    questions = [list(embedder._ids([q])[0]) for q in reference["query_texts"]]
    folder = Path(tempfile.mkdtemp(prefix="citebot-int8-variants-"))
    try:
        sessions = {name: _session(path) for name, path in _variants(fp32, folder).items()}
        seen: dict[str, dict[str, Any]] = {name: {"q": [], "w": []} for name in sessions}
        for round_ in range(args.rounds):
            for name, session in sessions.items():
                ours = np.empty((len(windows), reference["window_vectors"].shape[1]), np.float32)
                start = time.perf_counter()
                for b in range(0, len(order), 32):
                    ours[order[b : b + 32]] = _encode(session, [windows[i] for i in order[b : b + 32]])
                seen[name]["w"].append(len(windows) / (time.perf_counter() - start))
                for q in questions * 3:
                    start = time.perf_counter()
                    _encode(session, [q])
                    seen[name]["q"].append((time.perf_counter() - start) * 1000)
                if round_ == 0:
                    asked = np.concatenate([_encode(session, [q]) for q in questions])
                    seen[name]["windows"] = _cosines(ours, reference["window_vectors"])
                    seen[name]["questions"] = _cosines(asked, reference["query_vectors"])
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print(
        f"{'graph':34} {'windows worst/mean cos':>24} {'questions worst':>16} {'question p50 ms':>16} {'windows/s':>10}"
    )
    for name, v in seen.items():
        floor = "" if name == "fp32" or v["windows"].min() >= FLOOR else "  (under the floor)"
        print(
            f"{name:34} {v['windows'].min():>12.5f} / {v['windows'].mean():.5f} {v['questions'].min():>16.5f}"
            f" {statistics.median(v['q']):>16.2f} {statistics.median(v['w']):>10.1f}{floor}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

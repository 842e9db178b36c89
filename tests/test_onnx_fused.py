"""The fused graph (ingest/onnx_fused.py: ONNX Runtime's com.microsoft operators) against
the standard-operator graph of the same weights, on the tiny BERT and tiny MPNet of random
weights: the same vectors, batched with padding and alone; and int8 quantises the fused
Attention (QAttention) and the attention's output projection, nothing else. The bundled
model's fused vectors against sentence-transformers' are tests/test_onnx_encoder.py's.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from ingest.embedder import model_checksum
from ingest.onnx_encoder import ensure_graph
from ingest.onnx_graph import build_graph, quantisable_matmuls
from tests.test_onnx_encoder import tiny_model
from tests.test_onnx_mpnet import tiny, tiny_mpnet  # noqa: F401  # tiny: the fixture, used by name

ROWS = [[1, 5, 7, 8, 6, 3, 2], [1, 9, 2], [1, 4, 4, 2]]


def _run(path: Path, rows: list[list[int]]) -> np.ndarray:
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    ids = np.zeros((len(rows), max(map(len, rows))), np.int64)
    mask = np.zeros_like(ids)
    for i, r in enumerate(rows):
        ids[i, : len(r)], mask[i, : len(r)] = r, 1
    (out,) = session.run(["embedding"], {"input_ids": ids, "attention_mask": mask})
    return np.asarray(out)


def _save(folder: Path, fused: bool, into: Path) -> Path:
    path = into / ("fused.onnx" if fused else "standard.onnx")
    onnx.save_model(build_graph(folder, fused=fused), str(path))
    return path


def _ops(path: Path) -> Counter:
    return Counter(n.op_type for n in onnx.load_model(str(path)).graph.node)


@pytest.mark.parametrize("kind", ["bert", "mpnet"])
def test_the_fused_graph_gives_the_standard_graphs_vectors(tmp_path, kind, tiny):  # noqa: F811
    if kind == "bert":
        folder, rows = tiny_model(tmp_path / "m"), ROWS
    else:
        folder = tiny_mpnet(tmp_path / "m", tiny)
        rows = [list(ids[: int(m.sum())]) for ids, m in zip(tiny["ids"], tiny["mask"])]
    standard, fused = _save(folder, False, tmp_path), _save(folder, True, tmp_path)
    ops = _ops(fused)
    assert ops["Attention"] == ops["BiasGelu"] == 2 and ops["SkipLayerNormalization"] == 4, ops
    assert ops["EmbedLayerNormalization"] == 1 and "Softmax" not in ops and "Erf" not in ops
    batched = _run(fused, rows)  # padded to the longest row
    alone = np.concatenate([_run(fused, [r]) for r in rows])
    np.testing.assert_allclose(batched, _run(standard, rows), atol=1e-5)
    np.testing.assert_allclose(alone, batched, atol=1e-5)


def test_int8_quantises_the_fused_attention_and_its_output_projection_only(tmp_path):
    folder = tiny_model(tmp_path / "m")
    fused = _save(folder, True, tmp_path)
    chosen = quantisable_matmuls(onnx.load_model(str(fused)))
    assert len(chosen) == 4 and sum(name.startswith("attention") for name in chosen) == 2, chosen
    int8 = ensure_graph(folder, model_checksum(folder), "int8", tmp_path / "cache")  # as citebot makes it
    ops = _ops(int8)
    assert ops["QAttention"] == 2 and "Attention" not in ops and ops["MatMulInteger"] == 2, ops
    assert ops["MatMul"] == 4  # the feed-forward pair of each layer stays float
    cosines = (_run(int8, ROWS) * _run(fused, ROWS)).sum(axis=1)
    assert cosines.min() > 0.9, cosines


"""The ONNX Runtime encoder (ingest/onnx_graph.py, ingest/onnx_encoder.py) against
sentence-transformers' vectors, and its graph cache: keyed by the weights, rebuilt when
they change, written readable by every user, repaired when damaged; and no command
imports torch when it runs.

The reference vectors are tests/fixtures/reference-vectors.npz, written by
scripts/reference-vectors with sentence-transformers (the bundled model on windows of the
sample handbook and on questions).
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ingest.embedder import model_checksum
from ingest.onnx_encoder import OnnxModel, ensure_graph, graph_path, weights_path
from ingest.onnx_graph import read_safetensors
from tests.conftest import HANDBOOK, REPO

FIXTURE = REPO / "tests" / "fixtures" / "reference-vectors.npz"
# Cosine to sentence-transformers' vector, at least (docs/decisions/0030-onnx-runtime-encoder.md):
# fp32 is the same arithmetic (float16 storage of the reference costs ~1e-7); int8 measured
# 0.9965 at worst on the fixture's windows in the ingest's batches, 0.9961 on the questions.
FP32_COSINE = 0.9999
INT8_COSINE = 0.99


@pytest.fixture(scope="module")
def reference() -> dict[str, np.ndarray]:
    with np.load(FIXTURE) as data:
        return {k: data[k] for k in data.files}


def _cosines(ours: np.ndarray, theirs: np.ndarray) -> np.ndarray:
    theirs = theirs.astype(np.float32)
    theirs /= np.linalg.norm(theirs, axis=1, keepdims=True)
    return (ours * theirs).sum(axis=1)


def test_the_fixture_is_small_and_covers_windows_and_queries(reference):
    assert FIXTURE.stat().st_size < 300_000
    assert len(reference["window_texts"]) >= 100 and len(reference["query_texts"]) >= 10
    assert reference["window_vectors"].shape == (len(reference["window_texts"]), 384)


@pytest.mark.slow
@pytest.mark.parametrize("precision, floor", [("fp32", FP32_COSINE), ("int8", INT8_COSINE)])
def test_onnx_vectors_match_sentence_transformers(precision, floor, reference, embedder):
    """Windows as the ingest encodes them (length-sorted batches of 32), questions one by one
    as a turn does: int8's activation scale is per call, so a window's batch counts."""
    model = OnnxModel(embedder.model_dir, model_checksum(embedder.model_dir), precision=precision)
    ids = embedder._ids(list(reference["window_texts"]))
    order = sorted(range(len(ids)), key=lambda i: -len(ids[i]))
    ours = np.empty((len(ids), 384), np.float32)
    for b in range(0, len(order), 32):
        ours[order[b : b + 32]] = model.encode([ids[i] for i in order[b : b + 32]])
    windows = _cosines(ours, reference["window_vectors"])
    queries = _cosines(np.concatenate([model.encode(embedder._ids([q])) for q in reference["query_texts"]]),
                       reference["query_vectors"])
    assert windows.min() >= floor and queries.min() >= floor, (windows.min(), queries.min())


# -- the graph cache, on a tiny BERT of random weights (builds in a moment) ---------------------
def _write_safetensors(path: Path, tensors: dict[str, np.ndarray]) -> None:
    header, blobs, at = {}, [], 0
    for name, array in tensors.items():
        raw = np.ascontiguousarray(array, "<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(array.shape), "data_offsets": [at, at + len(raw)]}
        blobs.append(raw)
        at += len(raw)
    head = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(head)) + head + b"".join(blobs))


def tiny_model(folder: Path, seed: int = 0, width: int = 8, layers: int = 2) -> Path:
    """A sentence-transformers folder of a 2-layer BERT (width 8, 2 heads), mean pooling."""
    rng = np.random.default_rng(seed)
    config = {"model_type": "bert", "hidden_act": "gelu", "hidden_size": width, "num_attention_heads": 2,
              "num_hidden_layers": layers, "intermediate_size": 4 * width, "layer_norm_eps": 1e-12,
              "vocab_size": 50, "max_position_embeddings": 16, "type_vocab_size": 2}
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]))
    (folder / "1_Pooling").mkdir()
    (folder / "1_Pooling" / "config.json").write_text(json.dumps({"pooling_mode_mean_tokens": True}))
    shapes = {"embeddings.word_embeddings.weight": (50, width), "embeddings.position_embeddings.weight": (16, width),
              "embeddings.token_type_embeddings.weight": (2, width)}
    for i in range(layers):
        p = f"encoder.layer.{i}."
        for n in ("attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense"):
            shapes[p + n + ".weight"], shapes[p + n + ".bias"] = (width, width), (width,)
        shapes[p + "intermediate.dense.weight"], shapes[p + "intermediate.dense.bias"] = (4 * width, width), (4 * width,)
        shapes[p + "output.dense.weight"], shapes[p + "output.dense.bias"] = (width, 4 * width), (width,)
    tensors = {n: rng.normal(0, 0.5, s).astype(np.float32) for n, s in shapes.items()}
    for n in ["embeddings.LayerNorm"] + [f"encoder.layer.{i}.{m}.LayerNorm" for i in range(layers)
                                         for m in ("attention.output", "output")]:
        tensors[n + ".weight"], tensors[n + ".bias"] = np.ones(width, np.float32), np.zeros(width, np.float32)
    _write_safetensors(folder / "model.safetensors", tensors)
    return folder


def test_a_graph_is_written_readable_by_every_user_even_under_a_private_umask(tmp_path):
    model = tiny_model(tmp_path / "m")
    old = os.umask(0o077)  # mkstemp's 0600 was the file a container's other user could not load
    try:
        path = ensure_graph(model, model_checksum(model), "fp32", tmp_path / "cache")
    finally:
        os.umask(old)
    weights = weights_path(path)
    assert stat.S_IMODE(path.stat().st_mode) == stat.S_IMODE(weights.stat().st_mode) == 0o644
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o755
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name, weights.name]  # no temporary file left
    assert weights.stat().st_size > 0  # the larger tensors are beside the graph, not in it


def test_new_weights_get_a_new_graph_and_new_vectors(tmp_path):
    model, cache = tiny_model(tmp_path / "m"), tmp_path / "cache"
    ids = [[1, 5, 7, 2], [1, 9, 2]]
    before = OnnxModel(model, model_checksum(model), cache_dir=cache)
    old_vectors, old_path = before.encode(ids), before.path
    np.testing.assert_allclose(np.linalg.norm(old_vectors, axis=1), 1.0, rtol=1e-6)
    shutil.rmtree(model)
    tiny_model(model, seed=1)  # the same folder, other weights
    after = OnnxModel(model, model_checksum(model), cache_dir=cache)
    assert after.path != old_path and old_path.exists()
    assert after.path == graph_path(cache, model_checksum(model), "fp32")
    assert float(np.abs(after.encode(ids) - old_vectors).max()) > 0.01


def test_padding_changes_no_vector(tmp_path):
    model = tiny_model(tmp_path / "m")
    encoder = OnnxModel(model, model_checksum(model), cache_dir=tmp_path / "cache")
    alone = encoder.encode([[1, 9, 2]])
    padded = encoder.encode([[1, 9, 2], [1, 5, 7, 8, 6, 3, 2]])[:1]
    np.testing.assert_allclose(padded, alone, atol=1e-6)


def test_a_damaged_cached_graph_is_rebuilt(tmp_path):
    model, cache = tiny_model(tmp_path / "m"), tmp_path / "cache"
    path = ensure_graph(model, model_checksum(model), "fp32", cache)
    good = path.read_bytes()
    path.write_bytes(good[: len(good) // 2])  # a disk filled mid-copy
    encoder = OnnxModel(model, model_checksum(model), cache_dir=cache)
    assert path.read_bytes() == good
    assert encoder.encode([[1, 2]]).shape == (1, 8)


def test_damaged_cached_weights_are_rebuilt(tmp_path):
    model, cache = tiny_model(tmp_path / "m"), tmp_path / "cache"
    path = ensure_graph(model, model_checksum(model), "fp32", cache)
    weights = weights_path(path)
    good = weights.read_bytes()
    weights.write_bytes(good[: len(good) // 2])  # a disk filled mid-copy
    encoder = OnnxModel(model, model_checksum(model), cache_dir=cache)
    assert weights.read_bytes() == good
    assert encoder.encode([[1, 2]]).shape == (1, 8)


def test_the_safetensors_reader_reads_the_bundled_weights_whole(embedder):
    weights = read_safetensors(embedder.model_dir / "model.safetensors")
    assert weights["embeddings.word_embeddings.weight"].shape == (30522, 384)
    assert sum(k.startswith("encoder.layer.") for k in weights) == 6 * 16


@pytest.mark.slow
def test_ask_and_search_import_no_torch(tmp_path, embedder):
    """A command runs the model on onnxruntime: torch (1 s of import) stays out."""
    assert (embedder.stamp.runtime, embedder.stamp.precision) == ("onnxruntime", "fp32")
    env = {**os.environ, "CITEBOT_STORE": str(tmp_path / "store")}
    subprocess.run([sys.executable, "-m", "bot.cli", "ingest", str(HANDBOOK / "people")],
                   env=env, check=True, capture_output=True)
    probe = ("import sys\nfrom bot.cli import main\nsys.argv = ['citebot'] + sys.argv[1:]\n"
             "try:\n    main()\nexcept SystemExit as e:\n    code = e.code\n"
             "print('TORCH' if 'torch' in sys.modules else 'NO-TORCH', code)\n")
    for args in (["ask", "How many days of parental leave?"], ["search", "parental leave", "--mode", "dense"]):
        out = subprocess.run([sys.executable, "-c", probe, *args], env=env, capture_output=True,
                             text=True, check=True).stdout
        assert out.rstrip().endswith("NO-TORCH 0"), out[-500:]
    # The same store queried at another precision is refused, naming both.
    run = subprocess.run([sys.executable, "-m", "bot.cli", "search", "parental leave"],
                         env={**env, "CITEBOT_ENCODER_PRECISION": "int8"}, capture_output=True, text=True,
                         check=False)
    assert run.returncode != 0
    assert "onnxruntime fp32" in run.stderr and "onnxruntime int8" in run.stderr, run.stderr


def test_a_remembered_checksum_is_the_weights_own(tmp_path):
    model, cache = tiny_model(tmp_path / "m"), tmp_path / "cache"
    fresh = model_checksum(model)
    assert model_checksum(model, cache) == fresh  # hashed, remembered
    assert [p.suffix for p in (cache / "checksums").iterdir()] == [".json"]
    assert model_checksum(model, cache) == fresh  # read back


def test_weights_changed_in_place_with_their_old_size_and_mtime_are_hashed_again(tmp_path):
    model, cache = tiny_model(tmp_path / "m"), tmp_path / "cache"
    weights = model / "model.safetensors"
    before = model_checksum(model, cache)
    st = weights.stat()
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0xFF  # one byte of the last tensor
    weights.write_bytes(bytes(data))
    os.utime(weights, ns=(st.st_atime_ns, st.st_mtime_ns))  # same size, same mtime: only ctime tells
    after = model_checksum(model, cache)
    assert after != before
    assert after == model_checksum(model)  # the new weights' own hash


def test_a_damaged_checksum_memo_is_ignored(tmp_path):
    model, cache = tiny_model(tmp_path / "m"), tmp_path / "cache"
    fresh = model_checksum(model, cache)
    (memo,) = (cache / "checksums").iterdir()
    memo.write_text('{"identity": [1, 2')
    assert model_checksum(model, cache) == fresh
    memo.write_text(json.dumps({**json.loads(memo.read_text()), "sha256": "0" * 63}))
    assert model_checksum(model, cache) == fresh


def test_a_cache_that_cannot_be_written_still_gives_the_weights_checksum(tmp_path):
    model, cache = tiny_model(tmp_path / "m"), tmp_path / "cache"
    cache.mkdir()
    (cache / "checksums").write_text("a file where the memo folder would be")  # mkdir fails, even as root
    assert model_checksum(model, cache) == model_checksum(model)
    assert (cache / "checksums").read_text() == "a file where the memo folder would be"

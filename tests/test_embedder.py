"""The embedder against sentence-transformers' vectors, without sentence-transformers.

citebot embeds without torch, transformers or sentence-transformers (none is in the
runtime lock: docs/decisions/0037-runtime-without-torch.md). The reference is
tests/fixtures/reference-vectors.npz, written by scripts/reference-vectors with
sentence-transformers; tests/test_onnx_encoder.py checks the handbook windows against it
token for token (its windows are tokenised here by `tokenizers`, so a tokenisation that
differed from transformers' would show as other vectors). Here: questions through the
embedder's own calls, pooling windows of several documents into length-sorted batches
changing nothing, and the clear refusal where a model folder needs the optional
`reference` extra that is not installed.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from ingest.chunker import chunk_document, doc_id_for
from ingest.loaders import load
from search.errors import ConfigError

REPO = Path(__file__).resolve().parent.parent
HANDBOOK = REPO / "examples" / "handbook"
FIXTURE = REPO / "tests" / "fixtures" / "reference-vectors.npz"
# float32 arithmetic in another order (batch padding): measured 1.4e-7 at most on 163
# handbook windows; 1e-5 leaves room for other CPUs' kernels.
TOLERANCE = 1e-5
# Cosine to sentence-transformers' fp32 vector (docs/decisions/0030-onnx-runtime-encoder.md).
FP32_COSINE = 0.9999

pytestmark = pytest.mark.slow


def _chunks(embedder, names: list[str]):
    chunks = []
    for name in names:
        doc = load(HANDBOOK / name, name)
        chunks += chunk_document(doc, doc_id_for(name), embedder.count_tokens)
    return chunks


def _sample(n: int) -> list[str]:
    return sorted(p.relative_to(HANDBOOK).as_posix() for p in HANDBOOK.rglob("*.md"))[:n]


def test_batched_windows_equal_windows_encoded_alone(embedder):
    chunks = _chunks(embedder, _sample(6))
    jobs = embedder.plan(chunks)
    assert len(jobs) > 40 and len({len(j.ids) for j in jobs}) > 10  # short and long windows
    batched = np.stack([w.vector for w in embedder.encode_jobs(jobs)])
    alone = np.concatenate([embedder.encode_texts([j.text]) for j in jobs[::7]])
    assert float(np.abs(batched[::7] - alone).max()) < TOLERANCE


def test_texts_encoded_each_alone_equal_them_batched(embedder):
    """The extractive composer's candidates run alone, unpadded (Embedder.encode_each)."""
    texts = ["Who holds the pager?", "The on-call engineer rotates the pager every Monday at ten, "
             "handing it over in the #oncall channel with a note of open incidents.", "Weekly."]
    each, batched = embedder.encode_each(texts), embedder.encode_texts(texts)
    assert each.shape == batched.shape == (3, embedder.stamp.dims)
    np.testing.assert_allclose(each, batched, atol=1e-6)
    assert np.array_equal(each[1], embedder.encode_texts(texts[1:2])[0])  # the longest pads nothing either way


def test_question_vectors_equal_sentence_transformers(embedder):
    with np.load(FIXTURE) as data:
        questions = [str(q) for q in data["query_texts"]]
        theirs = data["query_vectors"].astype(np.float32)
    theirs /= np.linalg.norm(theirs, axis=1, keepdims=True)
    ours = np.stack([embedder.encode_query(q) for q in questions])
    assert float((ours * theirs).sum(axis=1).min()) >= FP32_COSINE
    assert float(np.abs(embedder.encode_texts(questions) - ours).max()) < TOLERANCE


def test_a_window_the_model_would_truncate_is_refused(embedder):
    with pytest.raises(ValueError, match="truncated"):
        embedder.encode_texts(["word " * 400])


def test_the_bundled_model_runs_on_onnx_runtime(embedder):
    from ingest.onnx_encoder import OnnxModel
    from ingest.onnx_graph import unsupported

    assert unsupported(embedder.model_dir) is None
    assert isinstance(embedder.model, OnnxModel)


def _cls_model(embedder, tmp_path: Path) -> Path:
    """The bundled weights with CLS pooling: a folder the ONNX builder does not build."""
    folder = tmp_path / "cls-model"
    shutil.copytree(embedder.model_dir, folder)
    pooling = folder / "1_Pooling" / "config.json"
    config = json.loads(pooling.read_text())
    config.update(pooling_mode_mean_tokens=False, pooling_mode_cls_token=True)
    pooling.write_text(json.dumps(config))
    return folder


def test_a_model_onnx_cannot_build_needs_the_reference_extra_and_says_so(embedder, tmp_path, monkeypatch):
    """Such a folder runs through sentence-transformers; where it is not installed (the
    runtime lock leaves it out) the embedder stops with what to install."""
    from ingest.embedder import Embedder
    from ingest.onnx_graph import unsupported

    folder = _cls_model(embedder, tmp_path)
    assert "not mean pooling" in unsupported(folder)
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)  # absent, even if installed
    with pytest.raises(ConfigError) as err:
        Embedder(folder)
    message = str(err.value)
    assert "not mean pooling" in message and str(folder) in message
    assert "pip install 'citebot[reference]'" in message and "sentence_transformers" in message


def test_the_torch_encoder_needs_the_reference_extra_and_says_so(monkeypatch):
    from ingest.embedder import Embedder

    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(ConfigError, match=r"the torch encoder .* pip install 'citebot\[reference\]'"):
        Embedder(runtime="torch")

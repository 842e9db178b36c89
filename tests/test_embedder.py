"""The embedder's own forward pass (ingest/minilm.py) against sentence-transformers.

citebot embeds without importing sentence-transformers (that import was most of a
one-shot command's start-up), so this checks, on real windows of the sample handbook,
that the vectors are the ones sentence-transformers gives for the same texts, that
tokens and offsets are the ones transformers' tokenizer gives, and that pooling windows
of several documents into length-sorted batches changes nothing.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ingest.chunker import chunk_document, doc_id_for
from ingest.loaders import load

REPO = Path(__file__).resolve().parent.parent
HANDBOOK = REPO / "examples" / "handbook"
# float32 arithmetic in another order (fused QKV, other batch padding): measured 1.4e-7
# at most on 163 handbook windows; 1e-5 leaves room for other CPUs' kernels.
TOLERANCE = 1e-5

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def reference(embedder):
    """sentence-transformers on the same model folder, as citebot used it before."""
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(embedder.model_dir), device="cpu")


def _chunks(embedder, names: list[str]):
    chunks = []
    for name in names:
        doc = load(HANDBOOK / name, name)
        chunks += chunk_document(doc, doc_id_for(name), embedder.count_tokens)
    return chunks


def _sample(n: int) -> list[str]:
    return sorted(p.relative_to(HANDBOOK).as_posix() for p in HANDBOOK.rglob("*.md"))[:n]


def test_window_vectors_equal_sentence_transformers(embedder, reference):
    chunks = _chunks(embedder, _sample(6))
    jobs = embedder.plan(chunks)
    assert len(jobs) > 40 and len({len(j.ids) for j in jobs}) > 10  # short and long windows
    ours = np.stack([w.vector for w in embedder.encode_jobs(jobs)])
    theirs = reference.encode([j.text for j in jobs], batch_size=32, normalize_embeddings=True,
                              convert_to_numpy=True)
    assert ours.shape == theirs.shape
    assert float(np.abs(ours - theirs).max()) < TOLERANCE


def test_question_vectors_equal_sentence_transformers(embedder, reference):
    questions = ["how do I rotate the on-call pager?", "KlaxonTimeout", "what's the per diem in Oslo",
                 "Ünïcode — “quotes” and e.g. 1.5% off"]
    theirs = reference.encode(questions, normalize_embeddings=True, convert_to_numpy=True)
    ours = np.stack([embedder.encode_query(q) for q in questions])
    assert float(np.abs(ours - theirs).max()) < TOLERANCE
    assert float(np.abs(embedder.encode_texts(questions) - theirs).max()) < TOLERANCE


def test_tokens_offsets_and_prefixes_equal_transformers(embedder, reference):
    hf = reference.tokenizer
    chunks = _chunks(embedder, _sample(34))
    texts = [c.text for c in chunks[:200]] + [" > ".join(c.heading_path) for c in chunks]
    for text in texts:
        enc = hf(text, add_special_tokens=False, return_offsets_mapping=True)
        ours = embedder.tokenizer.encode(text, add_special_tokens=False)
        assert ours.ids == enc["input_ids"]
        assert list(ours.offsets) == [tuple(o) for o in enc["offset_mapping"]]
        assert embedder.tokenizer.decode(ours.ids[:32]) == hf.decode(enc["input_ids"][:32])
    for j in embedder.plan(chunks[:50]):
        assert list(j.ids) == hf(j.text)["input_ids"]


def test_a_window_the_model_would_truncate_is_refused(embedder):
    with pytest.raises(ValueError, match="truncated"):
        embedder.encode_texts(["word " * 400])


def test_the_bundled_model_runs_on_onnx_runtime(embedder):
    from ingest.minilm import unsupported
    from ingest.onnx_encoder import OnnxModel

    assert unsupported(embedder.model_dir) is None
    assert isinstance(embedder.model, OnnxModel)


def test_a_model_the_forward_pass_does_not_reproduce_runs_through_sentence_transformers(embedder, tmp_path):
    """CLS pooling on the same weights: the plain forward pass (mean pooling) would give
    other vectors, so the embedder hands the folder to sentence-transformers."""
    import json
    import shutil

    from sentence_transformers import SentenceTransformer

    from ingest.embedder import Embedder
    from ingest.minilm import SentenceTransformersModel, unsupported

    folder = tmp_path / "cls-model"
    shutil.copytree(embedder.model_dir, folder)
    pooling = folder / "1_Pooling" / "config.json"
    config = json.loads(pooling.read_text())
    config.update(pooling_mode_mean_tokens=False, pooling_mode_cls_token=True)
    pooling.write_text(json.dumps(config))
    assert "not mean pooling" in unsupported(folder)
    other = Embedder(folder)
    assert isinstance(other.model, SentenceTransformersModel)
    texts = ["How many vacation days do new hires get?", "restart the billing worker"]
    ours = other.encode_texts(texts)
    theirs = SentenceTransformer(str(folder), device="cpu").encode(texts, normalize_embeddings=True)
    assert float(np.abs(np.asarray(ours) - theirs).max()) < TOLERANCE
    mean = embedder.encode_texts(texts)
    assert float(np.abs(np.asarray(ours) - np.asarray(mean)).max()) > 0.01  # the pooling mattered

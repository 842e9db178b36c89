"""MPNet in the ONNX graph builder (ingest/onnx_graph.py), the optional all-mpnet-base-v2's
architecture, checked in CI without its 420 MB of weights: a 2-layer MPNet of random
weights against transformers' MPNetModel (tests/fixtures/tiny-mpnet.npz, written by
scripts/reference-vectors-mpnet), MPNet's relative-position buckets, and the model stamp
a store of one model gives the other.

The real model's parity (sentence-transformers' vectors of the sample handbook's windows
and questions) is benchmarks/mpnet_parity.py, run by hand where the model is installed
(docs/decisions/0038-mpnet-second-model.md says why it is not a test).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from ingest import embedder as embedder_module
from ingest.embedder import Embedder, model_checksum
from ingest.onnx_encoder import OnnxModel
from ingest.onnx_graph import relative_position_buckets, unsupported
from search.embedded import EmbeddedStore
from search.errors import ConfigError, ModelMismatchError
from search.types import ModelStamp
from tests.conftest import REPO
from tests.test_onnx_encoder import _write_safetensors

FIXTURE = REPO / "tests" / "fixtures" / "tiny-mpnet.npz"
# The same arithmetic as transformers' in float32 (docs/decisions/0038-mpnet-second-model.md).
FP32_COSINE = 0.9999


@pytest.fixture(scope="module")
def tiny() -> dict:
    with np.load(FIXTURE) as data:
        names = list(data["names"])
        return {"config": json.loads(str(data["config"])), "ids": data["ids"], "mask": data["mask"],
                "vectors": data["vectors"], "weights": {n: data[f"w{i}"] for i, n in enumerate(names)}}


def tiny_mpnet(folder: Path, tiny: dict, vocab: int | None = None) -> Path:
    """A sentence-transformers folder of the fixture's MPNet (mean pooling, normalised);
    with `vocab`, a word-embedding table of that many random rows instead of the fixture's 50."""
    config, weights = dict(tiny["config"]), dict(tiny["weights"])
    if vocab is not None:
        config["vocab_size"] = vocab
        rng = np.random.default_rng(1)
        weights["embeddings.word_embeddings.weight"] = rng.normal(0, 0.5, (vocab, config["hidden_size"]))
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}]))
    (folder / "1_Pooling").mkdir()
    (folder / "1_Pooling" / "config.json").write_text(json.dumps({"pooling_mode_mean_tokens": True}))
    _write_safetensors(folder / "model.safetensors", weights)
    return folder


def test_the_fixture_is_small_and_reaches_the_logarithmic_buckets(tiny):
    assert FIXTURE.stat().st_size < 300_000
    assert tiny["mask"].sum(axis=1).max() > 16  # keys 16+ apart: past the 8 exact buckets
    assert tiny["vectors"].shape == (len(tiny["ids"]), tiny["config"]["hidden_size"])


def test_the_mpnet_graph_gives_transformers_vectors(tmp_path, tiny):
    folder = tiny_mpnet(tmp_path / "m", tiny)
    assert unsupported(folder) is None
    model = OnnxModel(folder, model_checksum(folder), cache_dir=tmp_path / "cache")
    rows = [list(ids[: int(m.sum())]) for ids, m in zip(tiny["ids"], tiny["mask"])]
    batched = model.encode(rows)  # padded to the longest, as the ingest's batches are
    alone = np.concatenate([model.encode([r]) for r in rows])
    for ours in (batched, alone):
        cosines = (ours * tiny["vectors"]).sum(axis=1)
        assert cosines.min() >= FP32_COSINE, cosines


def test_int8_is_refused_for_mpnet_naming_the_way_out(tmp_path, tiny):
    """all-mpnet-base-v2 at int8 gave a cosine of 0.15 to its own vectors
    (docs/decisions/0038-mpnet-second-model.md): refused, not served."""
    folder = tiny_mpnet(tmp_path / "m", tiny)
    with pytest.raises(ConfigError, match="int8 is not available for MPNet.*ENCODER_PRECISION=fp32"):
        OnnxModel(folder, model_checksum(folder), precision="int8", cache_dir=tmp_path / "cache")
    assert not (tmp_path / "cache" / "onnx").exists() or not list((tmp_path / "cache" / "onnx").glob("*int8*"))


def test_relative_position_buckets_follow_mpnet():
    b = relative_position_buckets(300)
    assert b.shape == (300, 300) and b.dtype == np.int64
    # Query i, key j: keys before the query in buckets 0-15, after it in 16-31; exact under 8
    # tokens apart; the farthest (128 and more) share the last bucket of their half.
    assert [b[10, 10], b[10, 9], b[10, 11], b[10, 3], b[10, 17]] == [0, 1, 17, 7, 23]
    assert b[200, 72] == 15 and b[0, 299] == 31 and b[299, 0] == 15
    assert (np.diff(b[150, :150]) <= 0).all() and (np.diff(b[150, 150:]) >= 0).all()  # grows with distance


def test_a_store_of_one_model_refuses_the_other_naming_both(tmp_path, tiny, embedder, monkeypatch):
    """The stamp names the model by its weights (ingest.embedder.KNOWN_MODELS): a store built
    with all-MiniLM-L6-v2 refuses all-mpnet-base-v2 and the other way round, naming both. The
    tiny MPNet stands in for the real one (its checksum put in the table for the test)."""
    folder = tiny_mpnet(tmp_path / "mpnet", tiny, vocab=30527)
    shutil.copy(embedder.model_dir / "tokenizer.json", folder / "tokenizer.json")  # ids under 30527
    monkeypatch.setitem(embedder_module.KNOWN_MODELS, model_checksum(folder), "sentence-transformers/all-mpnet-base-v2")
    mpnet = Embedder(folder, cache_dir=tmp_path / "cache")
    assert (mpnet.stamp.name, mpnet.stamp.dims) == ("sentence-transformers/all-mpnet-base-v2", 8)
    assert embedder.stamp.name == "sentence-transformers/all-MiniLM-L6-v2"
    assert mpnet.encode_query("How many days of parental leave?").shape == (8,)
    for built, asked in ((embedder, mpnet), (mpnet, embedder)):
        store = EmbeddedStore(tmp_path / f"store-{built.stamp.dims}")
        try:
            store.open_for(built.stamp)
            store.open_for(built.stamp)  # the same model opens it again
            with pytest.raises(ModelMismatchError) as err:
                store.open_for(asked.stamp)
        finally:
            store.close()
        message = str(err.value)
        assert f"built with {built.stamp.describe()}" in message, message
        assert f"configured with {asked.stamp.describe()}" in message, message


def test_a_store_stamped_before_the_model_had_its_own_name_keeps_working(tmp_path):
    """Before the stamp named all-mpnet-base-v2, a store built with it read as MiniLM's name
    with mpnet's weights (and torch, through sentence-transformers): the weights decide."""
    checksum = "78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658"
    old = ModelStamp("sentence-transformers/all-MiniLM-L6-v2", 768, checksum, "torch", "fp32")
    new = ModelStamp(embedder_module.KNOWN_MODELS[checksum], 768, checksum, "onnxruntime", "fp32")
    store = EmbeddedStore(tmp_path / "store")
    try:
        store.open_for(old)
        store.open_for(new)
        with pytest.raises(ModelMismatchError):
            store.open_for(ModelStamp(new.name, 768, "0" * 64, "onnxruntime", "fp32"))
    finally:
        store.close()

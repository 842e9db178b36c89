"""Builds the embedding model's ONNX graph from its weights: no torch, no export.

all-MiniLM-L6-v2 is a 6-layer BERT (width 384, 12 heads) followed by mean pooling over
the real tokens and L2 normalisation; all-mpnet-base-v2, the optional second model, is a
12-layer MPNet (width 768) with the same pooling (the MPNet differences: below). This module reads the model folder's
model.safetensors (a JSON header and raw little-endian arrays, read with numpy) and
config.json, and writes with the `onnx` package a graph doing ingest/minilm.py's arithmetic: word + position + token-type-0 embeddings, LayerNorm, six
layers of self-attention (padding never attended to), GELU (erf) feed-forward, mean
pooling, unit length. MPNet differs in three places: no token-type embeddings; positions
numbered from padding_idx + 1; and a relative position bias added to every layer's
attention scores, one [heads, L, L] table looked up from 32 buckets of the distance j - i
(shared by all layers; docs/decisions/0038-mpnet-second-model.md). Built, not exported: torch is needed neither to build it nor to run
it (docs/decisions/0030-onnx-runtime-encoder.md says why).

The layers are ONNX Runtime's fused operators (ingest/onnx_fused.py: Attention,
SkipLayerNormalization, BiasGelu, EmbedLayerNormalization), faster on one thread than the
same arithmetic in standard operators, which ORT_ENABLE_ALL fused only in part
(docs/decisions/0047-fused-encoder-graph.md); build_graph(fused=False) still writes the
standard-operator graph, the cross-check tests/test_onnx_fused.py runs the fused one against.

`unsupported` says which model folders this reproduces; any other runs through
sentence-transformers (ingest/minilm.py), where torch is installed.
"""

from __future__ import annotations

import json
import math
import re
import struct
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ingest import onnx_fused

if TYPE_CHECKING:
    import onnx

# Bumped whenever the graph this module writes (or the choice of MatMuls int8 quantises) changes: it is part of the cache key, so a
# changed builder never reuses a graph an older one wrote (ingest/onnx_encoder.py).
BUILDER_VERSION = 3
# ONNX opset 17: the first with LayerNormalization as one operator (ONNX Runtime runs it
# as one kernel); every standard operator used here exists in it. The fused operators are
# com.microsoft's version 1, in every ONNX Runtime's CPU provider.
OPSET = 17
# Added to the attention scores of padding positions: exp(-1e9 - max) is 0.0 in float32,
# as torch's boolean mask (-inf) gives, without -inf's NaN for a row of padding only.
MASKED_SCORE = -1e9

# The sentence-transformers modules this graph (and ingest/minilm.py) reproduces, in order
# (Normalize is optional: vectors are always unit length here, as citebot always asked for).
SUPPORTED_MODULES = [
    "sentence_transformers.models.Transformer",
    "sentence_transformers.models.Pooling",
    "sentence_transformers.models.Normalize",
]

# The attention weights of each architecture, by role: (query, key, value), output, and
# the LayerNorm after the attention.
_ATTENTION = {
    "bert": (
        ("attention.self.query", "attention.self.key", "attention.self.value"),
        "attention.output.dense",
        "attention.output.LayerNorm",
    ),
    "mpnet": (("attention.attn.q", "attention.attn.k", "attention.attn.v"), "attention.attn.o", "attention.LayerNorm"),
}
# MPNet's relative-position buckets: half for each direction, exact up to 8 tokens apart,
# logarithmic up to 128 (HF transformers' MPNetEncoder.relative_position_bucket).
MPNET_MAX_DISTANCE = 128

_DTYPES = {"F32": "<f4", "F16": "<f2", "BF16": None, "I64": "<i8", "I32": "<i4"}


def unsupported(model_dir: Path) -> str | None:
    """Why this graph would not give the model folder's vectors (None when it does): a
    BERT with absolute positions and GELU, or an MPNet with GELU, then mean pooling only.
    Any other model (another architecture, CLS or max pooling, a Dense layer) goes through
    sentence-transformers itself (ingest.minilm.SentenceTransformersModel)."""
    try:
        config = json.loads((model_dir / "config.json").read_text())
        modules = json.loads((model_dir / "modules.json").read_text())
        pooling_path = next((m["path"] for m in modules if m.get("type", "").endswith(".Pooling")), None)
        pooling = json.loads((model_dir / pooling_path / "config.json").read_text()) if pooling_path else {}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return f"cannot read its configuration ({exc})"
    kind = config.get("model_type")
    if (
        kind not in _ATTENTION
        or config.get("hidden_act") != "gelu"
        or (kind == "bert" and config.get("position_embedding_type", "absolute") != "absolute")
    ):
        return "not a BERT model with absolute positions and GELU, nor an MPNet with GELU"
    types = [m.get("type") for m in modules]
    if types not in (SUPPORTED_MODULES, SUPPORTED_MODULES[:2]):
        return f"modules {types} are not Transformer, Pooling[, Normalize]"
    modes = {k for k, v in pooling.items() if k.startswith("pooling_mode") and v}
    if modes != {"pooling_mode_mean_tokens"}:
        return f"pooling {sorted(modes)} is not mean pooling"
    if not (model_dir / "model.safetensors").exists():
        return "no model.safetensors"
    return None


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """Every tensor of a .safetensors file as a float32 (or integer) numpy array. The
    format: 8 bytes of little-endian header length, a JSON header naming each tensor's
    dtype, shape and byte range, then the raw little-endian data."""
    data = path.read_bytes()
    if len(data) < 8:
        raise ValueError(f"{path}: too short for a safetensors file")
    (n,) = struct.unpack("<Q", data[:8])
    if n > len(data) - 8:
        raise ValueError(f"{path}: header length {n} runs past the end of the file")
    header = json.loads(data[8 : 8 + n])
    base = 8 + n
    out: dict[str, np.ndarray] = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = _DTYPES.get(info["dtype"])
        if dtype is None:
            raise ValueError(f"{path}: tensor {name} has dtype {info['dtype']}, which the builder does not read")
        start, end = info["data_offsets"]
        array = np.frombuffer(
            data, dtype=dtype, count=(end - start) // np.dtype(dtype).itemsize, offset=base + start
        ).reshape(info["shape"])
        out[name.removeprefix("bert.").removeprefix("mpnet.")] = array.astype(np.float32) if dtype == "<f2" else array
    return out


class _Graph:
    """Nodes and initialisers of the graph being built, with generated names."""

    def __init__(self) -> None:
        self.nodes: list[Any] = []
        self.inits: list[Any] = []
        self._n = 0

    def const(self, array: np.ndarray, name: str | None = None) -> str:
        from onnx import numpy_helper

        self._n += 1
        name = name or f"c{self._n}"
        self.inits.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def op(self, kind: str, *inputs: str, **attrs: Any) -> str:
        """A standard operator's node; its one output's name."""
        return self.node(kind, list(inputs), **attrs)[0]

    def node(
        self, kind: str, inputs: list[str], outputs: int = 1, domain: str | None = None, **attrs: Any
    ) -> list[str]:
        """A node of the operator set `domain` (None: standard; ONNX Runtime's com.microsoft,
        ingest/onnx_fused.py); its first `outputs` outputs named (any others left unnamed)."""
        from onnx import helper

        self._n += 1
        name = f"{kind.lower()}{self._n}"
        names = [name] if outputs == 1 else [f"{name}_{i}" for i in range(outputs)]
        self.nodes.append(helper.make_node(kind, inputs, names, name=name, domain=domain, **attrs))
        return names

    def linear(self, x: str, weight: np.ndarray, bias: np.ndarray, name: str) -> str:
        """x @ weight.T + bias, weight as torch stores it ([out, in])."""
        w = self.const(np.ascontiguousarray(weight.T.astype(np.float32)), name + ".weight")
        return self.op("Add", self.op("MatMul", x, w), self.const(bias.astype(np.float32), name + ".bias"))

    def layer_norm(self, x: str, w: dict[str, np.ndarray], name: str, eps: float) -> str:
        return self.op(
            "LayerNormalization",
            x,
            self.const(w[name + ".weight"], name + ".weight"),
            self.const(w[name + ".bias"], name + ".bias"),
            axis=-1,
            epsilon=eps,
        )


def relative_position_buckets(length: int, num_buckets: int = 32, max_distance: int = MPNET_MAX_DISTANCE) -> np.ndarray:
    """MPNet's bucket of each (query i, key j) pair, [length, length] int64, as transformers
    computes it: keys before the query in the first half, after it in the second; distances
    under num_buckets/4 exact, longer ones log-spaced up to max_distance. The logarithm in
    float32, as torch's, so a distance on a bucket's edge falls on the same side."""
    n = -(np.arange(length)[None, :] - np.arange(length)[:, None])  # i - j
    half = num_buckets // 2
    out = (n < 0).astype(np.int64) * half
    n = np.abs(n)
    exact = half // 2
    with np.errstate(divide="ignore"):
        scaled = (
            np.log(n.astype(np.float32) / np.float32(exact))
            / np.float32(math.log(max_distance / exact))
            * np.float32(half - exact)
        )
    large = np.minimum(exact + np.where(n < exact, 0, scaled).astype(np.int64), half - 1)
    return out + np.where(n < exact, n, large)


def build_graph(model_dir: Path, fused: bool = True) -> onnx.ModelProto:
    """The ONNX model of the folder's BERT or MPNet + mean pooling + L2 norm. Inputs: input_ids and
    attention_mask (int64, [batch, tokens], [CLS] … [SEP], padding masked 0 and after the
    real tokens: the fused Attention reads only each row's count of them); output:
    embedding (float32, [batch, width], unit length). fused=False: standard operators only."""
    from onnx import TensorProto, checker, helper

    why = unsupported(model_dir)
    if why is not None:
        raise ValueError(f"{model_dir}: the ONNX builder cannot build this model: {why}")
    config = json.loads((model_dir / "config.json").read_text())
    heads, width = int(config["num_attention_heads"]), int(config["hidden_size"])
    eps = float(config["layer_norm_eps"])
    w = read_safetensors(model_dir / "model.safetensors")
    g = _Graph()

    kind = config["model_type"]
    ids, mask = "input_ids", "attention_mask"
    # Embeddings: word + position (the first `tokens` rows) + token type 0 (citebot never
    # sends a second segment), the last two summed once here. MPNet has no token types and
    # numbers the real tokens from padding_idx + 1 (padding comes after them here).
    if kind == "mpnet":
        positions = w["embeddings.position_embeddings.weight"][int(config["pad_token_id"]) + 1 :]
    else:
        positions = w["embeddings.position_embeddings.weight"] + w["embeddings.token_type_embeddings.weight"][0]
    length = g.op("Slice", g.op("Shape", ids), g.const(np.array([1], np.int64)), g.const(np.array([2], np.int64)))
    m = g.op("Cast", mask, to=TensorProto.FLOAT)
    relative = None
    if kind == "mpnet":
        # MPNet's relative position bias, [heads, L, L], the top-left corner of the bucket
        # table for the longest sequence its positions allow, looked up once for all layers.
        table = relative_position_buckets(len(positions), int(config.get("relative_attention_num_buckets", 32)))
        corner = g.op(
            "Slice",
            g.const(table, "relative_position_buckets"),
            g.const(np.zeros(2, np.int64)),
            g.op("Concat", length, length, axis=0),
            g.const(np.array([0, 1], np.int64)),
        )
        relative = g.op(
            "Gather", g.const(w["encoder.relative_attention_bias.weight"], "relative_attention_bias"), corner, axis=0
        )
        relative = g.op("Transpose", relative, perm=[2, 0, 1])
    layers = range(int(config["num_hidden_layers"]))
    if fused:
        x, count = onnx_fused.embeddings(g, ids, mask, positions, w, eps)
        if relative:
            relative = g.op("Unsqueeze", relative, g.const(np.array([0], np.int64)))
        for i in layers:
            x = onnx_fused.layer(
                g, x, count, relative, w, f"encoder.layer.{i}.", _ATTENTION[kind], heads, eps, MASKED_SCORE
            )
    else:
        x = _standard_layers(g, w, ids, m, positions, length, relative, kind, heads, width, eps, layers)

    # Mean over the real tokens, then unit length (torch's normalize: divide by max(norm, 1e-12)).
    m3 = g.op("Unsqueeze", m, g.const(np.array([2], np.int64)))
    axis1 = g.const(np.array([1], np.int64))
    total = g.op("ReduceSum", g.op("Mul", x, m3), axis1, keepdims=0)
    count = g.op("Max", g.op("ReduceSum", m3, axis1, keepdims=0), g.const(np.array(1e-9, np.float32)))
    pooled = g.op("Div", total, count)
    norm = g.op("Max", g.op("ReduceL2", pooled, axes=[1], keepdims=1), g.const(np.array(1e-12, np.float32)))
    g.nodes.append(helper.make_node("Div", [pooled, norm], ["embedding"], name="embedding"))

    graph = helper.make_graph(
        g.nodes,
        "citebot-encoder",
        [
            helper.make_tensor_value_info(ids, TensorProto.INT64, ["batch", "tokens"]),
            helper.make_tensor_value_info(mask, TensorProto.INT64, ["batch", "tokens"]),
        ],
        [helper.make_tensor_value_info("embedding", TensorProto.FLOAT, ["batch", width])],
        g.inits,
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET)] + ([helper.make_opsetid(onnx_fused.MS, 1)] if fused else []),
        producer_name="citebot",
        producer_version=str(BUILDER_VERSION),
    )
    model.ir_version = 8  # the IR of opset 17, which every ONNX Runtime since 1.13 reads
    checker.check_model(model)
    return model


def quantisable_matmuls(model: onnx.ModelProto) -> list[str]:
    """The nodes int8 quantisation touches: the attention's projections (query, key, value
    and output), each by a weight matrix; in the fused graph the packed query/key/value
    projection is the Attention node's (quantised to QAttention). The attention's two other MatMuls multiply
    activations by activations: quantising them too gave a cosine of 0.96 to
    sentence-transformers' vectors. The feed-forward pair (GELU's outliers) stays float: with
    it quantised the worst cosine on the reference fixture's windows, in the ingest's
    batches, was 0.986, without it 0.9965 (docs/decisions/0030-onnx-runtime-encoder.md)."""
    weights = {i.name for i in model.graph.initializer}
    return [
        n.name
        for n in model.graph.node
        if n.op_type in ("MatMul", "Attention")
        and n.input[1] in weights
        and re.search(r"\.attention\.(self\.qkv|output\.dense)\.weight$", n.input[1])
    ]


def _standard_layers(
    g: _Graph,
    w: dict[str, np.ndarray],
    ids: str,
    m: str,
    positions: np.ndarray,
    length: str,
    relative: str | None,
    kind: str,
    heads: int,
    width: int,
    eps: float,
    layers: range,
) -> str:
    """The embeddings and layers in standard ONNX operators only (fused=False)."""
    from onnx import helper

    words = g.op("Gather", g.const(w["embeddings.word_embeddings.weight"], "word_embeddings"), ids, axis=0)
    pos = g.op(
        "Slice",
        g.const(positions.astype(np.float32), "position_embeddings"),
        g.const(np.array([0], np.int64)),
        length,
        g.const(np.array([0], np.int64)),
    )
    x = g.layer_norm(g.op("Add", words, pos), w, "embeddings.LayerNorm", eps)
    # The mask as float [batch, 1, 1, tokens]: 0 for real tokens, MASKED_SCORE for padding.
    one = g.const(np.array(1.0, np.float32))
    bias = g.op("Mul", g.op("Sub", one, m), g.const(np.array(MASKED_SCORE, np.float32)))
    bias = g.op("Unsqueeze", bias, g.const(np.array([1, 2], np.int64)))
    if relative:
        bias = g.op("Add", bias, relative)
    head = width // heads
    split_heads = g.const(np.array([0, 0, heads, head], np.int64))  # 0: keep that dimension
    merge_heads = g.const(np.array([0, 0, width], np.int64))
    scale = g.const(np.array(1.0 / np.sqrt(head), np.float32))
    for i in layers:
        p = f"encoder.layer.{i}."
        # Query, key and value as one matrix: one MatMul instead of three, then split.
        qkv_names, output_name, norm_name = _ATTENTION[kind]
        qkv_w = np.concatenate([w[p + n + ".weight"] for n in qkv_names])
        qkv_b = np.concatenate([w[p + n + ".bias"] for n in qkv_names])
        qkv = g.linear(x, qkv_w, qkv_b, p + "attention.self.qkv")
        q, k, v = (f"{qkv}_{n}" for n in "qkv")
        g.nodes.append(
            helper.make_node(
                "Split", [qkv, g.const(np.array([width] * 3, np.int64))], [q, k, v], name=qkv + "_split", axis=-1
            )
        )
        q = g.op("Transpose", g.op("Reshape", q, split_heads), perm=[0, 2, 1, 3])
        k = g.op("Transpose", g.op("Reshape", k, split_heads), perm=[0, 2, 3, 1])
        v = g.op("Transpose", g.op("Reshape", v, split_heads), perm=[0, 2, 1, 3])
        scores = g.op("Add", g.op("Mul", g.op("MatMul", q, k), scale), bias)
        context = g.op("MatMul", g.op("Softmax", scores, axis=-1), v)
        context = g.op("Reshape", g.op("Transpose", context, perm=[0, 2, 1, 3]), merge_heads)
        attended = g.linear(
            context,
            w[p + output_name + ".weight"],  # (named as BERT's: int8 finds it)
            w[p + output_name + ".bias"],
            p + "attention.output.dense",
        )
        x = g.layer_norm(g.op("Add", attended, x), w, p + norm_name, eps)
        inner = g.linear(
            x, w[p + "intermediate.dense.weight"], w[p + "intermediate.dense.bias"], p + "intermediate.dense"
        )
        # GELU as BERT defines it, with erf: 0.5 x (1 + erf(x / sqrt 2)).
        erf = g.op("Erf", g.op("Div", inner, g.const(np.array(np.sqrt(2.0), np.float32))))
        inner = g.op("Mul", g.op("Mul", inner, g.op("Add", erf, one)), g.const(np.array(0.5, np.float32)))
        out = g.linear(inner, w[p + "output.dense.weight"], w[p + "output.dense.bias"], p + "output.dense")
        x = g.layer_norm(g.op("Add", out, x), w, p + "output.LayerNorm", eps)

    return x

"""The encoder's layers with ONNX Runtime's fused operators (domain com.microsoft).

The same arithmetic as the standard-operator layers of ingest/onnx_graph.py, in fewer,
larger kernels: EmbedLayerNormalization (word + position embeddings, LayerNorm, and each
row's count of real tokens), Attention (the packed query/key/value projection, the
scaled, masked softmax over every head, and the heads merged again, in one kernel),
SkipLayerNormalization (bias + residual + LayerNorm) and BiasGelu (bias + erf GELU).
Padding comes after the real tokens (ingest.onnx_encoder.OnnxModel.encode pads on the
right), so a row's count of real tokens is all Attention's mask needs. MPNet's relative
position bias goes in as Attention's attention_bias. Figures and the choice:
docs/decisions/0047-fused-encoder-graph.md.
"""

from __future__ import annotations

from typing import Any

import numpy as np

MS = "com.microsoft"
# The graph being built is ingest.onnx_graph's _Graph, typed Any here: that module imports
# this one, and an import back, even for type checking only, would be a circle.
_Graph = Any


def _ms(g: _Graph, kind: str, inputs: list[str], outputs: int = 1, **attrs: Any) -> list[str]:
    """A com.microsoft node; its first `outputs` outputs named (the rest left unnamed)."""
    names: list[str] = g.node(kind, inputs, outputs, domain=MS, **attrs)
    return names


def embeddings(g: _Graph, ids: str, mask: str, positions: np.ndarray, w: dict[str, np.ndarray], eps: float) -> tuple:
    """(hidden [batch, tokens, width], real tokens per row [batch] int32): word + position
    embeddings (token type 0 already added to `positions` for BERT), then LayerNorm."""
    from onnx import TensorProto

    hidden, count = _ms(
        g,
        "EmbedLayerNormalization",
        [
            g.op("Cast", ids, to=TensorProto.INT32),
            "",
            g.const(w["embeddings.word_embeddings.weight"], "word_embeddings"),
            g.const(positions.astype(np.float32), "position_embeddings"),
            "",
            g.const(w["embeddings.LayerNorm.weight"], "embeddings.LayerNorm.weight"),
            g.const(w["embeddings.LayerNorm.bias"], "embeddings.LayerNorm.bias"),
            g.op("Cast", mask, to=TensorProto.INT32),
        ],
        outputs=2,
        epsilon=eps,
    )
    return hidden, count


def layer(
    g: _Graph,
    x: str,
    count: str,
    relative: str | None,
    w: dict[str, np.ndarray],
    p: str,
    names: tuple,
    heads: int,
    eps: float,
    masked_score: float,
) -> str:
    """One transformer layer on hidden states x; `count` the real tokens of each row,
    `relative` the [1, heads, L, L] position bias added to the scores (MPNet) or None."""
    qkv_names, output_name, norm_name = names
    qkv_w = np.concatenate([w[p + n + ".weight"] for n in qkv_names])
    qkv_b = np.concatenate([w[p + n + ".bias"] for n in qkv_names])
    inputs = [
        x,
        g.const(np.ascontiguousarray(qkv_w.T.astype(np.float32)), p + "attention.self.qkv.weight"),
        g.const(qkv_b.astype(np.float32), p + "attention.self.qkv.bias"),
        count,
    ]
    inputs += ["", relative] if relative else []
    (context,) = _ms(g, "Attention", inputs, num_heads=heads, mask_filter_value=masked_score)
    x = _skip_norm(g, context, x, w, p + output_name, p + norm_name, p + "attention.output.dense", eps)
    inner = g.op(
        "MatMul",
        x,
        g.const(np.ascontiguousarray(w[p + "intermediate.dense.weight"].T), p + "intermediate.dense.weight"),
    )
    (inner,) = _ms(g, "BiasGelu", [inner, g.const(w[p + "intermediate.dense.bias"], p + "intermediate.dense.bias")])
    return _skip_norm(g, inner, x, w, p + "output.dense", p + "output.LayerNorm", p + "output.dense", eps)


def _skip_norm(
    g: _Graph, x: str, skip: str, w: dict[str, np.ndarray], dense: str, norm: str, name: str, eps: float
) -> str:
    """LayerNorm(x @ dense.weight.T + dense.bias + skip), the weight named `name`."""
    projected = g.op("MatMul", x, g.const(np.ascontiguousarray(w[dense + ".weight"].T), name + ".weight"))
    (out,) = _ms(
        g,
        "SkipLayerNormalization",
        [
            projected,
            skip,
            g.const(w[norm + ".weight"], norm + ".weight"),
            g.const(w[norm + ".bias"], norm + ".bias"),
            g.const(w[dense + ".bias"], name + ".bias"),
        ],
        epsilon=eps,
    )
    return out

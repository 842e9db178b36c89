"""The embedding model's forward pass in plain torch: a BERT encoder, mean pooling, unit length.

all-MiniLM-L6-v2 is a 6-layer BERT (width 384, 12 heads); sentence-transformers runs it
as transformers' BertModel → mean pooling over the real tokens → L2 normalisation. This
module does the same arithmetic on the same weights (model.safetensors) with torch's own
functions, so a command that embeds a question imports neither sentence-transformers nor
transformers. Measured with `python -X importtime` on a quiet 2-core machine (load 0.4):
`import sentence_transformers` 4.1 s, `from transformers import BertModel` 3.4 s,
`import torch` 1.1 s, `import tokenizers` 0.03 s.

citebot runs the same arithmetic on ONNX Runtime by default (ingest/onnx_encoder.py,
no torch); this forward pass stays for where the optional `reference` extra (torch,
sentence-transformers; in neither lock: docs/decisions/0037-runtime-without-torch.md) is
installed: the benchmark compares the two (benchmarks/encoder.py). A model folder neither reproduces (another architecture
or pooling: see ingest.onnx_graph.unsupported) is run by sentence-transformers itself,
which stays the reference.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from ingest.onnx_graph import unsupported
from search.errors import ConfigError

__all__ = ["MiniLM", "SentenceTransformersModel", "unsupported"]


def _padded(ids: Sequence[Sequence[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    """Token ids padded to the longest sequence of the call, and the mask of real tokens."""
    tokens = torch.zeros((len(ids), max(len(s) for s in ids)), dtype=torch.long)
    mask = torch.zeros(tokens.shape, dtype=torch.bool)
    for i, s in enumerate(ids):
        tokens[i, : len(s)] = torch.tensor(s, dtype=torch.long)
        mask[i, : len(s)] = True
    return tokens, mask


class SentenceTransformersModel:
    """The same interface over sentence-transformers, for a model folder the forward pass
    below does not reproduce (`unsupported`): slower to import (4 s), any model it loads."""

    runtime = "torch"
    precision = "fp32"

    def __init__(self, model_dir: Path) -> None:
        from sentence_transformers import SentenceTransformer

        self.st = SentenceTransformer(str(model_dir), device="cpu")
        dims = (
            self.st.get_embedding_dimension()
            if hasattr(self.st, "get_embedding_dimension")
            else self.st.get_sentence_embedding_dimension()
        )
        if dims is None:
            raise ConfigError(
                f"the model in {model_dir} does not say its embedding width: "
                "give CITEBOT_MODEL_DIR a sentence-transformers model folder"
            )
        self.width = int(dims)

    @torch.inference_mode()
    def encode(self, ids: Sequence[Sequence[int]]) -> np.ndarray:
        """Unit vectors for token-id sequences, through the model's own modules."""
        tokens, mask = _padded(ids)
        out = self.st({"input_ids": tokens, "attention_mask": mask.long()})["sentence_embedding"]
        return F.normalize(out, p=2, dim=1).numpy().astype(np.float32, copy=False)


class MiniLM:
    """A BERT encoder with mean pooling, read from a sentence-transformers model folder
    (one that `unsupported` accepts)."""

    runtime = "torch"
    precision = "fp32"

    def __init__(self, model_dir: Path) -> None:
        from safetensors.torch import load_file

        config = json.loads((model_dir / "config.json").read_text())
        if (
            config.get("model_type") != "bert"
            or config.get("hidden_act") != "gelu"
            or config.get("position_embedding_type", "absolute") != "absolute"
        ):
            raise ValueError(f"{model_dir}: not a BERT model with absolute positions and GELU")
        self.heads = int(config["num_attention_heads"])
        self.width = int(config["hidden_size"])
        self.eps = float(config["layer_norm_eps"])
        w = {k.removeprefix("bert."): v for k, v in load_file(str(model_dir / "model.safetensors")).items()}
        self.word = w["embeddings.word_embeddings.weight"]
        self.position = w["embeddings.position_embeddings.weight"]
        self.token_type = w["embeddings.token_type_embeddings.weight"][0]
        self.emb_norm = (w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        self.layers = []
        for i in range(int(config["num_hidden_layers"])):
            p = f"encoder.layer.{i}."
            # Query, key and value as one matrix: one matmul instead of three.
            qkv_w = torch.cat([w[p + f"attention.self.{n}.weight"] for n in ("query", "key", "value")])
            qkv_b = torch.cat([w[p + f"attention.self.{n}.bias"] for n in ("query", "key", "value")])
            self.layers.append(
                (
                    qkv_w,
                    qkv_b,
                    w[p + "attention.output.dense.weight"],
                    w[p + "attention.output.dense.bias"],
                    w[p + "attention.output.LayerNorm.weight"],
                    w[p + "attention.output.LayerNorm.bias"],
                    w[p + "intermediate.dense.weight"],
                    w[p + "intermediate.dense.bias"],
                    w[p + "output.dense.weight"],
                    w[p + "output.dense.bias"],
                    w[p + "output.LayerNorm.weight"],
                    w[p + "output.LayerNorm.bias"],
                )
            )

    @torch.inference_mode()
    def encode(self, ids: Sequence[Sequence[int]]) -> np.ndarray:
        """Unit vectors, one per token-id sequence ([CLS] and [SEP] included), padded here
        to the longest of the call (so callers batch sequences of similar length)."""
        tokens, mask = _padded(ids)
        n, length = tokens.shape
        x = self.word[tokens] + self.position[:length] + self.token_type
        x = F.layer_norm(x, (self.width,), *self.emb_norm, self.eps)
        head = self.width // self.heads
        attend = mask[:, None, None, :]  # padding is never attended to
        for qkv_w, qkv_b, o_w, o_b, n1_w, n1_b, i_w, i_b, out_w, out_b, n2_w, n2_b in self.layers:
            qkv = F.linear(x, qkv_w, qkv_b).view(n, length, 3, self.heads, head).permute(2, 0, 3, 1, 4)
            context = F.scaled_dot_product_attention(qkv[0], qkv[1], qkv[2], attn_mask=attend)
            context = context.transpose(1, 2).reshape(n, length, self.width)
            x = F.layer_norm(F.linear(context, o_w, o_b) + x, (self.width,), n1_w, n1_b, self.eps)
            inner = F.gelu(F.linear(x, i_w, i_b))
            x = F.layer_norm(F.linear(inner, out_w, out_b) + x, (self.width,), n2_w, n2_b, self.eps)
        m = mask.unsqueeze(-1).to(x.dtype)
        pooled = (x * m).sum(dim=1) / m.sum(dim=1).clamp(min=1e-9)
        return F.normalize(pooled, p=2, dim=1).numpy().astype(np.float32, copy=False)

"""An optional cross-encoder reranker, loaded from a local folder (never downloaded).

No reranker weights can be fetched on this project's machines, so citebot ships none:
point CITEBOT_RERANKER at a sentence-transformers CrossEncoder folder you have, and install
the optional `reference` extra (sentence-transformers and torch), which the runtime lock
and the image leave out.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from search.errors import ConfigError

# Cross-encoders read query and passage together; longer passages are cut by the model,
# so only the opening of a chunk counts. 512 is the usual BERT limit.
RERANK_MAX_TOKENS = 512


class CrossEncoderReranker:
    """Scores (question, passage) pairs with a local sentence-transformers CrossEncoder."""

    def __init__(self, model_dir: Path) -> None:
        model_dir = Path(model_dir)
        if not (model_dir / "config.json").exists():
            raise ConfigError(
                f"CITEBOT_RERANKER={model_dir} is not a model folder (no config.json); "
                "point it at a local sentence-transformers CrossEncoder"
            )
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        try:
            from sentence_transformers import CrossEncoder
        except ImportError:
            # Not in the runtime lock (docs/decisions/0037-runtime-without-torch.md).
            raise ConfigError(
                f"CITEBOT_RERANKER={model_dir} needs sentence-transformers (and torch), which are "
                "not installed here: pip install 'citebot[reference]', or unset CITEBOT_RERANKER"
            ) from None

        self.model = CrossEncoder(str(model_dir), device="cpu", max_length=RERANK_MAX_TOKENS)

    def __call__(self, question: str, passages: Sequence[str]) -> list[float]:
        if not passages:
            return []
        scores = self.model.predict([(question, p) for p in passages], show_progress_bar=False)
        return [float(s) for s in scores]

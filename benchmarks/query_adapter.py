"""A linear query adapter for the dense arm, learned across labelled collections.

    PYTHONHASHSEED=0 python -m benchmarks.query_adapter \
        --collections git,sqlite,haproxy,18f-handbook,clef-handbook,examples --lams 0.3,1,3,10 [--save W.npy]

The question the probe asks: Slack questions and the passages that answer them sit apart
in the model's space (0044, 0050: "the model's reach"); does one linear map of the question
vector, q -> (q + W q) / |q + W q|, learned on the labelled questions of several
collections, bring an unseen collection's questions nearer their passages? Windows are
left as they are, so a store needs no new vectors and either backend could take it.

W is learned by full-batch Adam on the softmax over every window of the question's
collection (temperature TAU): the answering chunks' windows against all the others, plus
lam × |W|² (weight decay toward the identity map). Reads the stores `benchmarks.quality`
built (run it first), the dev items of each collection, never a held-out split or a
collection held out whole.

Prints, for each lam: leave-one-collection-out dense R@5 (W learned on the other
collections' dev items, scored on the left-out collection's), each collection's and the
pooled paired difference against no adapter. With --save, W learned on every listed
collection's dev items at the first lam is written to W.npy (numpy's format).
docs/decisions/0068-query-adapter.md holds the figures.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from benchmarks import quality
from ingest.embedder import Embedder
from search.embedded import EmbeddedStore

# Softmax temperature over cosines: the contrastive losses sentence-transformers models are
# trained with use 0.05 (a scale of 20); the adapter learns at the model's own.
TAU = 0.05
EPOCHS = 200
LEARNING_RATE = 1e-3


@dataclass
class Collection:
    name: str
    questions: np.ndarray  # (n, d) unit vectors, dev items with an answering chunk
    kinds: list[str]
    positive: list[np.ndarray]  # per question: the window rows of its answering chunks
    matrix: np.ndarray  # (windows, d)
    owner: np.ndarray  # window -> chunk number
    chunk_positive: list[set[int]]  # per question: its answering chunks' numbers


def load(target: quality.Target, embedder: Embedder, split: str = "dev") -> Collection:
    store_dir = quality.QUALITY_CACHE / f"{target.name}-store"
    if not store_dir.exists():
        raise SystemExit(f"{store_dir} is missing: run python -m benchmarks.quality --collections {target.name}")
    store = EmbeddedStore(store_dir)
    matrix, owner, ids, _ = store._vectors()
    texts = [c.text for c in store.get_chunks(ids)]
    items = [json.loads(line) for line in Path(target.questions).read_text().splitlines() if line.strip()]
    items = [i for i in items if i["must_contain"] and i.get("split", "dev") == split]
    qs, kinds, pos, chunk_pos = [], [], [], []
    for it in items:
        chunks = {n for n, t in enumerate(texts) if any(s in t for s in it["must_contain"])}
        if not chunks:
            continue
        qs.append(embedder.encode_query(it["question"]))
        kinds.append(it["kind"])
        pos.append(np.flatnonzero(np.isin(owner, list(chunks))))
        chunk_pos.append(chunks)
    return Collection(target.name, np.stack(qs), kinds, pos, matrix.astype(np.float32), owner, chunk_pos)


def adapt(q: np.ndarray, w: np.ndarray | None) -> np.ndarray:
    if w is None:
        return q
    u = q + q @ w.T
    return u / np.linalg.norm(u, axis=-1, keepdims=True)


def loss_and_grad(w: np.ndarray, cols: list[Collection], lam: float) -> tuple[float, np.ndarray]:
    total, grad, n = 0.0, np.zeros_like(w), 0
    for c in cols:
        u = c.questions + c.questions @ w.T
        norm = np.linalg.norm(u, axis=1, keepdims=True)
        qa = u / norm
        z = (qa @ c.matrix.T) / TAU
        z -= z.max(axis=1, keepdims=True)
        e = np.exp(z)
        p_all = e / e.sum(axis=1, keepdims=True)
        dz = p_all.copy()
        for i, rows in enumerate(c.positive):
            ep = e[i, rows]
            total += -np.log(ep.sum()) + np.log(e[i].sum())
            dz[i, rows] -= ep / ep.sum()
        dqa = (dz @ c.matrix) / TAU
        du = (dqa - qa * np.sum(dqa * qa, axis=1, keepdims=True)) / norm
        grad += du.T @ c.questions
        n += len(c.questions)
    return total / n + lam * float(np.sum(w * w)), grad / n + 2 * lam * w


def train(cols: list[Collection], lam: float, epochs: int = EPOCHS, diagonal: bool = False) -> np.ndarray:
    """W learned on `cols`; `diagonal`: only W's diagonal (a weight per dimension)."""
    d = cols[0].matrix.shape[1]
    w = np.zeros((d, d))
    m, v = np.zeros_like(w), np.zeros_like(w)
    b1, b2 = 0.9, 0.999
    for t in range(1, epochs + 1):
        _, g = loss_and_grad(w, cols, lam)
        if diagonal:
            g = np.diag(np.diag(g))
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        w -= LEARNING_RATE * (m / (1 - b1**t)) / (np.sqrt(v / (1 - b2**t)) + 1e-8)
    return w


def ranks(c: Collection, w: np.ndarray | None) -> list[int | None]:
    """Each question's first answering chunk's rank in the dense arm (chunk = its best window)."""
    q = adapt(c.questions, w).astype(np.float32)
    scores = q @ c.matrix.T
    n_chunks = int(c.owner.max()) + 1
    out: list[int | None] = []
    for i in range(len(q)):
        best = np.full(n_chunks, -np.inf, dtype=np.float32)
        np.maximum.at(best, c.owner, scores[i])
        order = np.argsort(-best, kind="stable")[:50]
        found = [r + 1 for r, ch in enumerate(order) if int(ch) in c.chunk_positive[i]]
        out.append(found[0] if found else None)
    return out


def r_at(rs: list[int | None], k: int = 5) -> np.ndarray:
    return np.array([1.0 if r and r <= k else 0.0 for r in rs])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--collections", required=True)
    p.add_argument("--lams", default="1", help="comma-separated weight decays")
    p.add_argument("--epochs", type=int, default=EPOCHS)
    p.add_argument("--diagonal", action="store_true", help="learn W's diagonal only")
    p.add_argument("--save", help="write W learned on every collection (first lam) here")
    args = p.parse_args(argv)
    embedder = Embedder()
    cols = []
    for target in quality.targets(args.collections.split(",")):
        if target.heldout:
            raise SystemExit(f"{target.name} is held out whole: it is never learned or tuned on")
        cols.append(load(target, embedder))
        print(f"{cols[-1].name}: {len(cols[-1].questions)} dev questions, {len(cols[-1].matrix)} windows", flush=True)
    base = {c.name: ranks(c, None) for c in cols}
    for lam in (float(x) for x in args.lams.split(",")):
        a_all, b_all, pa, pb = [], [], [], []
        for c in cols:
            w = train([o for o in cols if o is not c], lam, args.epochs, args.diagonal)
            now = ranks(c, w)
            a, b = r_at(base[c.name]), r_at(now)
            para = np.array([k == "paraphrase" for k in c.kinds])
            a_all.append(a), b_all.append(b), pa.append(a[para]), pb.append(b[para])
            print(f"  lam={lam:g} {c.name:16s} dense R@5 {a.mean():.3f} -> {b.mean():.3f}, "
                  f"para {a[para].mean():.3f} -> {b[para].mean():.3f} (|W| {np.linalg.norm(w):.2f})", flush=True)
        d, lo, hi = quality.paired_bootstrap(np.concatenate(a_all), np.concatenate(b_all))
        dp, lop, hip = quality.paired_bootstrap(np.concatenate(pa), np.concatenate(pb))
        print(f"lam={lam:g} pooled leave-one-out: R@5 {d:+.3f} [{lo:+.3f}, {hi:+.3f}], "
              f"para@5 {dp:+.3f} [{lop:+.3f}, {hip:+.3f}]", flush=True)
    if args.save:
        lam = float(args.lams.split(",")[0])
        np.save(args.save, train(cols, lam, args.epochs, args.diagonal).astype(np.float32))
        print(f"saved W (lam={lam:g}, every collection) to {args.save}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

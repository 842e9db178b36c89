"""Questions into topics: threshold clustering of unit vectors by cosine, in numpy.

Three passes, each deterministic for a given order of the vectors:

1. leader: each vector joins the topic whose centroid is nearest, if it is at least
   `threshold` close, else starts a topic of its own;
2. refine (REFINE_ROUNDS): each vector moves to its nearest centroid when that one is at
   least `threshold` close (else it keeps its topic); emptied topics are dropped;
3. merge: topics whose centroids are at least `threshold` close are joined (connected
   components), so a fact asked in two wordings that the leader pass split is one topic.

O(n·k) for n questions and k topics; no n×n matrix. The threshold and why:
docs/decisions/0036-gaps-report.md; each encoder's own: 0065-model-tied-constants.md.
"""

from __future__ import annotations

import numpy as np

# Cosine at which two questions ask the same thing, for all-MiniLM-L6-v2 (the default
# encoder): set on the labelled paraphrase groups of examples/gap-questions.jsonl
# (docs/decisions/0036-gaps-report.md).
THRESHOLD = 0.45
# all-mpnet-base-v2's questions give the right topics on a narrower band (0.39-0.58, MiniLM
# 0.31-0.64); 0.48 is its middle and merges distinct facts as often as MiniLM does at 0.45
# (docs/decisions/0065-model-tied-constants.md).
THRESHOLD_BY_MODEL = {"sentence-transformers/all-mpnet-base-v2": 0.48}
REFINE_ROUNDS = 2


def threshold_for(model: str | None) -> float:
    """The threshold for vectors of this embedding model (the index stamp's name); a model
    without one of its own, or none known, gets all-MiniLM-L6-v2's."""
    return THRESHOLD_BY_MODEL.get(model or "", THRESHOLD)


def _unit(x: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.where(norms == 0, 1.0, norms)


def _centroids(x: np.ndarray, labels: np.ndarray, k: int) -> np.ndarray:
    sums = np.zeros((k, x.shape[1]), np.float32)
    np.add.at(sums, labels, x)
    return _unit(sums)


def _compact(labels: np.ndarray) -> np.ndarray:
    """Labels renumbered 0..k-1 in order of first appearance."""
    _, first, inverse = np.unique(labels, return_index=True, return_inverse=True)
    order = np.argsort(np.argsort(first))
    return order[inverse].astype(np.int64)


def cluster(vectors: np.ndarray, threshold: float = THRESHOLD) -> np.ndarray:
    """A topic label (0..k-1, in order of first appearance) for each row of `vectors`."""
    n = len(vectors)
    if n == 0:
        return np.zeros(0, np.int64)
    x = _unit(np.asarray(vectors, np.float32))
    labels = np.empty(n, np.int64)
    sums = np.zeros((min(n, 64), x.shape[1]), np.float32)
    k = 0
    for i in range(n):
        if k:
            c = sums[:k]
            sims = (c @ x[i]) / np.maximum(np.linalg.norm(c, axis=1), 1e-12)
            best = int(np.argmax(sims))
            if sims[best] >= threshold:
                labels[i] = best
                sums[best] += x[i]
                continue
        if k == len(sums):
            sums = np.vstack([sums, np.zeros_like(sums)])
        sums[k] = x[i]
        labels[i] = k
        k += 1
    for _ in range(REFINE_ROUNDS):
        cents = _centroids(x, labels, k)
        sims = x @ cents.T
        best = np.argmax(sims, axis=1)
        move = sims[np.arange(n), best] >= threshold
        labels = _compact(np.where(move, best, labels))
        k = int(labels.max()) + 1
    return _merge(x, labels, k, threshold)


def _merge(x: np.ndarray, labels: np.ndarray, k: int, threshold: float) -> np.ndarray:
    cents = _centroids(x, labels, k)
    close = (cents @ cents.T) >= threshold
    parent = np.arange(k)

    def root(a: int) -> int:
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = int(parent[a])
        return a

    for a, b in zip(*np.nonzero(np.triu(close, 1)), strict=True):
        ra, rb = root(int(a)), root(int(b))
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    return _compact(np.array([root(int(label)) for label in labels]))


def purity(labels: np.ndarray, truth: list[str]) -> float:
    """Share of items whose topic's most common true label is their own."""
    if not truth:
        return 1.0
    right = 0
    for topic in set(labels.tolist()):
        members = [truth[i] for i in np.nonzero(labels == topic)[0]]
        right += max(members.count(t) for t in set(members))
    return right / len(truth)

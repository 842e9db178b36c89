"""The pure parts of benchmarks/query_adapter.py (docs/decisions/0068-query-adapter.md)."""

import numpy as np

from benchmarks import query_adapter as qa


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def _toy(seed: int = 0) -> qa.Collection:
    """Six chunks of two windows each; each question sits nearest a wrong chunk."""
    rng = np.random.default_rng(seed)
    d = 8
    matrix = _unit(rng.normal(size=(12, d))).astype(np.float32)
    owner = np.repeat(np.arange(6), 2)
    answers = [0, 1, 2, 3]
    # A question is its answer's first window turned half-way toward another chunk's window.
    questions = _unit(np.stack([matrix[2 * a] + 1.5 * matrix[2 * ((a + 3) % 6)] for a in answers]))
    positive = [np.flatnonzero(owner == a) for a in answers]
    return qa.Collection("toy", questions, ["paraphrase"] * 4, positive, matrix, owner, [{a} for a in answers])


def test_gradient_matches_finite_differences():
    c = _toy()
    rng = np.random.default_rng(1)
    w = 0.05 * rng.normal(size=(8, 8))
    loss, grad = qa.loss_and_grad(w, [c], lam=0.1)
    eps = 1e-6
    for i, j in [(0, 0), (3, 5), (7, 2), (4, 4)]:
        step = np.zeros_like(w)
        step[i, j] = eps
        up, _ = qa.loss_and_grad(w + step, [c], lam=0.1)
        down, _ = qa.loss_and_grad(w - step, [c], lam=0.1)
        assert abs((up - down) / (2 * eps) - grad[i, j]) < 1e-5 * max(1.0, abs(grad[i, j]))
    assert loss > 0


def test_training_pulls_questions_to_their_chunks_in_sample():
    c = _toy()
    before = qa.ranks(c, None)
    w = qa.train([c], lam=0.001, epochs=300)
    after = qa.ranks(c, w)
    assert qa.r_at(after, 1).sum() > qa.r_at(before, 1).sum()
    assert qa.loss_and_grad(w, [c], 0.0)[0] < qa.loss_and_grad(np.zeros((8, 8)), [c], 0.0)[0]


def test_no_adapter_and_a_zero_adapter_rank_alike():
    c = _toy()
    assert qa.ranks(c, None) == qa.ranks(c, np.zeros((8, 8)))
    # adapt() keeps unit length whatever W is.
    w = np.random.default_rng(2).normal(size=(8, 8))
    np.testing.assert_allclose(np.linalg.norm(qa.adapt(c.questions, w), axis=1), 1.0, rtol=1e-6)


def test_diagonal_training_leaves_the_off_diagonal_at_zero():
    w = qa.train([_toy()], lam=0.01, epochs=20, diagonal=True)
    assert np.count_nonzero(w - np.diag(np.diag(w))) == 0
    assert np.count_nonzero(np.diag(w)) > 0

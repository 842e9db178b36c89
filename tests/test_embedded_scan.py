"""The embedded store's int8 dense scan (search/embedded_scan.py): the same chunks in the same
order as the exact float scan, ties, scopes, zero vectors and every k included, the bound held
at any norm and thousands of random small cases; the integer sums exact where 8-bit weights
would overflow the u8 x s8 kernel; its ONNX model valid; and in the store, built from a
matrix's second read, never used for another matrix, nor hiding a newer matrix's."""

from __future__ import annotations

import tempfile
import time

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from search import embedded_scan
from search.embedded import EmbeddedStore
from search.scope import Scope
from search.types import Chunk, DocumentRecord, ModelStamp, Window


def exact_top(matrix: np.ndarray, owner: np.ndarray, chunks: int, v: np.ndarray, k: int, allowed=None):
    """The exact scan as the store defines it: a chunk's best window cosine (float64, given as
    float32), stable sort: chunks whose float32 scores tie come in chunk order."""
    scores = matrix.astype(np.float64) @ v.astype(np.float64)
    best = np.full(chunks, -np.inf)
    np.maximum.at(best, owner, scores)
    if allowed is not None:
        best[~allowed] = -np.inf
        k = min(k, int(allowed.sum()))
    best = best.astype(np.float32)
    order = np.argsort(-best, kind="stable")[: max(k, 0)]
    return order, best[order]


def clustered(rng: np.random.Generator, rows: int, dims: int) -> np.ndarray:
    """Unit vectors around a few centres, so many scores sit close together; some rows copied
    exactly (ties across chunks) and two rows of zeros."""
    centres = rng.standard_normal((6, dims))
    m = centres[rng.integers(0, 6, rows)] + 0.35 * rng.standard_normal((rows, dims))
    m /= np.linalg.norm(m, axis=1, keepdims=True)
    m[rows // 3 : rows // 3 + 20] = m[:20]
    m[5] = 0
    m[rows - 1] = 0
    return m.astype(np.float32)


def owners(rng: np.random.Generator, rows: int) -> tuple[np.ndarray, int]:
    owner = np.sort(rng.integers(0, rows // 2, rows))
    _, owner = np.unique(owner, return_inverse=True)  # every chunk holds a window
    return owner.astype(np.int64), int(owner.max()) + 1


@pytest.mark.parametrize("seed", [1, 2])
def test_int8_scan_gives_the_exact_scans_chunks_order_and_scores(seed):
    rng = np.random.default_rng(seed)
    rows, dims = 900, 48
    matrix = clustered(rng, rows, dims)
    owner, chunks = owners(rng, rows)
    scan = embedded_scan.Int8Scan(matrix, owner, chunks)
    queries = [matrix[i] for i in rng.integers(0, rows, 8)]  # a stored window itself: ties at the top
    queries += [rng.standard_normal(dims).astype(np.float32) for _ in range(8)]
    queries += [np.zeros(dims, dtype=np.float32)]
    masks = [None, rng.random(chunks) < 0.3, np.zeros(chunks, dtype=bool), np.eye(1, chunks, 7, dtype=bool)[0]]
    compared = 0
    for v in queries:
        for k in (1, 5, 30, chunks - 1, chunks, chunks + 5, 0):
            for allowed in masks:
                want_ids, want_scores = exact_top(matrix, owner, chunks, v, k, allowed)
                got = scan.top(v, k, allowed)
                assert got is not None
                assert got[0].tolist() == want_ids.tolist(), (k, allowed is None)
                np.testing.assert_allclose(got[1], want_scores, rtol=0, atol=1e-6)
                compared += 1
    assert compared == len(queries) * 7 * len(masks)


def test_both_scans_answer_no_chunk_for_k_of_zero_or_less():
    rng = np.random.default_rng(4)
    matrix = clustered(rng, 300, 16)
    owner, chunks = owners(rng, 300)
    v = rng.standard_normal(16).astype(np.float32)
    scan = embedded_scan.Int8Scan(matrix, owner, chunks)
    for k in (0, -1, -5):
        for allowed in (None, rng.random(chunks) < 0.5):
            top, scores = embedded_scan.float_top(matrix, owner, chunks, v, k, allowed)
            assert top.tolist() == [] and scores.tolist() == []
            got = scan.top(v, k, allowed)
            assert got is not None and got[0].tolist() == []
    # A positive k still answers.
    assert len(embedded_scan.float_top(matrix, owner, chunks, v, 3, None)[0]) == 3


def test_the_int8_scan_scores_only_the_chunks_that_can_win():
    rng = np.random.default_rng(3)
    rows, dims = 6000, 64
    matrix = clustered(rng, rows, dims)
    owner, chunks = owners(rng, rows)
    scan = embedded_scan.Int8Scan(matrix, owner, chunks)
    v = rng.standard_normal(dims).astype(np.float32)
    got = scan.top(v, 10, None)
    assert got is not None and got[0].tolist() == exact_top(matrix, owner, chunks, v, 10)[0].tolist()
    kept = scan.candidates(v, 10, None)
    assert set(got[0].tolist()) <= set(np.flatnonzero(kept).tolist())
    assert 10 <= kept.sum() < chunks / 4


def seven_bit_rows(rng: np.random.Generator, rows: int, dims: int) -> np.ndarray:
    """Rows whose int8 copies are exact (a peak of 63 steps, steps times a power of two times a
    small number): no rounding error for the bound to stand on, only float rounding."""
    ints = rng.integers(-63, 64, (rows, dims))
    ints[:, 0] = 63
    scale = rng.choice([1.0, 3.0, 5.0, 7.0, 0.75, 1.5], rows) * 10.0 ** rng.integers(-3, 5, rows)
    return (ints * scale[:, None]).astype(np.float32)


def test_the_bound_holds_for_every_window_at_any_norm():
    """Vectors far from unit length, rounded exactly to 7 and 8 bits: the window and question
    errors are 0, so float rounding of scores up to 6e10 decides alone. An absolute 1e-4 for
    it, with the bounds in float32, left 145 of these 1,152 windows outside, by up to 896."""
    rng = np.random.default_rng(8)
    for dims in (64, 384, 2048):
        matrix = seven_bit_rows(rng, 64, dims)
        scan = embedded_scan.Int8Scan(matrix, np.arange(64), 64)
        for factor in (1.0, 3.0, 0.5, 7.0, 1e-3, 1e-30):
            q = rng.integers(-127, 128, dims)
            q[0] = 127
            v = (q * factor).astype(np.float32)
            approx, slack = scan.bounds(v)
            exact = matrix.astype(np.float64) @ v.astype(np.float64)
            assert np.all(np.abs(exact - approx) <= slack), (dims, factor, np.max(np.abs(exact - approx) - slack))


def random_case(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, int, list[np.ndarray]]:
    """A small matrix of one of several kinds at a norm from 1e-20 to 1e20, and questions from
    1e-20 to 1e12: a window of 1e20 overflowed float32 norms in the bounds (NaN: no answer)."""
    rows, dims = int(rng.integers(1, 50)), int(rng.choice([1, 2, 3, 8, 17, 40]))
    kind = int(rng.integers(0, 5))
    if kind == 0:  # not unit length
        m = rng.standard_normal((rows, dims)) * rng.uniform(0.1, 10, (rows, 1))
    elif kind == 1:  # unit length
        m = rng.standard_normal((rows, dims))
        m /= np.linalg.norm(m, axis=1, keepdims=True)
    elif kind == 2:  # int8 copies without error
        m = seven_bit_rows(rng, rows, dims).astype(np.float64)
    elif kind == 3:  # a few rows repeated: exact ties across chunks
        m = rng.standard_normal((3, dims))[rng.integers(0, 3, rows)]
    else:  # sparse, zero rows among them
        m = rng.standard_normal((rows, dims)) * (rng.random((rows, dims)) < 0.2)
    m = (m * 10.0 ** rng.integers(-20, 21)).astype(np.float32)
    owner = np.sort(rng.integers(0, rows, rows))
    _, owner = np.unique(owner, return_inverse=True)
    scale = 10.0 ** rng.integers(-20, 13)
    questions = [
        m[rng.integers(0, rows)] * np.float32(rng.uniform(0.5, 2)),
        (rng.standard_normal(dims) * scale).astype(np.float32),
        (rng.integers(-127, 128, dims) * scale).astype(np.float32),
        np.zeros(dims, dtype=np.float32),
    ]
    return m, owner.astype(np.int64), int(owner.max()) + 1, questions


def test_the_int8_scan_answers_as_the_exact_scan_on_thousands_of_random_cases():
    rng = np.random.default_rng(9)
    compared = 0
    for _ in range(300):
        matrix, owner, chunks, questions = random_case(rng)
        scan = embedded_scan.Int8Scan(matrix, owner, chunks)
        masks = [None, rng.random(chunks) < 0.5, np.zeros(chunks, dtype=bool)]
        for v in questions:
            for k in (1, int(rng.integers(1, chunks + 1)), chunks + 1, 0):
                for allowed in masks:
                    got = scan.top(v, k, allowed)
                    if got is None:  # scores that could pass float32's largest: the float scan's
                        assert np.linalg.norm(v.astype(np.float64)) * scan.reach > 1e38
                        continue
                    want_ids, want_scores = exact_top(matrix, owner, chunks, v, k, allowed)
                    assert got[0].tolist() == want_ids.tolist(), (matrix, owner, v, k, allowed)
                    np.testing.assert_allclose(got[1], want_scores, rtol=1e-6, atol=0)
                    compared += 1
    assert compared > 300 * 4 * 4 * 3 * 0.9


def test_a_question_whose_scores_could_overflow_float32_is_left_to_the_float_scan():
    matrix = np.full((4, 8), 1e20, dtype=np.float32)
    scan = embedded_scan.Int8Scan(matrix, np.arange(4), 4)
    assert scan.top(np.full(8, 1e20, dtype=np.float32), 2, None) is None
    assert scan.top(np.full(8, 1e-20, dtype=np.float32), 2, None) is not None


def test_a_non_finite_question_is_left_to_the_float_scan():
    rng = np.random.default_rng(4)
    matrix = clustered(rng, 200, 16)
    owner, chunks = owners(rng, 200)
    scan = embedded_scan.Int8Scan(matrix, owner, chunks)
    v = np.full(16, np.nan, dtype=np.float32)
    assert scan.top(v, 5, None) is None


def test_seven_bit_weights_keep_the_integer_sums_exact_where_eight_bits_overflow():
    """Rows of one sign at full scale against a question of the same sign: the pairwise
    16-bit sums of a u8 x s8 kernel without VNNI overflow at 8-bit weights."""
    dims, rows = 64, 8
    matrix = np.ones((rows, dims), dtype=np.float32) / np.sqrt(dims)
    matrix[1::2] *= -1
    scan = embedded_scan.Int8Scan(matrix, np.arange(rows), rows)
    v = np.ones(dims, dtype=np.float32) / np.sqrt(dims)
    feed = np.full((1, dims), 255, dtype=np.uint8)  # +127 with the zero point 128
    dots = scan._session.run(None, {"q": feed})[0][0]
    assert dots.tolist() == [127 * 63 * dims * (1 if r % 2 == 0 else -1) for r in range(rows)]
    got = scan.top(v, rows, None)
    assert got is not None
    np.testing.assert_allclose(got[1][:4], [1.0] * 4, atol=1e-6)


def test_the_hand_written_onnx_model_is_valid_and_computes_matmulinteger():
    rng = np.random.default_rng(5)
    weights = rng.integers(-63, 64, (12, 30)).astype(np.int8)
    model = onnx.load_from_string(embedded_scan._model(weights))
    onnx.checker.check_model(model, full_check=True)
    assert [n.op_type for n in model.graph.node] == ["MatMulInteger"]
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    q = rng.integers(0, 256, (1, 12)).astype(np.uint8)
    got = session.run(None, {"q": q})[0]
    assert np.array_equal(got, (q.astype(np.int32) - 128) @ weights.astype(np.int32))


def test_build_leaves_small_and_non_finite_matrices_to_the_float_scan():
    rng = np.random.default_rng(6)
    small = clustered(rng, embedded_scan.MIN_WINDOWS - 1, 8)
    assert embedded_scan.build(small, np.arange(len(small)), len(small)) is None
    large = clustered(rng, embedded_scan.MIN_WINDOWS, 8)
    assert isinstance(embedded_scan.build(large, np.arange(len(large)), len(large)), embedded_scan.Int8Scan)
    large[3, 2] = np.inf
    assert embedded_scan.build(large, np.arange(len(large)), len(large)) is None


STAMP = ModelStamp("test/model-scan", 16, "c" * 64)


def _documents(rng: np.random.Generator, docs: int, per_doc: int, tag: str):
    out = []
    for d in range(docs):
        source, doc_id = f"{'team' if d % 2 else 'site'}/{tag}{d}.md", f"{tag}{d}"
        chunks, windows = [], []
        for o in range(per_doc):
            cid, text = f"{doc_id}-{o}", f"passage {o} of {tag} {d}"
            chunks.append(Chunk(cid, doc_id, source, ("H",), None, o, text, tokens=5))
            for w in range(2):
                vec = rng.standard_normal(16).astype(np.float32)
                windows.append(Window(cid, w, 0, len(text), vec / np.linalg.norm(vec)))
        out.append((DocumentRecord(doc_id, source, f"h-{doc_id}", source, "markdown"), chunks, windows))
    return out


def _wait_for_scan(store: EmbeddedStore) -> None:
    deadline = time.monotonic() + 30
    while store._scan is None or store._scan[0] is not store._matrix:
        assert time.monotonic() < deadline, "the int8 scan was never built"
        time.sleep(0.02)


def test_the_store_builds_the_scan_from_a_matrixs_second_read_and_answers_alike(tmp_path, monkeypatch):
    monkeypatch.setattr(embedded_scan, "MIN_WINDOWS", 4000)  # a smaller store than the real threshold
    rng = np.random.default_rng(7)
    store = EmbeddedStore(tmp_path / "store")
    store.open_for(STAMP)
    for doc in _documents(rng, 40, 60, "doc"):  # 2,400 chunks, 4,800 windows
        store.replace_document(*doc)
    questions = [q / np.linalg.norm(q) for q in rng.standard_normal((6, 16)).astype(np.float32)]
    team = Scope(("team/**",))
    first = store.dense(questions[0], 30)  # the float scan
    time.sleep(0.2)
    assert store._scan is None  # one read of this matrix: no build
    store.dense(questions[0], 30, scope=team)  # the second read starts it
    _wait_for_scan(store)
    assert isinstance(store._scan[1], embedded_scan.Int8Scan)
    _, matrix, owner, ids, sources = store._matrix
    allowed = np.array(team.allows_each(sources))
    again = store.dense(questions[0], 30)  # the float scan's answer, from the int8 scan
    assert [c for c, _ in again] == [c for c, _ in first]
    np.testing.assert_allclose([s for _, s in again], [s for _, s in first], atol=1e-6)
    for v in questions:
        for scope, mask in ((None, None), (team, allowed)):
            want_ids, want_scores = exact_top(matrix, owner, len(ids), v, 30, mask)
            got = store.dense(v, 30, scope=scope)
            assert [c for c, _ in got] == [ids[i] for i in want_ids]
            np.testing.assert_allclose([s for _, s in got], want_scores, atol=1e-6)

    # This store's own write reloads the matrix under the same data_version: the old scan is
    # not used for it, and the new document is found.
    built = store._scan
    (record, chunks, windows) = _documents(rng, 1, 1, "late")[0]
    windows = [Window(w.chunk_id, w.index, w.start, w.end, questions[2]) for w in windows]
    store.replace_document(record, chunks, windows)
    first = store.dense(questions[2], 3)
    assert first[0][0] == "late0-0"
    assert store._scan is None and built[0] is not store._matrix  # the old scan let go
    store.close()


def _small_store(path, rng: np.random.Generator, monkeypatch) -> EmbeddedStore:
    monkeypatch.setattr(embedded_scan, "MIN_WINDOWS", 100)
    store = EmbeddedStore(path)
    store.open_for(STAMP)
    for doc in _documents(rng, 10, 10, "doc"):  # 100 chunks, 200 windows
        store.replace_document(*doc)
    return store


def test_a_build_that_ends_after_a_write_never_takes_the_new_matrixs_place(tmp_path, monkeypatch):
    rng = np.random.default_rng(10)
    store = _small_store(tmp_path / "store", rng, monkeypatch)
    v = rng.standard_normal(16).astype(np.float32)
    store.dense(v, 5)
    store.dense(v, 5)
    _wait_for_scan(store)
    old = store._matrix
    store.replace_document(*_documents(rng, 1, 2, "late")[0])
    store.dense(v, 5)
    store.dense(v, 5)
    _wait_for_scan(store)
    new = store._scan
    assert new is not None and isinstance(new[1], embedded_scan.Int8Scan)
    assert old is not None
    store._build_scan(old)  # the old matrix's build, ending only now
    assert store._scan is new
    store.close()


def test_a_scan_that_cannot_be_built_is_logged_once_and_the_float_scan_answers(tmp_path, monkeypatch, caplog):
    rng = np.random.default_rng(11)
    store = _small_store(tmp_path / "store", rng, monkeypatch)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "no-such-folder"))  # no temporary folder
    v = rng.standard_normal(16).astype(np.float32)
    first = store.dense(v, 5)
    store.dense(v, 5)
    _wait_for_scan(store)
    assert store._scan is not None and store._scan[1] is None
    answers = [store.dense(v, 5) for _ in range(5)]
    assert answers == [first] * 5
    warned = [r for r in caplog.records if "int8 dense scan not built" in r.getMessage()]
    assert len(warned) == 1 and "no-such-folder" in warned[0].getMessage()
    store.close()

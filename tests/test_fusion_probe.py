"""The pure parts of benchmarks/fusion_probe.py's dense-arm probes (docs/decisions/0050-handbook-dense-levers.md)."""

import numpy as np

from benchmarks.fusion_probe import front_matter_title, mix_with_document_best


def test_front_matter_title_read_with_quotes_off():
    text = '---\ntitle: "Account management policy"\nquestions:\n  - iaa\n---\n\nBody text.\n'
    assert front_matter_title(text) == "Account management policy"
    assert front_matter_title("---\nurl: https://x.example/a\ntitle:   Leave  \n---\n") == "Leave"


def test_front_matter_title_empty_without_a_block_or_a_title():
    assert front_matter_title("# Leave\n\ntitle: not front matter\n") == ""
    assert front_matter_title("---\nurl: https://x.example/a\n---\nBody\n") == ""
    assert front_matter_title("---\ntitle: never closed\n") == ""


def test_mix_with_document_best_lifts_a_chunk_by_its_page():
    best = np.array([0.9, 0.2, 0.5, 0.4], dtype=np.float32)
    doc = np.array([0, 0, 1, 1])
    mixed = mix_with_document_best(best, doc, 0.5)
    np.testing.assert_allclose(mixed, [0.9, 0.55, 0.5, 0.45], rtol=1e-6)
    np.testing.assert_allclose(mix_with_document_best(best, doc, 0.0), best)
    # The weaker chunk of the page with the best chunk now outranks the other page's best.
    assert mixed[1] > mixed[2]

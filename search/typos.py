"""Typo fixing for the question's words: the closest word the collection offers for a
word it does not hold, by a bounded edit distance (Retriever.correct_typos asks the store
for the candidates and keeps only fixes the collection holds).
"""

from __future__ import annotations

from collections.abc import Iterable


def edit_distance_at_most(a: str, b: str, limit: int) -> int | None:
    """The edit distance of a and b when it is at most `limit`, else None. Only the band
    |i - j| <= limit of the table is computed (a cell off it is past the limit), each
    value capped at limit + 1: every value within the limit is exact (Ukkonen)."""
    la, lb = len(a), len(b)
    if abs(la - lb) > limit:
        return None
    over = limit + 1
    prev = [j if j <= limit else over for j in range(lb + 1)]
    for i in range(1, la + 1):
        ca = a[i - 1]
        cur = [over] * (lb + 1)
        if i <= limit:
            cur[0] = i
        best = cur[0]
        for j in range(max(1, i - limit), min(lb, i + limit) + 1):
            v = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != b[j - 1]), over)
            cur[j] = v
            best = min(best, v)
        if best > limit:
            return None
        prev = cur
    return prev[lb] if prev[lb] <= limit else None


def closest(term: str, offered: Iterable[str]) -> str | None:
    """The offered word nearest to `term` (within 1 edit up to 5 letters, else 2) that
    shares its first letter or its second; None when none is near enough."""
    limit = 1 if len(term) <= 5 else 2
    best: tuple[int, str] | None = None
    for cand in offered:
        if cand[0] != term[0] and (len(cand) < 2 or cand[1] != term[1]):
            continue
        d = edit_distance_at_most(term, cand, limit)
        # Ties go to the first word in alphabetical order, never to the vocabulary
        # set's iteration order (which follows Python's per-process hash seed:
        # examples b-04 ranked 9th under PYTHONHASHSEED=0 and fell out under 2).
        if d is not None and (best is None or (d, cand) < best):
            best = (d, cand)
    return best[1] if best else None

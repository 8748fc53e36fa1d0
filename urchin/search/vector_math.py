"""The arithmetic of a vector cache (urchin/search/vectors.py): unit-length rows, and a query's
background (what the embedder's score is measured against, urchin.search.score.EMBEDDER).
"""

from __future__ import annotations

import numpy as np

__all__ = ["background", "background_rows", "normalise", "BACKGROUND_ROWS", "MIN_SPREAD"]

BACKGROUND_ROWS = 1024    # rows of the cache a query's cosines are measured against (see `background`)
MIN_SPREAD = 0.02         # a spread floor: a few near-identical rows must not blow the z-score up


def background(matrix: np.ndarray, query: np.ndarray) -> tuple[float, float]:
    """Mean and standard deviation of a (normalised) query's cosines to at most BACKGROUND_ROWS rows
    spread evenly over `matrix` (all of them when fewer): the query's own background, which the
    embedder's score is measured against (urchin.search.score.EMBEDDER). The same rows for every
    query and process (they depend on the cache alone), whatever the window or filters."""
    n = len(matrix)
    if n == 0:
        return 0.0, MIN_SPREAD
    cosines = matrix[background_rows(n)].astype(np.float64) @ query.astype(np.float64)
    return float(cosines.mean()), max(float(cosines.std()), MIN_SPREAD)


def background_rows(n: int) -> np.ndarray:
    """The rows, ascending, of a cache of `n` rows that `background` measures a query against: those
    rows alone, passed as the matrix, give the same answer."""
    return np.unique(np.linspace(0, n - 1, min(n, BACKGROUND_ROWS)).astype(np.int64))


def normalise(m: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    out: np.ndarray = (m / norms).astype(np.float32)
    return out

"""Scores that drive selection (ID validation only) and the rank normalisation for UCB."""

from __future__ import annotations

import math

import numpy as np

__all__ = ["selection_score", "rank_normalise", "ucb_scores"]


def selection_score(node) -> float:
    """Lower-is-better ID validation MAE of a node; +inf for failed or pruned nodes."""
    if node.status != "ok" or node.val is None or not math.isfinite(node.val):
        return math.inf
    return float(node.val)


def rank_normalise(values: list[float]) -> np.ndarray:
    """Map scores (lower better) to (0, 1], best = 1, by rank; infinities get 0."""
    v = np.asarray(values, float)
    out = np.zeros(len(v))
    fin = np.isfinite(v)
    if fin.any():
        order = np.argsort(np.argsort(v[fin]))
        n = fin.sum()
        out[fin] = 1.0 - order / max(n, 1)
    return out


def ucb_scores(values: list[float], visits: list[int], c: float = 0.5) -> np.ndarray:
    """UCB on rank-normalised scores: ``q + c sqrt(ln(1 + sum n) / (1 + n))``."""
    q = rank_normalise(values)
    n = np.asarray(visits, float)
    total = n.sum() + 1.0
    bonus = c * np.sqrt(np.log(total) / (1.0 + n))
    return np.where(np.isfinite(np.asarray(values, float)), q + bonus, -np.inf)

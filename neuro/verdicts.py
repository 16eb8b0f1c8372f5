"""Verdicts on the reference study's findings, computed from the numbers with intervals.

Errors are compared per *trial* (the windows of one trial overlap in time, so they are not
independent), and over search seeds: :func:`cluster_bootstrap` resamples seeds and trials
with replacement (a two-level bootstrap) and returns a percentile interval of the mean
difference. A verdict follows from the interval, never from a threshold on the estimate
alone: a difference whose interval holds 0 is reported as undecided.
"""

from __future__ import annotations

import numpy as np

__all__ = ["cluster_bootstrap", "compare", "verdict_better"]


def cluster_bootstrap(values: np.ndarray, clusters: np.ndarray, *, n_resamples: int = 2000,
                      confidence: float = 0.95, seed: int = 0) -> tuple[float, float, float]:
    """Mean and percentile interval of ``values (n_seeds, n_windows)`` resampling seeds and
    clusters (``clusters (n_windows,)``, e.g. the trial of each window) with replacement.

    The statistic is the mean over seeds of the mean over clusters of each cluster's mean
    window value (each trial weighs the same).
    """
    v = np.atleast_2d(np.asarray(values, float))
    clusters = np.asarray(clusters)
    if v.shape[1] != len(clusters):
        raise ValueError(f"values have {v.shape[1]} windows but clusters label {len(clusters)}.")
    labels = np.unique(clusters)
    cm = np.stack([v[:, clusters == c].mean(1) for c in labels], 1)  # (S, U)
    est = float(cm.mean())
    S, U = cm.shape
    if S * U < 2:
        return est, np.nan, np.nan
    rng = np.random.default_rng(seed)
    si = rng.integers(S, size=(n_resamples, S))
    ui = rng.integers(U, size=(n_resamples, U))
    boot = cm[si[:, :, None], ui[:, None, :]].mean((1, 2))
    lo, hi = np.quantile(boot, [(1 - confidence) / 2, (1 + confidence) / 2])
    return est, float(lo), float(hi)


def compare(a: np.ndarray, b: np.ndarray, clusters: np.ndarray, **kw) -> dict:
    """Mean of ``a``, of ``b`` and of ``a - b`` with intervals (:func:`cluster_bootstrap`);
    ``a`` and ``b`` are ``(n_seeds, n_windows)`` or ``(n_windows,)`` (broadcast over seeds)."""
    a = np.atleast_2d(np.asarray(a, float))
    b = np.atleast_2d(np.asarray(b, float))
    a, b = np.broadcast_arrays(a, b)
    out = {}
    for name, v in (("a", a), ("b", b), ("diff", a - b)):
        est, lo, hi = cluster_bootstrap(v, clusters, **kw)
        out[name], out[f"{name}_low"], out[f"{name}_high"] = est, lo, hi
    out["n_seeds"], out["n_clusters"] = a.shape[0], len(np.unique(clusters))
    return out


def verdict_better(c: dict) -> str:
    """``"a better"`` if the interval of ``a - b`` (errors: lower is better) lies below 0,
    ``"b better"`` if above, else ``"undecided"``."""
    lo, hi = c["diff_low"], c["diff_high"]
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return "undecided"
    if hi < 0:
        return "a better"
    if lo > 0:
        return "b better"
    return "undecided"

"""Bootstrap intervals and aggregation over seeds.

Intervals use :func:`scipy.stats.bootstrap` (BCa by default) with a generator of their
own, never the global random state (astropy's bootstrap uses the global RNG: results
would then depend on what ran before).
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import xarray as xr
from scipy import stats as _st

from scimech.errors import DataValidationError

__all__ = ["bootstrap_ci", "over_seeds", "summarize_over", "cluster_bootstrap", "compare"]


def bootstrap_ci(
    data: np.ndarray | Sequence[np.ndarray],
    statistic: Callable = np.mean,
    *,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    method: str = "BCa",
    seed: int = 0,
    paired: bool = False,
) -> tuple[float, float, float]:
    """Point estimate and bootstrap confidence interval of a statistic.

    Parameters
    ----------
    data
        One 1-D sample, or a sequence of samples for a multi-sample statistic
        (e.g. ``(y_true, y_pred)`` with ``paired=True`` for a metric of pairs).
    statistic
        ``statistic(*samples) -> float``; vectorised statistics (taking ``axis``) are faster.
    n_resamples, confidence, method
        As in :func:`scipy.stats.bootstrap` (``"BCa"``, ``"percentile"``, ``"basic"``).
    seed
        Seed of the resampling generator.
    paired
        Resample the samples jointly (same indices), as for metrics of (truth, prediction).

    Returns
    -------
    (estimate, low, high)
        ``estimate`` is the statistic on the data; NaN bounds when the data are degenerate.

    Examples
    --------
    >>> est, low, high = sm.bootstrap_ci(np.arange(1.0, 11.0), np.mean, n_resamples=200)
    >>> est, bool(low < est < high)
    (5.5, True)

    A metric of pairs, resampled jointly:

    >>> y = np.arange(10.0)
    >>> mae = lambda t, p, axis=-1: np.abs(t - p).mean(axis=axis)
    >>> sm.bootstrap_ci((y, y + np.tile([0.0, 1.0], 5)), mae, paired=True, n_resamples=200)[0]
    0.5
    """
    if isinstance(data, (np.ndarray, xr.DataArray)) or np.isscalar(data) or np.isscalar(data[0]):
        samples = [np.asarray(data, float)]
    else:
        samples = [np.asarray(d, float) for d in data]
    if method not in ("BCa", "percentile", "basic"):
        raise ValueError(f"method must be 'BCa', 'percentile' or 'basic'; got {method!r}.")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1); got {confidence!r}.")
    for s in samples:
        if s.ndim != 1:
            raise DataValidationError(f"bootstrap_ci takes 1-D samples; got shape {s.shape}.")
        if s.size < 2:
            raise DataValidationError(f"bootstrap_ci needs at least 2 values; got {s.size}.")
        if not np.all(np.isfinite(s)):
            raise DataValidationError("bootstrap_ci got NaN or inf values; drop or impute them first.")
    if paired and len({x.size for x in samples}) > 1:
        raise DataValidationError(f"paired=True needs samples of one length; got {[x.size for x in samples]}.")
    est = float(statistic(*samples))
    if all(np.ptp(s) == 0 for s in samples):
        return est, est, est
    rng = np.random.default_rng(seed)
    vectorized = _takes_axis(statistic)
    try:
        res = _st.bootstrap(
            tuple(samples),
            statistic,
            n_resamples=n_resamples,
            confidence_level=confidence,
            method=method,
            paired=paired,
            vectorized=vectorized,
            random_state=rng,
        )
        lo, hi = res.confidence_interval
    except (ValueError, FloatingPointError, ZeroDivisionError) as err:
        if method == "percentile":
            raise
        # degenerate jackknife for BCa: fall back to the percentile interval, visibly
        warnings.warn(
            f"bootstrap_ci: {method} failed ({err}); using the percentile interval instead.",
            RuntimeWarning,
            stacklevel=2,
        )
        res = _st.bootstrap(
            tuple(samples),
            statistic,
            n_resamples=n_resamples,
            confidence_level=confidence,
            method="percentile",
            paired=paired,
            vectorized=vectorized,
            random_state=np.random.default_rng(seed),
        )
        lo, hi = res.confidence_interval
    return est, float(lo), float(hi)


def _takes_axis(fn: Callable) -> bool:

    if fn in (np.mean, np.median, np.std, np.var, np.sum):
        return True
    try:
        return "axis" in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def over_seeds(results: Sequence[xr.Dataset | xr.DataArray], seeds: Sequence[int]) -> xr.Dataset | xr.DataArray:
    """Concatenate per-seed results along a new ``seed`` dim."""
    if len(results) != len(seeds):
        raise ValueError(f"{len(results)} results but {len(seeds)} seeds.")
    items: list[Any] = list(results)  # Datasets or DataArrays: xarray's overloads take one kind at a time
    return xr.concat(items, dim=xr.DataArray(list(seeds), dims="seed", name="seed"))


def summarize_over(
    da: xr.DataArray, dim: str = "seed", confidence: float = 0.95, n_resamples: int = 1000, seed: int = 0
) -> xr.Dataset:
    """Mean, standard deviation and a bootstrap interval of the mean over ``dim``.

    With fewer than 3 values along ``dim`` the interval is NaN (too few to resample).
    """
    if dim not in da.dims:
        raise ValueError(f"Dimension {dim!r} does not exist. Expected one of {tuple(da.dims)}.")
    mean = da.mean(dim)
    std = da.std(dim, ddof=1) if da.sizes[dim] > 1 else xr.full_like(mean, np.nan)

    def ci(v):
        v = v[np.isfinite(v)]
        if v.size < 3:
            return np.array([np.nan, np.nan])
        _, lo, hi = bootstrap_ci(v, np.mean, n_resamples=n_resamples, confidence=confidence, seed=seed)
        return np.array([lo, hi])

    bounds = xr.apply_ufunc(ci, da, input_core_dims=[[dim]], output_core_dims=[["bound"]], vectorize=True)
    return xr.Dataset(
        {
            "mean": mean,
            "std": std,
            "ci_low": bounds.isel(bound=0, drop=True),
            "ci_high": bounds.isel(bound=1, drop=True),
        },
        attrs={"over": dim, "confidence": confidence, "n": int(da.sizes[dim])},
    )


def cluster_bootstrap(
    values: np.ndarray, clusters: np.ndarray, *, n_resamples: int = 2000, confidence: float = 0.95, seed: int = 0
) -> tuple[float, float, float]:
    """Mean and percentile interval of ``values (n_seeds, n_windows)`` resampling seeds and
    clusters (``clusters (n_windows,)``, e.g. the trial of each window) with replacement: a
    two-level bootstrap for samples that are not independent (overlapping windows of one trial,
    cells of one eddy), over independent runs (seeds).

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

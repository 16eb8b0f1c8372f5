"""Representation geometry: linear CKA, Procrustes distance, principal angles, readout alignment.

All take representations as ``(n_samples, n_features)`` arrays whose rows correspond
(the same inputs through two models, two seeds, two layers).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping

import numpy as np
import xarray as xr
from scipy.linalg import orthogonal_procrustes, subspace_angles

from scimech.errors import DataValidationError

__all__ = ["linear_cka", "procrustes_distance", "principal_angles", "readout_alignment", "pairwise"]


def _check_pair(X, Y) -> tuple[np.ndarray, np.ndarray]:
    X = np.asarray(X, float).reshape(len(X), -1)
    Y = np.asarray(Y, float).reshape(len(Y), -1)
    if X.shape[0] != Y.shape[0]:
        raise DataValidationError(f"Representations need the same rows (samples): got {X.shape[0]} and {Y.shape[0]}.")
    if X.shape[0] < 2:
        raise DataValidationError("Need at least 2 samples to compare representations.")
    if not (np.isfinite(X).all() and np.isfinite(Y).all()):
        raise DataValidationError("Representations contain NaN or inf (masked cells?): drop those rows first.")
    return X, Y


def linear_cka(X, Y) -> float:
    """Linear centred kernel alignment (Kornblith et al. 2019), in [0, 1].

    Invariant to orthogonal transforms and isotropic scaling of either representation;
    1 for identical (or rotated) representations.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(100, 8))
    >>> Q, _ = np.linalg.qr(rng.normal(size=(8, 8)))  # a random rotation
    >>> round(sm.linear_cka(X, X @ Q), 6), round(sm.linear_cka(X, 5 * X), 6)
    (1.0, 1.0)
    """
    X, Y = _check_pair(X, Y)
    if len(X) < max(X.shape[1], Y.shape[1]):
        warnings.warn(
            f"linear_cka on {len(X)} samples of {X.shape[1]} and {Y.shape[1]} features: with fewer samples "
            "than features this (biased) estimator is high even for unrelated representations (~0.9 "
            "for independent Gaussians at n=50, d=500). Compare against a baseline (shuffled samples) or use "
            "more samples.",
            stacklevel=2,
        )
    X = X - X.mean(0)
    Y = Y - Y.mean(0)
    num = np.linalg.norm(Y.T @ X, "fro") ** 2
    den = np.linalg.norm(X.T @ X, "fro") * np.linalg.norm(Y.T @ Y, "fro")
    return float(num / den) if den > 0 else float("nan")


def procrustes_distance(X, Y) -> float:
    """Orthogonal Procrustes distance after centring and unit Frobenius norm, in [0, sqrt(2)].

    0 when ``Y`` is a rotation / reflection (and scaling, translation) of ``X``. Widths may
    differ: the narrower one is zero-padded.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(50, 4))
    >>> Q, _ = np.linalg.qr(rng.normal(size=(4, 4)))
    >>> round(sm.procrustes_distance(X, 3 * X @ Q + 1), 6)  # rotated, scaled and shifted
    0.0
    """
    X, Y = _check_pair(X, Y)
    X = X - X.mean(0)
    Y = Y - Y.mean(0)
    nx, ny = np.linalg.norm(X), np.linalg.norm(Y)
    if nx == 0 or ny == 0:
        return float("nan")
    X, Y = X / nx, Y / ny
    d = max(X.shape[1], Y.shape[1])
    X = np.pad(X, ((0, 0), (0, d - X.shape[1])))
    Y = np.pad(Y, ((0, 0), (0, d - Y.shape[1])))
    R, _ = orthogonal_procrustes(X, Y)
    return float(np.linalg.norm(X @ R - Y))


def principal_angles(A, B) -> np.ndarray:
    """Principal angles (radians, ascending) between the column spaces of ``A`` and ``B``.

    Examples
    --------
    Two planes of 4-D space that share one axis and are orthogonal in the other:

    >>> A = np.eye(4)[:, [0, 1]]
    >>> B = np.eye(4)[:, [1, 2]]
    >>> np.degrees(sm.principal_angles(A, B)).round(6).tolist()
    [0.0, 90.0]
    """
    A = np.asarray(A, float)
    B = np.asarray(B, float)
    if A.shape[0] != B.shape[0]:
        raise DataValidationError(f"Subspaces must live in one space: {A.shape[0]} vs {B.shape[0]} rows.")
    return np.sort(subspace_angles(A, B))


def readout_alignment(direction, W) -> float:
    """How much of a probe direction lies in the row space of a readout matrix ``W``.

    Returns ``|P_W d| / |d|`` in [0, 1]: 1 when the downstream readout can see the direction
    fully, 0 when the information is present but orthogonal to every readout (not read out).

    Parameters
    ----------
    direction
        (d,) probe direction in the representation space.
    W
        (k, d) readout weights (e.g. the next layer's or the head's weight matrix).
    """
    d = np.asarray(direction, float).ravel()
    W = np.atleast_2d(np.asarray(W, float))
    if W.shape[1] != d.size:
        raise DataValidationError(f"W has {W.shape[1]} columns but the direction has {d.size} entries.")
    if not (np.isfinite(d).all() and np.isfinite(W).all()):
        raise DataValidationError("The probe direction or W has NaN or infinite entries; give finite weights.")
    if not np.any(d):
        raise DataValidationError("The probe direction is zero.")
    # an orthonormal basis of the row space: the right singular vectors of the non-zero singular
    # values (a QR of W^T spans it only when the first rank rows are independent; dead or
    # repeated readout units break that)
    _, sv, Vt = np.linalg.svd(W, full_matrices=False)
    tol = sv.max(initial=0.0) * max(W.shape) * np.finfo(float).eps
    V = Vt[sv > tol]
    return float(np.linalg.norm(V @ d) / np.linalg.norm(d))


def pairwise(reps: Mapping, fn: Callable = linear_cka, dim: str = "seed") -> xr.DataArray:
    """Matrix of ``fn`` over every pair of representations (e.g. seed x seed CKA).

    Returns
    -------
    xr.DataArray
        dims ``(dim, dim + "_other")`` with the mapping's keys as coordinates.
    """
    keys = list(reps)
    out = np.full((len(keys), len(keys)), np.nan)
    for i, a in enumerate(keys):
        for j, b in enumerate(keys):
            if j < i and fn in (linear_cka, procrustes_distance):
                out[i, j] = out[j, i]  # symmetric
            else:
                out[i, j] = fn(reps[a], reps[b])
    return xr.DataArray(
        out,
        dims=(dim, f"{dim}_other"),
        coords={dim: keys, f"{dim}_other": keys},
        name=getattr(fn, "__name__", "similarity"),
    )

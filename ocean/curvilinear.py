"""Finite differences on an orthogonal curvilinear grid (NEMO's ORCA), land-aware (numpy).

Arrays have ``(j, i)`` as their last two axes (NEMO's ``(y, x)``); the grid is given by its
T-point scale factors ``e1t`` (m, the cell's length along ``i``) and ``e2t`` (m, along ``j``), as in
NEMO's mesh mask, or computed from ``nav_lat`` / ``nav_lon`` by :func:`scale_factors`. Vectors are
in grid-aligned components (``u`` along ``i``, ``v`` along ``j``; NEMO's ``vozocrtx``, ``sozotaux``
are), so ``u . grad T``, ``k x grad eta`` and ``div`` need no rotation for a right-handed grid:

- ``d/dx_i f = (df/di) / e1t``, ``d/dx_j f = (df/dj) / e2t`` (centred in index space, one-sided at
  coasts and edges, as :mod:`ocean.grid`);
- ``div F = (d(e2t F_i)/di + d(e1t F_j)/dj) / (e1t e2t)``;
- ``div(w grad f)`` in flux form through the cell faces (``e1u``, ``e2u``, ``e1v``, ``e2v`` the
  means of the neighbouring T-point factors, ``w`` averaged onto the faces), no flux through
  land or the domain edge, so its area integral vanishes;
- first-order upwind ``u . grad f``.

On a regular lat-lon grid (``e1t = R cos(lat) dlon``, ``e2t = R dlat``) these are the formulas of
:mod:`ocean.grid` (the face factors of the Laplacian differ by ``O(dlat^2)``). Written out rather
than taken from ``xgcm`` to stay one dependency lighter with the A-grid (all fields at T points)
that reanalysis output is: the operators are a few lines each and tested against analytic fields
on rotated and stretched grids (``tests/ocean/test_curvilinear.py``).
"""

from __future__ import annotations

import numpy as np

from . import grid
from .constants import R_EARTH

__all__ = ["scale_factors", "ddi", "ddj", "divergence", "laplacian", "upwind_advection"]


def _ok(f: np.ndarray, mask) -> np.ndarray:
    ok = np.isfinite(f)
    return ok if mask is None else ok & np.asarray(mask, bool)


def _distance(lat1, lon1, lat2, lon2) -> np.ndarray:
    p1, p2 = np.deg2rad(lat1), np.deg2rad(lat2)
    a = np.sin((p2 - p1) / 2) ** 2 + np.cos(p1) * np.cos(p2) * np.sin(np.deg2rad(lon2 - lon1) / 2) ** 2
    return 2 * R_EARTH * np.arcsin(np.sqrt(np.clip(a, 0, 1)))


def scale_factors(nav_lat: np.ndarray, nav_lon: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(e1t, e2t)`` (m) from 2-D T-point positions (degrees): half the great-circle distance between
    the neighbours along ``i`` / ``j`` (at an edge, extrapolated from the two nearest distances)."""
    la, lo = np.asarray(nav_lat, float), np.asarray(nav_lon, float)

    def along(axis):
        d = _distance(np.take(la, range(la.shape[axis] - 1), axis), np.take(lo, range(lo.shape[axis] - 1), axis),
                      np.take(la, range(1, la.shape[axis]), axis), np.take(lo, range(1, lo.shape[axis]), axis))
        # at an edge, the spacing extrapolated linearly from the two nearest (second order on a
        # stretched grid, where the one neighbour's distance is first order and puts an O(1)
        # error into the Laplacian's first interior point); the one distance when there is one
        n = d.shape[axis]
        first = 1.5 * np.take(d, [0], axis) - 0.5 * np.take(d, [min(1, n - 1)], axis)
        last = 1.5 * np.take(d, [-1], axis) - 0.5 * np.take(d, [max(-2, -n)], axis)
        inner = 0.5 * (np.take(d, range(d.shape[axis] - 1), axis) + np.take(d, range(1, d.shape[axis]), axis))
        return np.concatenate([first, inner, last], axis)

    return along(1), along(0)


def ddi(f, e1t, mask=None) -> np.ndarray:
    """Derivative along ``i`` per metre (units of f per m); NaN on land."""
    f = np.asarray(f, float)
    return grid._deriv(f, np.arange(f.shape[-1], dtype=float), -1, _ok(f, mask)) / e1t


def ddj(f, e2t, mask=None) -> np.ndarray:
    """Derivative along ``j`` per metre (units of f per m); NaN on land."""
    f = np.asarray(f, float)
    return grid._deriv(f, np.arange(f.shape[-2], dtype=float), -2, _ok(f, mask)) / e2t


def divergence(fi, fj, e1t, e2t, mask=None) -> np.ndarray:
    """``(d(e2t F_i)/di + d(e1t F_j)/dj) / (e1t e2t)`` (units of F per m)."""
    fi, fj = np.asarray(fi, float), np.asarray(fj, float)
    ok = _ok(fi, mask) & np.isfinite(fj)
    a = grid._deriv(e2t * fi, np.arange(fi.shape[-1], dtype=float), -1, ok)
    b = grid._deriv(e1t * fj, np.arange(fi.shape[-2], dtype=float), -2, ok)
    return (a + b) / (e1t * e2t)


def laplacian(f, e1t, e2t, mask, weight=None) -> np.ndarray:
    """Flux-form ``div(w grad f)`` (``w = 1``: the Laplacian), no flux through land or the edges."""
    f = np.asarray(f, float)
    ok = np.broadcast_to(np.asarray(mask, bool), f.shape) & np.isfinite(f)
    fz = np.where(ok, f, 0.0)
    wz = np.ones_like(fz) if weight is None else np.where(ok, np.asarray(weight, float), 0.0)
    e1u, e2u = 0.5 * (e1t[:, 1:] + e1t[:, :-1]), 0.5 * (e2t[:, 1:] + e2t[:, :-1])
    e1v, e2v = 0.5 * (e1t[1:, :] + e1t[:-1, :]), 0.5 * (e2t[1:, :] + e2t[:-1, :])
    oki = ok[..., :, 1:] & ok[..., :, :-1]
    okj = ok[..., 1:, :] & ok[..., :-1, :]
    fi = np.where(oki, 0.5 * (wz[..., :, 1:] + wz[..., :, :-1]) * (fz[..., :, 1:] - fz[..., :, :-1]) * e2u / e1u, 0.0)
    fj = np.where(okj, 0.5 * (wz[..., 1:, :] + wz[..., :-1, :]) * (fz[..., 1:, :] - fz[..., :-1, :]) * e1v / e2v, 0.0)
    div = np.zeros_like(fz)
    div[..., :, :-1] += fi
    div[..., :, 1:] -= fi
    div[..., :-1, :] += fj
    div[..., 1:, :] -= fj
    return np.where(ok, div / (e1t * e2t), np.nan)


def upwind_advection(f, u, v, e1t, e2t, mask) -> np.ndarray:
    """``u df/dx_i + v df/dx_j`` with first-order upwind differences (the upstream neighbour; zero
    gradient along an axis where it is land or outside the domain)."""
    f = np.asarray(f, float)
    ok = np.broadcast_to(np.asarray(mask, bool), f.shape) & np.isfinite(f)
    fz = np.where(ok, f, 0.0)

    def sides(axis):
        n = fz.shape[axis]
        nxt, prv = np.take(fz, list(range(1, n)) + [n - 1], axis), np.take(fz, [0] + list(range(n - 1)), axis)
        okn = np.take(ok, list(range(1, n)) + [n - 1], axis) & (np.arange(n) < n - 1).reshape(
            [-1 if a == axis % fz.ndim else 1 for a in range(fz.ndim)])
        okp = np.take(ok, [0] + list(range(n - 1)), axis) & (np.arange(n) > 0).reshape(
            [-1 if a == axis % fz.ndim else 1 for a in range(fz.ndim)])
        return np.where(okn, nxt - fz, 0.0), np.where(okp, fz - prv, 0.0)

    fwd_i, bwd_i = sides(-1)
    fwd_j, bwd_j = sides(-2)
    adv = np.where(u > 0, u * bwd_i, u * fwd_i) / e1t + np.where(v > 0, v * bwd_j, v * fwd_j) / e2t
    return np.where(ok, adv, np.nan)

"""Scale factors of an orthogonal curvilinear grid (NEMO's ORCA) from its T-point positions.

A curvilinear grid is given by its T-point scale factors ``e1t`` (m, the cell's length along ``i``)
and ``e2t`` (m, along ``j``), as in NEMO's mesh mask; where a product has none, :func:`scale_factors`
computes them from ``nav_lat`` / ``nav_lon`` (half the great-circle distance between the neighbours).
The operators on such a grid (gradient, divergence, flux-form Laplacian, upwind advection, with vectors
in grid-aligned components) are :class:`ocean.horizontal.HorizontalGrid`'s, on xgcm; on a regular
lat-lon grid (``e1t = R cos(lat) dlon``, ``e2t = R dlat``) they are the formulas of :mod:`ocean.grid`.
Tested against analytic fields on rotated and stretched grids (``tests/ocean/test_curvilinear.py``).
"""

from __future__ import annotations

import numpy as np

from .constants import R_EARTH

__all__ = ["scale_factors"]


def _distance(lat1, lon1, lat2, lon2) -> np.ndarray:
    p1, p2 = np.deg2rad(lat1), np.deg2rad(lat2)
    a = np.sin((p2 - p1) / 2) ** 2 + np.cos(p1) * np.cos(p2) * np.sin(np.deg2rad(lon2 - lon1) / 2) ** 2
    return 2 * R_EARTH * np.arcsin(np.sqrt(np.clip(a, 0, 1)))


def scale_factors(nav_lat: np.ndarray, nav_lon: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(e1t, e2t)`` (m) from 2-D T-point positions (degrees): half the great-circle distance between
    the neighbours along ``i`` / ``j`` (at an edge, extrapolated from the two nearest distances)."""
    la, lo = np.asarray(nav_lat, float), np.asarray(nav_lon, float)

    def along(axis):
        d = _distance(
            np.take(la, range(la.shape[axis] - 1), axis),
            np.take(lo, range(lo.shape[axis] - 1), axis),
            np.take(la, range(1, la.shape[axis]), axis),
            np.take(lo, range(1, lo.shape[axis]), axis),
        )
        # at an edge, the spacing extrapolated linearly from the two nearest (second order on a
        # stretched grid, where the one neighbour's distance is first order and puts an O(1)
        # error into the Laplacian's first interior point); the one distance when there is one
        n = d.shape[axis]
        first = 1.5 * np.take(d, [0], axis) - 0.5 * np.take(d, [min(1, n - 1)], axis)
        last = 1.5 * np.take(d, [-1], axis) - 0.5 * np.take(d, [max(-2, -n)], axis)
        inner = 0.5 * (np.take(d, range(d.shape[axis] - 1), axis) + np.take(d, range(1, d.shape[axis]), axis))
        return np.concatenate([first, inner, last], axis)

    return along(1), along(0)

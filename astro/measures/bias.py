"""Step 4: the attenuation-bias signatures, (a) colour-cell regression dilution
``1 - slope(z_phot ~ z_true)`` within k-means colour cells (Moran et al. 2025) and (b) the
dust reading ``slope(dz ~ A_V)``."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import xarray as xr
from sklearn.cluster import KMeans

from .. import photoz

__all__ = ["colour_cells", "attenuation_bias"]


def colour_cells(colours: np.ndarray, n_cells: int = 8, seed: int = 0) -> np.ndarray:
    """k-means cell label of each galaxy in (g-r, r-i, i-z) space."""
    x = (colours - colours.mean(0)) / (colours.std(0) + 1e-9)
    return KMeans(n_cells, n_init=4, random_state=seed).fit_predict(x)


def _dilution(z, zp, cells, mask):
    """Count-weighted mean over cells of ``1 - slope(z_p on z_true)``."""
    vals, w = [], []
    for c in np.unique(cells[mask]):
        sel = mask & (cells == c)
        if sel.sum() < 8 or np.ptp(z[sel]) == 0:
            continue
        slope = np.polyfit(z[sel], zp[sel], 1)[0]
        vals.append(1 - slope)
        w.append(sel.sum())
    return float(np.average(vals, weights=w)) if vals else np.nan


def attenuation_bias(
    z: np.ndarray,
    a_v: np.ndarray,
    colours: np.ndarray,
    preds: Mapping[str, np.ndarray],
    populations: Mapping[str, np.ndarray],
    *,
    n_cells: int = 8,
    seed: int = 0,
) -> xr.Dataset:
    """Both readings of the attenuation-bias signature per prediction and population.

    ``dilution`` = 1 - slope of z_phot on z_true within k-means colour cells (0: none, 1:
    z_phot ignores z inside a cell); ``dust_slope`` = slope of dz on A_V [mag-1].
    """
    cells = colour_cells(colours, n_cells, seed)
    names, pops = list(preds), list(populations)
    dil = np.zeros((len(names), len(pops)))
    slope = dil.copy()
    for i, n in enumerate(names):
        d = photoz.dz(z, preds[n])
        for j, p in enumerate(pops):
            m = populations[p]
            dil[i, j] = _dilution(z, preds[n], cells, m)
            slope[i, j] = np.polyfit(a_v[m], d[m], 1)[0] if m.sum() > 3 and np.ptp(a_v[m]) > 0 else np.nan
    return xr.Dataset(
        {
            "dilution": (("prediction", "population"), dil, {"units": "dimensionless"}),
            "dust_slope": (("prediction", "population"), slope, {"units": "mag-1"}),
        },
        coords=dict(prediction=names, population=pops),
        attrs={"n_cells": n_cells, "seed": seed, "description": "attenuation-bias signatures"},
    )

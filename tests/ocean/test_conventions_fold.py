"""ORCA's tripolar north fold: the rows next to it are masked, and the reading says so.

NEMO's global ORCA grids fold their northern rows onto themselves. Its ``lbc_nfd`` (lbcnfd.F90) fills the
last row with the row folded onto it, columns reversed: about a T-point pivot (ORCA2, ORAS5's ORCA025)
``ptab(ji, jpj) = ptab(jpiglo - ji + 2, jpj - 2)``, about an F-point pivot (ORCA1, ORCA12)
``ptab(ji, jpj) = ptab(jpiglo - ji + 1, jpj - 1)``, ``jpiglo`` counting the two cyclic halo columns; output
written by XIOS keeps those rows and columns (ORCA025: 1442 x 1021). Read as an ordinary grid, the mirrored
row is taken for the next row north, and a difference across the fold spans half the globe.

The synthetic fold below is built the same way: a global grid of 2-D positions with scale factors, the halo
columns of a cyclic ORCA grid, and a last row that is the mirrored copy NEMO writes (positions and values
alike). Independent truth: the analytic gradient of T = cos(lat) cos(lon) (-sin(lon), -sin(lat) cos(lon)) / R.
"""

import numpy as np
import pytest
import xarray as xr

from ocean import concepts
from ocean.constants import R_EARTH
from ocean.data.gridaxes import north_fold, read_grid
from scimech.studies.reading import Reading

LAT = np.arange(-50.0, 62.0, 4.0)
LON = np.arange(0.0, 360.0, 7.5)
N = LON.size


def _fold(pivot: str) -> xr.Dataset:
    """A cyclic global grid with NEMO's halo columns and north-fold row about a ``pivot`` ("T" or "F")."""
    la, lo = np.meshgrid(LAT, LON, indexing="ij")
    k = np.arange(N)
    row, mirror = (-2, (N - k) % N) if pivot == "T" else (-1, N - 1 - k)  # of the rows before the fold row
    la, lo = np.r_[la, la[row][mirror][None]], np.r_[lo, lo[row][mirror][None]]
    la, lo = np.c_[la[:, -1:], la, la[:, :1]], np.c_[lo[:, -1:], lo, lo[:, :1]]  # halo: 0 = n-2, n-1 = 1
    t = np.cos(np.deg2rad(la)) * np.cos(np.deg2rad(lo))
    e1 = R_EARTH * np.cos(np.deg2rad(la)) * np.deg2rad(7.5)
    e2 = np.full(la.shape, R_EARTH * np.deg2rad(4.0))
    return xr.Dataset(
        {
            "sosstsst": (("time_counter", "y", "x"), t[None], {"units": "degC"}),
            "tmaskutil": (("y", "x"), np.ones(la.shape, np.int8)),
            "e1t": (("y", "x"), e1, {"units": "m"}),
            "e2t": (("y", "x"), e2, {"units": "m"}),
        },
        coords={"time_counter": [0.0], "nav_lat": (("y", "x"), la), "nav_lon": (("y", "x"), lo)},
    )


@pytest.mark.parametrize("pivot", ["T", "F"])
def test_a_field_across_the_north_fold_has_no_spurious_gradient(pivot):
    reading = Reading("ORCA")
    out = read_grid(_fold(pivot), reading)
    said = reading.sections["grid"]["north fold"]
    assert "masked" in said and ("T-point pivot" if pivot == "T" else "F-point pivot") in said
    assert out["nav_lon"].attrs["periodic"] == 1
    t = out["sosstsst"].isel(time_counter=0)
    # the fold's rows are masked: no value there and no ocean
    assert (
        np.isnan(t.values[-2:]).all() and (out["mask"].values[-2:] == 0).all() and (out["mask"].values[:-2] == 1).all()
    )
    gx, gy = concepts.gradient(t, out["mask"].values)
    la, lo = np.deg2rad(out["nav_lat"].values), np.deg2rad(out["nav_lon"].values)
    ax, ay = -np.sin(lo) / R_EARTH, -np.sin(la) * np.cos(lo) / R_EARTH
    scale = np.abs(ay[:-2]).max()
    # centred differences, second order: (d^2 / 6) of the gradient, 8e-4 for 4-degree rows, 3e-3 for 7.5-degree columns
    inner = slice(1, -3)
    np.testing.assert_allclose(gy.values[inner], ay[inner], rtol=0, atol=2e-3 * scale)
    np.testing.assert_allclose(gx.values[:-2], ax[:-2], rtol=0, atol=5e-3 * scale)
    # the last ocean row, next to the masked fold rows: a one-sided difference (first order: ~4e-2 of it here),
    # not a difference to the mirrored row across the globe (of the order of the whole gradient)
    np.testing.assert_allclose(gy.values[-3], ay[-3], rtol=0, atol=0.05 * scale)


def test_the_fold_is_read_from_nemo_s_own_index_relations():
    # the halo dropped, the last row is row -3 (T) or -2 (F) with its columns reversed; a grid without a fold has none
    la, lo = np.meshgrid(LAT, LON, indexing="ij")
    for pivot in ("T", "F"):
        ds = _fold(pivot)
        inner = {k: ds[k].values[:, 1:-1] for k in ("nav_lat", "nav_lon")}
        assert north_fold(inner["nav_lat"], inner["nav_lon"]) == pivot
    assert north_fold(la, lo) is None

"""ORCA's tripolar north fold, read as NEMO defines it: the rows next to the fold keep their values, and the
reading says so.

NEMO's global ORCA grids fold their northern rows onto themselves. Its ``lbc_nfd`` (lbcnfd.F90) fills the
last row with the row folded onto it, columns reversed: about a T-point pivot (ORCA2, ORAS5's ORCA025)
``ptab(ji, jpj) = ptab(jpiglo - ji + 2, jpj - 2)``, about an F-point pivot (ORCA1, ORCA12)
``ptab(ji, jpj) = ptab(jpiglo - ji + 1, jpj - 1)``, ``jpiglo`` counting the two cyclic halo columns; output
written by XIOS keeps those rows and columns (ORCA025: 1442 x 1021). ``lbc_lnk(..., 'T', 1.)`` copies a scalar
so; ``lbc_lnk(..., 'U' / 'V', -1.)`` reverses a vector's grid components, since the grid's axes turn round
across the fold.

The synthetic grid below is a tripolar cap whose fold has the geometry of a real one: the grid lines of elliptic
coordinates ``z = a cosh(mu + i nu)`` about the two poles at ``z = +-a`` (rows ``mu``, ellipses shrinking onto
the segment between the poles, the fold; columns ``nu``), mapped onto the sphere by the stereographic projection
from the North Pole (conformal, so the grid is orthogonal). Across the segment ``(mu, nu)`` and ``(-mu, -nu)`` are
the same point, which is NEMO's index relation: the row at ``mu = -dmu`` is the row at ``+dmu`` with its columns
reversed, about a T-point pivot (the pivot row on the segment) or an F-point pivot (rows at ``+-dmu / 2``). As
in NEMO's files the grid has 2-D positions, scale factors (analytic: ``R a |sinh(mu + i nu)| dnu / (1 + rho^2 /
4)``), the two halo columns and the mirrored last row; the poles lie on land, as ORCA's do. Independent truth:
``T = cos(lat) cos(lon)``, whose gradient is ``(-sin(lon), -sin(lat) cos(lon)) / R`` (east, north), projected
onto the grid's axes (from the mapping's own derivative), and whose Laplacian, the divergence of that gradient,
is ``-2 T / R^2`` (a degree-1 spherical harmonic).
"""

import numpy as np
import pytest
import xarray as xr

from ocean import concepts
from ocean.constants import R_EARTH
from ocean.data.gridaxes import fold_source, north_fold, read_grid
from ocean.horizontal import HorizontalGrid
from scimech.studies.reading import Reading

NX, NY = 48, 12  # columns (7.5 degrees of nu each) and rows, the mirrored last row included
A = 0.5  # the poles at z = +-A in the stereographic plane (the fold from one to the other)
TURN = np.deg2rad(50.0)  # the fold's direction, so that T is not symmetric about it
POLE_LAND = 3  # points within 3 steps (in mu, nu) of a pole are land


def _cap(pivot: str) -> dict[str, np.ndarray]:
    """The tripolar cap about a ``pivot`` ("T" or "F"), without halo columns: positions (degrees), scale factor
    (m, the same along i and j: the grid is conformal), mask, T and the analytic grid components of grad T."""
    step = 2 * np.pi / NX
    j, i = np.arange(NY), np.arange(NX)
    mu = (NY - 2 - j if pivot == "T" else NY - 1.5 - j) * step  # mu decreases northwards, to 0 on the fold
    nu = (i if pivot == "T" else i + 0.5) * step
    w = mu[:, None] + 1j * nu[None, :]
    turn = np.exp(1j * TURN)
    z, dz = A * np.cosh(w) * turn, A * np.sinh(w) * turn  # the point and d z / d w in the plane
    rho = np.abs(z)
    lat, lon = 90.0 - np.rad2deg(2 * np.arctan(rho / 2)), np.rad2deg(np.angle(z))
    e = R_EARTH * np.abs(dz) * step / (1 + rho**2 / 4)
    e = np.where(e > 0, e, R_EARTH * A * step**2 / 2)  # the T pivot's two poles: half their neighbours' distance
    # unit vectors of the grid's i axis (d/dnu) and j axis (-d/dmu) in the plane, read in east / north components
    along_i = 1j * dz / np.where(np.abs(dz) > 0, np.abs(dz), 1.0)
    along_j = 1j * along_i
    lam, phi = np.deg2rad(lon), np.deg2rad(lat)
    east, north = -np.sin(lam) + 1j * np.cos(lam), -(np.cos(lam) + 1j * np.sin(lam))
    g_east, g_north = -np.sin(lam) / R_EARTH, -np.sin(phi) * np.cos(lam) / R_EARTH
    gi, gj = ((g_east * np.conj(east) * t + g_north * np.conj(north) * t).real for t in (along_i, along_j))
    near_pole = np.minimum.reduce([np.abs(w - 1j * p) for p in (0.0, np.pi, 2 * np.pi)]) <= POLE_LAND * step
    return {
        "lat": lat,
        "lon": lon,
        "e": e,
        "mask": (~near_pole).astype(np.int8),
        "t": np.cos(phi) * np.cos(lam),
        "gi": gi,
        "gj": gj,
    }


def _product(c: dict[str, np.ndarray], halo: bool = True) -> xr.Dataset:
    """The cap as XIOS writes it: NEMO names, the halo columns (0 = n - 2, n - 1 = 1) when ``halo``."""
    h = (lambda a: np.c_[a[:, -1:], a, a[:, :1]]) if halo else (lambda a: a)
    return xr.Dataset(
        {
            "sosstsst": (("time_counter", "y", "x"), h(c["t"])[None], {"units": "degC"}),
            "tmaskutil": (("y", "x"), h(c["mask"])),
            "e1t": (("y", "x"), h(c["e"]), {"units": "m"}),
            "e2t": (("y", "x"), h(c["e"]), {"units": "m"}),
        },
        coords={"time_counter": [0.0], "nav_lat": (("y", "x"), h(c["lat"])), "nav_lon": (("y", "x"), h(c["lon"]))},
    )


def _centred(mask: np.ndarray) -> np.ndarray:
    """Points whose four neighbours are ocean (the product's own mask, its last row the folded copy): a centred
    difference is taken there (one-sided ones next to the poles' land are first order)."""
    ok = mask.astype(bool)
    out = ok & np.roll(ok, 1, 1) & np.roll(ok, -1, 1)
    out[1:-1] &= ok[:-2] & ok[2:]
    out[[0, -1]] = False  # the first row has no southern neighbour; the last is NEMO's halo copy
    return out


def _worst(field: np.ndarray, truth: np.ndarray, where: np.ndarray, rows) -> float:
    return float(np.nanmax(np.abs(np.where(where, field - truth, np.nan))[rows]))


@pytest.mark.parametrize("pivot", ["T", "F"])
def test_the_rows_next_to_the_fold_have_the_analytic_gradient(pivot):
    c = _cap(pivot)
    reading = Reading("ORCA")
    out = read_grid(_product(c), reading)
    said = reading.sections["grid"]["north fold"]
    assert ("T-point pivot" if pivot == "T" else "F-point pivot") in said
    assert "NEMO's north-fold boundary applied" in said and "sign reversed" in said
    assert f"north fold ({pivot}-point pivot): NEMO's north-fold boundary applied" in out.attrs["grid"]
    assert out["nav_lon"].attrs["periodic"] == 1
    # only the last row, NEMO's copy of the row folded onto it, is masked: every ocean row keeps its values
    mask = out["mask"].values
    np.testing.assert_array_equal(mask[:-1], c["mask"][:-1])
    assert (mask[-1] == 0).all()
    t = out["sosstsst"].isel(time_counter=0)
    assert np.isfinite(t.values[-2][c["mask"][-2] == 1]).all()
    gx, gy = concepts.gradient(t, mask)
    centred = _centred(c["mask"])
    scale = np.abs(c["gj"]).max()
    # centred differences are second order: on this grid (7.5-degree steps in mu, nu; scale factors that change by
    # up to a quarter from one point to the next near the poles) 1.3e-2 of the gradient at most, measured
    for g, truth in ((gx, c["gi"]), (gy, c["gj"])):
        assert _worst(g.values, truth, centred, slice(None)) < 2e-2 * scale
        # the row next to the fold (masked before, its northern neighbour across the fold) and the one below
        assert _worst(g.values, truth, centred, slice(NY - 3, NY - 1)) < 2e-2 * scale
    assert centred[NY - 2].sum() >= NX - 4 * (2 * POLE_LAND + 1)  # most of the row is checked, not a few points
    # the j derivative at the row next to the fold reaches across it: here it is far from zero
    assert np.nanmax(np.abs(np.where(centred[NY - 2], c["gj"][NY - 2], np.nan))) > 0.3 * scale


@pytest.mark.parametrize("pivot", ["T", "F"])
def test_a_vector_s_divergence_across_the_fold_reverses_its_components(pivot):
    # grad T, given along the grid's axes as NEMO stores vectors: its divergence is -2 T / R^2
    c = _cap(pivot)
    out = read_grid(_product(c))
    like = out["sosstsst"].isel(time_counter=0)
    fx, fy = (xr.zeros_like(like) + c[k] for k in ("gi", "gj"))
    mask = out["mask"].values
    div = concepts.divergence(fx, fy, mask).values
    truth = -2 * c["t"] / R_EARTH**2
    centred, scale = _centred(c["mask"]), np.abs(truth).max()
    rows = slice(NY - 4, NY - 1)
    # second order, but of a sum of terms about 1 / (R a) / (2 / R^2) = 13 times the result: 4.7e-2 at most, measured
    err = _worst(div, truth, centred, rows)
    assert err < 6e-2 * scale
    # the same components taken as scalars across the fold (NEMO's sign flip dropped): 15 times the largest value
    # of the result at the row next to the fold, so the check above cannot pass without the flip
    g = HorizontalGrid.of(like)
    fx, fy = fx.where(mask > 0), fy.where(mask > 0)
    unflipped = (g.derivative(g.e2 * fx, "X", -1.0) / g.e2 + g.derivative(g.e1 * fy, "Y", 1.0) / g.e1).values
    assert _worst(unflipped, truth, centred, slice(NY - 2, NY - 1)) > 5 * scale
    # a scalar's Laplacian across the fold (its flux through the fold kept): the same -2 T / R^2, 4.3e-3 measured
    lap = concepts.lateral_diffusion(like, xr.ones_like(like), kappa=1.0, mask=mask).values / concepts.RC
    assert _worst(lap, truth, centred, rows) < 1e-2 * scale


def test_a_lazy_product_is_folded_block_by_block_as_an_eager_one():
    c = _cap("T")
    ds = _product(c)
    ds = xr.concat([ds, ds.assign(sosstsst=2 * ds["sosstsst"])], "time_counter", data_vars="minimal").assign_coords(
        time_counter=[0.0, 1.0]
    )
    out = read_grid(ds)
    t, mask = out["sosstsst"], out["mask"].values
    eager = concepts.gradient(t, mask)[1]
    lazy = concepts.gradient(t.chunk({"time_counter": 1}), mask)[1]
    assert lazy.chunks is not None
    np.testing.assert_allclose(lazy.values, eager.values, rtol=1e-12, atol=0, equal_nan=True)
    assert np.isfinite(eager.values[:, NY - 2][:, c["mask"][NY - 2] == 1]).all()


def test_where_the_fold_cannot_be_applied_its_rows_are_masked():
    # a box cut from the F-pivot cap symmetrically about one of its poles: its last row is still the mirrored
    # copy of the row below, but its columns do not go round the globe, so the fold's columns are not the grid's
    c = _cap("F")
    box = {k: v[:, NX // 2 - 8 : NX // 2 + 8] for k, v in c.items()}
    reading = Reading("ORCA box")
    out = read_grid(_product(box, halo=False), reading)
    said = reading.sections["grid"]["north fold"]
    assert "F-point pivot" in said and "cannot be applied" in said and "last 2 rows" in said
    assert "north fold (F-point pivot): last 2 rows masked" in out.attrs["grid"]
    assert out["nav_lon"].attrs["periodic"] == 0
    mask = out["mask"].values
    assert (mask[-2:] == 0).all() and (mask[:-2] == box["mask"][:-2]).all()
    assert np.isnan(out["sosstsst"].values[0, -2:]).all()
    gy = concepts.gradient(out["sosstsst"].isel(time_counter=0), mask)[1]
    # the last ocean row takes a one-sided difference (first order), not one to the row across the fold
    scale = np.abs(box["gj"]).max()
    assert _worst(gy.values, box["gj"], box["mask"].astype(bool), slice(NY - 3, NY - 2)) < 0.1 * scale


def _lbc_nfd(ptab: np.ndarray, pivot: str) -> np.ndarray:
    """NEMO's lbc_nfd for a T-point field, transcribed with its 1-based indices on an array with the two halo
    columns (``ptab[j - 1, ji - 1]`` is ``ptab(ji, j)``): the last row refilled from the row folded onto it."""
    out = ptab.copy()
    jpj, jpiglo = ptab.shape
    if pivot == "T":
        for ji in range(2, jpiglo + 1):
            out[jpj - 1, ji - 1] = ptab[jpj - 3, jpiglo - ji + 2 - 1]
        out[jpj - 1, 0] = ptab[jpj - 3, 2]
    else:
        for ji in range(1, jpiglo + 1):
            out[jpj - 1, ji - 1] = ptab[jpj - 2, jpiglo - ji + 1 - 1]
    return out


@pytest.mark.parametrize("pivot", ["T", "F"])
def test_the_fold_is_read_from_nemo_s_own_index_relations(pivot):
    c = _cap(pivot)
    assert north_fold(c["lat"], c["lon"]) == pivot
    assert north_fold(c["lat"][:-1], c["lon"][:-1]) is None  # without its folded row, a grid has no fold
    # the rows and columns the operators fold in are lbc_nfd's, read on the grid with its halo columns
    rng = np.random.default_rng(0)
    ptab = rng.normal(size=(NY, NX + 2))
    ptab[:, 0], ptab[:, -1] = ptab[:, -2], ptab[:, 1]  # cyclic halo (lbc_lnk's east-west)
    nemo = _lbc_nfd(ptab, pivot)[-1, 1:-1]
    row, cols = fold_source(pivot, NY, NX)
    np.testing.assert_array_equal(ptab[:, 1:-1][row, cols], nemo)

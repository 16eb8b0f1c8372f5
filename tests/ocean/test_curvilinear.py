"""The budget's operators on a curvilinear grid (ocean.horizontal.HorizontalGrid on xgcm, with NEMO's
scale factors e1t / e2t; ocean.curvilinear.scale_factors from positions) against analytic fields on a
rotated, stretched grid, against the synthetic ocean's numpy operators on the sphere (ocean.grid), and the
synthetic ocean's own terms on a rotated NEMO-style grid."""

import numpy as np
import xarray as xr

from ocean import concepts, curvilinear, grid, synthetic
from ocean.constants import R_EARTH
from ocean.horizontal import HorizontalGrid

THETA = np.deg2rad(30.0)  # the grid's i axis points 30 degrees north of east


def _apply(fn, e1, e2, *fields, mask=None):
    """``fn(grid, *fields)`` on the curvilinear grid of scale factors ``e1``, ``e2`` (numpy in, numpy out)."""
    dims = ("lat", "lon")
    like = xr.DataArray(np.zeros(e1.shape), dims=dims, coords={"e1t": (dims, e1), "e2t": (dims, e2)})
    das = [xr.DataArray(np.asarray(f, float), dims=dims, coords=like.coords) for f in fields]
    return HorizontalGrid(like).apply(fn, *das, mask=mask).values


def ddi(f, e1, e2):
    return _apply(lambda g, a: g.derivative(a, "X"), e1, e2, f)


def ddj(f, e1, e2):
    return _apply(lambda g, a: g.derivative(a, "Y"), e1, e2, f)


def divergence(fi, fj, e1, e2):
    return _apply(lambda g, a, b: g.divergence(a, b), e1, e2, fi, fj)


def laplacian(f, e1, e2, ok, weight=None):
    w = np.ones_like(f) if weight is None else weight
    return _apply(lambda g, a, b: g.diffusion(a, b), e1, e2, f, w, mask=ok)


def upwind_advection(f, u, v, e1, e2, ok):
    return _apply(lambda g, a, b, c: g.upwind(a, b, c), e1, e2, f, u, v, mask=ok)


def _planar(ni=14, nj=11, d=2e4, c=600.0):
    """A plane grid rotated by THETA and stretched quadratically along both axes: i -> s = d i + c i^2,
    j -> t = d j + c j^2 (m), X = s cos - t sin, Y = s sin + t cos; e1 = ds/di, e2 = dt/dj."""
    i, j = np.arange(ni, dtype=float), np.arange(nj, dtype=float)
    s, t = np.meshgrid(d * i + c * i**2, d * j + c * j**2, indexing="xy")  # (j, i)
    X, Y = s * np.cos(THETA) - t * np.sin(THETA), s * np.sin(THETA) + t * np.cos(THETA)
    e1, e2 = np.meshgrid(d + 2 * c * i, d + 2 * c * j, indexing="xy")
    return X, Y, e1, e2


def test_gradient_and_divergence_exact_on_a_rotated_stretched_grid():
    X, Y, e1, e2 = _planar()
    a, b = 3e-6, -2e-6
    f = a * X + b * Y  # grad f = (a, b) in (east, north): along i a cos + b sin, along j -a sin + b cos
    # centred differences of a quadratic stretching are exact inside (the one-sided edges are first order)
    inner = (slice(1, -1), slice(1, -1))
    np.testing.assert_allclose(ddi(f, e1, e2)[inner], a * np.cos(THETA) + b * np.sin(THETA), rtol=1e-9)
    np.testing.assert_allclose(ddj(f, e1, e2)[inner], -a * np.sin(THETA) + b * np.cos(THETA), rtol=1e-9)
    # F = (X, Y): div F = 2; grid components F_i = F . e_i, F_j = F . e_j
    fi = X * np.cos(THETA) + Y * np.sin(THETA)
    fj = -X * np.sin(THETA) + Y * np.cos(THETA)
    np.testing.assert_allclose(divergence(fi, fj, e1, e2)[inner], 2.0, rtol=1e-9)


def test_laplacian_second_order_and_conserving_on_a_rotated_stretched_grid():
    X, Y, e1, e2 = _planar()
    ok = np.ones_like(X, bool)
    inner = (slice(1, -1), slice(1, -1))
    lap = laplacian(X**2 + Y**2, e1, e2, ok)  # = 4
    # stretching 2c / (d + 2 c i) <= 6 % per cell: the face factors are O(stretch^2) off
    np.testing.assert_allclose(lap[inner], 4.0, rtol=5e-3)
    w = 1.0 + 0.5 * np.sin(X / 1e5)  # div(w grad f) with land: heat only moves
    ok[4, 5] = ok[6, 9] = False
    q = laplacian(np.cos(Y / 7e4) + X / 1e5, e1, e2, ok, weight=w)
    assert np.isnan(q[~ok]).all()
    assert abs(np.nansum(q * e1 * e2)) < 1e-10 * np.nansum(np.abs(q) * e1 * e2)


def test_upwind_exact_for_linear_fields_on_a_rotated_grid():
    X, Y, e1, e2 = _planar(c=0.0)
    f = 3e-6 * X - 2e-6 * Y
    gi, gj = 3e-6 * np.cos(THETA) - 2e-6 * np.sin(THETA), -3e-6 * np.sin(THETA) - 2e-6 * np.cos(THETA)
    u, v = np.full_like(f, 0.2), np.full_like(f, -0.1)
    adv = upwind_advection(f, u, v, e1, e2, np.ones_like(f, bool))
    np.testing.assert_allclose(adv[1:-1, 1:-1], 0.2 * gi - 0.1 * gj, rtol=1e-9)


def test_on_the_sphere_the_regular_grid_is_a_special_case():
    lat, lon = np.linspace(25, 55, 13), np.linspace(-60, -20, 17)
    la, lo = np.meshgrid(lat, lon, indexing="ij")
    e1 = R_EARTH * np.cos(np.deg2rad(la)) * np.deg2rad(lon[1] - lon[0])
    e2 = np.full_like(e1, R_EARTH * np.deg2rad(lat[1] - lat[0]))
    got1, got2 = curvilinear.scale_factors(la, lo)  # great circles between neighbours, from positions only
    np.testing.assert_allclose(got1, e1, rtol=1e-4)
    np.testing.assert_allclose(got2, e2, rtol=1e-9)
    f = np.sin(np.deg2rad(3 * lo)) * np.cos(np.deg2rad(2 * la))
    np.testing.assert_allclose(ddi(f, e1, e2), grid.ddx(f, lat, lon), rtol=1e-12, atol=1e-20)
    np.testing.assert_allclose(ddj(f, e1, e2), grid.ddy(f, lat, lon), rtol=1e-12, atol=1e-20)
    ok = np.ones_like(f, bool)
    # Y_1^0 = sin(lat): lap = -2 / R^2 sin(lat)
    lap = laplacian(np.sin(np.deg2rad(la)), e1, e2, ok)
    np.testing.assert_allclose(lap[1:-1, 1:-1], (-2 / R_EARTH**2 * np.sin(np.deg2rad(la)))[1:-1, 1:-1], rtol=1e-2)


def _rotated_pole_grid(n):
    """A rotated-pole grid on the sphere, stretched along both axes: rotated longitude
    lam(i) and latitude phi(j) quadratic in the index, the pole tilted so that the grid lines cross the
    parallels at 41 to 59 degrees. Returns positions on the unit sphere p, the unit vectors along i and
    j, nav_lat / nav_lon (degrees) and the exact scale factors e1 = R cos(phi) dlam/di, e2 = R dphi/dj."""
    ni, nj = n, int(0.8 * n)
    x, y = np.linspace(0, 1, ni), np.linspace(0, 1, nj)
    span_l, span_p = np.deg2rad(24 / 1.35), np.deg2rad(20 / 1.3)
    lam, phi = np.deg2rad(-10) + span_l * (x + 0.35 * x**2), np.deg2rad(30) + span_p * (y + 0.3 * y**2)
    L, P = np.meshgrid(lam, phi, indexing="xy")  # (j, i)
    a, b = np.deg2rad(40.0), np.deg2rad(-35.0)
    rx = np.array([[1, 0, 0], [0, np.cos(a), -np.sin(a)], [0, np.sin(a), np.cos(a)]])
    rz = np.array([[np.cos(b), -np.sin(b), 0], [np.sin(b), np.cos(b), 0], [0, 0, 1]])
    turn = lambda v: np.einsum("ab,bji->aji", rz @ rx, np.stack(v))  # noqa: E731
    p = turn([np.cos(P) * np.cos(L), np.cos(P) * np.sin(L), np.sin(P)])
    ei = turn([-np.sin(L), np.cos(L), 0 * L])
    ej = turn([-np.sin(P) * np.cos(L), -np.sin(P) * np.sin(L), np.cos(P)])
    e1 = R_EARTH * np.cos(P) * span_l * (1 + 0.7 * x)[None, :] / (ni - 1)
    e2 = R_EARTH * np.broadcast_to((span_p * (1 + 0.6 * y) / (nj - 1))[:, None], P.shape)
    lat, lon = np.rad2deg(np.arcsin(p[2])), np.rad2deg(np.arctan2(p[1], p[0]))
    return p, ei, ej, lat, lon, e1, e2


def test_second_order_on_a_rotated_stretched_grid_on_the_sphere():
    """f = sin(k . p) on the sphere: its gradient, the divergence of grad f plus a solid-body rotation
    (div = the Laplace-Beltrami of f), that rotation's vorticity 2 c k2 . p / R^2 (the curl, through
    curl F = -div(-F_j, F_i)) and the flux-form Laplacian, all known in closed form, on a grid whose lines
    cross the parallels at 41 to 59 degrees, with 70 % stretching along i and 60 % along j, the scale factors
    derived from nav_lat / nav_lon alone. Centred differences are second order: the error is below
    (|k| h)^2 (h the largest spacing in radians; the truncation error is (|k| h)^2 / 6 times the
    stretching's terms) and falls about 4-fold when the spacing halves (one-sided edges excluded)."""
    k, k2, c = np.array([1.5, -2.0, 2.5]), np.array([0.3, 0.8, -0.5]), 0.7
    inner = (slice(1, -1), slice(1, -1))
    errors = []
    for n in (20, 40):
        p, ei, ej, lat, lon, e1, e2 = _rotated_pole_grid(n)
        north = np.stack(
            [
                -np.sin(np.deg2rad(lat)) * np.cos(np.deg2rad(lon)),
                -np.sin(np.deg2rad(lat)) * np.sin(np.deg2rad(lon)),
                np.cos(np.deg2rad(lat)),
            ]
        )
        tilt = np.rad2deg(np.arcsin((ei * north).sum(0)))  # the i lines' angle north of east
        assert 40 < tilt.min() and tilt.max() < 60
        got1, got2 = curvilinear.scale_factors(lat, lon)
        np.testing.assert_allclose(got1, e1, rtol=2e-4)  # edges included: extrapolated, second order
        np.testing.assert_allclose(got2, e2, rtol=2e-4)
        u = np.einsum("a,aji->ji", k, p)
        f = np.sin(u)
        grad = np.cos(u) * (k[:, None, None] - u * p) / R_EARTH  # tangential gradient per m
        gi, gj = (grad * ei).sum(0), (grad * ej).sum(0)
        lap = (-np.sin(u) * (k @ k - u**2) - 2 * u * np.cos(u)) / R_EARTH**2
        spin = c / R_EARTH * np.cross(np.broadcast_to(k2[:, None, None], p.shape), p, axis=0)
        fi, fj = gi + (spin * ei).sum(0), gj + (spin * ej).sum(0)
        vort = 2 * c * np.einsum("a,aji->ji", k2, p) / R_EARTH**2
        ok = np.ones_like(f, bool)
        rel = lambda got, want: np.abs(got - want)[inner].max() / np.abs(want).max()  # noqa: E731
        err = [
            rel(ddi(f, got1, got2), gi),
            rel(ddj(f, got1, got2), gj),
            rel(divergence(fi, fj, got1, got2), lap),
            rel(-divergence(-fj, fi, got1, got2), vort),
            rel(laplacian(f, got1, got2, ok), lap),
        ]
        h = max(e1.max(), e2.max()) / R_EARTH
        assert max(err) < (np.linalg.norm(k) * h) ** 2, (n, err)
        errors.append(np.array(err))
    assert (errors[0] / errors[1] > 3.5).all(), errors[0] / errors[1]  # second order: 4x per halving


def rotated(ds: xr.Dataset) -> xr.Dataset:
    """The synthetic ocean on a grid turned by 90 degrees, as a curvilinear model stores it: the
    index i runs north, j runs west; 2-D nav_lat / nav_lon and e1t / e2t; vectors in grid-aligned
    components (tau_i = tau_north, tau_j = -tau_east)."""
    out = ds.isel(lon=slice(None, None, -1)).transpose(..., "lon", "lat")
    out = out.rename(lat="i", lon="j").rename(i="lon", j="lat")  # dims: (lat <- west index, lon <- north index)
    nav_lat, nav_lon = xr.broadcast(out["lon"], out["lat"])
    nav_lat, nav_lon = nav_lat.transpose("lat", "lon").values, nav_lon.transpose("lat", "lon").values
    e1 = np.full(nav_lat.shape, R_EARTH * np.deg2rad(np.diff(ds["lat"].values).mean()))
    e2 = R_EARTH * np.cos(np.deg2rad(nav_lat)) * np.deg2rad(np.diff(ds["lon"].values).mean())
    out = out.drop_vars(["lat", "lon"])
    out = out.assign(tauu=out["tauv"], tauv=-out["tauu"])
    return out.assign_coords(
        nav_lat=(("lat", "lon"), nav_lat),
        nav_lon=(("lat", "lon"), nav_lon),
        e1t=(("lat", "lon"), e1),
        e2t=(("lat", "lon"), e2),
    )


def test_synthetic_terms_on_a_rotated_grid_are_the_generators():
    ds = synthetic.generate(n_members=1, years=0.17, ny=6, nx=8, seed=3, output="daily")
    rot = rotated(ds)
    fields = rot[["sst", "mld", "t_sub", "zos", "tauu", "tauv", "qnet", "mask"]]
    got, made = concepts.complete(fields, scheme="forward", advection="upwind")
    assert set(made) == {"q_surf", "q_ekman", "q_geo", "q_entr", "q_diff", "mlhc", "dmlhc_dt"}
    # exact but for q_diff: its north/south face factors average cos(lat) of the T points where the
    # generator takes cos at the face, O(dlat^2 / 8) = 1.4e-3 at this grid's 6 degrees
    for k, tol in [("q_ekman", 1e-9), ("q_geo", 1e-9), ("q_entr", 1e-9), ("q_diff", 2e-3), ("dmlhc_dt", 1e-9)]:
        truth = rot[k].isel(time=slice(0, -1)).values
        np.testing.assert_allclose(
            got[k].isel(time=slice(0, -1)).values, truth, rtol=0, atol=tol * np.nanmax(np.abs(truth)), err_msg=k
        )

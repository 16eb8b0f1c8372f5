"""The ocean reader's horizontal grid (ocean.gridaxes.read_grid) and the budget's operators on it
(ocean.concepts on ocean.horizontal), each case against an independent truth: analytic fields on the
sphere (T = cos(lat) cos(lon): grad T = (-sin(lon), -sin(lat) cos(lon)) / R, its Laplacian -2 T / R^2, a
spherical harmonic of degree 1), finite differences written out here, or values placed by hand.

Grids are 2 degrees (2.5 in longitude): a second-order difference is then off by about
(dlambda^2 / 6) ~ 3e-4 of the field's derivative; the tolerances below are a few times that, and far
below the errors of the misreadings they catch (a 360-degree jump, a wall at a periodic seam, a
downwind difference, a dropped current), which are O(1)."""

import importlib

import numpy as np
import pytest
import xarray as xr

from ocean import concepts
from ocean.constants import CP0, KAPPA, R_EARTH, RHO0, G, coriolis
from scimech.errors import DimensionError
from scimech.studies.reading import Reading

RC = RHO0 * CP0
D2 = 1e-3  # relative tolerance of a second-order difference on these 2-degree grids (errors ~3e-4)


def _read_grid(ds, reading=None, **kw):
    return importlib.import_module("ocean.data.gridaxes").read_grid(ds, reading, **kw)


def _product(lat, lon, *, names=("lat", "lon"), **fns):
    """A product on 1-D ``lat`` / ``lon`` as given (any order, any longitude convention), one time step,
    with each field ``fns[name](lat_rad, lon_rad)``."""
    la, lo = np.meshgrid(np.deg2rad(lat), np.deg2rad(lon), indexing="ij")
    data = {k: (("time", names[0], names[1]), f(la, lo)[None], {"units": "1"}) for k, f in fns.items()}
    return xr.Dataset(
        data,
        coords={
            "time": [0.0],
            names[0]: (names[0], np.asarray(lat, float)),
            names[1]: (names[1], np.asarray(lon, float)),
        },
    )


def _cos(la, lo):
    return np.cos(la) * np.cos(lo)


def _analytic_grad(la, lo):
    return -np.sin(lo) / R_EARTH, -np.sin(la) * np.cos(lo) / R_EARTH


def _rad(ds):
    la, lo = xr.broadcast(np.deg2rad(ds["lat"]), np.deg2rad(ds["lon"]))
    return la.transpose("lat", "lon").values, lo.transpose("lat", "lon").values


GREENWICH = np.r_[np.arange(330.0, 360.0, 2.5), np.arange(0.0, 32.5, 2.5)]  # 330..357.5, 0..30
DATELINE = np.r_[np.arange(150.0, 180.0, 2.5), np.arange(-180.0, -147.5, 2.5)]  # 150..177.5, -180..-150
LAT = np.arange(20.0, 52.0, 2.0)


@pytest.mark.parametrize("lon", [GREENWICH, DATELINE], ids=["greenwich-0..360", "dateline--180..180"])
def test_gradient_across_the_longitude_jump_is_the_analytic_one(lon):
    ds = _read_grid(_product(LAT, lon, t=_cos))
    assert np.all(np.diff(ds["lon"].values) > 0)  # unwrapped: monotonic
    dx, dy = concepts.gradient(ds["t"].isel(time=0))
    ax, ay = _analytic_grad(*_rad(ds))
    inner = (slice(1, -1), slice(1, -1))  # one-sided (first-order) differences at the box edges
    np.testing.assert_allclose(dx.values[inner], ax[inner], rtol=0, atol=D2 * np.abs(ax).max())
    np.testing.assert_allclose(dy.values[inner], ay[inner], rtol=0, atol=D2 * np.abs(ay).max())


@pytest.mark.parametrize("lon", [GREENWICH, DATELINE], ids=["greenwich-0..360", "dateline--180..180"])
def test_geostrophic_advection_across_the_longitude_jump_is_the_analytic_one(lon):
    a, t0, h = 0.5, 10.0, 50.0  # m, degC, m
    ds = _read_grid(
        _product(
            LAT,
            lon,
            t=lambda la, lo: t0 * _cos(la, lo),
            eta=lambda la, lo: a * np.cos(la) * np.sin(lo),
            h=lambda la, lo: h + 0 * la,
        )
    )
    got = concepts.geostrophic_advection(ds["t"], ds["h"], ds["eta"]).isel(time=0).values
    la, lo = _rad(ds)
    detadx, detady = a * np.cos(lo) / R_EARTH, -a * np.sin(la) * np.sin(lo) / R_EARTH
    dtdx, dtdy = t0 * np.array(_analytic_grad(la, lo))
    f = coriolis(np.rad2deg(la))
    truth = -RC * h * (-(G / f) * detady * dtdx + (G / f) * detadx * dtdy)
    # products of two second-order differences; one-sided at the edges
    inner = (slice(1, -1), slice(1, -1))
    np.testing.assert_allclose(got[inner], truth[inner], rtol=0, atol=3 * D2 * np.abs(truth).max())


@pytest.mark.parametrize("lon", [GREENWICH, DATELINE], ids=["greenwich-0..360", "dateline--180..180"])
def test_lateral_diffusion_across_the_longitude_jump_is_the_analytic_one(lon):
    ds = _read_grid(_product(LAT, lon, t=_cos, h=lambda la, lo: 1.0 + 0 * la))
    got = concepts.lateral_diffusion(ds["t"], ds["h"]).isel(time=0).values
    truth = RC * KAPPA * (-2.0 * _cos(*_rad(ds)) / R_EARTH**2)
    inner = (slice(1, -1), slice(1, -1))  # no flux through the box's edges: the edge cells differ
    np.testing.assert_allclose(got[inner], truth[inner], rtol=0, atol=3 * D2 * np.abs(truth).max())


GLOBAL = np.arange(0.0, 360.0, 2.5)
LAT_G = np.arange(-58.0, 60.0, 2.0)


def test_a_global_grid_is_periodic_and_the_seam_is_not_a_wall():
    reading = Reading("global")
    ds = _read_grid(_product(LAT_G, GLOBAL, t=_cos, h=lambda la, lo: 1.0 + 0 * la), reading)
    assert ds["lon"].attrs["periodic"] == 1 and reading.sections["grid"]["periodic in longitude"].startswith("yes")
    got = concepts.lateral_diffusion(ds["t"], ds["h"]).isel(time=0).values
    truth = RC * KAPPA * (-2.0 * _cos(*_rad(ds)) / R_EARTH**2)
    rows = slice(1, -1)  # the first and last latitude rows are the (non-periodic) edges
    for col in (0, 1, -2, -1):  # the seam's columns: centred differences through the seam
        np.testing.assert_allclose(got[rows, col], truth[rows, col], rtol=0, atol=3 * D2 * np.abs(truth).max())
    dx, _ = concepts.gradient(ds["t"].isel(time=0))
    ax, _ = _analytic_grad(*_rad(ds))
    np.testing.assert_allclose(dx.values[:, [0, -1]], ax[:, [0, -1]], rtol=0, atol=D2 * np.abs(ax).max())


def test_a_global_grid_in_minus_180_180_with_a_repeated_column_is_periodic_once():
    lon = np.arange(-180.0, 180.1, 2.5)  # -180..180: the last column repeats the first
    ds = _read_grid(_product(LAT_G, lon, t=_cos, h=lambda la, lo: 1.0 + 0 * la))
    assert ds.sizes["lon"] == 144 and ds["lon"].attrs["periodic"] == 1
    got = concepts.lateral_diffusion(ds["t"], ds["h"]).isel(time=0).values
    truth = RC * KAPPA * (-2.0 * _cos(*_rad(ds)) / R_EARTH**2)
    np.testing.assert_allclose(got[1:-1], truth[1:-1], rtol=0, atol=3 * D2 * np.abs(truth).max())


def test_a_box_with_a_gap_at_the_seam_is_not_periodic():
    lon = np.arange(0.0, 350.0, 10.0)  # 0..340: the gap 340 -> 360 is two spacings
    ds = _read_grid(_product(LAT, lon, t=_cos))
    assert ds["lon"].attrs["periodic"] == 0


def test_periodicity_survives_a_zarr_write_and_read(tmp_path):
    ds = _read_grid(_product(LAT_G, GLOBAL, t=_cos, h=lambda la, lo: 1.0 + 0 * la))
    ds.to_zarr(tmp_path / "prepared.zarr")
    back = xr.open_zarr(tmp_path / "prepared.zarr")
    got = concepts.lateral_diffusion(back["t"], back["h"]).isel(time=0).values
    truth = RC * KAPPA * (-2.0 * _cos(*_rad(back)) / R_EARTH**2)
    np.testing.assert_allclose(got[1:-1, [0, -1]], truth[1:-1, [0, -1]], rtol=0, atol=3 * D2 * np.abs(truth).max())


def _upwind_by_hand(fn, lat, lon, u, v):
    """First-order upwind ``u dT/dx + v dT/dy`` with T = fn(lat, lon) (radians) taken at the upstream
    neighbour's position: south of the point for v > 0 whatever order the arrays are stored in."""
    dphi, dlam = np.deg2rad(2.0), np.deg2rad(2.5)
    la, lo = np.meshgrid(np.deg2rad(lat), np.deg2rad(lon), indexing="ij")
    t = fn(la, lo)
    ty = np.where(v > 0, (t - fn(la - dphi, lo)), (fn(la + dphi, lo) - t)) / (R_EARTH * dphi)
    tx = np.where(u > 0, (t - fn(la, lo - dlam)), (fn(la, lo + dlam) - t)) / (R_EARTH * np.cos(la) * dlam)
    return u * tx + v * ty


def test_upwind_ekman_advection_on_descending_latitude_takes_the_upstream_side():
    lat = LAT[::-1]  # stored north to south, as ERA5 and many reanalyses are
    lon = np.arange(200.0, 240.0, 2.5)

    def t_fn(la, lo):
        return 20 * la**2 + 3 * np.sin(2 * lo)  # curved both ways: upwind and downwind differ by O(1)

    tau = 0.1
    ds = _product(
        lat,
        lon,
        t=t_fn,
        h=lambda la, lo: 40 + 0 * la,
        tauu=lambda la, lo: tau * np.cos(3 * lo),
        tauv=lambda la, lo: tau * np.sin(3 * la),
    )
    got = concepts.ekman_advection(ds["t"], ds["h"], ds["tauu"], ds["tauv"], advection="upwind").isel(time=0).values
    la = np.deg2rad(lat)[:, None]
    f = coriolis(np.rad2deg(la))
    tauu, tauv = ds["tauu"].isel(time=0).values, ds["tauv"].isel(time=0).values
    u_ek, v_ek = tauv / (RHO0 * f * 40), -tauu / (RHO0 * f * 40)
    truth = -RC * 40 * _upwind_by_hand(t_fn, lat, lon, u_ek, v_ek)
    inner = (slice(1, -1), slice(1, -1))
    np.testing.assert_allclose(got[inner], truth[inner], rtol=1e-9, atol=1e-9 * np.abs(truth).max())


def test_upwind_geostrophic_advection_on_descending_latitude_equals_the_ascending_grid():
    lat = LAT[::-1]
    lon = np.arange(200.0, 240.0, 2.5)

    def t_fn(la, lo):
        return 20 * la**2 + np.cos(3 * lo)

    fields = dict(t=t_fn, h=lambda la, lo: 40 + 0 * la, eta=lambda la, lo: 0.3 * np.sin(4 * la) * np.cos(2 * lo))
    down = _product(lat, lon, **fields)
    got = concepts.geostrophic_advection(down["t"], down["h"], down["eta"], advection="upwind").isel(time=0)
    # the same physical fields stored south to north: the answer cannot depend on the storage order
    up = _product(lat[::-1], lon, **fields)
    ref = concepts.geostrophic_advection(up["t"], up["h"], up["eta"], advection="upwind").isel(time=0)
    scale = float(np.abs(ref).max())
    assert scale > 0
    np.testing.assert_allclose(got.values, ref.values[::-1], rtol=0, atol=1e-9 * scale)


# --- staggered currents -------------------------------------------------------------------------


def _mom_like(symmetric: bool):
    """A MOM6-like product: T points (yh, xh), u on (yh, xq) at the east faces, v on (yq, xh) at the north
    faces (symmetric: one more face, the first at the west / south edge)."""
    xh, yh = np.arange(200.0, 240.0, 2.5) + 1.25, LAT + 1.0
    xq = np.r_[xh[0] - 1.25, xh + 1.25] if symmetric else xh + 1.25
    yq = np.r_[yh[0] - 1.0, yh + 1.0] if symmetric else yh + 1.0
    u0, v0 = 0.1, 0.05  # m s-1

    def u_fn(la, lo):
        return u0 * np.sin(lo) * np.cos(la)

    def v_fn(la, lo):
        return v0 * np.cos(2 * la)

    lu, ou = np.meshgrid(np.deg2rad(yh), np.deg2rad(xq), indexing="ij")
    lv, ov = np.meshgrid(np.deg2rad(yq), np.deg2rad(xh), indexing="ij")
    lt, ot = np.meshgrid(np.deg2rad(yh), np.deg2rad(xh), indexing="ij")
    ds = xr.Dataset(
        {
            "thetao": (("time", "yh", "xh"), 10 + _cos(lt, ot)[None], {"units": "degC"}),
            "uo": (("time", "yh", "xq"), u_fn(lu, ou)[None], {"units": "m s-1"}),
            "vo": (("time", "yq", "xh"), v_fn(lv, ov)[None], {"units": "m s-1"}),
        },
        coords={
            "time": [0.0],
            "xh": ("xh", xh, {"units": "degrees_east", "axis": "X"}),
            "yh": ("yh", yh, {"units": "degrees_north", "axis": "Y"}),
            "xq": ("xq", xq, {"units": "degrees_east", "axis": "X"}),
            "yq": ("yq", yq, {"units": "degrees_north", "axis": "Y"}),
        },
    )
    return ds, u_fn, v_fn


@pytest.mark.parametrize("symmetric", [False, True], ids=["xq-right", "xq-outer"])
def test_staggered_currents_are_brought_to_t_points_not_dropped(symmetric):
    ds, u_fn, v_fn = _mom_like(symmetric)
    reading = Reading("MOM-like")
    out = _read_grid(ds, reading)
    assert out["uo"].dims == ("time", "lat", "lon") and out["vo"].dims == ("time", "lat", "lon")
    # by hand: the mean of the two faces of each T cell; at the west / south edge of the non-symmetric grid
    # the missing face extrapolated linearly from the two nearest: T = 1.5 face[0] - 0.5 face[1]
    xh, yh = ds["xh"].values, ds["yh"].values
    la, lo = np.meshgrid(np.deg2rad(yh), np.deg2rad(xh), indexing="ij")
    dl, dp = np.deg2rad(1.25), np.deg2rad(1.0)
    u_t = 0.5 * (u_fn(la, lo - dl) + u_fn(la, lo + dl))
    v_t = 0.5 * (v_fn(la - dp, lo) + v_fn(la + dp, lo))
    if not symmetric:
        u_t[:, 0] = 1.5 * u_fn(la[:, 0], lo[:, 0] + dl) - 0.5 * u_fn(la[:, 0], lo[:, 0] + 3 * dl)
        v_t[0] = 1.5 * v_fn(la[0] + dp, lo[0]) - 0.5 * v_fn(la[0] + 3 * dp, lo[0])
    np.testing.assert_allclose(out["uo"].isel(time=0).values, u_t, rtol=1e-12)
    np.testing.assert_allclose(out["vo"].isel(time=0).values, v_t, rtol=1e-12, atol=1e-15)
    assert "interpolated to T points by xgcm" in reading.row("uo").conversion
    assert "uo" in reading.sections["grid"]["staggered"] and "vo" in reading.sections["grid"]["staggered"]


def test_staggered_currents_give_the_analytic_entrainment():
    ds, u_fn, v_fn = _mom_like(symmetric=True)
    out = _read_grid(ds)
    h = 50.0
    t = out["thetao"]
    hh = xr.concat([xr.full_like(t, h), xr.full_like(t, h)], "time").assign_coords(time=[0.0, 86400.0])
    uu = xr.concat([out["uo"]] * 2, "time").assign_coords(time=[0.0, 86400.0])
    vv = xr.concat([out["vo"]] * 2, "time").assign_coords(time=[0.0, 86400.0])
    tt = xr.concat([t, t], "time").assign_coords(time=[0.0, 86400.0])
    w_e = concepts.entrainment(hh, tt, tt - 1, u=uu, v=vv)["w_e"].isel(time=0).values
    # dh/dt = 0: w_e = h div(u) with u = u0 sin(lon) cos(lat), v = v0 cos(2 lat):
    # div = (du/dlon + d(v cos lat)/dlat) / (R cos lat)
    la, lo = _rad(out)
    div = (0.1 * np.cos(lo) * np.cos(la) + 0.05 * (-2 * np.sin(2 * la) * np.cos(la) - np.cos(2 * la) * np.sin(la))) / (
        R_EARTH * np.cos(la)
    )
    inner = (slice(1, -1), slice(1, -1))
    np.testing.assert_allclose(w_e[inner], h * div[inner], rtol=0, atol=3 * D2 * np.abs(h * div).max())


def test_nemo_u_v_points_without_coordinates_are_east_and_north_of_t():
    ny, nx = 5, 6
    rng = np.random.default_rng(0)
    u, v = rng.normal(size=(ny, nx)), rng.normal(size=(ny, nx))
    lat, lon = np.meshgrid(np.arange(ny) * 1.0 + 30, np.arange(nx) * 1.0 + 300, indexing="ij")
    ds = xr.Dataset(
        {"vozocrtx": (("y", "x_u"), u, {"units": "m/s"}), "vomecrty": (("y_v", "x"), v, {"units": "m/s"})},
        coords={"nav_lat": (("y", "x"), lat), "nav_lon": (("y", "x"), lon)},
    )
    out = _read_grid(ds)
    # NEMO: U(i) is the east face of T(i), V(j) the north face of T(j); at T: the mean of the faces
    # either side; the west / south edge has only one face: extrapolated linearly from the two nearest
    ut = out["vozocrtx"].transpose("lat", "lon").values
    vt = out["vomecrty"].transpose("lat", "lon").values
    np.testing.assert_allclose(ut[:, 1:], 0.5 * (u[:, :-1] + u[:, 1:]), rtol=1e-12)
    np.testing.assert_allclose(vt[1:, :], 0.5 * (v[:-1, :] + v[1:, :]), rtol=1e-12)
    np.testing.assert_allclose(ut[:, 0], 1.5 * u[:, 0] - 0.5 * u[:, 1], rtol=1e-12)
    np.testing.assert_allclose(vt[0], 1.5 * v[0] - 0.5 * v[1], rtol=1e-12)


def test_nemo_u_points_on_the_t_dims_are_known_by_their_glamu_positions():
    # a grid_U file merged with the T file: uo on (y, x) like the tracers, but at the U positions glamu
    ny, nx = 4, 6
    u = np.random.default_rng(1).normal(size=(ny, nx))
    lat, lon = np.meshgrid(np.arange(ny) * 1.0 + 30, np.arange(nx) * 1.0 + 300, indexing="ij")
    ds = xr.Dataset(
        {"uo": (("y", "x"), u, {"units": "m/s"}), "tos": (("y", "x"), np.ones((ny, nx)), {"units": "degC"})},
        coords={
            "nav_lat": (("y", "x"), lat),
            "nav_lon": (("y", "x"), lon),
            "glamu": (("y", "x"), lon + 0.5),
            "gphiu": (("y", "x"), lat),
        },
    )
    reading = Reading("NEMO T + U")
    out = _read_grid(ds, reading)
    np.testing.assert_allclose(
        out["uo"].transpose("lat", "lon").values[:, 1:], 0.5 * (u[:, :-1] + u[:, 1:]), rtol=1e-12
    )
    assert "glamu" not in out.variables and "uo" in reading.sections["grid"]["staggered"]


# --- a NEMO mesh mask --------------------------------------------------------------------------


def _nemo(ny=6, nx=7, nz=3):
    """A NEMO-like product on (y, x) with 2-D nav_lat / nav_lon and its mesh mask (e1t, e2t stretched
    along i, e3t_0, a 3-D tmask with land deeper than the surface, as a shelf has)."""
    lat, lon = np.meshgrid(np.linspace(30, 40, ny), np.linspace(-20, -8, nx), indexing="ij")
    i = np.arange(nx, dtype=float)
    e1t = np.broadcast_to(5e4 + 4e3 * i, (ny, nx)).copy()  # m, stretched along i
    e2t = np.full((ny, nx), 3e4)
    tmask = np.ones((nz, ny, nx), np.int8)
    tmask[0, 0, :2] = 0  # land at the surface
    tmask[1:, :3, :3] = 0  # and a shelf below it
    mesh = xr.Dataset(
        {
            "e1t": (("t", "y", "x"), e1t[None]),
            "e2t": (("t", "y", "x"), e2t[None]),
            "e3t_0": (("t", "z", "y", "x"), np.full((1, nz, ny, nx), 10.0)),
            "tmask": (("t", "z", "y", "x"), tmask[None]),
        }
    )
    x_pos = np.r_[0.0, np.cumsum(0.5 * (e1t[0, 1:] + e1t[0, :-1]))]  # m from the first column
    temp = np.broadcast_to(2e-5 * x_pos, (ny, nx))  # linear along i: 2e-5 K m-1
    ds = xr.Dataset(
        {"sosstsst": (("time_counter", "y", "x"), temp[None].copy(), {"units": "degC"})},
        coords={"time_counter": [0.0], "nav_lat": (("y", "x"), lat), "nav_lon": (("y", "x"), lon)},
    )
    return ds, mesh, tmask


def test_metrics_and_mask_come_from_the_nemo_mesh_mask():
    ds, mesh, tmask = _nemo()
    ds["votemper"] = (("time_counter", "deptht", "y", "x"), np.ones((1, 3, 6, 7)), {"units": "degC"})
    reading = Reading("NEMO-like")
    out = _read_grid(ds, reading, mesh_mask=mesh)
    assert out["e3t"].dims == ("deptht", "lat", "lon")  # the mesh mask's levels on the product's level dim
    np.testing.assert_array_equal(out["e1t"].values, mesh["e1t"].isel(t=0).values)
    # a field linear in the distance along i has the gradient 2e-5 K m-1 only if the distances are e1
    dx, _ = concepts.gradient(out["sosstsst"].isel(time_counter=0), out["mask"].values)
    ocean = out["mask"].values.astype(bool)
    np.testing.assert_allclose(dx.values[ocean], 2e-5, rtol=1e-12)
    # the 2-D ocean mask is the surface level of the 3-D tmask, not where any level is ocean
    np.testing.assert_array_equal(out["mask"].values, tmask[0])
    assert reading.sections["mask"]["ocean cells"] == str(int(tmask[0].sum()))
    assert reading.sections["mask"]["land cells"] == "2"
    assert "e1t" in reading.sections["grid"]["mesh mask"] and "e3t_0" in reading.sections["grid"]["mesh mask"]
    np.testing.assert_array_equal(out["e3t"].values, 10.0)
    assert out["e3t"].attrs["units"] == "m"


def test_a_products_own_3d_tmask_gives_the_surface_level_as_the_mask():
    ds, mesh, tmask = _nemo()
    ds["tmask"] = (("deptht", "y", "x"), tmask)
    out = _read_grid(ds)
    np.testing.assert_array_equal(out["mask"].values, tmask[0])


def test_a_mesh_mask_of_another_grid_is_refused_naming_the_fix():
    ds, mesh, _ = _nemo()
    with pytest.raises(DimensionError, match="mesh mask of this product's grid"):
        _read_grid(ds, mesh_mask=mesh.isel(x=slice(0, 5)))


def test_a_global_curvilinear_grid_is_periodic():
    # a global grid given with scale factors (a NEMO-style curvilinear reading): periodic by its positions
    lat, lon = np.meshgrid(LAT_G, GLOBAL, indexing="ij")
    e1 = R_EARTH * np.cos(np.deg2rad(lat)) * np.deg2rad(2.5)
    e2 = np.full(lat.shape, R_EARTH * np.deg2rad(2.0))
    t = _cos(np.deg2rad(lat), np.deg2rad(lon))
    ds = xr.Dataset(
        {
            "t": (("y", "x"), t),
            "h": (("y", "x"), np.ones_like(t)),
            "e1t": (("y", "x"), e1, {"units": "m"}),
            "e2t": (("y", "x"), e2, {"units": "m"}),
        },
        coords={"nav_lat": (("y", "x"), lat), "nav_lon": (("y", "x"), lon)},
    )
    out = _read_grid(ds)
    assert out["nav_lon"].attrs["periodic"] == 1
    got = concepts.lateral_diffusion(out["t"], out["h"]).values
    truth = RC * KAPPA * (-2.0 * t / R_EARTH**2)
    # curvilinear faces average cos(lat) of the T points (O(dlat^2/8) = 1.5e-4 at 2 degrees)
    np.testing.assert_allclose(got[1:-1, [0, -1]], truth[1:-1, [0, -1]], rtol=0, atol=3 * D2 * np.abs(truth).max())


def test_latitude_and_longitude_found_by_their_cf_standard_names():
    ds = _product(LAT, GREENWICH, names=("yc", "xc"), t=_cos)
    ds["yc"].attrs.update(standard_name="latitude", units="degrees_north")
    ds["xc"].attrs.update(standard_name="longitude", units="degrees_east")
    reading = Reading("CF")
    out = _read_grid(ds, reading)
    assert reading.sections["grid"]["latitude, longitude"] == "yc, xc"
    assert "unwrapped" in reading.sections["grid"]["longitude"]
    np.testing.assert_allclose(out["lon"].values, np.arange(330.0, 392.5, 2.5))


def test_positions_from_the_mesh_mask_when_the_product_has_none():
    ds, mesh, tmask = _nemo()
    lat, lon = ds["nav_lat"].values, ds["nav_lon"].values
    bare = ds.drop_vars(["nav_lat", "nav_lon"])
    mesh = mesh.assign(glamt=(("t", "y", "x"), lon[None]), gphit=(("t", "y", "x"), lat[None]))
    out = _read_grid(bare, mesh_mask=mesh)
    np.testing.assert_array_equal(out["nav_lat"].values, lat)
    np.testing.assert_array_equal(out["mask"].values, tmask[0])


def test_unsorted_longitudes_are_refused_naming_the_fix():
    lon = np.array([10.0, 12.5, 5.0, 7.5, 15.0])
    with pytest.raises(DimensionError, match=r"not monotonic.*sortby\('lon'\)"):
        _read_grid(_product(LAT, lon, t=_cos))


def test_orca_halo_columns_are_dropped_and_the_grid_is_periodic():
    # NEMO's ORCA grids repeat columns: column 0 is column n-2 and column n-1 is column 1 (jperio = 4 / 6)
    lat, lon = np.meshgrid(LAT_G, GLOBAL, indexing="ij")
    lat, lon = np.c_[lat[:, -1:], lat, lat[:, :1]], np.c_[lon[:, -1:], lon, lon[:, :1]]
    t = _cos(np.deg2rad(lat), np.deg2rad(lon))
    ds = xr.Dataset(
        {
            "t": (("y", "x"), t),
            "h": (("y", "x"), np.ones_like(t)),
            "e1t": (("y", "x"), R_EARTH * np.cos(np.deg2rad(lat)) * np.deg2rad(2.5), {"units": "m"}),
            "e2t": (("y", "x"), np.full(t.shape, R_EARTH * np.deg2rad(2.0)), {"units": "m"}),
        },
        coords={"nav_lat": (("y", "x"), lat), "nav_lon": (("y", "x"), lon)},
    )
    out = _read_grid(ds)
    assert out.sizes["lon"] == GLOBAL.size and out["nav_lon"].attrs["periodic"] == 1
    np.testing.assert_array_equal(out["nav_lon"].values[0], GLOBAL)


def test_pop_b_grid_velocities_at_the_corners_are_brought_to_t_points():
    # POP2: UVEL on the tracers' (nlat, nlon) dims but at the north-east corners ULAT / ULONG (a B grid)
    ny, nx = 4, 5
    u = np.random.default_rng(2).normal(size=(ny, nx))
    tlat, tlon = np.meshgrid(np.arange(ny) * 1.0 + 10, np.arange(nx) * 1.0 + 200, indexing="ij")
    ds = xr.Dataset(
        {
            "UVEL": (("nlat", "nlon"), u, {"units": "cm/s"}),
            "TEMP": (("nlat", "nlon"), np.ones((ny, nx)), {"units": "degC"}),
        },
        coords={
            "TLAT": (("nlat", "nlon"), tlat),
            "TLONG": (("nlat", "nlon"), tlon),
            "ULAT": (("nlat", "nlon"), tlat + 0.5),
            "ULONG": (("nlat", "nlon"), tlon + 0.5),
        },
    )
    out = _read_grid(ds)
    corners = 0.25 * (u[:-1, :-1] + u[:-1, 1:] + u[1:, :-1] + u[1:, 1:])  # the four corners of each T cell
    np.testing.assert_allclose(out["UVEL"].transpose("lat", "lon").values[1:, 1:], corners, rtol=1e-12)


def test_points_on_one_dim_are_refused_as_not_a_grid():
    n = 5
    ds = xr.Dataset(
        {"tos": (("cell",), np.ones(n), {"units": "degC"})},
        coords={"lat": ("cell", np.linspace(0, 10, n)), "lon": ("cell", np.linspace(0, 20, n))},
    )
    with pytest.raises(DimensionError, match="not a \\(lat, lon\\) grid.*regrid"):
        _read_grid(ds)


def test_nemo_face_scale_factors_of_the_mesh_mask_are_the_distances_between_t_points():
    # NEMO's e1u is the distance from T(i) to T(i+1); here it differs from the mean of e1t (a grid whose
    # T points are not centred in their cells): a field linear in that distance has its gradient exactly
    ds, mesh, tmask = _nemo()
    ny, nx = tmask.shape[1:]
    e1u = 4e4 + 9e3 * np.arange(nx) ** 1.5 * np.ones((ny, 1))  # m, T(i) -> T(i+1)
    e2v = np.full((ny, nx), 3.3e4)
    x_pos = np.r_[0.0, np.cumsum(e1u[0, :-1])]
    y_pos = np.r_[0.0, np.cumsum(e2v[:-1, 0])]
    temp = 2e-5 * x_pos[None, :] - 1e-5 * y_pos[:, None]
    ds["sosstsst"] = (("time_counter", "y", "x"), temp[None], {"units": "degC"})
    faces = {"e1u": e1u, "e2u": np.full((ny, nx), 3e4), "e1v": mesh["e1t"].values[0], "e2v": e2v}
    mesh = mesh.assign({k: (("t", "y", "x"), v[None]) for k, v in faces.items()})
    reading = Reading("NEMO-like")
    out = _read_grid(ds, reading, mesh_mask=mesh)
    assert "e1u, e2u, e1v, e2v at the faces" in reading.sections["grid"]["metrics"]
    ocean = np.ones((ny, nx), bool)
    dx, dy = concepts.gradient(out["sosstsst"].isel(time_counter=0))
    np.testing.assert_allclose(dx.values[ocean], 2e-5, rtol=1e-12)
    np.testing.assert_allclose(dy.values[ocean], -1e-5, rtol=1e-12)
    # diffusion only moves heat: its integral over the cells e1t e2t vanishes (land included)
    h = xr.full_like(out["sosstsst"], 30.0)
    q = concepts.lateral_diffusion(out["sosstsst"] ** 2, h, mask=out["mask"].values).isel(time_counter=0)
    area = (out["e1t"] * out["e2t"]).values
    assert abs(np.nansum(q.values * area)) < 1e-12 * np.nansum(np.abs(q.values) * area)


def test_lateral_diffusion_on_a_stretched_latitude_grid_uses_each_cells_own_spacing():
    # latitudes 1.5 to 2.9 degrees apart (as grids refined towards the equator are): finite volumes with each
    # face's own spacing stay second order (measured 6.5e-4 of the maximum; the mean spacing was 36 % off)
    j = np.arange(18.0)
    lat = 10 + 1.5 * j + 0.04 * j**2
    ds = _read_grid(_product(lat, np.arange(200.0, 240.0, 2.5), t=_cos, h=lambda la, lo: 1.0 + 0 * la))
    got = concepts.lateral_diffusion(ds["t"], ds["h"]).isel(time=0).values
    truth = RC * KAPPA * (-2.0 * _cos(*_rad(ds)) / R_EARTH**2)
    inner = (slice(1, -1), slice(1, -1))
    np.testing.assert_allclose(got[inner], truth[inner], rtol=0, atol=3 * D2 * np.abs(truth).max())

"""A global grid read through the reader is one periodic grid for every concept: where the seam falls in the
file changes nothing.

A product covering 360 degrees of longitude (CF: longitudes in degrees_east, any origin) has no edge: the
column at 357.5 neighbours the one at 0. The independent truth is the product itself rolled by ``k`` columns
(the same ocean, its seam elsewhere in the file): each concept of the rolled product, rolled back, is the
concept of the original to round-off. Before the grid was read from the longitudes' values, a product whose
SST, MLD and T_sub are derived from 3-D ``thetao`` / ``so`` (gsw drops the coordinates' attributes) lost
the periodic mark on the way, so the seam columns became walls: ``q_diff`` there was off by more than the
field's largest value, ``q_geo`` by 12 %.
"""

import numpy as np
import pytest
import xarray as xr

from ocean import concepts
from ocean.constants import R_EARTH
from ocean.data import open_store
from ocean.data.gridaxes import mark_periodic, periodic_in_longitude, read_grid
from ocean.nemo import DEPTHT

LAT = np.arange(-58.0, 60.0, 4.0)
LON = np.arange(0.0, 360.0, 7.5)  # 48 columns, 0 .. 352.5: once round the globe
NT = 5
K = 10  # columns the second file is rolled by
ROUND_OFF = 1e-9  # of each field's largest value: the two reads do the same arithmetic in another order


def _product(lon: np.ndarray, *, curvilinear: bool = False) -> xr.Dataset:
    """A CMIP6-like product (CMOR names, standard names, units) on ``lon``, with 3-D ``thetao`` / ``so`` (the
    reader derives sst, mld, t_sub from them), currents, SSH, stress and a flux, and an island across the seam.
    ``curvilinear``: 2-D positions and scale factors (a NEMO-style grid) instead of 1-D lat / lon."""
    la, lo = np.meshgrid(np.deg2rad(LAT), np.deg2rad(lon), indexing="ij")
    k = np.arange(NT)[:, None, None]
    land = (np.abs(np.rad2deg(la) - 10) < 7) & (np.abs((np.rad2deg(lo) + 180) % 360 - 180) < 12)

    def field(values):
        out = np.broadcast_to(values, (NT, *la.shape)).astype(float).copy()
        out[:, land] = np.nan
        return out

    sst = field(15 + 10 * np.cos(la) * np.cos(lo) + np.sin(2 * lo) + 0.3 * k)
    mld = field(60 + 25 * np.cos(lo) * np.cos(la) + 5 * np.sin(3 * lo) + 3 * k)
    z = DEPTHT[None, :, None, None]
    temp = np.where(z <= mld[:, None], sst[:, None], sst[:, None] - 4 - 0.01 * z)
    two, three = ("time", "lat", "lon"), ("time", "lev", "lat", "lon")
    u = field(0.1 * np.cos(la) + 0.05 * np.sin(lo))
    v = field(0.05 * np.cos(2 * lo) * np.cos(la))
    ds = xr.Dataset(
        {
            "thetao": (three, temp, {"standard_name": "sea_water_potential_temperature", "units": "degC"}),
            "so": (three, np.where(np.isfinite(temp), 35.0, np.nan), {"standard_name": "sea_water_salinity"}),
            "uo": (three, np.repeat(u[:, None], DEPTHT.size, 1), {"standard_name": "sea_water_x_velocity"}),
            "vo": (three, np.repeat(v[:, None], DEPTHT.size, 1), {"standard_name": "sea_water_y_velocity"}),
            "zos": (two, field(0.3 * np.sin(la) * np.cos(lo) + 0.1 * np.cos(la) * np.sin(2 * lo)), {"units": "m"}),
            "hfds": (two, field(20 * np.cos(lo) + 0 * k), {"units": "W m-2"}),
            "tauuo": (two, field(0.1 + 0.02 * np.sin(lo) + 0 * k), {"units": "N m-2"}),
            "tauvo": (two, field(0.05 * np.cos(lo) + 0 * k), {"units": "N m-2"}),
        },
        coords={
            "time": ("time", np.asarray(xr.date_range("2000-01-16", periods=NT, freq="30D"))),
            "lev": ("lev", DEPTHT, {"units": "m", "positive": "down", "axis": "Z", "standard_name": "depth"}),
            "lat": ("lat", LAT, {"standard_name": "latitude", "units": "degrees_north"}),
            "lon": ("lon", lon, {"standard_name": "longitude", "units": "degrees_east"}),
        },
    )
    for name in ("so",):
        ds[name].attrs["units"] = "0.001"
    for name in ("uo", "vo"):
        ds[name].attrs["units"] = "m s-1"
    ds["zos"].attrs["standard_name"] = "sea_surface_height_above_geoid"
    ds["hfds"].attrs["standard_name"] = "surface_downward_heat_flux_in_sea_water"
    ds["tauuo"].attrs["standard_name"] = "surface_downward_x_stress"
    ds["tauvo"].attrs["standard_name"] = "surface_downward_y_stress"
    if curvilinear:
        e1 = R_EARTH * np.cos(la) * np.deg2rad(7.5)
        e2 = np.full(la.shape, R_EARTH * np.deg2rad(4.0))
        ds = ds.rename(lat="y", lon="x").drop_vars(["y", "x"])
        ds = ds.assign_coords(
            nav_lat=(("y", "x"), np.rad2deg(la), {"standard_name": "latitude", "units": "degrees_north"}),
            nav_lon=(("y", "x"), np.rad2deg(lo), {"standard_name": "longitude", "units": "degrees_east"}),
        )
        ds["e1t"] = (("y", "x"), e1, {"units": "m"})
        ds["e2t"] = (("y", "x"), e2, {"units": "m"})
    return ds


def _rolled(ds: xr.Dataset, k: int) -> xr.Dataset:
    x = "x" if "x" in ds.dims else "lon"
    return ds.roll({x: -k}, roll_coords=True)


TERMS = ("sst", "mld", "t_sub", "q_diff", "q_geo", "q_ekman", "q_entr", "q_surf", "dmlhc_dt")


@pytest.mark.parametrize(
    ("origin", "curvilinear"),
    [(0.0, False), (-180.0, False), (0.0, True)],
    ids=["0..360", "-180..180", "curvilinear"],
)
def test_concepts_do_not_depend_on_where_the_seam_falls_in_the_file(tmp_path, origin, curvilinear):
    lon = (LON + origin + 180.0) % 360.0 - 180.0 if origin < 0 else LON
    ds = _product(lon, curvilinear=curvilinear)
    ds.to_netcdf(tmp_path / "a.nc")
    _rolled(ds, K).to_netcdf(tmp_path / "b.nc")
    a = open_store(tmp_path / "a.nc", validate_schema=False).load()
    b = open_store(tmp_path / "b.nc", validate_schema=False).load()
    for name in TERMS:
        want = a[name].values
        got = np.roll(b[name].transpose(*a[name].dims).values, K, axis=-1)
        scale = np.nanmax(np.abs(want))
        assert scale > 0 and np.array_equal(np.isfinite(want), np.isfinite(got)), name
        np.testing.assert_allclose(got, want, rtol=0, atol=ROUND_OFF * scale, err_msg=name)
    x_attr = "nav_lon" if curvilinear else "lon"  # and the stores say so
    assert a[x_attr].attrs["periodic"] == 1 and b[x_attr].attrs["periodic"] == 1


def test_a_box_cut_from_a_global_grid_is_not_periodic_whatever_its_attributes_say():
    # the 'periodic' attribute survives an isel; the grid is read from the longitudes, so the box has edges
    ds = mark_periodic(_product(LON).isel(time=0, lev=0))
    assert ds["lon"].attrs["periodic"] == 1
    box = ds.isel(lon=slice(0, 20))
    assert box["lon"].attrs["periodic"] == 1 and not periodic_in_longitude(box)
    t = box["thetao"].where(np.isfinite(box["thetao"]), 0.0)
    got = concepts.gradient(t)[0].values
    # at the box's first column only the eastern neighbour exists: a one-sided difference (not one through a
    # seam to column 19, 142.5 degrees away)
    dx = R_EARTH * np.cos(np.deg2rad(LAT)) * np.deg2rad(7.5)
    one_sided = (t.values[:, 1] - t.values[:, 0]) / dx
    np.testing.assert_allclose(got[:, 0], one_sided, rtol=1e-12)


def test_staggered_currents_of_a_global_nemo_grid_are_brought_to_t_points_across_the_seam():
    # NEMO grid_U: vozocrtx on (y, x_u), U(i) the east face of T(i); 2-D nav_lat / nav_lon of a global grid. The
    # T point of column 0 lies between U(-1) (its west face, across the seam) and U(0): their mean, as elsewhere
    la, lo = np.meshgrid(LAT, LON, indexing="ij")
    u = np.random.default_rng(3).normal(size=la.shape)
    ds = xr.Dataset(
        {"vozocrtx": (("y", "x_u"), u, {"units": "m/s"})},
        coords={"nav_lat": (("y", "x"), la), "nav_lon": (("y", "x"), lo)},
    )
    out = read_grid(ds)
    got = out["vozocrtx"].transpose("lat", "lon").values
    np.testing.assert_allclose(got[:, 1:], 0.5 * (u[:, :-1] + u[:, 1:]), rtol=1e-12)
    np.testing.assert_allclose(got[:, 0], 0.5 * (u[:, -1] + u[:, 0]), rtol=1e-12)  # not extrapolated from the east

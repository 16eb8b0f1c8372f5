"""CESM POP2 history files: each variable sits where its own CF ``coordinates`` attribute says.

POP2 is a B grid (Smith et al. 2010, LAUR-10-01853, section 3): tracers (``TEMP``, ``SALT``, ``SSH``,
``HMXL``, ``SHF``) at the T points ``TLAT`` / ``TLONG``, velocities and wind stress (``UVEL``, ``TAUX``,
``TAUY``) at the cells' north-east corners ``ULAT`` / ``ULONG``, all on the same ``(nlat, nlon)`` dims. A
history file says which with each variable's ``coordinates`` attribute (CF 1.x section 5: ``TEMP:coordinates
= "TLONG TLAT z_t time"``, ``TAUX:coordinates = "ULONG ULAT time"``). Decoded by xarray, every variable on
``(nlat, nlon)`` carries all four positions, so reading the attached coordinates took the tracers for corner
fields and averaged each over four corners: SST 12 degC off at coasts, ``q_diff`` 140 times too large.

Independent truths: the tracers' own values (no averaging at all), the mean of the four corners written out
here for the stress, and the lateral diffusion of the synthetic ocean's numpy operators (``ocean.grid``,
not the reader's xgcm grid) on the T-point fields.
"""

import numpy as np
import xarray as xr

from ocean import grid
from ocean.constants import CP0, KAPPA, RHO0
from ocean.data import open_store
from scimech.studies.reading import Reading

LAT = np.arange(20.0, 46.0, 2.0)  # T rows
LON = np.arange(200.0, 232.5, 2.5)  # T columns
NT = 3
Z_T = np.array([500.0, 1500.0, 2500.0, 5000.0, 10000.0, 20000.0])  # cm, layer mid-points


def _pop_history() -> tuple[xr.Dataset, np.ndarray]:
    """A POP2-like monthly history file (noleap, stamped at each month's end with ``time_bound``) on a grid with a
    coast to the east and an island; returns it and the T-point ocean mask."""
    la, lo = np.meshgrid(LAT, LON, indexing="ij")
    ocean = ~(((lo >= 222.5) & (la >= 30.0)) | ((np.abs(la - 26) <= 2) & (np.abs(lo - 210) <= 2.5)))
    # a U point is ocean where its four T cells are (POP's KMU = min of the four KMT)
    u_ocean = ocean.copy()
    u_ocean[:-1, :-1] &= ocean[1:, :-1] & ocean[:-1, 1:] & ocean[1:, 1:]
    u_ocean[-1, :] = False
    u_ocean[:, -1] = False
    k = np.arange(NT)[:, None, None]
    r = np.deg2rad
    sst = 18 + 6 * np.cos(r(la) * 2) * np.cos(r(lo - 200) * 3) + 0.5 * k
    hmxl = 4000 + 1500 * np.sin(r(lo - 200) * 4) * np.cos(r(la)) + 300 * k  # cm
    ulat, ulon = la + 1.0, lo + 1.25
    taux = 1.0 + 0.5 * np.sin(r(ulat) * 3) + 0.2 * np.cos(r(ulon)) + 0 * k  # dyne cm-2 at the corners
    tauy = 0.3 * np.cos(r(ulon) * 2) + 0 * k
    temp = np.where(
        Z_T[None, :, None, None] <= hmxl[:, None], sst[:, None], sst[:, None] - 3 - 1e-4 * Z_T[None, :, None, None]
    )

    def land(values, where):
        return np.where(where, values, np.nan)

    g, g3 = ("time", "nlat", "nlon"), ("time", "z_t", "nlat", "nlon")
    ds = xr.Dataset(
        {
            "TEMP": (g3, land(temp, ocean), {"long_name": "Potential Temperature", "units": "degC"}),
            "SALT": (g3, land(np.full(temp.shape, 35.0), ocean), {"long_name": "Salinity", "units": "gram/kilogram"}),
            "SSH": (g, land(10 * np.sin(r(la)) * np.cos(r(lo)) + 0 * k, ocean), {"units": "centimeter"}),
            "HMXL": (g, land(hmxl, ocean), {"long_name": "Mixed-Layer Depth", "units": "centimeter"}),
            "SHF": (g, land(50 + 0 * k + 0 * la, ocean), {"units": "watt/m^2"}),
            "TAUX": (
                g,
                land(taux, u_ocean),
                {"long_name": "Windstress in grid-x direction", "units": "dyne/centimeter^2"},
            ),
            "TAUY": (
                g,
                land(tauy, u_ocean),
                {"long_name": "Windstress in grid-y direction", "units": "dyne/centimeter^2"},
            ),
        },
        coords={
            "z_t": (
                "z_t",
                Z_T,
                {"long_name": "depth from surface to midpoint of layer", "units": "centimeters", "positive": "down"},
            ),
            "TLAT": (("nlat", "nlon"), la, {"long_name": "array of t-grid latitudes", "units": "degrees_north"}),
            "TLONG": (("nlat", "nlon"), lo, {"long_name": "array of t-grid longitudes", "units": "degrees_east"}),
            "ULAT": (("nlat", "nlon"), ulat, {"long_name": "array of u-grid latitudes", "units": "degrees_north"}),
            "ULONG": (("nlat", "nlon"), ulon, {"long_name": "array of u-grid longitudes", "units": "degrees_east"}),
        },
        attrs={"title": "b.e21.B1850.f09_g17 POP2 layout", "source": "CCSM POP2, the CESM Ocean Component"},
    )
    edges = xr.date_range("0001-01-01", periods=NT + 1, freq="MS", calendar="noleap", use_cftime=True)
    ds = ds.assign_coords(time=("time", np.asarray(edges[1:]), {"long_name": "time", "bounds": "time_bound"}))
    ds["time_bound"] = (("time", "d2"), np.stack([np.asarray(edges[:-1]), np.asarray(edges[1:])], axis=1))
    ds["time"].encoding.update(units="days since 0000-01-01 00:00:00", calendar="noleap")
    for name in ("TEMP", "SALT"):
        ds[name].encoding["coordinates"] = "TLONG TLAT z_t time"
    for name in ("SSH", "HMXL", "SHF"):
        ds[name].encoding["coordinates"] = "TLONG TLAT time"
    for name in ("TAUX", "TAUY"):
        ds[name].encoding["coordinates"] = "ULONG ULAT time"
    return ds, ocean


def test_tracers_stay_at_t_points_and_the_stress_comes_from_the_four_corners(tmp_path):
    ds, ocean = _pop_history()
    ds.to_netcdf(tmp_path / "b.e21.pop.h.0001-01.nc")
    back = xr.open_dataset(tmp_path / "b.e21.pop.h.0001-01.nc")
    assert "ULAT" in back["TEMP"].coords and back["TEMP"].encoding["coordinates"] == "TLONG TLAT z_t time"

    reading = Reading("CESM POP2")
    out = open_store(tmp_path / "b.e21.pop.h.0001-01.nc", validate_schema=False, reading=reading).isel(member=0)
    out = out.transpose("time", "lat", "lon").load()
    # tracers as given, to the last bit, at every T point (coasts included)
    np.testing.assert_array_equal(out["sst"].values, ds["TEMP"].values[:, 0])
    np.testing.assert_allclose(out["mld"].values, ds["HMXL"].values / 100.0, rtol=1e-14)  # cm -> m by pint
    np.testing.assert_array_equal(out["mask"].values, ocean.astype(np.int8))
    # the stress at a T point: the mean of its cell's four corners (the U points south-west, south-east,
    # north-west and north-east of it: (j-1, i-1), (j-1, i), (j, i-1), (j, i)), in N m-2 (1 dyne cm-2 = 0.1 N m-2)
    for ours, theirs in (("tauu", "TAUX"), ("tauv", "TAUY")):
        u = ds[theirs].values * 0.1
        corners = 0.25 * (u[:, :-1, :-1] + u[:, :-1, 1:] + u[:, 1:, :-1] + u[:, 1:, 1:])
        inner = np.isfinite(corners) & ocean[1:, 1:]
        scale = np.nanmax(np.abs(u))  # round-off of the unit conversion and the mean, relative to the field
        np.testing.assert_allclose(out[ours].values[:, 1:, 1:][inner], corners[inner], rtol=0, atol=1e-12 * scale)
    said = reading.sections["grid"]["variable positions"]
    assert "TEMP: TLAT TLONG" in said and "TAUX: ULAT ULONG" in said


def test_lateral_diffusion_of_a_pop_file_is_that_of_its_t_point_fields(tmp_path):
    ds, ocean = _pop_history()
    ds.to_netcdf(tmp_path / "pop.nc")
    out = open_store(tmp_path / "pop.nc", validate_schema=False).isel(member=0).transpose("time", "lat", "lon").load()
    sst, h = ds["TEMP"].values[:, 0], ds["HMXL"].values / 100.0
    truth = RHO0 * CP0 * KAPPA * grid.laplacian(sst, LAT, LON, ocean, weight=h)
    # two implementations of the same flux-form stencil on a uniform grid: equal to round-off
    np.testing.assert_allclose(out["q_diff"].values, truth, rtol=0, atol=1e-9 * np.nanmax(np.abs(truth)))

"""An oceanographer's trial of the ocean reader's time axis and grid: small files laid out as real products
are, fed through the documented doors (``ocean.products.open_store``, ``ocean.timeaxis.read_time``,
``ocean.gridaxes.read_grid``, ``scimech ocean inspect``), each answer checked against a computation of this
file's own: cftime's ``num2date`` / ``date2num`` and date arithmetic, hand counts, and finite differences on
the sphere written out below (centred, interior points, longitudes unwrapped by hand).

Files tried (what was found; "fixed" cases are regressions of fixes made with this trial):

| file | answer |
|---|---|
| CMIP6 Omon, time_bnds, mid-month stamps, 360_day / noleap / julian (1900: a Julian leap year) | right |
| ORAS5 time_counter in "seconds since 1900-01-01" | right |
| CMEMS daily, 2 years, one day missing | refused naming the day |
| monthly data with a duplicated month | refused naming the stamp |
| 5-daily (pentad) product, 12 years | was wrong: its climatology refused ("give a longer record"); fixed |
| "days since 0001-01-01" (year 1, standard calendar) | right; xarray's warnings silenced, fixed |
| int64 "months since" in 360_day | right |
| int64 "months since" in standard / noleap | refused; the message now names CF's rule and a fix that works |
| CESM POP monthly means stamped at the end of the month (time_bound) | was wrong (January read as February); fixed |
| regional box 120E..-100 on -180..180 | right |
| 0..359.75 quarter-degree grid, coarsened | right (periodic, the seam a neighbour) |
| 1-D longitude with a repeated 0 / 360 column | right (the repeat dropped) |
| latitudes north to south | right |
| rotated pole (rlat, rlon) with 2-D lat / lon, also across the dateline | right |
| MOM6 with xq of nx + 1 (symmetric) and nx | right |
| NEMO mesh mask with only a 3-D tmask | right |
| NEMO positions (0, 0) on eliminated land processors | was wrong (q_geo 36 % off next to land); fixed |
| rotated grid with east / north wind stress (CF eastward / northward names) | was wrong (q_ekman 5-17 % off); fixed |
| a curvilinear grid (scale factors given) stored north to south | was wrong (q_geo, q_ekman of the wrong sign); fixed |
| a global 1-degree grid with a two-column halo (-1 .. 361) | was wrong (meridians read twice, not periodic); fixed |
| the dry run (study_plan) on CESM's end-of-month stamps | was wrong (dated a month late); fixed |
"""

import subprocess
import sys
import warnings
from pathlib import Path

import cftime
import numpy as np
import pandas as pd
import pytest
import xarray as xr

from ocean import training
from ocean.constants import CP0, KAPPA, R_EARTH, RHO0, G
from ocean.data.gridaxes import read_grid
from ocean.data.products import open_store
from ocean.data.timeaxis import read_time, time_axis
from scimech.errors import DataValidationError, DimensionError
from scimech.studies.reading import Reading

sys.path.insert(0, str(Path(__file__).parent))
import product_fixtures as pf  # noqa: E402

RC = RHO0 * CP0
OMEGA = 7.2921e-5


# --- this file's own truths -----------------------------------------------------------------------
def _unwrap_by_hand(lon):
    lon = np.asarray(lon, float).copy()
    for j in range(1, lon.size):
        while lon[j] - lon[j - 1] > 180:
            lon[j] -= 360
        while lon[j] - lon[j - 1] < -180:
            lon[j] += 360
    return lon


def _own_terms(one: xr.Dataset, lat, lon, periodic=False):
    """q_geo, q_ekman, q_diff by centred differences on the sphere (interior points), written out here."""
    T, h, eta, tx, ty = (one[k].values for k in ("sst", "mld", "zos", "tauu", "tauv"))
    lon = _unwrap_by_hand(lon)
    if periodic:  # one wrapped column each side
        wrap = lambda a: np.concatenate([a[..., -1:], a, a[..., :1]], -1)  # noqa: E731
        T, h, eta, tx, ty = map(wrap, (T, h, eta, tx, ty))
        lon = np.r_[lon[-1] - 360, lon, lon[0] + 360]
    phi = np.deg2rad(np.asarray(lat, float))[:, None]
    lam = np.deg2rad(lon)[None, :]
    c = np.cos(phi)

    def dx(F):
        out = np.full(F.shape, np.nan)
        out[..., 1:-1] = (F[..., 2:] - F[..., :-2]) / (R_EARTH * c * (lam[:, 2:] - lam[:, :-2]))
        return out

    def dy(F):
        out = np.full(F.shape, np.nan)
        out[..., 1:-1, :] = (F[..., 2:, :] - F[..., :-2, :]) / (R_EARTH * (phi[2:] - phi[:-2]))
        return out

    f = 2 * OMEGA * np.sin(phi)
    ug, vg = -(G / f) * dy(eta), (G / f) * dx(eta)
    out = {"q_geo": -RC * h * (ug * dx(T) + vg * dy(T)), "q_ekman": -CP0 * (ty * dx(T) - tx * dy(T)) / f}
    fx = 0.5 * (h[..., 1:] + h[..., :-1]) * (T[..., 1:] - T[..., :-1]) / (R_EARTH * c * np.diff(lam, axis=1))
    fy = (
        np.cos(0.5 * (phi[1:] + phi[:-1]))
        * 0.5
        * (h[..., 1:, :] + h[..., :-1, :])
        * (T[..., 1:, :] - T[..., :-1, :])
        / (R_EARTH * np.diff(phi, axis=0))
    )
    div = np.full(T.shape, np.nan)
    div[..., 1:-1, 1:-1] = (fx[..., 1:-1, 1:] - fx[..., 1:-1, :-1]) / (
        R_EARTH * c[1:-1] * 0.5 * (lam[:, 2:] - lam[:, :-2])
    ) + (fy[..., 1:, 1:-1] - fy[..., :-1, 1:-1]) / (R_EARTH * c[1:-1] * 0.5 * (phi[2:] - phi[:-2]))
    out["q_diff"] = RC * KAPPA * div
    return {k: v[..., 1:-1] for k, v in out.items()} if periodic else out


def _assert_terms(out: xr.Dataset, lat, lon, periodic=False, rtol=1e-9):
    """Each term equals this file's differences at the interior points whose 3 x 3 block is ocean (5 degrees
    from the equator); returns how many points were compared."""
    one = out.isel(member=0)
    own = _own_terms(one, lat, lon, periodic)
    m = one["mask"].values.astype(bool)
    ok = m.copy()
    for dy in (-1, 0, 1):
        for dx in (-1, 0, 1):
            ok &= np.roll(np.roll(m, dy, 0), dx, 1)
    ok[[0, -1]] = False
    if not periodic:
        ok[:, [0, -1]] = False
    ok &= np.abs(np.asarray(lat))[:, None] >= 5
    assert ok.sum() >= 4
    for k, v in own.items():
        sel = np.broadcast_to(ok, v.shape)
        got = one[k].values[sel]
        np.testing.assert_allclose(got, v[sel], rtol=0, atol=rtol * np.abs(v[sel]).max(), err_msg=k)
    return int(ok.sum())


@pytest.fixture(scope="module")
def truth():
    return pf.truth(ny=8, nx=10)


# --- time -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("calendar, feb", [("360_day", 30), ("noleap", 28), ("julian", 29)])
def test_cmip6_omon_mid_month_stamps_in_model_calendars(tmp_path, truth, calendar, feb):
    # CMIP6 Omon: time at the middle of time_bnds; 1900 is a leap year in the Julian calendar only
    ds = pf.cmip6(truth, calendar=calendar, with_3d=False)
    mid, bnds = pf.month_times(ds.sizes["time"], calendar, start="1900-01")
    ds = ds.assign_coords(time=("time", mid, ds["time"].attrs))
    ds["time_bnds"] = (("time", "bnds"), bnds)
    ds["time"].encoding.update(units="days since 1850-01-01", calendar=calendar)
    path = pf.write_netcdf(ds, tmp_path / f"tos_Omon_{calendar}.nc")
    raw = xr.open_dataset(path, decode_times=False)["time"]
    reading = Reading("")
    out = open_store(path, validate_schema=False, reading=reading)
    dates = cftime.num2date(raw.values, raw.attrs["units"], calendar=calendar)
    assert list(out["time"].values) == list(dates)
    t = reading.sections["time"]
    assert (t["calendar"], t["step"], t["gaps"]) == (calendar, "1 month", "none")
    assert "mid-month" in t["frequency"] and "stamps" not in t  # mid-points are kept as they are
    # the tendency: a three-point derivative on cftime's own seconds, hand-written for uneven steps
    s = np.asarray(cftime.date2num(dates, "seconds since 1850-01-01", calendar=calendar), float)
    jan = 30 if calendar == "360_day" else 31
    assert s[1] - s[0] == 0.5 * (jan + feb) * 86400  # January's middle to February's, by hand
    x = out["mlhc"].isel(member=0).values
    a, b = (s[1:-1] - s[:-2])[:, None, None], (s[2:] - s[1:-1])[:, None, None]
    own = (a**2 * x[2:] + (b**2 - a**2) * x[1:-1] - b**2 * x[:-2]) / (a * b * (a + b))
    got = out["dmlhc_dt"].isel(member=0).values[1:-1]
    np.testing.assert_allclose(got[np.isfinite(own)], own[np.isfinite(own)], rtol=1e-9)


def test_oras5_time_counter_in_seconds_since_1900(tmp_path, truth):
    path = pf.write_netcdf(pf.oras5(truth, with_3d=False), tmp_path / "oras5_1m.nc")
    raw = xr.open_dataset(path, decode_times=False)["time_counter"]
    assert raw.attrs["units"].startswith("seconds since 1900-01-01")
    reading = Reading("")
    out = open_store(path, validate_schema=False, reading=reading)
    truth_dates = cftime.num2date(
        raw.values,
        raw.attrs["units"],
        calendar="gregorian",
        only_use_cftime_datetimes=False,
        only_use_python_datetimes=True,
    )
    assert [pd.Timestamp(t) for t in out["time"].values] == [pd.Timestamp(t) for t in truth_dates]
    assert reading.sections["time"]["coordinate"] == "time_counter"
    assert reading.sections["time"]["first"] == "2000-01-01"


def test_cmems_daily_two_years_with_one_day_missing_is_refused_naming_it(tmp_path):
    days = pd.date_range("1993-01-01", periods=730, freq="D").delete(400)
    hours = (days - pd.Timestamp("1950-01-01")).total_seconds().values / 3600
    ds = xr.Dataset(
        {"zos": ("time", np.zeros(729), {"units": "m"})},
        coords={"time": ("time", hours, {"units": "hours since 1950-01-01", "calendar": "gregorian"})},
    )
    with pytest.raises(DataValidationError) as err:
        read_time(ds)
    # by hand: 1 January 1993 + 400 days = 5 February 1994 (1993 has 365 days, then 31 of January 1994)
    missing = (pd.Timestamp("1993-01-01") + pd.Timedelta(days=400)).strftime("%Y-%m-%d")
    assert missing == "1994-02-05"
    msg = str(err.value)
    assert f"gap: {missing} is missing" in msg and "1 missing step(s)" in msg and "Fix: " in msg and "\n" not in msg


def test_a_duplicated_month_is_refused_naming_it():
    t = pd.date_range("2000-01-01", periods=24, freq="MS")
    t = t.insert(6, t[5])  # June 2000 twice, as a concatenation of overlapping downloads leaves it
    ds = xr.Dataset({"sst": ("time", np.zeros(25), {"units": "degC"})}, coords={"time": t})
    with pytest.raises(DataValidationError, match=r"repeated stamp: 2000-06-01 then 2000-06-01.*drop_duplicates"):
        read_time(ds)
    assert time_axis(ds.drop_duplicates("time")).n == 24  # the fix it names works


def test_pentad_product_climatology_has_one_phase_per_pentad_of_the_year():
    # 12 years of continuous 5-day means (as GODAS pentads): the stamps fall a day later in the year after
    # each leap year, so a phase by day of year found none of the test years' days in the training years
    t = pd.date_range("1990-01-01", periods=73 * 12, freq="5D")
    rng = np.random.default_rng(0)
    y = xr.DataArray(rng.normal(size=(1, t.size)), dims=("member", "time"), coords={"time": t})
    ax = time_axis(y.to_dataset(name="y"))
    assert (ax.unit, ax.size, ax.words(1)) == ("day", 5, "5 days")
    n = t.size
    train, test = np.arange(int(0.7 * n)), np.arange(int(0.8 * n), n)
    clim = training._climatology(y, train, test)
    # by hand: the phase is the pentad of the year that holds the day (29 February with 28 February)
    doy = t.dayofyear.values - 1 - ((t.is_leap_year) & (t.dayofyear > 59)).astype(int)
    pentad = doy // 5
    assert pentad.max() == 72
    own = pd.Series(y.values[0, train]).groupby(pentad[train]).mean()
    np.testing.assert_allclose(clim, own.loc[pentad[test]].values, rtol=1e-12)


def test_days_since_year_one_decoded_as_cftime_decodes_it_without_warnings():
    days = np.array([14.0, 45.0, 73.0, 104.0, 134.0])  # the 15th of January .. May of year 1
    ds = xr.Dataset(
        {"sst": ("time", np.zeros(5), {"units": "degC"})},
        coords={"time": ("time", days, {"units": "days since 0001-01-01", "calendar": "standard"})},
    )
    reading = Reading("")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = read_time(ds, reading)
    assert list(out["time"].values) == list(cftime.num2date(days, "days since 0001-01-01", calendar="standard"))
    assert reading.sections["time"]["first"] == "0001-01-15" and reading.sections["time"]["step"] == "1 month"


def test_int64_months_since_in_a_360_day_calendar_is_read():
    ds = xr.Dataset(
        {"sst": ("time", np.zeros(24), {"units": "degC"})},
        coords={
            "time": ("time", np.arange(24, dtype=np.int64), {"units": "months since 1990-01-01", "calendar": "360_day"})
        },
    )
    out = read_time(ds)
    assert list(out["time"].values) == list(cftime.num2date(np.arange(24), "months since 1990-01-01", "360_day"))
    assert time_axis(out).words(6) == "6 months"


@pytest.mark.parametrize("calendar", ["standard", "noleap"])
def test_months_since_in_a_real_calendar_is_refused_with_a_fix_that_works(calendar):
    ds = xr.Dataset(
        {"sst": ("time", np.zeros(24), {"units": "degC"})},
        coords={
            "time": ("time", np.arange(24, dtype=np.int64), {"units": "months since 1990-01-01", "calendar": calendar})
        },
    )
    with pytest.raises(DataValidationError, match="only in the 360_day calendar") as err:
        read_time(ds)
    msg = str(err.value)
    assert "\n" not in msg and "Fix: " in msg
    fix = msg.split("e.g. ")[1].split(", or re-encode")[0]
    exec(fix, {"xr": xr}, {"ds": ds})  # the fix as written runs and gives dates read_time accepts
    assert time_axis(ds).words(1) == "1 month"
    assert ds["time"].values[0] == cftime.datetime(1990, 1, 1, calendar=calendar)


def _pop_stamped_at_month_ends(truth, folder) -> Path:
    """A CESM POP history file as CESM writes it: each month's mean stamped at the end of its time_bound."""
    ds = pf.cesm_pop(truth)
    ds = ds.assign_coords(time=("time", ds["time_bound"].values[:, 1], ds["time"].attrs))
    ds["time"].encoding.update(units="days since 0001-01-01 00:00:00", calendar="noleap")
    ds.to_netcdf(folder / "pop.h.nc")
    return folder / "pop.h.nc"


def test_cesm_month_means_stamped_at_the_month_end_are_dated_by_their_month(tmp_path, truth):
    # CESM history files: the January mean is stamped 1 February 00:00, its time_bound January's first and
    # last instants; read as stamped, every month was one month late (its climatology, its heatwave season)
    path = _pop_stamped_at_month_ends(truth, tmp_path)
    raw = xr.open_dataset(path)
    assert raw["time"].dt.month.values[0] == 2  # as stamped
    reading = Reading("")
    out = open_store(path, validate_schema=False, reading=reading)
    # by hand: the middle of January in noleap is 16 January 12:00, of February 15 February 00:00
    assert out["time"].values[0] == cftime.DatetimeNoLeap(2000, 1, 16, 12)
    assert out["time"].values[1] == cftime.DatetimeNoLeap(2000, 2, 15, 0)
    assert list(out["time"].dt.month.values[:13]) == [*range(1, 13), 1]
    assert (
        "time_bound" in reading.sections["time"]["stamps"]
        and reading.sections["time"]["first"] == "2000-01-16T12:00:00"
    )
    # the tendency uses the months' own lengths between the middles (hand count: 31/2 + 28/2 days)
    s = cftime.date2num(out["time"].values, "seconds since 2000-01-01", calendar="noleap")
    assert s[1] - s[0] == 29.5 * 86400


def test_inspect_says_the_cesm_stamps_were_moved(tmp_path, truth):
    path = _pop_stamped_at_month_ends(truth, tmp_path)
    scimech = Path(sys.executable).with_name("scimech")
    res = subprocess.run([str(scimech), "ocean", "inspect", str(path)], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "first: 2000-01-16T12:00:00" in res.stdout and "stamps: at the end of each period" in res.stdout


# --- grid -----------------------------------------------------------------------------------------
LAT = np.linspace(15.0, 50.0, 8)


def _on(truth, lat, lon, *, ascending=True) -> xr.Dataset:
    ds = pf.cmip6(truth, calendar="noleap", with_3d=False)
    if not ascending:
        ds = ds.isel(lat=slice(None, None, -1))
    return ds.assign_coords(lat=("lat", lat, ds["lat"].attrs), lon=("lon", lon, ds["lon"].attrs))


def test_regional_box_across_the_dateline_on_minus_180_180(tmp_path, truth):
    lon = np.linspace(120.0, 260.0, 10)
    lon = np.where(lon > 180, lon - 360, lon)  # 120 .. 180, -164.4 .. -100
    reading = Reading("")
    out = open_store(
        pf.write_netcdf(_on(truth, LAT, lon), tmp_path / "pacific.nc"), validate_schema=False, reading=reading
    )
    assert np.all(np.diff(out["lon"].values) > 0) and out["lon"].attrs["periodic"] == 0
    assert "dateline" in reading.sections["grid"]["longitude"]
    _assert_terms(out, LAT, lon)


def test_latitudes_north_to_south(tmp_path, truth):
    lon = np.linspace(200.0, 250.0, 10)
    out = open_store(
        pf.write_netcdf(_on(truth, LAT[::-1], lon, ascending=False), tmp_path / "ns.nc"), validate_schema=False
    )
    assert out["lat"].values[0] == 50.0
    _assert_terms(out, LAT[::-1], lon)


def test_a_quarter_degree_global_grid_coarsened_is_periodic_with_the_seam_a_neighbour():
    # 0..359.75 every 0.25 degrees, every 10th column kept (2.5 degrees): the analytic gradient of
    # T = cos(lat) cos(lon) + 0.3 sin(2 lat) sin(lon) at every column, the first and last included
    lon = np.arange(0.0, 360.0, 0.25)[::10]
    lat = np.arange(-30.0, 31.0, 2.0)
    la, lo = np.meshgrid(np.deg2rad(lat), np.deg2rad(lon), indexing="ij")
    t = np.cos(la) * np.cos(lo) + 0.3 * np.sin(2 * la) * np.sin(lo)
    ds = xr.Dataset(
        {"tos": (("time", "lat", "lon"), t[None], {"units": "degC"})}, coords={"time": [0.0], "lat": lat, "lon": lon}
    )
    out = read_grid(ds)
    assert out["lon"].attrs["periodic"] == 1
    from ocean import concepts

    gx, _ = concepts.gradient(out["tos"].isel(time=0))
    truth_x = (-np.cos(la) * np.sin(lo) + 0.3 * np.sin(2 * la) * np.cos(lo)) / (R_EARTH * np.cos(la))
    # second order: (2.5 degrees)^2 / 6 ~ 3e-4 of the derivative, at the seam as everywhere
    np.testing.assert_allclose(
        gx.values[:, [0, 1, -2, -1]], truth_x[:, [0, 1, -2, -1]], rtol=0, atol=1e-3 * np.abs(truth_x).max()
    )


def test_a_repeated_0_and_360_column_is_dropped_once_and_the_grid_wraps(tmp_path, truth):
    lon = np.linspace(0.0, 360.0, 10)  # 40-degree columns, the last repeating the first
    ds = _on(truth, LAT, lon).copy(deep=True)  # the fixture's arrays are the truth's own: not written into
    for v in ds.data_vars:
        if "lon" in ds[v].dims:
            ds[v][{"lon": -1}] = ds[v][{"lon": 0}]
    out = open_store(pf.write_netcdf(ds, tmp_path / "wrap.nc"), validate_schema=False)
    assert out.sizes["lon"] == 9 and out["lon"].attrs["periodic"] == 1
    _assert_terms(out, LAT, lon[:-1], periodic=True)


def _rotate(rlat, rlon, pole_lat, pole_lon):
    """Geographic (lat, lon) of rotated-pole coordinates: the sphere turned about y by 90 - pole_lat, then about
    the pole axis by pole_lon + 180 (a rotation written here, not the reader's)."""
    p, lam = np.deg2rad(rlat), np.deg2rad(rlon)
    x, y, z = np.cos(p) * np.cos(lam), np.cos(p) * np.sin(lam), np.sin(p)
    th, ph = np.deg2rad(90.0 - pole_lat), np.deg2rad(pole_lon + 180.0)
    x2, z2 = x * np.cos(th) + z * np.sin(th), -x * np.sin(th) + z * np.cos(th)
    x3, y3 = x2 * np.cos(ph) - y * np.sin(ph), x2 * np.sin(ph) + y * np.cos(ph)
    return np.rad2deg(np.arcsin(np.clip(z2, -1, 1))), np.rad2deg(np.arctan2(y3, x3))


@pytest.mark.parametrize("pole_lon", [-162.0, 0.0], ids=["europe", "across-the-dateline"])
def test_rotated_pole_grid_gradient_along_its_own_lines(pole_lon):
    # a CORDEX-like file: rlat / rlon dims, 2-D lat / lon, a rotated_pole grid mapping
    rlat, rlon = np.arange(-10.0, 10.1, 0.5), np.arange(-15.0, 15.1, 0.5)
    RL, RO = np.meshgrid(rlat, rlon, indexing="ij")
    lat, lon = _rotate(RL, RO, 39.25, pole_lon)

    def temp(la, lo):
        la, lo = np.deg2rad(la), np.deg2rad(lo)
        return np.cos(la) * np.cos(lo) + 0.3 * np.sin(2 * la) * np.sin(lo)

    ds = xr.Dataset(
        {
            "tos": (("time", "rlat", "rlon"), temp(lat, lon)[None], {"units": "degC", "grid_mapping": "rotated_pole"}),
            "rotated_pole": (
                (),
                0,
                {
                    "grid_mapping_name": "rotated_latitude_longitude",
                    "grid_north_pole_latitude": 39.25,
                    "grid_north_pole_longitude": pole_lon,
                },
            ),
        },
        coords={
            "time": [0.0],
            "rlat": ("rlat", rlat, {"standard_name": "grid_latitude", "units": "degrees"}),
            "rlon": ("rlon", rlon, {"standard_name": "grid_longitude", "units": "degrees"}),
            "lat": (("rlat", "rlon"), lat, {"standard_name": "latitude", "units": "degrees_north"}),
            "lon": (("rlat", "rlon"), lon, {"standard_name": "longitude", "units": "degrees_east"}),
        },
    )
    reading = Reading("")
    out = read_grid(ds, reading)
    assert reading.sections["grid"]["type"].startswith("curvilinear")
    from ocean import concepts

    gi, gj = concepts.gradient(out["tos"].isel(time=0))
    # truth: the directional derivative along the rlon (i) and rlat (j) lines, by a 1e-5-degree step of
    # this file's rotation over the haversine distance
    eps = 1e-5

    def along(dla, dlo):
        la1, lo1 = _rotate(RL - dla, RO - dlo, 39.25, pole_lon)
        la2, lo2 = _rotate(RL + dla, RO + dlo, 39.25, pole_lon)
        p1, p2 = np.deg2rad(la1), np.deg2rad(la2)
        hav = np.sin((p2 - p1) / 2) ** 2 + np.cos(p1) * np.cos(p2) * np.sin(np.deg2rad(lo2 - lo1) / 2) ** 2
        return (temp(la2, lo2) - temp(la1, lo1)) / (2 * R_EARTH * np.arcsin(np.sqrt(hav)))

    inner = (slice(1, -1), slice(1, -1))
    for got, want in ((gi, along(0, eps)), (gj, along(eps, 0))):
        # second order at 0.5 degrees: (dlambda^2 / 6) ~ 1e-4 of the derivative
        np.testing.assert_allclose(got.values[inner], want[inner], rtol=0, atol=2e-4 * np.abs(want).max())


@pytest.mark.parametrize("symmetric", [False, True], ids=["xq-nx", "xq-nx+1"])
def test_mom6_currents_on_xq_of_nx_or_nx_plus_one(tmp_path, truth, symmetric):
    ds = pf.mom6(truth)
    if symmetric:  # symmetric memory: one more face, the first on the west (south) edge
        xq, yq = ds["xq"].values, ds["yq"].values
        xq = np.r_[2 * xq[0] - xq[1], xq]
        yq = np.r_[2 * yq[0] - yq[1], yq]
        one = truth.isel(member=0)
        u, _ = pf.currents(one["lat"].values, xq, one.sizes["time"])
        _, v = pf.currents(yq, one["lon"].values, one.sizes["time"])
        nz = ds.sizes["z_l"]
        new = ds.drop_vars(["uo", "vo", "taux", "tauy", "xq", "yq"])
        new["uo"] = (("time", "z_l", "yh", "xq"), np.repeat(u[:, None], nz, 1), ds["uo"].attrs)
        new["vo"] = (("time", "z_l", "yq", "xh"), np.repeat(v[:, None], nz, 1), ds["vo"].attrs)
        new["taux"] = (
            ("time", "yh", "xq"),
            np.concatenate([ds["taux"].values[..., :1], ds["taux"].values], -1),
            ds["taux"].attrs,
        )
        new["tauy"] = (
            ("time", "yq", "xh"),
            np.concatenate([ds["tauy"].values[:, :1], ds["tauy"].values], 1),
            ds["tauy"].attrs,
        )
        ds = new.assign_coords(xq=("xq", xq, ds["xq"].attrs), yq=("yq", yq, ds["yq"].attrs))
    assert ds.sizes["xq"] == ds.sizes["xh"] + int(symmetric)
    reading = Reading("")
    out = open_store(pf.write_netcdf(ds, tmp_path / "ocean_month.nc"), validate_schema=False, reading=reading)
    # the currents are linear in lat and lon: the mean of two faces is the value at the T point between them
    u_t, v_t = pf.currents(out["lat"].values, out["lon"].values, out.sizes["time"])
    m = out["mask"].values.astype(bool)
    np.testing.assert_allclose(out["u_ml"].isel(member=0).values[:, m], u_t[:, m], atol=1e-12)
    np.testing.assert_allclose(out["v_ml"].isel(member=0).values[:, m], v_t[:, m], atol=1e-12)
    assert ("outer" if symmetric else "right") in reading.sections["grid"]["staggered"]


def test_nemo_mesh_mask_with_only_a_3d_tmask(tmp_path, truth):
    bottom = np.full((8, 10), 5)
    bottom[2, 4] = 0  # a column dry from the surface: land in the mesh mask, whatever the product holds
    mm = pf.mesh_mask(truth, bottom=bottom).drop_vars("tmaskutil")
    mm.to_netcdf(tmp_path / "mesh_mask.nc")
    reading = Reading("")
    out = open_store(
        pf.write_netcdf(pf.oras5(truth), tmp_path / "oras5.nc"),
        validate_schema=False,
        mesh_mask=tmp_path / "mesh_mask.nc",
        reading=reading,
    )
    want = truth["mask"].values.astype(bool) & (bottom > 0)  # by hand: the surface level's wet columns
    np.testing.assert_array_equal(out["mask"].values.astype(bool), want)
    assert reading.sections["mask"]["ocean cells"] == str(int(want.sum()))
    assert "3-D tmask" in reading.sections["mask"]["from"]


def _assert_curvilinear_terms(one: xr.Dataset, lat, lon) -> None:
    """The terms of a regular grid read as curvilinear against this file's differences at interior points
    with four ocean neighbours: float32 positions (1e-6), face factors the mean of two T points' (q_diff,
    O(dlat^2), 1e-3)."""
    own = _own_terms(one, lat, lon)
    m = one["mask"].values.astype(bool)
    ok = m & np.roll(m, 1, 1) & np.roll(m, -1, 1) & np.roll(m, 1, 0) & np.roll(m, -1, 0)
    ok[[0, -1]] = ok[:, [0, -1]] = False
    for k, tol in (("q_geo", 1e-6), ("q_ekman", 1e-6), ("q_diff", 1e-3)):
        sel = np.broadcast_to(ok, own[k].shape)
        np.testing.assert_allclose(one[k].values[sel], own[k][sel], rtol=0, atol=tol * np.abs(own[k][sel]).max())


def _zeroed(truth, where):
    ds = pf.oras5(truth, with_3d=True)
    la, lo = ds["nav_lat"].values.copy(), ds["nav_lon"].values.copy()
    la[where], lo[where] = 0.0, 0.0  # NEMO's eliminated land processors
    return ds.assign_coords(
        nav_lat=(("y", "x"), la, ds["nav_lat"].attrs), nav_lon=(("y", "x"), lo, ds["nav_lon"].attrs)
    )


def test_nemo_positions_zeroed_on_land_are_mended_from_the_mesh_mask(tmp_path, truth):
    land = ~truth["mask"].values.astype(bool)
    mm = pf.mesh_mask(truth)
    mm["glamt"] = (("t", "y", "x"), mm["nav_lon"].values[None].astype(float))
    mm["gphit"] = (("t", "y", "x"), mm["nav_lat"].values[None].astype(float))
    mm.to_netcdf(tmp_path / "mesh_mask.nc")
    reading = Reading("")
    out = open_store(
        pf.write_netcdf(_zeroed(truth, land), tmp_path / "oras5.nc"),
        validate_schema=False,
        mesh_mask=tmp_path / "mesh_mask.nc",
        reading=reading,
    )
    assert "from the mesh mask's gphit, glamt" in reading.sections["grid"]["positions"]
    np.testing.assert_allclose(out["nav_lat"].values[land], mm["gphit"].values[0][land])
    # q_geo read 36 % off next to the zeroed points (half the great-circle distance to (0, 0) as a spacing);
    # the mesh mask's e1t / e2t, float32 positions and face factors as the mean of two T points' (O(dlat^2))
    _assert_curvilinear_terms(out.isel(member=0), truth["lat"].values, truth["lon"].values)


def test_nemo_positions_zeroed_inside_a_regular_grid_are_mended_from_its_rows_and_columns(tmp_path, truth):
    where = ~truth["mask"].values.astype(bool)
    where[:, :2] = False  # the island's two points; every row and column keeps a position
    reading = Reading("")
    out = open_store(
        pf.write_netcdf(_zeroed(truth, where), tmp_path / "oras5.nc"), validate_schema=False, reading=reading
    )
    assert reading.sections["grid"]["type"].startswith("regular")
    assert reading.sections["grid"]["positions"].startswith("2 point(s)")
    _assert_terms(out, truth["lat"].values, truth["lon"].values, rtol=1e-6)  # float32 positions


def test_nemo_positions_zeroed_without_a_mesh_mask_are_refused(tmp_path, truth):
    land = ~truth["mask"].values.astype(bool)  # whole columns zeroed: no row / column gives them back
    with pytest.raises(DimensionError, match=r"18 point\(s\) .*\(0, 0\).*Fix: give the grid's mesh mask") as err:
        open_store(pf.write_netcdf(_zeroed(truth, land), tmp_path / "oras5.nc"), validate_schema=False)
    assert "\n" not in str(err.value)


def test_a_true_grid_point_at_0_0_is_kept():
    # a global 1-degree grid with centres on whole degrees has a point at (0, 0): its neighbours are a degree away
    lat, lon = np.arange(-3.0, 4.0), np.arange(-4.0, 5.0)
    la, lo = np.meshgrid(lat, lon, indexing="ij")
    ds = xr.Dataset(
        {"tos": (("time", "y", "x"), np.ones((1, *la.shape)), {"units": "degC"})},
        coords={"time": [0.0], "nav_lat": (("y", "x"), la), "nav_lon": (("y", "x"), lo)},
    )
    reading = Reading("")
    out = read_grid(ds, reading)
    assert "positions" not in reading.sections["grid"]
    np.testing.assert_array_equal(out["lat"].values, lat)
    np.testing.assert_array_equal(out["lon"].values, lon)


def test_a_mesh_mask_beside_1d_positions_leaves_no_positions_of_its_own_behind(truth):
    # CMEMS-like 1-D latitude / longitude with a mesh mask that has glamt / gphit: read as before, nothing added
    ds = pf.cmems(truth.isel(lat=slice(0, 6), lon=slice(0, 8)))
    mm = pf.mesh_mask(truth.isel(lat=slice(0, 6), lon=slice(0, 8)))
    mm["glamt"] = (("t", "y", "x"), mm["nav_lon"].values[None].astype(float))
    mm["gphit"] = (("t", "y", "x"), mm["nav_lat"].values[None].astype(float))
    out = read_grid(ds, mesh_mask=mm)
    assert sorted(map(str, out.coords)) == ["depth", "lat", "lon", "time"]
    np.testing.assert_array_equal(out["e1t"].values, mm["e1t"].values[0])


def _rotated_product(pole_lon: float, stress_names: tuple[str, str], *, north_to_south: bool = False) -> xr.Dataset:
    """A CORDEX-like CMIP-named product on a rotated-pole grid: analytic T, sea level and wind stress
    (east / north components by physics), 3 months, constant mixed layer."""
    rlat, rlon = np.arange(20.0, 36.1, 0.5), np.arange(20.0, 36.1, 0.5)
    RL, RO = np.meshgrid(rlat, rlon, indexing="ij")
    lat, lon = _rotate(RL, RO, 20.0, pole_lon)  # the i axis 22..43 degrees from east
    fields = _rotated_fields(lat, lon)
    time = xr.date_range("2000-01-01", periods=3, freq="MS", calendar="360_day", use_cftime=True)
    dims = ("time", "rlat", "rlon")
    three = lambda a: np.repeat(a[None], 3, 0)  # noqa: E731
    ds = xr.Dataset(
        {
            "tos": (dims, three(fields["t"]), {"standard_name": "sea_surface_temperature", "units": "degC"}),
            "zos": (dims, three(fields["eta"]), {"standard_name": "sea_surface_height_above_geoid", "units": "m"}),
            "mlotst": (
                dims,
                np.full((3, *lat.shape), 40.0),
                {"standard_name": "ocean_mixed_layer_thickness_defined_by_sigma_t", "units": "m"},
            ),
            "tauuo": (dims, three(fields["tau_e"]), {"standard_name": stress_names[0], "units": "N m-2"}),
            "tauvo": (dims, three(fields["tau_n"]), {"standard_name": stress_names[1], "units": "N m-2"}),
        },
        coords={
            "time": time,
            "rlat": ("rlat", rlat, {"standard_name": "grid_latitude", "units": "degrees"}),
            "rlon": ("rlon", rlon, {"standard_name": "grid_longitude", "units": "degrees"}),
            "lat": (("rlat", "rlon"), lat, {"standard_name": "latitude", "units": "degrees_north"}),
            "lon": (("rlat", "rlon"), lon, {"standard_name": "longitude", "units": "degrees_east"}),
        },
    )
    return ds.isel(rlat=slice(None, None, -1)) if north_to_south else ds


def _rotated_fields(lat, lon) -> dict:
    """T, sea level, an east / north wind stress and T's east / north gradient (per metre), analytic."""
    la, lo = np.deg2rad(lat), np.deg2rad(lon)
    t = 15 + 5 * (np.cos(la) * np.cos(lo) + 0.3 * np.sin(2 * la) * np.sin(lo))
    dt_e = 5 * (-np.cos(la) * np.sin(lo) + 0.3 * np.sin(2 * la) * np.cos(lo)) / (R_EARTH * np.cos(la))
    dt_n = 5 * (-np.sin(la) * np.cos(lo) + 0.6 * np.cos(2 * la) * np.sin(lo)) / R_EARTH
    return {
        "t": t,
        "eta": 0.0 * t,
        "tau_e": 0.1 * np.cos(la),
        "tau_n": 0.05 + 0.05 * np.sin(lo),
        "dt_e": dt_e,
        "dt_n": dt_n,
    }


@pytest.mark.parametrize("north_to_south", [False, True], ids=["rows-south-to-north", "rows-north-to-south"])
@pytest.mark.parametrize("pole_lon", [-162.0, -31.0], ids=["indian-ocean", "across-the-dateline"])
def test_eastward_northward_stress_on_a_rotated_grid_gives_the_geographic_ekman_term(
    tmp_path, pole_lon, north_to_south
):
    # the operators work along the grid's i / j axes: east / north stresses used as grid components were
    # off by the grid's turn from east (here 22-43 degrees: q_ekman 5-17 % off); rows north to south flipped the cross product's sign
    ds = _rotated_product(
        pole_lon,
        ("surface_downward_eastward_stress", "surface_downward_northward_stress"),
        north_to_south=north_to_south,
    )
    reading = Reading("")
    out = open_store(pf.write_netcdf(ds, tmp_path / "cordex.nc"), validate_schema=False, reading=reading)
    assert "turned to the grid's i / j axes" in reading.sections["grid"]["vectors"]
    one = out.isel(member=0, time=1)
    f = _rotated_fields(one["nav_lat"].values, one["nav_lon"].values)
    # q_ekman = -rho0 cp0 h u_ek . grad T, u_ek = (tau_n, -tau_e) / (rho0 f h), all east / north, analytic
    fc = 2 * OMEGA * np.sin(np.deg2rad(one["nav_lat"].values))
    want = -CP0 * (f["tau_n"] * f["dt_e"] - f["tau_e"] * f["dt_n"]) / fc
    inner = (slice(1, -1), slice(1, -1))
    # second order at 0.5 degrees (~1e-4 of the gradient) and the grid's angles from centred differences
    np.testing.assert_allclose(one["q_ekman"].values[inner], want[inner], rtol=0, atol=1e-3 * np.abs(want).max())


def test_stress_along_the_grid_is_not_turned(tmp_path):
    ds = _rotated_product(-162.0, ("surface_downward_x_stress", "surface_downward_y_stress"))
    reading = Reading("")
    out = open_store(pf.write_netcdf(ds, tmp_path / "cordex_xy.nc"), validate_schema=False, reading=reading)
    assert "vectors" not in reading.sections["grid"]
    np.testing.assert_array_equal(out["tauu"].isel(member=0).values, ds["tauuo"].values)


def test_an_eastward_stress_without_its_northward_partner_is_refused(tmp_path):
    ds = _rotated_product(-162.0, ("surface_downward_eastward_stress", "surface_downward_y_stress"))
    with pytest.raises(DimensionError, match=r"one 'surface_downward_eastward_stress' and one .*Fix: give both") as err:
        open_store(pf.write_netcdf(ds, tmp_path / "cordex_half.nc"), validate_schema=False)
    assert "\n" not in str(err.value)


def test_a_curvilinear_grid_stored_north_to_south_keeps_the_geostrophic_sign(tmp_path, truth):
    # an ORAS5-like regular grid given with its scale factors (read as curvilinear), rows north to south:
    # q_geo and q_ekman came out with the wrong sign (200 % off): the grid's i, j were left-handed
    lat, lon = truth["lat"].values, truth["lon"].values
    la2 = np.meshgrid(lat, lon, indexing="ij")[0]
    ds = pf.oras5(truth, with_3d=True)
    ds["e1t"] = (("y", "x"), R_EARTH * np.cos(np.deg2rad(la2)) * np.deg2rad(np.diff(lon).mean()), {"units": "m"})
    ds["e2t"] = (("y", "x"), np.full(la2.shape, R_EARTH * np.deg2rad(np.diff(lat).mean())), {"units": "m"})
    reading = Reading("")
    out = open_store(
        pf.write_netcdf(ds.isel(y=slice(None, None, -1)), tmp_path / "oras5_ns.nc"),
        validate_schema=False,
        reading=reading,
    )
    assert "reversed" in reading.sections["grid"]["j axis"]
    assert out["nav_lat"].values[0, 0] < out["nav_lat"].values[-1, 0]
    # float32 nav_lat; face factors the mean of two T points' (O(dlat^2) in q_diff)
    one = out.isel(member=0)
    _assert_curvilinear_terms(one, one["nav_lat"].values[:, 0].astype(float), lon)


def test_the_dry_run_dates_cesm_month_ends_as_the_study_does(tmp_path, truth):
    from ocean.plan import StudyConfig, study_plan

    path = _pop_stamped_at_month_ends(truth, tmp_path)
    # 36 months: too short for the default split, refused before any work, dated by the months averaged
    with pytest.raises(DataValidationError, match=r"record is 36 months \(36 steps, 2000-01-16T12:00:00\.\."):
        study_plan(StudyConfig(data=str(path)), tmp_path / "run")


def test_a_global_grid_with_a_two_column_halo_reads_each_longitude_once_and_wraps():
    # a 1-degree global grid written with a halo column each side (-1 .. 361, 363 columns): -1 and 359,
    # 0 and 360, 1 and 361 are the same meridians; read once each, periodic, the analytic gradient at every column
    lon = np.arange(-1.0, 361.5, 1.0)
    lat = np.arange(-20.0, 21.0, 2.0)
    la, lo = np.meshgrid(np.deg2rad(lat), np.deg2rad(lon), indexing="ij")
    ds = xr.Dataset(
        {"tos": (("time", "lat", "lon"), (np.cos(la) * np.cos(lo))[None], {"units": "degC"})},
        coords={"time": [0.0], "lat": lat, "lon": lon},
    )
    out = read_grid(ds)
    assert out.sizes["lon"] == 360 and out["lon"].attrs["periodic"] == 1
    from ocean import concepts

    gx, _ = concepts.gradient(out["tos"].isel(time=0))
    la, lo = np.meshgrid(np.deg2rad(lat), np.deg2rad(out["lon"].values), indexing="ij")
    truth_x = -np.sin(lo) / R_EARTH
    np.testing.assert_allclose(gx.values, truth_x, rtol=0, atol=1e-4 * np.abs(truth_x).max())


def test_a_file_with_months_since_in_a_real_calendar_is_refused_by_cf_rule_not_as_unreadable(tmp_path):
    """xarray cannot decode it on open; the reader opens the time raw and refuses it by CF's rule."""
    from ocean.data.products import open_store

    ds = xr.Dataset(
        {"sst": (("time", "lat", "lon"), np.zeros((24, 2, 3)), {"units": "degC"})},
        coords={
            "time": (
                "time",
                np.arange(24, dtype=np.int64),
                {"units": "months since 1990-01-01", "calendar": "standard"},
            ),
            "lat": ("lat", [0.0, 1.0]),
            "lon": ("lon", [0.0, 1.0, 2.0]),
        },
    )
    path = tmp_path / "months.nc"
    ds.to_netcdf(path)
    with pytest.raises(DataValidationError, match="only in the 360_day calendar") as err:
        open_store(path)
    assert "truncated" not in str(err.value)

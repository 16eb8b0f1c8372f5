"""Monthly means stamped at the start of their month, read with their CF bounds (``time_bnds``).

CF (section 7.1, "Cell boundaries"): the time coordinate's ``bounds`` attribute names the variable holding
each value's interval; a mean over a month has its month's first and last instants there, wherever the
product puts the stamp. A centred tendency of period means spans the periods' mid-points; months are
uneven (31, 28, 31, ... days), so the steps between month starts are not those between month middles, and
differencing at the stamps put ``dmlhc_dt`` 3 % off. The independent truth is the three-point centred
difference written out here at the true mid-points of the bounds (the formula for uneven steps: Fornberg
1988, as ``numpy.gradient`` documents it), in each calendar's own month lengths (cftime).
"""

import numpy as np
import pytest
import xarray as xr

from ocean.constants import CP0, RHO0
from ocean.data import open_store
from scimech.studies.reading import Reading

LAT = np.arange(20.0, 36.0, 4.0)
LON = np.arange(200.0, 216.0, 4.0)
NT = 14
H = 50.0  # m, a constant mixed layer: the heat content follows the temperature


def _product(calendar: str, stamp: str, cell_methods: str = "area: mean time: mean") -> xr.Dataset:
    """Monthly SST and MLD means, stamped at each month's ``start`` (or ``end``, or ``middle``), with ``time_bnds``."""
    edges = xr.date_range("2001-01-01", periods=NT + 1, freq="MS", calendar=calendar, use_cftime=calendar != "standard")
    left, right = np.asarray(edges[:-1]), np.asarray(edges[1:])
    middle = np.array([a + (b - a) / 2 for a, b in zip(left, right)])
    stamps = {"start": left, "end": right, "middle": middle}[stamp]
    secs = np.array([(m - middle[0]).total_seconds() for m in middle]) if calendar != "standard" else None
    if secs is None:
        secs = (middle - middle[0]) / np.timedelta64(1, "s")
    temp = 15 + 5 * np.sin(2 * np.pi * secs / (365 * 86400.0)) + 1e-7 * secs  # degC at the months' middles
    shape = (NT, LAT.size, LON.size)
    two = ("time", "lat", "lon")
    ds = xr.Dataset(
        {
            "tos": (
                two,
                np.broadcast_to(temp[:, None, None], shape).copy(),
                {"standard_name": "sea_surface_temperature", "units": "degC", "cell_methods": cell_methods},
            ),
            "mlotst": (
                two,
                np.full(shape, H),
                {"standard_name": "ocean_mixed_layer_thickness_defined_by_sigma_t", "units": "m"},
            ),
        },
        coords={
            "time": ("time", stamps, {"standard_name": "time", "axis": "T", "bounds": "time_bnds"}),
            "lat": ("lat", LAT, {"standard_name": "latitude", "units": "degrees_north"}),
            "lon": ("lon", LON, {"standard_name": "longitude", "units": "degrees_east"}),
        },
    )
    ds["time_bnds"] = (("time", "bnds"), np.stack([left, right], axis=1))
    ds["time"].encoding.update(units="days since 2000-01-01", calendar=calendar)
    return ds, temp, secs


def _centred_by_hand(x: np.ndarray, t: np.ndarray) -> np.ndarray:
    """``dx/dt`` at the interior points of uneven ``t``: with ``a`` the step before and ``b`` the step after,
    ``(a^2 x[p+1] + (b^2 - a^2) x[p] - b^2 x[p-1]) / (a b (a + b))``."""
    a, b = np.diff(t)[:-1], np.diff(t)[1:]
    return (a**2 * x[2:] + (b**2 - a**2) * x[1:-1] - b**2 * x[:-2]) / (a * b * (a + b))


@pytest.mark.parametrize("calendar", ["standard", "noleap", "360_day"])
@pytest.mark.parametrize("stamp", ["start", "end"])
def test_the_tendency_of_monthly_means_spans_the_months_middles(tmp_path, calendar, stamp):
    ds, temp, secs = _product(calendar, stamp)
    ds.to_netcdf(tmp_path / "monthly.nc")
    reading = Reading("monthly means")
    out = open_store(tmp_path / "monthly.nc", validate_schema=False, reading=reading)
    got = out["dmlhc_dt"].isel(member=0, lat=1, lon=2).values
    truth = _centred_by_hand(RHO0 * CP0 * H * temp, secs)
    # both are the same three-point formula on the same mid-points: equal to round-off (1e-9 of the largest);
    # at the stamps (starts) they differ by ~3 % of it
    np.testing.assert_allclose(got[1:-1], truth, rtol=0, atol=1e-9 * np.abs(truth).max())
    said = reading.sections["time"]["stamps"]
    assert f"at the {stamp} of each period" in said and "time_bnds" in said and "middle of their bounds" in said


def test_stamps_already_at_the_middle_are_left_as_they_are(tmp_path):
    ds, temp, secs = _product("noleap", "middle")
    ds.to_netcdf(tmp_path / "cmip6_like.nc")
    reading = Reading("monthly means")
    out = open_store(tmp_path / "cmip6_like.nc", validate_schema=False, reading=reading)
    assert "stamps" not in reading.sections["time"]
    np.testing.assert_array_equal(out["time"].values, ds["time"].values)
    truth = _centred_by_hand(RHO0 * CP0 * H * temp, secs)
    np.testing.assert_allclose(out["dmlhc_dt"].isel(member=0, lat=0, lon=0).values[1:-1], truth, rtol=1e-9)


def test_snapshots_with_bounds_keep_their_stamps(tmp_path):
    # cell_methods 'time: point': each value is the instant of its stamp, whatever interval the bounds give
    ds, _, _ = _product("standard", "start", cell_methods="time: point")
    ds.to_netcdf(tmp_path / "snapshots.nc")
    reading = Reading("snapshots")
    out = open_store(tmp_path / "snapshots.nc", validate_schema=False, reading=reading)
    assert "stamps" not in reading.sections["time"]
    np.testing.assert_array_equal(out["time"].values, ds["time"].values)

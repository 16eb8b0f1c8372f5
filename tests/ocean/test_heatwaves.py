"""Hobday marine-heatwave detection finds exactly the planted events (daily and monthly)."""

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from ocean import heatwaves
from scimech.errors import DataValidationError


def _daily(events, years=20, amp=4.0):
    t = pd.date_range("1990-01-01", periods=int(365.25 * years), freq="D")
    doy = np.asarray(t.day_of_year)
    # background: a seasonal cycle plus +/-0.3 alternating day by day, so no two consecutive
    # background days can exceed the threshold and no background run reaches 5 days
    x = 15 + 3 * np.sin(2 * np.pi * doy / 365.25) + 0.3 * np.where(np.arange(len(t)) % 2 == 1, 1.0, -1.0)
    for s, e in events:
        x[s : e + 1] += amp
    return xr.DataArray(x, dims="time", coords={"time": t}, attrs={"units": "degree_Celsius"})


def test_daily_planted_events_found_exactly():
    # starts and ends on odd days, so the neighbours are -0.3 (even) background days, far below threshold
    planted = [(1001, 1011), (3001, 3005), (5001, 5031), (6001, 6003)]  # the last is 3 days: too short
    r = heatwaves.detect(_daily(planted))
    got = list(zip(r["start_index"].values.tolist(), r["end_index"].values.tolist()))
    assert got == planted[:3]
    assert r["duration"].values.tolist() == [11, 5, 31]
    assert r.attrs["min_duration_steps"] == 5 and r.attrs["max_gap_steps"] == 2


def test_daily_gaps_of_two_days_are_joined_three_are_not():
    planted = [(2001, 2007), (2011, 2017), (4001, 4007), (4009, 4015)]
    # gap 2011-2007-1 = 3 days: separate; gap 4009-4007-1 = 1 day: joined
    r = heatwaves.detect(_daily(planted))
    got = list(zip(r["start_index"].values.tolist(), r["end_index"].values.tolist()))
    assert got == [(2001, 2007), (2011, 2017), (4001, 4015)]


def test_monthly_planted_events_found_exactly():
    t = pd.date_range("1980-01-01", periods=40 * 12, freq="MS")
    clim = np.array([3, 2, 1, 0, 1, 3, 6, 8, 9, 8, 6, 4], float)
    x = clim[t.month - 1] + 0.0  # background identical every year: threshold = background
    planted = [(50, 52), (200, 200), (300, 305)]
    for s, e in planted:
        x[s : e + 1] += 2.0
    da = xr.DataArray(x, dims="time", coords={"time": t}, attrs={"units": "J m-2"})
    r = heatwaves.detect(da)
    assert r.attrs["steps_per_year"] == 12 and r.attrs["min_duration_steps"] == 1
    got = list(zip(r["start_index"].values.tolist(), r["end_index"].values.tolist()))
    assert got == planted
    # intensity is relative to the climatological mean, which includes the events: a month
    # of year holding k planted +2 anomalies over 40 years has its mean raised by 2k/40.
    # Mar/Apr/May hold two events (months 50-52 and 302-304); the other planted months one.
    np.testing.assert_allclose(r["intensity_max"].values, [2 - 0.1, 2 - 0.05, 2 - 0.05], rtol=1e-12)
    # joining by an explicit gap in steps
    r2 = heatwaves.detect(da, max_gap_steps=120)  # gaps are 147 and 99 months: only the second joins
    assert r2.sizes["event"] == 2


def test_grid_detection_and_mlhc_vs_sst():
    t = pd.date_range("1980-01-01", periods=30 * 12, freq="MS")
    base = np.tile(np.arange(12.0), 30)
    sst = np.stack([base, base], -1)[:, :, None].repeat(3, -1)  # (time, 2, 3)
    mlhc = sst.copy()
    sst[100:103, 0, 0] += 5
    mlhc[100:104, 0, 0] += 5
    coords = {"time": t, "lat": [0.0, 1.0], "lon": [0.0, 1.0, 2.0]}
    ds = xr.Dataset({"sst": (("time", "lat", "lon"), sst), "mlhc": (("time", "lat", "lon"), mlhc)}, coords=coords)
    c = heatwaves.compare_mlhc_sst(ds)
    assert float(c["jaccard"].sel(lat=0, lon=0)) == pytest.approx(3 / 4)
    assert int(c["n_events_sst"].sel(lat=0, lon=0)) == 1
    assert int(c["n_events_sst"].sel(lat=1, lon=2)) == 0


def test_bad_time_axis():
    from scimech.errors import DataValidationError

    t = pd.to_datetime(["2000-01-03", "2000-01-01", "2000-01-02"])
    with pytest.raises(DataValidationError, match="monotonic"):
        heatwaves.detect(xr.DataArray([1.0, 2, 3], dims="time", coords={"time": t}))


def _noleap_daily(events, years=20, amp=4.0, calendar="noleap"):
    """The background of :func:`_daily` on a model calendar's days (cftime), day of year counted in it."""
    t = xr.date_range(
        "1990-01-01",
        periods=(360 if calendar == "360_day" else 365) * years,
        freq="D",
        calendar=calendar,
        use_cftime=True,
    )
    doy = np.array([d.dayofyr for d in t])
    x = 15 + 3 * np.sin(2 * np.pi * doy / 365.0) + 0.3 * np.where(np.arange(len(t)) % 2 == 1, 1.0, -1.0)
    for s, e in events:
        x[s : e + 1] += amp
    return xr.DataArray(x, dims="time", coords={"time": np.asarray(t)}, attrs={"units": "degree_Celsius"})


@pytest.mark.parametrize("calendar", ["noleap", "360_day", "all_leap"])
def test_daily_planted_events_found_in_model_calendars(calendar):
    # CMIP6 models run in noleap / 360_day calendars: the same planted events as in the Gregorian case
    planted = [(1001, 1011), (3001, 3005), (5001, 5031), (6001, 6003)]
    r = heatwaves.detect(_noleap_daily(planted, calendar=calendar))
    got = list(zip(r["start_index"].values.tolist(), r["end_index"].values.tolist()))
    assert got == planted[:3]
    assert r.attrs["steps_per_year"] == (360 if calendar == "360_day" else 365)


def test_phase_of_year_in_model_calendars():
    # hand counts: 1 March is day 60 of a noleap year (phase 59); day 61 of a leap year in all_leap, where
    # 29 February shares 28 February's phase (58) and 1 March takes phase 59; 360_day: 3 March is day 63
    def phase(date, cal):
        return heatwaves.phase_of_year(
            xr.DataArray(np.asarray(xr.date_range(date, periods=1, calendar=cal, use_cftime=True)), dims="time"), 365
        )[0]

    assert phase("2001-03-01", "noleap") == 59
    assert (phase("2001-02-29", "all_leap"), phase("2001-03-01", "all_leap")) == (58, 59)
    assert phase("2001-03-03", "360_day") == 62


def test_less_than_a_year_of_daily_data_is_refused():
    # 200 days leave 165 days of the year without a climatology (it was silently NaN there: no heatwave
    # could ever be found on those days)
    with pytest.raises(DataValidationError, match=r"165 days of the year without a value.*full year \(365 steps"):
        heatwaves.detect(_daily([], years=200 / 365.25))


def test_a_gap_in_the_series_is_refused():
    # a missing day would join the days either side of it into one run of consecutive steps
    s = _daily([], years=3)
    with pytest.raises(DataValidationError, match=r"gap: 1991-01-01 is missing"):
        heatwaves.detect(s.drop_isel(time=365))
    with pytest.raises(DataValidationError, match="gap"):
        heatwaves.detect_grid(s.drop_isel(time=365).expand_dims(lat=[0.0, 1.0]).transpose("time", "lat"))

"""The time axis of a product read right in every CF calendar and frequency, or refused in one line
naming the fix: calendars, frequencies, gaps, record lengths, one-step chunks (issue 36).

Truths are independent of the code: month lengths counted by hand for each calendar, cftime's own
``num2date``, pandas date ranges, and split sizes worked out by hand from the split's documented rule.
"""

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from cftime import num2date

from ocean import concepts
from ocean.data import samples
from ocean.data.timeaxis import read_time, step_words, time_axis
from ocean.plan import StudyConfig, check_record, study_plan
from scimech.errors import DataValidationError
from scimech.studies.reading import Reading

# days in each month of 1900, counted by hand from each calendar's definition (CF conventions 4.4.1):
# 1900 is a leap year in the Julian calendar only (divisible by 4), not in the Gregorian ones (a
# century not divisible by 400); all_leap has 29 February every year, 360_day has 30-day months
_ORDINARY = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
MONTH_DAYS_1900 = {
    "noleap": _ORDINARY,
    "365_day": _ORDINARY,
    "standard": _ORDINARY,
    "gregorian": _ORDINARY,
    "proleptic_gregorian": _ORDINARY,
    "all_leap": [31, 29, *_ORDINARY[2:]],
    "366_day": [31, 29, *_ORDINARY[2:]],
    "julian": [31, 29, *_ORDINARY[2:]],
    "360_day": [30] * 12,
}


def _months(calendar: str, n: int = 12, start: str = "1900-01-01") -> xr.DataArray:
    """Month-start stamps as cftime objects in ``calendar``."""
    return xr.DataArray(
        np.asarray(xr.date_range(start, periods=n, freq="MS", calendar=calendar, use_cftime=True)),
        dims="time",
        name="time",
    )


def _field(time, values) -> xr.DataArray:
    v = np.asarray(values, float)
    return xr.DataArray(v[:, None] * np.ones((1, 3)), dims=("time", "x"), coords={"time": time})


@pytest.mark.parametrize("calendar", sorted(MONTH_DAYS_1900))
def test_tendency_in_every_calendar_uses_its_own_month_lengths(calendar):
    time = _months(calendar, 12)
    days = np.array(MONTH_DAYS_1900[calendar][:11], float)
    # one unit per month: the forward tendency over month k is 1 / (its length in seconds)
    fwd = concepts.time_tendency(_field(time, np.arange(12)), scheme="forward")
    np.testing.assert_allclose(fwd.values[:-1, 0], 1.0 / (days * 86400.0), rtol=1e-12)
    # a field equal to the seconds elapsed (hand-counted): its tendency is exactly 1 s/s, centred or forward
    secs = np.concatenate([[0.0], np.cumsum(days) * 86400.0])
    cen = concepts.time_tendency(_field(time, secs), scheme="centred")
    np.testing.assert_allclose(cen.values, 1.0, rtol=1e-12)


def test_cf_times_decoded_as_cftime_decodes_them():
    # a CMIP6-like file opened with decode_times=False: numbers of days since 1850-01-01 in noleap
    days = np.array([15.5, 45.0, 74.5, 105.0, 135.5])
    ds = xr.Dataset(
        {"tos": ("time", np.arange(5.0))},
        coords={"time": ("time", days, {"units": "days since 1850-01-01", "calendar": "noleap"})},
    )
    r = Reading("CMIP6-like")
    out = read_time(ds, r)
    truth = num2date(days, "days since 1850-01-01", calendar="noleap")
    assert list(out["time"].values) == list(truth)
    assert r.sections["time"]["calendar"] == "noleap"
    assert r.sections["time"]["step"] == "1 month" and r.sections["time"]["gaps"] == "none"
    assert r.sections["time"]["first"] == truth[0].isoformat()


@pytest.mark.parametrize(
    "freq, calendar, one, six",
    [
        ("MS", "standard", "1 month", "6 months"),
        ("ME", "noleap", "1 month", "6 months"),
        ("QS", "360_day", "3 months", "18 months"),
        ("YS", "noleap", "1 year", "6 years"),
        ("D", "noleap", "1 day", "6 days"),
        ("5D", "360_day", "5 days", "30 days"),
        ("h", "standard", "1 hour", "6 hours"),
        ("6h", "all_leap", "6 hours", "36 hours"),
    ],
)
def test_frequency_inferred_and_said_in_its_own_steps(freq, calendar, one, six):
    # the truth is the frequency the stamps were made with (a pandas / xarray date range)
    time = xr.date_range("2001-01-01", periods=40, freq=freq, calendar=calendar, use_cftime=True)
    ds = xr.Dataset({"sst": ("time", np.zeros(40))}, coords={"time": time})
    r = Reading("x")
    read_time(ds, r)
    assert r.sections["time"]["step"] == one
    assert step_words(ds, 6) == six
    assert r.sections["time"]["length"].startswith("40 steps")


def test_cmip6_mid_month_stamps_are_monthly():
    # CMIP6 Omon: time at the middle of time_bnds (1st of the month to the 1st of the next), noleap
    edges = xr.date_range("1850-01-01", periods=25, freq="MS", calendar="noleap", use_cftime=True)
    mid = [a + (b - a) / 2 for a, b in zip(edges[:-1], edges[1:])]
    ds = xr.Dataset({"tos": ("time", np.zeros(24))}, coords={"time": mid}, attrs={"frequency": "mon"})
    ax = time_axis(ds)
    assert (ax.unit, ax.size, ax.n) == ("month", 1, 24)
    assert step_words(ds, 1) == step_words(ds.attrs["frequency"], 1) == "1 month"


def test_step_words_from_offset_aliases_and_cmip6_frequencies():
    # hand-written: the words a report uses for a lead and a window
    assert [step_words("MS", 1), step_words("MS", 6), step_words("D", 5), step_words("5D", 1)] == [
        "1 month",
        "6 months",
        "5 days",
        "5 days",
    ]
    assert [step_words("mon", 3), step_words("day", 1), step_words("3hr", 2), step_words("yr", 2)] == [
        "3 months",
        "1 day",
        "6 hours",
        "2 years",
    ]


def test_daily_data_is_never_one_month_ahead():
    t = pd.date_range("2001-01-01", periods=800, freq="D")
    ds = xr.Dataset({"sst": ("time", np.zeros(800))}, coords={"time": t})
    assert step_words(ds, 1) == "1 day"
    plan = study_plan(StudyConfig(synth={"output": "daily", "years": 3}, window=6, lead=1), "/tmp/never-written")
    assert "window 6 days, lead 1 day" in plan.text()


@pytest.mark.parametrize("calendar", ["noleap", "360_day", "standard"])
def test_a_missing_month_is_refused_naming_it(calendar):
    time = xr.date_range("2001-01-01", periods=24, freq="MS", calendar=calendar, use_cftime=True)
    keep = [i for i in range(24) if i != 14]  # 2002-03 removed
    ds = xr.Dataset({"sst": ("time", np.zeros(23))}, coords={"time": time[keep]})
    with pytest.raises(DataValidationError, match=r"gap: 2002-03 is missing .*Fix: ") as err:
        read_time(ds)
    assert "\n" not in str(err.value)


def test_a_missing_day_is_refused_naming_it():
    t = pd.date_range("2001-01-01", periods=60, freq="D")
    ds = xr.Dataset({"sst": ("time", np.zeros(57))}, coords={"time": t.delete([20, 21, 40])})
    # the first missing day, hand-counted: 1 January + 20 days
    with pytest.raises(DataValidationError, match=r"gap: 2001-01-21 is missing .*3 missing step\(s\).*Fix: "):
        read_time(ds)


@pytest.mark.parametrize(
    "stamps, what",
    [
        (
            pd.to_datetime(["2001-01-01T00:00", "2001-01-02T00:00", "2001-01-03T12:00", "2001-01-04T00:00"]),
            "irregular steps",
        ),
        (pd.to_datetime(["2001-01-01", "2001-02-20", "2001-03-01", "2001-04-20"]), "irregular steps"),
        (pd.to_datetime(["2001-01-01", "2001-02-01", "2001-02-01", "2001-03-01"]), "not strictly increasing"),
        (pd.to_datetime(["2001-01-01", "2001-03-01", "2001-02-01", "2001-04-01"]), "not strictly increasing"),
    ],
)
def test_irregular_or_unordered_time_is_refused(stamps, what):
    ds = xr.Dataset({"sst": ("time", np.zeros(len(stamps)))}, coords={"time": stamps})
    with pytest.raises(DataValidationError, match=f"{what}.*Fix: "):
        read_time(ds)


@pytest.mark.parametrize(
    "attrs, words",
    [
        ({}, "no units|not CF dates"),
        ({"units": "months since 2000-01-01", "calendar": "standard"}, "cannot be decoded"),
    ],
)
def test_undecodable_time_is_refused(attrs, words):
    ds = xr.Dataset({"sst": ("time", np.zeros(3))}, coords={"time": ("time", [0.0, 1.0, 2.0], attrs)})
    with pytest.raises(DataValidationError, match=f"({words}).*Fix: "):
        read_time(ds)


def test_five_years_of_monthly_data_refused_with_the_length_needed():
    # the study's default split: window 6, lead 1, fractions (0.7, 0.1, 0.2). Worked by hand from the
    # split's rule (window ends t = window-1 .. n-1-lead, cut at round(0.7 m) and round(0.8 m) of the m
    # ends, window + lead - 1 = 6 ends dropped at the start of validation and of test):
    #   n = 60: m = 54 ends, cuts 38 and 43, validation = ends [44, 43): empty (its loss was reported as 0.0);
    #   n = 74: m = 68, cuts 48 and 54, validation [54, 54): empty;
    #   n = 75: m = 69, cuts 48 and 55, validation [54, 55) and test [61, 69): the first that works
    with pytest.raises(DataValidationError, match="at least 75 time steps"):
        samples.chronological_split(60, window=6, lead=1, fractions=(0.7, 0.1, 0.2))
    s = samples.chronological_split(75, window=6, lead=1, fractions=(0.7, 0.1, 0.2))
    assert (s.train.size, s.val.tolist(), s.test.tolist()) == (48, [59], list(range(66, 74)))
    t = pd.date_range("2000-01-01", periods=60, freq="MS")
    ax = time_axis(xr.Dataset(coords={"time": t}))
    with pytest.raises(DataValidationError, match=r"record is 60 months .*at least 75 months \(75 steps, 6.2 years\)"):
        check_record(StudyConfig(window=6, lead=1, fractions=[0.7, 0.1, 0.2]), ax)


def test_three_years_of_monthly_data_refused_before_any_work(tmp_path):
    # a CMIP6-like netCDF of 36 months in a noleap calendar: the dry run refuses it, nothing trained
    time = xr.date_range("2000-01-01", periods=36, freq="MS", calendar="noleap", use_cftime=True)
    ds = xr.Dataset(
        {"tos": (("time", "lat", "lon"), np.zeros((36, 2, 2)), {"units": "degC"})},
        coords={"time": time, "lat": [0.0, 1.0], "lon": [0.0, 1.0]},
    )
    path = tmp_path / "tos.nc"
    ds.to_netcdf(path)
    cfg = StudyConfig(data=str(path))
    with pytest.raises(DataValidationError, match=r"record is 36 months .*need at least 75 months"):
        study_plan(cfg, tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_daily_record_needs_a_training_year():
    # daily data: the climatology forecast is per day of year (29 February with 28 February), so the
    # training split must hold a year: 366 window ends in the Gregorian calendar (365.2425 days a year
    # on average; 365 days from 1 January of a leap year end on 30 December, one phase short). With
    # fractions (0.6, 0.2, 0.2), window 2, lead 1, by hand: round(0.6 m) >= 366 -> m >= 610 ends
    # (m = 609 gives 365) -> n = m + window - 1 + lead = 612 steps; 300 days are refused
    t = pd.date_range("2001-01-01", periods=300, freq="D")
    ax = time_axis(xr.Dataset(coords={"time": t}))
    with pytest.raises(DataValidationError, match=r"record is 300 days .*at least 612 days"):
        check_record(StudyConfig(window=2, lead=1, fractions=[0.6, 0.2, 0.2]), ax)


def test_one_step_chunks_of_a_netcdf_file(tmp_path):
    # CMIP6 / CMEMS files are chunked one time step per chunk; opened lazily, the tendency needs
    # neighbouring steps: time is rechunked, the value is the hand-counted one (1 s/s)
    time = _months("360_day", 8)
    secs = np.arange(8) * 30 * 86400.0
    da = _field(time, secs).rename("secs")
    path = tmp_path / "one_step_chunks.nc"
    da.to_dataset().to_netcdf(path, encoding={"secs": {"chunksizes": (1, 3)}})
    lazy = xr.open_dataset(path, chunks={})
    assert lazy["secs"].chunks[0] == (1,) * 8
    r = Reading("x")
    read_time(lazy, r)
    assert r.sections["time"]["chunking"].startswith("1 step(s) per chunk along time")
    for scheme in ("centred", "forward"):
        out = concepts.time_tendency(lazy["secs"], scheme=scheme)
        np.testing.assert_allclose(out.values[:7], 1.0, rtol=1e-12)

"""The time axis of an ocean product, read before any work: calendar, frequency, gaps, length, chunks.

:func:`read_time` decodes the time coordinate through xarray and cftime (every CF calendar:
``standard`` / ``gregorian``, ``proleptic_gregorian``, ``noleap`` / ``365_day``, ``all_leap`` /
``366_day``, ``360_day``, ``julian``), finds the step (monthly, daily, 5-daily, hourly, yearly;
:func:`xarray.infer_freq` where the stamps fall on calendar boundaries, and whole calendar months
for mid-month stamps as CMIP6 monthly means carry), refuses a gap naming the first missing step,
refuses irregular steps, and says what it read in a :class:`scimech.studies.reading.Reading` (section
``time``). Dates stay in the product's own calendar: a ``360_day`` month is 30 days, a ``noleap``
February 28, and nothing is converted to the Gregorian calendar. Stamps at the end of each averaging
period (CESM history files: the January mean stamped 1 February) or at its start (the January mean
stamped 1 January) are moved to the middle of their CF bounds (``time_bnds``, named by the time
coordinate's ``bounds`` attribute), and said so, so that a centred tendency spans the periods' mid-points; ``months since`` outside the ``360_day`` calendar (and ``years since``) are refused
with CF's rule and a fix that runs.

:func:`seconds_since_start` gives the time differences every tendency needs (calendar-aware);
:func:`step_words` states a number of steps in the product's own frequency ("1 month",
"6 months", "5 days"), the words a report uses for leads and windows; :func:`check_length`
refuses a record too short for what is asked of it, giving the length needed.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd
import xarray as xr

from scimech.errors import DataValidationError

__all__ = ["TimeAxis", "time_axis", "read_time", "step_words", "seconds_since_start", "time_name", "check_length"]

#: names a product gives its time coordinate (NEMO: ``time_counter``), tried after CF's axis / standard_name
_NAMES = ("time", "time_counter", "t", "Time", "TIME")
#: CMIP6's global ``frequency`` attribute (CMIP6 CV) -> (unit, steps of it)
_CMIP_FREQ = {
    "mon": ("month", 1),
    "monC": ("month", 1),
    "day": ("day", 1),
    "yr": ("year", 1),
    "yrPt": ("year", 1),
    "dec": ("year", 10),
    "1hr": ("hour", 1),
    "1hrPt": ("hour", 1),
    "3hr": ("hour", 3),
    "3hrPt": ("hour", 3),
    "6hr": ("hour", 6),
    "6hrPt": ("hour", 6),
    "subhrPt": ("minute", 30),
}
_NOLEAP = ("noleap", "365_day")
_FIX_GAP = (
    "Fix: fill the missing step(s) (e.g. ds.interp(time=...) or the product's own gap-free version), or "
    "select a gap-free period with ds.sel(time=slice(start, end))."
)


@dataclass(frozen=True)
class TimeAxis:
    """What a product's time axis is (from :func:`time_axis`).

    Attributes
    ----------
    name : str
        The time coordinate's name in the product (``"time"``, ``"time_counter"``).
    calendar : str
        The CF calendar (``"noleap"``, ``"360_day"``, ``"standard"``, ...).
    unit : str
        The step's calendar unit: ``"month"``, ``"year"``, ``"day"``, ``"hour"``, ``"minute"``
        or ``"second"``.
    size : int
        Units per step (``5`` for 5-daily data, ``3`` for seasonal means).
    freq : str
        The pandas / xarray offset alias (``"MS"``, ``"ME"``, ``"D"``, ``"5D"``, ``"h"``), or
        ``"M (mid-month)"`` for monthly stamps inside the month (CMIP6 monthly means).
    n : int
        Number of time steps.
    first, last : str
        The first and last time stamps (ISO 8601, in the product's calendar).
    step_seconds : float
        The nominal step in seconds (the mean for calendar months or years).
    """

    name: str
    calendar: str
    unit: str
    size: int
    freq: str
    n: int
    first: str
    last: str
    step_seconds: float

    @property
    def steps_per_year(self) -> float:
        """Time steps per (mean) year of the calendar: 12 for monthly, 365 for daily noleap data."""
        year = {
            "360_day": 360.0,
            "noleap": 365.0,
            "365_day": 365.0,
            "all_leap": 366.0,
            "366_day": 366.0,
            "julian": 365.25,
        }.get(self.calendar, 365.2425) * 86400.0
        if self.unit in ("month", "year"):
            return 12.0 / (self.size * (12 if self.unit == "year" else 1))
        return year / self.step_seconds

    @property
    def year_steps(self) -> int:
        """Time steps in one year, rounded up (12 monthly, 365 daily, 360 daily in a ``360_day``
        calendar, 73 5-daily): what a climatology per phase of the year needs at least."""
        return int(np.ceil(self.steps_per_year - 1e-9))

    def words(self, n: int) -> str:
        """``n`` steps in the product's own frequency (:func:`step_words`)."""
        return _words(self.unit, self.size * int(n))

    @property
    def describe(self) -> str:
        """The frequency in words: ``"monthly (MS)"``, ``"monthly (M, mid-month)"``, ``"5-daily (5D)"``."""
        adj = {
            "month": "monthly",
            "year": "yearly",
            "day": "daily",
            "hour": "hourly",
            "minute": "every minute",
            "second": "every second",
        }[self.unit]
        if self.size != 1:
            adj = {
                "month": f"{self.size}-monthly",
                "year": f"{self.size}-yearly",
                "day": f"{self.size}-daily",
                "hour": f"{self.size}-hourly",
            }.get(self.unit, f"every {_words(self.unit, self.size)}")
        return f"{adj} ({self.freq.replace(' (', ', ').rstrip(')')})"


def _words(unit: str, count: int) -> str:
    return f"{count} {unit}" + ("" if count == 1 else "s")


def time_name(ds: xr.Dataset | xr.DataArray) -> str | None:
    """The name of ``ds``'s time coordinate: CF ``axis: T`` or ``standard_name: time`` first, then the
    usual names (``time``, NEMO's ``time_counter``); ``None`` when it has none."""
    for name, var in ds.coords.items():
        if (
            var.ndim == 1
            and (var.attrs.get("axis") == "T" or var.attrs.get("standard_name") == "time")
            and name in var.dims
        ):
            return str(name)
    for name in _NAMES:
        if name in ds.coords or name in ds.dims:
            return name
    return None


def _decoded(var: xr.DataArray, name: str) -> xr.DataArray:
    """The time coordinate as dates (datetime64 where the calendar allows, else cftime objects)."""
    if np.issubdtype(var.dtype, np.datetime64) or var.dtype == object:
        if (
            var.dtype == object
            and len(var)
            and not hasattr(var.values[0], "calendar")
            and not isinstance(var.values[0], pd.Timestamp)
        ):
            raise DataValidationError(
                f"Time {name!r} holds {type(var.values[0]).__name__} values, not dates. Fix: "
                "give CF times (numbers with units 'days since YYYY-MM-DD' and a calendar)."
            )
        return var
    units = var.attrs.get("units")
    if not np.issubdtype(var.dtype, np.number) or not units or " since " not in str(units):
        raise DataValidationError(
            f"Time {name!r} is {var.dtype} with units {units!r}, not CF dates, so its dates cannot be read. Fix: set "
            f"ds[{name!r}].attrs['units'] = 'days since YYYY-MM-DD' (and 'calendar') as the product defines it."
        )
    cal = str(var.attrs.get("calendar", "standard"))
    unit = str(units).split(" since ")[0].strip().lower()
    if (
        unit in ("month", "months", "year", "years", "common_year", "common_years")
        and not (unit.startswith("month") and cal == "360_day")
        and not (unit.startswith("common") and cal in _NOLEAP)
    ):
        # CF (4.4) and cftime: a month is a fixed 30 days only in the 360_day calendar (a 'common_year' 365 days
        # only in noleap); elsewhere udunits' 'month' is 1/12 of 365.242198781 days, never a calendar month
        rule = (
            "CF and cftime read 'months since' only in the 360_day calendar, where a month is 30 days"
            if unit.startswith("month")
            else "cftime reads 'years since' in no calendar (udunits' year is "
            "365.242198781 days; 'common_years since' in noleap)"
        )
        start, freq = str(units).split(" since ")[1].strip()[:10], "MS" if unit.startswith("month") else "YS"
        raise DataValidationError(
            f"Time {name!r} in {units!r} with calendar {cal!r} cannot be decoded: {rule}. Fix: open with "
            f"decode_times=False and set the dates, e.g. ds[{name!r}] = xr.date_range('{start}', "
            f"periods=ds.sizes[{name!r}], freq='{freq}', calendar={cal!r}, use_cftime=True), or re-encode the "
            "times as 'days since ...'."
        )
    try:
        with warnings.catch_warnings():  # dates before 1582-10-15 or beyond datetime64: cftime objects, said so
            warnings.simplefilter("ignore", xr.SerializationWarning)
            dec = xr.coders.CFDatetimeCoder(use_cftime=None).decode(var.variable, name=name)
            dec = xr.Variable(dec.dims, np.asarray(dec.values))  # decoded here (xarray decodes lazily)
    except Exception as err:  # xarray / cftime refuse what they cannot decode
        raise DataValidationError(
            f"Time {name!r} (units {units!r}, calendar {var.attrs.get('calendar', 'standard')!r}) cannot be decoded "
            f"({type(err).__name__}: {err}). Fix: give units 'days since ...' in a CF calendar."
        ) from None
    return xr.DataArray(dec, name=name)


def _iso(t) -> str:
    if isinstance(t, np.datetime64):
        t = pd.Timestamp(t)
    return t.isoformat().replace("T00:00:00", "")


def _calendar(var: xr.DataArray, dec: xr.DataArray) -> str:
    cal = var.encoding.get("calendar") or var.attrs.get("calendar")
    return str(cal) if cal else str(dec.dt.calendar)


def seconds_since_start(time: xr.DataArray) -> np.ndarray:
    """Seconds of each time stamp after the first (float), in the stamps' own calendar.

    ``time`` holds datetime64 or cftime dates (any CF calendar: a ``360_day`` month is
    2 592 000 s, a ``noleap`` February 2 419 200 s), or plain numbers, returned as they are
    (taken as seconds).
    """
    if np.issubdtype(time.dtype, np.number):
        return np.asarray(time.values, float)
    vals = time.values
    if vals.dtype == object and len(vals) and hasattr(vals[0], "calendar"):
        return np.array([(t - vals[0]).total_seconds() for t in vals], float)
    return (np.asarray(vals, "datetime64[ns]") - np.asarray(vals[0], "datetime64[ns]")).astype(
        "timedelta64[ns]"
    ).astype(np.int64).astype(float) / 1e9


def _month_axis(dec: xr.DataArray, name: str) -> tuple[str, int, str]:
    """(unit, size, freq) of a monthly / yearly axis; a gap or irregular step refused."""
    month = dec.dt.year.values.astype(int) * 12 + dec.dt.month.values.astype(int) - 1
    dm = np.diff(month)
    vals, counts = np.unique(dm, return_counts=True)
    k = int(vals[np.argmax(counts)])
    day = dec.dt.day.values
    ends = dec.dt.days_in_month.values == day
    spread = day.max() - day.min()
    if k < 1 or np.any(dm % k) or np.any(dm < 1) or (spread > 3 and not ends.all()) or 2 * counts.max() < dm.size:
        odd = (dm < 1) | (dm % max(k, 1) != 0)
        odd = odd if odd.any() else (dm != k)
        bad = int(np.argmax(odd)) if odd.any() else max(int(np.argmax(np.abs(day - day[0]) > 3)) - 1, 0)
        raise DataValidationError(
            f"Time {name!r} has irregular steps ({_iso(dec.values[bad])} -> {_iso(dec.values[bad + 1])}, stamps on days "
            f"{day.min()}..{day.max()} of the month): the study needs one step per {_words('month', max(k, 1))}. "
            "Fix: resample to a regular step, e.g. ds.resample(time='MS').mean()."
        )
    if np.any(dm > k):
        i = int(np.nonzero(dm > k)[0][0])
        miss = month[i] + k
        n_miss = int(np.sum(dm[dm > k] // k - 1))
        raise DataValidationError(
            f"Time {name!r} has a gap: {miss // 12:04d}-{miss % 12 + 1:02d} is missing (after {_iso(dec.values[i])}; "
            f"{n_miss} missing step(s) in all), so windows and leads would straddle it. " + _FIX_GAP
        )
    freq = xr.infer_freq(dec) if len(dec) >= 3 else None
    if freq is not None:  # a 360_day calendar's months are also "30D": keep only a calendar-month alias
        f_unit, f_size = _unit_of(freq)
        freq = freq if f_unit in ("month", "year") and f_size * (12 if f_unit == "year" else 1) == k else None
    unit, size = ("year", k // 12) if k % 12 == 0 else ("month", k)
    stamps = "mid-month" if (day > 1).all() and not ends.all() else "stamps"
    return unit, size, freq or f"{'' if k == 1 else k}M ({stamps})"


def _unit_of_seconds(seconds: int) -> tuple[str, int]:
    """(unit, size) of a step of ``seconds``: the largest of day, hour, minute, second that divides it."""
    for unit, sec in (("day", 86400), ("hour", 3600), ("minute", 60), ("second", 1)):
        if seconds % sec == 0:
            return unit, seconds // sec
    raise AssertionError("unreachable: every whole number of seconds is a count of seconds")


def _seconds_axis(dec: xr.DataArray, name: str, secs: np.ndarray) -> tuple[str, int, str]:
    """(unit, size, freq) of a daily / hourly / ... axis (a fixed number of seconds)."""
    ds_ = np.diff(secs)
    r = np.round(ds_).astype(np.int64)
    vals, counts = np.unique(r, return_counts=True)
    s = int(vals[np.argmax(counts)])
    if s <= 0 or np.any(r <= 0) or np.any(r % s) or 2 * counts.max() < r.size:  # the step: most steps' length
        bad = int(np.nonzero((r <= 0) | (r % max(s, 1) != 0) | (r != s))[0][0])
        raise DataValidationError(
            f"Time {name!r} has irregular steps ({_iso(dec.values[bad])} -> {_iso(dec.values[bad + 1])}; most steps "
            f"are {s} s): the study needs a regular step. Fix: resample to one, e.g. ds.resample(time='1D').mean()."
        )
    if np.any(r > s):
        i = int(np.nonzero(r > s)[0][0])
        miss = (
            dec.values[i] + pd.Timedelta(seconds=s).to_pytimedelta()
            if dec.dtype == object
            else dec.values[i] + np.timedelta64(s, "s")
        )
        n_miss = int(np.sum(r[r > s] // s - 1))
        raise DataValidationError(
            f"Time {name!r} has a gap: {_iso(miss)} is missing (after {_iso(dec.values[i])}; {n_miss} missing step(s) "
            f"in all), so windows and leads would straddle it. " + _FIX_GAP
        )
    unit, size = _unit_of_seconds(s)
    freq = xr.infer_freq(dec) if len(dec) >= 3 else None
    return (
        unit,
        size,
        freq or f"{'' if size == 1 else size}{ {'day': 'D', 'hour': 'h', 'minute': 'min'}.get(unit, 's') }",
    )


def time_axis(ds: xr.Dataset | xr.DataArray) -> TimeAxis:
    """Read ``ds``'s time axis: decoded in its calendar, its step found, gaps and irregular steps refused.

    Raises
    ------
    DataValidationError
        No time coordinate, times that are not CF dates, fewer than 2 steps, times not strictly
        increasing, irregular steps, or a gap (naming the first missing step), each with its fix.
    """
    name = time_name(ds)
    if name is None:
        raise DataValidationError(
            f"No time coordinate (looked for axis 'T', standard_name 'time' and the names "
            f"{list(_NAMES)}; got {sorted(map(str, ds.coords))}). Fix: name it 'time'."
        )
    var = ds[name]
    dec = _decoded(var, name)
    if dec.size < 2:
        raise DataValidationError(
            f"Time {name!r} has {dec.size} step(s): no frequency can be read. The study needs "
            "a time series; give the whole record."
        )
    secs = seconds_since_start(dec)
    step = np.diff(secs)
    if np.any(step <= 0):
        i = int(np.nonzero(step <= 0)[0][0])
        what = "a repeated stamp" if step[i] == 0 else "a step back"
        raise DataValidationError(
            f"Time {name!r} is not strictly increasing ({what}: {_iso(dec.values[i])} then {_iso(dec.values[i + 1])}). "
            f"Fix: ds.sortby({name!r}) and drop duplicates (ds.drop_duplicates({name!r}))."
        )
    cal = _calendar(var, dec)
    if np.median(step) >= 27 * 86400:
        unit, size, freq = _month_axis(dec, name)
    else:
        unit, size, freq = _seconds_axis(dec, name, secs)
    return TimeAxis(
        name,
        cal,
        unit,
        size,
        freq,
        int(dec.size),
        _iso(dec.values[0]),
        _iso(dec.values[-1]),
        float(secs[-1] / (dec.size - 1)),
    )


def _chunking(ds: xr.Dataset, name: str) -> str:
    """The time chunking of ``ds``'s lazy variables, in words."""
    sizes = {
        c
        for v in ds.data_vars.values()
        if name in v.dims and v.chunks is not None
        for c in v.chunks[v.dims.index(name)]
    }
    if not sizes:
        return "not chunked (in memory)"
    smallest = min(sizes)
    text = f"{smallest}" + (f"..{max(sizes)}" if max(sizes) != smallest else "") + " step(s) per chunk along time"
    if smallest < 3:
        text += "; time tendencies rechunk time into one chunk (centred differences need neighbours)"
    return text


def read_time(ds: xr.Dataset, reading=None) -> xr.Dataset:
    """``ds`` with its time coordinate decoded (dates in the product's calendar), after checking it.

    The product's raw dataset goes in (before the grid and the variables are read): the time
    coordinate is found (:func:`time_name`), decoded through xarray and cftime, its step inferred,
    gaps and irregular steps refused (:func:`time_axis`). Nothing is converted to another calendar.

    Parameters
    ----------
    ds : xr.Dataset
        The product as opened (lazy is fine), with CF times or times already decoded.
    reading : scimech.studies.reading.Reading, optional
        Filled with the section ``time``: coordinate, calendar, frequency, step, first, last,
        length, gaps, chunking.

    Returns
    -------
    xr.Dataset
        ``ds`` with the decoded time coordinate (datetime64 where the calendar allows, cftime
        objects otherwise); ``ds.attrs`` untouched.

    Raises
    ------
    DataValidationError
        See :func:`time_axis`.
    """
    ax = time_axis(ds)
    var = ds[ax.name]
    coding = {k: var.attrs.get(k, var.encoding.get(k)) for k in ("units", "calendar")}
    if not (np.issubdtype(var.dtype, np.datetime64) or var.dtype == object):
        dec = _decoded(var, ax.name)
        ds = ds.assign_coords(
            {ax.name: (var.dims, dec.values, {k: v for k, v in var.attrs.items() if k not in ("units", "calendar")})}
        )
        ds[ax.name].encoding.update({"units": var.attrs["units"], "calendar": ax.calendar})
    ds, stamps = _period_ends_to_middles(ds, ax.name, coding)
    if stamps:
        ax = time_axis(ds)
    if reading is not None:
        for key, value in (
            ("coordinate", ax.name),
            ("calendar", ax.calendar),
            ("frequency", ax.describe),
            ("step", ax.words(1)),
            ("first", ax.first),
            ("last", ax.last),
            ("length", f"{ax.n} steps ({ax.words(ax.n)}, {ax.n / ax.steps_per_year:.1f} years)"),
            ("gaps", "none"),
            ("chunking", _chunking(ds, ax.name)),
        ):
            reading.fact("time", key, value)
        if stamps:
            reading.fact("time", "stamps", stamps)
    return ds


def _seconds_between(later, earlier) -> np.ndarray:
    """``later - earlier`` in seconds, elementwise, for datetime64 or cftime arrays."""
    later, earlier = np.asarray(later), np.asarray(earlier)
    if later.dtype == object or earlier.dtype == object:
        return np.array([(a - b).total_seconds() for a, b in zip(later.ravel(), earlier.ravel())], float)
    return ((later.astype("datetime64[ns]") - earlier.astype("datetime64[ns]")) / np.timedelta64(1, "s")).ravel()


def _bounds(ds: xr.Dataset, name: str, coding: dict) -> tuple[str, np.ndarray, np.ndarray] | None:
    """``(name, first instants, last instants)`` of the time coordinate's CF bounds (its ``bounds`` attribute, as
    ``time_bnds`` / ``time_bound``), decoded as the stamps are; None when there are none or they cannot be read."""
    var = ds[name]
    bname = var.attrs.get("bounds") or var.encoding.get("bounds")
    if not bname or bname not in ds.variables or ds[bname].ndim != 2 or ds[bname].shape[0] != var.size:
        return None
    b = ds[bname]
    if not (np.issubdtype(b.dtype, np.datetime64) or b.dtype == object):
        if not coding.get("units") or " since " not in str(coding["units"]):
            return None
        b = xr.DataArray(
            xr.coders.CFDatetimeCoder(use_cftime=None).decode(
                xr.Variable(b.dims, b.values, {k: v for k, v in coding.items() if v}), name=bname
            ),
            dims=b.dims,
        )
    dim = b.dims[1]
    return str(bname), b.isel({dim: 0}).values, b.isel({dim: 1}).values


#: where a product stamps its period means, and who does so, for the reading
_STAMPED_AT = {
    "end": "CESM history files stamp a month's mean at its end",
    "start": "many reanalyses and regridded products stamp a month's mean at its first instant",
}


def _period_ends_to_middles(ds: xr.Dataset, name: str, coding: dict) -> tuple[xr.Dataset, str]:
    """Stamps at the start or the end of each averaging period (CESM's history files: the January mean stamped
    1 February 00:00; many reanalyses: 1 January 00:00), read with the CF bounds of the time coordinate
    (``time_bnds``: the period's first and last instants) and moved to the middle of their bounds, so that a month
    is dated by the month it averages and a centred tendency spans the periods' mid-points (months are uneven:
    the steps between month starts are not those between month middles); ``(ds, what was done)``, ``""`` when the
    stamps are already inside their periods, there are no bounds, or the values are snapshots
    (``cell_methods: time: point``)."""
    var = ds[name]
    found = _bounds(ds, name, coding)
    points = any("time: point" in str(v.attrs.get("cell_methods", "")) for v in ds.data_vars.values())
    if found is None or points:
        return ds, ""
    bname, lo, hi = found
    try:
        at_end = _seconds_between(hi, var.values)
        at_start = _seconds_between(var.values, lo)
        length = _seconds_between(hi, lo)
    except TypeError:  # bounds in another calendar than the stamps: left as they are
        return ds, ""
    if not np.all(length > 0):
        return ds, ""
    where = "end" if np.all(np.abs(at_end) < 1.0) else "start" if np.all(np.abs(at_start) < 1.0) else None
    if where is None:
        return ds, ""
    if var.dtype == object:
        mid = np.array([a + (c - a) / 2 for a, c in zip(lo, hi)])
    else:
        mid = (
            np.asarray(lo, "datetime64[ns]") + (np.asarray(hi, "datetime64[ns]") - np.asarray(lo, "datetime64[ns]")) / 2
        )
    out = ds.assign_coords({name: (var.dims, mid, var.attrs)})
    out[name].encoding.update(var.encoding)
    return out, (
        f"at the {where} of each period ({_iso(var.values[0])} {where}s the first, {bname!r} "
        f"{_iso(lo[0])}..{_iso(hi[0])}): read at the middle of their bounds, so each step is dated "
        f"by the period it averages and time tendencies span the periods' mid-points ({_STAMPED_AT[where]})"
    )


def _unit_of(freq: str) -> tuple[str, int]:
    """(unit, size) of an offset alias (``"MS"``, ``"5D"``, ``"h"``) or a CMIP6 frequency (``"mon"``)."""
    if freq in _CMIP_FREQ:
        return _CMIP_FREQ[freq]
    head = freq.split(" ")[0]
    if head.endswith("M") and (head[:-1].isdigit() or head == "M"):
        return "month", int(head[:-1] or 1)
    try:
        off = pd.tseries.frequencies.to_offset(head)
    except ValueError:
        raise DataValidationError(
            f"Unknown time frequency {freq!r}: give an offset alias ('MS', 'D', '5D', 'h') "
            "or a CMIP6 frequency ('mon', 'day')."
        ) from None
    n = int(off.n)
    base = type(off).__name__
    if base in ("MonthBegin", "MonthEnd"):
        return "month", n
    if base in ("QuarterBegin", "QuarterEnd"):
        return "month", 3 * n
    if base in ("YearBegin", "YearEnd"):
        return "year", n
    sec = pd.Timedelta(off).total_seconds()
    if sec < 1 or not float(sec).is_integer():
        raise DataValidationError(
            f"Time frequency {freq!r} is not a whole number of seconds; the study reads steps of whole seconds or more."
        )
    return _unit_of_seconds(int(sec))


def step_words(ds_or_freq: xr.Dataset | xr.DataArray | TimeAxis | str, n: int) -> str:
    """``n`` time steps in the product's own frequency: ``"1 month"``, ``"6 months"``, ``"5 days"``.

    Parameters
    ----------
    ds_or_freq
        A dataset (its time axis is read by :func:`time_axis`), a :class:`TimeAxis`, an offset
        alias (``"MS"``, ``"D"``, ``"5D"``, ``"h"``) or a CMIP6 frequency (``"mon"``, ``"day"``).
    n : int
        A number of time steps (a lead, a window).
    """
    if isinstance(ds_or_freq, TimeAxis):
        return ds_or_freq.words(n)
    if isinstance(ds_or_freq, (xr.Dataset, xr.DataArray)):
        return time_axis(ds_or_freq).words(n)
    unit, size = _unit_of(str(ds_or_freq))
    return _words(unit, size * int(n))


def check_length(ds_or_axis: xr.Dataset | TimeAxis, needed: int, why: str, fix: str) -> None:
    """Refuse a record shorter than ``needed`` time steps, before any work, saying the length needed.

    Parameters
    ----------
    ds_or_axis
        The product (its time axis read by :func:`time_axis`) or its :class:`TimeAxis`.
    needed : int
        The fewest time steps that will do.
    why : str
        What needs them (``"window=6, lead=1 and fractions (0.7, 0.1, 0.2)"``).
    fix : str
        What else the scientist may change (``"a shorter window or a larger validation share"``).
    """
    ax = ds_or_axis if isinstance(ds_or_axis, TimeAxis) else time_axis(ds_or_axis)
    if ax.n >= needed:
        return
    years = needed / ax.steps_per_year
    raise DataValidationError(
        f"The record is {ax.words(ax.n)} ({ax.n} steps, {ax.first}..{ax.last}); {why} need at least {ax.words(needed)} "
        f"({needed} steps, {years:.1f} years). Fix: give a longer record, or {fix}."
    )

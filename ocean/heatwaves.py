"""Marine heatwaves after Hobday et al. (2016), for any time step (daily, monthly, ...).

Hobday's daily definition: a threshold that is the 90th percentile of values pooled over
an 11-day window around each day of year in a baseline period, smoothed with a 31-day
moving average; a heatwave is at least 5 consecutive days above it, and events separated
by 2 days or less are joined. Here each length is given in *days* and converted to time
steps (``steps = days * steps_per_year / 365.25``), so the same call works on monthly
data, where the pooling window becomes the month itself, smoothing is off, the minimum
duration is one month and no gap is joined (override any of them in steps).

Phase of the year: day of year for daily data (29 February shares 28 February's phase,
later days shift by one in leap years, so phases run 1..365; 1..360 in a ``360_day`` calendar),
month for monthly data. Dates are read in the product's own CF calendar (xarray + cftime:
``noleap``, ``360_day``, ``all_leap``, ``julian``, ...), the time axis is checked first
(:func:`ocean.data.timeaxis.time_axis`: a gap or an irregular step is refused) and the baseline must hold
every phase of the year at least once (one full year; Hobday et al. use 30), else the climatology
is refused with the length needed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import xarray as xr

from scimech.errors import DataValidationError

from .data import timeaxis

__all__ = ["HobdayParams", "detect", "detect_grid", "compare_mlhc_sst", "by_field", "phase_of_year"]

#: the fields heatwaves are read in, and their names in words: SST (Hobday et al. 2016 define them on it) and MLHC
FIELDS = {"mlhc": "mixed-layer heat content (MLHC)", "sst": "sea surface temperature (SST)"}


@dataclass
class HobdayParams:
    """Parameters in days (Hobday 2016 defaults); ``None`` step overrides use these."""

    percentile: float = 90.0
    window_days: float = 11.0
    smooth_days: float = 31.0
    min_duration_days: float = 5.0
    max_gap_days: float = 2.0


def _dates(time) -> xr.DataArray:
    """Dates as a 1-D DataArray (``.dt`` works for datetime64 and cftime alike)."""
    return time if isinstance(time, xr.DataArray) else xr.DataArray(np.asarray(time), dims="time")


def phase_of_year(time: pd.DatetimeIndex | xr.CFTimeIndex | xr.DataArray, steps_per_year: int) -> np.ndarray:
    """Phase index 0..n-1 of each date: its month (``steps_per_year=12``), or its day of year
    (``365`` / ``366``: 29 February shares 28 February's phase, n = 365; ``360``: a ``360_day``
    calendar's day, n = 360), in the dates' own calendar."""
    t = _dates(time)
    if steps_per_year == 12:
        return t.dt.month.values.astype(int) - 1
    if steps_per_year in (360, 365, 366):
        doy = t.dt.dayofyear.values.astype(int)
        if t.dt.calendar == "360_day":
            return doy - 1
        leap = t.dt.is_leap_year.values & (doy > 59)
        return np.where(leap, doy - 2, doy - 1)
    raise DataValidationError(f"steps_per_year must be 12 (monthly) or 365 (daily); got {steps_per_year}.")


def _infer_spy(time: xr.DataArray) -> int:
    """12 for monthly, 365 for daily (360 in a ``360_day`` calendar), from :func:`ocean.data.timeaxis.time_axis`."""
    ax = timeaxis.time_axis(time.to_dataset(name="_t") if time.name is None else time)
    if (ax.unit, ax.size) == ("month", 1):
        return 12
    if (ax.unit, ax.size) == ("day", 1):
        return 360 if ax.calendar == "360_day" else 365
    raise DataValidationError(
        f"Marine heatwaves are read from daily or monthly data; this series is {ax.describe}. "
        "Fix: resample it (e.g. series.resample(time='1D').mean()) or pass steps_per_year=12 "
        "or 365."
    )


def _phases_and_baseline(time: xr.DataArray, baseline, spy: int) -> tuple[np.ndarray, int, np.ndarray]:
    """(phase of each step, number of phases, baseline flag), a baseline lacking a phase refused."""
    phase = phase_of_year(time, spy)
    nph = 12 if spy == 12 else (360 if spy == 360 else 365)
    base = np.ones(len(time), bool)
    if baseline is not None:  # label slicing: partial dates and cftime calendars alike
        pos = xr.DataArray(np.arange(len(time)), dims="time", coords={"time": time.values})
        base[:] = False
        base[pos.sel(time=slice(*baseline)).values] = True
    missing = nph - len(np.unique(phase[base]))
    if missing:
        what = "months" if spy == 12 else "days of the year"
        raise DataValidationError(
            f"The heatwave climatology needs every phase of the year in its baseline: {int(base.sum())} "
            f"{'monthly' if spy == 12 else 'daily'} steps leave {missing} {what} without a value. Give at least one "
            f"full year ({nph} steps; Hobday et al. 2016 use 30 years), or a longer baseline."
        )
    return phase, nph, base


def _runs(flag: np.ndarray) -> list[tuple[int, int]]:
    """(start, end inclusive) of runs of True."""
    f = np.concatenate([[False], flag.astype(bool), [False]])
    d = np.diff(f.astype(int))
    return list(zip(np.nonzero(d == 1)[0], np.nonzero(d == -1)[0] - 1))


def _circular_smooth(a: np.ndarray, width: int) -> np.ndarray:
    if width <= 1:
        return a
    half = width // 2
    ext = np.concatenate([a[-half:], a, a[:half]])
    return np.convolve(ext, np.ones(width) / width, mode="valid")


def _steps(days: float, spy: int, override: int | None, minimum: int) -> int:
    if override is not None:
        return int(override)
    return max(minimum, int(round(days * spy / 365.25)))


def _checked_time(da: xr.DataArray) -> xr.DataArray:
    """``da``'s time coordinate, increasing, at least 3 steps (a gap or irregular step refused later)."""
    time = da["time"]
    if len(time) < 3:
        raise DataValidationError("A heatwave series needs at least 3 time steps.")
    if not time.to_index().is_monotonic_increasing:
        raise DataValidationError("Time must increase monotonically; sort with series.sortby('time').")
    return time


def detect(
    series: xr.DataArray,
    *,
    baseline: tuple[str, str] | None = None,
    steps_per_year: int | None = None,
    params: HobdayParams | None = None,
    window_steps: int | None = None,
    smooth_steps: int | None = None,
    min_duration_steps: int | None = None,
    max_gap_steps: int | None = None,
) -> xr.Dataset:
    """Detect marine heatwaves in one time series.

    Parameters
    ----------
    series
        1-D DataArray over ``time`` (datetime64 or cftime dates, any CF calendar), e.g. SST
        (degree_Celsius) or MLHC (J m-2).
    baseline
        ``(start, end)`` dates of the climatology period, inclusive (``"1983"``, ``"2012-12"``: partial
        dates take the whole year or month; default: the whole series). It must hold every phase of
        the year (one full year at least).
    steps_per_year
        12 (monthly) or 365 (daily; 360 in a ``360_day`` calendar); inferred from the time axis when
        omitted (:func:`ocean.data.timeaxis.time_axis`, which refuses a gap or an irregular step).
    params
        Lengths in days (:class:`HobdayParams`); ``*_steps`` arguments override them.

    Returns
    -------
    xr.Dataset
        Over ``time``: ``climatology``, ``threshold``, ``in_mhw`` (bool); over ``event``:
        ``start``, ``end`` (datetime), ``start_index``, ``end_index``, ``duration`` (steps),
        ``intensity_max``, ``intensity_mean`` (above climatology, units of the series),
        ``intensity_cumulative`` (units x steps).
    """
    if not isinstance(series, xr.DataArray) or series.dims != ("time",):
        raise DataValidationError("detect() takes a 1-D DataArray with dim 'time'; use detect_grid for maps.")
    p = params or HobdayParams()
    time = _checked_time(series)
    spy = steps_per_year or _infer_spy(time)
    x = np.asarray(series.values, float)
    phase, nph, base = _phases_and_baseline(time, baseline, spy)
    win = _steps(p.window_days, spy, window_steps, 1)
    half = win // 2
    smooth = _steps(p.smooth_days, spy, smooth_steps, 1)
    if smooth % 2 == 0:
        smooth += 1
    min_dur = _steps(p.min_duration_days, spy, min_duration_steps, 1)
    max_gap = _steps(p.max_gap_days, spy, max_gap_steps, 0)
    if not np.isfinite(x[base]).any():
        nan = np.full(len(time), np.nan)
        return _pack(series, nan, nan, np.zeros(len(time), bool), [], x, spy, min_dur, max_gap, win, smooth)
    clim = np.full(nph, np.nan)
    thr = np.full(nph, np.nan)
    for k in range(nph):
        dist = np.abs(((phase - k) + nph // 2) % nph - nph // 2)
        sel = base & (dist <= half) & np.isfinite(x)
        if sel.any():
            clim[k] = np.mean(x[sel])
            thr[k] = np.percentile(x[sel], p.percentile)
    clim = _circular_smooth(clim, smooth)
    thr = _circular_smooth(thr, smooth)
    c_t, t_t = clim[phase], thr[phase]
    above = np.isfinite(x) & (x > t_t)
    events = [r for r in _runs(above) if r[1] - r[0] + 1 >= min_dur]
    joined: list[list[int]] = []
    for s, e in events:
        if joined and s - joined[-1][1] - 1 <= max_gap:
            joined[-1][1] = e
        else:
            joined.append([s, e])
    flag = np.zeros(len(time), bool)
    for s, e in joined:
        flag[s : e + 1] = True
    return _pack(series, c_t, t_t, flag, joined, x, spy, min_dur, max_gap, win, smooth)


def _pack(series, clim, thr, flag, events, x, spy, min_dur, max_gap, win, smooth) -> xr.Dataset:
    time = series["time"].values
    units = series.attrs.get("units", "")
    anom = x - clim
    st = np.array([s for s, _ in events], int)
    en = np.array([e for _, e in events], int)
    imax = np.array([np.nanmax(anom[s : e + 1]) for s, e in events])
    imean = np.array([np.nanmean(anom[s : e + 1]) for s, e in events])
    icum = np.array([np.nansum(anom[s : e + 1]) for s, e in events])
    ds = xr.Dataset(
        {
            "climatology": ("time", clim, {"units": units, "long_name": "seasonal climatology"}),
            "threshold": ("time", thr, {"units": units, "long_name": "seasonally varying percentile threshold"}),
            "in_mhw": ("time", flag, {"long_name": "time step inside a marine heatwave"}),
            "start": ("event", time[st] if len(st) else np.array([], "datetime64[ns]")),
            "end": ("event", time[en] if len(en) else np.array([], "datetime64[ns]")),
            "start_index": ("event", st),
            "end_index": ("event", en),
            "duration": ("event", en - st + 1, {"units": "time steps"}),
            "intensity_max": ("event", imax, {"units": units}),
            "intensity_mean": ("event", imean, {"units": units}),
            "intensity_cumulative": ("event", icum, {"units": f"{units} x time steps"}),
        },
        coords={"time": time, "event": np.arange(len(events))},
        attrs={
            "method": "Hobday et al. 2016",
            "steps_per_year": spy,
            "min_duration_steps": min_dur,
            "max_gap_steps": max_gap,
            "window_steps": win,
            "smooth_steps": smooth,
            "description": "marine heatwave detection",
        },
    )
    return ds


def detect_grid(da: xr.DataArray, **kwargs) -> xr.Dataset:
    """Hobday detection at every grid point of ``da`` (dims ``time`` + others).

    Returns
    -------
    xr.Dataset
        ``in_mhw`` (bool, like ``da``), ``n_events`` and ``mhw_fraction`` (fraction of
        time steps in a heatwave) per point.
    """
    if "time" not in da.dims:
        raise DataValidationError(f"detect_grid needs a 'time' dim; got {da.dims}.")
    time = _checked_time(da)  # the time axis and the baseline checked once, before the loop over points
    _phases_and_baseline(time, kwargs.get("baseline"), kwargs.get("steps_per_year") or _infer_spy(time))
    other = [d for d in da.dims if d != "time"]
    stacked = da.transpose("time", *other).stack(point=other) if other else da.expand_dims(point=[0], axis=1)
    vals = stacked.values
    flags = np.zeros(vals.shape, bool)
    n_ev = np.zeros(vals.shape[1], int)
    for j in range(vals.shape[1]):
        if not np.isfinite(vals[:, j]).any():
            continue
        s = xr.DataArray(vals[:, j], dims="time", coords={"time": da["time"].values}, attrs=da.attrs)
        r = detect(s, **kwargs)
        flags[:, j] = r["in_mhw"].values
        n_ev[j] = r.sizes["event"]
    fl = xr.DataArray(flags, dims=stacked.dims, coords=stacked.coords)
    ne = xr.DataArray(n_ev, dims="point", coords={"point": stacked["point"]})
    if other:
        fl, ne = fl.unstack("point"), ne.unstack("point")
    else:
        fl, ne = fl.isel(point=0, drop=True), ne.isel(point=0, drop=True)
    valid = np.isfinite(da).any("time")
    frac = fl.mean("time").where(valid)
    return xr.Dataset(
        {
            "in_mhw": fl.transpose(*da.dims),
            "n_events": ne.where(valid),
            "mhw_fraction": frac.assign_attrs(units="1", long_name="fraction of time in a heatwave"),
        },
        attrs={"method": "Hobday et al. 2016", "variable": str(da.name)},
    )


def compare_mlhc_sst(ds: xr.Dataset, **kwargs) -> xr.Dataset:
    """Heatwaves in MLHC vs SST per point: frequency of each and their overlap.

    Returns
    -------
    xr.Dataset
        ``mhw_fraction_mlhc``, ``mhw_fraction_sst``, ``jaccard`` (time steps in both /
        in either), ``p_sst_given_mlhc`` over the non-time dims.
    """
    a = detect_grid(ds["mlhc"], **kwargs)
    b = detect_grid(ds["sst"], **kwargs)
    both = (a["in_mhw"] & b["in_mhw"]).sum("time")
    either = (a["in_mhw"] | b["in_mhw"]).sum("time")
    valid = np.isfinite(ds["sst"]).any("time")
    return xr.Dataset(
        {
            "mhw_fraction_mlhc": a["mhw_fraction"],
            "mhw_fraction_sst": b["mhw_fraction"],
            "n_events_mlhc": a["n_events"],
            "n_events_sst": b["n_events"],
            "jaccard": (both / either.where(either > 0))
            .where(valid)
            .assign_attrs(units="1", long_name="heatwave steps shared by MLHC and SST / steps in either"),
            "p_sst_given_mlhc": (both / a["in_mhw"].sum("time").where(lambda v: v > 0))
            .where(valid)
            .assign_attrs(units="1", long_name="P(SST heatwave | MLHC heatwave)"),
        },
        attrs={"description": "marine heatwaves in MLHC vs SST (Hobday 2016)"},
    )


def _event_table(da: xr.DataArray, field: str, **kwargs) -> xr.Dataset:
    """The heatwaves of ``da``'s area mean (each member apart), one row per event on the dim ``event_<field>``,
    every variable named and labelled with its field."""
    other = [d for d in da.dims if d not in ("time", "member")]
    series = da.mean(other, skipna=True) if other else da
    rows = []
    for m in series["member"].values if "member" in series.dims else [None]:
        one = series.sel(member=m, drop=True) if m is not None else series
        ev = detect(one.assign_attrs(da.attrs), **kwargs)
        cols = [ev[k].values for k in ("start", "end", "duration", "intensity_max")]
        rows += [(m, a, b, int(d), float(x)) for a, b, d, x in zip(*cols)]
    dim, units, words = f"event_{field}", da.attrs.get("units", ""), FIELDS.get(field, field)

    def col(k, attrs):
        return (dim, np.array([r[k] for r in rows]) if rows else np.array([]), {**attrs, "field": field})

    out = {
        f"event_start_{field}": col(1, {"long_name": f"first step of a heatwave in the area-mean {words}"}),
        f"event_end_{field}": col(2, {"long_name": f"last step of a heatwave in the area-mean {words}"}),
        f"event_duration_{field}": col(3, {"units": "time steps", "long_name": f"duration ({words})"}),
        f"event_intensity_max_{field}": col(4, {"units": units, "long_name": f"peak anomaly ({words})"}),
    }
    if "member" in series.dims:
        out[f"event_member_{field}"] = col(0, {"long_name": "member"})
    return xr.Dataset(out)


def by_field(ds: xr.Dataset, fields=("mlhc", "sst"), **kwargs) -> xr.Dataset:
    """Hobday heatwaves in each field the product allows: MLHC where it has one (it needs a mixed-layer depth),
    SST always (Hobday et al. 2016 define marine heatwaves on SST).

    Per field ``f`` present: ``mhw_fraction_<f>`` and ``n_events_<f>`` per point (:func:`detect_grid`) and the
    event table of the area mean on the dim ``event_<f>`` (start, end, duration, peak anomaly; each member
    apart), every variable's ``field`` attribute naming it; with both fields, their overlap
    (``jaccard``, ``p_sst_given_mlhc``, :func:`compare_mlhc_sst`). ``attrs["fields"]`` lists the fields read
    and why one is absent.

    Raises
    ------
    MissingVariableError
        No ``sst`` (naming what the product holds).
    """
    from scimech.errors import MissingVariableError

    if "sst" not in ds:
        raise MissingVariableError(
            f"Marine heatwaves are read on SST (Hobday et al. 2016), which the dataset lacks (it has "
            f"{sorted(map(str, ds.data_vars))}). Fix: give the product's sea surface temperature (CMIP6 'tos', "
            "NEMO 'sosstsst', or the 3-D temperature 'thetao' whose shallowest level is taken)."
        )
    present = [f for f in fields if f in ds]
    if set(present) >= {"mlhc", "sst"}:
        out = compare_mlhc_sst(ds, **kwargs)
    else:
        g = detect_grid(ds["sst"], **kwargs)
        out = xr.Dataset({"mhw_fraction_sst": g["mhw_fraction"], "n_events_sst": g["n_events"]})
    for f in present:
        for v in (f"mhw_fraction_{f}", f"n_events_{f}"):
            out[v].attrs.update(field=f, long_name=f"{out[v].attrs.get('long_name', v)} in {FIELDS[f]}")
        out = out.merge(_event_table(ds[f], f, **kwargs))
    lacking = [f for f in fields if f not in ds]
    out.attrs.update(
        description="marine heatwaves (Hobday et al. 2016) in " + " and ".join(FIELDS[f] for f in present),
        fields=", ".join(present) + (f" ({', '.join(lacking)} not in the product)" if lacking else ""),
    )
    return out

"""Marine heatwaves after Hobday et al. (2016), for any time step (daily, monthly, ...).

Hobday's daily definition: a threshold that is the 90th percentile of values pooled over
an 11-day window around each day of year in a baseline period, smoothed with a 31-day
moving average; a heatwave is at least 5 consecutive days above it, and events separated
by 2 days or less are joined. Here each length is given in *days* and converted to time
steps (``steps = days * steps_per_year / 365.25``), so the same call works on monthly
data, where the pooling window becomes the month itself, smoothing is off, the minimum
duration is one month and no gap is joined (override any of them in steps).

Phase of the year: day of year for daily data (29 February shares 28 February's phase,
later days shift by one in leap years, so phases run 1..365), month for monthly data.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import xarray as xr

from scimech.errors import DataValidationError

__all__ = ["HobdayParams", "detect", "detect_grid", "compare_mlhc_sst", "phase_of_year"]


@dataclass
class HobdayParams:
    """Parameters in days (Hobday 2016 defaults); ``None`` step overrides use these."""

    percentile: float = 90.0
    window_days: float = 11.0
    smooth_days: float = 31.0
    min_duration_days: float = 5.0
    max_gap_days: float = 2.0


def phase_of_year(time: pd.DatetimeIndex, steps_per_year: int) -> np.ndarray:
    """Phase index 0..steps_per_year-1: day of year (365-day) or month."""
    if steps_per_year == 12:
        return time.month.to_numpy() - 1
    if steps_per_year in (365, 366):
        doy = np.asarray(time.day_of_year)
        leap = time.is_leap_year & (doy > 59)
        return np.where(leap, doy - 2, doy - 1)
    raise DataValidationError(f"steps_per_year must be 12 (monthly) or 365 (daily); got {steps_per_year}.")


def _infer_spy(time: pd.DatetimeIndex) -> int:
    if len(time) < 3:
        raise DataValidationError("A heatwave series needs at least 3 time steps.")
    step = np.median(np.diff(time.values).astype("timedelta64[s]").astype(float)) / 86400.0
    if 0.9 <= step <= 1.1:
        return 365
    if 27 <= step <= 32:
        return 12
    raise DataValidationError(f"Cannot infer the time step (median {step:.2f} days): pass steps_per_year=12 or 365.")


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


def detect(series: xr.DataArray, *, baseline: tuple[str, str] | None = None, steps_per_year: int | None = None,
           params: HobdayParams | None = None, window_steps: int | None = None, smooth_steps: int | None = None,
           min_duration_steps: int | None = None, max_gap_steps: int | None = None) -> xr.Dataset:
    """Detect marine heatwaves in one time series.

    Parameters
    ----------
    series
        1-D DataArray over ``time`` (datetime64), e.g. SST (degree_Celsius) or MLHC (J m-2).
    baseline
        ``(start, end)`` dates of the climatology period (default: the whole series).
    steps_per_year
        12 (monthly) or 365 (daily); inferred from the time axis when omitted.
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
    time = pd.DatetimeIndex(series["time"].values)
    if not time.is_monotonic_increasing:
        raise DataValidationError("Time must increase monotonically; sort with series.sortby('time').")
    spy = steps_per_year or _infer_spy(time)
    x = np.asarray(series.values, float)
    phase = phase_of_year(time, spy)
    nph = 12 if spy == 12 else 365
    win = _steps(p.window_days, spy, window_steps, 1)
    half = win // 2
    smooth = _steps(p.smooth_days, spy, smooth_steps, 1)
    if smooth % 2 == 0:
        smooth += 1
    min_dur = _steps(p.min_duration_days, spy, min_duration_steps, 1)
    max_gap = _steps(p.max_gap_days, spy, max_gap_steps, 0)
    base = np.ones(len(time), bool)
    if baseline is not None:
        base = (time >= pd.Timestamp(baseline[0])) & (time <= pd.Timestamp(baseline[1]))
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
        flag[s:e + 1] = True
    return _pack(series, c_t, t_t, flag, joined, x, spy, min_dur, max_gap, win, smooth)


def _pack(series, clim, thr, flag, events, x, spy, min_dur, max_gap, win, smooth) -> xr.Dataset:
    time = series["time"].values
    units = series.attrs.get("units", "")
    anom = x - clim
    st = np.array([s for s, _ in events], int)
    en = np.array([e for _, e in events], int)
    imax = np.array([np.nanmax(anom[s:e + 1]) for s, e in events])
    imean = np.array([np.nanmean(anom[s:e + 1]) for s, e in events])
    icum = np.array([np.nansum(anom[s:e + 1]) for s, e in events])
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
        attrs={"method": "Hobday et al. 2016", "steps_per_year": spy, "min_duration_steps": min_dur,
               "max_gap_steps": max_gap, "window_steps": win, "smooth_steps": smooth,
               "description": "marine heatwave detection"},
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
    return xr.Dataset({"in_mhw": fl.transpose(*da.dims), "n_events": ne.where(valid),
                       "mhw_fraction": frac.assign_attrs(units="1", long_name="fraction of time in a heatwave")},
                      attrs={"method": "Hobday et al. 2016", "variable": str(da.name)})


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
    return xr.Dataset({
        "mhw_fraction_mlhc": a["mhw_fraction"], "mhw_fraction_sst": b["mhw_fraction"],
        "n_events_mlhc": a["n_events"], "n_events_sst": b["n_events"],
        "jaccard": (both / either.where(either > 0)).where(valid).assign_attrs(
            units="1", long_name="heatwave steps shared by MLHC and SST / steps in either"),
        "p_sst_given_mlhc": (both / a["in_mhw"].sum("time").where(lambda v: v > 0)).where(valid).assign_attrs(
            units="1", long_name="P(SST heatwave | MLHC heatwave)"),
    }, attrs={"description": "marine heatwaves in MLHC vs SST (Hobday 2016)"})

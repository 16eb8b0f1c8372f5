"""The ocean schema: dims ``(member, time, lat, lon)``, a ``mask`` (lat, lon) with 1 = ocean,
inputs :data:`~ocean.variables.INPUTS`, concepts :data:`~ocean.variables.CONCEPTS` (W m-2) and the
target ``dmlhc_dt`` (W m-2) or ``mlhc`` (J m-2), each with its CF ``units``; :func:`validate`
names the first problem and its fix."""

from __future__ import annotations

from collections.abc import Sequence

import dask
import numpy as np
import xarray as xr

from scimech.errors import DataValidationError, DimensionError, MissingVariableError, UnitsError

from ..variables import (
    CONCEPTS,
    DIMS,
    EXPECTED_UNITS,
    INPUTS,
    PLAUSIBLE,
    PRESCRIBED,
    product_names_of,
    units_ok,
)

__all__ = ["validate"]


def validate(
    ds: xr.Dataset,
    *,
    inputs: Sequence[str] = INPUTS,
    concepts: Sequence[str] = PRESCRIBED,
    target: str = "dmlhc_dt",
    check_nans: bool = True,
    check_ranges: bool | None = None,
) -> xr.Dataset:
    """Check a dataset against the ocean schema; raise a clear error on the first problem.

    Raises
    ------
    MissingVariableError
        A required variable (or ``mask``) is absent.
    UnitsError
        A variable's ``units`` attribute is missing or not the expected CF unit; with
        ``check_ranges`` (default: as ``check_nans``; both read every value), an input's values
        at ocean points outside what an ocean gives (:data:`~ocean.variables.PLAUSIBLE`: SST in
        K labelled degC, an MLD in cm).
    DimensionError
        A variable's dims are not ``(member, time, lat, lon)`` (``mask``: ``(lat, lon)``).
    DataValidationError
        NaNs at ocean points (mask == 1), or time not strictly increasing.

    Returns
    -------
    xr.Dataset
        The dataset, unchanged (so calls can be chained).
    """
    needed = [*inputs, *concepts, target, "mask"]
    missing = [v for v in needed if v not in ds.variables]
    if missing:
        named = [f"{v} ({'/'.join(product_names_of(v))})" if product_names_of(v) else v for v in missing]
        terms = [v for v in missing if v in (*CONCEPTS, "dmlhc_dt", "mlhc")]
        raise MissingVariableError(
            f"The ocean dataset lacks {', '.join(named)}. Expected inputs {list(inputs)}, concepts {list(concepts)}, "
            f"target {target!r} and 'mask'; got {sorted(map(str, ds.data_vars))}. Product names (ORAS5/NEMO, "
            "CMEMS) are mapped by ocean.data.from_nemo(ds) / open_store(path), or pass names={'yours': 'study'}."
            + (
                f" The budget terms {terms} are not in reanalysis products and this one lacks the fields to compute "
                "them: ocean.data.from_nemo / open_store compute q_surf from qnet, q_ekman from tauu and tauv, q_geo "
                "from zos, q_entr from mld, sst and t_sub (and uo, vo), q_diff from mld and sst, mlhc and dmlhc_dt "
                "from mld and sst (ocean.concepts; 3-D thetao and so give sst, mld and t_sub). Add those fields, or "
                "the terms under these names."
                if terms
                else ""
            )
        )
    if tuple(ds["mask"].dims) != ("lat", "lon"):
        raise DimensionError(
            f"'mask' must have dims ('lat', 'lon'); got {ds['mask'].dims}. Fix: "
            "ds['mask'] = ds['mask'].isel(time=0, member=0, drop=True) or transpose it."
        )
    for v in [*inputs, *concepts, target]:
        da = ds[v]
        if tuple(da.dims) != DIMS:
            fix = (
                "ds = ds.expand_dims(member=[0])"
                if "member" not in da.dims
                else f"ds['{v}'] = ds['{v}'].transpose{DIMS}"
            )
            raise DimensionError(
                f"Variable {v!r} has dims {da.dims}; expected {DIMS}. Fix: {fix} "
                "(rename 'latitude'/'longitude' to 'lat'/'lon', 'time_counter' to 'time')."
            )
        exp = EXPECTED_UNITS.get(v)
        if exp is not None and not units_ok(da.attrs.get("units"), exp):
            raise UnitsError(
                f"Variable {v!r} has units {da.attrs.get('units')!r}; expected {exp!r}. Fix: convert "
                f"the values (e.g. K - 273.15 for temperature) and set ds['{v}'].attrs['units'] = '{exp}'."
            )
    t = ds["time"].values
    if t.size > 1 and not np.all(t[1:] > t[:-1]):
        bad = int(np.nonzero(~(t[1:] > t[:-1]))[0][0])
        raise DataValidationError(
            f"Time is not strictly increasing (at index {bad + 1}: {t[bad]} -> {t[bad + 1]}). "
            "Fix: ds = ds.sortby('time') and drop duplicate times."
        )
    mask = ds["mask"].astype(bool)
    check_ranges = check_nans if check_ranges is None else check_ranges
    if check_nans or check_ranges:
        checks = {v: (~np.isfinite(ds[v]) & mask).sum() for v in [*inputs, *concepts, target]} if check_nans else {}
        ranged = [v for v in inputs if v in PLAUSIBLE] if check_ranges else []
        bounds = {v: (ds[v].where(mask).min(), ds[v].where(mask).max()) for v in ranged}
        counts, bounds = dask.compute(checks, bounds)
        for v, n in counts.items():
            if int(n) > 0:
                raise DataValidationError(
                    f"Variable {v!r} has {int(n)} NaN/inf values at ocean points (mask == 1). Fix: fill them "
                    "(e.g. ds[v].interpolate_na('time')) or set those points to land in 'mask'."
                )
        for v, (lo, hi) in bounds.items():
            low, high, hint = PLAUSIBLE[v]
            if float(lo) < low or float(hi) > high:
                raise UnitsError(
                    f"Variable {v!r} ({ds[v].attrs.get('units')}) ranges over [{float(lo):.4g}, {float(hi):.4g}] at "
                    f"ocean points; an ocean's {v} lies within [{low:g}, {high:g}]: {hint}. Land filled with a "
                    "number instead of NaN also does this: set those points to 0 in 'mask'."
                )
    return ds

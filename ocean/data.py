"""Ocean datasets: CF validation, zarr v3 I/O, train-only normalisation, windows, torch Dataset.

Schema (see ``docs/ocean.md`` and :mod:`ocean.variables`): dims ``(member, time, lat, lon)``;
a ``mask`` (lat, lon) with 1 = ocean; inputs :data:`~ocean.variables.INPUTS`, concepts
:data:`~ocean.variables.CONCEPTS` (W m-2), target ``dmlhc_dt`` (W m-2, the MLHC tendency
over the lead step) or ``mlhc`` (J m-2), each with CF ``units``.

A sample is a window of ``window`` time steps of the inputs ending at ``t`` and the target
and concepts at ``t + lead``. Splits are chronological on ``t + lead`` with a gap of
``window + lead - 1`` steps between splits so no window straddles two splits.
Normalisation statistics come from the training split only and are computed lazily (dask
reductions over chunks); the target and concepts share one scale so that the budget
``target = sum(concepts)`` still holds after normalising.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import warnings
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import dask
import numpy as np
import pandas as pd
import torch
import xarray as xr

from scimech.errors import DataValidationError, DimensionError, MissingVariableError, UnitsError

from . import budget
from .variables import (
    CONCEPTS,
    DIMS,
    EXPECTED_UNITS,
    INPUTS,
    PRESCRIBED,
    TEMPERATURES,
    VAR_ATTRS,
    product_names_of,
    rename_to_study,
    units_ok,
)

__all__ = ["DIMS", "EXPECTED_UNITS", "validate", "write_zarr", "open_zarr", "from_nemo", "open_store", "Split",
           "chronological_split",
           "Normalizer", "fit_normalizer", "WindowDataset", "ChunkedReader", "make_batches"]


def validate(ds: xr.Dataset, *, inputs: Sequence[str] = INPUTS, concepts: Sequence[str] = PRESCRIBED,
             target: str = "dmlhc_dt", check_nans: bool = True) -> xr.Dataset:
    """Check a dataset against the ocean schema; raise a clear error on the first problem.

    Raises
    ------
    MissingVariableError
        A required variable (or ``mask``) is absent.
    UnitsError
        A variable's ``units`` attribute is missing or not the expected CF unit.
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
            + (f" The budget terms {terms} are not in reanalysis products: compute them (ocean.budget.budget_terms "
               "gives q_surf, q_ekman, q_geo and dmlhc_dt from 3-D thetao, so, uo, vo, zos, tau) and add them "
               "under these names." if terms else ""))
    if tuple(ds["mask"].dims) != ("lat", "lon"):
        raise DimensionError(f"'mask' must have dims ('lat', 'lon'); got {ds['mask'].dims}. Fix: "
                             "ds['mask'] = ds['mask'].isel(time=0, member=0, drop=True) or transpose it.")
    for v in [*inputs, *concepts, target]:
        da = ds[v]
        if tuple(da.dims) != DIMS:
            fix = "ds = ds.expand_dims(member=[0])" if "member" not in da.dims else f"ds['{v}'] = ds['{v}'].transpose{DIMS}"
            raise DimensionError(f"Variable {v!r} has dims {da.dims}; expected {DIMS}. Fix: {fix} "
                                 "(rename 'latitude'/'longitude' to 'lat'/'lon', 'time_counter' to 'time').")
        exp = EXPECTED_UNITS.get(v)
        if exp is not None and not units_ok(da.attrs.get("units"), exp):
            raise UnitsError(f"Variable {v!r} has units {da.attrs.get('units')!r}; expected {exp!r}. Fix: convert "
                             f"the values (e.g. K - 273.15 for temperature) and set ds['{v}'].attrs['units'] = '{exp}'.")
    t = ds["time"].values
    if t.size > 1 and not np.all(t[1:] > t[:-1]):
        bad = int(np.nonzero(~(t[1:] > t[:-1]))[0][0])
        raise DataValidationError(f"Time is not strictly increasing (at index {bad + 1}: {t[bad]} -> {t[bad + 1]}). "
                                  "Fix: ds = ds.sortby('time') and drop duplicate times.")
    mask = ds["mask"].astype(bool)
    if check_nans:
        checks = {v: (~np.isfinite(ds[v]) & mask).sum() for v in [*inputs, *concepts, target]}
        counts = dask.compute(checks)[0]
        for v, n in counts.items():
            if int(n) > 0:
                raise DataValidationError(
                    f"Variable {v!r} has {int(n)} NaN/inf values at ocean points (mask == 1). Fix: fill them "
                    "(e.g. ds[v].interpolate_na('time')) or set those points to land in 'mask'.")
    return ds


def write_zarr(ds: xr.Dataset, path: str | os.PathLike, *, time_chunk: int = 12) -> Path:
    """Write a dataset to a zarr v3 store atomically, chunked ``(1, time_chunk, lat, lon)``.

    The store is built in a temporary sibling and moved into place, so a crash never leaves
    a partial store under ``path``.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    ds = ds.copy()
    enc = {}
    for v in ds.data_vars:
        chunks = tuple({"member": 1, "time": time_chunk}.get(d, ds.sizes[d]) for d in ds[v].dims)
        enc[v] = {"chunks": tuple(min(c, ds.sizes[d]) for c, d in zip(chunks, ds[v].dims))}
        ds[v].encoding = {}
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
    try:
        store = tmp / "store.zarr"
        ds.to_zarr(store, mode="w", zarr_format=3, consolidated=False, encoding=enc)
        if path.exists():  # swap: the old store is removed only after the new one is in place
            old = tmp / "old.zarr"
            os.replace(path, old)
            os.replace(store, path)
        else:
            os.replace(store, path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return path


def open_zarr(path: str | os.PathLike, *, validate_schema: bool = True, **kwargs) -> xr.Dataset:
    """Open a zarr store lazily (dask chunks as stored); validated unless told otherwise."""
    path = Path(path)
    if not path.exists():
        raise DataValidationError(f"No zarr store at {str(path)!r}. Create one with `scimech ocean synth --out ...`.")
    try:
        ds = xr.open_zarr(path, consolidated=False, chunks={})
    except Exception as err:
        raise DataValidationError(
            f"Cannot open the zarr store {str(path)!r} ({type(err).__name__}: {str(err)[:200]}). It is truncated "
            "or not a zarr v3 store: rewrite it (e.g. `scimech ocean synth --out ...`) or restore a copy.") from err
    return validate(ds, check_nans=False, **kwargs) if validate_schema else ds


# ---------------------------------------------------------------- product stores (ORAS5 / NEMO / CMEMS)
_KELVIN = {"K", "kelvin", "Kelvin", "degK", "deg_K", "degree_Kelvin", "degrees_K", "degrees_Kelvin"}
_LATLON_ATOL = 1e-4  # degrees (~10 m): float32 nav_lat / nav_lon of a regular grid vary by ~1e-5


def _origin(name: str, renamed: Mapping[str, str]) -> str:
    """``'thetao' (votemper)``: the study name and the product's own, for messages."""
    old = [k for k, v in renamed.items() if v == name]
    return f"{name!r}" + (f" ({old[0]})" if old else "")


def _regular_grid(ds: xr.Dataset, notes: list[str]) -> xr.Dataset:
    """1-D ``lat`` / ``lon`` dims from 1-D coordinates or 2-D ``nav_lat`` / ``nav_lon`` of a regular grid."""
    if "lat" not in ds.variables or "lon" not in ds.variables:
        raise MissingVariableError(
            f"No latitude / longitude in the dataset (variables {sorted(map(str, ds.variables))}). Expected "
            "'lat'/'lon', 'latitude'/'longitude' or NEMO's 'nav_lat'/'nav_lon'; pass names={'yours': 'lat', ...}.")
    lat, lon = ds["lat"], ds["lon"]
    if lat.ndim == 1 and lon.ndim == 1:
        return ds.swap_dims({d: n for d, n in ((lat.dims[0], "lat"), (lon.dims[0], "lon")) if d != n})
    if lat.ndim != 2 or lon.ndim != 2 or set(lat.dims) != set(lon.dims):
        raise DimensionError(f"lat {lat.dims} and lon {lon.dims} must both be 1-D, or both 2-D on the same "
                             "(y, x) dims (NEMO nav_lat / nav_lon).")
    la, lo = lat.values.astype(float), lon.transpose(*lat.dims).values.astype(float)
    if np.allclose(la, la[:, :1], atol=_LATLON_ATOL) and np.allclose(lo, lo[:1, :], atol=_LATLON_ATOL):
        ydim, xdim = lat.dims
        lat1, lon1 = la[:, 0], lo[0, :]
    elif np.allclose(la, la[:1, :], atol=_LATLON_ATOL) and np.allclose(lo, lo[:, :1], atol=_LATLON_ATOL):
        xdim, ydim = lat.dims
        lat1, lon1 = la[0, :], lo[:, 0]
    else:
        raise DimensionError(
            "lat / lon are 2-D and not a regular lat-lon grid (a curvilinear model grid such as NEMO's ORCA): "
            "the study needs a regular grid. Regrid first (e.g. xesmf to a 1-degree grid) or select a region "
            "where the grid is regular.")
    notes.append(f"2-D lat/lon on ({ydim}, {xdim}) -> 1-D lat, lon")
    out = ds.drop_vars(["lat", "lon"]).rename({ydim: "lat", xdim: "lon"})
    return out.assign_coords(lat=("lat", lat1, {"units": "degrees_north", "standard_name": "latitude"}),
                             lon=("lon", lon1, {"units": "degrees_east", "standard_name": "longitude"}))


def _positive_down(da: xr.DataArray, what: str, notes: list[str]) -> xr.DataArray:
    """Flip a depth-like variable given positive up (``positive: up`` or no positive value)."""
    vals = np.asarray(da.values, float)
    up = da.attrs.get("positive") == "up" or (np.isfinite(vals).any() and np.nanmax(vals) <= 0 and np.nanmin(vals) < 0)
    if not up:
        return da
    notes.append(f"{what} positive up -> positive down")
    return (-da).assign_attrs({**da.attrs, "positive": "down"})


def _celsius(da: xr.DataArray, name: str, renamed: Mapping[str, str], notes: list[str]) -> xr.DataArray:
    units = da.attrs.get("units")
    if units in _KELVIN:
        notes.append(f"{name} K -> degree_Celsius")
        return (da.where(da > 0) - 273.15).assign_attrs({**da.attrs, "units": "degree_Celsius"})  # 0 K: land fill
    if not units_ok(units, "degree_Celsius"):
        raise UnitsError(f"Temperature {_origin(name, renamed)} has units {units!r}; expected kelvin ('K') or "
                         "degrees Celsius ('degC', 'degree_Celsius'). Fix: convert it and set its units attribute.")
    return da


def _first_level_below(temp: np.ndarray, mld: np.ndarray, *, depth: np.ndarray) -> np.ndarray:
    """Temperature at the first valid level deeper than ``mld`` (the deepest valid level when the
    column is mixed to its bottom); NaN for land or an unknown MLD. ``temp`` has depth last."""
    valid = np.isfinite(temp)
    below = valid & (depth > mld[..., None])
    deepest = (valid * np.arange(depth.size)).argmax(-1)
    idx = np.where(below.any(-1), below.argmax(-1), deepest)
    out = np.take_along_axis(temp, idx[..., None], -1)[..., 0]
    return np.where(valid.any(-1) & np.isfinite(mld), out, np.nan)


def from_nemo(ds: xr.Dataset, names: Mapping[str, str] | None = None) -> xr.Dataset:
    """Map an ORAS5 / NEMO / CMEMS dataset onto the study's layout.

    Renames product variables (:data:`ocean.variables.PRODUCT_NAMES`: ``votemper`` / ``thetao``
    3-D temperature, ``vosaline`` / ``so`` salinity, ``somxl010`` / ``mlotst`` mixed-layer
    depth, ``sohefldo`` / ``hfds`` net surface heat flux, ``sossheig`` / ``zos``,
    ``sozotaux`` / ``tauuo``, ``sometauy`` / ``tauvo``, ``nav_lat`` / ``nav_lon``,
    ``time_counter``, ``deptht``) and then:

    - 2-D ``nav_lat`` / ``nav_lon`` of a regular grid become 1-D ``lat`` / ``lon`` dims (a
      curvilinear grid is a :class:`~scimech.errors.DimensionError`: regrid first);
    - temperatures in kelvin become degree_Celsius (0 K, a land fill, becomes NaN); depth and
      MLD given positive up become positive down;
    - missing inputs are derived from 3-D fields: ``sst`` = ``thetao`` at the shallowest level,
      ``mld`` = the sigma0 threshold depth from ``thetao`` and ``so`` (TEOS-10,
      :func:`ocean.budget.mixed_layer_depth`), ``t_sub`` = ``thetao`` at the first level
      below the MLD (potential temperature);
    - a ``member`` dim of length 1 is added when absent, and ``mask`` (1 = ocean) is taken
      from ``tmaskutil`` or else from where ``sst`` is finite at the first time step;
    - only the study's 2-D fields ``(member, time, lat, lon)`` and ``mask`` are kept.

    The budget terms and the target are not in reanalysis products: give them under the
    study's names (``q_surf``, ..., ``dmlhc_dt``; see :func:`ocean.budget.budget_terms`).

    Parameters
    ----------
    ds
        The product's dataset (lazy is fine).
    names
        More ``{your name: study name}`` renames, applied before the product table.

    Returns
    -------
    xr.Dataset
        Not validated (see :func:`open_store`); ``attrs["mapping"]`` lists what was changed
        ("" when ``ds`` was already in the study's layout).

    Raises
    ------
    DataValidationError
        ``ds`` has no data variables or a dimension of length 0.
    MissingVariableError, DimensionError, UnitsError
        No latitude / longitude; a curvilinear grid; a temperature in other units than K or degC.
    """
    empty = [str(d) for d, n in ds.sizes.items() if n == 0]
    if not ds.data_vars or empty:
        raise DataValidationError(
            f"The dataset is empty ({'no data variables' if not ds.data_vars else f'dims {empty} have length 0'}): "
            "nothing to map. Check the file (an interrupted download or an empty time selection?).")
    ds, renamed = rename_to_study(ds, names)
    notes = [f"{a} -> {b}" for a, b in renamed.items()]
    ds = _regular_grid(ds, notes)
    if "depth" in ds.variables:
        dunits = ds["depth"].attrs.get("units")
        if dunits is not None and not units_ok(dunits, "m"):
            raise UnitsError(f"Depth {_origin('depth', renamed)} has units {dunits!r}; expected metres ('m').")
        ds = ds.assign_coords(depth=_positive_down(ds["depth"], "depth", notes)).sortby("depth")
    for v in TEMPERATURES:
        if v in ds:
            ds[v] = _celsius(ds[v], v, renamed, notes)
    if "mld" in ds:
        ds["mld"] = _positive_down(ds["mld"], "mld", notes)
    if "thetao" in ds and "depth" in ds["thetao"].dims:
        if "sst" not in ds:
            ds["sst"] = ds["thetao"].isel(depth=0, drop=True)
            notes.append(f"sst = thetao at {float(ds['depth'][0]):g} m")
        if "mld" not in ds and "so" in ds:
            ds["mld"] = budget.mixed_layer_depth(budget.teos10(ds["thetao"], ds["so"])["sigma0"])
            notes.append("mld = sigma0 threshold depth (0.03 kg m-3 from 10 m, TEOS-10) of thetao, so")
        if "t_sub" not in ds and "mld" in ds:
            ds["t_sub"] = xr.apply_ufunc(_first_level_below, ds["thetao"], ds["mld"], input_core_dims=[["depth"], []],
                                         kwargs={"depth": ds["depth"].values.astype(float)}, dask="parallelized",
                                         output_dtypes=[float], dask_gufunc_kwargs={"allow_rechunk": True})
            notes.append("t_sub = thetao at the first level below mld")
    if "member" not in ds.dims:
        ds = ds.expand_dims(member=[0]) if "time" in ds.dims else ds
        notes.append("member dim of length 1 added")
    keep = {}
    for v in ds.data_vars:
        if set(ds[v].dims) == set(DIMS):
            keep[v] = ds[v].transpose(*DIMS)
            for k, val in VAR_ATTRS.get(str(v), {}).items():
                keep[v].attrs.setdefault(k, val)
    dropped = sorted(str(v) for v in ds.data_vars if v not in keep and v != "mask")
    if dropped:
        notes.append(f"dropped {dropped} (not (member, time, lat, lon) fields)")
    out = xr.Dataset(keep, attrs=dict(ds.attrs))
    if "mask" in ds:
        m = ds["mask"]
        m = m.isel({d: 0 for d in m.dims if d not in ("lat", "lon")}, drop=True)
        out["mask"] = (m.fillna(0) > 0).astype(np.int8).transpose("lat", "lon")
    elif "sst" in out:
        out["mask"] = np.isfinite(out["sst"].isel(member=0, time=0, drop=True)).astype(np.int8)
        notes.append("mask = where sst is finite at the first time step")
    if "mask" in out:
        out["mask"].attrs = {"long_name": "ocean mask", "flag_values": np.array([0, 1], np.int8),
                             "flag_meanings": "land ocean", "units": "1"}
    out.attrs["mapping"] = "; ".join(notes)
    return out


def open_store(path: str | os.PathLike, names: Mapping[str, str] | None = None, *, validate_schema: bool = True,
               **kwargs) -> xr.Dataset:
    """Open a zarr store or netCDF file in the study's layout or with ORAS5 / NEMO / CMEMS names.

    The dataset is opened lazily, mapped by :func:`from_nemo` (``names``: more renames) and
    checked by :func:`validate` (``kwargs``: its ``inputs``, ``concepts``, ``target``,
    ``check_nans``; NaNs are not checked by default, that reads every value).

    Raises
    ------
    DataValidationError
        No file, a file that is not zarr or netCDF, or an empty one.
    MissingVariableError, UnitsError, DimensionError
        From :func:`from_nemo` and :func:`validate`, naming the variable and the fix.
    """
    path = Path(path)
    if not path.exists():
        raise DataValidationError(f"No ocean data at {str(path)!r}: give a zarr store or a netCDF file "
                                  "(or create one with `scimech ocean synth --out ...`).")
    try:
        if path.is_dir():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # no consolidated metadata: read the groups
                ds = xr.open_zarr(path, chunks={})
        else:
            ds = xr.open_dataset(path, chunks={})
    except Exception as err:
        raise DataValidationError(
            f"Cannot open {str(path)!r} ({type(err).__name__}: {str(err)[:200]}): it is not a zarr store or a "
            "netCDF file, or it is truncated. Check the download or rewrite it.") from err
    ds = from_nemo(ds, names)
    kwargs.setdefault("check_nans", False)
    return validate(ds, **kwargs) if validate_schema else ds


@dataclass
class Split:
    """Sample end indices ``t`` (last input step) per split, chronological."""

    train: np.ndarray
    val: np.ndarray
    test: np.ndarray
    window: int
    lead: int

    def as_dict(self) -> dict[str, np.ndarray]:
        return {"train": self.train, "val": self.val, "test": self.test}


def chronological_split(n_time: int, *, window: int = 6, lead: int = 1,
                        fractions: tuple[float, float, float] = (0.8, 0.1, 0.1)) -> Split:
    """Chronological train / val / test split of window end indices.

    Samples are ``t = window-1 .. n_time-1-lead``; they are cut by ``fractions`` in time
    order and ``window + lead - 1`` samples are dropped at the start of val and test, so
    no input or target step is shared between splits.
    """
    if window < 1 or lead < 1:
        raise DataValidationError(f"window and lead must be >= 1; got window={window}, lead={lead}.")
    ts = np.arange(window - 1, n_time - lead)
    gap = window + lead - 1
    if len(ts) < 3 * (gap + 1):
        raise DataValidationError(f"Only {n_time} time steps: too few for window={window}, lead={lead} and three "
                                  "splits. Use more years of data or a shorter window.")
    if abs(sum(fractions) - 1) > 1e-9 or min(fractions) <= 0:
        raise DataValidationError(f"fractions must be positive and sum to 1; got {fractions}.")
    n = len(ts)
    a = int(round(fractions[0] * n))
    b = int(round((fractions[0] + fractions[1]) * n))
    return Split(ts[:a], ts[a + gap:b], ts[b + gap:], window, lead)


@dataclass
class Normalizer:
    """Per-variable mean / std from the training split.

    The target is divided by ``scale`` (its training std). Concepts share that scale when
    ``concept_scaling == "target"`` (then the head weight of every budget term is 1 in
    truth), or are each divided by their own std when ``"own"`` (every term then weighs
    the same in the concept loss, so the small ones -- Ekman, diffusion -- are learned too;
    the true head weight of term k is ``std_k / scale``).
    """

    mean: dict[str, float]
    std: dict[str, float]
    scale: float
    target: str
    concepts: list[str] = field(default_factory=list)
    concept_scaling: str = "target"

    def x(self, name: str, values: np.ndarray) -> np.ndarray:
        return (values - self.mean[name]) / self.std[name]

    def scale_of(self, name: str) -> float:
        """The divisor of an output variable (target or concept), W m-2."""
        if self.concept_scaling == "own" and name != self.target and name in self.std:
            return self.std[name]
        return self.scale

    def y(self, name: str, values: np.ndarray) -> np.ndarray:
        return (values - self.mean[name]) / self.scale_of(name)

    def y_inverse(self, name: str, values: np.ndarray) -> np.ndarray:
        return values * self.scale_of(name) + self.mean[name]

    def to_dict(self) -> dict:
        return {"mean": self.mean, "std": self.std, "scale": self.scale, "target": self.target,
                "concepts": self.concepts, "concept_scaling": self.concept_scaling}


def fit_normalizer(ds: xr.Dataset, train_t: np.ndarray, *, window: int, lead: int, inputs: Sequence[str] = INPUTS,
                   concepts: Sequence[str] = CONCEPTS, target: str = "dmlhc_dt",
                   concept_scaling: str = "target") -> Normalizer:
    """Statistics over the training split only (inputs over the input steps, target and
    concepts over the target steps), ocean points only, computed lazily with dask.
    ``concept_scaling``: ``"target"`` or ``"own"`` (see :class:`Normalizer`)."""
    if concept_scaling not in ("target", "own"):
        raise DataValidationError(f"concept_scaling must be 'target' or 'own'; got {concept_scaling!r}.")
    mask = ds["mask"].astype(bool)
    t_in = np.arange(train_t.min() - window + 1, train_t.max() + 1)
    t_out = train_t + lead
    lazy = {}
    for v in inputs:
        da = ds[v].isel(time=t_in).where(mask)
        lazy[v] = (da.mean(), da.std())
    for v in [target, *concepts]:
        if v in ds:
            da = ds[v].isel(time=t_out).where(mask)
            lazy[v] = (da.mean(), da.std())
    with dask.config.set(scheduler="synchronous"):  # many tiny reductions: threads only add overhead
        vals = dask.compute(lazy)[0]
    mean = {k: float(m) for k, (m, _) in vals.items()}
    std = {k: float(s) if float(s) > 0 else 1.0 for k, (_, s) in vals.items()}
    return Normalizer(mean, std, std[target], target, [c for c in concepts if c in ds], concept_scaling)


class ChunkedReader:
    """Read normalised blocks of time steps from a lazy (dask / zarr) dataset with an LRU
    cache of ``max_blocks`` blocks, so memory stays bounded however long the dataset is.

    Block ``b`` of member ``m`` holds time steps ``[b * block, (b + 1) * block)`` of every
    variable, normalised (inputs by their std, target / concepts by the common scale) with
    land and NaNs set to 0, as float32.
    """

    def __init__(self, ds: xr.Dataset, norm: Normalizer, inputs: Sequence[str], outputs: Sequence[str], *,
                 block: int | None = None, max_blocks: int = 8):
        self.ds = ds
        self.norm = norm
        self.inputs = list(inputs)
        self.outputs = list(outputs)
        chunks = ds[self.inputs[0]].chunks
        self.block = block or (int(chunks[1][0]) if chunks else ds.sizes["time"])
        self.max_blocks = max_blocks
        self.cache: OrderedDict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = OrderedDict()
        self.mask = ds["mask"].values.astype(bool)

    def _load(self, m: int, b: int) -> tuple[np.ndarray, np.ndarray]:
        key = (m, b)
        if key in self.cache:
            self.cache.move_to_end(key)
            return self.cache[key]
        sl = slice(b * self.block, (b + 1) * self.block)
        sub = self.ds[self.inputs + [v for v in self.outputs if v not in self.inputs]].isel(member=m, time=sl)
        with dask.config.set(scheduler="synchronous"):
            sub = sub.compute()
        xin = np.stack([self.norm.x(v, sub[v].values) for v in self.inputs])  # (V, t, y, x)
        xout = np.stack([self.norm.y(v, sub[v].values) for v in self.outputs])
        land = ~self.mask
        xin = np.where(np.isfinite(xin) & ~land, xin, 0.0).astype(np.float32)
        xout = np.where(np.isfinite(xout) & ~land, xout, 0.0).astype(np.float32)
        self.cache[key] = (xin, xout)
        while len(self.cache) > self.max_blocks:
            self.cache.popitem(last=False)
        return xin, xout

    def read(self, m: int, t0: int, t1: int, which: str = "in") -> np.ndarray:
        """Steps ``[t0, t1)`` of member ``m``: inputs (V, n, y, x) or outputs (O, n, y, x)."""
        idx = 0 if which == "in" else 1
        parts = []
        for b in range(t0 // self.block, (t1 - 1) // self.block + 1):
            arr = self._load(m, b)[idx]
            lo = max(t0, b * self.block) - b * self.block
            hi = min(t1, (b + 1) * self.block) - b * self.block
            parts.append(arr[:, lo:hi])
        return np.concatenate(parts, axis=1)


class WindowDataset(torch.utils.data.Dataset):
    """Samples ``(member, t[, patch])`` of a window of inputs and the target / concepts at
    ``t + lead``.

    Each item is a dict of tensors: ``x`` (V * window, py, px; variable-major: channel
    ``v * window + w`` is variable ``v`` at window step ``w``, oldest first), ``y`` (1, py, px), ``c``
    (K prescribed, py, px), ``hidden`` (1, py, px; the never-prescribed concept when
    present, else zeros), ``valid`` (1, py, px, bool ocean), ``member``, ``t``.

    Parameters
    ----------
    ds
        A validated dataset (lazy is fine).
    t_index
        Window end indices (from :func:`chronological_split`).
    norm
        Training-split :class:`Normalizer`.
    patch
        ``None`` for the whole grid, or ``(py, px)`` for non-overlapping tiles.
    """

    def __init__(self, ds: xr.Dataset, t_index: np.ndarray, norm: Normalizer, *, window: int = 6, lead: int = 1,
                 inputs: Sequence[str] = INPUTS, prescribed: Sequence[str] = PRESCRIBED, hidden: str = "q_hidden",
                 patch: tuple[int, int] | None = None, members: Sequence[int] | None = None,
                 max_blocks: int = 8, block: int | None = None):
        self.window, self.lead = window, lead
        self.inputs, self.prescribed = list(inputs), list(prescribed)
        self.has_hidden = hidden in ds
        outs = [norm.target, *self.prescribed] + ([hidden] if self.has_hidden else [])
        self.reader = ChunkedReader(ds, norm, self.inputs, outs, block=block, max_blocks=max_blocks)
        ny, nx = ds.sizes["lat"], ds.sizes["lon"]
        if patch is None:
            tiles = [(0, 0, ny, nx)]
        else:
            py, px = patch
            tiles = [(i, j, py, px) for i in range(0, ny - py + 1, py) for j in range(0, nx - px + 1, px)]
        members = list(range(ds.sizes["member"])) if members is None else list(members)
        # order: member, time, tile -> consecutive items share blocks
        self.items = [(m, int(t), tile) for m in members for t in t_index for tile in tiles]
        self.mask = ds["mask"].values.astype(bool)
        self.times = pd.DatetimeIndex(ds["time"].values)

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        m, t, (iy, ix, py, px) = self.items[i]
        xin = self.reader.read(m, t - self.window + 1, t + 1, "in")  # (V, W, y, x)
        out = self.reader.read(m, t + self.lead, t + self.lead + 1, "out")[:, 0]
        ys, xs = slice(iy, iy + py), slice(ix, ix + px)
        x = xin[:, :, ys, xs].reshape(-1, py, px)
        K = len(self.prescribed)
        item = {
            "x": torch.from_numpy(np.ascontiguousarray(x)),
            "y": torch.from_numpy(np.ascontiguousarray(out[0:1, ys, xs])),
            "c": torch.from_numpy(np.ascontiguousarray(out[1:1 + K, ys, xs])),
            "hidden": torch.from_numpy(np.ascontiguousarray(out[1 + K:2 + K, ys, xs])) if self.has_hidden
            else torch.zeros(1, py, px),
            "valid": torch.from_numpy(self.mask[None, ys, xs].copy()),
            "member": torch.tensor(m),
            "t": torch.tensor(t),
        }
        return item


def make_batches(dataset: WindowDataset, batch_size: int = 8, *, shuffle: bool = True, seed: int = 0):
    """A callable ``epoch -> DataLoader`` (reshuffled per epoch with ``seed``), for ``fit_cbm``."""

    def batches(epoch: int = 0):
        g = torch.Generator().manual_seed(seed * 1000 + epoch)
        return torch.utils.data.DataLoader(dataset, batch_size=batch_size, shuffle=shuffle, generator=g,
                                           num_workers=0)

    return batches

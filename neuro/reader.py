"""A recording of neuronal activity read as it comes, and said back: :func:`read_recording` gives
the neutral layout of :mod:`neuro.data` (``activity (time, neuron)``, ``condition (time)``,
``attrs["dt"]`` in s) and a :class:`scimech.reading.Reading` of everything it read.

Each convention is read by the library made for it, and what cannot be read is refused in one
line that names the fix:

- a zarr group or netCDF file: xarray (``open_zarr`` / ``open_dataset``); a bare zarr array of
  traces (ZAPBench's layout, :mod:`neuro.zapbench`): zarr-python, wrapped lazily by dask, its axes
  named by the array's ``dimension_names`` (or, without them, ZAPBench's order ``(t, f)``);
- time: CF ``"<units> since <date>"`` and durations decoded by xarray (datetime64 /
  timedelta64, any CF calendar through cftime); a number with a ``units`` attribute (``ms``,
  ``s``, ``min`` ...) converted by pint with cf-xarray's unit registry; no units, or units
  that are not a time: refused unless ``dt=`` is given; a time axis that goes back or whose
  steps differ by more than :data:`JITTER` of the median: refused (windows count steps);
- conditions: the file's ``condition`` variable, ``conditions=`` (labels, or a file:
  ``.npy`` / ``.txt`` labels, ``.csv`` / ``.tsv`` read by pandas with a ``condition`` column
  and optional ``start`` / ``stop`` step ranges, ``.json`` labels or ZAPBench's
  ``condition_offsets`` / ``condition_names``; or ``"zapbench"``: its published offsets), else
  one file named ``conditions.<ext>`` or ``<stem>.conditions.<ext>`` beside the store;
- neurons with NaN / inf values, or constant over the whole recording, are dropped and named
  (a warning and the reading's ``rows`` section); a time step that is NaN in every neuron is
  refused (dropping it would join the steps on either side).
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import xarray as xr

from scimech.errors import (
    ConfigError,
    DataValidationError,
    DimensionError,
    MissingVariableError,
    UnitsError,
)
from scimech.reading import Reading

from .zapbench import NEURON_DIMS, TIME_DIMS, ZAPBENCH, zarr_node

__all__ = ["read_recording", "CONDITION_SUFFIXES", "JITTER"]

#: the files a condition label list may come in (``conditions=`` a path, or one beside the store)
CONDITION_SUFFIXES = (".csv", ".tsv", ".json", ".npy", ".txt")
#: a time axis is regular when every step is within this fraction of the median step (timestamps
#: of an acquisition clock jitter by far less; a dropped frame is a whole step, 100 %)
JITTER = 0.01
_SHOWN = 8   # neurons or steps named in a message before "..."
_NEURON_BLOCK = 1024   # neurons per dask task when a bare zarr array is read


def _listed(idx, names=None) -> str:
    idx = list(idx)
    shown = [str(names[i]) if names is not None else str(i) for i in idx[:_SHOWN]]
    return ", ".join(shown) + (f", ... ({len(idx)} in all)" if len(idx) > _SHOWN else "")


# ----------------------------------------------------------------------------- opening
def _open(source, reading: Reading) -> xr.Dataset:
    """A Dataset (lazy where the format allows) from a path, a Dataset or an array; sets ``reading.product``."""
    if isinstance(source, (str, Path)):
        path = Path(source)
        if not path.exists():
            raise FileNotFoundError(f"No traces at {path}; give a zarr store or array, a netCDF file or a .npy array.")
        node = zarr_node(path)
        try:
            if path.suffix == ".npy":
                arr = np.load(path, mmap_mode="r")
                reading.product = f".npy array {arr.shape}"
                return _from_array(arr, reading, "(none: a .npy array)")
            if node == "array":
                return _bare_zarr(path, reading)
            if node == "group":
                with warnings.catch_warnings():   # zarr v3 and missing consolidated metadata: said, not needed
                    warnings.simplefilter("ignore", RuntimeWarning)
                    warnings.filterwarnings("ignore", message=".*[Cc]onsolidated.*")
                    ds = xr.open_zarr(path)
                fmt = 2 if (path / ".zgroup").exists() else 3
                reading.product = f"zarr v{fmt} group (variables {', '.join(sorted(map(str, ds.data_vars)))})"
                return ds
            if path.is_dir():
                raise DataValidationError(f"{path} is a folder but not a zarr store or array (no zarr.json, .zgroup "
                                          "or .zarray); give a zarr store, a zarr array or a netCDF file.")
            ds = xr.open_dataset(path)
            reading.product = f"netCDF file (variables {', '.join(sorted(map(str, ds.data_vars)))})"
            return ds
        except (DataValidationError, ConfigError):
            raise
        except Exception as err:
            raise DataValidationError(f"Cannot read traces from {path} ({type(err).__name__}: {str(err)[:200]}): "
                                      "give a zarr store or array, a netCDF file or a .npy (time, neuron) "
                                      "array.") from err
    if isinstance(source, xr.Dataset):
        reading.product = f"xarray Dataset in memory (variables {', '.join(sorted(map(str, source.data_vars)))})"
        return source
    arr = np.asarray(source)
    reading.product = f"array in memory {arr.shape}"
    return _from_array(arr, reading, "(none: an array)")


def _from_array(arr, reading: Reading, how: str) -> xr.Dataset:
    if arr.ndim != 2:
        raise DimensionError(f"Traces have shape {arr.shape}; expected ('time', 'neuron').")
    reading.fact("traces", "dims", f"axis 0 time, axis 1 neuron {how}")
    return xr.Dataset({"activity": (("time", "neuron"), arr)})


def _bare_zarr(path: Path, reading: Reading) -> xr.Dataset:
    """One zarr array of traces without a group (ZAPBench's layout), lazily through dask."""
    import dask.array as da
    import zarr

    arr = zarr.open_array(path, mode="r")
    fmt = arr.metadata.zarr_format
    names = getattr(arr.metadata, "dimension_names", None) if fmt == 3 else arr.attrs.get("_ARRAY_DIMENSIONS")
    if arr.ndim != 2:
        raise DimensionError(f"The zarr array at {path} has shape {arr.shape}; expected (time, neuron) traces.")
    if names is None or all(n is None for n in names):
        dims, how = ("time", "neuron"), "ZAPBench's order (axis 0 time, axis 1 neuron): the array names no axes"
    else:
        role = {str(n): ("time" if str(n).lower() in TIME_DIMS else "neuron" if str(n).lower() in NEURON_DIMS
                         else None) for n in names}
        dims = tuple(role[str(n)] for n in names)
        if sorted(map(str, dims)) != ["neuron", "time"]:
            raise DimensionError(f"The zarr array at {path} names its axes {tuple(names)}; expected a time axis "
                                 f"(one of {TIME_DIMS}) and a neuron axis (one of {NEURON_DIMS}). Write the traces "
                                 "as a Dataset with activity (time, neuron), or an array with those axis names.")
        how = f"the array's dimension_names {tuple(map(str, names))}"
    reading.product = f"bare zarr v{fmt} array {arr.shape}, {arr.dtype} (ZAPBench's layout: no group, no coordinates)"
    reading.fact("traces", "dims", how)
    attrs = {k: v for k, v in arr.attrs.asdict().items() if not k.startswith("_")}
    # dask tasks of whole time series for blocks of neurons (each a few zarr chunks read at once), not
    # one task per stored chunk: a pass over ZAPBench's 7879 x 71721 traces is ~70 tasks of 32 MB
    chunks = tuple(-1 if d == "time" else max(int(c), _NEURON_BLOCK) for d, c in zip(dims, arr.chunks))
    act = xr.DataArray(da.from_zarr(arr, chunks=chunks), dims=dims, attrs=attrs).transpose("time", "neuron")
    return xr.Dataset({"activity": act}, attrs={"source_array": path.name})


# ----------------------------------------------------------------------------- traces
def _activity(ds: xr.Dataset, reading: Reading) -> xr.Dataset:
    name, found = "activity", "name"
    if "activity" not in ds:
        two = [str(v) for v in ds.data_vars if set(ds[v].dims) == {"time", "neuron"}]
        if len(two) != 1:
            raise MissingVariableError(f"No 'activity' (time, neuron) variable among "
                                       f"{sorted(map(str, ds.data_vars))}; name your traces 'activity'.")
        name, found = two[0], "the only (time, neuron) variable"
        ds = ds.rename({name: "activity"})
    act = ds["activity"]
    if set(act.dims) != {"time", "neuron"}:
        raise DimensionError(f"'activity' has dims {act.dims}; expected ('time', 'neuron'). Rename or transpose "
                             "(e.g. ds['activity'].transpose('time', 'neuron')).")
    ds = ds.assign(activity=act.transpose("time", "neuron"))
    T, N = ds.sizes["time"], ds.sizes["neuron"]
    if T == 0 or N == 0:
        raise DataValidationError(f"The traces are empty ({dict(ds['activity'].sizes)}).")
    reading.add("activity", ds.attrs.get("source_array", name), found, act.attrs.get("units", ""),
                "z (per neuron)", "z-scored per neuron with the training steps' mean and sd")
    reading.fact("traces", "variable", f"{ds.attrs.get('source_array', name)} {tuple(map(str, act.dims))}, "
                 f"{act.dtype}")
    reading.fact("traces", "neurons", N)
    reading.fact("traces", "time steps", T)
    return ds


# ----------------------------------------------------------------------------- time
def _seconds_per_unit(units: str) -> float:
    """Seconds in one ``units`` (pint, with cf-xarray's registry of CF / UDUNITS spellings)."""
    import pint
    from cf_xarray.units import units as ureg

    try:
        return float(ureg.Quantity(1.0, units).to("s").magnitude)
    except pint.DimensionalityError as err:
        raise UnitsError(f"The time coordinate's units {units!r} are not a time ({err.dim1 or 'dimensionless'}); "
                         "set time.attrs['units'] to its unit (e.g. 'ms', 's', 'min'), or give dt= (seconds "
                         "between samples) for a step index.") from None
    except (pint.UndefinedUnitError, AttributeError, TypeError, ValueError, AssertionError) as err:
        raise UnitsError(f"The time coordinate's units {units!r} are not units pint reads ({type(err).__name__}); "
                         "set time.attrs['units'] to a time unit (e.g. 'ms', 's', 'min') or a CF "
                         "'seconds since <date>', or give dt= (seconds between samples).") from None


def _time_steps(t: xr.DataArray) -> tuple[np.ndarray, str, str] | None:
    """``(steps in s, units as found, how read)`` of a time coordinate, or None when it has no units."""
    v = t.values
    if np.issubdtype(v.dtype, np.number) and " since " in str(t.attrs.get("units", "")):
        decoded = xr.decode_cf(xr.Dataset({"t": t.variable.to_base_variable()}))["t"]   # an in-memory Dataset
        decoded.encoding.setdefault("units", t.attrs["units"])
        decoded.encoding.setdefault("calendar", t.attrs.get("calendar", "standard"))
        return _time_steps(decoded)
    if np.issubdtype(v.dtype, np.datetime64):
        steps = np.diff(v) / np.timedelta64(1, "s")
        return (steps, str(t.encoding.get("units", "datetime64")),
                f"CF time decoded by xarray ({t.encoding.get('calendar', 'standard')} calendar) -> s")
    if np.issubdtype(v.dtype, np.timedelta64):
        return (np.diff(v) / np.timedelta64(1, "s"), str(t.encoding.get("units", "timedelta64")),
                "CF duration decoded by xarray (timedelta64) -> s")
    if v.dtype == object and len(v) and hasattr(v[0], "calendar"):   # cftime: a non-standard CF calendar
        import pandas as pd

        steps = np.asarray(pd.to_timedelta(np.diff(v)).total_seconds(), float)
        return (steps, str(t.encoding.get("units", "")),
                f"CF time decoded by xarray through cftime ({v[0].calendar} calendar) -> s")
    if not np.issubdtype(v.dtype, np.number):
        raise UnitsError(f"The time coordinate holds {v.dtype} values, not times; give numbers with units "
                         "(e.g. attrs units 's'), CF times, or drop it and give dt= (seconds between samples).")
    units = t.attrs.get("units")
    if units is None or str(units).strip() in ("", "1"):
        return None
    factor = _seconds_per_unit(str(units))
    return np.diff(np.asarray(v, float)) * factor, str(units), f"{units} -> s (pint, cf-xarray's unit registry)"


def _sampling(ds: xr.Dataset, dt: float | None, reading: Reading) -> float:
    """The sampling interval in s, read from the time coordinate with its units (or ``dt=``, or
    ``attrs["dt"]``), checked and said back."""
    T = ds.sizes["time"]
    if "time" in ds.coords and T > 1:
        read = _time_steps(ds["time"])
        if read is None:
            if dt is None:
                raise ConfigError("The time coordinate has no units attribute, so its steps cannot be read (s? ms? "
                                  "frames?): give dt= (--dt, seconds between samples) or set time.attrs['units'] "
                                  "(e.g. 'ms', 's', or CF 'seconds since 2024-01-01').")
            reading.add("time", "time", "option dt=", "(none)", "s", "the coordinate has no units: not used")
            reading.fact("time", "how decoded", "dt= given; the time coordinate has no units and was not used")
        else:
            steps, units, how = read
            bad = np.flatnonzero(steps <= 0)
            if bad.size:
                raise DataValidationError(f"The time coordinate does not increase at step {int(bad[0]) + 1} "
                                          f"({steps[bad[0]]:.6g} s; {bad.size} such steps): sort it "
                                          "(ds.sortby('time')) and drop repeated times before reading.")
            med = float(np.median(steps))
            worst = int(np.argmax(np.abs(steps - med)))
            if abs(steps[worst] - med) > JITTER * med:
                raise DataValidationError(
                    f"The time axis is irregular: steps from {steps.min():.6g} to {steps.max():.6g} s (median "
                    f"{med:.6g} s; {steps[worst]:.6g} s at step {worst + 1}), but forecasts count steps: resample it "
                    f"onto a regular grid first (e.g. ds.interp(time=...) every {med:.6g} s) or cut it at the gap.")
            if dt is not None and abs(dt - med) > JITTER * med:
                raise ConfigError(f"dt={dt:g} s but the time coordinate ({units}) steps every {med:.6g} s: drop dt= "
                                  "(the coordinate is read with its units) or fix the coordinate.")
            reading.add("time", "time", "coordinate", units, "s", how)
            reading.fact("time", "units found", units)
            reading.fact("time", "how decoded", how)
            reading.fact("time", "steps (s)", f"{steps.min():.6g} to {steps.max():.6g} (regular within "
                         f"{JITTER:.0%} of the median)")
            dt = med
    elif "dt" in ds.attrs and dt is None:
        dt = float(ds.attrs["dt"])
        reading.add("time", "attrs['dt']", "attribute", "s (this layout's convention)", "s", "")
        reading.fact("time", "how decoded", "attrs['dt'], seconds by the neutral layout's convention")
    elif dt is not None:
        reading.add("time", "", "option dt=", "", "s", "")
        reading.fact("time", "how decoded", "dt= given (the traces have no time coordinate)")
    else:
        raise ConfigError("No sampling interval: the traces have no time coordinate (ZAPBench's bare array has "
                          "none); give dt= (--dt, seconds between samples), or a 'time' coordinate with units.")
    dt = float(dt)
    if not np.isfinite(dt) or dt <= 0:
        raise ConfigError(f"The sampling interval must be a positive number of seconds; got {dt}.")
    reading.fact("time", "dt used", f"{dt:.6g} s ({1 / dt:.4g} Hz)")
    reading.fact("time", "duration", f"{T * dt:.6g} s ({T} steps)")
    return dt


# ----------------------------------------------------------------------------- conditions
def _from_ranges(rows, T: int, where: str) -> np.ndarray:
    """One label per step from ``(name, start, stop)`` step ranges that cover ``0..T`` once each."""
    labels = np.full(T, None, object)
    for name, a, b in rows:
        a, b = int(a), int(b)
        if not 0 <= a < b <= T:
            raise DataValidationError(f"{where}: condition {name!r} spans steps [{a}, {b}), outside the traces' "
                                      f"{T} steps; give ranges of 0-based steps, stop exclusive, within [0, {T}).")
        if any(x is not None for x in labels[a:b]):
            raise DataValidationError(f"{where}: condition {name!r} [{a}, {b}) overlaps another; each step takes one "
                                      "condition.")
        labels[a:b] = str(name)
    missing = np.flatnonzero(np.equal(labels, None))
    if missing.size:
        raise DataValidationError(f"{where}: steps {_listed(missing)} have no condition (the ranges must cover all "
                                  f"{T} steps); label them (e.g. 'rest') or cut the traces.")
    return labels.astype(str)


def _zapbench_labels(T: int) -> np.ndarray:
    off, names = ZAPBENCH["condition_offsets"], ZAPBENCH["condition_names"]
    if T != off[-1]:
        raise DataValidationError(f"conditions 'zapbench': ZAPBench's condition offsets cover {off[-1]} steps; these "
                                  f"traces have {T}. Give the recording's own conditions (--conditions FILE).")
    return _from_ranges(zip(names, off[:-1], off[1:]), T, "ZAPBench's condition offsets")


def _conditions_file(path: Path, T: int) -> np.ndarray:
    """Labels from a file: ``.npy`` / ``.txt`` (a label per step), ``.csv`` / ``.tsv`` (pandas: a
    ``condition`` column, with ``start`` and ``stop`` for step ranges), ``.json`` (a list of
    labels, or ZAPBench's ``condition_offsets`` with ``condition_names``)."""
    suffix = path.suffix.lower()
    if suffix not in CONDITION_SUFFIXES:
        raise ConfigError(f"conditions file {path.name}: expected one of {', '.join(CONDITION_SUFFIXES)}.")
    try:
        if suffix == ".npy":
            return np.asarray(np.load(path, allow_pickle=False)).astype(str)
        if suffix == ".txt":
            return np.array([s.strip() for s in path.read_text().splitlines() if s.strip()])
        if suffix == ".json":
            data = json.loads(path.read_text())
            if isinstance(data, dict) and "condition_offsets" in data:
                off = [int(x) for x in data["condition_offsets"]]
                names = data.get("condition_names") or [str(k) for k in range(len(off) - 1)]
                if len(names) != len(off) - 1:
                    raise DataValidationError(f"{path.name}: {len(off)} condition_offsets need {len(off) - 1} "
                                              f"condition_names; got {len(names)}.")
                if off[-1] != T:
                    raise DataValidationError(f"{path.name}: the condition_offsets end at step {off[-1]}; the traces "
                                              f"have {T} steps (the last offset is the end of the recording).")
                return _from_ranges(zip(names, off[:-1], off[1:]), T, path.name)
            labels = data.get("condition") if isinstance(data, dict) else data
            if not isinstance(labels, list):
                raise DataValidationError(f"{path.name}: expected a list of labels, {{'condition': [...]}}, or "
                                          "{'condition_offsets': [...], 'condition_names': [...]}.")
            return np.asarray(labels).astype(str)
        import pandas as pd

        table = pd.read_csv(path, sep="\t" if suffix == ".tsv" else ",")
    except (DataValidationError, ConfigError):
        raise
    except Exception as err:
        raise DataValidationError(f"Cannot read conditions from {path} ({type(err).__name__}: {str(err)[:160]}).") \
            from err
    cols = {str(c).strip().lower(): c for c in table.columns}
    if "condition" not in cols:
        raise DataValidationError(f"{path.name} has columns {list(map(str, table.columns))}; expected a 'condition' "
                                  "column (a row per step), with 'start' and 'stop' columns for step ranges.")
    if "start" in cols or "stop" in cols:
        if not ("start" in cols and "stop" in cols):
            raise DataValidationError(f"{path.name}: step ranges need both 'start' and 'stop' columns.")
        return _from_ranges(table[[cols["condition"], cols["start"], cols["stop"]]].itertuples(index=False), T,
                            path.name)
    return table[cols["condition"]].astype(str).to_numpy()


def _beside(path: Path) -> list[Path]:
    """Condition files beside a store: ``<stem>.conditions.<ext>`` and ``conditions.<ext>``."""
    stem = path.name[: -len(path.suffix)] if path.suffix else path.name
    names = [f"{stem}.conditions{s}" for s in CONDITION_SUFFIXES] + [f"conditions{s}" for s in CONDITION_SUFFIXES]
    return [path.parent / n for n in names if (path.parent / n).is_file()]


def _conditions(ds: xr.Dataset, conditions, source, reading: Reading) -> xr.Dataset:
    T = ds.sizes["time"]
    where, found = None, None
    if isinstance(conditions, str) and conditions.strip().lower() == "zapbench":
        labels, where, found = _zapbench_labels(T), "ZAPBench's CONDITION_OFFSETS (neuro.zapbench)", "option"
    elif isinstance(conditions, (str, Path)):
        path = Path(conditions)
        if not path.is_file():
            raise ConfigError(f"conditions file {path} does not exist.")
        labels, where, found = _conditions_file(path, T), str(path), "option (file)"
    elif conditions is not None:
        labels, where, found = np.asarray(conditions), "conditions= (labels given)", "option"
    elif "condition" in ds:
        labels, where, found = None, "the file's 'condition' variable", "name"
    else:
        near = _beside(Path(source)) if isinstance(source, (str, Path)) else []
        if len(near) > 1:
            raise ConfigError(f"Several condition files beside {Path(source).name}: "
                              f"{', '.join(p.name for p in near)}; give one with conditions= (--conditions FILE).")
        if not near:
            raise MissingVariableError("No stimulus conditions: give conditions= (--conditions FILE: a label per "
                                       "step, or start/stop ranges; or 'zapbench'), a 'condition' (time) variable "
                                       "in the file, or a conditions.csv beside the store.")
        labels, where, found = _conditions_file(near[0], T), f"{near[0]} (beside the store)", "file beside"
    if labels is not None:
        labels = np.asarray(labels)
        if labels.shape != (T,):
            raise DimensionError(f"conditions has shape {labels.shape}; expected one label per time step ({T},).")
        if "condition" in ds:
            reading.note("The file's own 'condition' variable was replaced by the conditions given.")
        ds = ds.assign(condition=("time", labels.astype(str)))
    cond = np.asarray(ds["condition"].values).astype(str)
    names, counts = np.unique(cond, return_counts=True)
    reading.add("condition", "condition" if found == "name" else "", found, "", "label per step", "")
    reading.fact("conditions", "where from", where)
    reading.fact("conditions", "how many", f"{len(names)}: " + ", ".join(f"{n} ({c} steps)" for n, c in
                                                                        zip(names, counts)))
    return ds


# ----------------------------------------------------------------------------- neurons
def _drop_neurons(ds: xr.Dataset, reading: Reading) -> xr.Dataset:
    """Drop (and name) neurons with NaN / inf values or constant over the recording; refuse a time
    step that is NaN in every neuron."""
    act = ds["activity"]
    T, N = act.shape
    bad, row_bad = np.zeros(N, np.int64), np.ones(T, bool)
    hi, lo = np.full(N, np.nan), np.full(N, np.nan)
    step = max(act.chunks[1][0], _NEURON_BLOCK) if act.chunks else _NEURON_BLOCK   # whole dask chunks
    for a in range(0, N, step):   # blocks of neurons: memory of one block, never of the whole recording
        X = np.asarray(act[:, a:a + step].values)
        fin = np.isfinite(X)
        bad[a:a + X.shape[1]] = T - fin.sum(0)
        row_bad &= ~fin.any(1)
        hi[a:a + X.shape[1]], lo[a:a + X.shape[1]] = X.max(0), X.min(0)   # NaN where bad: those are dropped
    rows = np.flatnonzero(row_bad)
    if rows.size:
        raise DataValidationError(f"Time steps {_listed(rows)} are NaN/inf in every neuron (dropped frames?): fill "
                                  "them (e.g. ds.interpolate_na('time')) or cut the recording there; dropping them "
                                  "would join the steps on either side.")
    const = (bad == 0) & (hi == lo)
    names = np.asarray(ds["neuron"].values) if "neuron" in ds.coords else None
    nan_idx, const_idx = np.flatnonzero(bad > 0), np.flatnonzero(const)
    reading.fact("rows", "time steps dropped", "none (a dropped step would join the steps on either side)")
    reading.fact("rows", "neurons dropped (NaN/inf)", f"{nan_idx.size}" + (f": {_listed(nan_idx, names)}"
                                                                          if nan_idx.size else ""))
    reading.fact("rows", "neurons dropped (constant)", f"{const_idx.size}" + (f": {_listed(const_idx, names)}"
                                                                             if const_idx.size else ""))
    keep = np.flatnonzero((bad == 0) & ~const)
    reading.fact("rows", "neurons kept", f"{keep.size} of {N}")
    if keep.size == N:
        return ds
    if keep.size == 0:
        raise DataValidationError(f"Every one of the {N} neurons holds NaN/inf values or is constant; nothing is "
                                  "left to forecast. Fix: interpolate short gaps before reading.")
    warnings.warn(f"neuro: {N - keep.size} of {N} neurons dropped ({nan_idx.size} with NaN/inf values, "
                  f"{const_idx.size} constant); their names are in the reading's 'rows' section.", UserWarning,
                  stacklevel=4)
    if "neuron" not in ds.coords:   # keep each neuron's column in the file as its name
        ds = ds.assign_coords(neuron=np.arange(N))
    sel = {"neuron": keep, **({"pre_neuron": keep} if "pre_neuron" in ds.dims else {})}
    return ds.isel(sel)


def _extras(ds: xr.Dataset, reading: Reading) -> None:
    """The optional variables, said back (or what stands in for them)."""
    if "stimulus" in ds:
        s = ds["stimulus"]
        reading.add("stimulus", "stimulus", "name", s.attrs.get("units", ""), "scaled by its largest training value",
                    "divided per feature by its largest training magnitude")
        reading.fact("stimulus", "features", f"{s.sizes.get('feature', 1)} (the file's 'stimulus')")
    else:
        reading.add("stimulus", "", "derived", "", "one-hot", "a one-hot code of the condition")
        reading.fact("stimulus", "features", "a one-hot code of the condition (the file has no 'stimulus')")
    if "trial" in ds:
        reading.add("trial", "trial", "name", "", "", "a new segment where it changes")
    if "prior_mask" in ds:
        reading.add("wiring prior", "prior_mask" + (", prior_sign" if "prior_sign" in ds else ""), "name", "", "", "")
    else:
        reading.fact("wiring prior", "none", "every edge allowed, no sign imposed")


def read_recording(source, *, conditions=None, dt: float | None = None) -> tuple[xr.Dataset, Reading]:
    """A recording in the neutral layout and what was read from it (see the module doc).

    Parameters
    ----------
    source
        A zarr store or bare zarr array (a folder), a netCDF file, a ``.npy`` array, an
        ``xr.Dataset`` or a ``(time, neuron)`` array.
    conditions
        One label per time step, a file of them (``.npy``, ``.txt``, ``.csv``, ``.tsv``, ``.json``;
        or step ranges), or ``"zapbench"`` (ZAPBench's condition offsets). Default: the file's
        ``condition`` variable, else one condition file beside the store.
    dt
        Seconds between samples; needed when the traces have no time coordinate with units, and
        checked against one when they have.

    Returns
    -------
    (xr.Dataset, Reading)
        ``activity (time, neuron)`` (lazy where the format is; neurons with NaN / inf or constant
        dropped), ``condition (time)``, the file's other variables, ``attrs["dt"]`` (s); and the
        reading.
    """
    path_like = isinstance(source, (str, Path))
    reading = Reading(product="", source=str(source) if path_like else "")
    ds = _open(source, reading)
    ds = _activity(ds, reading)
    step = _sampling(ds, None if dt is None else float(dt), reading)
    ds = _conditions(ds, conditions, source, reading)
    ds = _drop_neurons(ds, reading)
    _extras(ds, reading)
    return ds.assign_attrs(dt=step), reading

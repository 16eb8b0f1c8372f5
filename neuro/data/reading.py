"""A recording of neuronal activity read as it comes, and said back: :func:`read_recording` gives
the neutral layout of :mod:`neuro.data` (``activity (time, neuron)``, ``condition (time)``,
``attrs["dt"]`` in s) and a :class:`scimech.studies.reading.Reading` of everything it read.

Each convention is read by the library made for it, and what cannot be read is refused in one
line that names the fix:

- a zarr group or netCDF file: xarray (``open_zarr`` / ``open_dataset``); a bare zarr array of
  traces (ZAPBench's layout, :mod:`neuro.data.zapbench`): zarr-python, wrapped lazily by dask, its axes
  named by the array's ``dimension_names`` (or, without them, ZAPBench's order ``(t, f)``);
- the traces' axes: ``time`` / ``neuron`` or the names pipelines write (``TIME_DIMS``,
  ``NEURON_DIMS`` of :mod:`neuro.data.zapbench`: suite2p's ``frames`` / ``neurons``, CaImAn's ``component``,
  ``cell``, ``roi``), in any order, renamed and said back; ``(trial, time, neuron)`` is read as the
  trials one after another with a ``trial`` label per step; a file whose root holds no variables
  is refused naming its groups (CaImAn's HDF5 ``/estimates``); an empty (0-byte) file is refused;
- time: CF ``"<units> since <date>"`` and durations decoded by xarray (datetime64 /
  timedelta64, any CF calendar through cftime; the one coordinate along time when none is
  named ``time``); a number with a ``units`` attribute (``ms``,
  ``s``, ``min`` ...) converted by pint with cf-xarray's unit registry; no units, or units
  that are not a time: refused unless ``dt=`` is given; a time axis that goes back, has NaN / NaT
  times, or whose steps differ by more than :data:`JITTER` of the median (plus the rounding of
  stored float times: float32 seconds late in a session) is refused, naming the step and the
  samples lost (windows count steps); without any time, a frame rate in the attributes (suite2p's
  ``fs``) is named in the refusal, never read silently; a ``dt`` outside :data:`PLAUSIBLE_DT`
  (0.1 Hz to 10 kHz) is warned about and noted, naming the likely unit mix-up (ms labelled 's');
- conditions: the file's ``condition`` variable, ``conditions=`` (labels, or a file:
  ``.npy`` / ``.txt`` labels, ``.csv`` / ``.tsv`` read by pandas with a ``condition`` column
  and optional ``start`` / ``stop`` step ranges (whole steps; ranges that end at the duration in
  seconds are refused as seconds), BIDS events (``onset`` / ``duration`` in s, ``trial_type``:
  rounded to the nearest step), ``.json`` labels or ZAPBench's ``condition_offsets`` /
  ``condition_names``; or ``"zapbench"``: its published offsets), else one file named
  ``conditions.<ext>`` or ``<stem>.conditions.<ext>`` beside the store (other likely files beside
  it are named in the refusal); a step without a label (blank, NaN) is refused;
- neurons with NaN / inf values, or constant over the whole recording, are dropped and named
  (a warning and the reading's ``rows`` section); a time step that is NaN in every neuron is
  refused (dropping it would join the steps on either side).
"""

from __future__ import annotations

import glob
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
from scimech.studies.reading import Reading
from scimech.studies.units import factor

from .suite2p import plane_folders, read_suite2p
from .zapbench import NEURON_DIMS, TIME_DIMS, TRIAL_DIMS, ZAPBENCH, zarr_node

__all__ = ["read_recording", "CONDITION_SUFFIXES", "JITTER", "PLAUSIBLE_DT", "RATE_ATTRS"]

#: the files a condition label list may come in (``conditions=`` a path, or one beside the store)
CONDITION_SUFFIXES = (".csv", ".tsv", ".json", ".npy", ".txt")
#: a time axis is regular when every step is within this fraction of the median step (timestamps
#: of an acquisition clock jitter by far less; a dropped frame is a whole step, 100 %)
JITTER = 0.01
_SHOWN = 8  # neurons or steps named in a message before "..."
_NEURON_BLOCK = 1024  # neurons per dask task when a bare zarr array is read


def _listed(idx, names=None) -> str:
    idx = list(idx)
    shown = [str(names[i]) if names is not None else str(i) for i in idx[:_SHOWN]]
    return ", ".join(shown) + (f", ... ({len(idx)} in all)" if len(idx) > _SHOWN else "")


# ----------------------------------------------------------------------------- opening
def many_paths(source) -> list[Path] | None:
    """The paths of ``source`` when it names several: a list of paths, or a glob (``"run/suite2p/plane*"``);
    ``None`` for anything else (one path, a Dataset, an array). A glob that matches nothing is refused."""
    if isinstance(source, (list, tuple)) and source and all(isinstance(s, (str, Path)) for s in source):
        return [Path(s) for s in source]
    if isinstance(source, (str, Path)) and not Path(source).exists() and any(c in str(source) for c in "*?["):
        found = sorted(Path(p) for p in glob.glob(str(source)))
        if not found:
            raise FileNotFoundError(f"No file or folder matches {source}; check the pattern (quote it in a shell).")
        return found
    return None


def _open_many(paths: list[Path], reading: Reading) -> xr.Dataset:
    """Several paths as one recording: the plane folders of one suite2p run (:mod:`neuro.data.suite2p`)."""
    folders = []
    for p in paths:
        if not p.exists():
            raise FileNotFoundError(f"No traces at {p}.")
        planes = plane_folders(p)
        if not planes:
            raise ConfigError(
                f"{p} is not a suite2p plane folder: several paths are read together only as the plane folders of "
                "one suite2p run. Give one traces file (a zarr store, a netCDF or a .npy), or join your sessions "
                "into one: xr.concat([...], 'time') with a 'trial' variable (a session number per step) and a "
                "'condition' per step, written with .to_netcdf(...)."
            )
        folders += planes
    return read_suite2p(folders, reading)


def _open(source, reading: Reading) -> xr.Dataset:
    """A Dataset (lazy where the format allows) from a path (or several: :func:`many_paths`), a Dataset or an
    array; sets ``reading.product``."""
    paths = many_paths(source)
    if paths is not None:
        return _open_many(paths, reading)
    if isinstance(source, (str, Path)):
        path = Path(source)
        if plane_folders(path):
            return read_suite2p(plane_folders(path), reading)
        if not path.exists():
            raise FileNotFoundError(f"No traces at {path}; give a zarr store or array, a netCDF file or a .npy array.")
        if path.is_file() and path.stat().st_size == 0:
            raise DataValidationError(
                f"{path} is empty (0 bytes): an interrupted copy or export? Write the traces "
                "again (a zarr store or array, a netCDF file or a .npy (time, neuron) array)."
            )
        node = zarr_node(path)
        hint = _OTHER_FORMATS.get(path.suffix.lower()) if node is None else None
        if hint:
            raise DataValidationError(f"{path.name}: {hint}")
        try:
            if path.suffix.lower() == ".npy":
                arr = np.load(path, mmap_mode="r")
                reading.product = f".npy array {arr.shape}"
                return _from_array(arr, reading, "(none: a .npy array)")
            if node == "array":
                return _bare_zarr(path, reading)
            if node == "group":
                with warnings.catch_warnings():  # zarr v3 and missing consolidated metadata: said, not needed
                    warnings.simplefilter("ignore", RuntimeWarning)
                    warnings.filterwarnings("ignore", message=".*[Cc]onsolidated.*")
                    ds = xr.open_zarr(path)
                fmt = 2 if (path / ".zgroup").exists() else 3
                reading.product = f"zarr v{fmt} group (variables {', '.join(sorted(map(str, ds.data_vars)))})"
                return ds
            if path.is_dir():
                raise DataValidationError(
                    f"{path} is a folder but not a zarr store or array (no zarr.json, .zgroup "
                    "or .zarray); give a zarr store, a zarr array or a netCDF file."
                )
            ds = xr.open_dataset(path)
            reading.product = f"netCDF file (variables {', '.join(sorted(map(str, ds.data_vars)))})"
            if not ds.data_vars:
                ds.attrs["_groups"] = _groups(path)
            return ds
        except (DataValidationError, ConfigError):
            raise
        except Exception as err:
            raise DataValidationError(
                f"Cannot read traces from {path} ({type(err).__name__}: {err}): "
                "give a zarr store or array, a netCDF file or a .npy (time, neuron) "
                "array."
            ) from err
    if isinstance(source, xr.Dataset):
        reading.product = f"xarray Dataset in memory (variables {', '.join(sorted(map(str, source.data_vars)))})"
        return source
    if isinstance(source, xr.DataArray):  # its axis names and coordinates (time with units) are read, not dropped
        reading.product = f"xarray DataArray in memory {tuple(map(str, source.dims))} {source.shape}"
        return source.to_dataset(name="activity")
    if type(source).__name__ == "DataFrame" and hasattr(source, "index"):  # pandas: time index, a column per neuron
        return _from_frame(source, reading)
    arr = np.asarray(source)
    reading.product = f"array in memory {arr.shape}"
    return _from_array(arr, reading, "(none: an array)")


#: formats scientists keep traces in that the reader does not open, each with a way in that works
_OTHER_FORMATS = {
    ".csv": "traces in a text table are not read (no units, no axes): load it with pandas (time index, a column "
    "per neuron) and pass the DataFrame to from_traces, or save np.save('traces.npy', df.to_numpy()) "
    "and give --dt.",
    ".tsv": "traces in a text table are not read (no units, no axes): load it with pandas (sep='\\t') and pass "
    "the DataFrame to from_traces, or save np.save('traces.npy', df.to_numpy()) and give --dt.",
    ".npz": "an .npz holds several named arrays: save the traces alone, e.g. np.save('traces.npy', "
    "np.load(path)['F'].T) for suite2p-like (neuron, frame) arrays, and give --dt.",
    ".mat": "MATLAB files are not read: load it (scipy.io.loadmat, or h5py for v7.3) and save the traces as "
    ".npy (time, neuron) with --dt, or as a netCDF with activity (time, neuron).",
    ".nwb": "NWB files are not read: take the RoiResponseSeries with pynwb (its data (time, roi) and rate) and "
    "save it as a netCDF with activity (time, neuron) and a time coordinate in s, or .npy with --dt.",
}


def _from_frame(df, reading: Reading) -> xr.Dataset:
    """A pandas DataFrame of traces: rows are time steps (a Datetime / Timedelta index is the time
    coordinate; any other index is not used), columns are neurons (their names)."""
    import pandas as pd

    reading.product = f"pandas DataFrame in memory {df.shape}"
    coords = {"neuron": np.asarray(df.columns).astype(str)}
    if isinstance(df.index, (pd.DatetimeIndex, pd.TimedeltaIndex)):
        coords["time"] = df.index.to_numpy()
        how = f"rows are time (the {type(df.index).__name__} is the time coordinate), columns are neurons"
    else:
        how = f"rows are time (the {type(df.index).__name__} has no unit: not used), columns are neurons"
    reading.fact("traces", "dims", how)
    return xr.Dataset({"activity": (("time", "neuron"), df.to_numpy())}, coords=coords)


def _groups(path: Path) -> str:
    """The groups of a netCDF4 / HDF5 file whose root holds no variables (CaImAn's ``/estimates``),
    said in the refusal with how to read one."""
    try:
        groups = {k: sorted(map(str, g.data_vars)) for k, g in xr.open_groups(path).items() if g.data_vars}
    except Exception:  # noqa: BLE001 - a hint only: the refusal stands without it
        return ""
    if not groups:
        return ""
    first = next(iter(groups))
    return (
        " (the file's root holds no variables; its groups: "
        + "; ".join(f"{k}: {', '.join(v)}" for k, v in groups.items())
        + f". Write the traces as a file of their own, e.g. xr.open_dataset(path, "
        f"group={first.strip('/')!r}) renamed to activity (time, neuron), then .to_netcdf(...))"
    )


def _from_array(arr, reading: Reading, how: str) -> xr.Dataset:
    if arr.ndim != 2:
        raise DimensionError(
            f"Traces have shape {arr.shape}; expected ('time', 'neuron')"
            + (
                ": an array names no axes, so trials (trial, time, neuron) are read only from a Dataset, e.g. "
                "xr.Dataset({'activity': (('trial', 'time', 'neuron'), arr)}).to_netcdf('traces.nc')."
                if arr.ndim == 3
                else "."
            )
        )
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
        role = {
            str(n): ("time" if str(n).lower() in TIME_DIMS else "neuron" if str(n).lower() in NEURON_DIMS else None)
            for n in names
        }
        dims = tuple(role[str(n)] for n in names)
        if sorted(map(str, dims)) != ["neuron", "time"]:
            raise DimensionError(
                f"The zarr array at {path} names its axes {tuple(names)}; expected a time axis "
                f"(one of {TIME_DIMS}) and a neuron axis (one of {NEURON_DIMS}). Write the traces "
                "as a Dataset with activity (time, neuron), or an array with those axis names."
            )
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
def _role(dim) -> str | None:
    """``"time"``, ``"neuron"`` or ``"trial"`` for an axis name a pipeline writes (suite2p's
    ``frames`` / ``neurons``, CaImAn's ``component``, ZAPBench's ``t`` / ``f``), else None."""
    d = str(dim).lower()
    return "time" if d in TIME_DIMS else "neuron" if d in NEURON_DIMS else "trial" if d in TRIAL_DIMS else None


def _traces_dims(v: xr.DataArray) -> dict | None:
    """``{dim: role}`` when ``v``'s axes are one time, one neuron and at most one trial axis, else None."""
    roles = {d: _role(d) for d in v.dims}
    got = sorted(map(str, roles.values()))
    return roles if got in (["neuron", "time"], ["neuron", "time", "trial"]) else None


def _activity(ds: xr.Dataset, reading: Reading) -> xr.Dataset:
    name, found = "activity", "name"
    if "activity" not in ds:
        two = [str(v) for v in ds.data_vars if _traces_dims(ds[v]) is not None]
        extra = {
            str(v): [str(d) for d in ds[v].dims if _role(d) is None]
            for v in ds.data_vars
            if {"time", "neuron"} <= {_role(d) for d in ds[v].dims}
        }
        if not two and len(extra) == 1:  # e.g. suite2p's planes: F (plane, neurons, frames)
            ((v, dims),) = extra.items()
            raise DimensionError(
                f"{v} {tuple(map(str, ds[v].dims))} has a time and a neuron axis and also {dims}, which is not a "
                f"trial axis (one of {TRIAL_DIMS}): select one (ds = ds.isel({dims[0]}=0)) or join them along "
                f"the neuron axis (a = ds[{v!r}].stack(neuron=({dims[0]!r}, "
                f"{[str(d) for d in ds[v].dims if _role(d) == 'neuron'][0]!r})); ds = ds.drop_vars({v!r})."
                "assign(activity=a.drop_vars(list(a['neuron'].coords)))), then write the file again."
            )
        if len(two) != 1:
            among = [f"{v} {tuple(map(str, ds[v].dims))}" for v in sorted(map(str, ds.data_vars))]
            raise MissingVariableError(
                f"No 'activity' (time, neuron) variable among [{', '.join(among)}]"
                + ds.attrs.get("_groups", "")
                + (
                    f": {len(two)} could be the traces ({', '.join(two)}); "
                    if two
                    else f" (no variable has a time axis, one of {TIME_DIMS}, and a neuron axis, one of {NEURON_DIMS}); "
                )
                + "name your traces 'activity' with dims ('time', 'neuron'), e.g. "
                "ds.rename({'F': 'activity', 'frames': 'time', 'neurons': 'neuron'})."
            )
        name, found = two[0], f"the only variable with a time and a neuron axis {tuple(map(str, ds[two[0]].dims))}"
        ds = ds.rename({name: "activity"})
    roles = _traces_dims(ds["activity"])
    if roles is None:
        raise DimensionError(
            f"'activity' has dims {ds['activity'].dims}; expected a time axis (one of {TIME_DIMS}) "
            f"and a neuron axis (one of {NEURON_DIMS}), and at most a trial axis (one of "
            f"{TRIAL_DIMS}): rename them, e.g. ds.rename({{'frame': 'time', 'cell': 'neuron'}})."
        )
    renamed = {d: r for d, r in roles.items() if d != r}
    if renamed:
        clash = [r for r in renamed.values() if r in ds.variables or r in ds.dims]
        if clash:
            raise DimensionError(
                f"'activity' has dims {ds['activity'].dims}; expected {tuple(roles.values())}, but "
                f"the file already has {clash} as another axis or variable, so the axes cannot be "
                "renamed for you: rename them yourself (ds.rename(...)) so that the traces and the "
                "other variables agree."
            )
        ds = ds.rename(renamed)
        reading.fact(
            "traces",
            "axes renamed",
            ", ".join(f"{d} -> {r}" for d, r in renamed.items())
            + " (the axis names of imaging pipelines: suite2p's frames / neurons, CaImAn's component ...)",
        )
    act = ds["activity"]
    ds = ds.assign(activity=act.transpose(*(("trial",) if "trial" in act.dims else ()), "time", "neuron"))
    T, N = ds.sizes["time"] * ds.sizes.get("trial", 1), ds.sizes["neuron"]
    if T == 0 or N == 0:
        raise DataValidationError(f"The traces are empty ({dict(ds['activity'].sizes)}).")
    reading.add(
        "activity",
        ds.attrs.get("source_array", name),
        found,
        act.attrs.get("units", ""),
        "z (per neuron)",
        "z-scored per neuron with the training steps' mean and sd",
    )
    reading.fact("traces", "variable", f"{ds.attrs.get('source_array', name)} {tuple(map(str, act.dims))}, {act.dtype}")
    reading.fact("traces", "neurons", N)
    reading.fact("traces", "time steps", T)
    return ds


def _stack_trials(ds: xr.Dataset, reading: Reading) -> xr.Dataset:
    """``activity (trial, time, neuron)`` read as the trials one after another: ``activity (time,
    neuron)`` with a ``trial`` label per step (windows never cross trials); each variable with a
    trial or time axis stacked the same way (a ``condition (trial)`` repeated over its trial's
    steps). The per-trial time coordinate has been read already (:func:`_sampling`) and is dropped."""
    if "trial" not in ds["activity"].dims:
        return ds
    R, T = ds.sizes["trial"], ds.sizes["time"]
    labels = np.asarray(ds["trial"].values) if "trial" in ds.coords else np.arange(R)
    grid = xr.DataArray(np.zeros((R, T), np.int8), dims=("trial", "time"))
    out = {}
    for name, v in ds.data_vars.items():
        if "trial" in v.dims or "time" in v.dims:
            v = v.broadcast_like(grid).transpose("trial", "time", ...)
            out[name] = (("time",) + v.dims[2:], v.data.reshape((R * T,) + v.shape[2:]), v.attrs)
        else:
            out[name] = v
    out["trial"] = ("time", np.repeat(labels, T))
    coords = {k: c for k, c in ds.coords.items() if not {"trial", "time"} & set(c.dims)}
    reading.fact(
        "traces",
        "trials",
        f"{R} trials of {T} steps, read one after another (a trial label per step; windows never cross trials)",
    )
    reading.fact("time", "duration", f"{R} trials x {T} steps")
    return xr.Dataset(out, coords=coords, attrs=ds.attrs)


# ----------------------------------------------------------------------------- time
def _seconds_per_unit(units: str) -> float:
    """Seconds in one ``units`` (pint, with cf-xarray's registry of CF / UDUNITS spellings)."""
    return factor(
        units,
        "s",
        "The time coordinate",
        "a time (e.g. 'ms', 's', 'min')",
        "set time.attrs['units'] to its unit (e.g. 'ms', 's', 'min') or a CF 'seconds since <date>', or give "
        "dt= (seconds between samples) for a step index.",
    )


def _resolution(v: np.ndarray, seconds: float) -> float:
    """The rounding of stored float times, in s: one unit in the last place at their largest
    magnitude (float32 seconds 5,000 s into a session are stored to 0.5 ms); 0 for integers."""
    if not np.issubdtype(v.dtype, np.floating) or not v.size:
        return 0.0
    return float(np.spacing(np.abs(v).max())) * seconds


def _encoded_resolution(v: np.ndarray, encoding: dict) -> float:
    """The rounding, in s, of datetimes that xarray decoded from floats (``encoding`` as it keeps
    it: ``dtype``, ``units`` "<unit> since <date>"): float32 days since 1970 are whole minutes."""
    units, dtype = str(encoding.get("units", "")), encoding.get("dtype")
    if " since " not in units or dtype is None or not np.issubdtype(np.dtype(dtype), np.floating) or not v.size:
        return 0.0
    import pandas as pd

    try:
        unit, ref = units.split(" since ", 1)
        seconds = _seconds_per_unit(unit.strip())
        span = max(
            abs((v.max() - np.datetime64(pd.Timestamp(ref).tz_localize(None))) / np.timedelta64(1, "s")),
            abs((v.min() - np.datetime64(pd.Timestamp(ref).tz_localize(None))) / np.timedelta64(1, "s")),
        )
    except (ValueError, TypeError, UnitsError):  # a reference date pandas cannot read: no rounding known
        return 0.0
    return float(np.spacing(np.asarray(span / seconds, dtype=np.dtype(dtype)))) * seconds


def _time_steps(t: xr.DataArray) -> tuple[np.ndarray, str, str, float] | None:
    """``(steps in s, units as found, how read, rounding of the stored times in s)`` of a time
    coordinate, or None when it has no units."""
    v = t.values
    if np.issubdtype(v.dtype, np.number) and " since " in str(t.attrs.get("units", "")):
        decoded = xr.decode_cf(xr.Dataset({"t": t.variable.to_base_variable()}))["t"]  # an in-memory Dataset
        decoded.encoding.setdefault("units", t.attrs["units"])
        decoded.encoding.setdefault("calendar", t.attrs.get("calendar", "standard"))
        steps, units, how, _ = _time_steps(decoded)
        return steps, units, how, _resolution(v, _seconds_per_unit(str(t.attrs["units"]).split(" since ")[0]))
    if np.issubdtype(v.dtype, np.datetime64):
        steps = np.diff(v) / np.timedelta64(1, "s")
        return (
            steps,
            str(t.encoding.get("units", "datetime64")),
            f"CF time decoded by xarray ({t.encoding.get('calendar', 'standard')} calendar) -> s",
            _encoded_resolution(v, t.encoding),
        )
    if np.issubdtype(v.dtype, np.timedelta64):
        return (
            np.diff(v) / np.timedelta64(1, "s"),
            str(t.encoding.get("units", "timedelta64")),
            "CF duration decoded by xarray (timedelta64) -> s",
            0.0,
        )
    if v.dtype == object and len(v) and hasattr(v[0], "calendar"):  # cftime: a non-standard CF calendar
        import pandas as pd

        steps = np.asarray(pd.to_timedelta(np.diff(v)).total_seconds(), float)
        return (
            steps,
            str(t.encoding.get("units", "")),
            f"CF time decoded by xarray through cftime ({v[0].calendar} calendar) -> s",
            0.0,
        )
    if not np.issubdtype(v.dtype, np.number):
        raise UnitsError(
            f"The time coordinate holds {v.dtype} values, not times; give numbers with units "
            "(e.g. attrs units 's'), CF times, or drop it and give dt= (seconds between samples)."
        )
    units = t.attrs.get("units")
    if units is None or str(units).strip() in ("", "1"):
        return None
    factor = _seconds_per_unit(str(units))
    return (
        np.diff(np.asarray(v, float)) * factor,
        str(units),
        f"{units} -> s (pint, cf-xarray's unit registry)",
        _resolution(v, factor),
    )


def _no_time(v: np.ndarray, steps: np.ndarray) -> np.ndarray:
    """The steps whose time is NaN / NaT (from the values where they are float or datetime, else
    from the steps on either side)."""
    if v.dtype.kind in "fc":
        return np.flatnonzero(np.isnan(v))
    if v.dtype.kind in "mM":
        return np.flatnonzero(np.isnat(v))
    bad = ~np.isfinite(steps)
    return np.flatnonzero(np.r_[bad, False] & np.r_[True, bad]) if bad.any() else np.array([], int)


def _sampling(ds: xr.Dataset, dt: float | None, reading: Reading) -> float:
    """The sampling interval in s, read from the time coordinate with its units (or ``dt=``, or
    ``attrs["dt"]``), checked and said back."""
    T = ds.sizes["time"]
    tname, found = "time", "coordinate"
    if "time" not in ds.coords:  # one coordinate along time of another name (a lab's 'timestamps')
        along = [str(c) for c in ds.coords if ds[c].dims == ("time",)]
        if len(along) == 1:
            tname, found = along[0], "the only coordinate along time"
            reading.note(f"The time axis is read from the coordinate {tname!r} (the file has no 'time').")
    if tname in ds.coords and T > 1:
        read = _time_steps(ds[tname])
        if read is None:
            if dt is None:
                raise ConfigError(
                    "The time coordinate has no units attribute, so its steps cannot be read (s? ms? "
                    "frames?): give dt= (--dt, seconds between samples) or set time.attrs['units'] "
                    "(e.g. 'ms', 's', or CF 'seconds since 2024-01-01')."
                )
            reading.add("time", tname, "option dt=", "(none)", "s", "the coordinate has no units: not used")
            reading.fact("time", "how decoded", "dt= given; the time coordinate has no units and was not used")
        else:
            steps, units, how, res = read
            lost = _no_time(ds[tname].values, steps)
            if lost.size:
                raise DataValidationError(
                    f"The time coordinate has no value (NaN / NaT) at steps {_listed(lost)} "
                    "(frames marked lost?): fill those times (a regular clock: t0 + k * dt) "
                    "and the traces there (ds.interpolate_na('time')), or drop the coordinate "
                    "and give dt=."
                )
            mean = float(np.sum(steps)) / len(steps)
            if res > 0.5 * max(mean, 0.0):  # float32 CF days: whole minutes
                raise DataValidationError(
                    f"The time coordinate ({np.dtype(ds[tname].encoding.get('dtype', ds[tname].dtype))}, {units}) is "
                    f"stored to {res:.3g} s, coarser than half "
                    f"a step (the steps average {mean:.3g} s), so its steps cannot be told apart: store the times "
                    "as float64 or CF 'seconds since <date>', or drop the coordinate and give dt=."
                )
            bad = np.flatnonzero(steps <= 0)
            if bad.size:
                raise DataValidationError(
                    f"The time coordinate does not increase at step {int(bad[0]) + 1} "
                    f"({steps[bad[0]]:.6g} s; {bad.size} such steps): sort it "
                    "(ds.sortby('time')) and drop repeated times before reading."
                )
            med = float(np.median(steps))
            worst = int(np.argmax(np.abs(steps - med)))
            rounded = abs(steps[worst] - med) > JITTER * med  # only within the rounding of the stored times
            if abs(steps[worst] - med) > JITTER * med + res:
                raise DataValidationError(
                    f"The time axis is irregular: steps from {steps.min():.6g} to {steps.max():.6g} s (median "
                    f"{med:.6g} s; {steps[worst]:.6g} s at step {worst + 1}"
                    + (
                        f", {steps[worst] / med:.3g} steps: {round(steps[worst] / med) - 1} samples lost?"
                        if steps[worst] > 1.5 * med
                        else ""
                    )
                    + "), but forecasts count steps: resample it "
                    f"onto a regular grid first (e.g. ds.interp(time=...) every {med:.6g} s) or cut it at the gap."
                )
            if dt is not None and abs(dt - med) > JITTER * med:
                raise ConfigError(
                    f"dt={dt:g} s but the time coordinate ({units}) steps every {med:.6g} s: drop dt= "
                    "(the coordinate is read with its units) or fix the coordinate."
                )
            reading.add("time", tname, found, units, "s", how)
            reading.fact("time", "units found", units)
            reading.fact("time", "how decoded", how)
            reading.fact(
                "time",
                "steps (s)",
                f"{steps.min():.6g} to {steps.max():.6g} (regular within "
                f"{JITTER:.0%} of the median"
                + (f" plus the {res:.3g} s rounding of the stored {ds[tname].dtype} times)" if rounded else ")"),
            )
            dt = med
            if rounded:  # the median is one of the rounded steps; the mean step is not biased by the rounding
                dt = mean
                reading.note(
                    f"The time coordinate is stored as {ds[tname].dtype}, rounded to {res:.3g} s "
                    f"({res / dt:.1%} of a step): dt is the mean step over the recording."
                )
    elif "dt" in ds.attrs and dt is None:
        dt = float(ds.attrs["dt"])
        reading.add("time", "attrs['dt']", "attribute", "s (this layout's convention)", "s", "")
        reading.fact("time", "how decoded", "attrs['dt'], seconds by the neutral layout's convention")
    elif dt is not None:
        reading.add("time", "", "option dt=", "", "s", "")
        reading.fact("time", "how decoded", "dt= given (the traces have no time coordinate)")
    else:
        raise ConfigError(
            "No sampling interval: the traces have no time coordinate (ZAPBench's bare array has "
            "none); give dt= (--dt, seconds between samples), or a 'time' coordinate with units." + _rate_hint(ds)
        )
    dt = float(dt)
    if not np.isfinite(dt) or dt <= 0:
        raise ConfigError(f"The sampling interval must be a positive number of seconds; got {dt}.")
    reading.fact("time", "dt used", f"{dt:.6g} s ({1 / dt:.4g} Hz)")
    _plausible(dt, reading)
    reading.fact("time", "duration", f"{T * dt:.6g} s ({T} steps)")
    return dt


#: attributes in which imaging pipelines store a frame rate in Hz (suite2p's ``fs`` ...): named in the
#: refusal when there is no sampling interval, never read silently (a unit is never assumed)
RATE_ATTRS = ("fs", "frame_rate", "framerate", "fps", "sampling_rate", "sampling_frequency", "volume_rate", "rate")
#: sampling intervals of neuronal recordings, s: 10 kHz (electrophysiology, voltage imaging) to 0.1 Hz
#: (a larval zebrafish light-sheet volume is ~1 s; two-photon frames 0.03-0.3 s)
PLAUSIBLE_DT = (1e-4, 10.0)


def _rate_hint(ds: xr.Dataset) -> str:
    for attrs in (ds.attrs, ds["activity"].attrs):
        for k, v in attrs.items():
            if str(k).lower() in RATE_ATTRS and np.ndim(v) == 0 and isinstance(v, (int, float, np.number)) and v > 0:
                return (
                    f" The file's attribute {k} = {float(v):g} looks like a rate in Hz (suite2p's fs is frames "
                    f"per second per plane): if so, give dt={1 / float(v):.6g} (--dt {1 / float(v):.6g})."
                )
    return ""


def _plausible(dt: float, reading: Reading) -> None:
    """Warn (and note in the reading) when ``dt`` is outside :data:`PLAUSIBLE_DT`: most often a
    time axis in ms labelled 's', or in s labelled 'ms'."""
    lo, hi = PLAUSIBLE_DT
    if lo <= dt <= hi:
        return
    guess = (
        f"time values in ms labelled 's' (if so, set units 'ms': dt would be {dt / 1000:.6g} s, {1000 / dt:.4g} Hz)"
        if dt > hi
        else f"time values in s labelled 'ms' (if so, set units 's': dt would be {dt * 1000:.6g} s, "
        f"{1 / (dt * 1000):.4g} Hz)"
    )
    msg = (
        f"dt = {dt:.6g} s ({1 / dt:.4g} Hz) is outside the sampling of neuronal recordings (0.1 Hz to 10 kHz; "
        f"a larval zebrafish light-sheet volume ~1 Hz, two-photon 3-30 Hz): check the time units; the usual "
        f"cause is {guess}."
    )
    reading.note(msg)
    warnings.warn("neuro: " + msg, UserWarning, stacklevel=4)


# ----------------------------------------------------------------------------- conditions
def _from_ranges(rows, T: int, where: str, dt: float | None = None) -> np.ndarray:
    """One label per step from ``(name, start, stop)`` step ranges that cover ``0..T`` once each."""
    rows = list(rows)
    labels = np.full(T, None, object)
    ends = [float(b) for _, _, b in rows if _number(b)]
    in_seconds = dt is not None and ends and max(ends) != T and dt != 1 and abs(max(ends) - T * dt) <= dt
    hint = (
        f" The ranges end at {max(ends):g}, the recording's duration in seconds ({T} steps of {dt:g} s): "
        "start and stop count steps; give seconds as BIDS columns onset and duration (s) with "
        "trial_type, or convert to steps (round(seconds / dt))."
        if in_seconds
        else ""
    )
    for name, a, b in rows:
        if not (_number(a) and _number(b)) or float(a) != int(float(a)) or float(b) != int(float(b)):
            raise DataValidationError(
                f"{where}: condition {name!r} spans [{a}, {b}): start and stop must be whole "
                "0-based step numbers (stop exclusive)."
                + (hint or " For times in seconds give BIDS columns onset and duration (s) with trial_type.")
            )
        if _missing(name):
            raise DataValidationError(f"{where}: a range [{a}, {b}) has no condition name; name every range.")
        a, b = int(float(a)), int(float(b))
        if not 0 <= a < b <= T:
            raise DataValidationError(
                f"{where}: condition {name!r} spans steps [{a}, {b}), outside the traces' "
                f"{T} steps; give ranges of 0-based steps, stop exclusive, within [0, {T})."
            )
        if any(x is not None for x in labels[a:b]):
            raise DataValidationError(
                f"{where}: condition {name!r} [{a}, {b}) overlaps another; each step takes one condition."
            )
        labels[a:b] = str(name)
    missing = np.flatnonzero(np.equal(labels, None))
    if missing.size:
        raise DataValidationError(
            f"{where}: steps {_listed(missing)} have no condition (the ranges must cover all "
            f"{T} steps); label them (e.g. 'rest') or cut the traces." + hint
        )
    return labels.astype(str)


def _number(x) -> bool:
    try:
        return np.isfinite(float(x))
    except (TypeError, ValueError):
        return False


def _missing(x) -> bool:
    """A label that is no label: None (JSON null), NaN (a blank CSV cell read by pandas), an empty
    string or 'nan' (a NaN made a string); a condition named 'none' is a label."""
    return x is None or (isinstance(x, float) and np.isnan(x)) or str(x).strip().lower() in ("", "nan")


def _labelled(labels: np.ndarray, where: str) -> None:
    """Refuse steps without a condition label (see :func:`_missing`)."""
    gone = np.flatnonzero([_missing(x) for x in labels.ravel()]) if labels.dtype.kind in "OUSf" else np.array([], int)
    if gone.size:
        raise DataValidationError(
            f"Steps {_listed(gone)} have no condition label (blank, null, NaN or 'nan' in "
            f"{where}): label every step (e.g. 'rest') or cut the traces there."
        )


def _from_events(table, T: int, where: str, dt: float, cols: dict) -> np.ndarray:
    """BIDS events (``onset``, ``duration`` in s from the first sample, ``trial_type``) as step ranges:
    ``round(onset / dt)`` to ``round((onset + duration) / dt)``."""
    name = cols.get("trial_type", cols.get("condition"))
    if name is None:
        raise DataValidationError(
            f"{where}: BIDS events need a 'trial_type' (or 'condition') column naming each event's condition."
        )
    rows = []
    for cond, onset, dur in table[[name, cols["onset"], cols["duration"]]].itertuples(index=False):
        if not (_number(onset) and _number(dur)):
            raise DataValidationError(
                f"{where}: event {cond!r} has onset {onset!r} and duration {dur!r}; both must be numbers of seconds."
            )
        rows.append((cond, int(round(float(onset) / dt)), int(round((float(onset) + float(dur)) / dt))))
    return _from_ranges(rows, T, where + " (BIDS onset / duration in s, at dt = " + f"{dt:g} s)")


def _zapbench_labels(T: int) -> np.ndarray:
    off, names = ZAPBENCH["condition_offsets"], ZAPBENCH["condition_names"]
    if T != off[-1]:
        raise DataValidationError(
            f"conditions 'zapbench': ZAPBench's condition offsets cover {off[-1]} steps; these "
            f"traces have {T}. Give the recording's own conditions (--conditions FILE)."
        )
    return _from_ranges(zip(names, off[:-1], off[1:]), T, "ZAPBench's condition offsets")


def _conditions_file(path: Path, T: int, dt: float | None = None) -> np.ndarray:
    """Labels from a file: ``.npy`` / ``.txt`` (a label per step), ``.csv`` / ``.tsv`` (pandas: a
    ``condition`` column, with ``start`` and ``stop`` for step ranges), ``.json`` (a list of
    labels, or ZAPBench's ``condition_offsets`` with ``condition_names``)."""
    suffix = path.suffix.lower()
    if suffix not in CONDITION_SUFFIXES:
        raise ConfigError(f"conditions file {path.name}: expected one of {', '.join(CONDITION_SUFFIXES)}.")
    try:
        if suffix == ".npy":
            return np.asarray(np.load(path, allow_pickle=False))
        if suffix == ".txt":
            return np.array([s.strip() for s in path.read_text().splitlines() if s.strip()], object)
        if suffix == ".json":
            data = json.loads(path.read_text())
            if isinstance(data, dict) and "condition_offsets" in data:
                off = [int(x) for x in data["condition_offsets"]]
                names = data.get("condition_names") or [str(k) for k in range(len(off) - 1)]
                if len(names) != len(off) - 1:
                    raise DataValidationError(
                        f"{path.name}: {len(off)} condition_offsets need {len(off) - 1} "
                        f"condition_names; got {len(names)}."
                    )
                if off[-1] != T:
                    raise DataValidationError(
                        f"{path.name}: the condition_offsets end at step {off[-1]}; the traces "
                        f"have {T} steps (the last offset is the end of the recording)."
                    )
                return _from_ranges(zip(names, off[:-1], off[1:]), T, path.name, dt)
            labels = data.get("condition") if isinstance(data, dict) else data
            if not isinstance(labels, list):
                raise DataValidationError(
                    f"{path.name}: expected a list of labels, {{'condition': [...]}}, or "
                    "{'condition_offsets': [...], 'condition_names': [...]}."
                )
            return np.asarray(labels, object)
        import pandas as pd

        # a blank line inside a label-per-step column is a step without a label, not nothing
        table = pd.read_csv(path, sep="\t" if suffix == ".tsv" else ",", skip_blank_lines=False)
        blank = table.isna().all(axis=1).to_numpy()
        end = len(table) - int(np.argmin(blank[::-1])) if not blank.all() else 0
        table = table.iloc[:end]  # blank lines at the end of the file
    except (DataValidationError, ConfigError):
        raise
    except Exception as err:
        raise DataValidationError(f"Cannot read conditions from {path} ({type(err).__name__}: {err}).") from err
    cols = {str(c).strip().lower(): c for c in table.columns}
    if "onset" in cols and "duration" in cols:
        return _from_events(table[~table.isna().all(axis=1)], T, path.name, dt, cols)
    if "condition" not in cols:
        raise DataValidationError(
            f"{path.name} has columns {list(map(str, table.columns))}; expected a 'condition' "
            "column (a row per step), with 'start' and 'stop' columns for step ranges, or "
            "BIDS events (onset, duration in s, trial_type)."
        )
    if "start" in cols or "stop" in cols:
        if not ("start" in cols and "stop" in cols):
            raise DataValidationError(f"{path.name}: step ranges need both 'start' and 'stop' columns.")
        table = table[~table.isna().all(axis=1)]  # blank lines between ranges
        return _from_ranges(
            table[[cols["condition"], cols["start"], cols["stop"]]].itertuples(index=False), T, path.name, dt
        )
    return table[cols["condition"]].to_numpy(object)


def _beside(path: Path) -> list[Path]:
    """Condition files beside a store: ``<stem>.conditions.<ext>`` and ``conditions.<ext>``; in a suite2p
    output folder, also ``conditions.<ext>`` inside it."""
    stem = path.name[: -len(path.suffix)] if path.suffix else path.name
    names = [f"{stem}.conditions{s}" for s in CONDITION_SUFFIXES] + [f"conditions{s}" for s in CONDITION_SUFFIXES]
    found = [path.parent / n for n in names if (path.parent / n).is_file()]
    if path.is_dir() and zarr_node(path) is None:
        found += [path / f"conditions{s}" for s in CONDITION_SUFFIXES if (path / f"conditions{s}").is_file()]
    return found


def _anchor(source):
    """The path condition files are looked for beside: the suite2p output folder of plane folders
    (given one by one, by a glob or as a folder), else ``source`` itself."""
    paths = many_paths(source)
    if paths is None and isinstance(source, (str, Path)) and plane_folders(source):
        paths = [Path(source)]
    if paths:
        planes = plane_folders(paths[0])
        return planes[0].parent if planes else paths[0].parent
    return source


def _conditions(ds: xr.Dataset, conditions, source, reading: Reading, dt: float | None = None) -> xr.Dataset:
    T = ds.sizes["time"]
    where, found = None, None
    if isinstance(conditions, str) and conditions.strip().lower() == "zapbench":
        labels, where, found = _zapbench_labels(T), "ZAPBench's CONDITION_OFFSETS (neuro.data.zapbench)", "option"
    elif isinstance(conditions, (str, Path)):
        path = Path(conditions)
        if not path.is_file():
            raise ConfigError(f"conditions file {path} does not exist.")
        labels, where, found = _conditions_file(path, T, dt), str(path), "option (file)"
    elif conditions is not None:
        labels, where, found = np.asarray(conditions), "conditions= (labels given)", "option"
    elif "condition" in ds:
        labels, where, found = None, "the file's 'condition' variable", "name"
    else:
        near = _beside(Path(source)) if isinstance(source, (str, Path)) else []
        if len(near) > 1:
            raise ConfigError(
                f"Several condition files beside {Path(source).name}: "
                f"{', '.join(p.name for p in near)}; give one with conditions= (--conditions FILE)."
            )
        if not near:
            stem = Path(str(source)).stem.lower()
            others = (
                sorted(
                    p.name
                    for p in Path(source).parent.iterdir()
                    if p.suffix.lower() in CONDITION_SUFFIXES
                    and p.is_file()
                    and (
                        p.name.lower().startswith(stem)
                        or any(w in p.name.lower() for w in ("cond", "stim", "event", "label"))
                    )
                )
                if isinstance(source, (str, Path))
                else []
            )
            raise MissingVariableError(
                "No stimulus conditions: give conditions= (--conditions FILE: a label per step, or start/stop "
                "ranges; or 'zapbench'), a 'condition' (time) variable in the file, or a conditions.csv beside the "
                f"store (or {Path(str(source)).stem}.conditions.csv)."
                + (f" Beside it, not read (other names): {', '.join(others[:_SHOWN])}." if others else "")
            )
        inside = near[0].parent == Path(source)  # a suite2p output folder's own conditions file
        labels, found = _conditions_file(near[0], T, dt), "file inside" if inside else "file beside"
        where = f"{near[0]} ({'inside the folder' if inside else 'beside the store'})"
    if labels is not None:
        labels = np.asarray(labels)
        _labelled(labels, where)
        if labels.shape != (T,):
            N = ds.sizes["neuron"]
            flip = (
                f" The traces were read as {T} steps x {N} neurons, and {N} labels were given: is the array "
                "stored (neuron, time), as suite2p's F.npy is? Save it transposed (np.save(path, "
                "np.load(path).T)) or name its axes."
                if labels.shape == (N,) and N != T
                else f" One label too many: a header line ({str(labels[0])!r})? Drop it, or use a .csv with a "
                "'condition' column."
                if labels.shape == (T + 1,)
                else ""
            )
            raise DimensionError(
                f"conditions has shape {labels.shape}; expected one label per time step ({T},)." + flip
            )
        if "condition" in ds:
            reading.note("The file's own 'condition' variable was replaced by the conditions given.")
        ds = ds.assign(condition=("time", labels.astype(str)))
    else:
        _labelled(np.asarray(ds["condition"].values), where)
    cond = np.asarray(ds["condition"].values).astype(str)
    names, counts = np.unique(cond, return_counts=True)
    reading.add("condition", "condition" if found == "name" else "", found, "", "label per step", "")
    reading.fact("conditions", "where from", where)
    reading.fact(
        "conditions", "how many", f"{len(names)}: " + ", ".join(f"{n} ({c} steps)" for n, c in zip(names, counts))
    )
    return ds


# ----------------------------------------------------------------------------- neurons
def _drop_neurons(ds: xr.Dataset, reading: Reading) -> xr.Dataset:
    """Drop (and name) neurons with NaN / inf values or constant over the recording; refuse a time
    step that is NaN in every neuron."""
    act = ds["activity"]
    T, N = act.shape
    bad, row_bad = np.zeros(N, np.int64), np.ones(T, bool)
    hi, lo = np.full(N, np.nan), np.full(N, np.nan)
    step = max(act.chunks[1][0], _NEURON_BLOCK) if act.chunks else _NEURON_BLOCK  # whole dask chunks
    for a in range(0, N, step):  # blocks of neurons: memory of one block, never of the whole recording
        X = np.asarray(act[:, a : a + step].values)
        fin = np.isfinite(X)
        bad[a : a + X.shape[1]] = T - fin.sum(0)
        row_bad &= ~fin.any(1)
        hi[a : a + X.shape[1]], lo[a : a + X.shape[1]] = X.max(0), X.min(0)  # NaN where bad: those are dropped
    rows = np.flatnonzero(row_bad)
    if rows.size:
        raise DataValidationError(
            f"Time steps {_listed(rows)} are NaN/inf in every neuron (dropped frames?): fill "
            "them (e.g. ds.interpolate_na('time')) or cut the recording there; dropping them "
            "would join the steps on either side."
        )
    const = (bad == 0) & (hi == lo)
    names = np.asarray(ds["neuron"].values) if "neuron" in ds.coords else None
    nan_idx, const_idx = np.flatnonzero(bad > 0), np.flatnonzero(const)
    reading.fact("rows", "time steps dropped", "none (a dropped step would join the steps on either side)")
    reading.fact(
        "rows",
        "neurons dropped (NaN/inf)",
        f"{nan_idx.size}" + (f": {_listed(nan_idx, names)}" if nan_idx.size else ""),
    )
    reading.fact(
        "rows",
        "neurons dropped (constant)",
        f"{const_idx.size}" + (f": {_listed(const_idx, names)}" if const_idx.size else ""),
    )
    keep = np.flatnonzero((bad == 0) & ~const)
    reading.fact("rows", "neurons kept", f"{keep.size} of {N}")
    if keep.size == N:
        return ds
    if keep.size == 0:
        raise DataValidationError(
            f"Every one of the {N} neurons holds NaN/inf values or is constant; nothing is "
            "left to forecast. Fix: interpolate short gaps before reading."
        )
    warnings.warn(
        f"neuro: {N - keep.size} of {N} neurons dropped ({nan_idx.size} with NaN/inf values, "
        f"{const_idx.size} constant); their names are in the reading's 'rows' section.",
        UserWarning,
        stacklevel=4,
    )
    if "neuron" not in ds.coords:  # keep each neuron's column in the file as its name
        ds = ds.assign_coords(neuron=np.arange(N))
    sel = {"neuron": keep, **({"pre_neuron": keep} if "pre_neuron" in ds.dims else {})}
    return ds.isel(sel)


def _extras(ds: xr.Dataset, reading: Reading) -> None:
    """The optional variables, said back (or what stands in for them)."""
    if "stimulus" in ds:
        s = ds["stimulus"]
        reading.add(
            "stimulus",
            "stimulus",
            "name",
            s.attrs.get("units", ""),
            "scaled by its largest training value",
            "divided per feature by its largest training magnitude",
        )
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
        A zarr store or bare zarr array (a folder), a netCDF file, a ``.npy`` array, a suite2p output
        (its ``suite2p/`` folder, the folder above it, one ``planeN`` folder, a list of plane folders or
        a glob of them: :mod:`neuro.data.suite2p`), an ``xr.Dataset``, an ``xr.DataArray`` of the traces
        (its axis names and coordinates read) or a ``(time, neuron)`` array.
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
    anchor = _anchor(source)
    path_like = isinstance(anchor, (str, Path))
    reading = Reading(product="", source=str(anchor) if path_like else "")
    ds = _open(source, reading)
    ds = _activity(ds, reading)
    step = _sampling(ds, None if dt is None else float(dt), reading)
    ds = _stack_trials(ds, reading)
    ds = _conditions(ds, conditions, anchor, reading, step)
    ds = _drop_neurons(ds, reading)
    _extras(ds, reading)
    return ds.assign_attrs(dt=step), reading

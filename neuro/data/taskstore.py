"""A forecasting task written once to the study's store, for the units that fit and score on it.

The baseline fits run as units (:func:`neuro.run.run_baselines`), possibly on Dask workers;
each needs the task. :func:`save_task` writes it once per study to the study's
:class:`~neuro.data.stores.ArrayStore` (its arrays as ``.npy`` files shared with everything else
the study stores, its names and numbers as a JSON manifest) and :func:`load_task` reads it
back, once per process, as a :class:`~neuro.tasks.ForecastTask` that scores exactly as the
original (the same arrays, bit for bit, and dtypes).

Of the simulated recording (``task.recording``, the whole simulation: 24 MB at the quick
size) only what scoring reads is kept (:data:`RECORDING_FIELDS`: which units are observed,
the split of every trial and the tail angle the tail-beat readout is fitted on); the study
keeps the whole recording in memory for its report.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

import numpy as np
import xarray as xr

from ..tasks import ForecastTask, LazyWindows, Windows
from .stores import ArrayStore

__all__ = ["save_task", "load_task", "RECORDING_FIELDS"]

#: the recording's variables a unit reads (faithfulness: observed units, train trials, tail angle)
RECORDING_FIELDS = ("observed", "split", "tail_angle")
_WINDOW_FIELDS = ("context", "stim_context", "stim_future", "target", "trial", "start")
_LAZY_FIELDS = ("Z", "S", "origin", "trial", "start")


def _plain(v):
    """A JSON value for a non-array metadata value (tuples marked, numpy scalars as numbers)."""
    if isinstance(v, tuple):
        return {"tuple": [_plain(x) for x in v]}
    if isinstance(v, list):
        return [_plain(x) for x in v]
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, Path):
        return str(v)
    if v is None or isinstance(v, (str, bool, int, float)):
        return v
    raise TypeError(f"task metadata value of type {type(v).__name__} cannot be written to the study store")


def _unplain(v):
    if isinstance(v, dict) and set(v) == {"tuple"}:
        return tuple(_unplain(x) for x in v["tuple"])
    if isinstance(v, list):
        return [_unplain(x) for x in v]
    return v


def _windows_arrays(w, prefix: str) -> tuple[dict, dict]:
    """``(arrays, spec)`` of one split's windows: in memory, or cut lazily from one array."""
    if isinstance(w, LazyWindows):
        return {f"{prefix}/{k}": getattr(w, k) for k in _LAZY_FIELDS}, {"lazy": True, "context": w.C, "horizon": w.H}
    return {f"{prefix}/{k}": getattr(w, k) for k in _WINDOW_FIELDS}, {"lazy": False}


def _windows(arrays: dict, prefix: str, spec: dict):
    if spec["lazy"]:
        a = [arrays[f"{prefix}/{k}"] for k in _LAZY_FIELDS]
        return LazyWindows(a[0], a[1], a[2], spec["context"], spec["horizon"], a[3], a[4])
    return Windows(*(arrays[f"{prefix}/{k}"] for k in _WINDOW_FIELDS))


def save_task(task: ForecastTask, store: ArrayStore | str | os.PathLike) -> Path:
    """Write ``task`` to ``store`` (arrays already there are not written again); returns the
    path of its manifest (``task-<name>-<hash>.json``), for :func:`load_task`."""
    store = store if isinstance(store, ArrayStore) else ArrayStore(store)
    arrays = {"train/series": task.train_series, "train/stim": task.train_stim}
    splits = {}
    for sp, w in task.windows().items():
        a, splits[sp] = _windows_arrays(w, f"windows/{sp}")
        arrays.update(a)
    meta = {}
    for k, v in task.meta.items():
        if isinstance(v, np.ndarray):
            arrays[f"meta/{k}"] = v
            meta[k] = {"array": True}
        else:
            meta[k] = {"value": _plain(v)}
    for k, v in task.probes.items():
        arrays[f"probe/{k}"] = v
    if task.true_weights is not None:
        arrays["true_weights"] = task.true_weights
    recording = {}
    for k in RECORDING_FIELDS if task.recording is not None else ():
        if k in task.recording.variables:
            arrays[f"recording/{k}"] = task.recording[k].values
            recording[k] = list(task.recording[k].dims)
    attrs = dict(
        name=task.name,
        context=task.context,
        horizon=task.horizon,
        signal=task.signal,
        dt=task.dt,
        splits=splits,
        ood=list(task.ood),
        meta=meta,
        probes=list(task.probes),
        recording=recording if task.recording is not None else None,
    )
    return store.save(f"task-{task.name}", arrays, **attrs)


@functools.lru_cache(maxsize=2)
def load_task(manifest: str | os.PathLike) -> ForecastTask:
    """The task :func:`save_task` wrote (read once per process: a manifest never changes, its
    name is its content's hash). Its ``recording`` holds :data:`RECORDING_FIELDS` only."""
    arrays, a = ArrayStore.load(manifest)
    windows = {sp: _windows(arrays, f"windows/{sp}", spec) for sp, spec in a["splits"].items()}
    meta = {k: arrays[f"meta/{k}"] if m.get("array") else _unplain(m["value"]) for k, m in a["meta"].items()}
    recording = None
    if a["recording"] is not None:
        recording = xr.Dataset({k: (tuple(dims), arrays[f"recording/{k}"]) for k, dims in a["recording"].items()})
    return ForecastTask(
        name=a["name"],
        context=a["context"],
        horizon=a["horizon"],
        signal=a["signal"],
        dt=a["dt"],
        train_series=arrays["train/series"],
        train_stim=arrays["train/stim"],
        val=windows["val"],
        test=windows["test"],
        ood={s: windows[f"ood_{s}"] for s in a["ood"]},
        meta=meta,
        true_weights=arrays.get("true_weights"),
        recording=recording,
        probes={k: arrays[f"probe/{k}"] for k in a["probes"]},
    )

"""Small recordings laid out as the products scientists bring, written from each layout's own
documentation, for the neuro reader's tests.

- ZAPBench (github.com/google-research/zapbench, ``zapbench/constants.py`` and
  ``colabs/datasets.ipynb``; Lueckmann et al., ICLR 2025): the traces are one zarr v3 array
  with no group, axes labelled ``t`` (time) and ``f`` (neuron), no time coordinate, sampled at
  about 1 Hz; the conditions are step ranges given by ``CONDITION_OFFSETS`` (the first step of
  each condition, then the end) with ``CONDITION_NAMES``.
- The neutral layout (docs/neuro.md, "Your data"): a zarr group or netCDF file with
  ``activity (time, neuron)``, ``condition (time)`` and a ``time`` coordinate whose units say
  what a step is (CF conventions: a ``units`` attribute such as ``ms``, ``s``, ``min``, or
  ``"milliseconds since 2024-09-30"`` that xarray decodes into datetimes).

Here a ZAPBench-like recording has 4 conditions of unequal length (offsets below, 240 steps)
and 30 neurons, one volume every 914 ms (about 1.09 Hz).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import xarray as xr

#: ZAPBench-like conditions: names (three of ZAPBench's and its held-out 'taxis') and offsets
NAMES = ("gain", "dots", "taxis", "dark")
OFFSETS = (0, 70, 140, 190, 240)
T, N = OFFSETS[-1], 30
#: the volume period, ms (ZAPBench samples about once a second)
STEP_MS = 914.0


def labels() -> np.ndarray:
    """One condition per step, expanded by hand from :data:`OFFSETS`."""
    return np.repeat(np.array(NAMES), np.diff(OFFSETS))


def traces(seed: int = 0) -> np.ndarray:
    """``(T, N)`` float32 dF/F-like traces: slow AR(1) fluctuations plus a condition-specific offset."""
    rng = np.random.default_rng(seed)
    x = np.zeros((T, N))
    drive = rng.normal(0, 0.3, (len(NAMES), N))
    code = np.repeat(np.arange(len(NAMES)), np.diff(OFFSETS))
    for t in range(1, T):
        x[t] = 0.9 * x[t - 1] + drive[code[t]] * 0.1 + 0.1 * rng.standard_normal(N)
    return x.astype(np.float32)


def bare_array(path: Path, X: np.ndarray | None = None, dimension_names=("t", "f"), chunks=(64, 16)) -> Path:
    """ZAPBench's layout: one zarr v3 array, no group, no coordinates (``chunks``: small by default, so
    that reading crosses chunks)."""
    import zarr

    X = traces() if X is None else X
    arr = zarr.create_array(path, shape=X.shape, dtype=X.dtype, chunks=chunks, dimension_names=dimension_names)
    arr[:] = X
    return path


def zapbench_conditions_json(path: Path) -> Path:
    """The conditions as ZAPBench gives them: offsets and names (``zapbench/constants.py``)."""
    path.write_text(json.dumps({"condition_offsets": list(OFFSETS), "condition_names": list(NAMES)}))
    return path


def conditions_csv(path: Path) -> Path:
    """The conditions as step ranges, one row per condition: ``condition,start,stop``."""
    rows = ["condition,start,stop"] + [f"{n},{a},{b}" for n, a, b in zip(NAMES, OFFSETS[:-1], OFFSETS[1:])]
    path.write_text("\n".join(rows) + "\n")
    return path


def dataset(
    time: np.ndarray | None, time_attrs: dict | None = None, X: np.ndarray | None = None, with_conditions: bool = True
) -> xr.Dataset:
    """The neutral layout with the given time coordinate (values and attributes as the file holds them)."""
    X = traces() if X is None else X
    data = {"activity": (("time", "neuron"), X, {"units": "1", "long_name": "dF/F"})}
    if with_conditions:
        data["condition"] = ("time", labels())
    coords = {"neuron": [f"n{k:03d}" for k in range(X.shape[1])]}
    if time is not None:
        coords["time"] = ("time", time, dict(time_attrs or {}))
    return xr.Dataset(data, coords=coords)


def group(path: Path, ds: xr.Dataset, encoding: dict | None = None, zarr_format: int = 3) -> Path:
    """A zarr group written by xarray (CF encoding of the time coordinate where ``encoding`` says)."""
    import warnings

    with warnings.catch_warnings():  # zarr v3 has no specification yet for the condition strings' dtype
        warnings.simplefilter("ignore")
        ds.to_zarr(path, zarr_format=zarr_format, encoding=encoding or {}, consolidated=False)
    return path

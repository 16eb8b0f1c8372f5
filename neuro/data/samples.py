"""Your own recordings as a forecasting task: activity traces ``(time, neuron)`` with a
stimulus-condition label per time step (a ZAPBench-like layout) -> :class:`~neuro.tasks.ForecastTask`.

The neutral layout (zarr or netCDF; or a ``.npy`` array plus the labels as arguments):

``activity (time, neuron)``
    the traces (any units: they are z-scored per neuron with training statistics);
``condition (time)``
    the stimulus condition of each step (strings);
``split (time)``, optional
    ``train`` / ``val`` / ``test``, or the name of an out-of-distribution suite; without it
    each run of one condition is cut in time into ``fractions`` (0.7 / 0.1 / 0.2);
``trial (time)``, optional
    a trial number: a new segment starts where it changes (windows never cross segments);
``stimulus (time, feature)``, optional
    stimulus covariates; without them, a one-hot code of the condition;
``prior_mask (neuron, pre_neuron)``, ``prior_sign (neuron)``, optional
    a wiring prior (allowed edges post x pre; the sign of each presynaptic unit) for the
    search with priors; without them every edge is allowed and no sign imposed;
``time`` coordinate with its units (``ms``, ``s``, ``min``, CF ``"seconds since ..."``; or
``attrs["dt"]`` in s, or ``dt=``); ``neuron`` coordinate: names.

A bare zarr array of traces (ZAPBench's layout, :mod:`neuro.data.zapbench`) is read too, with the
conditions from ``conditions=`` or a file beside it. How each convention is read, and what is
refused, is :mod:`neuro.data.reading`'s; what was read is said back as a
:class:`scimech.studies.reading.Reading` (``task.meta["reading"]``, :func:`inspect_traces`).

Segments are runs of constant (trial, condition, split). Windows are cut from each segment
exactly as :func:`neuro.tasks.make_windows` cuts a simulated trial (same stride, same
subsampling with the same seeds), so a simulated recording written in this layout gives
the task :func:`neuro.tasks.build_task` builds from it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import xarray as xr

from scimech.errors import ConfigError, DataValidationError, DimensionError
from scimech.studies.reading import Reading

from .reading import read_recording
from .splits import ID_SPLITS, UNSCORED, assign_splits, segments

if TYPE_CHECKING:
    from ..tasks import ForecastTask, LazyWindows

# neuro.tasks (and the simulator it imports, about 2 s) is imported where a task is built, so that
# reading and inspecting traces stay fast

__all__ = ["from_traces", "read_traces", "inspect_traces"]

#: neurons handled at once when z-scoring (float64 statistics over a block of columns)
_COLUMN_BLOCK = 1024
#: above this many neurons a task without a wiring prior keeps its all-ones prior as a
#: broadcast view (no N x N array)
_DENSE_PRIOR_MAX = 4096


def read_traces(source, *, conditions=None, dt: float | None = None) -> xr.Dataset:
    """The neutral layout as a Dataset, from a path (zarr store or bare zarr array, ``.nc``,
    ``.npy``), a Dataset or DataArray, or a ``(time, neuron)`` array:
    :func:`neuro.data.reading.read_recording` without its :class:`~scimech.studies.reading.Reading`.

    Examples
    --------
    >>> from neuro.data import read_traces
    >>> rng = np.random.default_rng(0)
    >>> traces = rng.normal(size=(400, 5)).astype("float32")  # (time, neuron)
    >>> conditions = np.repeat(["dark", "flash"], 200)  # one stimulus label per time step
    >>> ds = read_traces(traces, conditions=conditions, dt=0.5)
    >>> ds["activity"].dims, ds["activity"].shape, ds.attrs["dt"]
    (('time', 'neuron'), (400, 5), 0.5)
    >>> ds["condition"].values[[0, -1]].tolist()
    ['dark', 'flash']
    """
    return read_recording(source, conditions=conditions, dt=dt)[0]


def _windows(
    Z, S, pieces, context: int, horizon: int, stride: int, max_windows: int | None, seed: int, reach: dict | None = None
) -> LazyWindows:
    """Windows of every piece, enumerated and subsampled as :func:`neuro.tasks.make_windows` does
    (cut lazily from ``Z``: see :class:`neuro.tasks.LazyWindows`).

    ``reach`` (ZAPBench): ``{piece start: earliest row its contexts may use}``; the forecast
    then lies inside the piece and the context may reach back before it (into the same
    condition's earlier steps), so every step of a piece is forecast once at stride 1."""
    if reach is not None:
        idx = []
        for i, (a, b) in enumerate(pieces):
            lo = max(a - context, reach.get(a, a))
            idx += [(i, s) for s in range(lo - a, b - a - context - horizon + 1, stride)]
    else:
        idx = [(i, s) for i, (a, b) in enumerate(pieces) for s in range(0, b - a - context - horizon + 1, stride)]
    if not idx:
        lengths = sorted({b - a for a, b in pieces})
        raise ConfigError(
            f"No segment is long enough for context {context} + horizon {horizon} (segment lengths "
            f"{lengths[:5]}{'...' if len(lengths) > 5 else ''}); shorten the windows."
        )
    if max_windows is not None and len(idx) > max_windows:
        rng = np.random.default_rng(seed)
        idx = [idx[k] for k in np.sort(rng.choice(len(idx), max_windows, replace=False))]
    tr = np.array([i for i, _ in idx])
    st = np.array([s for _, s in idx])
    origin = np.array([pieces[i][0] for i in tr]) + st
    from ..tasks import LazyWindows

    return LazyWindows(Z, S, origin, context, horizon, tr, st)


def _train_trials(Z, S, pieces, min_len: int) -> tuple[np.ndarray, np.ndarray]:
    """Training segments as equal-length trials ``(n, L, N)``: L is the shortest segment that
    holds a window; longer segments are cut into whole trials of L steps (the rest dropped)."""
    lengths = [b - a for a, b in pieces if b - a >= min_len]
    if not lengths:
        raise ConfigError(
            f"No training segment is long enough for context + horizon = {min_len} steps; shorten the windows."
        )
    L = min(lengths)
    cuts = [(a + k * L, a + (k + 1) * L) for a, b in pieces if b - a >= min_len for k in range((b - a) // L)]
    return np.stack([Z[a:b] for a, b in cuts]), np.stack([S[a:b] for a, b in cuts])


def _zscored(ds: xr.Dataset, train: np.ndarray, min_std: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(Z, mean, std)``: the activity z-scored per neuron with the training steps' statistics,
    ``Z`` in float32; refuses NaN / inf (naming how many and where). Works through blocks of
    neurons in float64, so the traces are never copied whole in float64."""
    X = ds["activity"].values
    T, N = X.shape
    Z = np.empty((T, N), np.float32)
    mu, sd = np.empty(N), np.empty(N)
    per = np.zeros(N, np.int64)
    for a in range(0, N, _COLUMN_BLOCK):
        b = min(a + _COLUMN_BLOCK, N)
        Xb = np.asarray(X[:, a:b], np.float64)
        per[a:b] = (~np.isfinite(Xb)).sum(0)
        if per[a:b].any():
            continue
        Xt = Xb[train]
        mu[a:b] = Xt.mean(0)
        sd[a:b] = np.maximum(Xt.std(0), min_std)
        Z[:, a:b] = ((Xb - mu[a:b]) / sd[a:b]).astype(np.float32)
    if per.any():
        raise DataValidationError(
            f"The traces hold {int(per.sum())} NaN/inf values ({int((per > 0).sum())} of "
            f"{N} neurons, e.g. neuron {int(np.argmax(per))}). Fix: interpolate short "
            "gaps or drop those neurons before building the task."
        )
    return Z, mu, sd


def inspect_traces(
    source,
    *,
    conditions=None,
    dt: float | None = None,
    held_out: Sequence[str] = (),
    splits=None,
    protocol: str | None = None,
    context: int = 4,
    horizon: int = 32,
) -> Reading:
    """What :func:`from_traces` would read from ``source``, said back without building the task
    (no z-scoring, no windows, no torch): the traces, time, conditions, stimulus, splits and
    the neurons dropped (``scimech neuro inspect PATH``). Arguments as :func:`from_traces`; the
    same refusals.

    Examples
    --------
    >>> from neuro.data import inspect_traces
    >>> rng = np.random.default_rng(0)
    >>> traces = rng.normal(size=(400, 5)).astype("float32")  # (time, neuron)
    >>> conditions = np.repeat(["dark", "flash"], 200)  # one stimulus label per time step
    >>> reading = inspect_traces(traces, conditions=conditions, dt=0.5, context=4, horizon=4)
    >>> print(reading)  # doctest: +ELLIPSIS
    Read: array in memory (400, 5)
    ...
      neurons kept: 5 of 5
    ...
    """
    ds, reading = read_recording(source, conditions=conditions, dt=dt)
    assign_splits(
        ds,
        reading,
        protocol=protocol,
        splits=splits,
        trials=None,
        held_out=held_out,
        context=context,
        horizon=horizon,
        max_windows=None,
    )
    return reading


def _stimulus(ds: xr.Dataset, stimulus, cond: np.ndarray) -> np.ndarray:
    """Stimulus covariates ``(time, feature)``: given, the file's, or a one-hot code of the condition."""
    T = len(cond)
    if stimulus is not None:
        S = np.asarray(stimulus, np.float64)
    elif "stimulus" in ds:
        S = np.asarray(ds["stimulus"].transpose("time", ...).values, np.float64)
    else:
        names = sorted(set(cond))
        S = (cond[:, None] == np.array(names)[None, :]).astype(np.float64)
    if S.ndim != 2 or len(S) != T:
        raise DimensionError(f"stimulus has shape {S.shape}; expected ({T}, features).")
    if not np.isfinite(S).all():
        raise DataValidationError(f"The stimulus covariates hold {int((~np.isfinite(S)).sum())} NaN/inf values.")
    return S


def _sources(source) -> str:
    """Several paths (suite2p's plane folders) in words, else the kind of object given."""
    from .reading import many_paths

    paths = many_paths(source) if isinstance(source, (list, tuple)) else None
    return "; ".join(map(str, paths)) if paths else type(source).__name__


def _meta(ds: xr.Dataset, N: int, cond: np.ndarray, source, **stats) -> dict:
    """The task's per-unit metadata: names, no cell types, the wiring prior (or every edge
    allowed, no sign imposed), the z-scoring statistics and where the traces came from."""
    if "prior_mask" in ds:
        mask = np.asarray(ds["prior_mask"].values, np.float32)
    elif N > _DENSE_PRIOR_MAX:  # every edge allowed: a view, not N x N values
        mask = np.broadcast_to(np.float32(1.0), (N, N))
    else:
        mask = np.ones((N, N), np.float32)
    sign = np.asarray(ds["prior_sign"].values, np.float32) if "prior_sign" in ds else np.zeros(N, np.float32)
    if mask.shape != (N, N) or sign.shape != (N,):
        raise DimensionError(f"prior_mask {mask.shape} / prior_sign {sign.shape}: expected ({N}, {N}) / ({N},).")
    neurons = np.asarray(ds["neuron"].values).astype(str) if "neuron" in ds.coords else np.arange(N).astype(str)
    return dict(
        type=np.array(["unknown"] * N),
        side=np.array(["M"] * N),
        segment=np.full(N, -1),
        region=np.array(["unknown"] * N),
        name=neurons,
        prior_mask=mask,
        prior_sign=sign,
        type_code=np.zeros(N, int),
        side_code=np.full(N, 2),
        **stats,
        has_prior="prior_mask" in ds,
        # per neuron, where the recording has them (suite2p: each plane's acquisition offset in the volume, s)
        **{k: np.asarray(ds[k].values) for k in ("plane", "acquisition_offset") if k in ds.coords},
        conditions=sorted(set(cond)),
        source=str(source) if isinstance(source, (str, Path)) else _sources(source),
    )


def from_traces(
    source,
    *,
    conditions=None,
    splits=None,
    held_out: Sequence[str] = (),
    trials=None,
    stimulus=None,
    dt: float | None = None,
    context: int = 4,
    horizon: int = 32,
    max_windows: int | None = 400,
    seed: int = 0,
    stim_scale=None,
    min_std: float = 1e-6,
    name: str | None = None,
    protocol: str | None = None,
) -> ForecastTask:
    """A forecasting task from your traces (see the module doc for the layout).

    Parameters
    ----------
    source
        A zarr store or bare zarr array (ZAPBench's layout) / netCDF file / ``.npy`` path, an
        ``xr.Dataset``, an ``xr.DataArray`` (its axis names and coordinates read) or a ``(time,
        neuron)`` array (read by :func:`neuro.data.reading.read_recording`).
    conditions
        One stimulus-condition label per time step, a file of them or of step ranges, or
        ``"zapbench"`` (default: the file's ``condition``, else a conditions file beside it).
    splits
        One label per time step (``train``, ``val``, ``test`` or an OOD suite name), or three
        fractions (train, val, test) applied in time within each segment (default: the
        file's ``split``, else ``(0.7, 0.1, 0.2)``).
    held_out
        Conditions never trained on: all their steps form the OOD suite ``held_out_condition``.
    trials, stimulus
        A trial number per step; stimulus covariates ``(time, feature)`` (default: the file's,
        else a one-hot code of the condition).
    dt
        Seconds between samples (default: the ``time`` coordinate's step, read with its units;
        else ``attrs["dt"]``). Needed for a time axis without units or traces without one;
        refused when it disagrees with a coordinate that has units.
    context, horizon, max_windows, seed
        As :func:`neuro.tasks.build_task`: window lengths in samples, windows per split,
        seed of their subsampling (val ``seed + 1``, test ``seed + 2``, OOD suites after).
    stim_scale
        Divisor of each stimulus feature (default: its largest magnitude on training steps).
    min_std
        Floor of the per-neuron standard deviation used to z-score (units of the traces).

    protocol
        ``"zapbench"``: ZAPBench's protocol (:data:`~neuro.data.zapbench.ZAPBENCH`): each condition loses one step
        at either end; of the ``n`` steps left, the last ``int(0.2 n)`` test, the ``int(0.1 n)``
        before them validate and the rest trains, as ``zapbench/data_utils.py`` counts them
        (``splits`` must be None); the held-out condition (default ``taxis``, else give
        ``held_out``) is the OOD suite ``held_out_condition``, forecast from its step 256
        (``MAX_CONTEXT_LENGTH``) on whatever the context; context at most 256 (the
        benchmark reports 4 and 256), horizon 32; every window at stride 1
        (``max_windows`` ignored), each forecast inside its split, its context reaching back
        into the same condition's earlier steps. Windows are cut lazily (no memory until
        scored, in chunks).

    Returns
    -------
    ForecastTask
        ``signal = "traces"``, no ground truth (``true_weights`` None, no probes): the
        baselines and the search score ID / OOD forecasts; faithfulness to a circuit needs
        a simulator. ``meta["reading"]``: what was read, a :class:`scimech.studies.reading.Reading`
        as JSON. Neurons with NaN / inf values or constant are dropped (a warning names them).

    Raises
    ------
    DimensionError
        Traces not ``(time, neuron)``; labels or covariates of another length.
    DataValidationError
        Empty traces; a time step NaN in every neuron; NaN / inf in the covariates; a split
        without steps; an irregular or non-increasing time axis; condition ranges that leave
        steps out.
    UnitsError
        A time coordinate whose units are not a time.
    MissingVariableError
        No conditions.
    ConfigError
        Unknown held-out condition, bad fractions, segments too short for the windows, no dt
        (a time axis without units, or none), ``dt`` against the coordinate.

    Examples
    --------
    >>> from neuro.data import from_traces
    >>> rng = np.random.default_rng(0)
    >>> traces = rng.normal(size=(400, 5)).astype("float32")  # (time, neuron)
    >>> conditions = np.repeat(["dark", "flash"], 200)  # one stimulus label per time step
    >>> task = from_traces(traces, conditions=conditions, dt=0.5, context=4, horizon=4, max_windows=20)
    >>> task.n_neurons, task.context, task.horizon, task.dt
    (5, 4, 4, 0.5)
    >>> task.train_series.shape  # (segment, time, neuron): 70% of each condition's 200 steps
    (2, 140, 5)
    >>> np.allclose(task.train_series.mean(axis=(0, 1)), 0.0, atol=1e-5)  # z-scored on the training steps
    True
    """
    ds, reading = read_recording(source, conditions=conditions, dt=dt)
    T, N = ds["activity"].shape
    cond = np.asarray(ds["condition"].values).astype(str)
    dt = float(ds.attrs["dt"])
    held_out, max_windows, stride, split, reach, trial = assign_splits(
        ds,
        reading,
        protocol=protocol,
        splits=splits,
        trials=trials,
        held_out=held_out,
        context=context,
        horizon=horizon,
        max_windows=max_windows,
    )
    S = _stimulus(ds, stimulus, cond)
    tr = split == "train"
    Z, mu, sd = _zscored(ds, tr, min_std)
    if stim_scale is None:
        stim_scale = np.abs(S[tr]).max(0)
        stim_scale = np.where(stim_scale > 0, stim_scale, 1.0)
    stim_scale = np.asarray(stim_scale, np.float64)
    Sz = (S / stim_scale).astype(np.float32)
    pieces = {}
    for a, b in segments([trial, cond, split]):
        if split[a] not in UNSCORED:
            pieces.setdefault(split[a], []).append((a, b))
    train_series, train_stim = _train_trials(Z, Sz, pieces["train"], context + horizon)
    val = _windows(Z, Sz, pieces["val"], context, horizon, stride, max_windows, seed + 1, reach)
    test = _windows(Z, Sz, pieces["test"], context, horizon, stride, max_windows, seed + 2, reach)
    from ..tasks import OOD_SUITES, ForecastTask

    suites = [s for s in OOD_SUITES if s in pieces] + [s for s in pieces if s not in (*ID_SPLITS, *OOD_SUITES)]
    ood = {}
    for j, s in enumerate(suites):
        k = OOD_SUITES.index(s) if s in OOD_SUITES else len(OOD_SUITES) + j
        ood[s] = _windows(Z, Sz, pieces[s], context, horizon, stride, max_windows, seed + 3 + k, reach)
    meta = _meta(ds, N, cond, source, mean=mu, std=sd, stim_scale=stim_scale)
    meta["reading"] = json.dumps(reading.to_dict())
    if protocol:
        meta.update(protocol=protocol, held_out=tuple(held_out))
    prefix = f"traces-{protocol}" if protocol else "traces"
    return ForecastTask(
        name=name or f"{prefix}-c{context}-h{horizon}",
        context=context,
        horizon=horizon,
        signal="traces",
        dt=float(dt),
        train_series=train_series,
        train_stim=train_stim,
        val=val,
        test=test,
        ood=ood,
        meta=meta,
        true_weights=None,
    )

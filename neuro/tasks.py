"""Forecasting tasks on simulated recordings: context -> horizon, MAE per step (ZAPBench-style).

A :class:`ForecastTask` holds whole training trials (for fitting any transition model),
ID validation and test windows (same conditions, held-out trials) and OOD suites:

``held_out_condition``
    a stimulus never trained on (``turning``, the analogue of ZAPBench's held-out taxis);
``fast_speed``
    gratings faster than any training speed;
``lesion``
    commissural (V0d) inhibition cut;
``fluid_shift``
    drag x2.5 and weaker muscles (body/fluid parameters);
``open_loop``
    visual feedback off (training is closed loop).

Signals: ``"rates"`` (latent rates of the observed units at 200 Hz with observation noise;
the default, where spinal dynamics are visible) or ``"calcium"`` (10 Hz calcium-like traces).
Every window carries the future stimulus as a covariate. Series are z-scored per neuron with
statistics of the training trials; MAE is in those units.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import xarray as xr

from scimech.errors import ConfigError

from .sim.analysis import bout_onsets
from .sim.circuit import SPINAL_TYPES
from .sim.recording import simulate
from .sim.simulator import Perturbation

__all__ = [
    "Windows",
    "LazyWindows",
    "window_index",
    "BATCH_ELEMENTS",
    "ForecastTask",
    "build_task",
    "make_windows",
    "mae_per_step",
    "evaluate",
    "ID_CONDITIONS",
    "OOD_SUITES",
    "prior_mask",
    "quick_stage",
]

ID_CONDITIONS = (
    dict(condition="grating_fwd", speed=5.0),
    dict(condition="grating_fwd", speed=10.0),
    dict(condition="grating_fwd", speed=15.0),
    dict(condition="grating_left"),
    dict(condition="grating_right"),
    dict(condition="flash"),
    dict(condition="dark"),
    dict(condition="gain_change"),
    dict(condition="grating_bwd"),
)
OOD_SUITES = ("held_out_condition", "fast_speed", "lesion", "fluid_shift", "open_loop")
SWIM_WINDOWS_PER_TRIAL = 4  # swimming probe windows per test trial (faithfulness read-outs)
#: activity values (windows x steps x neurons) held at once when windows are read in chunks
#: (32 M float32 values: 128 MB); a task of today's simulated sizes is one chunk
BATCH_ELEMENTS = 2**25


@dataclass
class Windows:
    """Forecast windows: ``context (n, C, N)``, ``stim_context (n, C, K)``, ``stim_future (n, H, K)``,
    ``target (n, H, N)``; ``trial``/``start`` say where each came from."""

    context: np.ndarray
    stim_context: np.ndarray
    stim_future: np.ndarray
    target: np.ndarray
    trial: np.ndarray
    start: np.ndarray

    def __len__(self) -> int:
        return len(self.context)

    def subset(self, n: int) -> Windows:
        return Windows(
            *(a[:n] for a in (self.context, self.stim_context, self.stim_future, self.target, self.trial, self.start))
        )

    def as_dict(self, prefix: str) -> dict:
        return {f"{prefix}/{k}": getattr(self, k) for k in ("context", "stim_context", "stim_future", "target")}

    def batches(self, max_elements: int | None = None):
        """The windows in order, in chunks (here one: they are in memory already)."""
        yield self

    def neurons(self, idx) -> Windows:
        """The same windows restricted to the units ``idx``."""
        return Windows(
            self.context[..., idx], self.stim_context, self.stim_future, self.target[..., idx], self.trial, self.start
        )


class LazyWindows:
    """Forecast windows cut on demand from one ``(time, neuron)`` array (recordings: ten
    thousand neurons x hundreds of windows do not fit in memory as copies).

    ``origin[k]`` is the row of ``Z`` where window ``k``'s context starts; the attributes of
    :class:`Windows` (``context``, ``target``, ...) gather every window (use them on small
    tasks), :meth:`batches` yields them in chunks of at most ``max_elements`` values."""

    def __init__(self, Z: np.ndarray, S: np.ndarray, origin, context: int, horizon: int, trial, start):
        self.Z, self.S = Z, S
        self.origin = np.asarray(origin, np.int64)
        self.C, self.H = int(context), int(horizon)
        self.trial, self.start = np.asarray(trial), np.asarray(start)

    def __len__(self) -> int:
        return len(self.origin)

    def _rows(self, lo: int, hi: int):
        return self.origin[:, None] + np.arange(lo, hi)

    @property
    def context(self) -> np.ndarray:
        return self.Z[self._rows(0, self.C)]

    @property
    def stim_context(self) -> np.ndarray:
        return self.S[self._rows(0, self.C)]

    @property
    def stim_future(self) -> np.ndarray:
        return self.S[self._rows(self.C, self.C + self.H)]

    @property
    def target(self) -> np.ndarray:
        return self.Z[self._rows(self.C, self.C + self.H)]

    def _take(self, sel) -> LazyWindows:
        return LazyWindows(self.Z, self.S, self.origin[sel], self.C, self.H, self.trial[sel], self.start[sel])

    def subset(self, n: int) -> LazyWindows:
        return self._take(slice(0, n))

    def as_dict(self, prefix: str, lazy: bool = False) -> dict:
        """The windows' arrays by ``<prefix>/<field>``; ``lazy``: as :class:`WindowField` (not gathered)."""
        fields = ("context", "stim_context", "stim_future", "target")
        if lazy:
            return {f"{prefix}/{k}": WindowField(self, k) for k in fields}
        return {f"{prefix}/{k}": getattr(self, k) for k in fields}

    def batches(self, max_elements: int | None = None):
        """Consecutive chunks of windows, each :class:`Windows` in memory of at most
        ``max_elements`` activity values (context + target; default :data:`BATCH_ELEMENTS`)
        and at least one window."""
        max_elements = BATCH_ELEMENTS if max_elements is None else max_elements
        per = (self.C + self.H) * self.Z.shape[1]
        size = max(1, int(max_elements) // max(per, 1))
        for a in range(0, len(self), size):
            w = self._take(slice(a, a + size))
            yield Windows(w.context, w.stim_context, w.stim_future, w.target, w.trial, w.start)

    def neurons(self, idx) -> LazyWindows:
        return LazyWindows(
            np.ascontiguousarray(self.Z[:, idx]), self.S, self.origin, self.C, self.H, self.trial, self.start
        )


def is_constant_view(v) -> bool:
    """Whether ``v`` is one value broadcast to a shape (every axis longer than 1 of stride 0)."""
    return isinstance(v, np.ndarray) and v.size > 1 and all(st == 0 for st, n in zip(v.strides, v.shape) if n > 1)


class WindowField:
    """One field of :class:`LazyWindows` (``shape``, ``dtype``, :meth:`chunks` along windows)."""

    def __init__(self, windows: LazyWindows, field: str):
        self.windows, self.field = windows, field
        span = windows.C if field in ("context", "stim_context") else windows.H
        width = (windows.S if field.startswith("stim") else windows.Z).shape[1]
        self.shape = (len(windows), span, width)
        self.dtype = (windows.S if field.startswith("stim") else windows.Z).dtype

    def chunks(self):
        for b in self.windows.batches():
            yield np.ascontiguousarray(getattr(b, self.field))


@dataclass
class ForecastTask:
    """A forecasting problem with its splits and the ground truth used for scoring.

    Attributes
    ----------
    train_series, train_stim : np.ndarray
        ``(n_trials, T, N)`` z-scored activity and ``(n_trials, T, K)`` stimulus of training trials.
    val, test : Windows
        ID windows from held-out trials of the training conditions.
    ood : dict[str, Windows]
        OOD suites.
    meta : dict
        Neuron table of the observed units (``type``, ``side``, ``segment``, ``region``,
        ``name``), ``dt`` (s), ``stim_scale`` and the prior mask/sign (``prior_mask``,
        ``prior_sign``) that structural-prior models may use.
    true_weights : np.ndarray or None
        True signed weights among observed units (post x pre); None for recorded data
        (:func:`neuro.data.from_traces`).
    """

    name: str
    context: int
    horizon: int
    signal: str
    dt: float
    train_series: np.ndarray
    train_stim: np.ndarray
    val: Windows
    test: Windows
    ood: dict
    meta: dict
    true_weights: np.ndarray | None
    recording: xr.Dataset | None = None
    probes: dict = field(default_factory=dict)

    @property
    def n_neurons(self) -> int:
        return self.train_series.shape[-1]

    def windows(self) -> dict:
        """``{split: windows}``: val, test and ``ood_<suite>`` for every OOD suite."""
        return {"val": self.val, "test": self.test, **{f"ood_{k}": v for k, v in self.ood.items()}}

    def neuron_subset(self, n: int, seed: int = 0) -> ForecastTask:
        """The same task on ``n`` units drawn at random (``seed``; sorted), for the program
        search at recording scale (its programs fit per unit or over every unit pair). Its
        ``meta["neuron_index"]`` says which units; ``name`` gains ``-sub<n>``."""
        N = self.n_neurons
        if n >= N:
            return self
        idx = np.sort(np.random.default_rng(seed).choice(N, n, replace=False))
        meta = {}
        for k, v in self.meta.items():
            a = v if isinstance(v, np.ndarray) else None
            if k == "prior_mask":
                meta[k] = np.ascontiguousarray(np.asarray(v)[np.ix_(idx, idx)], np.float32)
            elif a is not None and a.ndim >= 1 and a.shape[0] == N:
                meta[k] = a[idx]
            else:
                meta[k] = v
        meta["neuron_index"] = idx
        return ForecastTask(
            name=f"{self.name}-sub{n}",
            context=self.context,
            horizon=self.horizon,
            signal=self.signal,
            dt=self.dt,
            train_series=np.ascontiguousarray(self.train_series[..., idx]),
            train_stim=self.train_stim,
            val=self.val.neurons(idx),
            test=self.test.neurons(idx),
            ood={k: w.neurons(idx) for k, w in self.ood.items()},
            meta=meta,
            true_weights=None if self.true_weights is None else self.true_weights[np.ix_(idx, idx)],
            recording=None,
            probes={},
        )

    def __getstate__(self):
        # a broadcast array (the all-ones wiring prior of a large recording) is pickled as its
        # value and shape, not as N x N copies
        state = dict(self.__dict__)
        meta = dict(state["meta"])
        for k, v in meta.items():
            if is_constant_view(v):
                meta[k] = ("__broadcast__", np.asarray(v.flat[0]), v.shape)
        state["meta"] = meta
        return state

    def __setstate__(self, state):
        meta = state["meta"]
        for k, v in list(meta.items()):
            if isinstance(v, tuple) and len(v) == 3 and isinstance(v[0], str) and v[0] == "__broadcast__":
                meta[k] = np.broadcast_to(v[1], v[2])
        self.__dict__.update(state)

    def data_arrays(self, stage: str = "full", lazy: bool = False) -> dict:
        """Arrays a sandboxed candidate needs (numpy only), for :func:`numpy.savez`; ``lazy``:
        the fields of lazy windows as :class:`WindowField` (read in chunks, e.g. to hash them)."""
        d = {"train/series": self.train_series, "train/stim": self.train_stim}

        def fields(w, prefix):
            return w.as_dict(prefix, lazy=True) if lazy and isinstance(w, LazyWindows) else w.as_dict(prefix)

        val = self.val if stage == "full" else self.val.subset(_quick_windows(len(self.val)))
        d.update(fields(val, "val"))
        if stage == "full":
            d.update(fields(self.test, "test"))
            for k, w in self.ood.items():
                d.update(fields(w, f"ood_{k}"))
            for k, v in self.probes.items():
                d[f"probe/{k}"] = v
        for k in ("prior_mask", "prior_sign", "type_code", "side_code", "segment"):
            d[f"meta/{k}"] = self.meta[k]
        if self.true_weights is None:  # recorded traces: no circuit, so no Jacobian to compute
            d["meta/no_jacobian"] = np.array(True)
        d["meta/dt"] = np.array(self.dt)
        d["meta/context_steps"] = np.array(self.context)
        d["meta/horizon_steps"] = np.array(self.horizon)
        if stage != "full":  # the quick stage fits on a quarter of the training trials
            n = _quick_trials(len(self.train_series))
            d["train/series"] = self.train_series[:n]
            d["train/stim"] = self.train_stim[:n]
        return d


def _quick_trials(n: int) -> int:
    """Training trials of the quick stage: the first quarter (at least one)."""
    return max(1, n // 4)


def _quick_windows(n: int) -> int:
    """Validation windows of the quick stage: the first quarter (at least 8)."""
    return max(8, n // 4)


def quick_stage(data: dict) -> dict:
    """The quick stage's data cut from the full stage's (both as
    :meth:`ForecastTask.data_arrays` gives them): the first quarter of the training trials and
    of the validation windows, the metadata, no test, OOD or probe arrays. Equal, array for
    array, to ``data_arrays("quick")`` of the task ``data`` came from."""
    n_train, n_val = _quick_trials(len(data["train/series"])), _quick_windows(len(data["val/context"]))
    out = {}
    for k, v in data.items():
        head = k.split("/", 1)[0]
        if head in ("train", "val"):
            out[k] = v[: n_train if head == "train" else n_val]
        elif head == "meta":
            out[k] = v
    return out


def window_index(
    n: int,
    T: int,
    context: int,
    horizon: int,
    stride: int,
    offset: int = 0,
    max_windows: int | None = None,
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """``(trial, start)`` of the windows :func:`make_windows` cuts from ``n`` trials of ``T`` steps."""
    starts = np.arange(offset, T - context - horizon + 1, stride)
    if len(starts) == 0:
        raise ConfigError(
            f"Trials of {T} steps are too short for context {context} + horizon {horizon}; "
            "simulate longer trials or shorten the windows."
        )
    tr = np.repeat(np.arange(n), len(starts))
    st = np.tile(starts, n)
    if max_windows is not None and len(tr) > max_windows:
        keep = np.sort(np.random.default_rng(seed).choice(len(tr), max_windows, replace=False))
        tr, st = tr[keep], st[keep]
    return tr, st


def make_windows(
    series: np.ndarray,
    stim: np.ndarray,
    context: int,
    horizon: int,
    stride: int,
    offset: int = 0,
    max_windows: int | None = None,
    seed: int = 0,
) -> Windows:
    """Cut ``(n_trials, T, N)`` series into windows every ``stride`` steps."""
    n, T, _ = series.shape
    tr, st = window_index(n, T, context, horizon, stride, offset, max_windows, seed)
    sl_c = st[:, None] + np.arange(context)
    sl_f = st[:, None] + context + np.arange(horizon)
    return Windows(
        series[tr[:, None], sl_c], stim[tr[:, None], sl_c], stim[tr[:, None], sl_f], series[tr[:, None], sl_f], tr, st
    )


def prior_mask(
    types: np.ndarray, sides: np.ndarray, segments: np.ndarray, reach: int = 4
) -> tuple[np.ndarray, np.ndarray]:
    """Anatomical wiring prior among units (post x pre): allowed edges and their sign.

    Type-level rules only (no weights): the visual pathway is feed-forward (DS -> BIN ->
    nMLF/RS/BOUT -> spinal); spinal V2a excite same-side V2a/V0d/V1/MN, V0d inhibit the
    other side, V1 inhibit same-side V2a/MN, within ``reach`` segments; sign follows the
    presynaptic type (Dale's law).
    """
    n = len(types)
    M = np.zeros((n, n), bool)
    sign = np.zeros(n)
    for j in range(n):
        sign[j] = -1.0 if types[j] in ("V0d", "V1") else 1.0
    brain_next = {
        "DS": ("BIN",),
        "BIN": ("nMLF", "RS", "BOUT"),
        "nMLF": SPINAL_TYPES,
        "RS": SPINAL_TYPES,
        "BOUT": SPINAL_TYPES,
    }
    for i in range(n):
        for j in range(n):
            ti, tj = types[i], types[j]
            same = sides[i] == sides[j] or sides[i] == "M" or sides[j] == "M"
            near = segments[i] >= 0 and segments[j] >= 0 and abs(int(segments[i]) - int(segments[j])) <= reach
            if tj in brain_next and ti in brain_next[tj]:
                M[i, j] = same if tj != "BIN" else True
            elif tj == "V2a" and ti in SPINAL_TYPES and near and same:
                M[i, j] = True
            elif tj == "V0d" and ti in ("V2a", "MN", "V0d") and near and sides[i] != sides[j]:
                M[i, j] = True
            elif tj == "V1" and ti in ("V2a", "MN") and near and same:
                M[i, j] = True
    return M, sign


def _specs(quick: bool, ood_trials: int | None = None):
    n_rep = 3 if quick else 6
    id_specs = [dict(s, seed=100 * r + k) for r in range(n_rep) for k, s in enumerate(ID_CONDITIONS)]
    split = [
        "train" if r < n_rep - 2 else ("val" if r == n_rep - 2 else "test") for r in range(n_rep) for _ in ID_CONDITIONS
    ]
    n_ood = int(ood_trials) if ood_trials else (1 if quick else 3)
    ood = []
    for r in range(n_ood):
        ood += [
            ("held_out_condition", dict(condition="turning", speed=10.0, seed=900 + r)),
            ("fast_speed", dict(condition="grating_fwd", speed=30.0, seed=910 + r)),
            ("lesion", dict(condition="grating_fwd", speed=10.0, seed=920 + r)),
            ("fluid_shift", dict(condition="grating_fwd", speed=10.0, seed=930 + r)),
            ("open_loop", dict(condition="open_loop", speed=10.0, seed=940 + r)),
        ]
    return id_specs, split, ood


def build_task(
    quick: bool = True,
    *,
    context: int = 4,
    horizon: int = 32,
    signal: str = "rates",
    duration: float | None = None,
    seed: int = 0,
    recording: xr.Dataset | None = None,
    obs_noise: float = 0.01,
    max_windows: int = 400,
    ood_trials: int | None = None,
) -> ForecastTask:
    """Simulate (or reuse) a recording and build the splits.

    Parameters
    ----------
    quick
        Small default (3 trials per ID condition, 1 per OOD suite, 3 s trials) vs full
        (6 per condition, 3 per suite, 12 s).
    context, horizon
        Window lengths in samples (ZAPBench: context 4 or 256, horizon 32).
    signal
        ``"rates"`` (200 Hz) or ``"calcium"`` (10 Hz).
    recording
        A dataset from :func:`build_recording`, to skip simulating.
    ood_trials
        Trials per OOD suite (default 1 quick, 3 full).
    """
    if signal not in ("rates", "calcium"):
        raise ConfigError(f"signal must be 'rates' or 'calcium'; got {signal!r}.")
    if recording is None:
        recording = build_recording(quick, duration=duration, seed=seed, ood_trials=ood_trials)
    ds = recording
    obs = ds["observed"].values
    if signal == "rates":
        X = ds["rates"].values[..., obs].astype(np.float64)
        X = X + obs_noise * np.random.default_rng(seed + 1).standard_normal(X.shape)
        S = ds["stimulus"].values.astype(np.float64)
        dt = float(ds.attrs["dt"])
    else:
        X = ds["calcium"].values.astype(np.float64)
        step = int(round(ds.attrs["dt_imaging"] / ds.attrs["dt"]))
        S0 = ds["stimulus"].values
        n = X.shape[1]
        S = S0[:, : n * step].reshape(S0.shape[0], n, step, -1).mean(2)
        dt = float(ds.attrs["dt_imaging"])
    split = ds["split"].values
    tr = split == "train"
    mu = X[tr].mean((0, 1))
    sd = np.maximum(X[tr].std((0, 1)), 0.05)
    Z = ((X - mu) / sd).astype(np.float32)
    # physical scales (10 mm s-1, 1 rad s-1, luminance, gain): a covariate absent from training
    # (rotation in the held-out condition) must not be blown up by a tiny training maximum
    s_scale = np.maximum(np.abs(S[tr]).max((0, 1)), np.array([10.0, 10.0, 1.0, 1.0, 1.0]))
    Sz = (S / s_scale).astype(np.float32)
    stride = max(1, (horizon + context) // 4)

    def win(mask, k):
        return make_windows(Z[mask], Sz[mask], context, horizon, stride, max_windows=max_windows, seed=seed + k)

    val = win(split == "val", 1)
    test = win(split == "test", 2)
    ood = {s: win(ds["suite"].values == s, 3 + i) for i, s in enumerate(OOD_SUITES)}
    types = ds["type"].values[obs]
    sides = ds["neuron_side"].values[obs]
    segs = ds["segment"].values[obs]
    M, sign = prior_mask(types, sides, segs)
    type_names = sorted(set(types))
    meta = dict(
        type=types,
        side=sides,
        segment=segs,
        region=ds["region"].values[obs],
        name=ds["name"].values[obs],
        prior_mask=M.astype(np.float32),
        prior_sign=sign.astype(np.float32),
        type_code=np.array([type_names.index(t) for t in types]),
        side_code=np.array([{"L": 0, "R": 1, "M": 2}[s] for s in sides]),
        mean=mu,
        std=sd,
        stim_scale=s_scale,
    )
    W = ds["weights"].values[np.ix_(obs, obs)]
    task = ForecastTask(
        name=f"zfish-{signal}-c{context}-h{horizon}",
        context=context,
        horizon=horizon,
        signal=signal,
        dt=dt,
        train_series=Z[tr],
        train_stim=Sz[tr],
        val=val,
        test=test,
        ood=ood,
        meta=meta,
        true_weights=W,
        recording=ds,
    )
    task.probes = _probe_windows(task, Z, Sz, split)
    return task


def swim_window_starts(drive: np.ndarray, context: int, free_run: int) -> list[tuple[int, int]]:
    """``(row, first context step)`` of each swimming probe window, from the swim drive of the test
    trials ``(trials, steps)``: a context ends ``min(context, 10)`` steps after a bout onset (drive
    above 0.3) that leaves room for a whole context before it and a free run of ``free_run`` steps
    after it; each trial gives up to :data:`SWIM_WINDOWS_PER_TRIAL`, from bouts at least a free run
    apart (the first, then the next a free run later, ...). The one definition of the windows the
    task cuts (:func:`_probe_windows`) and the perfect forecaster forks at
    (:func:`neuro.ceiling.probe_origins`)."""
    C, H, T = context, free_run, drive.shape[1]
    if T - C - H <= 0:
        return []
    into = min(C, 10)  # the context ends this many steps into the bout (long contexts see ~1.5 beats)
    lo = max(C - into, 0)
    starts: list[tuple[int, int]] = []
    for k in range(drive.shape[0]):
        onsets: list[int] = []
        last = -H
        for s in bout_onsets(drive[k, lo : T - H - into] > 0.3):
            if s >= last + H and len(onsets) < SWIM_WINDOWS_PER_TRIAL:
                onsets.append(int(s))
                last = s
        starts += [(k, max(lo + s + into - C, 0)) for s in onsets]
    return starts


def _probe_windows(task: ForecastTask, Z, Sz, split) -> dict:
    """Windows for faithfulness read-outs: a swimming context with a long free run, and a
    resting context with/without a stimulus pulse (impulse response).

    A swimming context ends ``min(C, 10)`` steps after a bout onset that leaves room for a
    whole context before it (4 steps for context 4); each test trial gives up to
    :data:`SWIM_WINDOWS_PER_TRIAL` of them, from bouts at least a free run (``H`` steps) apart."""
    C = task.context
    H = max(task.horizon, 64)
    ds = task.recording
    test = np.where(split == "test")[0]
    drive = ds["drive"].values[test].mean(-1)
    T = Z.shape[1]
    if drive.shape[1] != T:  # calcium frames: average the drive over each frame
        step = drive.shape[1] // T
        drive = drive[:, : T * step].reshape(len(test), T, step).mean(-1)
    out = {}
    # swimming: bout onsets in each test trial (the first, then the next a free run later, ...)
    ctxs, sfs, tgts = [], [], []
    for k, t0 in swim_window_starts(drive, C, H):
        i = test[k]
        ctxs.append(Z[i, t0 : t0 + C])
        sfs.append(Sz[i, t0 + C : t0 + C + H])
        tgts.append(Z[i, t0 + C : t0 + C + H])
    if ctxs:
        out["swim_context"] = np.stack(ctxs)
        out["swim_stim_future"] = np.stack(sfs)
        out["swim_target"] = np.stack(tgts)
    # impulse: a resting context from a dark trial, future stimulus with/without a forward pulse
    rest = Z[split == "train"].reshape(-1, Z.shape[-1])
    base = np.broadcast_to(np.median(rest, 0), (C, Z.shape[-1]))
    sf = np.zeros((2, H, Sz.shape[-1]), np.float32)
    sf[:, :, 3] = 1.0  # luminance on
    sf[:, :, 4] = 1.0  # closed-loop gain 1
    sf[1, :10, 0] = 1.0  # 10-sample forward pulse at the training maximum speed
    out["impulse_context"] = np.stack([base, base]).astype(np.float32)
    out["impulse_stim_future"] = sf
    return out


def build_recording(
    quick: bool = True, duration: float | None = None, seed: int = 0, ood_trials: int | None = None
) -> xr.Dataset:
    """One batched simulation with every ID and OOD trial; ``split`` and ``suite`` label them
    (``ood_trials`` per OOD suite: default 1 quick, 3 full)."""
    id_specs, split, ood = _specs(quick, ood_trials)
    specs = id_specs + [s for _, s in ood]
    suites = ["id"] * len(id_specs) + [k for k, _ in ood]
    B = len(specs)
    comm = np.array([0.0 if s == "lesion" else 1.0 for s in suites])
    drag = np.array([2.5 if s == "fluid_shift" else 1.0 for s in suites])
    musc = np.array([0.6 if s == "fluid_shift" else 1.0 for s in suites])
    pert = Perturbation(commissural=comm, drag_scale=drag, muscle_scale=musc)
    if duration is None:
        duration = 3.0 if quick else 12.0
    ds = simulate(specs, duration, perturbation=pert, seed=seed)
    ds = ds.assign_coords(suite=("trial", suites), split=("trial", split + ["ood"] * len(ood)))
    _ = B
    return ds


def mae_per_step(pred: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Mean absolute error per horizon step ``(H,)`` over windows and neurons."""
    return np.abs(np.asarray(pred, float) - np.asarray(target, float)).mean((0, 2))


def evaluate(model, task: ForecastTask, splits: tuple[str, ...] | None = None) -> xr.Dataset:
    """MAE per step of a fitted model on val, test and every OOD suite.

    Returns a Dataset with ``mae (split, lead)`` and ``mae_mean (split)``.
    """
    windows = {"val": task.val, "test": task.test, **{f"ood_{k}": v for k, v in task.ood.items()}}
    if splits is not None:
        windows = {k: v for k, v in windows.items() if k in splits}
    rows = []
    for _k, w in windows.items():
        pred = model.predict(w.context, w.stim_context, w.stim_future)
        rows.append(mae_per_step(pred, w.target))
    mae = xr.DataArray(
        np.array(rows),
        dims=("split", "lead"),
        coords={"split": list(windows), "lead": np.arange(1, task.horizon + 1)},
        attrs={"units": "z", "description": "mean absolute error per horizon step (z-scored activity)"},
    )
    return xr.Dataset({"mae": mae, "mae_mean": mae.mean("lead")})

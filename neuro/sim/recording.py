"""Run the simulator and package everything it knows as a labelled ``xr.Dataset``.

Variables (time in s): ``rates`` (latent activity of every unit), ``calcium`` (calcium-like
observations of an observed subset: rates convolved with an indicator kernel, sampled at
the imaging rate, plus noise), ``muscle``, ``tail_angle``, ``heading``, ``x``/``y``,
``speed``, ``stimulus`` (covariates), ``bout_start``, ``weights`` (true signed
connectivity, post x pre) and ``delays``. Neuron coords: ``region``, ``type``, ``side``
(``left``/``right``/``midline``; ``neuron_side``: L/R/M), ``segment``, ``observed``; the neurons
are indexed by (type, side, segment): ``rec.sel(type="MN", side="left", segment=12)``.
"""

from __future__ import annotations

import math
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr
from scipy.signal import fftconvolve

from scimech.errors import ConfigError
from scimech.run import results

from .body import BodyParams
from .circuit import Circuit, CircuitParams
from .simulator import Perturbation, Simulator
from .stimuli import FEATURE_UNITS, FEATURES, stack_stimuli

__all__ = [
    "simulate",
    "calcium_from_rates",
    "observed_subset",
    "save_recording",
    "load_recording",
    "name_units",
    "muscle_at",
    "label_rates",
]


def observed_subset(table: dict, every: int = 5, seed: int = 0) -> np.ndarray:
    """Boolean mask of observed units: every brain unit, and all spinal types every ``every`` segments."""
    seg = table["segment"]
    return (seg < 0) | ((seg % every) == 2)


def _imaging_step(imaging_rate: float, dt: float) -> int:
    """Recorded samples averaged into one calcium frame."""
    return max(1, int(round(1.0 / (imaging_rate * dt))))


def calcium_from_rates(
    rates: np.ndarray,
    dt: float,
    *,
    tau_rise: float = 0.05,
    tau_decay: float = 0.5,
    imaging_rate: float = 10.0,
    noise: float = 0.02,
    seed: int = 0,
) -> tuple[np.ndarray, float]:
    """Calcium-like traces: rates (..., T, N) convolved with a double-exponential kernel (s),
    block-averaged to ``imaging_rate`` (Hz), plus Gaussian noise (same units as rates).

    Returns ``(traces (..., T_img, N), dt_img)``.
    """
    T = rates.shape[-2]
    t = np.arange(int(5 * tau_decay / dt)) * dt
    k = np.exp(-t / tau_decay) - np.exp(-t / tau_rise)
    k /= k.sum()
    shape = [1] * rates.ndim
    shape[-2] = len(k)
    c = fftconvolve(rates, k.reshape(shape), axes=-2)[..., :T, :]
    step = _imaging_step(imaging_rate, dt)
    n = T // step
    c = c[..., : n * step, :].reshape(*c.shape[:-2], n, step, c.shape[-1]).mean(-2)
    rng = np.random.default_rng(seed)
    return c + noise * rng.standard_normal(c.shape), step * dt


def simulate(
    conditions: list[dict] | list[str],
    duration: float = 4.0,
    *,
    circuit: CircuitParams | None = None,
    body: BodyParams | None = None,
    perturbation: Perturbation | None = None,
    seed: int = 0,
    record_rate: float = 200.0,
    imaging_rate: float = 10.0,
    calcium_noise: float = 0.02,
    observe_every: int = 5,
    suite: str = "id",
    keep_body: bool = False,
) -> xr.Dataset:
    """Simulate one batch of trials (one per entry of ``conditions``) and return a Dataset.

    Parameters
    ----------
    conditions
        Condition names or ``make_stimulus`` keyword dicts (``condition``, ``speed``, ...).
    duration
        Trial length, s.
    perturbation
        Lesions, commissural cut, fluid/body shifts (per trial or shared).
    record_rate, imaging_rate
        Sampling rates of the latent activity and of the calcium observations, Hz.
    suite
        Label stored per trial (``"id"``, ``"lesion"``, ...).
    """
    if isinstance(conditions, (str, dict)) or not len(conditions):
        raise ConfigError(
            f"simulate takes a non-empty list of conditions, one per trial (e.g. ['grating_fwd', "
            f"'dark']); got {conditions!r}."
        )
    specs = [dict(condition=c) if isinstance(c, str) else dict(c) for c in conditions]
    for i, s in enumerate(specs):
        s.setdefault("seed", seed * 1000 + i)
    sim = Simulator(circuit, body, seed=seed)
    fastest = 1.0 / sim.dt
    for name, rate in (("record_rate", record_rate), ("imaging_rate", imaging_rate)):
        if not (isinstance(rate, (int, float, np.number)) and math.isfinite(rate) and 0 < rate <= fastest):
            raise ConfigError(
                f"{name}={rate!r}; give a rate in Hz above 0 and at most the simulation's "
                f"{fastest:g} Hz (one sample per {sim.dt} s step)."
            )
    if imaging_rate > record_rate:
        raise ConfigError(
            f"imaging_rate={imaging_rate} Hz is faster than record_rate={record_rate} Hz: the calcium "
            "frames are averages of the recorded rates. Give imaging_rate <= record_rate."
        )
    if isinstance(observe_every, bool) or not isinstance(observe_every, (int, np.integer)) or observe_every < 1:
        raise ConfigError(
            f"observe_every={observe_every!r}; give a positive whole number (every how many spinal "
            "segments a unit is observed in calcium)."
        )
    stim = stack_stimuli(specs, duration, sim.dt)
    every = max(1, int(round(1.0 / (record_rate * sim.dt))))
    if stim.shape[1] < every:
        raise ConfigError(
            f"duration={duration} s is shorter than one recorded sample at record_rate={record_rate} Hz "
            f"(one every {every * sim.dt:g} s); give a longer duration or a faster record_rate."
        )
    if stim.shape[1] // every < _imaging_step(imaging_rate, every * sim.dt):
        warnings.warn(
            f"duration={duration} s holds less than one calcium frame at imaging_rate={imaging_rate} Hz "
            f"(one every {1.0 / imaging_rate:g} s): the recording's calcium is empty. Give a longer "
            "duration or a faster imaging rate to have calcium.",
            stacklevel=2,
        )
    if not math.isclose(every * sim.dt * record_rate, 1.0, rel_tol=1e-6):
        warnings.warn(
            f"record_rate={record_rate} Hz is not a whole number of {sim.dt} s steps; recording at "
            f"{1.0 / (every * sim.dt):g} Hz (the Dataset's attrs['dt'] says so).",
            stacklevel=2,
        )
    # every trial keyed by its index in the table: the same trial alone or in any batch
    out = sim.run(stim, perturbation, record_every=every, trials=np.arange(len(specs)))
    dt_rec = out["dt_rec"]
    B, T = out["rates"].shape[:2]
    table = sim.circuit.neuron_table()
    obs = observed_subset(table, observe_every)
    feats = stim.features()[:, every - 1 :: every][:, :T]
    calcium, dt_img = calcium_from_rates(
        out["rates"][..., obs], dt_rec, imaging_rate=imaging_rate, noise=calcium_noise, seed=seed
    )
    time = np.arange(T) * dt_rec + dt_rec
    t_img = (np.arange(calcium.shape[1]) + 1) * dt_img
    nid = np.arange(len(table["name"]))
    W = sim.circuit.weights(commissural=True)
    D = np.full_like(W, np.nan)
    nb = sim.circuit.n_brain
    D[nb:, nb:] = sim.circuit.delays()
    ds = xr.Dataset(
        {
            "rates": (
                ("trial", "time", "neuron"),
                out["rates"],
                {"units": "1", "description": "latent population rate (0-1)"},
            ),
            "calcium": (
                ("trial", "frame", "observed_neuron"),
                calcium.astype(np.float32),
                {
                    "units": "1",
                    "description": "calcium-like observation of observed units (indicator kernel, imaging rate, noise)",
                },
            ),
            "muscle": (
                ("trial", "time", "body_side", "joint"),
                out["muscle"],
                {"units": "1", "description": "muscle activation"},
            ),
            "tail_angle": (
                ("trial", "time"),
                out["tail_angle"],
                {
                    "units": "rad",
                    "description": "head-link minus tail-link angle (positive = body concave to the left, tail to the left)",
                },
            ),
            "heading": (
                ("trial", "time"),
                out["heading"],
                {"units": "rad", "description": "head direction, counter-clockwise from +x"},
            ),
            "x": (("trial", "time"), out["q"][..., 0], {"units": "mm", "description": "head tip x"}),
            "y": (("trial", "time"), out["q"][..., 1], {"units": "mm", "description": "head tip y"}),
            "speed": (
                ("trial", "time"),
                out["speed"],
                {"units": "mm s-1", "description": "forward speed of the centre of mass"},
            ),
            "stimulus": (
                ("trial", "time", "feature"),
                feats.astype(np.float32),
                {"description": "stimulus covariates"},
            ),
            "bout_start": (
                ("trial", "time"),
                out["bout_start"],
                {"description": "a swim bout starts in this interval"},
            ),
            "drive": (
                ("trial", "time", "body_side"),
                out["drive"],
                {"units": "1", "description": "descending drive to the spinal cord (rhythm generators)"},
            ),
            "weights": (
                ("neuron", "pre_neuron"),
                W,
                {"units": "1", "description": "true signed weight post x pre (delays summed)"},
            ),
            "delays": (
                ("neuron", "pre_neuron"),
                D,
                {"units": "s", "description": "conduction delay of spinal connections"},
            ),
        },
        coords={
            "trial": np.arange(B),
            "time": ("time", time, {"units": "s"}),
            "frame": ("frame", t_img, {"units": "s"}),
            "neuron": nid,
            "pre_neuron": nid,
            "observed_neuron": nid[obs],
            "name": ("neuron", table["name"]),
            "region": ("neuron", table["region"]),
            "type": ("neuron", table["type"]),
            "side": ("neuron", [_SIDE_NAMES[s] for s in table["side"]]),
            "neuron_side": ("neuron", table["side"]),
            "segment": ("neuron", table["segment"]),
            "body_side": ["left", "right"],
            "observed": ("neuron", obs),
            "joint": np.arange(out["muscle"].shape[-1]),
            "joint_segment": (
                "joint",
                [int(segs[0]) for segs in np.array_split(np.arange(sim.p.n_seg), out["muscle"].shape[-1])],
                {"description": "first spinal segment whose motor neurons drive the joint's muscles"},
            ),
            "feature": list(FEATURES),
            "feature_units": ("feature", list(FEATURE_UNITS)),
            "condition": ("trial", [s["condition"] for s in specs]),
            "stim_speed": ("trial", [float(s.get("speed", 10.0)) for s in specs]),
            "suite": ("trial", [suite] * B),
        },
        attrs={
            "dt": dt_rec,
            "dt_sim": sim.dt,
            "dt_imaging": dt_img,
            "duration": duration,
            "seed": seed,
            "description": "simulated larval zebrafish (simZFish-like) recording",
            "body_physics": _physics(sim),
        },
    )
    if keep_body:
        ds["q"] = (("trial", "time", "q_dim"), out["q"])
    return name_units(ds)


def _physics(sim) -> str:
    """Which body engine simulated the recording (provenance)."""
    if sim.physics == "mujoco":
        from importlib.metadata import version

        return f"mujoco-core {version('mujoco-core')} (neuro.sim.mjbody)"
    return "hand-written chain (neuro.sim.body)"


_SIDE_NAMES = {"L": "left", "R": "right", "M": "midline"}
_UNIT_KEYS = ["type", "side", "segment"]


def name_units(ds: xr.Dataset) -> xr.Dataset:
    """Index the neurons by (type, side, segment), so ``ds.sel(type="MN", side="left",
    segment=12)`` picks a population (brain units: segment -1, side ``"midline"`` for the
    unpaired ones), and the muscles by ``body_side`` and ``joint`` (``joint_segment``: the first
    of the segments whose motor neurons drive a joint; ``muscle_at`` finds a segment's joint)."""
    if "type" in ds.xindexes:
        return ds
    mi = pd.MultiIndex.from_arrays([ds[k].values for k in _UNIT_KEYS], names=_UNIT_KEYS)
    return ds.drop_vars([*_UNIT_KEYS, "neuron"], errors="ignore").assign_coords(
        xr.Coordinates.from_pandas_multiindex(mi, "neuron")
    )


def label_rates(circuit: Circuit, rates: np.ndarray) -> xr.DataArray:
    """``rates`` ``(..., neuron)`` (e.g. ``Simulator.run(...)["rates"]``) as a DataArray whose last
    axis is indexed by (type, side, segment): ``label_rates(sim.circuit, r).sel(type="MN",
    side="left", segment=12)``."""
    t = circuit.neuron_table()
    mi = pd.MultiIndex.from_arrays([t["type"], [_SIDE_NAMES[s] for s in t["side"]], t["segment"]], names=_UNIT_KEYS)
    dims = [f"dim_{i}" for i in range(np.ndim(rates) - 1)] + ["neuron"]
    return xr.DataArray(rates, dims=dims, coords=xr.Coordinates.from_pandas_multiindex(mi, "neuron"))


def muscle_at(ds: xr.Dataset, side: str, segment: int) -> xr.DataArray:
    """Muscle activation ``(trial, time)`` on ``side`` (``"left"``/``"right"``) at the joint whose
    motor neurons include spinal ``segment``."""
    js = ds["joint_segment"].values
    return ds["muscle"].sel(body_side=side).isel(joint=int(np.searchsorted(js, segment, side="right") - 1))


def save_recording(ds: xr.Dataset, path: str | Path) -> Path:
    """Save a recording to zarr (atomic, with provenance) via :func:`scimech.run.results.save`."""
    if "type" in ds.xindexes:  # a multi-index is not stored: its levels are, and rebuilt on loading
        ds = ds.reset_index("neuron").drop_vars("neuron", errors="ignore")
    with warnings.catch_warnings():  # zarr v3 warns that fixed-length strings lack a spec
        warnings.simplefilter("ignore")
        return results.save(ds, Path(path))


def load_recording(path: str | Path) -> xr.Dataset:
    ds = results.load(Path(path)).load()
    return name_units(ds) if all(k in ds.coords for k in _UNIT_KEYS) else ds

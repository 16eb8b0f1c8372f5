"""The best possible model of the simulated fish, scored as the discovered model is: what each
planted-truth row can see at all.

A perfect forecaster of a noisy fish is the fish itself: the simulator forked at each probe
window's context end, from the recorded fish's exact state (replayed with its own noise it
reproduces the recorded window to the last bit), then run on with fresh process noise.
:func:`perfect_forecaster` scores it with every row's own measurement
(:func:`neuro.recovery.planted_truth`), on the same windows and with the same bootstrap as the
discovered model:

- ``left_right``, ``rostro_caudal``, ``frequency`` and ``tail_beat``: the forked free runs
  (:func:`forked_free_runs`) of the task's swimming windows, and of the long-context task's;
- ``impulse``: the simulator's response to the same pulse from rest with fresh noise
  (:func:`neuro.faithfulness.true_impulse_response` under another seed);
- ``edges``, ``signs``: the Jacobian is taken to be the simulated circuit's own weights, so
  these rows are recovered by construction (AUROC and sign accuracy 1): the rows' measures can
  see the wiring when a model has it; whether a forecaster must have it is not measured.

A row the discovered model misses but the perfect forecaster recovers is the model's failure,
not its measure's. The forecaster needs the simulator: your recording has none to fork, and
:func:`absent_reason` says so in one line.
"""

from __future__ import annotations

import copy
import dataclasses

import numpy as np

from scimech.errors import ConfigError
from scimech.studies.verdicts import PlantedTruthRow

from .faithfulness import true_impulse_response
from .recovery import planted_truth

__all__ = [
    "NotReplayable",
    "forked_free_runs",
    "perfect_forecaster",
    "absent_reason",
    "probe_origins",
    "BY_CONSTRUCTION",
    "NO_SIMULATOR",
]

#: the ``found`` text of the rows a perfect forecaster recovers by construction
BY_CONSTRUCTION = "exact by construction (the simulated circuit's own weights)"
#: the one line a study of your recording writes in place of the perfect forecaster
NO_SIMULATOR = (
    "No perfect forecaster: your recording has no simulator to fork at each window, so the study cannot show "
    "what the best possible model would score (on the simulated fish it does)."
)
NOISE_SEED = 1  # the fresh process noise of the fork (the recording's own is the trial's key)


class NotReplayable(ConfigError):
    """The recording, or the task's windows, are not what the simulator replays (another generator or
    circuit, other task settings): there is no exact state to fork from."""


def absent_reason(task) -> str | None:
    """Why :func:`perfect_forecaster` cannot run on ``task`` (one line), or ``None`` when it can."""
    if task.signal == "traces" or task.true_weights is None:
        return NO_SIMULATOR
    if task.recording is None:
        return (
            "No perfect-forecaster column: the task is a subset of the simulated recording's units, whose "
            "recording it no longer holds to fork."
        )
    if task.signal != "rates":
        return (
            f"No perfect-forecaster column: the {task.signal} task's frames are averages of the simulator's "
            "steps, not a state to fork (the rates task has it)."
        )
    if "swim_target" not in task.probes:
        return "No perfect-forecaster column: the task has no swimming window to fork from."
    return None


def probe_origins(task) -> list[tuple[int, int]]:
    """``(trial, first context step)`` of each swimming probe window of ``task``, in the order of
    ``task.probes["swim_target"]``, found as :func:`neuro.tasks.build_task` finds them (one definition,
    :func:`neuro.tasks.swim_window_starts`; :func:`forked_free_runs` checks that the windows cut there
    are the task's)."""
    from .tasks import swim_window_starts

    rec = task.recording
    test = np.flatnonzero(rec["split"].values == "test")
    drive = rec["drive"].values[test].mean(-1)
    return [(int(test[k]), t0) for k, t0 in swim_window_starts(drive, task.context, max(task.horizon, 64))]


def _trial_specs(rec) -> list[dict]:
    """The stimulus spec of every trial of a recording of :func:`neuro.tasks.build_recording`
    (its sizes read from the recording's ID and OOD trial counts)."""
    from .tasks import ID_CONDITIONS, OOD_SUITES, _specs

    suites = rec["suite"].values
    n_id, n_ood = int((suites == "id").sum()), int((suites != "id").sum())
    n_rep = n_id // len(ID_CONDITIONS)
    if n_rep not in (3, 6) or n_id % len(ID_CONDITIONS) or n_ood % len(OOD_SUITES):
        raise NotReplayable(
            f"The recording has {n_id} ID and {n_ood} OOD trials, not a recording of neuro.tasks.build_recording "
            "(3 or 6 trials per ID condition, as many per OOD suite): its trials cannot be forked. Build it with "
            "neuro.tasks.build_recording."
        )
    id_specs, _, ood = _specs(n_rep == 3, n_ood // len(OOD_SUITES))
    specs = [dict(s) for s in id_specs + [s for _, s in ood]]
    if [s["condition"] for s in specs] != [str(c) for c in rec["condition"].values]:
        raise NotReplayable(
            "The recording's trial conditions are not those of neuro.tasks.build_recording: its trials cannot be "
            "forked. Build it with neuro.tasks.build_recording."
        )
    return specs


_STIM_KEYS = ("gx", "gy", "rot", "lum", "gain", "closed")


def _steps(stim, a: int, b: int):
    """Simulator steps ``a`` to ``b`` of a stimulus."""
    return dataclasses.replace(stim, **{key: np.asarray(getattr(stim, key))[:, a:b] for key in _STIM_KEYS})


def forked_free_runs(task, noise_seed: int | None = NOISE_SEED, *, obs_noise: float = 0.01) -> np.ndarray:
    """The simulator's own free run from each swimming probe window's context end ``(n, H, N)``
    (z units, as ``task.probes["swim_target"]``): the recorded trial replayed to that step, then
    continued with the process-noise key ``noise_seed`` (``None``: the trial's own key, a replay of
    the recording), plus the recording's observation noise on those samples (the fish differs,
    the camera does not).

    Each test trial is simulated once, from its start to its last window's fork; each window's
    free run starts from a copy of the state there. The replayed state is checked against the
    recording at every fork, and the windows against the task's (``obs_noise``: the observation
    noise of :func:`neuro.tasks.build_task`); a mismatch is an error, never a silent ceiling.

    Raises
    ------
    ConfigError
        When ``task`` has no simulator behind it (:func:`absent_reason`).
    NotReplayable
        When its recording or windows are not those the simulator replays.
    """
    from .sim.simulator import Simulator
    from .sim.stimuli import stack_stimuli

    why = absent_reason(task)
    if why is not None:
        raise ConfigError(why)
    rec = task.recording
    C, H = task.context, max(task.horizon, 64)
    seed = int(rec.attrs["seed"])
    specs = _trial_specs(rec)
    for j, s in enumerate(specs):
        s.setdefault("seed", seed * 1000 + j)  # as neuro.sim.recording.simulate keys them
    sim = Simulator(seed=seed)
    every = int(round(task.dt / sim.dt))
    obs = rec["observed"].values
    rates = rec["rates"].values[..., obs]
    # build_task's observation noise (its draw over every trial, seeded as it seeds it)
    noise = obs_noise * np.random.default_rng(seed + 1).standard_normal(rates.shape)
    mean, std = task.meta["mean"], task.meta["std"]
    origins = probe_origins(task)
    target = np.asarray(task.probes["swim_target"], np.float64)
    if len(origins) != len(target):
        raise NotReplayable(
            f"{len(origins)} swimming windows found in the recording, but the task has {len(target)}: the task "
            "was not cut from this recording by neuro.tasks.build_task."
        )
    runs: list[np.ndarray | None] = [None] * len(origins)
    by_trial: dict[int, list[int]] = {}
    for k, (i, _) in enumerate(origins):
        by_trial.setdefault(i, []).append(k)
    for i, ks in by_trial.items():
        stim = stack_stimuli([specs[i]], float(rec.attrs["duration"]), sim.dt)
        state, done = None, 0
        for k in sorted(ks, key=lambda k: origins[k][1]):
            t0 = origins[k][1]
            fork = (t0 + C) * every
            out = sim.run(
                _steps(stim, done, fork), record_every=every, state=state, trials=[i] if state is None else None
            )
            state, done = out["state"], fork
            last = out["rates"][0, -1, obs]
            if not np.allclose(last, rates[i, t0 + C - 1], atol=1e-5):
                raise NotReplayable(
                    f"The simulator does not replay trial {i} of the recording (rates differ by "
                    f"{np.abs(last - rates[i, t0 + C - 1]).max():.3g} at step {t0 + C}): the recording was made with "
                    "another simulator or circuit, and cannot be forked."
                )
            window = (rates[i, t0 + C : t0 + C + H] + noise[i, t0 + C : t0 + C + H] - mean) / std
            if not np.allclose(window, target[k], atol=1e-4):
                raise NotReplayable(
                    f"Swimming window {k} (trial {i}, step {t0}) is not the task's: the task was cut from the "
                    "recording with other settings than neuro.tasks.build_task's (obs_noise, seed)."
                )
            fresh = copy.deepcopy(state)
            if noise_seed is not None:
                fresh.noise_key = np.array([1_000_003 * noise_seed + i], np.uint64)
            free = sim.run(_steps(stim, fork, fork + H * every), record_every=every, state=fresh)["rates"][0][:, obs]
            runs[k] = (free + noise[i, t0 + C : t0 + C + H] - mean) / std
    return np.stack(runs).astype(np.float32)  # type: ignore[arg-type]


def perfect_forecaster(
    task, *, long_task=None, seed: int = 0, noise_seed: int = NOISE_SEED
) -> list[PlantedTruthRow] | None:
    """The planted-truth rows (:func:`neuro.recovery.planted_truth`, same measures, windows and
    bootstrap ``seed``) of the simulator forked at each window with fresh noise (``noise_seed``):
    the best any model could score. ``long_task``: the long-context task, for the tail-beat row.
    ``None`` when the task has no simulator behind it (:func:`absent_reason` says why).

    The edges and signs rows score the circuit's own weights (``found``: :data:`BY_CONSTRUCTION`)."""
    if absent_reason(task) is not None:
        return None
    if "impulse_stim_future" in task.probes and "impulse_true" not in task.probes:
        task.probes["impulse_true"] = true_impulse_response(task)  # the planted response (seed 0), as the study's
    arrays = {
        "jacobian": np.asarray(task.true_weights, float),
        "swim_pred": forked_free_runs(task, noise_seed),
    }
    if "impulse_stim_future" in task.probes:
        response = true_impulse_response(task, seed=noise_seed)
        arrays["impulse_pred"] = np.stack([np.zeros_like(response), response])
    long_arrays = None
    if long_task is not None and absent_reason(long_task) is None:
        long_arrays = {"swim_pred": forked_free_runs(long_task, noise_seed)}
    rows = planted_truth(task, arrays, long_task=long_task if long_arrays else None, long_arrays=long_arrays, seed=seed)
    return [dataclasses.replace(r, found=BY_CONSTRUCTION) if r.truth in ("edges", "signs") else r for r in rows]

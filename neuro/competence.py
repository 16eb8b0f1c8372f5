"""Is the discovered model competent? The study's pick against the classical forecasters on the same test
windows (:func:`neuro_competence`, the table the report opens with).

The dissected model is the discovered program the study picks per search seed (best ID validation over
both searches, :mod:`neuro.evidence`); its error on a test window is the mean over seeds. The yardsticks
are :data:`neuro.baselines.YARDSTICKS`: persistence (the last value of the context, ZAPBench's naive
baseline), the mean of the context, and the linear forecasters (NLinear, DLinear, ridge ARX), fitted on
the same training trials. The score is the mean absolute error in z units (per-neuron z-score of the
training split) over every step of the horizon and every unit, averaged over test windows: on traces read
with ``--protocol zapbench`` that is ZAPBench's MAE (steps 1-32, every window at stride 1). Windows of one
trial overlap, so the bootstrap resamples whole trials.
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from scimech.studies.competence import Metric, competence, synthetic_world, your_product

from .baselines import YARDSTICKS

__all__ = ["neuro_competence", "world_of", "DISCOVERED"]

DISCOVERED = "discovered program (the study's pick)"
MAE = Metric("MAE", lambda e: float(np.mean(e)), units="z", description="mean absolute error over the horizon")


def world_of(task) -> str:
    """``your product (<file>)`` for recorded traces (the file named in what was read from them), else
    ``synthetic world (<the simulated larva's size>)``."""
    if task.signal == "traces":
        import json

        read = json.loads(task.meta["reading"]) if task.meta.get("reading") else {}
        return your_product(str(read.get("source") or read.get("product") or task.name))
    return synthetic_world(
        f"simulated larva, {task.n_neurons} observed units, {len(task.train_series)} training trials, "
        f"{len(np.asarray(task.test.trial))} test windows"
    )


def _protocol(task) -> str:
    step = f"context {task.context}, horizon {task.horizon} steps of {task.dt * 1000:.4g} ms"
    if task.meta.get("protocol") == "zapbench":
        return f"ZAPBench's protocol ({step}; MAE over every step of every test window at stride 1)"
    return f"{step}; MAE over every step and unit of each test window; bootstrap over test trials"


def neuro_competence(ev, task, *, world: str, n_resamples: int = 1000, seed: int = 0) -> xr.Dataset | None:
    """The competence table (:func:`scimech.studies.competence.competence`) of the study's pick against the
    yardsticks in ``ev.yardstick_test``; ``None`` when no discovered program finished or no yardstick ran."""
    if ev.discovered_test is None or not ev.yardstick_test:
        return None
    samples = {DISCOVERED: np.asarray(ev.discovered_test, float).mean(0)}
    samples.update({YARDSTICKS[name]: np.asarray(v, float) for name, v in ev.yardstick_test.items()})
    return competence(
        samples,
        dissected=[DISCOVERED],
        metrics=[MAE],
        world=world,
        clusters=np.asarray(ev.test_trials),
        n_resamples=n_resamples,
        seed=seed,
        note=_protocol(task),
    )

"""The discovered model's competence table: a deliberately untrained forecaster reads "not competent", an
oracle "competent", against persistence and a linear forecaster computed here by hand in numpy."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from neuro.competence import DISCOVERED, neuro_competence, world_of
from neuro.evidence import gather_evidence
from scimech.studies.competence import COMPETENT, NOT_COMPETENT

C, H, N = 4, 8, 5  # context, horizon, units


def _windows(seed=0, trials=6, length=60):
    """Overlapping (context, target) windows of an AR(1) activity per trial, and each window's trial."""
    rng = np.random.default_rng(seed)
    ctx, tgt, trial = [], [], []
    for k in range(trials):
        x = np.zeros((length, N))
        for t in range(1, length):
            x[t] = 0.9 * x[t - 1] + rng.normal(size=N)
        for s in range(0, length - C - H, 3):
            ctx.append(x[s : s + C])
            tgt.append(x[s + C : s + C + H])
            trial.append(k)
    return np.array(ctx), np.array(tgt), np.array(trial)


def _mae(pred, target):
    return np.abs(pred - target).mean((1, 2))  # one MAE per window, over the horizon and the units


def _task(trial):
    return SimpleNamespace(
        context=C,
        horizon=H,
        dt=0.005,
        meta={},
        signal="rates",
        n_neurons=N,
        train_series=np.zeros((3, 10, N)),
        test=SimpleNamespace(trial=trial),
        ood={},
    )


def test_untrained_forecaster_is_not_competent_and_an_oracle_is():
    ctx, tgt, trial = _windows()
    persistence = np.repeat(ctx[:, -1:], H, axis=1)  # the last value of the context, by hand
    damped = np.stack([0.9 ** (h + 1) * ctx[:, -1] for h in range(H)], 1)  # the linear AR forecast, by hand
    torch.manual_seed(0)
    net = torch.nn.Linear(C * N, H * N)  # an untrained forecaster: random weights, never fitted
    with torch.no_grad():
        untrained = net(torch.as_tensor(ctx.reshape(len(ctx), -1), dtype=torch.float32)).numpy().reshape(tgt.shape)
    base = {"last_value": {"test": _mae(persistence, tgt)}, "ridge_arx": {"test": _mae(damped, tgt)}}
    task = _task(trial)
    for name, pred, word in (("untrained", untrained * 4.0, NOT_COMPETENT), ("oracle", tgt, COMPETENT)):
        ev = gather_evidence(task, [0], {}, {0: base}, {"last_value": 1.0, "ridge_arx": 0.5})
        ev.discovered_test = _mae(pred, tgt)[None]  # one search seed
        table = neuro_competence(ev, task, world=ev.world, n_resamples=300)
        assert str(table["verdict"].sel(model=DISCOVERED).values) == word, (name, table["value"].values)
        # the yardsticks' MAE is the hand computation, the best of them the linear forecast
        got = float(table["value"].sel(model="persistence (last value)", metric="MAE"))
        assert got == pytest.approx(np.mean(_mae(persistence, tgt)), rel=1e-12)
        assert str(table["best_yardstick"].values[0]) == "linear (ridge ARX)"
        assert table.attrs["n_clusters"] == len(np.unique(trial))  # windows of one trial resampled together


def test_the_world_says_simulated_or_your_traces():
    task = _task(np.zeros(3, int))
    assert world_of(task).startswith("synthetic world (simulated larva, 5 observed units, 3 training trials")
    task.signal, task.meta, task.name = "traces", {"reading": '{"product": "p", "source": "fish1.nc"}'}, "t"
    assert world_of(task) == "your product (fish1.nc)"

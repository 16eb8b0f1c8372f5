"""Your own traces: simulator output written in the neutral (time, neuron) layout with a
condition per step reads back as the task built directly from the simulator (same windows,
targets, training trials); the baselines CLI runs on it; bad inputs are one clear error."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from neuro.data import from_traces
from neuro.tasks import OOD_SUITES, build_task
from scimech.errors import ConfigError, DataValidationError, DimensionError, MissingVariableError

CONTEXT, HORIZON, MAX_WINDOWS = 4, 32, 60


@pytest.fixture(scope="module")
def sim_task(small_task):
    # the same recording, without the observation noise build_task adds by default
    return build_task(True, duration=1.0, max_windows=MAX_WINDOWS, recording=small_task.recording, obs_noise=0.0)


def neutral_layout(rec: xr.Dataset) -> xr.Dataset:
    """Trials one after another on one time axis: activity of the observed units, the trial's
    condition, its split (or OOD suite) and trial number per step, the stimulus covariates."""
    obs = rec["observed"].values
    n, T = rec.sizes["trial"], rec.sizes["time"]
    act = rec["rates"].values[..., obs].reshape(n * T, -1)
    per_step = {
        k: np.repeat(v, T)
        for k, v in (
            ("condition", rec["condition"].values.astype(str)),
            ("trial", np.arange(n)),
            ("split", np.where(rec["split"].values == "ood", rec["suite"].values, rec["split"].values).astype(str)),
        )
    }
    dt = float(rec.attrs["dt"])
    return xr.Dataset(
        {
            "activity": (("time", "neuron"), act, {"units": "1"}),
            "stimulus": (("time", "feature"), rec["stimulus"].values.reshape(n * T, -1)),
            **{k: ("time", v) for k, v in per_step.items()},
        },
        coords={"time": ("time", np.arange(n * T) * dt, {"units": "s"}), "neuron": rec["name"].values[obs].astype(str)},
    )


def assert_same_windows(a, b):
    np.testing.assert_array_equal(a.trial, b.trial)
    np.testing.assert_array_equal(a.start, b.start)
    # z-scores: float32 of the same float64 numbers summed in another order (1e-5 of O(1-10) values)
    for k in ("context", "target", "stim_context", "stim_future"):
        np.testing.assert_allclose(getattr(a, k), getattr(b, k), atol=1e-5, err_msg=k)


@pytest.mark.parametrize("fmt", ["zarr", "nc"])
def test_traces_give_the_simulators_task(sim_task, tmp_path, fmt):
    layout = neutral_layout(sim_task.recording)
    path = tmp_path / f"traces.{fmt}"
    layout.to_zarr(path, zarr_format=2) if fmt == "zarr" else layout.to_netcdf(path)
    task = from_traces(
        path,
        context=CONTEXT,
        horizon=HORIZON,
        max_windows=MAX_WINDOWS,
        seed=0,
        stim_scale=sim_task.meta["stim_scale"],
        min_std=0.05,
    )  # build_task's scale and sd floor
    assert task.dt == pytest.approx(sim_task.dt, rel=1e-12)
    np.testing.assert_allclose(task.train_series, sim_task.train_series, atol=1e-5)
    np.testing.assert_allclose(task.train_stim, sim_task.train_stim, atol=1e-6)
    assert_same_windows(task.val, sim_task.val)
    assert_same_windows(task.test, sim_task.test)
    assert list(task.ood) == list(OOD_SUITES) == list(sim_task.ood)
    for s in OOD_SUITES:
        assert_same_windows(task.ood[s], sim_task.ood[s])
    assert task.true_weights is None and task.signal == "traces"


def test_default_stimulus_scale_and_one_hot_conditions(sim_task):
    layout = neutral_layout(sim_task.recording)
    task = from_traces(layout, context=CONTEXT, horizon=HORIZON, max_windows=MAX_WINDOWS)
    train = layout["split"].values == "train"
    scale = np.abs(layout["stimulus"].values[train]).max(0)
    scale[scale == 0] = 1.0  # features never on in training keep their values
    np.testing.assert_allclose(task.meta["stim_scale"], scale)
    # without covariates: a one-hot code of the condition (sorted names)
    bare = from_traces(layout.drop_vars("stimulus"), context=CONTEXT, horizon=HORIZON, max_windows=MAX_WINDOWS)
    names = sorted(set(layout["condition"].values))
    w = bare.test
    first = layout["condition"].values[layout["split"].values == "test"][0]
    assert w.stim_context.shape[-1] == len(names)
    np.testing.assert_array_equal(w.stim_context[0, 0], np.eye(len(names))[names.index(first)])


def test_a_continuous_recording_is_split_in_time_per_condition():
    # ZAPBench-like: one long recording, blocks of conditions, no trial numbers, no split labels
    rng = np.random.default_rng(0)
    cond = np.repeat(["dark", "flash", "taxis", "dark"], [200, 120, 100, 80])
    x = rng.normal(size=(len(cond), 5))
    task = from_traces(x, conditions=cond, dt=1.0, held_out=["taxis"], context=4, horizon=8, max_windows=None)
    # each block: first 70% train, next 10% val, last 20% test; taxis only in the OOD suite
    assert list(task.ood) == ["held_out_condition"]
    np.testing.assert_array_equal(task.ood["held_out_condition"].start, np.arange(0, 100 - 12 + 1, 3))
    # training trials of the shortest training block (0.7 * 80 = 56 steps): 140 -> 2, 84 -> 1, 56 -> 1
    assert task.train_series.shape == (4, 56, 5)
    np.testing.assert_allclose(task.meta["mean"], x[np.r_[0:140, 200:284, 420:476]].mean(0))


def test_bad_inputs_are_one_clear_error_each(sim_task, tmp_path):
    layout = neutral_layout(sim_task.recording)
    with pytest.raises(DimensionError, match=r"expected \('time', 'neuron'\)"):
        from_traces(layout.assign(activity=layout["activity"].rename(neuron="cell")))
    with pytest.raises(DimensionError, match="one label per time step"):
        from_traces(layout["activity"].values, conditions=layout["condition"].values[:-1], dt=0.005)
    bad = layout.copy(deep=True)
    bad["activity"][10, 3] = np.nan  # a neuron with a NaN is dropped, named, never z-scored as NaN
    with pytest.warns(UserWarning, match="1 of 60 neurons dropped"):
        task = from_traces(bad)
    assert task.n_neurons == 59 and str(layout["neuron"].values[3]) not in set(task.meta["name"])
    bad["activity"][10, :] = np.nan  # a frame lost in every neuron: refused, never joined over
    with pytest.raises(DataValidationError, match="Time steps 10 are NaN/inf in every neuron"):
        from_traces(bad)
    with pytest.raises(MissingVariableError, match="No stimulus conditions"):
        from_traces(layout.drop_vars("condition"))
    with pytest.raises(ConfigError, match="held_out conditions \\['taxis'\\] do not occur"):
        from_traces(layout, held_out=["taxis"])
    with pytest.raises(DataValidationError, match=r"No time step is labelled \['val'\]"):
        from_traces(layout.assign(split=layout["split"].where(layout["split"] != "val", "train")))
    with pytest.raises(ConfigError, match="segment is long enough for context"):
        from_traces(layout, horizon=400)
    with pytest.raises(ConfigError, match="give dt="):
        from_traces(layout["activity"].values, conditions=layout["condition"].values)
    with pytest.raises(DataValidationError, match="empty"):
        from_traces(np.zeros((0, 4)), conditions=[], dt=1.0)
    np.save(tmp_path / "x.npy", np.zeros((5, 3, 2)))
    with pytest.raises(DimensionError, match=r"expected \('time', 'neuron'\)"):
        from_traces(tmp_path / "x.npy", conditions=["a"] * 5)


def test_baselines_cli_runs_on_traces(sim_task, tmp_path, capsys):
    from scimech.cli.commands import main

    path = tmp_path / "traces.nc"
    neutral_layout(sim_task.recording).to_netcdf(path)
    out = tmp_path / "base"
    assert (
        main(
            [
                "neuro",
                "baselines",
                "--data",
                str(path),
                "--baselines",
                "mean,last_value,ridge_arx",
                "--max-windows",
                "20",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    table = pd.read_csv(out / "baselines.csv", index_col=0)
    assert list(table.index) == ["mean", "last_value", "ridge_arx"]
    # the mean baseline by hand on the same task: the context mean for every future step
    task = from_traces(path, max_windows=20)
    w = task.test
    assert table.loc["mean", "test"] == pytest.approx(
        np.abs(w.context.mean(1, keepdims=True) - w.target).mean(), rel=1e-5
    )
    assert np.isnan(table.loc["ridge_arx", "edge_auroc"])  # no true circuit behind recorded traces
    assert np.isfinite(table[["val", "test", "ood_mean"]].values.astype(float)).all()

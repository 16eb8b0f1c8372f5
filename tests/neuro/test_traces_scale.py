"""Recording scale (issue 21): lazy windows, chunked baselines, the low-rank VAR, chunked
scoring, the ZAPBench protocol, and the study's neuron subset, each against an independent
computation (scikit-learn's ridge, eagerly gathered windows, the sandbox's scorer)."""

from __future__ import annotations

import pickle

import numpy as np
import pandas as pd
import pytest
from sklearn.linear_model import Ridge

import neuro.baselines as nb
import neuro.data.samples as nd
import neuro.tasks as nt
from neuro.data import HELD_OUT_SUITE, ZAPBENCH, from_traces
from neuro.run import score_forecasts, task_fingerprint
from neuro.search.evaluate import score_predictions
from neuro.synthetic import latent_traces


@pytest.fixture(scope="module")
def small():
    ds = latent_traces(24, 1600, rank=3, conditions=("a", "b", "c", "d"), seed=1)
    return ds, from_traces(ds, held_out=("d",), max_windows=60)


def _eager(Z, origin, C, H):
    return Z[origin[:, None] + np.arange(C)], Z[origin[:, None] + C + np.arange(H)]


def test_lazy_windows_gather_and_batches(small):
    _, task = small
    w = task.test
    assert isinstance(w, nt.LazyWindows)
    ctx, tgt = _eager(w.Z, w.origin, w.C, w.H)
    np.testing.assert_array_equal(w.context, ctx)
    np.testing.assert_array_equal(w.target, tgt)
    parts = list(w.batches(max_elements=3 * (w.C + w.H) * w.Z.shape[1]))
    assert [len(p) for p in parts][:-1] == [3] * (len(parts) - 1)
    np.testing.assert_array_equal(np.concatenate([p.target for p in parts]), tgt)
    np.testing.assert_array_equal(np.concatenate([p.stim_future for p in parts]), w.stim_future)
    sub = w.neurons([2, 5])
    np.testing.assert_array_equal(sub.context, ctx[..., [2, 5]])


def _nlinear_design(series, C, H):
    """NLinear's rows (window x unit), built the plain way from every window."""
    tr, st = nt.window_index(series.shape[0], series.shape[1], C, H, 2, 0, 2000, 0)
    ctx = np.stack([series[i, s : s + C] for i, s in zip(tr, st)]).astype(np.float64)
    tgt = np.stack([series[i, s + C : s + C + H] for i, s in zip(tr, st)]).astype(np.float64)
    last = ctx[:, -1:]
    return (ctx - last).transpose(0, 2, 1).reshape(-1, C), (tgt - last).transpose(0, 2, 1).reshape(-1, H)


def test_nlinear_chunked_matches_sklearn(small, monkeypatch):
    _, task = small
    X, Y = _nlinear_design(task.train_series, 4, 32)
    ref = Ridge(alpha=1e-3).fit(X, Y)
    whole = nb.NLinear(4, 32).fit(task.train_series, task.train_stim)
    np.testing.assert_allclose(whole.W_[:-1], ref.coef_.T, atol=1e-6)
    np.testing.assert_allclose(whole.W_[-1], ref.intercept_, atol=1e-6)
    monkeypatch.setattr(nb, "BATCH_ELEMENTS", 5 * 36 * task.n_neurons)  # chunks of 5 windows
    chunked = nb.NLinear(4, 32).fit(task.train_series, task.train_stim)
    np.testing.assert_allclose(chunked.W_, whole.W_, rtol=0, atol=1e-7)
    dl_whole = nb.DLinear(4, 32).fit(task.train_series, task.train_stim)
    monkeypatch.setattr(nb, "BATCH_ELEMENTS", nt.BATCH_ELEMENTS)
    np.testing.assert_allclose(
        nb.DLinear(4, 32).fit(task.train_series, task.train_stim).W_, dl_whole.W_, rtol=0, atol=1e-7
    )


def test_lowrank_var_is_a_ridge_per_unit(small):
    """Above dense_max units the VAR is one ridge per unit on [own lags, PC lags, stimulus]."""
    _, task = small
    series, stim = task.train_series, task.train_stim
    m = nb.RidgeARX(4, 32, dense_max=10, rank=3, alpha=2.0).fit(series, stim)
    assert m.lowrank_ and m.P_.shape == (series.shape[-1], 3)
    n, T, N = series.shape
    lags = [series[:, 1 - k : T - 1 - k].reshape(-1, N).astype(np.float64) for k in range(2)]
    shared = np.concatenate([lag @ m.P_.astype(np.float64) for lag in lags] + [stim[:, 2:].reshape(n * (T - 2), -1)], 1)
    Y = series[:, 2:].reshape(-1, N)
    for i in (0, 7, N - 1):
        A = np.concatenate([lags[0][:, [i]], lags[1][:, [i]], shared], 1)
        ref = Ridge(alpha=2.0).fit(A, Y[:, i])
        got = np.concatenate([m.W_own_[:, i], m.W_shared_[:-1, i]])
        np.testing.assert_allclose(got, ref.coef_, atol=2e-4)
        assert abs(m.W_shared_[-1, i] - ref.intercept_) < 2e-4
    pred = m.predict(task.val.context, task.val.stim_context, task.val.stim_future)
    assert pred.shape == task.val.target.shape and np.isfinite(pred).all()
    # the one-step forecast is that ridge's prediction
    c, sf = task.val.context, task.val.stim_future
    x0 = np.concatenate([c[:, -1], c[:, -2]], 0)
    F = np.concatenate([c[:, -1] @ m.P_, c[:, -2] @ m.P_, sf[:, 0]], 1)
    i = 3
    one = m.W_own_[0, i] * c[:, -1, i] + m.W_own_[1, i] * c[:, -2, i] + F @ m.W_shared_[:-1, i] + m.W_shared_[-1, i]
    np.testing.assert_allclose(pred[:, 0, i], np.clip(one, -20, 20), rtol=1e-4, atol=1e-4)
    assert x0.shape[0] == 2 * len(c)


def test_lowrank_tide_reads_the_principal_axes(small):
    """Above dense_max units TiDE-lite's first layer takes context x rank inputs, not context x
    units (at 10,000 units and context 256 the dense layer needs 9 GB and diverges), and on
    rank-3 traces it still forecasts better than each unit's mean."""
    _, task = small
    series, stim, v = task.train_series, task.train_stim, task.val
    m = nb.TiDELite(4, 32, dense_max=10, rank=3).fit(series, stim)
    assert m.lowrank_ and m.enc_[0].in_features == 4 * 3 + 32 * stim.shape[-1]
    # the axes are the population's principal axes: orthonormal, spanning the top of the covariance
    P = m.P_.numpy().astype(np.float64)
    np.testing.assert_allclose(P.T @ P, np.eye(3), atol=1e-5)
    flat = series.reshape(-1, series.shape[-1]).astype(np.float64)
    top = np.linalg.eigh(np.cov(flat.T))[1][:, -3:]
    assert np.linalg.svd(top.T @ P, compute_uv=False).min() > 0.99
    pred = m.predict(v.context, v.stim_context, v.stim_future)
    mean = nb.MeanBaseline(4, 32).fit(series, stim).predict(v.context, v.stim_context, v.stim_future)
    assert pred.shape == v.target.shape
    assert np.abs(pred - v.target).mean() < np.abs(mean - v.target).mean()
    assert not nb.TiDELite(4, 32).fit(series, stim).lowrank_


def test_lowrank_gru_changes_only_the_principal_coordinates(small):
    """Above dense_max units the GRU reads the principal axes' coordinates and its forecast
    moves each unit only within their span: every step's change from the last context step
    lies in span(P)."""
    _, task = small
    series, stim, v = task.train_series, task.train_stim, task.val
    m = nb.GRUForecaster(4, 32, dense_max=10, rank=3, steps=60).fit(series, stim)
    assert m.lowrank_ and m.net_.input_size == 3 + stim.shape[-1] and m.out_.out_features == 3
    pred = m.predict(v.context, v.stim_context, v.stim_future)
    assert pred.shape == v.target.shape and np.isfinite(pred).all()
    P = m.P_.numpy().astype(np.float64)
    moved = (pred - v.context[:, -1:]).reshape(-1, pred.shape[-1]).astype(np.float64)
    outside = moved - moved @ P @ P.T
    assert np.abs(outside).max() < 1e-4 * max(1.0, np.abs(moved).max())
    assert not nb.GRUForecaster(4, 32, steps=2).fit(series, stim).lowrank_


def test_dense_var_unchanged_below_dense_max(small):
    _, task = small
    m = nb.RidgeARX(4, 32).fit(task.train_series, task.train_stim)
    assert not m.lowrank_
    n, T, N = task.train_series.shape
    X = np.concatenate([task.train_series[:, 1 : T - 1], task.train_series[:, 0 : T - 2], task.train_stim[:, 2:]], -1)
    ref = Ridge(alpha=1.0).fit(X.reshape(-1, X.shape[-1]), task.train_series[:, 2:].reshape(-1, N))
    np.testing.assert_allclose(m.W_[:-1], ref.coef_.T, atol=1e-4)


def test_score_forecasts_matches_the_sandbox_scorer(small, monkeypatch):
    _, task = small
    model = nb.NLinear(4, 32).fit(task.train_series, task.train_stim)
    data = task.data_arrays("full")
    preds = {
        f"pred/{sp}": model.predict(data[f"{sp}/context"], data[f"{sp}/stim_context"], data[f"{sp}/stim_future"])
        for sp in task.windows()
    }
    targets = {k: v for k, v in data.items() if k.endswith("/target")}
    ref_m, ref_a = score_predictions(preds, targets)
    got_m, got_a = score_forecasts(model, task)  # one chunk: the same numbers exactly
    assert got_m == ref_m
    for k in ref_a:
        np.testing.assert_array_equal(got_a[k], ref_a[k])
    monkeypatch.setattr(nt, "BATCH_ELEMENTS", 4 * 36 * task.n_neurons)  # chunks of 4 windows
    chunky = _Chunky(model)
    got_m2, got_a2 = score_forecasts(chunky, task)
    assert max(chunky.sizes) == 4 and len(chunky.sizes) > len(ref_m)
    for k in ref_m:
        assert abs(got_m2[k] - ref_m[k]) < 1e-9
    for k in ref_a:
        np.testing.assert_allclose(got_a2[k], ref_a[k], rtol=0, atol=1e-9)


class _Chunky:
    """The model, recording how many windows it is asked to forecast at a time."""

    def __init__(self, m):
        self.m, self.sizes = m, []

    def predict(self, c, sc, sf):
        self.sizes.append(len(c))
        return self.m.predict(c, sc, sf)


def test_fingerprint_streams_the_same_bytes(small):
    import hashlib

    _, task = small
    h = hashlib.sha256()
    h.update(str(task.name).encode())
    for k, v in sorted(task.data_arrays("full").items()):
        a = np.ascontiguousarray(v)
        h.update(f"{k}{a.shape}{a.dtype}".encode())
        h.update(a.tobytes())
    assert task_fingerprint([task]) == h.hexdigest()[:16]


def test_large_recording_prior_is_a_view_and_pickles_small(monkeypatch):
    monkeypatch.setattr(nd, "_DENSE_PRIOR_MAX", 16)
    ds = latent_traces(40, 1600, rank=2, seed=2)
    task = from_traces(ds, held_out=("d",), max_windows=20)
    mask = task.meta["prior_mask"]
    assert mask.shape == (40, 40) and nt.is_constant_view(mask) and mask.base is not None
    back = pickle.loads(pickle.dumps(task))
    assert nt.is_constant_view(back.meta["prior_mask"]) and float(back.meta["prior_mask"][3, 7]) == 1.0
    np.testing.assert_array_equal(back.test.target, task.test.target)
    sub = task.neuron_subset(10, seed=0)
    idx = sub.meta["neuron_index"]
    assert sub.n_neurons == 10 and sub.meta["prior_mask"].shape == (10, 10) and (sub.meta["prior_mask"] == 1).all()
    np.testing.assert_array_equal(sub.test.target, task.test.target[..., idx])
    np.testing.assert_array_equal(sub.meta["std"], task.meta["std"][idx])


def test_zscoring_in_blocks_matches_whole_array(monkeypatch):
    ds = latent_traces(30, 1600, rank=2, seed=3, dtype=np.float64)
    ref = from_traces(ds, held_out=("d",), max_windows=20)
    monkeypatch.setattr(nd, "_COLUMN_BLOCK", 7)
    got = from_traces(ds, held_out=("d",), max_windows=20)
    X = ds["activity"].values
    np.testing.assert_array_equal(got.train_series, ref.train_series)
    np.testing.assert_array_equal(got.meta["mean"], ref.meta["mean"])
    # against the statistics computed directly: first 70 % of each condition's 400 steps
    rows = np.concatenate([np.arange(a, a + 280) for a in (0, 400, 800)])
    np.testing.assert_allclose(got.meta["mean"], X[rows].mean(0), rtol=1e-12)
    np.testing.assert_allclose(got.meta["std"], X[rows].std(0), rtol=1e-12)


# ----------------------------------------------------------------------------- ZAPBench
CONDS = ("gain", "dots", "taxis", "dark")


@pytest.fixture(scope="module")
def zap():
    return latent_traces(20, 4 * 400, rank=3, conditions=CONDS, seed=4)


def test_zapbench_splits_windows_and_held_out(zap):
    task = from_traces(zap, protocol="zapbench", context=4)
    assert task.meta["protocol"] == "zapbench" and task.meta["held_out"] == ("taxis",)
    assert set(task.ood) == {HELD_OUT_SUITE}
    # each condition: 400 steps, one padding step at either end -> 398 = int(0.2 n) 79 test, int(0.1 n) 39 val,
    # 280 train (zapbench/data_utils.py truncates; tests/neuro/test_zapbench_split.py)
    n = 400 - 2
    n_te, n_va = int(0.2 * n), int(0.1 * n)
    n_tr = n - n_te - n_va
    assert (n_tr, n_va, n_te) == (280, 39, 79)
    # every forecast of the split at stride 1, its context reaching back into the condition
    assert len(task.val) == 3 * (n_va - 32 + 1)
    assert len(task.test) == 3 * (n_te - 32 + 1)
    assert len(task.ood[HELD_OUT_SUITE]) == n - 256 - 32 + 1  # forecast from step MAX_CONTEXT_LENGTH on
    w = task.test
    starts = {0: 0, 1: 400, 3: 1200}  # the ID conditions' first rows
    first_test = sorted({int(o) + 4 for o in w.origin})
    assert first_test[0] == 1 + n_tr + n_va  # the first forecast starts at the test block
    assert w.origin.min() == 1 + n_tr + n_va - 4  # its context is the 4 val steps before
    for o in w.origin:
        cond = [k for k, a in starts.items() if a <= o < a + 400]
        assert cond and o + 4 + 32 <= starts[cond[0]] + 399  # inside the condition, padding excluded
    assert task.train_series.shape[1] == n_tr
    # the z-scoring uses training steps only
    X = zap["activity"].values.astype(np.float64)
    rows = np.concatenate([np.arange(a + 1, a + 1 + n_tr) for a in (0, 400, 1200)])
    np.testing.assert_allclose(task.meta["mean"], X[rows].mean(0), rtol=1e-6, atol=1e-6)


def test_zapbench_long_context_and_refusals(zap):
    long = latent_traces(12, 4 * 600, rank=3, conditions=CONDS, seed=5)
    task = from_traces(long, protocol="zapbench", context=256)
    assert task.context == 256 and len(task.test) > 0
    assert task.test.origin.min() >= 1  # never before the first condition's padding
    with pytest.raises(Exception, match="horizon"):
        from_traces(zap, protocol="zapbench", horizon=16)
    with pytest.raises(Exception, match="held_out"):
        from_traces(zap.assign(condition=zap["condition"].str.replace("taxis", "other")), protocol="zapbench")
    with pytest.raises(Exception, match="own splits"):
        from_traces(zap, protocol="zapbench", splits=(0.6, 0.2, 0.2))
    assert ZAPBENCH["horizon"] == 32 and ZAPBENCH["contexts"] == (4, 256)


def test_zapbench_study_cli_writes_mae_per_step(zap, tmp_path, capsys):
    from scimech.cli.commands import main

    path = tmp_path / "rec.nc"
    zap.to_netcdf(path)
    out = tmp_path / "study"
    rc = main(
        [
            "neuro",
            "study",
            "--data",
            str(path),
            "--protocol",
            "zapbench",
            "--out",
            str(out),
            "--baselines",
            "mean,last_value,nlinear",
            "--nodes",
            "2",
            "--long-context",
            "0",
            "--search-neurons",
            "12",
            "--search-seconds",
            "1000",
        ]
    )
    assert rc == 0
    steps = pd.read_csv(out / "mae_per_step.csv", index_col=[0, 1])
    assert list(steps.columns) == [f"lead_{h}" for h in range(1, 33)]
    assert ("mean", "test") in steps.index and ("nlinear", f"ood_{HELD_OUT_SUITE}") in steps.index
    full = pd.read_csv(out / "baselines_all_neurons.csv", index_col=0)
    assert set(full.index) == {"mean", "last_value", "nlinear"}
    # persistence on every unit equals its MAE computed by hand from the windows
    task = from_traces(path, protocol="zapbench")
    w = task.test
    ref = np.abs(w.context[:, -1:] - w.target).mean()
    assert abs(full.loc["last_value", "test"] - ref) < 1e-6
    all_steps = pd.read_csv(out / "mae_per_step_all_neurons.csv", index_col=[0, 1])
    np.testing.assert_allclose(
        all_steps.loc[("last_value", "test")].to_numpy(), np.abs(w.context[:, -1:] - w.target).mean((0, 2)), atol=1e-6
    )
    # the report says the study ran on a subset: how many of how many, how chosen, which (by hand: the draw)
    report = (out / "report.md").read_text()
    assert "The recording has 20 units" in report and "use 12 of them (60.0%)" in report
    assert "drawn uniformly at random without replacement (seed 0, `--search-neurons 12`" in report
    assert "The baselines on all 20 units of the recording" in report and report.startswith("# Model discovery on your")
    want = np.sort(np.random.default_rng(0).choice(20, 12, replace=False))
    np.testing.assert_array_equal(pd.read_csv(out / "search_units.csv")["unit"].to_numpy(), want)
    # a recording's report opens with what was read from it, names the product and its sampling, and has no
    # planted truth (none was planted): no recovery.txt, no planted-truth line printed
    assert report.split("\n## ")[1].startswith("Is the model competent?")  # the model's competence first
    head = report.split("## What was read", 1)[1].split("\n## ", 1)[0]
    assert "your product (" in report and "**Product:** netCDF file" in head
    assert "- dt used: 1 s (1 Hz)" in head and "| time | time | coordinate | s | s |" in head
    assert "sampled every 1 s (1 Hz): the context spans 4 s and the horizon forecasts 32 s ahead" in report
    assert "planted" not in report.lower() and not (out / "recovery.txt").exists()
    assert "planted truth" not in capsys.readouterr().out

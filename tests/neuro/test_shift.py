"""neuro.shift on a tiny run: the labelled result, and its numbers against independent computations."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import xarray as xr
from scipy.linalg import subspace_angles

from neuro.baselines import GRUForecaster
from neuro.shift import GRURollout, run_shift
from scimech.analysis.dictionary import load_dictionary


@pytest.mark.parametrize("dense_max", [2048, 3])  # 3: the low-rank GRU (5 units on 2 principal axes)
def test_the_stepped_gru_forecasts_exactly_as_the_baseline(dense_max):
    g = np.random.default_rng(0)
    series, stim = g.standard_normal((2, 80, 5)).astype(np.float32), g.random((2, 80, 3)).astype(np.float32)
    fitted = GRUForecaster(context=4, horizon=6, steps=3, hidden=8, dense_max=dense_max, rank=2).fit(series, stim)
    assert fitted.lowrank_ == (dense_max == 3)
    ctx, sc, sf = series[:, :4], stim[:, :4], stim[:, 4:10]
    with torch.no_grad():
        got = GRURollout(fitted)(torch.as_tensor(ctx), torch.as_tensor(sc), torch.as_tensor(sf)).numpy()
    np.testing.assert_allclose(got, fitted.predict(ctx, sc, sf), atol=1e-5)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    out = tmp_path_factory.mktemp("neuro_shift")
    ds = run_shift(
        out, gru_steps=100, k=8, n_features=64, dict_epochs=10, ood_trials=1, max_windows=120, n_bootstrap=100
    )
    return out, ds


def test_tiny_shift_run_is_labelled_and_saved(tiny):
    out, ds = tiny
    for name in ("shift.nc", "rollout.nc", "shift.png", "dictionary.safetensors", "acts_shifted.nc"):
        assert (out / name).exists()
    saved = xr.load_dataset(out / "shift.nc")
    assert float(saved.gap) == pytest.approx(float(ds.gap))
    assert saved.attrs["scimech_version"] and saved.attrs["seed"] == 0 and "gru_steps" in saved.attrs["config"]
    assert saved.sizes["step"] == 32 and saved.attrs["shift"].endswith("turning")
    assert set(saved.neuron_type.values) >= {"MN", "V2a"}
    for label in ("in", "shifted", "realigned"):
        lo, est, hi = (float(saved[f"fidelity_vs_zero{part}_{label}"]) for part in ("_ci_low", "", "_ci_high"))
        assert lo <= est <= hi
    # the splice keeps more of the forecast than zeroing the state does (fidelity > 0), in and out;
    # medians, as a window where the spliced free run runs away can sink the ratio of means
    for label in ("in", "shifted"):
        assert float(saved[f"fidelity_vs_zero_median_ci_low_{label}"]) > 0
        assert float(saved[f"share_below_zero_{label}"]) > 0.5
    # the steered feature moves the forecast, from the first forecast step on
    assert float(saved.effect_rms[0]) > 0 and np.all(saved.effect_rms_ci_low <= saved.effect_rms_ci_high)


def test_the_gap_is_the_principal_angles_computed_independently(tiny):
    out, ds = tiny
    dic = load_dictionary(out / "dictionary.safetensors")
    x_in = xr.load_dataarray(out / "acts_in_distribution.nc").values.reshape(-1, dic.d_in)
    x_out = xr.load_dataarray(out / "acts_shifted.nc").values.reshape(-1, dic.d_in)
    with torch.no_grad():
        recon = dic(torch.as_tensor(x_in)).double().numpy()

    def top(x, r):
        vals, vecs = np.linalg.eigh(x.T @ x / len(x))
        return vecs[:, ::-1][:, :r], vals[::-1]

    _, vals = top(recon, 1)
    r = int(np.searchsorted(np.cumsum(vals) / vals.sum(), 0.95) + 1)
    assert r == ds.attrs["rank"]
    angles = subspace_angles(top(recon, r)[0], top(x_out.astype(np.float64), r)[0])
    assert 0 <= float(ds.gap) <= 1
    assert float(ds.gap) == pytest.approx(np.sqrt(np.mean(np.sin(angles) ** 2)), abs=1e-6)
    np.testing.assert_allclose(np.sort(ds.angle.values), np.sort(np.degrees(angles)), atol=1e-4)

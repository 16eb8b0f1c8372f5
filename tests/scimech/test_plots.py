"""The first figures, tested on what they draw (data, coordinates, labels), not on pixels.

Truths: a grid pivoted by hand from sites whose layer and head the test wrote; bootstrap
intervals that must include 0 (samples symmetric about 0) or cannot (every sample the same
positive value); probe values read from the Dataset; bin means computed with pandas.
"""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
import xarray as xr  # noqa: E402
from torch import nn  # noqa: E402

import scimech  # noqa: E402
from scimech.capture.attention import decompose_attention  # noqa: E402
from scimech.causal import metrics  # noqa: E402
from scimech.errors import DataValidationError  # noqa: E402


@pytest.fixture
def ax():
    fig, ax = plt.subplots()
    yield ax
    plt.close(fig)


def _heads_result(values):
    """A sweep-like result: sites listed head-major (out of layer order), effect (site, sample)."""
    sites, rows = [], []
    for h in range(3):
        for layer in (1, 0):
            sites.append(f"enc.layers.{layer}.attn.heads[{h}]")
            rows.append(values[(layer, h)])
    sites.append("enc.layers.0.linear1")  # names no head: left out of the map
    rows.append(np.full(len(rows[0]), 99.0))
    return xr.Dataset({"effect": (("site", "sample"), np.array(rows))}, coords={"site": sites})


def test_heat_map_is_the_result_pivoted_by_layer_and_head(ax):
    rng = np.random.default_rng(0)
    values = {(layer, h): rng.normal(size=8) for layer in (0, 1) for h in range(3)}
    layer_head_map(_heads_result(values), "effect", ax=ax)
    expected = np.array([[values[(layer, h)].mean() for h in range(3)] for layer in (0, 1)])
    np.testing.assert_allclose(ax.images[0].get_array(), expected, rtol=1e-12)
    assert ax.get_xlabel() == "head" and ax.get_ylabel() == "layer"
    assert [t.get_text() for t in ax.get_yticklabels()] == ["0", "1"]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["0", "1", "2"]
    cbar = ax.images[0].colorbar
    assert cbar is not None and cbar.ax.get_ylabel().startswith("effect")
    assert ax.images[0].norm.vmin == -ax.images[0].norm.vmax  # centred on no effect


def test_hatched_cells_are_those_whose_interval_includes_zero(ax):
    sym = np.array([-1.0, 1.0] * 10)  # mean 0: any interval of the mean includes it
    pos = np.full(20, 0.5)  # every sample 0.5: the interval is 0.5
    values = {(layer, h): (sym if (layer + h) % 2 else pos) for layer in (0, 1) for h in range(3)}
    layer_head_map(_heads_result(values), "effect", ax=ax)
    hatched = {(round(p.get_y() + 0.5), round(p.get_x() + 0.5)) for p in ax.patches if p.get_hatch()}
    assert hatched == {(layer, h) for layer in (0, 1) for h in range(3) if (layer + h) % 2}


def test_heat_map_of_a_real_patching_sweep_places_each_head(ax):
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(8, 2, 16, batch_first=True, dropout=0.0)
    model = decompose_attention(nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).eval())
    g = torch.Generator().manual_seed(1)
    clean, corrupted = torch.randn(6, 4, 8, generator=g), torch.randn(6, 4, 8, generator=g)
    sites = [f"layers.{i}.self_attn.heads[{h}]" for i in range(2) for h in range(2)]
    ds = scimech.patching_sweep(model, clean, corrupted, sites, metrics.output(index=(-1, 0)))
    scimech.layer_head_map(ds, "effect", ax=ax, interval=False)
    by_hand = np.array(
        [[float(ds["effect"].sel(site=f"layers.{i}.self_attn.heads[{h}]").mean()) for h in range(2)] for i in range(2)]
    )
    np.testing.assert_allclose(ax.images[0].get_array(), by_hand, rtol=1e-6)


def test_heat_map_refuses_what_it_cannot_place(ax):
    ds = xr.Dataset({"effect": ("site", [1.0, 2.0])}, coords={"site": ["embed", "readout"]})
    with pytest.raises(DataValidationError, match="heads"):
        layer_head_map(ds, "effect", ax=ax)
    twice = xr.Dataset({"effect": ("site", [1.0, 2.0])}, coords={"site": ["a.0.attn.heads[1]", "b.0.attn.heads[1]"]})
    with pytest.raises(DataValidationError, match="both layer 0, head 1"):
        layer_head_map(twice, "effect", ax=ax)
    by_call = xr.Dataset({"effect": (("site", "call"), [[1.0, 2.0]])}, coords={"site": ["l.0.attn.heads[0]"]})
    with pytest.raises(DataValidationError, match="sel\\(call=0\\)"):
        layer_head_map(by_call, "effect", ax=ax)


def test_probe_curve_draws_the_probe_values_by_layer_with_their_interval(ax):
    rng = np.random.default_rng(0)
    y = rng.normal(size=80)
    # layer i carries y with weight i: skill rises with depth
    feats = {f"blocks.{i}.mlp": np.c_[i * y, rng.normal(size=80)] + rng.normal(size=(80, 2)) for i in range(4)}
    ds = scimech.probe_sites(feats, y, cv=4, n_bootstrap=200)
    probe_curve(ds, ax=ax)
    line = ax.lines[0]
    np.testing.assert_array_equal(line.get_xdata(), [0, 1, 2, 3])
    np.testing.assert_array_equal(line.get_ydata(), ds["score_oof"].values)
    np.testing.assert_array_equal(ax.lines[1].get_ydata(), ds["control_mean"].values)
    band = ax.collections[0].get_paths()[0].vertices
    lo, hi = ds["score_ci_low"].values, ds["score_ci_high"].values
    assert np.isclose(band[:, 1].min(), lo.min()) and np.isclose(band[:, 1].max(), hi.max())
    assert ax.get_xlabel() == "layer" and ax.get_ylabel() == "r2"


def test_feature_against_variable_scatters_samples_and_bins_their_mean(ax):
    rng = np.random.default_rng(3)
    t = xr.DataArray(rng.uniform(0, 30, 200), dims="sample", coords={"sample": np.arange(200)}, name="temperature")
    t.attrs["units"] = "degC"
    acts = xr.DataArray(np.tanh(t.values / 10) + rng.normal(0, 0.1, 200), dims="sample", name="feature 3")
    acts = acts.assign_coords(sample=np.arange(200))
    feature_vs_variable(acts.isel(sample=slice(None, None, -1)), t, ax=ax, bins=6)  # paired by sample, not position
    pts = ax.collections[0].get_offsets()
    np.testing.assert_allclose(np.asarray(pts), np.c_[t.values, acts.values])
    by_pandas = pd.Series(acts.values).groupby(pd.cut(t.values, 6), observed=True).mean()
    np.testing.assert_allclose(ax.lines[0].get_ydata(), by_pandas.values, rtol=1e-12)
    assert ax.get_xlabel() == "temperature [degC]" and ax.get_ylabel() == "feature 3"
    with pytest.raises(DataValidationError, match="one feature"):
        feature_vs_variable(xr.DataArray(np.zeros((5, 2))), np.zeros(5), ax=ax)


layer_head_map = scimech.layer_head_map
probe_curve = scimech.probe_curve
feature_vs_variable = scimech.feature_vs_variable

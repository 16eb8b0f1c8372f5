"""captum attribution through the wrapper: completeness on a linear model."""

import numpy as np
import pytest
import torch
from torch import nn

from scimech.analysis.attribution import attribute
from scimech.errors import DimensionError, SiteNotFoundError


def test_integrated_gradients_of_linear_model_is_weight_times_delta():
    torch.manual_seed(0)
    lin = nn.Linear(5, 1)
    x = torch.randn(4, 5)
    base = torch.randn(4, 5)
    att = attribute(lin, x, method="integrated_gradients", baselines=base, dims=["sample", "feature"])
    expect = (lin.weight.detach() * (x - base)).numpy()
    np.testing.assert_allclose(att.values, expect, atol=1e-5)
    assert att.dims == ("sample", "feature") and att.attrs["library"] == "captum"


def test_gradient_shap_on_linear_model_averages_to_weight_times_delta():
    torch.manual_seed(0)
    lin = nn.Linear(3, 1)
    x = torch.randn(6, 3)
    base = torch.zeros(1, 3)
    att = attribute(lin, x, method="gradient_shap", baselines=base, n_samples=8)
    # linear model: the gradient is constant, so every sample gives w * (x - 0) exactly
    np.testing.assert_allclose(att.values, (lin.weight.detach() * x).numpy(), atol=1e-5)


def test_gradient_shap_is_reproducible_per_seed_and_leaves_numpy_state_alone():
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))  # nonlinear: the random draws matter
    x = torch.randn(6, 3)
    first = attribute(m, x, method="gradient_shap", n_samples=4, seed=3).values
    np.random.seed(123)
    before = np.random.get_state()[1].copy()
    again = attribute(m, x, method="gradient_shap", n_samples=4, seed=3).values
    np.testing.assert_array_equal(first, again)  # captum draws from numpy's global RNG: seeded per call
    np.testing.assert_array_equal(np.random.get_state()[1], before)
    other = attribute(m, x, method="gradient_shap", n_samples=4, seed=4).values
    assert not np.allclose(first, other)


def test_layer_conductance_runs_on_named_layer():
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1))
    att = attribute(m, torch.randn(5, 3), method="layer_conductance", layer="0")
    assert att.shape == (5, 4)
    # completeness: conductances sum to f(x) - f(0)
    x = torch.randn(5, 3)
    att = attribute(m, x, method="layer_conductance", layer="0", n_steps=200)
    with torch.no_grad():
        delta = (m(x) - m(torch.zeros_like(x))).squeeze(-1).numpy()
    np.testing.assert_allclose(att.values.sum(1), delta, atol=2e-2)


def test_layer_feature_ablation_equals_hand_computed_contributions():
    torch.manual_seed(1)
    m = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1))
    x = torch.randn(6, 3)
    att = attribute(m, x, method="layer_feature_ablation", layer="1", dims=["sample", "unit"])
    with torch.no_grad():
        h = m[1](m[0](x))
    # ablating unit i of the ReLU output to 0 removes exactly w2_i * h_i from the (linear) readout
    np.testing.assert_allclose(att.values, (m[2].weight.detach() * h).numpy(), atol=1e-6)
    assert att.dims == ("sample", "unit") and att.attrs["method"] == "layer_feature_ablation"


def test_integrated_gradients_target_on_multi_output_and_errors():
    torch.manual_seed(2)
    lin = nn.Linear(4, 3)
    x = torch.randn(5, 4)
    att = attribute(lin, x, method="integrated_gradients", target=2)  # zero baseline by default
    np.testing.assert_allclose(att.values, (lin.weight[2].detach() * x).numpy(), atol=1e-5)
    # completeness: attributions sum to f(x) - f(0) for the chosen output
    with torch.no_grad():
        delta = (lin(x) - lin(torch.zeros_like(x)))[:, 2].numpy()
    np.testing.assert_allclose(att.values.sum(1), delta, atol=1e-5)
    with pytest.raises(SiteNotFoundError, match="Nearest valid names"):
        attribute(nn.Sequential(lin), x, method="layer_conductance", layer="lin", target=0)
    with pytest.raises(ValueError, match="needs layer="):
        attribute(lin, x, method="layer_conductance", target=0)
    with pytest.raises(ValueError, match="method must be"):
        attribute(lin, x, method="saliency")
    with pytest.raises(DimensionError, match="one name per axis"):
        attribute(lin, x, method="integrated_gradients", target=0, dims=["sample"])

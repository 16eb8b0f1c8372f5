"""A normalised effect is a ratio: where its denominator (clean minus corrupted metric) is at the
metric's float noise it is not a measurement. The session (scimech.capture.session) refuses a
metric that is constant over the inputs and makes such ratios NaN with a warning naming the
floor: float32's machine epsilon times the metric's magnitude (at least 1), computed here by hand."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from torch import nn

import scimech as sm
from scimech.causal import metrics
from scimech.errors import DataValidationError

EPS32 = float(np.finfo(np.float32).eps)  # 1.19e-7


@pytest.fixture(scope="module")
def readme_model():
    """The README's own model: a TransformerEncoder whose output ends in LayerNorm."""
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(d_model=32, nhead=4, batch_first=True, dropout=0.0)
    model = sm.decompose_attention(nn.TransformerEncoder(layer, num_layers=2)).eval()
    inputs = torch.randn(120, 10, 32)
    return model, inputs[:60], inputs[60:]


SITES = [f"layers.{layer}.self_attn.heads[{h}]" for layer in range(2) for h in range(4)]


def test_the_mean_of_a_layer_normed_output_is_refused_as_constant_over_the_inputs(readme_model):
    model, clean, corrupted = readme_model
    with torch.no_grad():  # by hand: the metric metrics.output() reads, the mean of each sample's output
        values = torch.cat([model(clean).mean((1, 2)), model(corrupted).mean((1, 2))]).numpy()
    floor = EPS32 * max(1.0, float(np.abs(values).max()))
    assert values.max() - values.min() <= floor  # constant over the inputs, up to rounding
    for verb in (sm.patching_sweep, sm.attribution_patching):
        with pytest.raises(DataValidationError, match=rf"constant over the inputs.*noise floor {floor:.1e}"):
            verb(model, clean, corrupted, SITES, metrics.output())


def test_a_metric_the_inputs_move_gives_normalised_effects_without_a_warning(readme_model):
    model, clean, corrupted = readme_model
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        res = sm.patching_sweep(model, clean, corrupted, SITES, metrics.output(index=(0, 0)))
    gap = np.abs(res.clean.values - res.corrupted.values)
    assert (gap > EPS32 * max(1.0, float(np.abs([res.clean.values, res.corrupted.values]).max()))).all()
    assert np.isfinite(res.normalized_effect.values).all()


def _identity():
    """y = 1 * x + 0: the metric (the mean of one output) is the input itself, exactly."""
    lin = nn.Linear(1, 1)
    with torch.no_grad():
        lin.weight.fill_(1.0)
        lin.bias.zero_()
    return nn.Sequential(lin).eval()


def test_a_difference_at_the_noise_floor_gives_nan_with_the_reason_said():
    up = float(np.nextafter(np.float32(1.5), np.float32(2)) - np.float32(1.5))  # one float32 step at 1.5
    clean = torch.tensor([[1.0], [2.0], [3.0], [1.5]])
    corrupted = torch.tensor([[1.0 + EPS32], [0.5], [3.0], [1.5 + 4 * up]])
    c, x = clean[:, 0].numpy(), corrupted[:, 0].numpy()
    floor = EPS32 * max(1.0, float(np.abs(np.concatenate([c, x])).max()))  # 3 x eps = 3.6e-7
    gap = np.abs(c - x)
    assert gap[0] <= floor < gap[3] and gap[2] == 0  # one step below the floor, four steps above
    for verb in (sm.patching_sweep, sm.attribution_patching):
        with pytest.warns(RuntimeWarning, match=rf"{verb.__name__}: normalized_effect is NaN for 1 of 4 .*{floor:.1e}"):
            res = verb(_identity(), clean, corrupted, ["0"], metrics.output())
        got = res.normalized_effect.sel(site="0").values
        # the site is the whole output: patching it with the clean value restores the clean metric, 1
        np.testing.assert_array_equal(np.isnan(got), [True, False, True, False])
        np.testing.assert_allclose(got[[1, 3]], 1.0, rtol=1e-6)

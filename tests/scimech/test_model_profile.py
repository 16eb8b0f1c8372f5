"""scimech.causal.model_profile: what every verb assumes, measured once, consulted by every verb alike.

- (a bfloat16 model whose output drifts +1 per call, refused by every verb alike:
  tests/scimech/test_stateful_models.py);
- NaN at the same land rows in every pass is not drift, in any verb (the sweeps refused it);
- scimech.profile shows calls, shapes, dtype, layout, rows, repeatability, grad and in-place
  writes, each checked against the model's code or a plain hook;
- the cache: kept for the same model, forward and input signature, dropped when a parameter
  changes in place.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import scimech
from scimech import ablate, attribution_patching
from scimech.causal import metrics
from scimech.causal.intervene import ablation_sweep, patching_sweep
from scimech.causal.model_profile import ModelProfile, require, same_values

# float32 models of two layers: tiled passes round like a hand loop to ~1e-7; 1e-5 is far
# below the effects (~0.1-1)
ATOL = 1e-5


def _sum(out, target=None):
    return out.float().sum(-1)


class Land(nn.Module):
    """Rows whose input is NaN (land points) give NaN; the others a two-layer network's output."""

    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(4, 4), nn.Linear(4, 3)

    def forward(self, x):
        out = self.b(torch.relu(self.a(torch.nan_to_num(x))))
        return out.masked_fill(torch.isnan(x[:, :1]), float("nan"))


def _land_inputs():
    g = torch.Generator().manual_seed(1)
    x, corrupted = torch.randn(8, 4, generator=g), torch.randn(8, 4, generator=g)
    for t in (x, corrupted):
        t[[2, 5], 0] = float("nan")  # the same land rows in both
    return x, corrupted


def test_nan_at_the_same_land_rows_is_not_drift_in_any_verb():
    torch.manual_seed(0)
    model = Land().eval()
    x, corrupted = _land_inputs()
    ocean = np.array([i not in (2, 5) for i in range(8)])
    with torch.no_grad():  # by hand: b's output replaced (zero; the clean run's) through a plain hook
        base_x, base_c = _sum(model(x)), _sum(model(corrupted))
        src = model.b(torch.relu(model.a(torch.nan_to_num(x))))
        h = model.b.register_forward_hook(lambda m, a, out: torch.zeros_like(out))
        zero = _sum(model(x))
        h.remove()
        h = model.b.register_forward_hook(lambda m, a, out: src)
        patched = _sum(model(corrupted))
        h.remove()
    abl = ablation_sweep(model, x, ["a", "b"], metric=_sum, method="zero")
    np.testing.assert_allclose(abl.effect.sel(site="b").values[ocean], (zero - base_x).numpy()[ocean], atol=ATOL)
    assert np.isnan(abl.effect.sel(site="b").values[~ocean]).all()
    pat = patching_sweep(model, x, corrupted, ["a", "b"], metric=_sum)
    np.testing.assert_allclose(pat.patched.sel(site="b").values[ocean], patched.numpy()[ocean], atol=ATOL)
    # the metric is linear in b's output: the first-order estimate is exact on the ocean rows
    atp = attribution_patching(model, x, corrupted, ["b"], _sum)
    np.testing.assert_allclose(atp.effect.sel(site="b").values[ocean], (patched - base_c).numpy()[ocean], atol=ATOL)
    with ablate(model, "a", method="zero"), torch.no_grad():
        model(x)


class Twice(nn.Module):
    """``shared`` runs twice per pass; ``a``'s output gets ``+= 1`` in place."""

    def __init__(self):
        super().__init__()
        self.a, self.shared = nn.Linear(4, 6), nn.Linear(6, 6)
        self.conv = nn.Conv1d(6, 2, 1)

    def forward(self, x):
        h = self.a(x)
        h += 1.0
        h = self.shared(self.shared(h))
        return self.conv(h[:, :, None]).squeeze(-1)


def test_the_profile_table_says_what_the_model_does_at_each_site():
    torch.manual_seed(0)
    model, x = Twice().eval(), torch.randn(5, 4)
    table = scimech.profile(model, x, ["a", "shared", "conv"])
    assert list(table.index) == ["a", "shared", "conv"]
    # by the model's code: shared runs twice, a once; a's output is written in place; float32
    assert table.loc["shared", "calls"] == 2 and table.loc["a", "calls"] == 1
    assert table.loc["a", "in_place"] and not table.loc["shared", "in_place"]
    assert table.loc["conv", "shapes"] == [(5, 2, 1)] and table.loc["conv", "layout"].startswith("batch channel")
    assert set(table["dtype"]) == {"float32"} and table["tolerance"].eq(1e-5).all()
    assert table["repeatable"].all() and not table["needs_grad"].any()
    assert table.loc["a", "samples"] == "rows independent"
    assert isinstance(table.attrs["profile"], ModelProfile) and "shared" in repr(table.attrs["profile"])
    assert all(col in repr(table) for col in table.columns)  # a notebook sees every column


def test_the_profile_names_rows_that_interact():
    class BatchMean(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(3, 3)

        def forward(self, x):
            h = self.a(x)
            return h - h.mean(0, keepdim=True)

    table = scimech.profile(BatchMean().eval(), torch.randn(6, 3), ["a"])
    assert table.loc["a", "samples"].startswith("rows interact")
    declared = scimech.profile(BatchMean().eval(), torch.randn(6, 3), ["a"], samples=torch.arange(6))
    assert declared.loc["a", "samples"] == "declared: 6 samples in 6 rows"


def test_a_profile_is_measured_once_and_again_after_a_parameter_changes():
    torch.manual_seed(0)
    model, x = nn.Sequential(nn.Linear(4, 4), nn.Tanh(), nn.Linear(4, 2)).eval(), torch.randn(6, 4)
    calls = []
    model.register_forward_pre_hook(lambda m, a: calls.append(a[0].shape[0]))
    first = require(model, x, verb="test", needs={"repeatable", "rows"})
    n = len(calls)
    assert n == 3 and calls == [6, 6, 3]  # one pass, its repeat, the first half of the rows
    again = require(model, torch.randn(10, 4), verb="test", needs={"repeatable", "rows"})  # same signature
    assert again is first and len(calls) == n
    with torch.no_grad():
        model[0].weight.add_(0.1)  # a new parameter version: measured again
    assert require(model, x, verb="test", needs={"repeatable"}) is not first and len(calls) == n + 2
    current = require(model, x, verb="test", needs={"repeatable"})
    other = require(model, x, verb="test", needs={"repeatable"}, forward=lambda m, b: m(b))  # its own profile
    assert other is not current
    n = len(calls)
    for _ in range(2):  # the same lambda written afresh (in a notebook cell, in a loop): measured once
        assert require(model, x, verb="test", needs={"repeatable"}, forward=lambda m, b: m(b) * 1) is not current
    assert len(calls) == n + 2


def test_same_values_treats_nan_at_the_same_places_as_equal_and_scales_by_dtype():
    a = torch.tensor([1.0, float("nan"), 3.0])
    assert same_values(a, a.clone())[0]
    assert not same_values(a, torch.tensor([1.0, 2.0, 3.0]))[0]
    assert not same_values(a, a + 1e-3)[0]
    b16 = torch.tensor([1.0, 2.0, 3.0], dtype=torch.bfloat16)
    assert same_values(b16, b16 + 0.0078125)[0]  # one bfloat16 step at 2: summation-order noise
    assert not same_values(b16, b16 + 1)[0]  # a drift of +1


def test_metrics_output_parts_of_a_complex_output():
    z = torch.tensor([[1 + 2j, 3 - 1j]])
    assert metrics.output()(z).dtype == torch.complex64
    torch.testing.assert_close(metrics.output(part="imag")(z), torch.tensor([0.5]))
    torch.testing.assert_close(metrics.output(part="real")(z), torch.tensor([2.0]))
    with pytest.raises(ValueError, match="part"):
        metrics.output(part="phase")

"""Site grammar: module names that end like selectors (``hidden_units``, ``heads``) are plain
module paths, and selectors apply after them."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import scimech as sm

from .helpers import ATOL, capture, edit_output, npy, set_cols

B = 3


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden_units = nn.Linear(4, 12)
        self.units = nn.Linear(12, 6)  # a module called `units`: addressed with a selector below

    def forward(self, x):
        return self.units(torch.relu(self.hidden_units(x)))


class Named(nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp = MLP()
        self.heads = nn.Linear(6, 3)  # a module called `heads`, on a model without attention
        self.block = nn.Sequential()
        self.block.add_module("heads", nn.Linear(3, 2))

    def forward(self, x):
        return self.block(torch.tanh(self.heads(self.mlp(x)))).sum(-1)


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return Named().eval()


@pytest.fixture
def x():
    return torch.randn(B, 5, 4)


CASES = {  # site -> (module path, columns of its output)
    "mlp.hidden_units": ("mlp.hidden_units", slice(None)),
    "mlp.hidden_units.units[2]": ("mlp.hidden_units", slice(2, 3)),
    "mlp.hidden_units.units[2,7]": ("mlp.hidden_units", [2, 7]),
    "mlp.units.units[1]": ("mlp.units", slice(1, 2)),
    "heads": ("heads", slice(None)),
    "heads.units[0]": ("heads", slice(0, 1)),
    "block.heads": ("block.heads", slice(None)),
    "block.heads.units[1]": ("block.heads", slice(1, 2)),
}


@pytest.mark.parametrize("site", list(CASES))
def test_record_module_names_ending_like_selectors(model, x, site):
    path, cols = CASES[site]
    truth = capture(model.get_submodule(path), lambda: model(x))[..., cols]
    a = sm.record(model, x, [site])[site]
    assert a.dims == ("sample", "position", "feature")
    np.testing.assert_allclose(a.values, npy(truth), atol=ATOL)


@pytest.mark.parametrize("site", ["mlp.hidden_units.units[2]", "heads", "block.heads.units[1]"])
def test_ablate_module_names_ending_like_selectors(model, x, site):
    path, cols = CASES[site]
    with torch.no_grad():
        with sm.ablate(model, site, method="zero"):
            got = model(x)
        with edit_output(model.get_submodule(path), lambda t: set_cols(t, cols, 0.0)):
            expect = model(x)
    np.testing.assert_allclose(npy(got), npy(expect), atol=ATOL)


def test_module_names_are_listed(model):
    names = set(sm.list_sites(model))
    assert {"mlp.hidden_units", "heads", "block.heads"} <= names

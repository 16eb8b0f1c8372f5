"""Modules that return a wrapped tensor: escnn's ``GeometricTensor``.

escnn's equivariant layers take and return a ``GeometricTensor``: not a tensor subclass but
an object holding the data in ``.tensor`` (``(batch, channels, y, x)``, channels-first) and its
field type in ``.type``; ``R2Conv`` convolves ``input.tensor`` with a filter expanded from its
basis (``torch.nn.functional.conv2d``, no ``nn.Conv2d`` child) and returns
``GeometricTensor(out, self.out_type)``; ``ReLU`` acts on ``.tensor`` and keeps the type. The
stand-ins below reproduce that structure (escnn is not installed). The site's activation is the
documented tensor ``.tensor``: ``record`` reads it, ablation and patching write a changed tensor
back into the same wrapper (its field type kept). Truth: plain torch hooks on the same modules.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import scimech as sm

from .helpers import ATOL, npy

AXES = {"conv1": "batch channel y x", "relu": "batch channel y x"}  # an R2Conv has no nn.Conv2d to infer from


class FieldType:
    def __init__(self, size: int):
        self.size = size


class GeometricTensor:
    """As escnn's: the data in ``.tensor``, its field type in ``.type``."""

    def __init__(self, tensor: torch.Tensor, type: FieldType):
        assert isinstance(tensor, torch.Tensor) and tensor.shape[1] == type.size
        self.tensor, self.type = tensor, type


class R2Conv(nn.Module):
    def __init__(self, c_in: int, c_out: int):
        super().__init__()
        self.in_type, self.out_type = FieldType(c_in), FieldType(c_out)
        self.weights = nn.Parameter(torch.randn(c_out, c_in, 3, 3) * 0.3)

    def forward(self, x: GeometricTensor) -> GeometricTensor:
        assert x.type is self.in_type or x.type.size == self.in_type.size
        return GeometricTensor(F.conv2d(x.tensor, self.weights, padding=1), self.out_type)


class ReLU(nn.Module):
    def forward(self, x: GeometricTensor) -> GeometricTensor:
        return GeometricTensor(torch.relu(x.tensor), x.type)


class Steerable(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1, self.relu, self.conv2 = R2Conv(2, 6), ReLU(), R2Conv(6, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.conv2(self.relu(self.conv1(GeometricTensor(x, self.conv1.in_type))))
        return h.tensor.mean((2, 3))


def first_output(out, target=None):
    return out[:, 0]


def _hook(module, fn):
    """A plain torch hook replacing ``module``'s output tensor by ``fn(tensor)``, kept wrapped."""
    return module.register_forward_hook(lambda m, a, out: GeometricTensor(fn(out.tensor), out.type))


@pytest.fixture(scope="module")
def case():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    return Steerable().eval(), torch.randn(4, 2, 5, 5, generator=g), torch.randn(4, 2, 5, 5, generator=g)


def test_record_reads_the_documented_tensor(case):
    model, x, _ = case
    seen = []
    h = model.conv1.register_forward_hook(lambda m, a, out: seen.append(out.tensor.detach().clone()))
    with torch.no_grad():
        model(x)
    h.remove()
    got = sm.record(model, x, ["conv1"], axes=AXES)
    np.testing.assert_allclose(got["conv1"].transpose("sample", "channel", "y", "x").values, npy(seen[0]), atol=ATOL)


def test_zero_ablation_of_channels_writes_back_into_the_wrapper(case):
    model, x, _ = case

    def zero_two(t):
        t = t.clone()
        t[:, [1, 2]] = 0
        return t

    h = _hook(model.conv1, zero_two)
    with torch.no_grad():
        want = first_output(model(x))
    h.remove()
    res = sm.ablation_sweep(model, x, ["conv1.channels[1,2]"], first_output, method="zero", axes=AXES)
    np.testing.assert_allclose(res["ablated"].values[0], npy(want), atol=ATOL)


def test_patching_sweep_puts_the_clean_tensor_in_the_wrapper(case):
    model, clean, corrupted = case
    seen = []
    h = model.relu.register_forward_hook(lambda m, a, out: seen.append(out.tensor.detach().clone()))
    with torch.no_grad():
        model(clean)
    h.remove()
    h = _hook(model.relu, lambda t: seen[0])
    with torch.no_grad():
        want = first_output(model(corrupted))
    h.remove()
    res = sm.patching_sweep(model, clean, corrupted, ["relu"], first_output, axes=AXES)
    np.testing.assert_allclose(res["patched"].values[0], npy(want), atol=ATOL)

"""A batch given as an object that converts itself to a dict (MACE's documented call,
``forward=lambda m, b: m(b.to_dict(), training=False)``).

MACE keeps its own copy of PyTorch Geometric's ``Data``: the batch stores its tensors in a
dict, reads attributes through ``__getattr__``, iterates over ``(key, value)`` pairs, and
converts with ``to_dict()`` / ``from_dict()``. Such an object is one batch (iterating it gives
pairs, not batches), and its tensors are those of its dict. The model below reads the dict as
MACE's does (``data["positions"]``, ``data["node_attrs"]``) and gives one energy per node
(atoms do not interact here, so per-node values are the truth). Truth: plain torch hooks.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import scimech as sm
from scimech.errors import DataValidationError

from .helpers import ATOL, capture, edit_output, npy


class AtomicData:
    """Like MACE's ``mace.tools.torch_geometric.Data``: a store, ``(key, value)`` iteration, to/from dict."""

    def __init__(self, **fields):
        self.__dict__["_store"] = dict(fields)

    def __getattr__(self, key):
        try:
            return self.__dict__["_store"][key]
        except KeyError:
            raise AttributeError(key) from None

    def __iter__(self):
        return iter(sorted(self._store.items()))

    def to_dict(self):
        return dict(self._store)

    @classmethod
    def from_dict(cls, d):
        return cls(**d)


class NoFromDict(AtomicData):
    from_dict = None  # a class that cannot be rebuilt from its dict


class PerAtom(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(3, 8)
        self.readout = nn.Linear(8, 1)

    def forward(self, data: dict, training: bool = False):
        h = torch.tanh(self.embed(data["positions"]) + data["node_attrs"])
        return {"energy": self.readout(h)[:, 0]}


def energy(m, b):
    return m(b.to_dict(), training=False)["energy"]


def per_atom(out, target=None):
    return out


@pytest.fixture(scope="module")
def case():
    torch.manual_seed(0)
    model = PerAtom().eval()
    fields = {"positions": torch.randn(6, 3), "node_attrs": torch.randn(6, 8)}
    return model, fields


def test_record_reads_the_dict_of_the_batch(case):
    model, fields = case
    batch = AtomicData(**fields)
    want = capture(model.embed, lambda: energy(model, batch))
    got = sm.record(model, batch, ["embed"], forward=energy)
    np.testing.assert_allclose(got["embed"].values, npy(want), atol=ATOL)


def test_ablation_sweep_matches_a_hook(case):
    model, fields = case
    batch = AtomicData(**fields)
    with torch.no_grad(), edit_output(model.embed, torch.zeros_like):
        want = energy(model, batch)
    got = sm.ablation_sweep(model, batch, ["embed"], per_atom, forward=energy, method="zero")
    np.testing.assert_allclose(got["ablated"].sel(site="embed").values, npy(want), atol=ATOL)


def test_batches_cut_through_from_dict(case):
    model, fields = case
    batch = AtomicData(**fields)
    want = capture(model.embed, lambda: energy(model, batch))
    got = sm.record(model, batch, ["embed"], forward=energy, batch_size=4)  # 4 + 2 rows
    np.testing.assert_allclose(got["embed"].values, npy(want), atol=ATOL)


def test_a_class_without_from_dict_is_refused_naming_the_dict(case):
    model, fields = case
    batch = NoFromDict(**fields)
    with pytest.raises(DataValidationError, match=r"inputs=batch\.to_dict\(\)"):
        sm.record(model, batch, ["embed"], forward=energy, batch_size=4)
    # the fix the message names works
    want = capture(model.embed, lambda: energy(model, batch))
    got = sm.record(
        model, batch.to_dict(), ["embed"], forward=lambda m, d: m(d, training=False)["energy"], batch_size=4
    )
    np.testing.assert_allclose(got["embed"].values, npy(want), atol=ATOL)

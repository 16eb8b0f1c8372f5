"""Every site that ``list_sites`` offers parses and records: module names with the characters
the site grammar uses.

torch forbids only ``.`` and the empty string in a module's name. escnn's ``InnerBatchNorm``
registers one batch norm per field size as ``batch_norm_[<size>]`` (its source:
``self.add_module('batch_norm_[{}]'.format(s), ...)``), and a ``ModuleDict``'s keys are any
strings (colons, dashes, parentheses, brackets; whitespace is refused, as the grammar separates by it). The real models' names (BERT and T5 from
``transformers`` configs, PyG's SchNet) must also parse back to the module that bears them.
Truth: the module ``named_modules`` gives under that name, and its output taken by a plain hook.
"""

from __future__ import annotations

from contextlib import ExitStack

import numpy as np
import pytest
import torch
from torch import nn

import scimech as sm
from scimech.capture.sites import parse_site

from .helpers import ATOL, npy, watch

ODD_NAMES = ("batch_norm_[4]", "field(2)", "conv:1", "block-1", "x[0]y")


class FieldStack(nn.Module):
    """Blocks registered under names with brackets, spaces, colons and dashes, applied in order."""

    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleDict({name: nn.Linear(4, 4) for name in ODD_NAMES})
        self.inner = nn.Module()
        self.inner.add_module("batch_norm_[2]", nn.BatchNorm1d(4))  # as escnn's InnerBatchNorm

    def forward(self, x):
        for block in self.blocks.values():
            x = torch.tanh(block(x))
        return self.inner.get_submodule("batch_norm_[2]")(x)


def _round_trips(model: nn.Module, names: list[str]) -> None:
    """Each name parses to the module of that name (or, for a head, of its attention module)."""
    modules = dict(model.named_modules())
    for name in names:
        spec = parse_site(name)
        if spec.heads is not None:
            assert name == f"{spec.module}.heads[{spec.heads[0]}]" and spec.module in modules, name
        else:
            assert spec.module == name and spec.port == "output" and spec.units is None, (name, spec)
            assert model.get_submodule(spec.module) is modules[name]


def test_odd_names_parse_and_record():
    torch.manual_seed(0)
    model = FieldStack().eval()
    x = torch.randn(5, 4)
    names = sm.list_sites(model)
    assert {f"blocks.{n}" for n in ODD_NAMES} | {"inner.batch_norm_[2]"} <= set(names)
    _round_trips(model, names)
    sites = [n for n in names if n not in ("blocks", "inner")]  # containers never run
    with torch.no_grad(), ExitStack() as stack:
        want = {n: stack.enter_context(watch(model.get_submodule(n))) for n in sites}
        model(x)
    got = sm.record(model, x, sites)
    for n in sites:
        np.testing.assert_allclose(got[n].values, npy(want[n][0]), atol=ATOL)
    # selectors and ports still read from the end of such a name
    spec = parse_site("blocks.batch_norm_[4].units[1,2]:input")
    assert (spec.module, spec.units, spec.port) == ("blocks.batch_norm_[4]", (1, 2), "input")


@pytest.mark.parametrize("which", ["bert", "t5"])
def test_transformers_names_round_trip(which):
    import transformers as tf

    torch.manual_seed(0)
    if which == "bert":
        cfg = tf.BertConfig(
            hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32, vocab_size=32
        )
        model = tf.BertModel(cfg)
    else:
        cfg = tf.T5Config(d_model=16, d_kv=8, d_ff=32, num_layers=1, num_heads=2, vocab_size=32)
        model = tf.T5Model(cfg)
    _round_trips(model, sm.list_sites(model))


def test_schnet_names_round_trip():
    from torch_geometric.nn import SchNet

    model = SchNet(hidden_channels=8, num_filters=8, num_interactions=1, num_gaussians=4, cutoff=2.0)
    _round_trips(model, sm.list_sites(model))

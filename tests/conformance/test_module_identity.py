"""Modules by identity: a block reachable under two paths (prefix reuse must key on the
module, not the name), and a module called twice per forward (weight sharing)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import scimech as sm
from scimech.errors import SiteCalledTwiceError, SiteNeverRanError

from .helpers import ATOL, capture, edit_output, npy, set_channel, set_cols, watch

B = 4


class Residual(nn.Module):
    def __init__(self, d=16):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(d, 2 * d), nn.Linear(2 * d, d)

    def forward(self, h):
        return h + self.fc2(torch.tanh(self.fc1(h)))


class Aliased(nn.Module):
    """Three residual blocks; ``alias`` is ``blocks[1]`` registered a second time."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(3, 16)
        self.blocks = nn.ModuleList([Residual() for _ in range(3)])
        self.alias = self.blocks[1]
        self.head = nn.Linear(16, 1)

    def forward(self, x):
        h = self.embed(x)
        for block in self.blocks:
            h = block(h)
        return self.head(h.mean(1)).squeeze(-1)


def metric(out, target=None):
    return out


@pytest.fixture(scope="module")
def aliased():
    torch.manual_seed(0)
    model = Aliased().eval()
    assert model.alias is model.blocks[1]
    g = torch.Generator().manual_seed(60)
    return model, torch.randn(B, 5, 3, generator=g), torch.randn(B, 5, 3, generator=g)


def test_patching_sweep_at_an_alias_of_a_block(aliased):
    model, clean, corrupted = aliased
    src = capture(model.blocks[1], lambda: model(clean))
    with torch.no_grad(), edit_output(model.blocks[1], lambda t: src):
        expect = npy(model(corrupted))
    at_alias = sm.patching_sweep(model, clean, corrupted, ["alias"], metric)
    at_path = sm.patching_sweep(model, clean, corrupted, ["blocks.1"], metric)
    both = sm.patching_sweep(model, clean, corrupted, ["blocks.2", "alias", "blocks.1"], metric)
    assert at_alias.attrs["sweep_path"] == "prefix_reuse", at_alias.attrs.get("sweep_path_note")
    np.testing.assert_allclose(at_alias.patched.sel(site="alias").values, expect, atol=ATOL)
    np.testing.assert_allclose(at_path.patched.sel(site="blocks.1").values, expect, atol=ATOL)
    np.testing.assert_allclose(both.patched.sel(site="alias").values, expect, atol=ATOL)
    np.testing.assert_allclose(both.patched.sel(site="blocks.1").values, expect, atol=ATOL)
    src2 = capture(model.blocks[2], lambda: model(clean))
    with torch.no_grad(), edit_output(model.blocks[2], lambda t: src2):
        np.testing.assert_allclose(both.patched.sel(site="blocks.2").values, npy(model(corrupted)), atol=ATOL)


def test_ablation_sweep_at_an_alias_of_a_block(aliased):
    model, x, _ = aliased
    with torch.no_grad(), edit_output(model.blocks[1], lambda t: set_cols(t, slice(4, 5), 0.0)):
        expect = npy(model(x))
    res = sm.ablation_sweep(model, x, ["alias.units[4]", "blocks.1.units[4]"], metric, method="zero")
    np.testing.assert_allclose(res.ablated.sel(site="alias.units[4]").values, expect, atol=ATOL)
    np.testing.assert_allclose(res.ablated.sel(site="blocks.1.units[4]").values, expect, atol=ATOL)


class Shared(nn.Module):
    """One Linear applied twice per forward (weight sharing)."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(3, 8)
        self.shared = nn.Linear(8, 8)
        self.head = nn.Linear(8, 1)

    def forward(self, x):
        h = torch.tanh(self.shared(self.embed(x)))
        h = torch.tanh(self.shared(h))
        return self.head(h).squeeze(-1)


@pytest.fixture(scope="module")
def shared():
    torch.manual_seed(0)
    return Shared().eval(), torch.randn(B, 3, generator=torch.Generator().manual_seed(61))


def test_record_of_a_module_called_twice_is_an_error(shared):
    model, x = shared
    with pytest.raises(SiteCalledTwiceError):
        sm.record(model, x, ["shared"], calls="error")


@pytest.mark.parametrize("method", ["zero", "scale"])
def test_ablate_acts_on_every_call(shared, method):
    model, x = shared
    new = (
        (lambda t: set_cols(t, slice(1, 2), 0.0))
        if method == "zero"
        else (lambda t: set_cols(t, slice(1, 2), 3.0 * t[:, 1:2]))
    )
    with torch.no_grad():
        with edit_output(model.shared, new):  # a forward hook edits every call
            expect = npy(model(x))
        only_first = []

        def first_call_only(t):
            only_first.append(t)
            return new(t) if len(only_first) == 1 else t

        with edit_output(model.shared, first_call_only):
            once = npy(model(x))
        kwargs = {"factor": 3.0} if method == "scale" else {}
        with sm.ablate(model, "shared.units[1]", method=method, calls="all", **kwargs):
            got = npy(model(x))
        with sm.ablate(model, "shared.units[1]", method=method, calls=0, **kwargs):
            got_first = npy(model(x))
        with pytest.raises(SiteCalledTwiceError, match="calls="):  # the default assumes nothing
            with sm.ablate(model, "shared.units[1]", method=method, **kwargs):
                model(x)
        with pytest.raises(SiteNeverRanError, match=r"\[2\]"):  # a call the pass never reaches
            with sm.ablate(model, "shared.units[1]", method=method, calls=2, **kwargs):
                model(x)
    np.testing.assert_allclose(got, expect, atol=ATOL)
    np.testing.assert_allclose(got_first, once, atol=ATOL)
    assert np.abs(once - expect).max() > 1e-4  # editing one call only would be told apart


def test_fno_blocks_run_twice(fno):
    """neuraloperator's FNO calls its ``fno_blocks`` once per layer."""
    x = torch.randn(2, 1, 16, 16, generator=torch.Generator().manual_seed(62))
    with watch(fno.model.fno_blocks) as calls, torch.no_grad():
        fno.model(x)
    assert len(calls) == 2
    with pytest.raises(SiteCalledTwiceError):
        sm.record(fno.model, x, ["fno_blocks"], calls="error", axes="batch channel y x")
    with torch.no_grad():
        with edit_output(fno.model.fno_blocks, lambda t: set_channel(t, 3, 0.0)):
            expect = npy(fno.model(x))
        with sm.ablate(fno.model, "fno_blocks.channels[3]", method="zero", axes="batch channel y x", calls="all"):
            got = npy(fno.model(x))
    np.testing.assert_allclose(got, expect, atol=ATOL)


def test_vit_layer_calls_its_dropout_twice(vit):
    """HF ViTLayer applies the same ``dropout`` module after attention and after the MLP."""
    x = torch.randn(2, 3, 16, 16, generator=torch.Generator().manual_seed(63))
    s = "layers.0.dropout"
    with watch(vit.model.get_submodule(s)) as calls, torch.no_grad():
        vit.model(x)
    assert len(calls) == 2
    with pytest.raises(SiteCalledTwiceError):
        sm.record(vit.model, x, [s], calls="error")
    with torch.no_grad():
        with edit_output(vit.model.get_submodule(s), lambda t: set_cols(t, slice(0, 4), 0.0)):
            expect = npy(vit.metric(vit.model(x)))
        with sm.ablate(vit.model, f"{s}.units[0,1,2,3]", method="zero", calls="all"):
            got = npy(vit.metric(vit.model(x)))
    np.testing.assert_allclose(got, expect, atol=ATOL)

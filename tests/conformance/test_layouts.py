"""Activation layouts: channels-first outputs of torch conv-family modules are recognised
without configuration, anything 4-D that is not is an error naming ``axes=``, declared axes
name each axis in order, and head layouts take an explicit projection width."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

import scimech as sm
from scimech.errors import DimensionError, HeadLayoutError, ScimechError

from .helpers import ATOL, capture, edit_input, edit_output, head_cols, npy, set_cols

B = 3
SPATIAL = {3: ("channel", "x"), 4: ("channel", "y", "x"), 5: ("channel", "z", "y", "x")}


def check_recognised(model, x, path):
    """Record ``path`` without axes: (sample, channel, <spatial>), and its per-channel spatial mean."""
    truth = capture(model.get_submodule(path), lambda: model(x))
    a = sm.record(model, x, [path])[path]
    assert a.dims == ("sample", *SPATIAL[truth.dim()]), (path, a.dims)
    np.testing.assert_allclose(a.values, npy(truth), atol=ATOL)
    mean = sm.record(model, x, [path], reduce="mean")[path]
    assert mean.dims == ("sample", "channel")
    np.testing.assert_allclose(mean.values, npy(truth.mean(dim=tuple(range(2, truth.dim())))), atol=ATOL)


@pytest.mark.parametrize("path", ["enc1.0", "enc1.1", "enc1", "pool", "enc2.1", "enc2", "head"])
def test_unet_conv_family_outputs_are_recognised(unet, path):
    """Conv2d, BatchNorm2d, an nn.Sequential ending in ReLU after a conv, MaxPool2d, GroupNorm."""
    check_recognised(unet.model, torch.randn(B, 1, 16, 16, generator=torch.Generator().manual_seed(1)), path)


def test_conv1d_and_conv3d_are_recognised(fno):
    check_recognised(fno.model, torch.randn(B, 1, 16, 16), "fno_blocks.fno_skips.0.conv")  # Conv1d: (B, 8, 256)
    torch.manual_seed(0)
    vol = nn.Sequential(nn.Conv3d(2, 4, 3, padding=1), nn.BatchNorm3d(4), nn.AvgPool3d(2)).eval()
    x = torch.randn(B, 2, 4, 6, 8)
    for path in ["0", "1", "2"]:
        check_recognised(vol, x, path)


def test_vit_patch_embedding_is_channels_first(vit):
    check_recognised(vit.model, torch.randn(B, 3, 16, 16), "embeddings.patch_embeddings.projection")


def test_fno_inner_activations_need_axes(fno):
    x = torch.randn(B, 1, 16, 16)
    for s in ["fno_blocks.convs.0", "lifting", "fno_blocks.convs.1.units[3]"]:
        with pytest.raises(DimensionError, match="axes="):
            sm.record(fno.model, x, [s])
    with pytest.raises(DimensionError, match="axes="):
        with torch.no_grad(), sm.ablate(fno.model, "fno_blocks.convs.0.units[3]", method="zero"):
            fno.model(x)
    with pytest.raises(DimensionError, match="axes="):
        sm.ablation_sweep(fno.model, x, ["fno_blocks.convs.0.channels[3]"], fno.metric, method="zero")


def test_fno_declared_axes_by_module_path(fno):
    x = torch.randn(B, 1, 16, 16)
    s = "fno_blocks.convs.0"
    ds = sm.record(fno.model, x, [s, f"{s}.units[3]"], axes={s: "batch channel y x"})
    truth = capture(fno.model.fno_blocks.convs[0], lambda: fno.model(x))
    assert ds[s].dims == ("sample", "channel", "y", "x")
    np.testing.assert_allclose(ds[s].values, npy(truth), atol=ATOL)
    np.testing.assert_allclose(ds[f"{s}.units[3]"].values, npy(truth[:, [3]]), atol=ATOL)
    mean = sm.record(fno.model, x, [s], reduce="mean", axes="batch channel y x")[s]
    assert mean.dims == ("sample", "channel")
    np.testing.assert_allclose(mean.values, npy(truth.mean((2, 3))), atol=ATOL)


class ChannelsLast(nn.Module):
    """Conv -> (B, y, x, C) -> a Linear mixing channels: ``mix`` is 4-D and channels-last."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 6, 3, padding=1)
        self.mix = nn.Linear(6, 6)
        self.out = nn.Linear(6, 1)

    def forward(self, x):
        h = torch.tanh(self.mix(self.conv(x).permute(0, 2, 3, 1)))
        return self.out(h).mean(dim=(1, 2, 3))


def test_declared_channels_last_axes():
    torch.manual_seed(0)
    model = ChannelsLast().eval()
    x = torch.randn(B, 1, 5, 7)
    truth = capture(model.mix, lambda: model(x))  # (B, 5, 7, 6)
    # a Linear acts on its last axis, so that is the feature axis without a declaration
    inferred = sm.record(model, x, ["mix.units[3]"])["mix.units[3]"]
    np.testing.assert_allclose(inferred.values, npy(truth[..., 3:4]), atol=ATOL)
    assert inferred.dims == ("sample", "position_1", "position_2", "feature")
    axes = {"mix": "batch y x channel"}
    ds = sm.record(model, x, ["mix", "mix.channels[3]"], axes=axes)
    assert ds["mix"].dims == ("sample", "y", "x", "channel")
    np.testing.assert_allclose(ds["mix"].values, npy(truth), atol=ATOL)
    np.testing.assert_allclose(ds["mix.channels[3]"].values, npy(truth[..., [3]]), atol=ATOL)
    mean = sm.record(model, x, ["mix"], reduce="mean", axes=axes)["mix"]
    assert mean.dims == ("sample", "channel")
    np.testing.assert_allclose(mean.values, npy(truth.mean((1, 2))), atol=ATOL)
    with torch.no_grad():
        with sm.ablate(model, "mix.units[3]", method="zero", axes=axes):
            got = model(x)
        with edit_output(model.mix, lambda t: set_cols(t, slice(3, 4), 0.0)):
            expect = model(x)
    np.testing.assert_allclose(npy(got), npy(expect), atol=ATOL)


def test_channels_selector_needs_a_channel_axis():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 1)).eval()
    x = torch.randn(B, 4, 5)  # tokens: (batch, position, feature)
    np.testing.assert_allclose(
        sm.record(model, x, ["0.units[1]"])["0.units[1]"].values,
        npy(capture(model[0], lambda: model(x))[..., [1]]),
        atol=ATOL,
    )
    with pytest.raises(ScimechError, match="channel"):
        sm.record(model, x, ["0.channels[1]"])


class OpaqueProjection(nn.Module):
    """A projection scimech cannot read a width from (no in_features / nx)."""

    def __init__(self, dim):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(dim, dim) / math.sqrt(dim))

    def forward(self, x):
        return x @ self.weight


class PlainAttention(nn.Module):
    """Multi-head self-attention that names its head count ``h`` (not found automatically)."""

    def __init__(self, dim=16, h=4):
        super().__init__()
        self.h = h
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = OpaqueProjection(dim)

    def forward(self, x):
        b, n, c = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, self.h, c // self.h).permute(2, 0, 3, 1, 4)
        w = (q @ k.transpose(-2, -1) / math.sqrt(c // self.h)).softmax(-1)
        return self.out((w @ v).transpose(1, 2).reshape(b, n, c))


class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(3, 16)
        self.attn = PlainAttention()
        self.head = nn.Linear(16, 1)

    def forward(self, x):
        h = self.embed(x)
        return self.head((h + self.attn(h)).mean(1)).squeeze(-1)


def test_head_layout_with_explicit_width():
    torch.manual_seed(0)
    model = Tiny().eval()
    x = torch.randn(B, 5, 3)
    truth = capture(model.attn.out, lambda: model(x), port="input")  # (B, 5, 16): 4 heads of 4
    layouts = {"attn": sm.HeadLayout(attn="attn", proj="attn.out", num_heads=4, width=16)}
    ds = sm.record(model, x, ["attn.heads[1]", "attn.heads"], layouts=layouts)
    assert ds["attn.heads[1]"].dims == ("sample", "position", "head_dim")
    np.testing.assert_allclose(ds["attn.heads[1]"].values, npy(truth[..., head_cols(1, 4)]), atol=ATOL)
    np.testing.assert_allclose(ds["attn.heads"].values, npy(truth.reshape(B, 5, 4, 4)), atol=ATOL)
    with torch.no_grad():
        with sm.ablate(model, "attn.heads[2]", method="zero", layouts=layouts):
            got = model(x)
        with edit_input(model.attn.out, lambda t: set_cols(t, head_cols(2, 4), 0.0)):
            expect = model(x)
    np.testing.assert_allclose(npy(got), npy(expect), atol=ATOL)
    # without a width: either found from the tensor at run time, or a clear error naming the fix
    no_width = {"attn": sm.HeadLayout(attn="attn", proj="attn.out", num_heads=4)}
    try:
        a = sm.record(model, x, ["attn.heads[1]"], layouts=no_width)["attn.heads[1]"]
    except HeadLayoutError as err:
        assert "width" in str(err)
    else:
        np.testing.assert_allclose(a.values, npy(truth[..., head_cols(1, 4)]), atol=ATOL)

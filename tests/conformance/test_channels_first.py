"""Channels-first activations (B, C, y, x): a plain convolutional U-Net, whose torch conv
modules are recognised automatically, and a neuraloperator FNO, whose activations need
``axes="batch channel y x"``. ``channels[3]`` / ``units[3]`` select channel 3 (dim 1 of the
raw tensor) at every grid point; every verb against hand hooks that edit ``t[:, 3]``."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

import scimech as sm

from .helpers import (
    ATOL,
    capture,
    edit_output,
    grad_at,
    matching_rows,
    npy,
    per_sample_dot,
    set_channel,
    watch,
)

B, R = 3, 4
CH = 3


@pytest.fixture(scope="module", params=["unet", "fno"])
def case(request):
    m = request.getfixturevalue(request.param)
    g = torch.Generator().manual_seed(40)

    def draw(n):
        return torch.randn(n, 1, 16, 16, generator=g)

    if request.param == "unet":
        # enc2 (Sequential: Conv2d, GroupNorm, ReLU) -> (B, 16, 8, 8), read next by `up`
        where = SimpleNamespace(path="enc2", axes=None, observer=m.model.up, grid=(8, 8))
    else:
        # the lifting ChannelMLP -> (B, 8, 16, 16), not a torch conv: declared; read next by fno_blocks
        where = SimpleNamespace(
            path="lifting", axes={"lifting": "batch channel y x"}, observer=m.model.fno_blocks, grid=(16, 16)
        )
    return SimpleNamespace(
        **vars(m),
        **vars(where),
        module=m.model.get_submodule(where.path),
        clean=draw(B),
        corrupted=draw(B),
        reference=draw(R),
    )


def act(case, x):
    return capture(case.module, lambda: case.model(x))


def hand_output(case, x, fn=None):
    """Model output with the site module's output replaced by ``fn(output)``."""
    with torch.no_grad():
        if fn is None:
            return case.model(x)
        with edit_output(case.module, fn):
            return case.model(x)


def observed(case, x, ctx):
    """(model output, the site module's output as the next module received it) under ``ctx``."""
    with torch.no_grad(), ctx, watch(case.observer, "input") as seen:
        out = case.model(x)
    return out, seen[0]


@pytest.mark.parametrize("selector", ["channels", "units"])
def test_record_selects_channels_not_the_last_axis(case, selector):
    s = f"{case.path}.{selector}[{CH},5]"
    a = sm.record(case.model, case.clean, [s], axes=case.axes and {case.path: "batch channel y x"})[s]
    assert a.dims == ("sample", "channel", "y", "x") and a.shape == (B, 2, *case.grid)
    np.testing.assert_allclose(a.values, npy(act(case, case.clean)[:, [CH, 5]]), atol=ATOL)


def test_reduce_mean_is_the_spatial_mean_per_channel(case):
    ds = sm.record(
        case.model,
        case.clean,
        [case.path, f"{case.path}.channels[{CH}]"],
        reduce="mean",
        axes=case.axes and "batch channel y x",
    )
    truth = act(case, case.clean).mean(dim=(2, 3))
    assert ds[case.path].dims == ("sample", "channel")
    np.testing.assert_allclose(ds[case.path].values, npy(truth), atol=ATOL)
    np.testing.assert_allclose(ds[f"{case.path}.channels[{CH}]"].values, npy(truth[:, [CH]]), atol=ATOL)


@pytest.mark.parametrize("method", ["zero", "scale", "mean", "resample"])
def test_ablate_touches_channel_3_at_every_grid_point_and_nothing_else(case, method):
    clean_act = act(case, case.clean)
    ref = act(case, case.reference)[:, CH]  # (R, y, x)
    kwargs = {
        "zero": {},
        "scale": {"factor": -2.0},
        "mean": {"reference": case.reference},
        "resample": {"reference": case.reference, "seed": 0},
    }[method]
    out, used = observed(
        case, case.clean, sm.ablate(case.model, f"{case.path}.channels[{CH}]", method=method, axes=case.axes, **kwargs)
    )
    others = [c for c in range(clean_act.shape[1]) if c != CH]
    np.testing.assert_allclose(npy(used[:, others]), npy(clean_act[:, others]), atol=ATOL)
    if method == "resample":  # each sample's channel 3 is one reference sample's, at all grid points
        rows = matching_rows(used[:, CH], ref)
        assert all(rows), rows
    else:
        new = {"zero": torch.zeros_like(ref[0]), "scale": -2.0 * clean_act[:, CH], "mean": ref.mean(0)}[method]
        np.testing.assert_allclose(npy(used[:, CH]), npy(new.expand_as(used[:, CH])), atol=ATOL)
    np.testing.assert_allclose(
        npy(out), npy(hand_output(case, case.clean, lambda t: set_channel(t, CH, used[:, CH]))), atol=ATOL
    )


def test_patch_takes_what_record_gives(case):
    """The documented contract: a patch value has the shape the site records, here
    (sample, channel, y, x), so a recording of the clean run patches back in as it is."""
    s = f"{case.path}.channels[{CH}]"
    rec = sm.record(case.model, case.clean, [s], axes=case.axes)[s]
    assert rec.dims == ("sample", "channel", "y", "x")
    with torch.no_grad(), sm.patch(case.model, {s: torch.from_numpy(rec.values)}, axes=case.axes):
        got = case.model(case.corrupted)
    clean = act(case, case.clean)[:, CH]
    np.testing.assert_allclose(
        npy(got), npy(hand_output(case, case.corrupted, lambda t: set_channel(t, CH, clean))), atol=ATOL
    )


@pytest.mark.parametrize("method", ["zero", "scale", "mean", "resample"])
def test_ablation_sweep_matches_hand_hook(case, method):
    sites = [f"{case.path}.channels[{CH}]", f"{case.path}.units[0,5]"]
    kwargs = {
        "zero": {},
        "scale": {"factor": 0.5},
        "mean": {"reference": case.reference},
        "resample": {"reference": case.reference},
    }[method]
    res = sm.ablation_sweep(case.model, case.clean, sites, case.metric, method=method, axes=case.axes, **kwargs)
    np.testing.assert_allclose(res.baseline.values, npy(case.metric(hand_output(case, case.clean))), atol=ATOL)
    ref = act(case, case.reference)
    for s, chans in zip(sites, [[CH], [0, 5]]):
        if method == "resample":  # each sample: one reference sample's channels, all grid points
            values = [ref[j, chans] for j in range(R)]
        else:
            values = [{"zero": 0.0, "mean": ref[:, chans].mean(0), "scale": None}[method]]

        def edit(t, v, chans=chans):
            t = t.clone()
            t[:, chans] = 0.5 * t[:, chans] if v is None else v
            return t

        expect = np.stack([npy(case.metric(hand_output(case, case.clean, lambda t, v=v: edit(t, v)))) for v in values])
        got = res.ablated.sel(site=s).values
        assert (np.abs(expect - got[None]) <= ATOL).any(0).all(), (s, got, expect)


@pytest.mark.parametrize("direction", ["denoising", "noising"])
def test_patching_sweep_matches_hand_hook(case, direction):
    sites = [f"{case.path}.channels[{CH}]", f"{case.path}.units[1,2]", case.path]
    res = sm.patching_sweep(
        case.model, case.clean, case.corrupted, sites, case.metric, direction=direction, axes=case.axes
    )
    base, source = (case.corrupted, case.clean) if direction == "denoising" else (case.clean, case.corrupted)
    src = act(case, source)
    for s, chans in zip(sites, [[CH], [1, 2], slice(None)]):

        def put(t, chans=chans):
            t = t.clone()
            t[:, chans] = src[:, chans]
            return t

        np.testing.assert_allclose(
            res.patched.sel(site=s).values, npy(case.metric(hand_output(case, base, put))), atol=ATOL
        )


def test_attribution_patching_is_the_first_order_estimate(case):
    s = f"{case.path}.channels[{CH}]"
    res = sm.attribution_patching(case.model, case.clean, case.corrupted, [s], case.metric, axes=case.axes)
    a_base, grad = grad_at(case.module, lambda: case.metric(case.model(case.corrupted)), port="output")
    expect = per_sample_dot((act(case, case.clean) - a_base)[:, CH], grad[:, CH])
    np.testing.assert_allclose(res.effect.sel(site=s).values, expect, atol=ATOL)


def test_attribution_patching_is_exact_where_the_path_is_linear(unet):
    """The U-Net's ``dec1`` output reaches the metric (the mean output) through the 1x1 ``head``
    convolution only, so the first-order estimate is the exact patching effect."""
    g = torch.Generator().manual_seed(41)
    clean, corrupted = torch.randn(B, 1, 16, 16, generator=g), torch.randn(B, 1, 16, 16, generator=g)
    s = f"dec1.channels[{CH}]"
    res = sm.attribution_patching(unet.model, clean, corrupted, [s], unet.metric)
    src = capture(unet.model.dec1, lambda: unet.model(clean))[:, CH]
    with torch.no_grad():
        base = npy(unet.metric(unet.model(corrupted)))
        with edit_output(unet.model.dec1, lambda t: set_channel(t, CH, src)):
            patched = npy(unet.metric(unet.model(corrupted)))
    np.testing.assert_allclose(res.effect.sel(site=s).values, patched - base, atol=ATOL)

"""Hugging Face SwinModel: windowed attention, whose ``o_proj`` input has one row per
(sample, window), sample-major: (B * nW, ws * ws, C). Head sites need
``axes="batch*window position feature"``; with it every verb must agree with hand hooks
that reshape that input to (B, nW, T, C); without it recording is a clear error."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

import scimech as sm
from scimech.errors import DataValidationError, DimensionError

from .helpers import (
    ATOL,
    capture,
    edit_input,
    grad_at,
    head_cols,
    matching_rows,
    npy,
    set_cols,
    watch,
)

B, R = 3, 4
AXES = "batch*window position feature"
STAGE0 = [(block, head) for block in range(2) for head in range(2)]  # stage 0: 4 windows, 2 heads of 8


def site(block: int, head: int | None = None, stage: int = 0) -> str:
    attn = f"encoder.layers.{stage}.blocks.{block}.attention"
    return f"{attn}.heads" if head is None else f"{attn}.heads[{head}]"


@pytest.fixture(scope="module")
def case(swin):
    g = torch.Generator().manual_seed(30)

    def draw(n):
        return torch.randn(n, 3, 32, 32, generator=g)

    return SimpleNamespace(**vars(swin), clean=draw(B), corrupted=draw(B), reference=draw(R))


def proj(case, block, stage=0):
    return case.model.encoder.layers[stage].blocks[block].attention.o_proj


def windows(case, block, x, stage=0):
    """(n, nW, T, C): o_proj's input with its rows unpacked sample by sample."""
    a = capture(proj(case, block, stage), lambda: case.model(x), port="input")
    return a.reshape(x.shape[0], -1, *a.shape[1:])


def hand_metric(case, x, block=None, fn=None):
    """Metric with o_proj's input (unpacked to (n, nW, T, C)) of stage-0 ``block`` set to ``fn(it)``."""
    with torch.no_grad():
        if block is None:
            return npy(case.metric(case.model(x)))

        def edit(t):
            return fn(t.reshape(x.shape[0], -1, *t.shape[1:])).reshape(t.shape)

        with edit_input(proj(case, block), edit):
            return npy(case.metric(case.model(x)))


def test_the_truth_is_sample_major(case):
    """The hand truth's reshape is right: sample 1's rows in a batch are its rows alone."""
    both = windows(case, 1, case.clean)
    alone = windows(case, 1, case.clean[1:2])
    assert both.shape == (B, 4, 16, 16)
    np.testing.assert_allclose(npy(both[1]), npy(alone[0]), atol=ATOL)


def test_head_sites_are_listed_per_stage(case):
    names = set(sm.list_sites(case.model))
    assert {site(b, h) for b, h in STAGE0} <= names
    assert {site(b, h, stage=1) for b in range(2) for h in range(4)} <= names
    assert site(0, 2) not in names


def test_recording_window_heads_without_axes_is_an_error(case):
    with pytest.raises(DimensionError) as err:
        sm.record(case.model, case.clean, [site(0, 1)])
    assert "axes=" in str(err.value) and "window" in str(err.value)


def test_record_with_axes_unpacks_windows(case):
    s, all_heads = site(0, 1), site(1)
    ds = sm.record(case.model, case.clean, [s, all_heads], axes=AXES)
    assert ds[s].dims == ("sample", "window", "position", "head_dim") and ds[s].shape == (B, 4, 16, 8)
    np.testing.assert_allclose(ds[s].values, npy(windows(case, 0, case.clean)[..., head_cols(1, 8)]), atol=ATOL)
    assert ds[all_heads].dims == ("sample", "window", "position", "head", "head_dim")
    np.testing.assert_allclose(
        ds[all_heads].values, npy(windows(case, 1, case.clean).reshape(B, 4, 16, 2, 8)), atol=ATOL
    )


def test_axes_keyed_by_the_attention_module_path(case):
    """``axes=`` keys may be module paths: the module a head site names is the attention."""
    s = site(0, 1)
    a = sm.record(case.model, case.clean, [s], axes={"encoder.layers.0.blocks.0.attention": AXES})[s]
    assert a.dims == ("sample", "window", "position", "head_dim")
    np.testing.assert_allclose(a.values, npy(windows(case, 0, case.clean)[..., head_cols(1, 8)]), atol=ATOL)


def test_reduce_mean_averages_windows_and_positions(case):
    s, late = site(1, 0), site(0, 3, stage=1)
    ds = sm.record(case.model, case.clean, [s, late], reduce="mean", axes={s: AXES, late: AXES})
    assert ds[s].dims == ("sample", "head_dim") and ds[late].dims == ("sample", "head_dim")
    np.testing.assert_allclose(ds[s].values, npy(windows(case, 1, case.clean)[..., :8].mean((1, 2))), atol=ATOL)
    stage1 = windows(case, 0, case.clean, stage=1)  # one window per sample in stage 1
    assert stage1.shape == (B, 1, 16, 32)
    np.testing.assert_allclose(ds[late].values, npy(stage1[..., head_cols(3, 8)].mean((1, 2))), atol=ATOL)


@pytest.mark.parametrize("method", ["zero", "scale", "mean"])
def test_ablate_with_axes_matches_hand_hook(case, method):
    block, head = 1, 1
    cols = head_cols(head, 8)
    ref = windows(case, block, case.reference)[..., cols].mean(0)  # (nW, T, 8): mean per window and position
    new = {"zero": lambda t: 0.0, "scale": lambda t: 3.0 * t[..., cols], "mean": lambda t: ref}[method]
    expect = hand_metric(case, case.clean, block, lambda t: set_cols(t, cols, new(t)))
    kwargs = {"factor": 3.0} if method == "scale" else {"reference": case.reference} if method == "mean" else {}
    with torch.no_grad(), sm.ablate(case.model, site(block, head), method=method, axes=AXES, **kwargs):
        got = npy(case.metric(case.model(case.clean)))
    np.testing.assert_allclose(got, expect, atol=ATOL)
    assert np.abs(expect - hand_metric(case, case.clean)).max() > 1e-4  # the ablation does something


def test_ablate_resample_takes_all_windows_of_one_reference_sample(case):
    block, head = 0, 0
    cols = head_cols(head, 8)
    ref = windows(case, block, case.reference)[..., cols]  # (R, nW, T, 8)
    with (
        torch.no_grad(),
        sm.ablate(
            case.model,
            site(block, head),
            method="resample",
            reference=case.reference,
            seed=0,
            axes={site(block, head): AXES},
        ),
        watch(proj(case, block), "input") as seen,
    ):
        got = npy(case.metric(case.model(case.clean)))
    used = seen[0].reshape(B, 4, 16, 16)
    # windows are never mixed across samples or positions: each sample's whole (nW, T, 8)
    # block equals one reference sample's
    rows = matching_rows(used[..., cols], ref)
    assert all(rows), rows
    np.testing.assert_allclose(npy(used[..., 8:]), npy(windows(case, block, case.clean)[..., 8:]), atol=ATOL)
    np.testing.assert_allclose(got, hand_metric(case, case.clean, block, lambda t: used), atol=ATOL)


@pytest.mark.parametrize("method", ["zero", "mean", "resample"])
def test_ablation_sweep_with_axes(case, method):
    sites = [site(b, h) for b, h in STAGE0]
    kwargs = {} if method == "zero" else {"reference": case.reference}
    res = sm.ablation_sweep(case.model, case.clean, sites, case.metric, method=method, axes=AXES, **kwargs)
    np.testing.assert_allclose(res.baseline.values, hand_metric(case, case.clean), atol=ATOL)
    for b, h in STAGE0:
        cols = head_cols(h, 8)
        ref = windows(case, b, case.reference)[..., cols]
        # resample: one of the reference samples, all windows together
        values = {"zero": [0.0], "mean": [ref.mean(0)], "resample": list(ref)}[method]
        expect = np.stack([hand_metric(case, case.clean, b, lambda t, v=v, c=cols: set_cols(t, c, v)) for v in values])
        got = res.ablated.sel(site=site(b, h)).values
        assert (np.abs(expect - got[None]) <= ATOL).any(0).all(), (site(b, h), got, expect)


@pytest.mark.parametrize("direction", ["denoising", "noising"])
def test_patching_sweep_with_axes_matches_hand_hook(case, direction):
    sites = [site(b, h) for b, h in STAGE0]
    res = sm.patching_sweep(case.model, case.clean, case.corrupted, sites, case.metric, direction=direction, axes=AXES)
    base, source = (case.corrupted, case.clean) if direction == "denoising" else (case.clean, case.corrupted)
    np.testing.assert_allclose(res.clean.values, hand_metric(case, case.clean), atol=ATOL)
    for b, h in STAGE0:
        cols = head_cols(h, 8)
        src = windows(case, b, source)[..., cols]
        expect = hand_metric(case, base, b, lambda t, s=src, c=cols: set_cols(t, c, s))
        np.testing.assert_allclose(res.patched.sel(site=site(b, h)).values, expect, atol=ATOL)


def test_attribution_patching_with_axes_is_the_first_order_estimate(case):
    sites = [site(b, h) for b, h in STAGE0]
    res = sm.attribution_patching(case.model, case.clean, case.corrupted, sites, case.metric, axes=AXES)
    for b in range(2):
        a_base, grad = grad_at(proj(case, b), lambda: case.metric(case.model(case.corrupted)))
        delta = windows(case, b, case.clean).reshape(a_base.shape) - a_base
        for h in range(2):
            cols = head_cols(h, 8)
            # per sample: sum over that sample's windows, positions and head channels
            expect = npy((delta[..., cols] * grad[..., cols]).reshape(B, -1).sum(1))
            np.testing.assert_allclose(res.effect.sel(site=site(b, h)).values, expect, atol=ATOL)


def test_patch_takes_what_record_gives(case):
    """A recording (sample, window, position, head_dim) of the clean run patches back in as it is."""
    s = site(1, 0)
    rec = sm.record(case.model, case.clean, [s], axes=AXES)[s]
    with torch.no_grad(), sm.patch(case.model, {s: torch.from_numpy(rec.values)}, axes=AXES):
        got = npy(case.metric(case.model(case.corrupted)))
    src = windows(case, 1, case.clean)[..., head_cols(0, 8)]
    np.testing.assert_allclose(
        got, hand_metric(case, case.corrupted, 1, lambda t: set_cols(t, head_cols(0, 8), src)), atol=ATOL
    )


def right_or_clear_error(run, check):
    """Without ``axes=``: either the right numbers or a DataValidationError naming ``axes=``."""
    try:
        got = run()
    except DataValidationError as err:
        assert "axes=" in str(err), err
    else:
        check(got)


def test_interventions_without_axes_are_right_or_a_clear_error(case):
    s = site(0, 1)
    cols = head_cols(1, 8)
    zeroed = hand_metric(case, case.clean, 0, lambda t: set_cols(t, cols, 0.0))
    src = windows(case, 0, case.clean)[..., cols]
    patched = hand_metric(case, case.corrupted, 0, lambda t: set_cols(t, cols, src))

    def ablated():
        with torch.no_grad(), sm.ablate(case.model, s, method="resample", reference=case.reference):
            return npy(case.metric(case.model(case.clean)))

    ref = windows(case, 0, case.reference)[..., cols]
    options = np.stack([hand_metric(case, case.clean, 0, lambda t, r=r: set_cols(t, cols, r)) for r in ref])
    right_or_clear_error(ablated, lambda got: np.testing.assert_array_less(np.abs(options - got[None]).min(0), ATOL))
    right_or_clear_error(
        lambda: sm.ablation_sweep(case.model, case.clean, [s], case.metric, method="zero"),
        lambda res: np.testing.assert_allclose(res.ablated.sel(site=s).values, zeroed, atol=ATOL),
    )
    right_or_clear_error(
        lambda: sm.patching_sweep(case.model, case.clean, case.corrupted, [s], case.metric),
        lambda res: np.testing.assert_allclose(res.patched.sel(site=s).values, patched, atol=ATOL),
    )

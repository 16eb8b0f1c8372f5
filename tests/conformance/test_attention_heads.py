"""Head sites of Hugging Face GPT2Model (Conv1D ``c_proj``, ``num_heads``), ViTModel
(Linear ``o_proj``, ``num_attention_heads``), BertModel and the rotary EsmModel (the head
count on ``attention.self``, the projection its sibling ``attention.output.dense``), found
without configuration; every verb against hand hooks on the projection's input (the heads'
outputs side by side)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

import scimech as sm

from .helpers import (
    ATOL,
    capture,
    edit_input,
    edit_output,
    grad_at,
    head_cols,
    matching_rows,
    npy,
    per_sample_dot,
    set_cols,
    watch,
)

B, R = 4, 5
HEADS = [(layer, head) for layer in range(2) for head in range(4)]  # both models: 2 layers, 4 heads of 8


@pytest.fixture(scope="module", params=["gpt2", "vit", "bert", "esm"])
def case(request):
    return _case(request, request.param)


@pytest.fixture(scope="module", params=["gpt2", "vit", "esm"])
def linear_case(request):
    """The models whose first MLP reaches the residual stream after block 0 by additions only
    (BERT's post-LayerNorm block does not)."""
    return _case(request, request.param)


def _case(request, name):
    m = request.getfixturevalue(name)
    g = torch.Generator().manual_seed(10)
    if name == "gpt2":

        def draw(n):
            return torch.randint(0, 64, (n, 6), generator=g)

        paths = SimpleNamespace(
            attn="h.{}.attn", proj=lambda layer: m.model.h[layer].attn.c_proj, mlp="h.{}.mlp", positions=6
        )
    elif name in ("bert", "esm"):

        def draw(n):  # ESM: amino-acid tokens 4..23 (no pad, mask or special token)
            return torch.randint(4, 24, (n, 6), generator=g)

        paths = SimpleNamespace(
            attn="encoder.layer.{}.attention",
            proj=lambda layer: m.model.encoder.layer[layer].attention.output.dense,
            mlp="encoder.layer.{}.intermediate",
            positions=6,
        )
    else:

        def draw(n):
            return torch.randn(n, 3, 16, 16, generator=g)

        paths = SimpleNamespace(
            attn="layers.{}.attention",
            proj=lambda layer: m.model.layers[layer].attention.o_proj,
            mlp="layers.{}.mlp",
            positions=17,
        )
    return SimpleNamespace(**vars(m), **vars(paths), clean=draw(B), corrupted=draw(B), reference=draw(R))


def site(case, layer, head=None):
    attn = case.attn.format(layer)
    return f"{attn}.heads" if head is None else f"{attn}.heads[{head}]"


def heads_in(case, layer, x):
    """(B, positions, 32): the projection's input, i.e. the four heads' outputs side by side."""
    return capture(case.proj(layer), lambda: case.model(x), port="input")


def hand_metric(case, x, layer=None, fn=None):
    """Metric of a forward pass with the projection input of ``layer`` replaced by ``fn(input)``."""
    with torch.no_grad():
        if layer is None:
            return npy(case.metric(case.model(x)))
        with edit_input(case.proj(layer), fn):
            return npy(case.metric(case.model(x)))


def scimech_metric(case, x, ctx):
    with torch.no_grad(), ctx:
        return npy(case.metric(case.model(x)))


def test_head_sites_are_listed_without_configuration(case):
    names = set(sm.list_sites(case.model))
    assert {site(case, layer, h) for layer, h in HEADS} <= names
    assert site(case, 0, 4) not in names


def test_record_one_head_and_its_position_mean(case):
    s = site(case, 1, 2)
    a = sm.record(case.model, case.clean, [s])[s]
    assert a.dims == ("sample", "position", "head_dim") and a.shape == (B, case.positions, 8)
    truth = heads_in(case, 1, case.clean)[..., head_cols(2, 8)]
    np.testing.assert_allclose(a.values, npy(truth), atol=ATOL)
    mean = sm.record(case.model, case.clean, [s], reduce="mean")[s]
    assert mean.dims == ("sample", "head_dim")
    np.testing.assert_allclose(mean.values, npy(truth.mean(1)), atol=ATOL)


def test_record_all_heads_as_head_by_head_dim(case):
    s = site(case, 0)
    a = sm.record(case.model, case.clean, [s])[s]
    assert a.dims == ("sample", "position", "head", "head_dim") and a.shape == (B, case.positions, 4, 8)
    np.testing.assert_allclose(a.values, npy(heads_in(case, 0, case.clean).reshape(B, -1, 4, 8)), atol=ATOL)


def test_declared_token_axes_give_the_same_record(case):
    s, mlp = site(case, 1, 0), case.mlp.format(0)
    ds = sm.record(case.model, case.clean, [s, mlp], axes="batch position feature")
    assert ds[s].dims == ("sample", "position", "head_dim")
    assert ds[mlp].dims == ("sample", "position", "feature")
    np.testing.assert_allclose(ds[s].values, npy(heads_in(case, 1, case.clean)[..., :8]), atol=ATOL)
    mean = sm.record(case.model, case.clean, [mlp], reduce="mean", axes={mlp: "batch position feature"})[mlp]
    truth = capture(case.model.get_submodule(mlp), lambda: case.model(case.clean))
    assert mean.dims == ("sample", "feature")
    np.testing.assert_allclose(mean.values, npy(truth.mean(1)), atol=ATOL)


@pytest.mark.parametrize("method", ["zero", "scale", "mean"])
def test_ablate_head_matches_hand_hook(case, method):
    layer, head = 0, 1
    cols = head_cols(head, 8)
    ref = heads_in(case, layer, case.reference)[..., cols].mean(0)  # (positions, 8): mean per position
    new = {"zero": lambda t: 0.0, "scale": lambda t: 2.5 * t[..., cols], "mean": lambda t: ref}[method]
    expect = hand_metric(case, case.clean, layer, lambda t: set_cols(t, cols, new(t)))
    kwargs = {"factor": 2.5} if method == "scale" else {"reference": case.reference} if method == "mean" else {}
    got = scimech_metric(case, case.clean, sm.ablate(case.model, site(case, layer, head), method=method, **kwargs))
    np.testing.assert_allclose(got, expect, atol=ATOL)
    assert np.abs(expect - hand_metric(case, case.clean)).max() > 1e-3  # the ablation does something


def test_ablate_resample_takes_one_whole_reference_row_per_sample(case):
    layer, head = 1, 3
    cols = head_cols(head, 8)
    unablated = heads_in(case, layer, case.clean)
    ref = heads_in(case, layer, case.reference)
    with (
        torch.no_grad(),
        sm.ablate(case.model, site(case, layer, head), method="resample", reference=case.reference, seed=0),
        watch(case.proj(layer), "input") as seen,
    ):
        got = npy(case.metric(case.model(case.clean)))
    (used,) = seen
    # every sample's head is one reference sample's head, at all positions at once
    rows = matching_rows(used[..., cols], ref[..., cols])
    assert all(rows), rows
    other = [c for c in range(32) if not cols.start <= c < cols.stop]
    np.testing.assert_allclose(npy(used[..., other]), npy(unablated[..., other]), atol=ATOL)
    np.testing.assert_allclose(got, hand_metric(case, case.clean, layer, lambda t: used), atol=ATOL)


def test_patch_one_head_matches_hand_hook(case):
    cols = head_cols(2, 8)
    value = torch.randn(B, case.positions, 8, generator=torch.Generator().manual_seed(3))
    expect = hand_metric(case, case.corrupted, 1, lambda t: set_cols(t, cols, value))
    got = scimech_metric(case, case.corrupted, sm.patch(case.model, {site(case, 1, 2): value}))
    np.testing.assert_allclose(got, expect, atol=ATOL)


@pytest.mark.parametrize("method", ["zero", "scale", "mean"])
def test_ablation_sweep_matches_hand_hook(case, method):
    mlp = case.mlp.format(1)
    sites = [site(case, layer, h) for layer, h in HEADS] + [mlp]
    kwargs = {"factor": 0.5} if method == "scale" else {"reference": case.reference} if method == "mean" else {}
    res = sm.ablation_sweep(case.model, case.clean, sites, case.metric, method=method, **kwargs)
    assert res.ablated.dims == res.effect.dims == ("site", "sample") and res.baseline.dims == ("sample",)
    base = hand_metric(case, case.clean)
    np.testing.assert_allclose(res.baseline.values, base, atol=ATOL)
    for layer, h in HEADS:
        cols = head_cols(h, 8)
        ref = heads_in(case, layer, case.reference)[..., cols].mean(0)
        new = {"zero": lambda t: 0.0, "scale": lambda t, c=cols: 0.5 * t[..., c], "mean": lambda t, r=ref: r}[method]
        expect = hand_metric(case, case.clean, layer, lambda t, c=cols, f=new: set_cols(t, c, f(t)))
        np.testing.assert_allclose(res.ablated.sel(site=site(case, layer, h)).values, expect, atol=ATOL)
        np.testing.assert_allclose(res.effect.sel(site=site(case, layer, h)).values, expect - base, atol=ATOL)
    module = case.model.get_submodule(mlp)
    mlp_ref = capture(module, lambda: case.model(case.reference)).mean(0)
    mlp_new = {"zero": lambda t: torch.zeros_like(t), "scale": lambda t: 0.5 * t, "mean": lambda t: mlp_ref + 0 * t}
    with torch.no_grad(), edit_output(module, mlp_new[method]):
        expect = npy(case.metric(case.model(case.clean)))
    np.testing.assert_allclose(res.ablated.sel(site=mlp).values, expect, atol=ATOL)
    assert res.attrs["method"] == method


def test_ablation_sweep_resample_uses_a_reference_row_per_sample(case):
    sites = [site(case, layer, h) for layer, h in HEADS]
    res = sm.ablation_sweep(
        case.model, case.clean, sites, case.metric, method="resample", reference=case.reference, seed=0
    )
    for layer, h in HEADS:
        cols = head_cols(h, 8)
        ref = heads_in(case, layer, case.reference)[..., cols]
        # metric of every sample with this head taken from reference sample j, for every j
        options = np.stack(
            [hand_metric(case, case.clean, layer, lambda t, r=ref[j], c=cols: set_cols(t, c, r)) for j in range(R)]
        )  # (R, B)
        got = res.ablated.sel(site=site(case, layer, h)).values
        assert (np.abs(options - got[None]) <= ATOL).any(0).all(), (site(case, layer, h), got, options)


@pytest.mark.parametrize("direction", ["denoising", "noising"])
def test_patching_sweep_matches_hand_hook(case, direction):
    mlp = case.mlp.format(0)
    sites = [site(case, layer, h) for layer, h in HEADS] + [mlp]
    res = sm.patching_sweep(case.model, case.clean, case.corrupted, sites, case.metric, direction=direction)
    assert res.patched.dims == res.effect.dims == res.normalized_effect.dims == ("site", "sample")
    assert res.clean.dims == res.corrupted.dims == ("sample",) and res.attrs["direction"] == direction
    base, source = (case.corrupted, case.clean) if direction == "denoising" else (case.clean, case.corrupted)
    clean, corrupted = hand_metric(case, case.clean), hand_metric(case, case.corrupted)
    np.testing.assert_allclose(res.clean.values, clean, atol=ATOL)
    np.testing.assert_allclose(res.corrupted.values, corrupted, atol=ATOL)
    for layer, h in HEADS:
        cols = head_cols(h, 8)
        src = heads_in(case, layer, source)[..., cols]
        expect = hand_metric(case, base, layer, lambda t, s=src, c=cols: set_cols(t, c, s))
        np.testing.assert_allclose(res.patched.sel(site=site(case, layer, h)).values, expect, atol=ATOL)
    module = case.model.get_submodule(mlp)
    src = capture(module, lambda: case.model(source))
    with torch.no_grad(), edit_output(module, lambda t: src):
        expect = npy(case.metric(case.model(base)))
    np.testing.assert_allclose(res.patched.sel(site=mlp).values, expect, atol=ATOL)
    unpatched = corrupted if direction == "denoising" else clean
    np.testing.assert_allclose(res.effect.values, res.patched.values - unpatched[None], atol=ATOL)
    # a ratio of differences: 1e-5 errors over differences of order 0.1-1
    np.testing.assert_allclose(
        res.normalized_effect.values, (res.patched.values - corrupted[None]) / (clean - corrupted)[None], atol=1e-3
    )


@pytest.mark.parametrize("direction", ["denoising", "noising"])
def test_attribution_patching_is_the_first_order_estimate(case, direction):
    sites = [site(case, layer, h) for layer, h in HEADS]
    res = sm.attribution_patching(case.model, case.clean, case.corrupted, sites, case.metric, direction=direction)
    base, source = (case.corrupted, case.clean) if direction == "denoising" else (case.clean, case.corrupted)
    for layer in range(2):
        a_base, grad = grad_at(case.proj(layer), lambda: case.metric(case.model(base)))
        a_src = heads_in(case, layer, source)
        for h in range(4):
            cols = head_cols(h, 8)
            expect = per_sample_dot((a_src - a_base)[..., cols], grad[..., cols])
            np.testing.assert_allclose(res.effect.sel(site=site(case, layer, h)).values, expect, atol=ATOL)


def test_attribution_patching_is_exact_where_the_path_is_linear(linear_case):
    """The first block's MLP output reaches ``hidden_states[1]`` (the residual stream after
    block 0) by an addition only, so the first-order estimate is the exact patching effect."""
    case = linear_case
    mlp = case.mlp.format(0)

    def metric(out, target=None):
        return out.hidden_states[1][:, case.position] @ case.direction

    def forward(m, b):
        return m(b, output_hidden_states=True)

    res = sm.attribution_patching(case.model, case.clean, case.corrupted, [mlp], metric, forward=forward)
    module = case.model.get_submodule(mlp)
    src = capture(module, lambda: case.model(case.clean))
    with torch.no_grad():
        corrupted = npy(metric(forward(case.model, case.corrupted)))
        with edit_output(module, lambda t: src):
            patched = npy(metric(forward(case.model, case.corrupted)))
    np.testing.assert_allclose(res.effect.sel(site=mlp).values, patched - corrupted, atol=ATOL)


class ToOutAttention(torch.nn.Module):
    """Attention written in the diffusers / lucidrains style: ``heads`` and ``to_out = Sequential(Linear, Dropout)``."""

    def __init__(self, dim=16, heads=4):
        super().__init__()
        self.num_heads = heads
        self.to_qkv = torch.nn.Linear(dim, 3 * dim)
        self.to_out = torch.nn.Sequential(torch.nn.Linear(dim, dim), torch.nn.Dropout(0.0))

    def forward(self, x):
        b, n, d = x.shape
        q, k, v = (t.reshape(b, n, self.num_heads, -1).transpose(1, 2) for t in self.to_qkv(x).chunk(3, -1))
        o = torch.softmax(q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5, -1) @ v
        return self.to_out(o.transpose(1, 2).reshape(b, n, d))


def test_heads_found_on_a_to_out_projection():
    torch.manual_seed(0)
    model = torch.nn.Sequential(ToOutAttention()).eval()
    x = torch.randn(3, 5, 16, generator=torch.Generator().manual_seed(12))
    assert "0.heads[2]" in sm.list_sites(model)
    proj = model[0].to_out[0]
    with torch.no_grad():
        with edit_input(proj, lambda t: set_cols(t, slice(8, 12), 0.0)):  # head 2 of 4, head_dim 4
            expect = npy(model(x))
        with sm.ablate(model, "0.heads[2]", method="zero"):
            got = npy(model(x))
    np.testing.assert_allclose(got, expect, atol=ATOL)
    assert np.abs(expect - npy(model(x).detach())).max() > 1e-3  # the ablation did something

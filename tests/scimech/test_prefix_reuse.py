"""Sweeps that reuse the unpatched prefix equal one full forward pass per site.

The truth is the naive loop: for each site, one forward pass of the whole model inside
``patch`` / ``ablate`` (checked against hand computations in test_intervene.py). The
batched sweep (``reuse_prefix=False``) and the prefix-reusing sweep must both equal it.
"""

import numpy as np
import pytest
import torch
from torch import nn

from scimech.capture.attention import decompose_attention
from scimech.capture.record import Recorder
from scimech.capture.sites import resolve_site
from scimech.causal import metrics
from scimech.causal.intervene import ablate, ablation_sweep, patch, patching_sweep
from scimech.causal.prefix_reuse import trace_calls

from .models import Block, TinyTransformer

ATOL = 1e-5  # float32 through a few layers; the reused outputs were computed on fewer rows

#: each sample's first output value: an encoder ending in LayerNorm has an output mean of 0 by
#: construction (a metric constant over the inputs, refused), so the comparisons read one value the inputs move
FIRST = metrics.Metric(lambda out, target=None: out.reshape(len(out), -1)[:, 0], "first output")


def _encoder(depth=3):
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(16, 4, 32, batch_first=True, dropout=0.0)
    return decompose_attention(nn.TransformerEncoder(layer, depth, enable_nested_tensor=False)).eval()


def _naive_patching(model, clean, corrupt, sites, direction, metric=None):
    metric = metric or metrics.output()
    src, base = (clean, corrupt) if direction == "denoising" else (corrupt, clean)
    out = []
    with torch.no_grad():
        for s in sites:
            with Recorder(model, [s]) as rec:
                model(src)
            with patch(model, {s: rec.activations[s]}):
                out.append(metric(model(base)).numpy())
    return np.stack(out)


ENCODER_SITES = [
    "layers.0.self_attn.heads[1]",
    "layers.2.self_attn.heads[3]",
    "layers.1.self_attn.heads[0]",
    "layers.1",
    "layers.2:input",
    "layers.2.linear1.units[0,5]",
    "layers.0.self_attn.k_proj",
]
TINY_SITES = ["encoder.0.attn.heads[2]", "encoder.1.attn.heads[0]", "encoder.1", "encoder.1.mlp:input", "head", "embed"]


@pytest.mark.parametrize("which", ["encoder", "tiny"])
@pytest.mark.parametrize("direction", ["denoising", "noising"])
def test_prefix_reuse_equals_batched_and_naive_patching(which, direction):
    model = _encoder() if which == "encoder" else TinyTransformer(d_in=3, dim=16, depth=2).eval()
    d_in = 16 if which == "encoder" else 3
    sites = ENCODER_SITES if which == "encoder" else TINY_SITES
    torch.manual_seed(1)
    clean, corrupt = torch.randn(6, 5, d_in), torch.randn(6, 5, d_in)
    kw = dict(direction=direction, batch_size=4, max_rows=8)  # 2 batches, 2 sites per forward: groups split
    fast = patching_sweep(model, clean, corrupt, sites, FIRST, **kw)
    full = patching_sweep(model, clean, corrupt, sites, FIRST, reuse_prefix=False, **kw)
    assert fast.attrs["sweep_path"] == "prefix_reuse" and full.attrs["sweep_path"] == "batched"
    naive = _naive_patching(model, clean, corrupt, sites, direction, FIRST)
    np.testing.assert_allclose(fast.patched.values, naive, atol=ATOL, rtol=0)
    np.testing.assert_allclose(full.patched.values, naive, atol=ATOL, rtol=0)
    np.testing.assert_allclose(fast.effect.values, full.effect.values, atol=ATOL, rtol=0)
    assert all("forward" not in m.__dict__ for m in model.modules())


def test_prefix_reuse_in_ablation_sweeps_equals_ablate():
    model = _encoder()
    torch.manual_seed(2)
    x, ref = torch.randn(5, 5, 16), torch.randn(9, 5, 16)
    sites = ENCODER_SITES[:4]
    for method, kw in (("zero", {}), ("resample", {"reference": ref, "seed": 3}), ("scale", {"factor": 2.5})):
        fast = ablation_sweep(model, x, sites, method=method, **kw)
        full = ablation_sweep(model, x, sites, method=method, reuse_prefix=False, **kw)
        assert fast.attrs["sweep_path"] == "prefix_reuse"
        np.testing.assert_allclose(fast.ablated.values, full.ablated.values, atol=ATOL, rtol=0)
        with torch.no_grad():
            for s in sites:
                with ablate(model, s, method=method, **kw):
                    y = model(x).mean((1, 2))
                np.testing.assert_allclose(fast.ablated.sel(site=s).values, y.numpy(), atol=ATOL, rtol=0)


def test_reused_modules_are_those_before_the_site():
    model = _encoder()
    trace = trace_calls(model, torch.randn(3, 5, 16))
    head = trace.shortcut(resolve_site(model, "layers.2.self_attn.heads[0]"))
    # blocks 0 and 1 whole; the attention of block 2 returns its out_proj's output, so it is
    # resumed at out_proj (its q/k/v projections and softmax are not run again)
    assert head.reused == ("layers.0", "layers.1")
    assert (head.resume.outer, head.resume.inner) == ("layers.2.self_attn", "layers.2.self_attn.out_proj")
    q = trace.shortcut(resolve_site(model, "layers.2.linear1:input"))  # what runs before linear1; no resume
    assert q.reused == ("layers.0", "layers.1", "layers.2.self_attn", "layers.2.dropout1", "layers.2.norm1")
    assert q.resume is None
    assert trace.shortcut(resolve_site(model, "layers.1")).reused == ("layers.0", "layers.1")  # output: itself too
    assert trace.shortcut(resolve_site(model, "layers.1:input")).reused == ("layers.0",)
    assert trace.shortcut(resolve_site(model, "layers.0.self_attn.q_proj")).reused == ("layers.0.self_attn.q_proj",)
    assert trace.blocks(model) == ["layers.0", "layers.1", "layers.2"]


class Looped(nn.Module):
    """One block applied three times (shared weights), then a readout: nothing before the
    readout runs only once."""

    def __init__(self):
        super().__init__()
        self.block = Block(16, 4)
        self.head = nn.Linear(16, 2)

    def forward(self, x):
        for _ in range(3):
            x = self.block(x)
        return self.head(x).mean((1, 2))


def test_models_without_a_reusable_prefix_fall_back_and_say_so():
    torch.manual_seed(0)
    model = Looped().eval()
    clean, corrupt = torch.randn(4, 5, 16), torch.randn(4, 5, 16)
    sites = ["head:input"]
    res = patching_sweep(model, clean, corrupt, sites, metrics.output())
    assert res.attrs["sweep_path"] == "batched" and "nothing can be reused" in res.attrs["sweep_path_note"]
    np.testing.assert_allclose(
        res.patched.values, _naive_patching(model, clean, corrupt, sites, "denoising"), atol=ATOL, rtol=0
    )
    assert trace_calls(model, clean).blocks(model) == []


class Positional(nn.Module):
    """A module returning a table that is not batched (its dim 0 is the position)."""

    def __init__(self, n, dim):
        super().__init__()
        self.table = nn.Parameter(torch.randn(n, dim))

    def forward(self):
        return self.table


class InPlace(nn.Module):
    """Reused modules whose output the model later changes in place, and an unbatched table."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(3, 8)
        self.pos = Positional(4, 8)  # 4 positions == 4 rows per batch: looks batched by shape alone
        self.act = nn.ReLU(inplace=True)
        self.blocks = nn.Sequential(nn.Linear(8, 8), nn.Linear(8, 8), nn.Linear(8, 8))

    def forward(self, x):
        h = self.embed(x)
        h += self.pos()
        h = self.blocks[0](h)
        self.act(h)  # in place on blocks[0]'s output
        return self.blocks[2](torch.tanh(self.blocks[1](h))).mean((1, 2))


def test_in_place_changes_and_unbatched_outputs_are_handled():
    torch.manual_seed(0)
    model = InPlace().eval()
    clean, corrupt = torch.randn(4, 4, 3), torch.randn(4, 4, 3)
    trace = trace_calls(model, clean)
    assert not trace.calls["pos"].batched and trace.calls["embed"].batched
    assert trace.calls["act"].in_place and not trace.calls["act"].batched
    # unit 0 of blocks.1's input patched, the other units must come out of the in-place ReLU
    sites = ["blocks.1.units[0]:input", "blocks.1", "blocks.2:input", "blocks.0", "embed"]
    assert "pos" not in trace.shortcut(resolve_site(model, "blocks.1")).reused
    res = patching_sweep(model, clean, corrupt, sites, metrics.output(), max_rows=8)
    assert res.attrs["sweep_path"] == "prefix_reuse"
    np.testing.assert_allclose(
        res.patched.values, _naive_patching(model, clean, corrupt, sites, "denoising"), atol=ATOL, rtol=0
    )


class Doubling(nn.Module):
    """Returns its projection's output object, but changed in place after the projection."""

    def __init__(self):
        super().__init__()
        self.pre, self.proj = nn.Linear(4, 8), nn.Linear(8, 4)

    def forward(self, x):
        y = self.proj(torch.tanh(self.pre(x)))
        y.mul_(2.0)
        return y


def test_a_module_is_resumed_at_its_projection_only_if_it_returns_the_projection_unchanged():
    torch.manual_seed(0)
    model = nn.Sequential(Doubling(), Doubling()).eval()
    clean, corrupt = torch.randn(5, 4), torch.randn(5, 4)
    trace = trace_calls(model, clean)
    site = "1.proj.units[0,2]:input"
    assert trace.shortcut(resolve_site(model, site)).resume is None  # y.mul_(2) after proj
    res = patching_sweep(model, clean, corrupt, [site, "1.proj:input", "0.proj"], metrics.output())
    np.testing.assert_allclose(
        res.patched.values,
        _naive_patching(model, clean, corrupt, [site, "1.proj:input", "0.proj"], "denoising"),
        atol=ATOL,
        rtol=0,
    )


class WithWeights(nn.Module):
    """An attention-like module that returns its projection and, beside it, weights computed
    before the projection (as Hugging Face attention returns ``(output, attn_weights)``)."""

    def __init__(self):
        super().__init__()
        self.pre, self.proj = nn.Linear(4, 8), nn.Linear(8, 4)

    def forward(self, x):
        h = torch.tanh(self.pre(x))
        w = torch.softmax(h, -1)
        return self.proj(h * w), w


class WeightsAfter(WithWeights):
    """Returns its projection and a tensor computed from it: the extra depends on the site."""

    def forward(self, x):
        y = self.proj(torch.tanh(self.pre(x)))
        return y, torch.sigmoid(y)


class TwoOutputs(nn.Module):
    """Both outputs of each block feed the next: an extra taken from the unpatched run would show."""

    def __init__(self, kind):
        super().__init__()
        self.blocks = nn.ModuleList([kind(), kind()])

    def forward(self, x):
        for b in self.blocks:
            y, w = b(x)
            x = x + y + w[..., :4]
        return x


@pytest.mark.parametrize("kind, resumed", [(WithWeights, True), (WeightsAfter, False)])
def test_a_module_that_returns_more_is_resumed_only_if_the_rest_does_not_depend_on_the_site(kind, resumed):
    """Resuming replays the projection and returns the rest as the unpatched run gave it: right
    only where the rest was computed before the projection (checked by autograd in the trace)."""
    torch.manual_seed(0)
    model = TwoOutputs(kind).eval()
    clean, corrupt = torch.randn(5, 4), torch.randn(5, 4)
    sites = ["blocks.1.proj.units[0,2]:input", "blocks.0.proj:input", "blocks.1.proj:input"]
    shortcut = trace_calls(model, clean).shortcut(resolve_site(model, sites[0]))
    assert (shortcut.resume is not None) == resumed
    res = patching_sweep(model, clean, corrupt, sites, metrics.output())
    assert ("3 sites resume" in res.attrs["sweep_path_note"]) == resumed
    np.testing.assert_allclose(
        res.patched.values, _naive_patching(model, clean, corrupt, sites, "denoising"), atol=ATOL, rtol=0
    )
    ablated = ablation_sweep(model, clean, sites, metrics.output(), method="zero")
    truth = []
    with torch.no_grad():
        for s in sites:
            with ablate(model, [s], method="zero"):
                truth.append(metrics.output()(model(clean)).numpy())
    np.testing.assert_allclose(ablated.ablated.values, np.stack(truth), atol=ATOL, rtol=0)

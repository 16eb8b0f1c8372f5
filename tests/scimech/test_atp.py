"""Attribution patching against exact activation patching.

Truths: where the metric is linear in a site's activation downstream of the site, the
first-order estimate *is* the patched effect (and the QK fix makes it so for queries and
keys when everything after the attention weights is linear); on a nonlinear model with
planted important heads, the estimate must find the planted heads; on a planted
cancellation, GradDrop must find the site AtP misses (Kramar et al. 2024, section 3.1.2).
"""

import numpy as np
import pytest
import torch
from torch import nn

from scimech import attribution_patching, patching_sweep, ranking_agreement
from scimech.capture.attention import DecomposedMultiheadAttention
from scimech.causal import metrics
from scimech.errors import DataValidationError

from .models import TinyTransformer


class LinearAfterAttention(nn.Module):
    """tanh embedding -> one (decomposed) attention -> linear readout.

    Downstream of the heads, of the values and of the attention weights everything is
    linear, so patching any of them changes the output exactly as the gradient says.
    """

    def __init__(self, d_in=3, dim=16, heads=4, sharpness=1.0):
        super().__init__()
        self.embed = nn.Linear(d_in, dim)
        self.attn = DecomposedMultiheadAttention(dim, heads, batch_first=True)
        with torch.no_grad():  # sharper queries/keys: saturated softmax (where plain AtP fails)
            self.attn.q_proj.weight.mul_(sharpness)
            self.attn.k_proj.weight.mul_(sharpness)
        self.readout = nn.Linear(dim, 2)

    def forward(self, x):
        h = torch.tanh(self.embed(x))
        a, _ = self.attn(h, h, h, need_weights=False)
        return self.readout(a)


LINEAR_SITES = [
    "attn.heads[0]",
    "attn.heads[3]",
    "attn.v_proj",
    "attn.v_proj.units[1,6]",
    "attn.out_proj",
    "readout:input",
]
QK_SITES = ["attn.q_proj", "attn.k_proj", "attn.q_proj.units[0,1,2,3]", "attn.k_proj.units[8,9,10,11]"]
# float32: the estimate is a sum of products over (tokens x features), the exact run a forward pass
ATOL = 2e-5


@pytest.mark.parametrize("direction", ["denoising", "noising"])
def test_atp_equals_exact_patching_where_the_model_is_linear_after_the_site(direction):
    torch.manual_seed(0)
    model = LinearAfterAttention().eval()
    clean, corrupt = torch.randn(6, 5, 3), torch.randn(6, 5, 3)
    metric = metrics.output(index=(slice(None), 0))  # mean over tokens of output 0: linear
    est = attribution_patching(model, clean, corrupt, LINEAR_SITES, metric, direction=direction, batch_size=4)
    exact = patching_sweep(model, clean, corrupt, LINEAR_SITES, metric, direction=direction, reuse_prefix=False)
    assert np.abs(exact.effect.values).max() > 0.05  # the effects are not trivially zero
    np.testing.assert_allclose(est.effect.values, exact.effect.values, atol=ATOL, rtol=0)
    np.testing.assert_allclose(est.patched.values, exact.patched.values, atol=ATOL, rtol=0)
    np.testing.assert_allclose(est.clean.values, exact.clean.values, atol=1e-6)
    assert est.attrs["estimator"] == "AtP" and est.attrs["direction"] == direction
    assert sorted(est["rank"].values) == list(range(1, len(LINEAR_SITES) + 1))


def test_qk_fix_is_exact_for_queries_and_keys_when_the_rest_is_linear():
    torch.manual_seed(1)
    model = LinearAfterAttention(sharpness=4.0).eval()
    clean, corrupt = torch.randn(5, 6, 3), torch.randn(5, 6, 3)
    metric = metrics.output(index=(slice(None), 1))
    exact = patching_sweep(model, clean, corrupt, QK_SITES, metric, reuse_prefix=False)
    fixed = attribution_patching(model, clean, corrupt, QK_SITES, metric)
    plain = attribution_patching(model, clean, corrupt, QK_SITES, metric, qk_fix=False)
    assert fixed.attrs["estimator"] == "AtP*" and fixed.attrs["qk_fix_sites"] == ", ".join(QK_SITES)
    np.testing.assert_allclose(fixed.effect.values, exact.effect.values, atol=ATOL, rtol=0)
    # through the saturated softmax the gradient alone is far off (the failure AtP* fixes)
    err_plain = np.abs(plain.effect.values - exact.effect.values).max()
    assert err_plain > 100 * ATOL and err_plain > 0.1 * np.abs(exact.effect.values).max()


def _planted(seed=0, important=((0, 1), (1, 3), (2, 0), (2, 2))):
    """A 3-block transformer whose planted heads write 30x more than the others."""
    torch.manual_seed(seed)
    model = TinyTransformer(d_in=3, dim=16, depth=3, num_heads=4).eval()
    with torch.no_grad():
        for li, blk in enumerate(model.encoder):
            for h in range(4):
                cols = slice(4 * h, 4 * h + 4)
                blk.attn.proj.weight[:, cols] *= 3.0 if (li, h) in important else 0.1
    return model, [f"encoder.{li}.attn.heads[{h}]" for li, h in important]


def test_atp_finds_planted_heads_in_a_nonlinear_model_and_verifies_them():
    model, planted = _planted()
    sites = [f"encoder.{li}.attn.heads[{h}]" for li in range(3) for h in range(4)]
    torch.manual_seed(2)
    clean, corrupt = torch.randn(16, 5, 3), torch.randn(16, 5, 3)
    metric = metrics.output()
    exact = patching_sweep(model, clean, corrupt, sites, metric)
    true_top = set(exact.site.values[np.argsort(-abs(exact.effect.mean("sample")).values)[:4]])
    assert true_top == set(planted)  # the planting worked (exact patching says so)
    est = attribution_patching(model, clean, corrupt, sites, metric, verify_top=4)
    assert set(est.site.values[est["rank"].values <= 4]) == set(planted)
    agree = ranking_agreement(est, exact, top=4)
    assert float(agree.top_overlap) == 1.0 and float(agree.spearman) > 0.7
    # the verification is exact patching of exactly the top 4
    assert int(est.verified.sum()) == 4 and set(est.site.values[est.verified.values]) == set(planted)
    np.testing.assert_allclose(
        est.exact_patched.sel(site=planted).values, exact.patched.sel(site=planted).values, atol=1e-5, rtol=0
    )
    assert np.isnan(est.exact_effect.sel(site=sites[1]).values).all() or sites[1] in planted
    assert sorted(est.exact_rank.values[est.verified.values]) == [1, 2, 3, 4]
    assert est.attrs["sweep_path"] == "prefix_reuse" and est.attrs["verify_top"] == 4
    # two batches: the verification is a fresh patching sweep, with the same values
    two = attribution_patching(model, clean, corrupt, sites, metric, verify_top=4, batch_size=8)
    np.testing.assert_allclose(two.exact_patched.values, est.exact_patched.values, atol=1e-5, rtol=0)
    np.testing.assert_allclose(two.effect.values, est.effect.values, atol=1e-6, rtol=0)


class Cancel(nn.Module):
    """Two residual blocks over two channels. Block 0 writes ``node`` into channel 0 and
    ``other`` into channel 1; block 1 adds ``-tanh`` of channel 0, whose slope -1 at 0
    cancels the direct path in the gradient at the corrupted input but not for a large patch."""

    class B0(nn.Module):
        def __init__(self):
            super().__init__()
            self.node, self.other = nn.Linear(1, 1), nn.Linear(1, 1)
            for lin in (self.node, self.other):
                nn.init.ones_(lin.weight)
                nn.init.zeros_(lin.bias)

        def forward(self, x):
            return x + torch.cat([self.node(x[:, :1]), self.other(x[:, 1:])], 1)

    class B1(nn.Module):
        def forward(self, x):
            return x + torch.stack([-torch.tanh(x[:, 0]), torch.zeros_like(x[:, 0])], 1)

    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([self.B0(), self.B1()])

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return x.sum(1)


def test_graddrop_finds_the_site_whose_gradient_cancels():
    model = Cancel().eval()
    clean, corrupt = torch.tensor([[3.0, 0.5], [2.5, 0.4]]), torch.zeros(2, 2)
    sites = ["blocks.0.node", "blocks.0.other"]
    exact = patching_sweep(model, clean, corrupt, sites)
    # by hand: node 3 -> 3 - tanh(3) = 2.005; other 0.5 -> 0.5 (sample 0)
    np.testing.assert_allclose(exact.effect.values[:, 0], [3 - np.tanh(3), 0.5], atol=1e-6)
    atp = attribution_patching(model, clean, corrupt, sites)
    np.testing.assert_allclose(atp.effect.sel(site="blocks.0.node").values, 0.0, atol=1e-6)  # 3 * (1 - 1)
    assert atp["rank"].sel(site="blocks.0.other") == 1  # AtP misses the node
    gd = attribution_patching(model, clean, corrupt, sites, graddrop=True)
    assert gd.attrs["graddrop_blocks"] == "blocks.0, blocks.1"
    assert gd["rank"].sel(site="blocks.0.node") == 1
    # sum over dropped blocks of |mean estimate| / (L - 1): node (|2.75| + 0) / 1, other (|0.45| + 0) / 1
    np.testing.assert_allclose(gd.score.sel(site=sites).values, [2.75, 0.45], atol=1e-6)


def test_bad_calls_are_clear():
    torch.manual_seed(0)
    model = LinearAfterAttention().eval()
    x = torch.randn(3, 5, 3)
    with pytest.raises(ValueError, match="differentiable"):
        attribution_patching(model, x, x.flip(0), ["attn.heads[0]"], lambda out: out.detach().mean((1, 2)))
    with pytest.raises(ValueError, match="graddrop"):
        attribution_patching(model, x, x.flip(0), ["attn.heads[0]"], graddrop=True)
    with pytest.raises(ValueError, match="verify_top"):
        attribution_patching(model, x, x.flip(0), ["attn.heads[0]"], verify_top=-1)
    assert all("forward" not in m.__dict__ and "attention_weights" not in m.__dict__ for m in model.modules())


class _Branches(nn.Module):
    """``used`` feeds the output through torch.no_grad() (no gradient, a real effect);
    ``unused`` is computed and never read (no gradient, no effect)."""

    def __init__(self, no_grad: bool):
        super().__init__()
        torch.manual_seed(0)
        self.used, self.unused, self.head = nn.Linear(4, 4), nn.Linear(4, 4), nn.Linear(4, 1)
        self.no_grad = no_grad

    def forward(self, x):
        self.unused(x)
        if self.no_grad:
            with torch.no_grad():
                h = self.used(x)
        else:
            h = self.used(x)
        return self.head(torch.tanh(h)).squeeze(-1) + x.sum(-1)


def test_a_site_the_gradient_cannot_reach_is_refused_not_estimated_as_zero():
    clean, corrupted = torch.randn(6, 4), torch.randn(6, 4)
    metric = lambda out, target=None: out  # noqa: E731
    with pytest.raises(DataValidationError, match=r"never reaches 'used'.*patching_sweep"):
        attribution_patching(_Branches(no_grad=True), clean, corrupted, ["used", "unused"], metric)
    # an output nothing reads: its estimate 0 is its exact effect (patching it changes nothing)
    got = attribution_patching(_Branches(no_grad=False), clean, corrupted, ["used", "unused"], metric)
    exact = patching_sweep(_Branches(no_grad=False), clean, corrupted, ["used", "unused"], metric)
    np.testing.assert_allclose(got.effect.sel(site="unused").values, 0.0)
    np.testing.assert_allclose(exact.effect.sel(site="unused").values, 0.0, atol=1e-6)

"""Sweeps whose metric reads one position compute the modules after the sites that act on each
position alone (a transformer's last MLP, final norm and unembedding) at that position only.

The truth is the naive loop: one full forward pass of the whole model per site inside ``patch``
/ ``ablate`` (checked against hand computations in test_intervene.py).
"""

import numpy as np
import torch
from torch import nn

from scimech.capture.record import Recorder
from scimech.capture.sites import resolve_site
from scimech.causal import metrics
from scimech.causal.intervene import ablate, ablation_sweep, patch, patching_sweep
from scimech.causal.prefix_reuse import trace_calls

from .models import Block

ATOL = 1e-5  # float32 through a few layers; tiled passes and one-position passes sum in another order
TOKENS, VOCAB = 6, 7
METRIC = metrics.logit_difference(2, 5)


class TinyLM(nn.Module):
    """(B, T, d_in) -> (B, T, vocabulary): blocks of attention and MLP, a final norm, an unembedding."""

    def __init__(self, d_in=3, dim=16, depth=2):
        super().__init__()
        torch.manual_seed(0)
        self.embed = nn.Linear(d_in, dim)
        self.blocks = nn.ModuleList([Block(dim, 4) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim)
        self.unembed = nn.Linear(dim, VOCAB)

    def forward(self, x):
        h = self.embed(x)
        for blk in self.blocks:
            h = blk(h)
        return self.unembed(self.norm(h))


class CenteredLM(TinyLM):
    """Logits centred over the positions outside any module: every position reaches the last."""

    def forward(self, x):
        logits = super().forward(x)
        return logits - logits.mean(1, keepdim=True)


SITES = ["blocks.0.attn.heads[1]", "blocks.1.attn.heads[3]", "blocks.1.mlp.0", "blocks.1.norm2", "norm"]


def _inputs():
    torch.manual_seed(1)
    return torch.randn(6, TOKENS, 3), torch.randn(6, TOKENS, 3)


def _naive_patching(model, clean, corrupt, sites):
    out = []
    with torch.no_grad():
        for s in sites:
            with Recorder(model, [s]) as rec:
                model(clean)
            with patch(model, {s: rec.activations[s]}):
                out.append(METRIC(model(corrupt)).numpy())
    return np.stack(out)


def test_logit_difference_says_which_position_it_reads():
    assert METRIC.reads(torch.zeros(2, TOKENS, VOCAB)) == (-1, TOKENS)
    assert METRIC.reads(torch.zeros(2, VOCAB)) is None  # no positions
    assert metrics.output().reads is None  # reads every element


def test_the_tail_is_what_acts_on_each_position_after_the_last_attention():
    model = TinyLM().eval()
    clean, _ = _inputs()
    trace = trace_calls(model, clean)
    site = resolve_site(model, "blocks.0.attn.heads[1]")
    # by construction: the last block's second norm and MLP, the final norm and the unembedding; not the
    # first block's MLP, which the last block's attention reads at every position
    assert trace.tail([site], TOKENS) == ("blocks.1.norm2", "blocks.1.mlp", "norm", "unembed")
    assert trace.tail([resolve_site(model, "norm")], TOKENS) == ("unembed",)
    assert not trace.calls["blocks.1.attn"].per_position and trace.calls["blocks.0.mlp"].per_position
    assert trace.tail([site], TOKENS + 1) == ()  # another number of positions than the outputs have


def test_patching_with_the_tail_at_one_position_equals_full_passes():
    model = TinyLM().eval()
    clean, corrupt = _inputs()
    kw = dict(batch_size=3, max_rows=6)  # 2 batches; each site a group of its own
    fast = patching_sweep(model, clean, corrupt, SITES, METRIC, **kw)
    assert "computed at position -1 of 6 only" in fast.attrs["sweep_tail"], fast.attrs
    np.testing.assert_allclose(fast.patched.values, _naive_patching(model, clean, corrupt, SITES), atol=ATOL, rtol=0)
    assert all("forward" not in m.__dict__ for m in model.modules())  # every override removed

    rows = []
    handle = model.blocks[1].mlp[0].register_forward_pre_hook(lambda m, a: rows.append(tuple(a[0].shape[:2])))
    try:
        again = patching_sweep(model, clean, corrupt, SITES, METRIC, **kw)
    finally:
        handle.remove()
    np.testing.assert_allclose(again.patched.values, fast.patched.values, atol=ATOL, rtol=0)
    # the last MLP is in the tail of the sites before it (the two heads, blocks.1.norm2): in each of the 2
    # batches it computes one position for them, with the batch's 3 rows and no unchanged copy (checked once)
    assert sorted(r for r in rows if r[1] == 1) == [(3, 1)] * 6, rows
    assert all(r == (3, TOKENS) for r in rows if r[1] != 1), rows


def test_ablation_with_the_tail_at_one_position_equals_ablate():
    model = TinyLM().eval()
    clean, _ = _inputs()
    fast = ablation_sweep(model, clean, SITES, METRIC, method="zero", batch_size=6, max_rows=12)
    assert "computed at position -1" in fast.attrs["sweep_tail"], fast.attrs
    with torch.no_grad():
        naive = []
        for s in SITES:
            with ablate(model, s, method="zero"):
                naive.append(METRIC(model(clean)).numpy())
    np.testing.assert_allclose(fast.ablated.values, np.stack(naive), atol=ATOL, rtol=0)


def test_positions_mixed_after_the_tail_run_it_in_full():
    model = CenteredLM().eval()
    clean, corrupt = _inputs()
    got = patching_sweep(model, clean, corrupt, SITES, METRIC, batch_size=6, max_rows=18)
    assert got.attrs["sweep_tail"].startswith("computed in full"), got.attrs
    assert not got.attrs["row_check"].startswith("coupled"), got.attrs  # the tiling is not blamed
    np.testing.assert_allclose(got.patched.values, _naive_patching(model, clean, corrupt, SITES), atol=ATOL, rtol=0)

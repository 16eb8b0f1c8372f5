"""Classifier-free guidance: a model that stacks two copies of the batch, ``[cond; uncond]``.

diffusers' DiT pipeline runs the transformer on ``torch.cat([latents] * 2)`` with the class
labels followed by the null class, then splits the output with ``eps_cond, eps_uncond =
out.chunk(2)`` and combines ``eps_uncond + scale * (eps_cond - eps_uncond)``. Inside such a
forward, an activation has ``2 x batch`` rows and sample ``i``'s two rows are ``i`` and
``batch + i``, not two neighbouring rows. The layout vocabulary names it ``copy*batch``; the
refusal names it, and the verbs check it on the data. Truth: plain torch hooks (the two rows
of sample ``i`` taken at ``i`` and ``batch + i``).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import scimech as sm
from scimech.errors import DimensionError

from .helpers import ATOL, npy

B, F, NULL = 4, 6, 3
SCALE = 4.0


class Guided(nn.Module):
    """A denoiser called with guidance inside its forward, as a sampler step does."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(NULL + 1, F)
        self.block = nn.Linear(F, F)
        self.out = nn.Linear(F, F)

    def forward(self, x, labels):
        xx = torch.cat([x, x])
        yy = torch.cat([labels, torch.full_like(labels, NULL)])
        eps = self.out(torch.tanh(self.block(xx + self.embed(yy))))
        eps_cond, eps_uncond = eps.chunk(2)
        return eps_uncond + SCALE * (eps_cond - eps_uncond)


def first(out, target=None):
    return out[:, 0]


@pytest.fixture(scope="module")
def case():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(2)
    x, y = torch.randn(B, F, generator=g), torch.randint(0, NULL, (B,), generator=g)
    return Guided().eval(), x, y


def _block_rows(model, x, y):
    seen = []
    h = model.block.register_forward_hook(lambda m, a, out: seen.append(out.detach().clone()))
    with torch.no_grad():
        model(x, y)
    h.remove()
    return seen[0]


def test_the_refusal_names_copies_and_the_fix_groups_a_samples_rows(case):
    model, x, y = case
    with pytest.raises(DimensionError, match=r"copy\*batch"):
        sm.record(model, (x, y), ["block"])
    # rows packed sample by sample is the wrong reading: refused on the data
    with pytest.raises(DimensionError, match="not sample by sample"):
        sm.record(model, (x, y), ["block"], axes={"block": "batch*window feature"})
    got = sm.record(model, (x, y), ["block"], axes={"block": "copy*batch feature"})
    rows = _block_rows(model, x, y)
    want = torch.stack([rows[:B], rows[B:]], dim=1)  # (sample, copy, feature): rows i and B + i
    np.testing.assert_allclose(got["block"].transpose("sample", "copy", "feature").values, npy(want), atol=ATOL)


def test_mean_ablation_averages_each_copy_over_samples(case):
    model, x, y = case
    rows = _block_rows(model, x, y)
    mean = torch.cat([rows[:B].mean(0, keepdim=True).expand(B, F), rows[B:].mean(0, keepdim=True).expand(B, F)])
    h = model.block.register_forward_hook(lambda m, a, out: mean)
    with torch.no_grad():
        want = model(x, y)
    h.remove()
    axes = {"block": "copy*batch feature"}
    with sm.ablate(model, "block", method="mean", reference=(x, y), axes=axes), torch.no_grad():
        got = model(x, y)
    np.testing.assert_allclose(npy(got), npy(want), atol=ATOL)


def test_resample_ablation_swaps_both_rows_of_a_sample(case):
    model, x, y = case
    rows = _block_rows(model, x, y)
    res = sm.ablation_sweep(
        model, (x, y), ["block"], first, method="resample", reference=(x, y), axes={"block": "copy*batch feature"}
    )
    # each sample's value with both of its rows taken from one reference sample j (rows j and B + j)
    outs = []
    for j in range(B):
        src = torch.cat([rows[j].expand(B, F), rows[B + j].expand(B, F)])
        h = model.block.register_forward_hook(lambda m, a, out, _s=src: _s)
        with torch.no_grad():
            outs.append(first(model(x, y)))
        h.remove()
    candidates = torch.stack(outs)  # (reference sample, sample)
    got = torch.as_tensor(res["ablated"].values[0], dtype=torch.float32)
    assert all(bool((candidates[:, i] - got[i]).abs().min() < ATOL) for i in range(B))

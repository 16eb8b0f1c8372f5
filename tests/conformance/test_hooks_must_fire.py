"""A hook that never fires is an error, never "no effect": a site on a module that the
forward pass does not call makes every verb raise a RuntimeError naming the site."""

from __future__ import annotations

import re

import pytest
import torch
from torch import nn

import scimech as sm

from .helpers import watch

B = 3
SITE = "never_called"


class WithUnusedModule(nn.Module):
    """``never_called`` is a registered submodule that forward never calls."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(4, 8)
        self.never_called = nn.Linear(8, 8)
        self.head = nn.Linear(8, 1)

    def forward(self, x):
        return self.head(torch.tanh(self.embed(x))).squeeze(-1)


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return WithUnusedModule().eval()


def metric(out, target=None):
    return out


@pytest.fixture
def x():
    return torch.randn(B, 4)


def run(model, x):
    with torch.no_grad():
        return model(x)


@pytest.mark.parametrize("method", ["zero", "scale", "mean", "resample"])
def test_ablate_raises_on_leaving_the_block(model, x, method):
    kwargs = {"zero": {}, "scale": {"factor": 2.0}, "mean": {"reference": x}, "resample": {"reference": x}}[method]
    with pytest.raises(RuntimeError, match=SITE):
        with sm.ablate(model, [SITE], method=method, **kwargs):
            run(model, x)


def test_ablate_on_a_site_that_fires_is_quiet(model, x):
    with sm.ablate(model, ["embed"], method="zero"):
        run(model, x)


def test_patch_raises(model, x):
    with pytest.raises(RuntimeError, match=SITE):
        with sm.patch(model, {SITE: torch.zeros(B, 8)}):
            run(model, x)


def test_record_raises(model, x):
    with pytest.raises(RuntimeError, match=SITE):
        sm.record(model, x, ["embed", SITE])


def test_ablation_sweep_raises(model, x):
    with pytest.raises(RuntimeError, match=SITE):
        sm.ablation_sweep(model, x, ["embed", SITE], metric, method="zero")


@pytest.mark.parametrize("direction", ["denoising", "noising"])
def test_patching_sweep_raises(model, x, direction):
    with pytest.raises(RuntimeError, match=SITE):
        sm.patching_sweep(model, x, x.flip(0), ["embed", SITE], metric, direction=direction)


def test_attribution_patching_raises(model, x):
    with pytest.raises(RuntimeError, match=SITE):
        sm.attribution_patching(model, x, x.flip(0), ["embed", SITE], metric)


def test_gpt2_dropout_module_that_eager_attention_does_not_call(gpt2):
    """HF GPT-2's ``attn_dropout`` is a registered module; whether the attention calls it
    is the library's business. A hand hook says; scimech must agree or raise."""
    g = gpt2
    tokens = torch.randint(0, 64, (2, 5), generator=torch.Generator().manual_seed(0))
    s = "h.0.attn.attn_dropout"
    with watch(g.model.get_submodule(s)) as seen:
        run(g.model, tokens)
    if seen:
        assert sm.record(g.model, tokens, [s])[s].shape[0] == 2
        return
    with pytest.raises(RuntimeError, match=re.escape(s)):
        sm.record(g.model, tokens, [s])
    with pytest.raises(RuntimeError, match=re.escape(s)):
        sm.ablation_sweep(g.model, tokens, [s], g.metric, method="zero")
    with pytest.raises(RuntimeError, match=re.escape(s)):
        with sm.ablate(g.model, s, method="zero"):
            run(g.model, tokens)


def test_module_added_to_gpt2_but_never_called(fresh_gpt2):
    g = fresh_gpt2
    g.model.h[1].attn.add_module("probe_never_called", nn.Linear(32, 32))
    s = "h.1.attn.probe_never_called"
    gen = torch.Generator().manual_seed(1)
    clean, corrupted = torch.randint(0, 64, (2, 5), generator=gen), torch.randint(0, 64, (2, 5), generator=gen)
    with pytest.raises(RuntimeError, match=re.escape(s)):
        with sm.ablate(g.model, ["h.0.attn.heads[1]", s], method="zero"):
            run(g.model, clean)
    with pytest.raises(RuntimeError, match=re.escape(s)):
        sm.patching_sweep(g.model, clean, corrupted, ["h.0.attn.heads[1]", s], g.metric)
    with pytest.raises(RuntimeError, match=re.escape(s)):
        sm.attribution_patching(g.model, clean, corrupted, [s], g.metric)

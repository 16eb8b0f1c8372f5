"""How many forward (and backward) passes each verb runs, counted by a wrapper around the model.

The counts documented in docs/core_api.md ("Forward passes per verb"): a verb's own work, plus
the model profile's one-time measurement (scimech.causal.model_profile: a pass, its repeat, and where
rows must be samples the first half of the rows) the first time a model, forward and input
signature is met; a second verb on the same model and inputs pays nothing for it.
"""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

import scimech
from scimech.causal import metrics

#: the profile's one-time measurement: a pass and its repeat (drift), + half a batch (rows as samples);
#: a sweep's own unchanged pass serves as the first, so a sweep pays the repeat only
PROFILE_ROWS, SWEEP_PROFILE = 3, 1


class _CountBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, box):
        ctx.box = box
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):
        ctx.box.backwards += 1
        return g, None


class Counted(nn.Module):
    """A two-layer network that counts its forward passes and the backward passes through its output."""

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 2))
        self.forwards = self.backwards = 0

    def forward(self, x):
        self.forwards += 1
        return _CountBackward.apply(self.net(x), self)


SITES = ["net.1", "net.3"]


def _count(model: Counted, run) -> tuple[int, int]:
    model.forwards = model.backwards = 0
    run()
    return model.forwards, model.backwards


def _entering(model: Counted, x: torch.Tensor, method: str, reference) -> tuple[int, int]:
    """The passes of entering an ablate block (then one pass of the user's inside it)."""
    block = scimech.ablate(model, SITES, method=method, reference=reference)
    got = _count(model, block.__enter__)
    with torch.no_grad():
        model(x)
    block.__exit__(None, None, None)
    return got


@pytest.fixture
def setup():
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    return Counted().eval(), torch.randn(8, 4, generator=g), torch.randn(8, 4, generator=g)


def test_record_runs_one_pass_per_batch_and_nothing_else(setup):
    model, x, _ = setup
    # the first record also runs half a batch, once, up to its last site: a site whose first axis
    # keeps its size on another batch size is one tensor every sample shares, not samples
    assert _count(model, lambda: scimech.record(model, x, SITES, batch_size=4)) == (3, 0)
    assert _count(model, lambda: scimech.record(model, x, SITES, batch_size=4)) == (2, 0)


@pytest.mark.parametrize("method", ["mean", "resample"])
def test_mean_and_resample_ablation_record_the_reference_once_and_check_it_once(setup, method):
    model, x, ref = setup
    assert _entering(model, x, method, ref) == (1 + PROFILE_ROWS, 0)  # the reference's pass + the profile, once
    assert _entering(model, x, method, ref) == (1, 0)
    assert _entering(model, x, "zero", None) == (0, 0)  # zero ablation: the user's own passes only


def test_patch_adds_no_pass(setup):
    model, x, _ = setup
    with scimech.patch(model, {"net.1": torch.zeros(8, 8)}):
        assert _count(model, lambda: (model(x), model(x))) == (2, 0)


@pytest.mark.parametrize("max_rows", [256, 8])
def test_patching_sweep_runs_the_two_unpatched_passes_and_one_tiled_pass_per_k_sites(setup, max_rows):
    model, x, c = setup
    k = max(1, max_rows // 8)  # sites per tiled pass of 8-row copies
    own = 2 + math.ceil(len(SITES) / k)

    def run():
        scimech.patching_sweep(model, x, c, SITES, max_rows=max_rows, reuse_prefix=False)

    assert _count(model, run) == (own + SWEEP_PROFILE, 0)
    assert _count(model, run) == (own, 0)


def test_ablation_sweep_runs_the_unablated_pass_and_one_tiled_pass_per_k_sites(setup):
    model, x, _ = setup

    def run():
        scimech.ablation_sweep(model, x, SITES, method="zero", reuse_prefix=False)

    assert _count(model, run) == (1 + 1 + SWEEP_PROFILE, 0)
    assert _count(model, run) == (2, 0)


def test_prefix_reuse_adds_a_trace_once_and_a_tiled_pass_per_reused_prefix(setup):
    model, x, c = setup
    # the profile's repeat, a 2-row trace, the source and base passes, one tiled pass per site's prefix
    assert _count(model, lambda: scimech.patching_sweep(model, x, c, SITES)) == (SWEEP_PROFILE + 1 + 2 + 2, 0)
    # the trace is kept in the profile: the next sweep on the same model and inputs pays neither again
    assert _count(model, lambda: scimech.patching_sweep(model, x, c, SITES)) == (2 + 2, 0)
    assert _count(model, lambda: scimech.ablation_sweep(model, x, SITES, method="zero")) == (1 + 2, 0)


def test_attribution_patching_runs_two_forwards_and_one_backward(setup):
    model, x, c = setup

    def run():
        scimech.attribution_patching(model, x, c, SITES, metrics.output())

    assert _count(model, run) == (2 + PROFILE_ROWS, 1)
    assert _count(model, run) == (2, 1)


def test_a_second_verb_on_the_same_model_and_inputs_pays_no_check(setup):
    model, x, c = setup
    scimech.attribution_patching(model, x, c, SITES, metrics.output())
    assert _count(model, lambda: scimech.patching_sweep(model, x, c, SITES, reuse_prefix=False)) == (3, 0)
    assert _count(model, lambda: scimech.ablation_sweep(model, x, SITES, method="zero", reuse_prefix=False)) == (2, 0)
    assert _entering(model, x, "mean", c) == (1, 0)

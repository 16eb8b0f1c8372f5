"""Rows that are not independent: an adaptive ODE solver whose step size is chosen from the whole batch.

``Adaptive``: ``enc`` (Linear) -> an embedded Heun-Euler pair on [0, 2] -> ``head`` (Linear). The
local error estimate is the largest over every row of the batch (``.abs().max()``), so one step
size serves the whole batch, as adaptive solvers that take one norm of the batch's error do
(torchdiffeq's ``odeint`` with ``dopri5``; here the max norm, written out). A row's numbers
therefore depend on the other rows.

A sweep that tiles its batch (copy ``i`` with site ``i`` changed, and one unchanged control copy
whose metric must match the untiled run) cannot see this coupling where the changed copies err
less than the unchanged rows: the control copy then sets the step, matches the untiled run, and
the changed copies are integrated with steps that are not their own. The model profile's rows
check (the first half of the batch alone) finds the coupling on the unchanged batch, and the
sweep runs one site per forward pass.

Truth: for each site, a plain forward hook that halves the site's output at every call, and one
forward pass of the whole batch (what "one site per pass" computes), per sample.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import scimech as sm

from .helpers import ATOL, edit_output, npy

B = 6
SITES = ["func.lin1", "func.act", "func.lin2"]


class Field(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin1, self.act, self.lin2 = nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 4)

    def forward(self, y):
        return self.lin2(self.act(self.lin1(y)))


class Adaptive(nn.Module):
    """Heun (order 2) with Euler (order 1) as its error estimate; a step is accepted where the
    batch's largest error is within ``tol``, and the next step size follows that error."""

    def __init__(self, t_end: float = 2.0, tol: float = 1e-2):
        super().__init__()
        self.enc, self.func, self.head = nn.Linear(3, 4), Field(), nn.Linear(4, 1)
        self.t_end, self.tol = t_end, tol

    def forward(self, x):
        y, t, h = self.enc(x), 0.0, 0.1
        while t < self.t_end - 1e-9:
            h = min(h, self.t_end - t)
            k1 = self.func(y)
            k2 = self.func(y + h * k1)
            err = float((0.5 * h * (k2 - k1)).abs().max())  # one error for the whole batch
            if err <= self.tol:
                y, t = y + 0.5 * h * (k1 + k2), t + h
            h *= min(2.0, max(0.2, 0.9 * (self.tol / max(err, 1e-12)) ** 0.5))
        return self.head(y).squeeze(-1)


def metric(out, target=None):
    return out


@pytest.fixture(scope="module")
def solver():
    torch.manual_seed(0)
    model = Adaptive().eval()
    with torch.no_grad():  # livelier dynamics: more steps, and step sizes that depend on the rows
        model.func.lin1.weight.mul_(2.0)
        model.func.lin2.weight.mul_(3.0)
    x = torch.randn(B, 3, generator=torch.Generator().manual_seed(80))
    return model, x


def halved(model, x, site):
    """The hand truth: the site's output halved at every call, one forward pass of the whole batch."""
    with torch.no_grad(), edit_output(model.get_submodule(site), lambda t: 0.5 * t):
        return npy(model(x))


def test_a_tiled_control_copy_matches_while_the_changed_copy_is_wrong(solver):
    """The premise, by hand: the batch with ``func.lin2`` halved stacked on the unchanged batch
    (a tiled pass with its control copy). The control copy gives the untiled run's numbers (so a
    control check passes), but the changed copy's numbers are not those of its own pass."""
    model, x = solver
    with torch.no_grad():
        plain = npy(model(x))

        def half_first(t):
            return torch.cat([0.5 * t[:B], t[B:]])

        with edit_output(model.func.lin2, half_first):
            tiled = npy(model(torch.cat([x, x])))
    np.testing.assert_allclose(tiled[B:], plain, atol=ATOL)  # the control copy agrees
    assert np.abs(tiled[:B] - halved(model, x, "func.lin2")).max() > 10 * ATOL  # the changed copy does not


def test_the_profile_says_the_rows_interact(solver):
    """The profile's table: the first half of the batch alone gives other outputs."""
    model, x = solver
    said = sm.profile(model, x, ["enc"]).loc["enc", "samples"]
    assert said.startswith("rows interact: the first 3 of 6 rows alone give outputs that differ"), said


def test_ablation_sweep_runs_one_site_per_pass(solver):
    """ablation_sweep(method='scale', factor=0.5, calls='all'): each site's per-sample metric
    equals the hand-hooked pass of the whole batch with that site halved; the attrs say the rows
    are coupled (from the profile) and every site ran a pass of its own. On a sweep that trusted
    its control copy, these differed by up to 8e-5 (the control copy set the step)."""
    model, x = solver
    res = sm.ablation_sweep(model, x, SITES, metric, method="scale", factor=0.5, calls="all")
    for site in SITES:
        np.testing.assert_allclose(
            res.ablated.sel(site=site).values, halved(model, x, site), rtol=0, atol=ATOL, err_msg=site
        )
    assert res.attrs["row_check"].startswith("coupled"), res.attrs["row_check"]
    assert "profile" in res.attrs["row_check"], res.attrs["row_check"]
    assert res.attrs["sweep_path"] == "per_site"


def test_patching_sweep_runs_one_site_per_pass(solver):
    """patching_sweep of ``enc`` units (each called once) from a clean batch into a corrupted one:
    the hand truth is one pass of the whole corrupted batch with the clean unit put in."""
    model, x = solver
    corrupted = x.flip(0) + 0.3
    with torch.no_grad():
        clean_enc = model.enc(x)
    sites = [f"enc.units[{u}]" for u in range(4)]
    res = sm.patching_sweep(model, x, corrupted, sites, metric)
    for u, site in enumerate(sites):

        def put(t, _u=u):
            t = t.clone()
            t[:, _u] = clean_enc[:, _u]
            return t

        with torch.no_grad(), edit_output(model.enc, put):
            truth = npy(model(corrupted))
        np.testing.assert_allclose(res.patched.sel(site=site).values, truth, rtol=0, atol=ATOL, err_msg=site)
    assert res.attrs["sweep_path"] == "per_site"

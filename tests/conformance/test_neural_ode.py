"""A neural ODE (torchdiffeq): the vector field's modules run at every solver stage.

``ODEModel``: ``enc`` (Linear) -> ``odeint(func, ., t)`` -> ``head`` (Linear) on the final
state; ``func`` is ``lin2(tanh(lin1(y)))``, so ``func.lin1`` runs once per stage.

- ``rk4``: fixed step (``options=dict(step_size=0.25)`` on [0, 1]): 4 steps of 4 stages, the
  same 16 calls for every input, and the rows of a batch never interact;
- ``dopri5``: adaptive (rtol = atol = 1e-3 on [0, 2]): the step size is chosen from an error
  norm over the whole batch, so the rows of a batch interact: running several patched copies
  of the batch in one (tiled) forward pass changes the steps and the numbers (checked here by
  hand), and a changed activation can change the number of calls.

Truths: plain forward hooks that count the calls of ``func.lin1`` within one forward and edit
or collect the calls asked for; for the adaptive solver, one hand-hooked forward of the whole
batch per site (what "one forward pass per site" computes).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import contextmanager
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from torch import nn
from torchdiffeq import odeint

import scimech as sm
from scimech.errors import DataValidationError, SiteCalledTwiceError

from .helpers import ATOL, _first, _with_first, npy, set_cols, watch

B, R = 4, 3
RK4_CALLS = 16


def metric(out, target=None):
    return out


class Field(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin1 = nn.Linear(4, 16)
        self.act = nn.Tanh()
        self.lin2 = nn.Linear(16, 4)

    def forward(self, t, y):
        return self.lin2(self.act(self.lin1(y)))


class ODEModel(nn.Module):
    def __init__(self, t_end: float, **solver):
        super().__init__()
        self.enc = nn.Linear(3, 4)
        self.func = Field()
        self.head = nn.Linear(4, 1)
        self.register_buffer("t", torch.tensor([0.0, t_end]))
        self.solver = solver

    def forward(self, x):
        ys = odeint(self.func, self.enc(x), self.t, **self.solver)
        return self.head(ys[-1]).squeeze(-1)


@contextmanager
def edit_calls(module: nn.Module, fn: Callable[[torch.Tensor, int], torch.Tensor], which="all"):
    """Forward hook: the output of call ``k`` of ``module`` becomes ``fn(output, k)`` for ``k``
    in ``which`` (``"all"``: every call); ``box["n"]`` counts the calls."""
    box = {"n": 0}

    def hook(_mod, _args, out):
        k = box["n"]
        box["n"] += 1
        return _with_first(out, fn(_first(out), k)) if which == "all" or k in which else out

    handle = module.register_forward_hook(hook)
    try:
        yield box
    finally:
        handle.remove()


def per_call(module, run):
    with torch.no_grad(), watch(module) as seen:
        run()
    return seen


def hand(model, x, module, fn, which="all"):
    with torch.no_grad(), edit_calls(module, fn, which):
        return npy(model(x))


def zero_unit(u):
    return lambda t, k: set_cols(t, slice(u, u + 1), 0.0)


def _inputs(seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(B, 3, generator=g), torch.randn(B, 3, generator=g), torch.randn(R, 3, generator=g)


@pytest.fixture(scope="module")
def rk4():
    torch.manual_seed(0)
    model = ODEModel(1.0, method="rk4", options=dict(step_size=0.25)).eval()
    x, x2, ref = _inputs(80)
    return SimpleNamespace(model=model, x=x, x2=x2, ref=ref)


@pytest.fixture(scope="module")
def dopri():
    torch.manual_seed(0)
    model = ODEModel(2.0, method="dopri5", rtol=1e-3, atol=1e-3).eval()
    with torch.no_grad():  # livelier dynamics: more steps, and step sizes that depend on the rows
        model.func.lin1.weight.mul_(2.0)
        model.func.lin2.weight.mul_(3.0)
    x, x2, ref = _inputs(80)
    return SimpleNamespace(model=model, x=x, x2=x2, ref=ref)


# ----------------------------------------------------------------------------------------------
# fixed step (rk4)


def test_rk4_default_is_an_error_that_names_calls(rk4):
    with pytest.raises(SiteCalledTwiceError, match="calls="):
        sm.record(rk4.model, rk4.x, ["func.lin1"])


def test_rk4_record_all_calls(rk4):
    """record(calls='all'): a call dim of the 16 stage evaluations (hand hook, call by call)."""
    seen = per_call(rk4.model.func.lin1, lambda: rk4.model(rk4.x))
    assert len(seen) == RK4_CALLS
    v = sm.record(rk4.model, rk4.x, ["func.lin1"], calls="all")["func.lin1"]
    assert v.dims[:2] == ("sample", "call") and v.sizes["call"] == RK4_CALLS, v.dims
    np.testing.assert_allclose(v.values, npy(torch.stack(seen, 1)), atol=ATOL)
    last = sm.record(rk4.model, rk4.x, ["func.lin1"], calls="last")["func.lin1"]
    np.testing.assert_allclose(last.values, npy(seen[-1]), atol=ATOL)


@pytest.mark.parametrize("calls", [5, [0, 15]])
def test_rk4_ablate_calls(rk4, calls):
    """sm.ablate(calls=...) zeroes unit 3 of ``func.lin1`` at those stage evaluations only."""
    which = calls if isinstance(calls, list) else [calls]
    expect = hand(rk4.model, rk4.x, rk4.model.func.lin1, zero_unit(3), which)
    with torch.no_grad(), sm.ablate(rk4.model, "func.lin1.units[3]", method="zero", calls=calls):
        got = npy(rk4.model(rk4.x))
    np.testing.assert_allclose(got, expect, atol=ATOL)


def test_rk4_ablation_sweep_by_call(rk4):
    """ablation_sweep(by_call=True, calls=[0, 7, 15]): dims (site, call, sample), each call
    zeroed alone (hand hook)."""
    res = sm.ablation_sweep(
        rk4.model, rk4.x, ["func.lin1.units[3]"], metric, method="zero", calls=[0, 7, 15], by_call=True
    )
    assert res.ablated.dims == ("site", "call", "sample"), res.ablated.dims
    for c in (0, 7, 15):
        np.testing.assert_allclose(
            res.ablated.sel(site="func.lin1.units[3]", call=c).values,
            hand(rk4.model, rk4.x, rk4.model.func.lin1, zero_unit(3), [c]),
            atol=ATOL,
        )


def test_rk4_mean_ablation_reference_per_call(rk4):
    """Mean ablation with reference inputs, calls='all': stage c gets the mean of the reference
    run's stage-c activations (hand: reference recorded per call, replaced per call)."""
    ref = per_call(rk4.model.func.lin1, lambda: rk4.model(rk4.ref))
    means = [a[:, 3].mean() for a in ref]
    expect = hand(rk4.model, rk4.x, rk4.model.func.lin1, lambda t, k: set_cols(t, slice(3, 4), means[k]))
    with torch.no_grad(), sm.ablate(rk4.model, "func.lin1.units[3]", method="mean", reference=rk4.ref, calls="all"):
        got = npy(rk4.model(rk4.x))
    np.testing.assert_allclose(got, expect, atol=ATOL)
    res = sm.ablation_sweep(
        rk4.model, rk4.x, ["func.lin1.units[3]"], metric, method="mean", reference=rk4.ref, calls="all"
    )
    np.testing.assert_allclose(res.ablated.sel(site="func.lin1.units[3]").values, expect, atol=ATOL)


def test_rk4_patching_sweep_last_call(rk4):
    """patching_sweep(calls='last'): the clean run's last stage evaluation replaces the
    corrupted run's last (call 15; hand hook)."""
    src = per_call(rk4.model.func.lin1, lambda: rk4.model(rk4.x))
    res = sm.patching_sweep(rk4.model, rk4.x, rk4.x2, ["func.lin1"], metric, calls="last")
    np.testing.assert_allclose(
        res.patched.sel(site="func.lin1").values,
        hand(rk4.model, rk4.x2, rk4.model.func.lin1, lambda t, k: src[k], [RK4_CALLS - 1]),
        atol=ATOL,
    )


# ----------------------------------------------------------------------------------------------
# adaptive step (dopri5)


def test_dopri_record_all_calls(dopri):
    """record(calls='all') with an adaptive solver: as many calls as the hand hook counts."""
    seen = per_call(dopri.model.func.lin1, lambda: dopri.model(dopri.x))
    v = sm.record(dopri.model, dopri.x, ["func.lin1"], calls="all")["func.lin1"]
    assert v.sizes["call"] == len(seen), (v.sizes, len(seen))
    np.testing.assert_allclose(v.values, npy(torch.stack(seen, 1)), atol=ATOL)


def test_dopri_ablate_one_call(dopri):
    """sm.ablate(calls=3) on the adaptive solver: the hand hook editing call 3 of the same batch
    (the later step sizes follow from the edit in both)."""
    expect = hand(dopri.model, dopri.x, dopri.model.func.lin1, zero_unit(3), [3])
    with torch.no_grad(), sm.ablate(dopri.model, "func.lin1.units[3]", method="zero", calls=3):
        got = npy(dopri.model(dopri.x))
    np.testing.assert_allclose(got, expect, atol=ATOL)
    assert np.abs(hand(dopri.model, dopri.x, dopri.model.func.lin1, zero_unit(3)) - expect).max() > 1e-4


ENC_SITES = ["enc", "enc.units[0]", "enc.units[1]", "enc.units[3]"]


def _enc_patch(site, src):
    if site == "enc":
        return lambda t, k: src
    u = int(site[len("enc.units[") : -1])
    return lambda t, k: set_cols(t, slice(u, u + 1), src[:, u : u + 1])


def test_dopri_tiling_changes_the_numbers(dopri):
    """The premise of the two tests below, by hand: running the patched batches of two sites
    stacked in one forward pass gives other numbers than two separate passes (the solver's
    step size depends on every row)."""
    m = dopri.model
    src = per_call(m.enc, lambda: m(dopri.x))[0]
    sep = [hand(m, dopri.x2, m.enc, _enc_patch(s, src)) for s in ("enc.units[0]", "enc.units[3]")]

    def both(t, k):
        return torch.cat([_enc_patch("enc.units[0]", src)(t[:B], 0), _enc_patch("enc.units[3]", src)(t[B:], 0)])

    tiled = hand(m, torch.cat([dopri.x2, dopri.x2]), m.enc, both)
    assert np.abs(tiled - np.concatenate(sep)).max() > 1e-4


def test_dopri_patching_sweep_is_per_site(dopri):
    """patching_sweep over several sites with the adaptive solver: each site's numbers equal one
    hand-hooked forward of the whole corrupted batch with the clean ``enc`` output (or unit)
    put in; the sweep finds the rows coupled (attrs row_check 'coupled...') and runs one
    forward per site (sweep_path 'per_site')."""
    m = dopri.model
    src = per_call(m.enc, lambda: m(dopri.x))[0]
    res = sm.patching_sweep(m, dopri.x, dopri.x2, ENC_SITES, metric)
    for s in ENC_SITES:
        np.testing.assert_allclose(
            res.patched.sel(site=s).values, hand(m, dopri.x2, m.enc, _enc_patch(s, src)), atol=ATOL, err_msg=s
        )
    np.testing.assert_allclose(res.corrupted.values, npy(m(dopri.x2).detach()), atol=ATOL)
    assert res.attrs["row_check"].startswith("coupled"), res.attrs.get("row_check")
    assert res.attrs["sweep_path"] == "per_site", res.attrs.get("sweep_path")


def test_dopri_ablation_sweep_is_per_site(dopri):
    """ablation_sweep (zero) over ``enc`` units with the adaptive solver: one hand-hooked
    forward of the whole batch per site; attrs say the rows are coupled and the path per site."""
    m = dopri.model
    sites = ["enc.units[0]", "enc.units[1]", "enc.units[2]", "enc.units[3]"]
    res = sm.ablation_sweep(m, dopri.x, sites, metric, method="zero")
    for u, s in enumerate(sites):
        np.testing.assert_allclose(
            res.ablated.sel(site=s).values, hand(m, dopri.x, m.enc, zero_unit(u)), atol=ATOL, err_msg=s
        )
    assert res.attrs["row_check"].startswith("coupled"), res.attrs.get("row_check")
    assert res.attrs["sweep_path"] == "per_site", res.attrs.get("sweep_path")


def test_dopri_mean_ablation_needs_samples(dopri):
    """Mean ablation where the rows interact (the step-size control) and samples= is not given:
    DataValidationError naming samples=."""
    with pytest.raises(DataValidationError, match="samples="):
        sm.ablation_sweep(dopri.model, dopri.x, ["enc.units[0]"], metric, method="mean", reference=dopri.ref)


def test_dopri_ablate_mean_needs_samples(dopri):
    """The same through sm.ablate: the rows interact, so a mean over reference rows is refused."""
    with pytest.raises(DataValidationError, match="samples="):
        with torch.no_grad(), sm.ablate(dopri.model, "enc.units[0]", method="mean", reference=dopri.ref):
            dopri.model(dopri.x)


def test_dopri_attribution_patching_needs_samples(dopri):
    """attribution_patching where the rows interact and samples= is not given: an error naming
    samples= (a per-row gradient of a summed metric would mix rows)."""
    with pytest.raises(DataValidationError, match="samples="):
        sm.attribution_patching(dopri.model, dopri.x, dopri.x2, ["enc"], metric)


def test_dopri_last_call_with_a_changed_call_count_is_an_error(dopri):
    """calls='last' names the last call of the unablated run. Scaling the last evaluation of
    ``func.lin2`` (the FSAL stage of the final step) by 1000 makes the solver reject that step
    and take more (hand hook: more calls), so the ablated run has another call count: an
    error, not a number."""
    m = dopri.model
    n = len(per_call(m.func.lin2, lambda: m(dopri.x)))
    with torch.no_grad(), edit_calls(m.func.lin2, lambda t, k: 1e3 * t, [n - 1]) as box:
        m(dopri.x)
    assert box["n"] != n
    with pytest.raises((ValueError, RuntimeError), match="call"):
        sm.ablation_sweep(m, dopri.x, ["func.lin2"], metric, method="scale", factor=1e3, calls="last")

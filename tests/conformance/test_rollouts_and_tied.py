"""Sites that run more than once in one forward pass, and inputs with unbatched fields.

- a weight-tied block (``block.fc``) applied ``N_TIED`` times in one forward;
- one activation module shared by two blocks (``blocks.0.act`` and ``blocks.1.act`` are the
  same object: the calls of the object are counted, whichever path names it);
- an autoregressive rollout: a one-step model called ``T`` times by a loop, either inside a
  ``forward=`` function of a verb or inside ``with sm.forward_pass():``;
- a model whose input is a dataclass with one batched field and unbatched fields
  (latitude ``(H,)``, longitude ``(W,)``, a static field ``(H, W)``);
- a model with a complex activation (attribution patching: ``Re(sum(conj(grad) * delta))``).

Truths: plain forward hooks that count the calls of a module within one run and edit or
collect only the calls asked for (:func:`edit_calls`, :func:`watch`); for the first-order
estimates, gradients by autograd at each call (a leaf per call), and for the complex site
the directional derivative by autograd with respect to a real step along ``delta``.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from torch import nn

import scimech as sm
from scimech.errors import SiteCalledTwiceError

from .helpers import ATOL, _first, _with_first, matching_rows, npy, set_cols, watch

B, R, D = 4, 3, 8
N_TIED, T = 3, 4
# a requested call that a pass never reaches: an error of one of these kinds (SiteNeverRanError
# is a RuntimeError, DataValidationError a ValueError), never a silent no-op
MISSING_CALL = (ValueError, RuntimeError, IndexError, KeyError)


def metric(out, target=None):
    return out


@contextmanager
def edit_calls(module: nn.Module, fn: Callable[[torch.Tensor, int], torch.Tensor], which="all"):
    """A forward hook that replaces the output of call ``k`` of ``module`` by ``fn(output, k)``
    for ``k`` in ``which`` (``"all"``: every call). ``box["n"]`` counts the calls; reset it
    between runs with ``box["n"] = 0`` (each ``with`` starts at 0)."""
    box = {"n": 0}

    def hook(_mod, _args, out):
        k = box["n"]
        box["n"] += 1
        if which == "all" or k in which:
            return _with_first(out, fn(_first(out), k))
        return out

    handle = module.register_forward_hook(hook)
    try:
        yield box
    finally:
        handle.remove()


def per_call(module: nn.Module, run: Callable[[], object]) -> list[torch.Tensor]:
    """Every output of ``module`` during ``run()``, one entry per call, in call order."""
    with torch.no_grad(), watch(module) as seen:
        run()
    return seen


def zero_unit(u: int):
    return lambda t, k: set_cols(t, slice(u, u + 1), 0.0)


# ----------------------------------------------------------------------------------------------
# a weight-tied block applied N_TIED times


class Block(nn.Module):
    def __init__(self, d=D):
        super().__init__()
        self.fc = nn.Linear(d, d)
        self.act = nn.Tanh()

    def forward(self, h):
        return h + self.act(self.fc(h))


class Tied(nn.Module):
    """``block`` (one object, one set of weights) applied ``N_TIED`` times per forward."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(3, D)
        self.block = Block()
        self.head = nn.Linear(D, 1)

    def forward(self, x):
        h = self.embed(x)
        for _ in range(N_TIED):
            h = self.block(h)
        return self.head(h).squeeze(-1)


@pytest.fixture(scope="module")
def tied():
    torch.manual_seed(0)
    model = Tied().eval()
    g = torch.Generator().manual_seed(70)
    return SimpleNamespace(
        model=model,
        x=torch.randn(B, 3, generator=g),
        x2=torch.randn(B, 3, generator=g),
        ref=torch.randn(R, 3, generator=g),
    )


def hand(model, x, module, fn, which="all"):
    with torch.no_grad(), edit_calls(module, fn, which):
        return npy(model(x))


def test_tied_default_is_an_error_that_names_calls(tied):
    """calls='error' (the default) on a module that runs three times in one pass: every verb
    raises SiteCalledTwiceError, and the message names the fix (``calls=``)."""
    m, x = tied.model, tied.x
    with pytest.raises(SiteCalledTwiceError, match="calls="):
        sm.record(m, x, ["block.fc"])
    with pytest.raises(SiteCalledTwiceError, match="calls="):
        with sm.ablate(m, "block.fc.units[1]", method="zero"):
            m(x)
    with pytest.raises(SiteCalledTwiceError, match="calls="):
        with sm.patch(m, {"block.fc": torch.zeros(B, D)}):
            m(x)
    with pytest.raises(SiteCalledTwiceError, match="calls="):
        sm.ablation_sweep(m, x, ["block.fc.units[1]"], metric, method="zero")
    with pytest.raises(SiteCalledTwiceError, match="calls="):
        sm.patching_sweep(m, x, tied.x2, ["block.fc"], metric)
    with pytest.raises(SiteCalledTwiceError, match="calls="):
        sm.attribution_patching(m, x, tied.x2, ["block.fc"], metric)


def test_tied_record_all_calls(tied):
    """record(calls='all'): a ``call`` dim right after ``sample``, one entry per call, equal to
    the outputs a plain hook collects call by call."""
    seen = per_call(tied.model.block.fc, lambda: tied.model(tied.x))
    assert len(seen) == N_TIED
    ds = sm.record(tied.model, tied.x, ["block.fc"], calls="all")
    v = ds["block.fc"]
    assert v.dims[:2] == ("sample", "call"), v.dims
    assert list(v.coords["call"].values) == list(range(N_TIED))
    np.testing.assert_allclose(v.values, npy(torch.stack(seen, 1)), atol=ATOL)


def test_tied_record_a_list_an_index_and_last(tied):
    """calls=[0, 2]: a call dim with coordinate [0, 2]; calls=1 and calls='last': no call dim,
    the values of that call (hand hook)."""
    seen = per_call(tied.model.block.fc, lambda: tied.model(tied.x))
    ds = sm.record(tied.model, tied.x, ["block.fc"], calls=[0, 2])
    v = ds["block.fc"]
    assert v.dims[:2] == ("sample", "call"), v.dims
    assert list(v.coords["call"].values) == [0, 2]
    np.testing.assert_allclose(v.values, npy(torch.stack([seen[0], seen[2]], 1)), atol=ATOL)
    for calls, k in [(1, 1), ("last", N_TIED - 1)]:
        v = sm.record(tied.model, tied.x, ["block.fc"], calls=calls)["block.fc"]
        assert "call" not in v.dims, (calls, v.dims)
        np.testing.assert_allclose(v.values, npy(seen[k]), atol=ATOL)


def test_tied_recorder_all_calls(tied):
    """Recorder(calls='all').activations: the calls stacked on dim 1 (hand hook)."""
    seen = per_call(tied.model.block.fc, lambda: tied.model(tied.x))
    with torch.no_grad(), sm.Recorder(tied.model, ["block.fc"], calls="all") as rec:
        tied.model(tied.x)
    np.testing.assert_allclose(npy(rec.activations["block.fc"]), npy(torch.stack(seen, 1)), atol=ATOL)


def test_tied_repeat_is_the_deprecated_spelling(tied):
    """repeat= still works (deprecated): repeat='stack' records what calls='all' records."""
    seen = per_call(tied.model.block.fc, lambda: tied.model(tied.x))
    with pytest.warns(DeprecationWarning):
        ds = sm.record(tied.model, tied.x, ["block.fc"], repeat="stack")
    np.testing.assert_allclose(ds["block.fc"].values, npy(torch.stack(seen, 1)), atol=ATOL)


def test_tied_a_call_that_does_not_exist_is_an_error(tied):
    """calls=5 on a site that runs 3 times per pass: an error, not a silent no-op."""
    m, x = tied.model, tied.x
    with pytest.raises(MISSING_CALL):
        sm.record(m, x, ["block.fc"], calls=5)
    with pytest.raises(MISSING_CALL):
        with torch.no_grad(), sm.ablate(m, "block.fc.units[1]", method="zero", calls=5):
            m(x)
    with pytest.raises(MISSING_CALL):
        sm.ablation_sweep(m, x, ["block.fc.units[1]"], metric, method="zero", calls=5)


def test_tied_ablate_and_patch_refuse_last(tied):
    """sm.ablate / sm.patch cannot know which call is the last: ValueError naming calls=."""
    with pytest.raises(ValueError, match="calls="):
        with sm.ablate(tied.model, "block.fc.units[1]", method="zero", calls="last"):
            tied.model(tied.x)
    with pytest.raises(ValueError, match="calls="):
        with sm.patch(tied.model, {"block.fc": torch.zeros(B, D)}, calls="last"):
            tied.model(tied.x)


@pytest.mark.parametrize("calls", [0, 1, 2, [0, 2], "all"])
def test_tied_ablate_calls(tied, calls):
    """sm.ablate(calls=...) zeroes unit 1 at exactly those calls: a hook editing those calls."""
    which = "all" if calls == "all" else ([calls] if isinstance(calls, int) else calls)
    expect = hand(tied.model, tied.x, tied.model.block.fc, zero_unit(1), which)
    with torch.no_grad(), sm.ablate(tied.model, "block.fc.units[1]", method="zero", calls=calls):
        got = npy(tied.model(tied.x))
        again = npy(tied.model(tied.x))  # every top-level call is a pass of its own: counts restart
    np.testing.assert_allclose(got, expect, atol=ATOL)
    np.testing.assert_allclose(again, expect, atol=ATOL)
    if calls != "all":  # acting on every call would be told apart
        assert np.abs(hand(tied.model, tied.x, tied.model.block.fc, zero_unit(1)) - expect).max() > 1e-4


def test_tied_patch_one_call(tied):
    """sm.patch(calls=1) writes the value at call 1 only (hook replacing call 1's output)."""
    value = torch.randn(B, D, generator=torch.Generator().manual_seed(71))
    expect = hand(tied.model, tied.x, tied.model.block.fc, lambda t, k: value, [1])
    with torch.no_grad(), sm.patch(tied.model, {"block.fc": value}, calls=1):
        got = npy(tied.model(tied.x))
    np.testing.assert_allclose(got, expect, atol=ATOL)


def test_tied_mean_ablation_reference_inputs_per_call(tied):
    """Mean ablation with reference *inputs* on a repeated site, calls='all': the value at call
    c is the mean over reference rows of the reference run's call c (hand: record the
    reference per call, then replace per call)."""
    ref = per_call(tied.model.block.fc, lambda: tied.model(tied.ref))
    means = [r[:, 2].mean() for r in ref]
    assert (max(means) - min(means)).abs() > 1e-3  # a per-call mean is told apart from a pooled one
    expect = hand(tied.model, tied.x, tied.model.block.fc, lambda t, k: set_cols(t, slice(2, 3), means[k]))
    with torch.no_grad(), sm.ablate(tied.model, "block.fc.units[2]", method="mean", reference=tied.ref, calls="all"):
        got = npy(tied.model(tied.x))
    np.testing.assert_allclose(got, expect, atol=ATOL)


def test_tied_mean_ablation_reference_activations_used_at_every_call(tied):
    """A reference given as activations {site: tensor} shaped like one call (R, D) is used at
    every call: the mean of its rows replaces the whole output at calls 0, 1 and 2."""
    acts = torch.randn(R, D, generator=torch.Generator().manual_seed(72))
    mean = acts.mean(0)
    expect = hand(tied.model, tied.x, tied.model.block.fc, lambda t, k: mean.expand_as(t))
    with torch.no_grad(), sm.ablate(tied.model, "block.fc", method="mean", reference={"block.fc": acts}, calls="all"):
        got = npy(tied.model(tied.x))
    np.testing.assert_allclose(got, expect, atol=ATOL)


def test_tied_resample_one_reference_sample_drives_every_call(tied):
    """Resample with calls='all': one draw per pass; at every call c, sample i's activation is
    the reference's call-c activation of the same reference row j(i). Checked by watching the
    patched ``block.fc`` output (the input of ``block.act``) and matching it to the reference
    rows recorded per call by hand."""
    ref = per_call(tied.model.block.fc, lambda: tied.model(tied.ref))
    with (
        torch.no_grad(),
        sm.ablate(tied.model, "block.fc", method="resample", reference=tied.ref, calls="all", seed=3),
        watch(tied.model.block.act, "input") as seen,
    ):
        tied.model(tied.x)
    assert len(seen) == N_TIED
    drawn = []
    for c in range(N_TIED):
        rows = matching_rows(seen[c], ref[c])
        assert all(len(r) >= 1 for r in rows), (c, rows)
        drawn.append([r[0] for r in rows])
    assert drawn[0] == drawn[1] == drawn[2], drawn


def test_tied_resample_sweep_one_reference_row_at_every_call(tied):
    """ablation_sweep(method='resample', calls='all'): each sample's value is that of the run
    with unit 2 replaced, at every call c, by reference row j's call-c value, for one j
    (hand: every candidate j computed with hooks; a mix of rows across calls matches none)."""
    m = tied.model
    ref = per_call(m.block.fc, lambda: m(tied.ref))
    cands = np.stack(
        [hand(m, tied.x, m.block.fc, lambda t, k, j=j: set_cols(t, slice(2, 3), ref[k][j, 2])) for j in range(R)], 1
    )  # (B, R)
    res = sm.ablation_sweep(
        m, tied.x, ["block.fc.units[2]"], metric, method="resample", reference=tied.ref, calls="all", seed=5
    )
    got = res.ablated.sel(site="block.fc.units[2]").values
    for i, v in enumerate(got):
        assert np.abs(cands[i] - v).min() <= ATOL, (i, v, cands[i])


@pytest.mark.parametrize("calls", [1, "last", [0, 2]])
def test_tied_ablation_sweep_calls(tied, calls):
    """ablation_sweep(calls=...) zeroes unit 1 at those calls (hand hook); 'last' is the last
    call of the unablated run (call 2)."""
    which = calls if isinstance(calls, list) else [N_TIED - 1] if calls == "last" else [calls]
    expect = hand(tied.model, tied.x, tied.model.block.fc, zero_unit(1), which)
    res = sm.ablation_sweep(
        tied.model, tied.x, ["block.fc.units[1]", "block.fc.units[3]"], metric, method="zero", calls=calls
    )
    np.testing.assert_allclose(res.ablated.sel(site="block.fc.units[1]").values, expect, atol=ATOL)
    np.testing.assert_allclose(
        res.ablated.sel(site="block.fc.units[3]").values,
        hand(tied.model, tied.x, tied.model.block.fc, zero_unit(3), which),
        atol=ATOL,
    )
    np.testing.assert_allclose(res.baseline.values, npy(tied.model(tied.x).detach()), atol=ATOL)


def test_tied_ablation_sweep_by_call(tied):
    """by_call=True, calls='all': dims (site, call, sample), each call ablated alone."""
    sites = ["block.fc.units[1]", "block.fc.units[4]"]
    res = sm.ablation_sweep(tied.model, tied.x, sites, metric, method="zero", calls="all", by_call=True)
    assert res.ablated.dims == ("site", "call", "sample"), res.ablated.dims
    assert list(res.coords["call"].values) == list(range(N_TIED))
    for s, u in zip(sites, [1, 4]):
        for c in range(N_TIED):
            np.testing.assert_allclose(
                res.ablated.sel(site=s, call=c).values,
                hand(tied.model, tied.x, tied.model.block.fc, zero_unit(u), [c]),
                atol=ATOL,
            )


def test_tied_patching_sweep_calls(tied):
    """patching_sweep (denoising): calls=1 puts the clean run's call-1 activation into the
    corrupted run's call 1; calls='all' puts clean call c into corrupted call c for every c;
    by_call=True with calls=[0, 2]: dims (site, call, sample), each call patched alone."""
    m, clean, corr = tied.model, tied.x, tied.x2
    src = per_call(m.block.fc, lambda: m(clean))
    put = lambda t, k: src[k]  # noqa: E731
    one = sm.patching_sweep(m, clean, corr, ["block.fc"], metric, calls=1)
    np.testing.assert_allclose(one.patched.sel(site="block.fc").values, hand(m, corr, m.block.fc, put, [1]), atol=ATOL)
    every = sm.patching_sweep(m, clean, corr, ["block.fc"], metric, calls="all")
    np.testing.assert_allclose(every.patched.sel(site="block.fc").values, hand(m, corr, m.block.fc, put), atol=ATOL)
    by = sm.patching_sweep(m, clean, corr, ["block.fc"], metric, calls=[0, 2], by_call=True)
    assert by.patched.dims == ("site", "call", "sample"), by.patched.dims
    assert list(by.coords["call"].values) == [0, 2]
    for c in (0, 2):
        np.testing.assert_allclose(
            by.patched.sel(site="block.fc", call=c).values, hand(m, corr, m.block.fc, put, [c]), atol=ATOL
        )


def grads_per_call(model, module, x, which="all") -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Activations and d sum(metric) / d activation at the calls ``which`` of ``module`` (a leaf
    per call in ``which``; the other calls run as usual, so a gradient at one call alone is the
    total derivative, through the later calls of the module too)."""
    leaves = []

    def leaf(t, k):
        leaves.append(t.detach().clone().requires_grad_(True))
        return leaves[-1]

    with edit_calls(module, leaf, which), torch.enable_grad():
        model(x).sum().backward()
    return [a.detach() for a in leaves], [a.grad.detach() for a in leaves]


def test_tied_attribution_patching_calls(tied):
    """AtP (denoising) at a repeated site, gradients by autograd on the corrupted run.

    calls=1 (patch call 1 alone): grad . (clean_1 - corrupted_1) per sample, the gradient taken
    with only call 1 a leaf (the total derivative: the change at call 1 also reaches the metric
    through call 2 of the same module).

    calls='all' (patch every call at once, as patching_sweep(calls='all') does): the patched
    run overwrites every call, so the first-order estimate is the sum over calls of the
    *partial* derivatives, each call a leaf at once (the gradient at call c does not flow
    through the overwritten later calls). Summing the per-call total derivatives would count
    the paths through later calls twice."""
    m, clean, corr = tied.model, tied.x, tied.x2
    src = per_call(m.block.fc, lambda: m(clean))
    (base1,), (grad1,) = grads_per_call(m, m.block.fc, corr, [1])
    one = sm.attribution_patching(m, clean, corr, ["block.fc"], metric, calls=1)
    np.testing.assert_allclose(
        one.effect.sel(site="block.fc").values, npy(((src[1] - base1) * grad1).sum(1)), atol=ATOL
    )
    base, grads = grads_per_call(m, m.block.fc, corr)
    partial = sum(npy(((src[c] - base[c]) * grads[c]).sum(1)) for c in range(N_TIED))
    every = sm.attribution_patching(m, clean, corr, ["block.fc"], metric, calls="all")
    np.testing.assert_allclose(every.effect.sel(site="block.fc").values, partial, atol=ATOL)


def test_tied_attribution_patching_all_calls_tracks_exact_patching(tied):
    """For a small clean - corrupted difference (1% of the way), AtP with calls='all' is within
    5% of the exact effect of patching every call (hand hooks): a check of the estimator's
    definition that needs no gradient by hand."""
    m, corr = tied.model, tied.x2
    clean = corr + 0.01 * (tied.x - corr)
    src = per_call(m.block.fc, lambda: m(clean))
    exact = hand(m, corr, m.block.fc, lambda t, k: src[k]) - npy(m(corr).detach())
    got = sm.attribution_patching(m, clean, corr, ["block.fc"], metric, calls="all").effect.sel(site="block.fc").values
    np.testing.assert_allclose(got, exact, rtol=0.05, atol=2e-4)


# ----------------------------------------------------------------------------------------------
# one activation module shared by two blocks


class SharedBlock(nn.Module):
    def __init__(self, act: nn.Module):
        super().__init__()
        self.fc = nn.Linear(D, D)
        self.act = act

    def forward(self, h):
        return h + self.act(self.fc(h))


class SharedAct(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(3, D)
        act = nn.Tanh()
        self.blocks = nn.ModuleList([SharedBlock(act), SharedBlock(act)])
        self.head = nn.Linear(D, 1)

    def forward(self, x):
        h = self.embed(x)
        for b in self.blocks:
            h = b(h)
        return self.head(h).squeeze(-1)


@pytest.fixture(scope="module")
def shared_act():
    torch.manual_seed(1)
    model = SharedAct().eval()
    assert model.blocks[0].act is model.blocks[1].act
    g = torch.Generator().manual_seed(73)
    return SimpleNamespace(model=model, x=torch.randn(B, 3, generator=g))


def test_shared_activation_is_one_module_called_twice(shared_act):
    """``blocks.0.act`` and ``blocks.1.act`` are one object: default calls='error' raises;
    calls='all' at either path records both calls (hook on the object)."""
    m, x = shared_act.model, shared_act.x
    seen = per_call(m.blocks[0].act, lambda: m(x))
    assert len(seen) == 2
    with pytest.raises(SiteCalledTwiceError, match="calls="):
        sm.record(m, x, ["blocks.1.act"])
    for path in ("blocks.0.act", "blocks.1.act"):
        v = sm.record(m, x, [path], calls="all")[path]
        assert v.dims[:2] == ("sample", "call"), v.dims
        np.testing.assert_allclose(v.values, npy(torch.stack(seen, 1)), atol=ATOL)


@pytest.mark.parametrize("k", [0, 1])
def test_shared_activation_ablate_one_call(shared_act, k):
    """calls=k at ``blocks.1.act`` acts on call k of the shared object (k=0: inside block 0):
    hand hook on the object editing call k."""
    m, x = shared_act.model, shared_act.x
    expect = hand(m, x, m.blocks[0].act, zero_unit(5), [k])
    with torch.no_grad(), sm.ablate(m, "blocks.1.act.units[5]", method="zero", calls=k):
        got = npy(m(x))
    np.testing.assert_allclose(got, expect, atol=ATOL)
    res = sm.ablation_sweep(m, x, ["blocks.1.act.units[5]"], metric, method="zero", calls=k)
    np.testing.assert_allclose(res.ablated.sel(site="blocks.1.act.units[5]").values, expect, atol=ATOL)


# ----------------------------------------------------------------------------------------------
# an autoregressive rollout: a one-step model called T times by a loop


class Step(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(D, D)
        self.act = nn.Tanh()

    def forward(self, h):
        return h + 0.5 * self.act(self.fc(h))


@pytest.fixture(scope="module")
def rollout():
    torch.manual_seed(2)
    model = Step().eval()
    g = torch.Generator().manual_seed(74)
    w = torch.randn(D, generator=g)

    def run(model, batch):  # forward=: one forward pass is the whole rollout
        h = batch
        for _ in range(T):
            h = model(h)
        return h @ w

    return SimpleNamespace(
        model=model,
        run=run,
        x=torch.randn(B, D, generator=g),
        x2=torch.randn(B, D, generator=g),
        ref=torch.randn(R, D, generator=g),
    )


def hand_rollout(r, x, fn, which="all"):
    with torch.no_grad(), edit_calls(r.model.fc, fn, which):
        return npy(r.run(r.model, x))


def test_rollout_record_all_calls(rollout):
    """record(forward=rollout, calls='all'): T calls of ``fc`` per pass (hand hook)."""
    r = rollout
    seen = per_call(r.model.fc, lambda: r.run(r.model, r.x))
    assert len(seen) == T
    v = sm.record(r.model, r.x, ["fc"], forward=r.run, calls="all")["fc"]
    assert v.dims[:2] == ("sample", "call") and v.sizes["call"] == T, v.dims
    np.testing.assert_allclose(v.values, npy(torch.stack(seen, 1)), atol=ATOL)
    with pytest.raises(SiteCalledTwiceError, match="calls="):
        sm.record(r.model, r.x, ["fc"], forward=r.run)


@pytest.mark.parametrize("calls", [2, "last"])
def test_rollout_ablation_sweep_one_step(rollout, calls):
    """ablation_sweep(forward=rollout, calls=k): zero unit 1 at step k of the rollout only;
    'last' is step T - 1 (hand hook)."""
    r = rollout
    k = T - 1 if calls == "last" else calls
    res = sm.ablation_sweep(
        r.model, r.x, ["fc.units[1]", "fc.units[6]"], metric, method="zero", forward=r.run, calls=calls
    )
    np.testing.assert_allclose(
        res.ablated.sel(site="fc.units[1]").values, hand_rollout(r, r.x, zero_unit(1), [k]), atol=ATOL
    )
    np.testing.assert_allclose(
        res.ablated.sel(site="fc.units[6]").values, hand_rollout(r, r.x, zero_unit(6), [k]), atol=ATOL
    )


def test_rollout_patching_sweep_all_steps_and_by_call(rollout):
    """patching_sweep(forward=rollout): calls='all' patches the clean step-c activation into
    step c of the corrupted rollout for every c; by_call=True patches each step alone."""
    r = rollout
    src = per_call(r.model.fc, lambda: r.run(r.model, r.x))
    put = lambda t, k: src[k]  # noqa: E731
    res = sm.patching_sweep(r.model, r.x, r.x2, ["fc"], metric, forward=r.run, calls="all")
    np.testing.assert_allclose(res.patched.sel(site="fc").values, hand_rollout(r, r.x2, put), atol=ATOL)
    by = sm.patching_sweep(r.model, r.x, r.x2, ["fc"], metric, forward=r.run, calls="all", by_call=True)
    assert by.patched.dims == ("site", "call", "sample"), by.patched.dims
    for c in range(T):
        np.testing.assert_allclose(by.patched.sel(site="fc", call=c).values, hand_rollout(r, r.x2, put, [c]), atol=ATOL)


def test_rollout_own_loop_inside_forward_pass(rollout):
    """``with sm.ablate(calls=2), sm.forward_pass():`` around the user's own loop: step 2 of the
    rollout only (hand hook counting over the whole loop)."""
    r = rollout
    expect = hand_rollout(r, r.x, zero_unit(3), [2])
    with torch.no_grad(), sm.ablate(r.model, "fc.units[3]", method="zero", calls=2), sm.forward_pass():
        got = npy(r.run(r.model, r.x))
    np.testing.assert_allclose(got, expect, atol=ATOL)


def test_rollout_own_loop_without_forward_pass(rollout):
    """Without sm.forward_pass() every top-level model call is a pass of its own: calls=0 then
    acts at every step (hook editing every call), and calls=1 is never reached: an error."""
    r = rollout
    expect = hand_rollout(r, r.x, zero_unit(3))
    with torch.no_grad(), sm.ablate(r.model, "fc.units[3]", method="zero", calls=0):
        got = npy(r.run(r.model, r.x))
    np.testing.assert_allclose(got, expect, atol=ATOL)
    with pytest.raises(MISSING_CALL):
        with torch.no_grad(), sm.ablate(r.model, "fc.units[3]", method="zero", calls=1):
            r.run(r.model, r.x)


def test_rollout_mean_ablation_reference_per_step(rollout):
    """Mean ablation in a rollout with reference inputs, calls='all' (forward=rollout): at step
    c, the mean of the reference rollout's step-c activations (hand: reference recorded per
    step, replaced per step)."""
    r = rollout
    ref = per_call(r.model.fc, lambda: r.run(r.model, r.ref))
    means = [a[:, 4].mean() for a in ref]
    expect = hand_rollout(r, r.x, lambda t, k: set_cols(t, slice(4, 5), means[k]))
    with (
        torch.no_grad(),
        sm.ablate(r.model, "fc.units[4]", method="mean", reference=r.ref, forward=r.run, calls="all"),
        sm.forward_pass(),
    ):
        got = npy(r.run(r.model, r.x))
    np.testing.assert_allclose(got, expect, atol=ATOL)
    res = sm.ablation_sweep(
        r.model, r.x, ["fc.units[4]"], metric, method="mean", reference=r.ref, forward=r.run, calls="all"
    )
    np.testing.assert_allclose(res.ablated.sel(site="fc.units[4]").values, expect, atol=ATOL)


# ----------------------------------------------------------------------------------------------
# a dataclass input with a batched field and unbatched fields

H, W = 5, 6  # neither is B (4), nor a slice of it


@dataclass
class Grid:
    x: torch.Tensor  # (B, H, W): batched
    lat: torch.Tensor  # (H,): unbatched
    lon: torch.Tensor  # (W,): unbatched
    static: torch.Tensor  # (H, W): unbatched (e.g. orography)


class GridModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Linear(4, D)
        self.mid = nn.Linear(D, D)
        self.out = nn.Linear(D, 1)

    def forward(self, g: Grid):
        assert isinstance(g, Grid), type(g)
        assert g.lat.shape == (H,) and g.lon.shape == (W,) and g.static.shape == (H, W), (
            g.lat.shape,
            g.lon.shape,
            g.static.shape,
        )  # unbatched fields are never sliced nor tiled
        n = g.x.shape[0]
        feats = torch.stack(
            [
                g.x,
                g.static.expand(n, H, W),
                torch.cos(g.lat)[:, None].expand(n, H, W),
                torch.sin(g.lon)[None, :].expand(n, H, W),
            ],
            -1,
        )
        h = torch.tanh(self.mid(torch.tanh(self.enc(feats))))
        wts = torch.cos(g.lat)[:, None].expand(H, W)
        return (self.out(h).squeeze(-1) * wts).sum((1, 2)) / wts.sum()


@pytest.fixture(scope="module")
def grid():
    torch.manual_seed(3)
    model = GridModel().eval()
    g = torch.Generator().manual_seed(75)
    lat, lon, static = torch.linspace(-1.2, 1.2, H), torch.linspace(0, 6.0, W), torch.randn(H, W, generator=g)

    def draw(n):
        return Grid(torch.randn(n, H, W, generator=g), lat, lon, static)

    return SimpleNamespace(model=model, clean=draw(B), corrupted=draw(B), reference=draw(R))


def test_grid_record_keeps_unbatched_fields(grid):
    """record with batch_size=3 (slices of 3 and 1 rows): lat/lon/static kept whole (the model
    asserts their shapes); the recording equals the hand hook on the whole batch."""
    seen = per_call(grid.model.mid, lambda: grid.model(grid.clean))[0]
    ds = sm.record(grid.model, grid.clean, ["mid"], batch_size=3)
    np.testing.assert_allclose(ds["mid"].values, npy(seen), atol=ATOL)


def test_grid_ablation_sweep_mean(grid):
    """Mean ablation of ``mid.units[2]`` with a reference Grid (3 rows, same unbatched fields):
    the mean over reference rows at each grid point (the mean is per position; hand hook);
    batch_size=3 slices the batch."""
    ref = per_call(grid.model.mid, lambda: grid.model(grid.reference))[0]  # (R, H, W, D)
    mean = ref[..., 2:3].mean(0)  # (H, W, 1)
    with torch.no_grad(), edit_calls(grid.model.mid, lambda t, k: set_cols(t, slice(2, 3), mean)):
        expect = npy(grid.model(grid.clean))
    res = sm.ablation_sweep(
        grid.model,
        grid.clean,
        ["mid.units[2]", "enc.units[0]"],
        metric,
        method="mean",
        reference=grid.reference,
        batch_size=3,
    )
    np.testing.assert_allclose(res.ablated.sel(site="mid.units[2]").values, expect, atol=ATOL)
    np.testing.assert_allclose(res.baseline.values, npy(grid.model(grid.clean).detach()), atol=ATOL)


def test_grid_patching_sweep(grid):
    """patching_sweep at ``mid`` and ``enc`` with batch_size=3 and several sites per tiled
    pass: the unbatched fields are not tiled; equals hand hooks replacing the corrupted
    activation by the clean one."""
    m = grid.model
    res = sm.patching_sweep(m, grid.clean, grid.corrupted, ["mid", "enc"], metric, batch_size=3)
    for s in ("mid", "enc"):
        mod = m.get_submodule(s)
        src = per_call(mod, lambda: m(grid.clean))[0]
        with torch.no_grad(), edit_calls(mod, lambda t, k, src=src: src):
            expect = npy(m(grid.corrupted))
        np.testing.assert_allclose(res.patched.sel(site=s).values, expect, atol=ATOL)


# ----------------------------------------------------------------------------------------------
# a complex activation


class Mix(nn.Module):
    """Complex per-frequency multiplication of a spectrum (a complex output)."""

    def __init__(self, f):
        super().__init__()
        self.wr, self.wi = nn.Parameter(torch.randn(f)), nn.Parameter(torch.randn(f))

    def forward(self, z):
        return z * torch.complex(self.wr, self.wi)


class Spectral(nn.Module):
    def __init__(self, n=12):
        super().__init__()
        self.n = n
        self.inp = nn.Linear(n, n)
        self.mix = Mix(n // 2 + 1)
        self.out = nn.Linear(n, 1)

    def forward(self, x):
        z = torch.fft.rfft(self.inp(x), dim=-1)
        y = torch.fft.irfft(self.mix(z), n=self.n, dim=-1)
        return self.out(torch.tanh(y)).squeeze(-1)


def test_complex_site_attribution_patching_is_the_directional_derivative():
    """AtP at a complex site: the estimate is the derivative of the metric along
    delta = clean - corrupted at the corrupted activation (Re(sum(conj(grad) * delta))); truth:
    autograd with respect to a real step eps (one per sample) in a + eps * delta."""
    torch.manual_seed(4)
    m = Spectral().eval()
    g = torch.Generator().manual_seed(76)
    clean, corr = torch.randn(B, 12, generator=g), torch.randn(B, 12, generator=g)
    a_clean = per_call(m.mix, lambda: m(clean))[0]
    a_corr = per_call(m.mix, lambda: m(corr))[0]
    assert a_clean.is_complex()
    eps = torch.zeros(B, 1, requires_grad=True)
    with edit_calls(m.mix, lambda t, k: a_corr + eps * (a_clean - a_corr)), torch.enable_grad():
        m(corr).sum().backward()
    expect = npy(eps.grad[:, 0])
    res = sm.attribution_patching(m, clean, corr, ["mix"], metric)
    np.testing.assert_allclose(res.effect.sel(site="mix").values, expect, atol=ATOL)

"""What a verb assumes about a model, on tiny models written here that have the pattern: each
verb right (against a hand loop of plain torch hooks, or a hand computation) or refused with a
fix that works.

- a model writing in place into a patched site's output (``h += x``, a residual);
- a float64 model, and ``torch.set_default_dtype(torch.float64)``;
- a complex output (a spectral operator);
- forces computed with ``torch.autograd.grad`` inside forward (an interatomic potential);
- a batch class with ``to_data_list`` that is not a PyTorch Geometric batch;
- ``record()``'s own output given back as the reference of mean ablation, on a channels-first
  site whose channel, y and x have one size;
- a site called with a changing shape within one pass (a decoder's growing sequence).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from torch import nn

import scimech
from scimech.causal import metrics
from scimech.causal.intervene import ablate, ablation_sweep, patch, patching_sweep
from scimech.errors import DataValidationError, DimensionError

# float32 models of two layers: scimech's tiled passes round like the hand loop to ~1e-7
# relative on values of order 1; 1e-5 is far above that and far below any effect (~0.1-1)
ATOL = 1e-5


def _hooked(module: nn.Module, fn):
    """A plain forward hook replacing ``module``'s output by ``fn(output, call)`` (hand truth)."""
    calls = [0]

    def hook(_m, _a, out):
        new = fn(out, calls[0])
        calls[0] += 1
        return new

    return module.register_forward_hook(hook)


def _sum(out, target=None):
    return out.reshape(out.shape[0], -1).sum(-1)


# -- in place into a patched site's output ------------------------------------------------------


class InPlaceResidual(nn.Module):
    """``h = a(x); h += x``: the model adds its residual into ``a``'s output in place."""

    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(4, 4), nn.Linear(4, 4)

    def forward(self, x):
        h = self.a(x)
        h += x
        return self.b(torch.relu(h))


def test_patch_hands_an_in_place_model_a_copy_and_both_passes_are_right():
    torch.manual_seed(0)
    model, x = InPlaceResidual().eval(), torch.randn(6, 4)
    values = torch.randn(6, 4)
    kept = values.clone()
    with torch.no_grad():
        truth = model.b(torch.relu(values + x))  # by hand: a's output set, then the residual added
        with patch(model, {"a": values}):
            one, two = model(x), model(x)
    torch.testing.assert_close(values, kept, rtol=0, atol=0)  # the values given are not changed
    torch.testing.assert_close(one, truth, rtol=0, atol=ATOL)
    torch.testing.assert_close(two, truth, rtol=0, atol=ATOL)


def test_the_profile_shows_which_site_the_model_writes_into_in_place():
    torch.manual_seed(0)
    table = scimech.profile(InPlaceResidual(), torch.randn(6, 4), ["a", "b"])
    assert bool(table.loc["a", "in_place"]) and not bool(table.loc["b", "in_place"])  # h += x writes into a's


def test_patching_sweep_of_an_in_place_site_matches_the_hand_loop():
    torch.manual_seed(0)
    model, clean, corrupted = InPlaceResidual().eval(), torch.randn(6, 4), torch.randn(6, 4)
    with torch.no_grad():
        truth = _sum(model.b(torch.relu(model.a(clean) + corrupted)))  # clean a-output, corrupted residual
    got = patching_sweep(model, clean, corrupted, ["a", "b"], metric=_sum)
    np.testing.assert_allclose(got.patched.sel(site="a").values, truth.numpy(), atol=ATOL)


# -- float64 --------------------------------------------------------------------------------------


def _two_layer(dtype):
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1)).to(dtype).eval()


def test_a_float64_model_keeps_its_metric_in_float64():
    model = _two_layer(torch.float64)
    clean = torch.randn(5, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    corrupted = clean + 1e-4  # a small effect, which float32 would round to ~1e-3 of itself
    with torch.no_grad():
        base = _sum(model(corrupted))
        src = model[1](model[0](clean))
        h = _hooked(model[1], lambda out, c: src)
        truth = _sum(model(corrupted)) - base
        h.remove()
    got = patching_sweep(model, clean, corrupted, ["1"], metric=_sum)
    assert got.effect.dtype == np.float64
    # float64 end to end: the hand loop and the sweep do the same operations (~1e-16 relative)
    np.testing.assert_allclose(got.effect.sel(site="1").values, truth.numpy(), rtol=1e-9, atol=1e-15)


def test_sweeps_run_under_a_float64_default_dtype():
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        model = _two_layer(torch.float64)
        x = torch.randn(5, 4, generator=torch.Generator().manual_seed(2))
        with torch.no_grad():
            base = _sum(model(x))
            h = _hooked(model[1], lambda out, c: torch.zeros_like(out))
            truth = _sum(model(x)) - base
            h.remove()
        got = ablation_sweep(model, x, ["1"], metric=_sum, method="zero")
        np.testing.assert_allclose(got.effect.sel(site="1").values, truth.numpy(), rtol=1e-9, atol=1e-15)
    finally:
        torch.set_default_dtype(previous)


# -- a complex output -----------------------------------------------------------------------------


class Spectral(nn.Module):
    """A linear layer, then its Fourier coefficients along the features: a complex output."""

    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(8, 8), nn.Linear(8, 8)

    def forward(self, x):
        return torch.fft.rfft(self.b(torch.tanh(self.a(x))), dim=-1)


def test_a_complex_output_keeps_its_imaginary_part_in_the_sweep():
    torch.manual_seed(0)
    model, clean, corrupted = Spectral().eval(), torch.randn(5, 8), torch.randn(5, 8)
    with torch.no_grad():
        base = model(corrupted).mean(-1)
        src = model.b(torch.tanh(model.a(clean)))
        h = _hooked(model.b, lambda out, c: src)
        truth = model(corrupted).mean(-1) - base
        h.remove()
    assert truth.imag.abs().max() > 1e-2  # the effect has an imaginary part to lose
    got = patching_sweep(model, clean, corrupted, ["b"], metric=metrics.output())
    np.testing.assert_allclose(got.effect.sel(site="b").values, truth.numpy(), atol=ATOL)


def test_attribution_patching_refuses_a_complex_metric_and_its_fix_is_exact():
    torch.manual_seed(0)
    model, clean, corrupted = Spectral().eval(), torch.randn(5, 8), torch.randn(5, 8)
    with pytest.raises(DataValidationError, match=r"complex.*part='real'"):
        scimech.attribution_patching(model, clean, corrupted, ["b"], metrics.output())
    # the real part of the mean Fourier coefficient is linear in b's output: first order is exact
    got = scimech.attribution_patching(model, clean, corrupted, ["b"], metrics.output(part="real"))
    with torch.no_grad():
        base = model(corrupted).mean(-1).real
        src = model.b(torch.tanh(model.a(clean)))
        h = _hooked(model.b, lambda out, c: src)
        truth = model(corrupted).mean(-1).real - base
        h.remove()
    np.testing.assert_allclose(got.effect.sel(site="b").values, truth.numpy(), atol=ATOL)


# -- forces by autograd inside forward ------------------------------------------------------------


class Potential(nn.Module):
    """An energy of each sample's coordinates; the output is the force, minus its gradient."""

    def __init__(self, create_graph: bool = True):
        super().__init__()
        self.embed, self.act, self.out = nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 1)
        self.create_graph = create_graph

    def forward(self, pos):
        pos = pos.detach().requires_grad_(True)
        energy = self.out(self.act(self.embed(pos))).sum()
        return -torch.autograd.grad(energy, pos, create_graph=self.create_graph)[0]


def test_verbs_run_a_forward_that_takes_gradients_under_enable_grad():
    torch.manual_seed(0)
    model, pos = Potential().eval(), torch.randn(6, 3)
    ds = scimech.record(model, pos, ["act"])
    with torch.no_grad():
        hand = model.act(model.embed(pos))
    np.testing.assert_allclose(ds["act"].values, hand.numpy(), atol=ATOL)
    forces = model(pos).detach()
    h = _hooked(model.act, lambda out, c: out * 0.5)  # by hand, a plain hook (grad enabled)
    truth = _sum(model(pos).detach()) - _sum(forces)
    h.remove()
    got = ablation_sweep(model, pos, ["act", "embed"], metric=_sum, method="scale", factor=0.5)
    np.testing.assert_allclose(got.effect.sel(site="act").values, truth.numpy(), atol=ATOL)
    assert scimech.profile(model, pos, ["act"]).loc["act", "needs_grad"]


def test_attribution_patching_of_forces_without_a_graph_names_create_graph():
    torch.manual_seed(0)
    model, clean, corrupted = Potential(create_graph=False).eval(), torch.randn(6, 3), torch.randn(6, 3)
    with pytest.raises(DataValidationError, match="create_graph=True"):
        scimech.attribution_patching(model, clean, corrupted, ["act"], _sum)
    model.create_graph = True  # the fix it names
    got = scimech.attribution_patching(model, clean, corrupted, ["embed"], _sum)
    # by hand: the gradient of the summed forces with respect to a zero added to embed's output
    pos = corrupted.clone().requires_grad_(True)
    a = model.embed(pos)
    z = torch.zeros_like(a, requires_grad=True)
    forces = -torch.autograd.grad(model.out(model.act(a + z)).sum(), pos, create_graph=True)[0]
    g = torch.autograd.grad(forces.sum(), z)[0]
    truth = (g * (model.embed(clean) - a)).sum(-1).detach()
    np.testing.assert_allclose(got.effect.sel(site="embed").values, truth.numpy(), atol=ATOL)


# -- a batch class with to_data_list that is not PyG's --------------------------------------------


@dataclasses.dataclass
class AtomsBatch:
    """A library's own batch (as MACE's): ``to_data_list``, ``num_graphs``, ``from_data_list``."""

    x: torch.Tensor
    num_graphs: int = 0

    def to_data_list(self):
        return [AtomsBatch(r[None], 1) for r in self.x]

    @classmethod
    def from_data_list(cls, items):
        return cls(torch.cat([i.x for i in items]), len(items))


class OnAtoms(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(4, 4), nn.Linear(4, 2)

    def forward(self, batch):
        return self.b(torch.relu(self.a(batch.x)))


def test_a_batch_with_to_data_list_that_is_not_pyg_is_cut_as_a_dataclass():
    torch.manual_seed(0)
    model, x = OnAtoms().eval(), torch.randn(6, 4)
    batch = AtomsBatch(x, 6)
    with torch.no_grad():
        base = _sum(model(batch))
        h = _hooked(model.a, lambda out, c: torch.zeros_like(out))
        truth = _sum(model(batch)) - base
        h.remove()
    got = ablation_sweep(model, batch, ["a", "b"], metric=_sum, method="zero", batch_size=4)
    np.testing.assert_allclose(got.effect.sel(site="a").values, truth.numpy(), atol=ATOL)


# -- record() to reference, channels first with C = y = x -----------------------------------------


class Conv(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv, self.head = nn.Conv2d(4, 4, 3, padding=1), nn.Conv2d(4, 1, 1)

    def forward(self, x):
        return self.head(torch.relu(self.conv(x)))


@pytest.mark.parametrize("given", ["dataset", "dataarray"])
def test_record_output_is_a_mean_ablation_reference_in_its_own_layout(given):
    torch.manual_seed(0)
    model, x, ref = Conv().eval(), torch.randn(3, 4, 4, 4), torch.randn(10, 4, 4, 4)
    ds = scimech.record(model, ref, ["conv"])
    reference = ds if given == "dataset" else {"conv": ds["conv"]}
    with torch.no_grad():
        mean = model.conv(ref).mean(0, keepdim=True)  # channels first, as the model has it
        h = _hooked(model.conv, lambda out, c: mean.expand_as(out))
        truth = model(x)
        h.remove()
        with ablate(model, "conv", method="mean", reference=reference):
            got = model(x)
    torch.testing.assert_close(got, truth, rtol=0, atol=ATOL)


def test_a_plain_tensor_whose_layout_could_be_either_order_is_refused_naming_the_dataarray():
    torch.manual_seed(0)
    model, x, ref = Conv().eval(), torch.randn(3, 4, 4, 4), torch.randn(10, 4, 4, 4)
    ds = scimech.record(model, ref, ["conv"])
    with (
        pytest.raises(DataValidationError, match=r"reference=ds"),
        torch.no_grad(),
        ablate(model, "conv", method="mean", reference={"conv": torch.from_numpy(ds["conv"].values)}),
    ):
        model(x)


# -- calls of changing shape ----------------------------------------------------------------------


class Decoder(nn.Module):
    """Three steps of a growing sequence: ``step`` sees 1, 2 then 3 positions."""

    def __init__(self):
        super().__init__()
        self.step = nn.Linear(4, 4)

    def forward(self, x):
        seq = x[:, None]
        for _ in range(3):
            h = self.step(seq)
            seq = torch.cat([seq, torch.tanh(h[:, -1:])], 1)
        return seq


def test_calls_of_changing_shape_are_patched_call_by_call():
    torch.manual_seed(0)
    model, clean, corrupted = Decoder().eval(), torch.randn(5, 4), torch.randn(5, 4)
    with torch.no_grad():
        src = []
        h = model.step.register_forward_hook(lambda m, a, out: src.append(out.clone()))
        model(clean)
        h.remove()
        base = _sum(model(corrupted))
        h = _hooked(model.step, lambda out, c: src[c])
        truth = _sum(model(corrupted))
        h.remove()
    got = patching_sweep(model, clean, corrupted, ["step"], metric=_sum, calls="all")
    np.testing.assert_allclose(got.patched.sel(site="step").values, truth.numpy(), atol=ATOL)
    assert not np.allclose(truth.numpy(), base.numpy())


def test_recording_calls_of_changing_shape_names_the_selection_that_works():
    torch.manual_seed(0)
    model, x = Decoder().eval(), torch.randn(5, 4)
    with pytest.raises(DimensionError, match=r"different shapes.*calls='last'") as err:
        scimech.record(model, x, ["step"], calls="all")
    assert "calls=" in str(err.value)
    ds = scimech.record(model, x, ["step"], calls="last")  # a fix it names
    with torch.no_grad():
        seen = []
        h = model.step.register_forward_hook(lambda m, a, out: seen.append(out.clone()))
        model(x)
        h.remove()
    np.testing.assert_allclose(ds["step"].values, seen[-1].numpy(), atol=ATOL)


class Adaptive(nn.Module):
    """A solver whose number of steps depends on the input: 2 steps, or 3 where the batch's
    inputs are large (an adaptive step control shared by the batch)."""

    def __init__(self):
        super().__init__()
        self.step = nn.Linear(4, 4)

    def forward(self, x):
        h = x
        for _ in range(3 if float(x.abs().mean()) > 1.0 else 2):
            h = h + 0.5 * torch.tanh(self.step(h))
        return h


def test_a_patched_run_with_more_calls_than_the_source_names_the_calls_both_make():
    torch.manual_seed(0)
    model = Adaptive().eval()
    clean, corrupted = 0.1 * torch.randn(4, 4), 3.0 * torch.randn(4, 4)  # 2 steps, 3 steps
    with pytest.raises(DataValidationError, match=r"calls=\[0, 1\]"):
        patching_sweep(model, clean, corrupted, ["step"], metric=_sum, calls="all")
    got = patching_sweep(model, clean, corrupted, ["step"], metric=_sum, calls=[0, 1])  # the fix it names
    with torch.no_grad():
        src = []
        h = model.step.register_forward_hook(lambda m, a, out: src.append(out.clone()))
        model(clean)
        h.remove()
        h = _hooked(model.step, lambda out, c: src[c] if c < 2 else out)
        truth = _sum(model(corrupted))
        h.remove()
    np.testing.assert_allclose(got.patched.sel(site="step").values, truth.numpy(), atol=ATOL)


# -- irreps: units[...] by whole irreps -----------------------------------------------------------


class Equivariant(nn.Module):
    """A layer whose output is ``2x0e + 1x1o`` (two scalars, then one vector), as e3nn declares it."""

    irreps_out = "2x0e+1x1o"

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 5)

    def forward(self, x):
        return self.lin(x)


class OnIrreps(nn.Module):
    def __init__(self):
        super().__init__()
        self.eq = Equivariant()

    def forward(self, x):
        return self.eq(x).pow(2).sum(-1, keepdim=True)


def test_units_of_an_irreps_tensor_are_whole_irreps_or_refused():
    torch.manual_seed(0)
    model, x = OnIrreps().eval(), torch.randn(4, 3)
    with pytest.raises(DimensionError, match=r"units\[2,3,4\]"):
        ablation_sweep(model, x, ["eq.units[2]"], metric=_sum, method="zero")  # one component of the vector
    got = ablation_sweep(model, x, ["eq.units[2,3,4]"], metric=_sum, method="zero")  # the whole vector
    with torch.no_grad():
        out = model.eq(x)
        truth = out[:, :2].pow(2).sum(-1) - out.pow(2).sum(-1)  # by hand: the vector's norm removed
    np.testing.assert_allclose(got.effect.sel(site="eq.units[2,3,4]").values, truth.numpy(), atol=ATOL)


# -- rows declared packed sample by sample: checked on the data -----------------------------------


class Experts(nn.Module):
    """Tokens of every sample routed to two experts: the rows are sorted by expert across the
    batch (a mixture of experts), so row r of the expert's input is not sample r // tokens's."""

    def __init__(self, sort: bool = True):
        super().__init__()
        self.router, self.expert = nn.Linear(4, 2), nn.Linear(4, 4)
        self.sort = sort

    def forward(self, x):  # x: (B, N, 4)
        rows = x.reshape(-1, x.shape[-1])  # (B*N, 4), sample by sample
        order = torch.argsort(self.router(rows).argmax(-1), stable=True) if self.sort else torch.arange(len(rows))
        out = torch.empty_like(rows)
        out[order] = self.expert(rows[order])  # the expert sees the rows sorted by expert
        return out.reshape(x.shape)


def test_rows_declared_packed_sample_by_sample_are_checked_on_the_data():
    torch.manual_seed(0)
    x = torch.randn(6, 4, 4)
    axes = {"expert": "batch*window feature"}  # 24 rows = 6 samples x 4 tokens, as the hint offers
    with pytest.raises(DimensionError, match="not sample by sample"):
        scimech.record(Experts().eval(), x, ["expert"], axes=axes)
    model = Experts(sort=False).eval()  # rows left in sample order: the declared layout holds
    ds = scimech.record(model, x, ["expert"], axes=axes)
    with torch.no_grad():
        hand = model.expert(x.reshape(-1, 4)).reshape(6, 4, 4)
    np.testing.assert_allclose(ds["expert"].values, hand.numpy(), atol=ATOL)

"""A model whose output on the same input changes between passes (state kept across calls):
every sweep's effect would include that drift, so the sweeps refuse it, naming forward=, and
give the hand-computed effects once forward= resets the state."""

import pytest
import torch
from torch import nn

from scimech.causal.intervene import ablation_sweep, patching_sweep
from scimech.errors import DataValidationError


class CountingModel(nn.Module):
    """Adds ``step`` x the number of calls so far to its output (a stand-in for a cache or a
    running normaliser updated in eval mode)."""

    def __init__(self, step: float = 0.1):
        super().__init__()
        self.a, self.b = nn.Linear(4, 4), nn.Linear(4, 4)
        self.n, self.step = 0, step

    def forward(self, x):
        self.n += 1
        return self.b(torch.relu(self.a(x))) + self.step * self.n


def _metric(out, target):
    return out.float().sum(-1)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_a_drift_of_one_per_call_is_refused_by_every_verb_in_any_precision(dtype):
    """A bfloat16 model drifting +1 per call passed both sweeps with an 'effect' that was pure
    drift (about 2.5), where ablate and attribution patching refused it: one check now (the
    model profile), with the tolerance of the dtype."""
    from scimech import ablate, attribution_patching

    torch.manual_seed(0)
    model = CountingModel(step=1.0).to(dtype).eval()
    x, corrupted = torch.randn(8, 4, dtype=dtype), torch.randn(8, 4, dtype=dtype)
    for run in (
        lambda: patching_sweep(model, x, corrupted, ["a"], metric=_metric),
        lambda: ablation_sweep(model, x, ["a", "b"], metric=_metric, method="zero"),
        lambda: attribution_patching(model, x, corrupted, ["a"], _metric),
    ):
        with pytest.raises(DataValidationError, match="second forward pass.*forward="):
            run()
    with (
        pytest.raises(DataValidationError, match="second forward pass.*forward="),
        ablate(model, "a", method="mean", reference=x),
    ):
        pass


def _resetting(model, x):
    model.n = 0
    return model(x)


@pytest.fixture
def model_and_inputs():
    torch.manual_seed(0)
    return CountingModel(), torch.randn(8, 4), torch.randn(8, 4)


@pytest.mark.parametrize("sites", [["a"], ["a", "b"]])
def test_sweeps_refuse_a_model_whose_unchanged_output_drifts_and_name_forward(model_and_inputs, sites):
    model, x, corrupted = model_and_inputs
    with pytest.raises(DataValidationError, match="second forward pass.*forward="):
        ablation_sweep(model, x, sites, metric=_metric, method="zero")
    with pytest.raises(DataValidationError, match="second forward pass.*forward="):
        patching_sweep(model, x, corrupted, sites, metric=_metric)


def test_with_a_resetting_forward_the_sweeps_give_the_hand_computed_effects(model_and_inputs):
    model, x, corrupted = model_and_inputs
    with torch.no_grad():  # by hand: the model's layers called directly, with the state reset (+0.1)
        clean = model.b(torch.relu(model.a(x))) + 0.1
        zero_a = model.b(torch.relu(torch.zeros_like(model.a(x)))) + 0.1
        zero_b = torch.zeros_like(clean) + 0.1
        patched_a = model.b(torch.relu(model.a(corrupted))) + 0.1
    sweep = ablation_sweep(model, x, ["a", "b"], metric=_metric, method="zero", forward=_resetting)
    torch.testing.assert_close(torch.from_numpy(sweep.effect.sel(site="a").values), (zero_a - clean).sum(-1))
    torch.testing.assert_close(torch.from_numpy(sweep.effect.sel(site="b").values), (zero_b - clean).sum(-1))
    patch = patching_sweep(model, x, corrupted, ["a"], metric=_metric, forward=_resetting, direction="noising")
    torch.testing.assert_close(torch.from_numpy(patch.patched.sel(site="a").values), patched_a.sum(-1))


def test_attribution_patching_and_mean_ablation_name_the_drift_not_the_rows(model_and_inputs):
    """The drift of a stateful model looked like rows that interact, and the error offered
    samples=, with which the corrupted metric came out 0.5 off (the +0.1 of five more calls)."""
    from scimech import ablate, attribution_patching

    model, x, corrupted = model_and_inputs
    with pytest.raises(DataValidationError, match="second forward pass.*forward="):
        attribution_patching(model, x, corrupted, ["a"], _metric)
    with pytest.raises(DataValidationError, match="second forward pass.*forward="):
        attribution_patching(model, x, corrupted, ["a"], _metric, samples=torch.arange(8))
    with (
        pytest.raises(DataValidationError, match="second forward pass.*forward="),
        ablate(model, "a", method="mean", reference=x),
    ):
        pass
    got = attribution_patching(model, x, corrupted, ["a"], _metric, forward=_resetting)  # the fix it names
    with torch.no_grad():
        clean = (model.b(torch.relu(model.a(x))) + 0.1).sum(-1)
    torch.testing.assert_close(torch.from_numpy(got.clean.values), clean)

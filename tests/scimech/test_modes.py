"""Every verb measures in eval mode and gives each module back its own mode: a model training
with a frozen batch norm (kept in eval by the user) must come back exactly so."""

import pytest
import torch
from torch import nn

import scimech as sm


def _model():
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Dropout(0.5), nn.Linear(8, 2))
    m.train()
    m[1].eval()  # frozen statistics, as in fine-tuning
    return m


def _metric(out, target=None):
    return out.sum(-1)


VERBS = {
    "record": lambda m, x: sm.record(m, x, ["0"]),
    "ablation_sweep": lambda m, x: sm.ablation_sweep(m, x, ["0", "2"], _metric, method="zero"),
    "patching_sweep": lambda m, x: sm.patching_sweep(m, x, x + 1, ["0", "2"], _metric),
    "attribution_patching": lambda m, x: sm.attribution_patching(m, x, x + 1, ["0", "2"], _metric),
    "mean ablate reference": lambda m, x: _in_ablate(m, x),
}


def _in_ablate(m, x):
    with torch.no_grad(), sm.ablate(m, "0", method="mean", reference=x):
        m.eval()
        m(x)
        m.train()
        m[1].eval()


@pytest.mark.parametrize("verb", list(VERBS))
def test_each_module_gets_its_own_mode_back(verb):
    m = _model()
    before = [mod.training for mod in m.modules()]
    assert before.count(False) == 1
    VERBS[verb](m, torch.randn(16, 4))
    assert [mod.training for mod in m.modules()] == before


def test_a_model_already_in_eval_is_left_as_it_is_and_a_mixed_one_gets_its_modes_back():
    from torch import nn

    from scimech.capture.hooks import restore_modes, to_eval

    model = nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2), nn.Dropout(0.5)).eval()
    assert to_eval(model) == [] and not any(m.training for m in model.modules())
    model.train()
    model[1].eval()  # a frozen batch norm inside a model in training
    before = [m.training for m in model.modules()]
    modes = to_eval(model)
    assert not any(m.training for m in model.modules())
    restore_modes(modes)
    assert [m.training for m in model.modules()] == before == [True, True, False, True]

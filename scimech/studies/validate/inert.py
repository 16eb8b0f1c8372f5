"""Planted case "inert": a component that encodes the feature but that nothing downstream reads.

Four components read a standard-normal input ``x`` (6 features); the output is a fixed
linear readout of them::

    used  = x0                 readout weight 1   encodes x0, used
    inert = x0 + 0.5 x3        readout weight 0   encodes x0 (R2 = 0.8), never read
    other = x1                 readout weight 1   does not encode x0, used
    idle  = x2                 readout weight 0   neither
    y = used + other = x0 + x1

Truth: a linear probe for ``x0`` should flag ``used`` and ``inert`` (population R2 1 and
0.8); every causal method should flag ``used`` and ``other`` and never ``inert``, whose
weight into the readout is exactly 0, so its true effect is exactly 0. The planted
mechanism (what the output uses) is ``{used, other}``: the probe, working perfectly,
still answers a different question (Belinkov 2022).
"""

from __future__ import annotations

import math

import torch
import xarray as xr
from torch import nn

from .measure import Settings, case_dataset, causal_rows, normal_inputs, probe_rows

__all__ = ["NAME", "TITLE", "PLANTED", "LESSON", "InertModel", "inputs", "measure"]

NAME = "inert"
TITLE = "probe-visible but causally inert"
PLANTED = (
    "`inert` encodes x0 (R2 0.8) but its readout weight is exactly 0; `used` (x0) and `other` (x1) "
    "are read with weight 1; `idle` (x2) is neither. Probes should flag {used, inert}, causal methods "
    "{used, other}."
)
LESSON = (
    "A probe finds what a component encodes, not what the model uses: `inert` is as visible to the "
    "probe as `used`, and no causal method flags it. Probe rows score 0.5 against the mechanism even "
    "when the probe works perfectly."
)
COMPONENTS = ("used", "inert", "other", "idle")
N_FEATURES = 6


def _unit(n_in: int, weights: dict[int, float]) -> nn.Linear:
    layer = nn.Linear(n_in, 1)
    with torch.no_grad():
        layer.weight.zero_()
        layer.bias.zero_()
        for i, w in weights.items():
            layer.weight[0, i] = w
    return layer


class InertModel(nn.Module):
    """Four one-unit components and a hand-set linear readout (see the module docstring)."""

    def __init__(self):
        super().__init__()
        self.used = _unit(N_FEATURES, {0: 1.0})
        self.inert = _unit(N_FEATURES, {0: 1.0, 3: 0.5})
        self.other = _unit(N_FEATURES, {1: 1.0})
        self.idle = _unit(N_FEATURES, {2: 1.0})
        self.readout = nn.Linear(4, 1)
        with torch.no_grad():
            self.readout.weight.copy_(torch.tensor([[1.0, 0.0, 1.0, 0.0]]))
            self.readout.bias.zero_()
        self.requires_grad_(False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        c = torch.cat([self.used(x), self.inert(x), self.other(x), self.idle(x)], dim=1)
        return self.readout(c).squeeze(-1)


def inputs(n: int, seed: int) -> torch.Tensor:
    """(n, 6) standard-normal inputs."""
    return normal_inputs(n, N_FEATURES, seed)


def measure(settings: Settings) -> xr.Dataset:
    """Probe (target x0), zero / mean / resample ablation and noising patching of each component."""
    model = InertModel()
    x = inputs(settings.n, settings.seed)
    ref = inputs(settings.n_reference, settings.reference_seed)
    sites = {c: c for c in COMPONENTS}
    rows = [probe_rows(model, x, sites, x[:, 0].numpy(), settings)]
    rows += causal_rows(model, x, ref, COMPONENTS, settings)
    used = {"used": True, "inert": False, "other": True, "idle": False}
    truth = {
        "probe": {"used": True, "inert": True, "other": False, "idle": False},
        **{m: used for m in ("ablation_zero", "ablation_mean", "ablation_resample", "patching")},
    }
    # analytic values: E|x0| = sqrt(2/pi) for zero / mean ablation (mean ~ 0), E|x - x'| = 2/sqrt(pi)
    zero, pair = math.sqrt(2 / math.pi), 2 / math.sqrt(math.pi)
    expected = {("probe", "used"): 1.0, ("probe", "inert"): 0.8, ("probe", "other"): 0.0, ("probe", "idle"): 0.0}
    for c in COMPONENTS:
        for m, v in (("ablation_zero", zero), ("ablation_mean", zero), ("ablation_resample", pair), ("patching", pair)):
            expected[(m, c)] = v if used[c] else 0.0
    return case_dataset(rows, truth, used, expected, name=NAME, title=TITLE, planted=PLANTED, lesson=LESSON)

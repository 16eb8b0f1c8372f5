"""Planted case "silent": components the output needs that a linear probe for the feature cannot see.

Standard-normal input ``x`` (6 features); four components and a fixed readout::

    linear    = x0             readout weight 1   encodes x0 linearly, used
    magnitude = |x0|           readout weight 1   carries x0's size, not its sign: corr(|x0|, x0) = 0
    product   = x0 * x1        readout weight 1   an interaction: corr(x0 x1, x0) = 0
    idle      = x2             readout weight 0   neither
    y = x0 + |x0| + x0 x1

``magnitude`` is built from two ReLUs (relu(x0) + relu(-x0)) and ``product`` multiplies
two inputs, so each carries x0 in a code a linear probe for x0 cannot read (population
R2 exactly 0 for a symmetric x0), yet removing either changes the output. Truth: the
probe for x0 flags ``linear`` only; every causal method flags ``linear``, ``magnitude``
and ``product``, never ``idle``.
"""

from __future__ import annotations

import math

import torch
import xarray as xr
from scipy.stats import norm
from torch import nn

from .measure import Settings, case_dataset, causal_rows, normal_inputs, probe_rows

__all__ = ["NAME", "TITLE", "PLANTED", "LESSON", "SilentModel", "Product", "inputs", "measure"]

NAME = "silent"
TITLE = "probe-silent but causally necessary"
PLANTED = (
    "`magnitude` = |x0| and `product` = x0 x1 are read with weight 1 but are uncorrelated with x0; "
    "`linear` = x0 is read with weight 1; `idle` = x2 is not read. The probe for x0 should flag "
    "{linear}, causal methods {linear, magnitude, product}."
)
LESSON = (
    "A linear probe sees only linear codes: `magnitude` and `product` carry x0 in codes it cannot "
    "read, yet every causal method finds them. A silent probe is not evidence that a component is "
    "unused."
)
COMPONENTS = ("linear", "magnitude", "product", "idle")
N_FEATURES = 6


class Product(nn.Module):
    """``x[:, i] * x[:, j]`` as a (B, 1) activation."""

    def __init__(self, i: int, j: int):
        super().__init__()
        self.i, self.j = i, j

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x[:, self.i] * x[:, self.j]).unsqueeze(-1)


def _linear(n_in: int, n_out: int, weight: list[list[float]]) -> nn.Linear:
    layer = nn.Linear(n_in, n_out)
    with torch.no_grad():
        layer.weight.copy_(torch.tensor(weight))
        layer.bias.zero_()
    return layer


def _row(i: int) -> list[float]:
    return [1.0 if k == i else 0.0 for k in range(N_FEATURES)]


class SilentModel(nn.Module):
    """Components with linear and nonlinear codes of x0 and a hand-set readout."""

    def __init__(self):
        super().__init__()
        self.linear = _linear(N_FEATURES, 1, [_row(0)])
        self.magnitude = nn.Sequential(
            _linear(N_FEATURES, 2, [_row(0), [-v for v in _row(0)]]), nn.ReLU(), _linear(2, 1, [[1.0, 1.0]])
        )
        self.product = Product(0, 1)
        self.idle = _linear(N_FEATURES, 1, [_row(2)])
        self.readout = _linear(4, 1, [[1.0, 1.0, 1.0, 0.0]])
        self.requires_grad_(False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        c = torch.cat([self.linear(x), self.magnitude(x), self.product(x), self.idle(x)], dim=1)
        return self.readout(c).squeeze(-1)


def inputs(n: int, seed: int) -> torch.Tensor:
    """(n, 6) standard-normal inputs."""
    return normal_inputs(n, N_FEATURES, seed)


def measure(settings: Settings) -> xr.Dataset:
    """Probe (target x0), zero / mean / resample ablation and noising patching of each component."""
    model = SilentModel()
    x = inputs(settings.n, settings.seed)
    ref = inputs(settings.n_reference, settings.reference_seed)
    sites = {c: c for c in COMPONENTS}
    rows = [probe_rows(model, x, sites, x[:, 0].numpy(), settings)]
    rows += causal_rows(model, x, ref, COMPONENTS, settings)
    used = {"linear": True, "magnitude": True, "product": True, "idle": False}
    truth = {
        "probe": {"linear": True, "magnitude": False, "product": False, "idle": False},
        **{m: used for m in ("ablation_zero", "ablation_mean", "ablation_resample", "patching")},
    }
    mu = math.sqrt(2 / math.pi)  # E|x0|
    expected = {
        ("probe", "linear"): 1.0,
        ("probe", "magnitude"): 0.0,
        ("probe", "product"): 0.0,
        ("probe", "idle"): 0.0,
        ("ablation_zero", "linear"): mu,
        ("ablation_zero", "magnitude"): mu,
        ("ablation_zero", "product"): 2 / math.pi,  # E|x0 x1| = E|x0| E|x1|
        ("ablation_mean", "linear"): mu,
        ("ablation_mean", "product"): 2 / math.pi,
        # E||x0| - mu| = 4 (phi(mu) - mu (1 - Phi(mu))) for the half-normal |x0| with mean mu
        ("ablation_mean", "magnitude"): 4 * (norm.pdf(mu) - mu * norm.sf(mu)),
    }
    for m in ("ablation_resample", "patching"):
        expected[(m, "linear")] = 2 / math.sqrt(math.pi)  # E|x - x'|, x - x' ~ N(0, 2)
        expected[(m, "magnitude")] = (2 - math.sqrt(2)) * 2 / math.sqrt(math.pi)  # E||x| - |x'||
        expected[(m, "product")] = 1.0  # x0 x1 - x0' x1' is Laplace(0, 1): characteristic function 1 / (1 + t^2)
    for m in ("ablation_zero", "ablation_mean", "ablation_resample", "patching"):
        expected[(m, "idle")] = 0.0
    return case_dataset(rows, truth, used, expected, name=NAME, title=TITLE, planted=PLANTED, lesson=LESSON)

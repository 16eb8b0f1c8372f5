"""Planted case "attribution": a model whose exact attributions are known in closed form.

Eight input features, four of them used::

    y = 3 x0 + 2 tanh(x1) + x2 x3

with x0..x3, x6, x7 standard normal, a large but unused x4 (standard deviation 10) and an
unused x5 = x0 + 0.3 noise that correlates with x0 (r = 0.96). Integrated Gradients from
a zero baseline splits ``y`` exactly: 3 x0, 2 tanh(x1), x2 x3 / 2 to each of x2 and x3
(the straight path gives a product's two factors equal shares), and 0 to x4..x7, whose
gradient is 0 everywhere. Truth: both captum methods (through
:func:`scimech.analysis.attribution.attribute`) flag x0..x3 and nothing else (analytic mean
|attribution| 2.39, 1.11, 0.32, 0.32); Integrated Gradients is complete (the attributions
sum to f(x) - f(0) for every sample) and GradientShap is complete in expectation (its
mean residual is ~0).
"""

from __future__ import annotations

import math

import numpy as np
import torch
import xarray as xr
from scipy import integrate
from torch import nn

from scimech.analysis import attribution

from .measure import ATTRIBUTION_MIN_FRACTION, Settings, case_dataset, decisions, interval

__all__ = ["NAME", "TITLE", "PLANTED", "LESSON", "KnownAttributionModel", "inputs", "measure", "COMPLETENESS_TOLERANCE"]

NAME = "attribution"
TITLE = "attribution with known top features"
PLANTED = (
    "y = 3 x0 + 2 tanh(x1) + x2 x3; x4 (large), x5 (correlated with x0), x6, x7 unused. Integrated "
    "Gradients and GradientShap should flag {x0, x1, x2, x3}; IG sums to f(x) - f(0) per sample, "
    "GradientShap in expectation."
)
LESSON = (
    "Gradient attributions give exactly zero to inputs the model never reads, however large "
    "(x4) or correlated with a used input (x5) they are, and rank the used ones by their "
    "share of the output."
)
COMPONENTS = tuple(f"x{i}" for i in range(8))
USED = ("x0", "x1", "x2", "x3")
COMPLETENESS_TOLERANCE = {"integrated_gradients": 1e-3, "gradient_shap": 2e-2}
"""Relative residual allowed. IG: mean |residual| per sample (quadrature error only, ~3e-8 at
32 steps). GradientShap: |mean residual| over the samples; its per-sample residual is Monte
Carlo noise from 16 draws (~5%), which averages out: at 512 samples the mean residual was
0.0003-0.0071 over seeds 0-19 (standard deviation ~0.0035), so 0.02 is ~6 of them, while a
method that is not complete misses by order 1."""


class KnownAttributionModel(nn.Module):
    """``y = 3 x0 + 2 tanh(x1) + x2 x3`` with hand-set weights (features 4..7 unused)."""

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(8, 1, bias=False)
        self.saturating = nn.Linear(8, 1, bias=False)
        with torch.no_grad():
            self.linear.weight.zero_()
            self.linear.weight[0, 0] = 3.0
            self.saturating.weight.zero_()
            self.saturating.weight[0, 1] = 1.0
        self.requires_grad_(False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (self.linear(x) + 2.0 * torch.tanh(self.saturating(x))).squeeze(-1) + x[:, 2] * x[:, 3]


def inputs(n: int, seed: int) -> torch.Tensor:
    """(n, 8) inputs: standard normal, x4 scaled by 10, x5 = x0 + 0.3 noise."""
    x = torch.randn(n, 8, generator=torch.Generator().manual_seed(seed))
    x[:, 4] *= 10.0
    x[:, 5] = x[:, 0] + 0.3 * x[:, 5]
    return x


def _mean_abs_tanh() -> float:
    """E|tanh(X)| for X ~ N(0, 1), by quadrature."""
    return 2 * integrate.quad(lambda u: math.tanh(u) * math.exp(-u * u / 2) / math.sqrt(2 * math.pi), 0, np.inf)[0]


def measure(settings: Settings) -> xr.Dataset:
    """Attribute with IG and GradientShap; flag features by mean |attribution|; check completeness."""
    model = KnownAttributionModel()
    x = inputs(settings.n, settings.seed)
    with torch.no_grad():
        f = model(x).numpy()
        f_zero = float(model(torch.zeros(1, 8)))
        f_mean = float(model(x.mean(0, keepdim=True)))
    tau = ATTRIBUTION_MIN_FRACTION * float(f.std())
    rows, residual = [], {}
    for method in ("integrated_gradients", "gradient_shap"):
        attr = attribution.attribute(
            model,
            x,
            method=method,
            n_steps=32,
            n_samples=16,
            seed=settings.seed,
            dims=("sample", "component"),
            coords={"component": list(COMPONENTS)},
        ).values
        stats = [interval(np.abs(attr[:, j]), settings) for j in range(len(COMPONENTS))]
        est, lo, hi = zip(*stats, strict=True)
        rows.append(decisions(COMPONENTS, method, est, lo, hi, tau))
        if method == "integrated_gradients":
            r = attr.sum(1) - (f - f_zero)
            residual[method] = float(np.abs(r).mean() / np.abs(f - f_zero).mean())
        else:  # scimech's GradientShap draws its baseline from {0, the input mean}, uniformly
            delta = f - 0.5 * (f_zero + f_mean)
            residual[method] = float(abs((attr.sum(1) - delta).mean()) / np.abs(delta).mean())
    used = {c: c in USED for c in COMPONENTS}
    truth = {m: used for m in ("integrated_gradients", "gradient_shap")}
    share = {"x0": 3 * math.sqrt(2 / math.pi), "x1": 2 * _mean_abs_tanh(), "x2": 1 / math.pi, "x3": 1 / math.pi}
    expected = {(m, c): share.get(c, 0.0) for m in truth for c in COMPONENTS}
    ds = case_dataset(rows, truth, used, expected, name=NAME, title=TITLE, planted=PLANTED, lesson=LESSON)
    methods = list(ds.technique.values)
    ds["completeness_residual"] = (
        ("technique",),
        [residual[m] for m in methods],
        {
            "description": "relative completeness residual: IG mean |sum(attr) - (f(x) - f(0))| / mean |f(x) - f(0)|; "
            "GradientShap |mean(sum(attr) - (f(x) - E f(baseline)))| / mean |f(x) - E f(baseline)|",
            "units": "1",
        },
    )
    ds["completeness_tolerance"] = (
        ("technique",),
        [COMPLETENESS_TOLERANCE[m] for m in methods],
        {"description": "largest relative residual that counts as complete", "units": "1"},
    )
    return ds

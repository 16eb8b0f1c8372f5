"""Planted case "ablation_choice": the verdict on a component depends on how it is ablated.

Standard-normal input ``x`` (4 features); three components and a fixed readout::

    signal  = x0                  read linearly                     the input-dependent mechanism
    offset  = 5 (a constant)      read linearly: y needs the 5      carries nothing about the input
    bimodal = 2 * [x1 > 0]        read through b (2 - b), which is 0 at b = 0 and b = 2 and 1 at b = 1
    y = x0 + 5 + bimodal (2 - bimodal) = x0 + 5 on every input

Only ``signal``'s variation changes the output. Each ablation method, working exactly as
specified, still reports something different (Miller, Chughtai & Saunders 2024):

- zero ablation removes the constant: ``offset`` shows an effect of exactly 5;
- mean ablation sets ``bimodal`` to its mean (1), a value it never takes: effect 1;
- resample ablation and patching keep each component on values it takes: only ``signal``.

So the truth of each (component, method) row is that method's analytic effect, and the
planted mechanism (``signal`` only) is answered by resample ablation and patching. That is
why every scimech result records its ablation method.
"""

from __future__ import annotations

import math

import torch
import xarray as xr
from torch import nn

from .measure import Settings, case_dataset, causal_rows, normal_inputs

__all__ = ["NAME", "TITLE", "PLANTED", "LESSON", "AblationChoiceModel", "Step", "OFFSET", "inputs", "measure"]

NAME = "ablation_choice"
TITLE = "verdict depends on the ablation method"
OFFSET = 5.0
PLANTED = (
    f"`offset` is the constant {OFFSET:g}, which the output adds; `bimodal` is 0 or 2, read through "
    "b(2 - b) (0 on both values, 1 at the mean 1); `signal` = x0 is read linearly. Zero ablation should "
    f"flag {{signal, offset}} (offset's effect is exactly {OFFSET:g}), mean ablation {{signal, bimodal}}, "
    "resample ablation and patching {signal}: the planted mechanism."
)
LESSON = (
    "Each ablation method, working exactly as specified, answers a different question: zero "
    "ablation flags the constant `offset` (the output needs the value, not any information), "
    "mean ablation flags `bimodal` (its mean is a value it never takes). Only resample "
    "ablation and patching keep the component on values it takes and isolate the input-"
    "dependent mechanism. That is why every scimech result records its ablation method."
)
COMPONENTS = ("signal", "offset", "bimodal")
N_FEATURES = 4


class Step(nn.Module):
    """``level * [x[:, i] > 0]`` as a (B, 1) activation: a unit that is either off or saturated."""

    def __init__(self, i: int, level: float):
        super().__init__()
        self.i, self.level = i, level

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (self.level * (x[:, self.i] > 0).to(x.dtype)).unsqueeze(-1)


class AblationChoiceModel(nn.Module):
    """``y = signal + offset + bimodal (2 - bimodal)`` (see the module docstring)."""

    def __init__(self):
        super().__init__()
        self.signal = nn.Linear(N_FEATURES, 1)
        self.offset = nn.Linear(N_FEATURES, 1)
        with torch.no_grad():
            self.signal.weight.zero_()
            self.signal.weight[0, 0] = 1.0
            self.signal.bias.zero_()
            self.offset.weight.zero_()
            self.offset.bias.fill_(OFFSET)
        self.bimodal = Step(1, 2.0)
        self.requires_grad_(False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b = self.bimodal(x)
        return (self.signal(x) + self.offset(x) + b * (2.0 - b)).squeeze(-1)


def inputs(n: int, seed: int) -> torch.Tensor:
    """(n, 4) standard-normal inputs."""
    return normal_inputs(n, N_FEATURES, seed)


def measure(settings: Settings) -> xr.Dataset:
    """Zero / mean / resample ablation and noising patching of each component."""
    model = AblationChoiceModel()
    x = inputs(settings.n, settings.seed)
    ref = inputs(settings.n_reference, settings.reference_seed)
    rows = causal_rows(model, x, ref, COMPONENTS, settings)
    truth = {
        "ablation_zero": {"signal": True, "offset": True, "bimodal": False},
        "ablation_mean": {"signal": True, "offset": False, "bimodal": True},
        "ablation_resample": {"signal": True, "offset": False, "bimodal": False},
        "patching": {"signal": True, "offset": False, "bimodal": False},
    }
    mechanism = {"signal": True, "offset": False, "bimodal": False}
    zero, pair = math.sqrt(2 / math.pi), 2 / math.sqrt(math.pi)
    expected = {
        ("ablation_zero", "signal"): zero,
        ("ablation_zero", "offset"): OFFSET,
        ("ablation_zero", "bimodal"): 0.0,
        ("ablation_mean", "signal"): zero,
        ("ablation_mean", "offset"): 0.0,
        ("ablation_mean", "bimodal"): 1.0,  # b(2 - b) at the mean b = 1 (half the inputs have x1 > 0)
        ("ablation_resample", "signal"): pair,
        ("ablation_resample", "offset"): 0.0,
        ("ablation_resample", "bimodal"): 0.0,
        ("patching", "signal"): pair,
        ("patching", "offset"): 0.0,
        ("patching", "bimodal"): 0.0,
    }
    return case_dataset(rows, truth, mechanism, expected, name=NAME, title=TITLE, planted=PLANTED, lesson=LESSON)

"""Planted case "shifted_subspace": a shift that rotates the subspace a site uses.

In distribution, a site's activations are sparse non-negative sums of 4 orthogonal
directions (distinct energies) in 12 dims, plus a little noise in every dim. Two shifted worlds:

- ``rotated``: the 4th direction is turned 60 degrees out of the subspace (towards an
  unused dim); principal angles (60, 0, 0, 0), so the gap is ``sin 60 / 2 = 0.43``;
- ``unshifted``: new samples of the same world (the control).

Truth: :func:`scimech.analysis.dictionary.faithfulness_gap` of a dictionary trained in
distribution flags ``rotated`` (interval above 0.1) and not ``unshifted``; the
gradient-free :func:`scimech.analysis.dictionary.realign` adds explained variance on ``rotated``
and none on ``unshifted``. A gap that ignores the shift, or a realignment that does
nothing (or the wrong thing), fails the case.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import xarray as xr

from scimech.analysis.dictionary import (
    explained_variance,
    faithfulness_gap,
    realign,
    train_dictionary,
)

from .measure import GAP_MIN, REALIGNMENT_MIN_GAIN, Settings, case_dataset, decisions

__all__ = ["NAME", "TITLE", "PLANTED", "LESSON", "measure"]

NAME = "shifted_subspace"
TITLE = "a shift that rotates the active subspace"
PLANTED = (
    "In distribution: sparse sums of 4 orthogonal directions in 12 dims. `rotated`: the 4th direction "
    "turned 60 degrees out of the subspace (gap sin 60 / 2 = 0.43); `unshifted`: fresh samples of the same "
    "world. The gap and the realignment should act on `rotated` only."
)
LESSON = (
    "A dictionary fitted in distribution loses what a rotated subspace holds; the gap measures it without "
    "labels, and realigning the dictionary on unlabelled shifted activations restores the fit with no "
    "training, while an unshifted control shows neither a gap nor a gain."
)
WIDTH, ACTIVE_DIMS = 12, 4
ANGLE = math.radians(60)


def _world(n: int, seed: int, rotated: bool) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    idx = torch.stack([torch.randperm(ACTIVE_DIMS, generator=g)[:2] for _ in range(n)])
    codes = torch.zeros(n, ACTIVE_DIMS).scatter(1, idx, torch.empty(n, 2).exponential_(generator=g) + 0.2)
    x = torch.zeros(n, WIDTH)
    x[:, :ACTIVE_DIMS] = codes * torch.tensor([3.0, 2.2, 1.6, 1.1])
    x += 0.02 * torch.randn(n, WIDTH, generator=g)  # measurement noise in every dim
    if rotated:
        c, s = math.cos(ANGLE), math.sin(ANGLE)
        x3, x8 = x[:, 3].clone(), x[:, 8].clone()
        x[:, 3], x[:, 8] = c * x3 - s * x8, s * x3 + c * x8
    return x


def measure(settings: Settings) -> xr.Dataset:
    """Train a dictionary in distribution; gap and realignment gain on each shifted world, with
    percentile-bootstrap intervals over the shifted rows."""
    n = max(4 * settings.n, 2000)
    x_in = _world(n, settings.seed, rotated=False)
    dic, _ = train_dictionary(
        x_in, kind="topk", n_features=16, k=2, epochs=15, batch_size=128, lr=3e-3, seed=settings.seed
    )
    rng = np.random.default_rng(settings.seed)
    names, gap_rows, gain_rows = ["rotated", "unshifted"], [], []
    for i, name in enumerate(names):
        x_out = _world(n, settings.seed + 1 + i, rotated=name == "rotated")
        gaps, gains = [], []
        resamples = [np.arange(n)] + [rng.integers(0, n, n) for _ in range(max(settings.n_bootstrap // 25, 20))]
        for idx in resamples:
            sample = x_out[torch.as_tensor(idx)]
            gaps.append(float(faithfulness_gap(dic, x_in, sample, energy=0.99).gap))
            gains.append(explained_variance(realign(dic, x_in, sample), sample) - explained_variance(dic, sample))
        gap_rows.append((gaps[0], *np.percentile(gaps[1:], [2.5, 97.5])))
        gain_rows.append((gains[0], *np.percentile(gains[1:], [2.5, 97.5])))
    gap, gap_lo, gap_hi = np.array(gap_rows).T
    gain, gain_lo, gain_hi = np.array(gain_rows).T
    gap_ds = decisions(names, "faithfulness_gap", gap, gap_lo, gap_hi, GAP_MIN)
    gain_ds = decisions(names, "realignment", gain, gain_lo, gain_hi, REALIGNMENT_MIN_GAIN)
    truth = {"rotated": True, "unshifted": False}
    return case_dataset(
        [gap_ds, gain_ds],
        {"faithfulness_gap": truth, "realignment": truth},
        truth,
        expected={("faithfulness_gap", "rotated"): math.sin(ANGLE) / 2, ("faithfulness_gap", "unshifted"): 0.0},
        name=NAME,
        title=TITLE,
        planted=PLANTED,
        lesson=LESSON,
    )

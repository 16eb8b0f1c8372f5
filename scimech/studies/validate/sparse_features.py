"""Planted case "sparse_features": a site whose activations are sparse sums of known directions.

A model draws, for each sample, 3 of 12 planted unit directions in a 16-wide site with
exponential (non-negative) weights, and reads the site out linearly::

    site = sum_j c_j d_j          (3 non-zero c_j per sample, d_j planted, unit norm)
    y    = readout(site)

Truth: a sparse dictionary (:func:`scimech.analysis.dictionary.train_dictionary`, TopK, k = 3)
trained on the site's recorded activations should hold each planted direction (a row with
cosine > 0.9), and none of 4 decoy directions drawn at random in the same space (which
no activation uses). A dictionary that learned nothing, or learned a rotation of the
truth, holds no planted direction and the case fails.
"""

from __future__ import annotations

import numpy as np
import torch
import xarray as xr
from torch import nn

from scimech.analysis.dictionary import train_dictionary
from scimech.capture.record import record

from .measure import DICTIONARY_MIN_COSINE, Settings, case_dataset, decisions

__all__ = ["NAME", "TITLE", "PLANTED", "LESSON", "SparseSiteModel", "measure"]

NAME = "sparse_features"
TITLE = "sparse features planted in a site"
PLANTED = (
    "Each sample's site activation is a non-negative sum of 3 of 12 planted unit directions (16 dims); 4 "
    "decoy directions are used by nothing. A dictionary should hold the 12 and not the decoys."
)
LESSON = (
    "A TopK dictionary trained only on recorded activations finds the directions the model composes its "
    "activations from; directions nothing uses are not found, so a found direction is evidence."
)
WIDTH, N_PLANTED, N_DECOYS, ACTIVE = 16, 12, 4, 3


class SparseSiteModel(nn.Module):
    """Codes (n, 12) -> site = codes @ directions -> a linear readout."""

    def __init__(self, directions: torch.Tensor):
        super().__init__()
        self.compose = nn.Linear(N_PLANTED, WIDTH, bias=False)
        self.site = nn.Identity()
        self.readout = nn.Linear(WIDTH, 1)
        with torch.no_grad():
            self.compose.weight.copy_(directions.T)
        self.requires_grad_(False)

    def forward(self, codes: torch.Tensor) -> torch.Tensor:
        return self.readout(self.site(self.compose(codes))).squeeze(-1)


def _directions(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    both = torch.randn(N_PLANTED + N_DECOYS, WIDTH, generator=g)
    both = both / both.norm(dim=1, keepdim=True)
    return both[:N_PLANTED], both[N_PLANTED:]


def _codes(n: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    idx = torch.stack([torch.randperm(N_PLANTED, generator=g)[:ACTIVE] for _ in range(n)])
    return torch.zeros(n, N_PLANTED).scatter(1, idx, torch.empty(n, ACTIVE).exponential_(generator=g) + 0.5)


def measure(settings: Settings) -> xr.Dataset:
    """Record the site, train a TopK dictionary per seed, and score every direction's best cosine."""
    planted, decoys = _directions(settings.seed)
    model = SparseSiteModel(planted).eval()
    codes = _codes(max(10 * settings.n, 5000), settings.seed)
    acts = record(model, codes, ["site"])["site"]
    seeds = (settings.seed, settings.seed + 1, settings.seed + 2)
    per_seed = []
    for s in seeds:
        dic, _ = train_dictionary(
            acts, kind="topk", n_features=4 * N_PLANTED, k=ACTIVE, epochs=20, batch_size=128, lr=3e-3, seed=s
        )
        rows = dic.W_dec.detach()
        per_seed.append(torch.cat([planted, decoys]).matmul(rows.T).max(1).values.numpy())
    cos = np.stack(per_seed)
    names = [f"planted_{i}" for i in range(N_PLANTED)] + [f"decoy_{i}" for i in range(N_DECOYS)]
    rows_ds = decisions(names, "dictionary_recovery", cos.mean(0), cos.min(0), cos.max(0), DICTIONARY_MIN_COSINE)
    truth = {name: name.startswith("planted") for name in names}
    return case_dataset(
        [rows_ds], {"dictionary_recovery": truth}, truth, name=NAME, title=TITLE, planted=PLANTED, lesson=LESSON
    )

"""Inputs that are dataclasses or nested dicts: batched on dim 0 of every tensor leaf, and a
slice of a batch slices every leaf (the sweeps and ``record`` below use batches smaller
than the data, so a leaf left whole would fail the model's shape check or mix samples)."""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from torch import nn

import scimech as sm

from .helpers import ATOL, capture, edit_output, npy, set_cols

N_SAMPLES, R, N = 5, 4, 6


@dataclass
class Batch:
    x: torch.Tensor  # (B, N, 4)
    mask: torch.Tensor  # (B, N), 1 where a token is present


class Masked(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Linear(4, 16)
        self.mid = nn.Linear(16, 16)
        self.out = nn.Linear(16, 1)

    def encode(self, x, mask):
        assert x.shape[:2] == mask.shape, (x.shape, mask.shape)  # leaves sliced together
        m = mask[..., None]
        h = torch.tanh(self.mid(torch.tanh(self.enc(x)) * m))
        return self.out((h * m).sum(1) / m.sum(1)).squeeze(-1)


class TakesDataclass(Masked):
    def forward(self, batch: Batch):
        assert isinstance(batch, Batch), type(batch)
        return self.encode(batch.x, batch.mask)


class TakesNestedDict(Masked):
    def forward(self, tokens: dict):  # called as model(**{"tokens": {"x": ..., "mask": ...}})
        return self.encode(tokens["x"], tokens["mask"])


def metric(out, target=None):
    return out


@pytest.fixture(scope="module", params=["dataclass", "nested dict"])
def case(request):
    torch.manual_seed(0)
    if request.param == "dataclass":
        model, wrap = TakesDataclass().eval(), Batch
    else:
        model = TakesNestedDict().eval()

        def wrap(x, mask):
            return {"tokens": {"x": x, "mask": mask}}

    g = torch.Generator().manual_seed(50)

    def draw(n):
        mask = (torch.rand(n, N, generator=g) > 0.3).float()
        mask[:, 0] = 1.0
        return wrap(torch.randn(n, N, 4, generator=g), mask)

    return SimpleNamespace(model=model, clean=draw(N_SAMPLES), corrupted=draw(N_SAMPLES), reference=draw(R))


def call(model, batch):
    return model(**batch) if isinstance(batch, dict) else model(batch)


def hand(case, batch, path=None, fn=None):
    with torch.no_grad():
        if path is None:
            return npy(call(case.model, batch))
        with edit_output(case.model.get_submodule(path), fn):
            return npy(call(case.model, batch))


def act(case, path, batch):
    return capture(case.model.get_submodule(path), lambda: call(case.model, batch))


def test_record_in_small_batches(case):
    ds = sm.record(case.model, case.clean, ["enc", "mid.units[2]"], batch_size=2)
    np.testing.assert_allclose(ds["enc"].values, npy(act(case, "enc", case.clean)), atol=ATOL)
    np.testing.assert_allclose(ds["mid.units[2]"].values, npy(act(case, "mid", case.clean)[..., [2]]), atol=ATOL)
    assert ds["enc"].dims == ("sample", "position", "feature") and ds.sizes["sample"] == N_SAMPLES


def test_ablate(case):
    with torch.no_grad(), sm.ablate(case.model, "mid.units[2]", method="zero"):
        got = npy(call(case.model, case.clean))
    np.testing.assert_allclose(got, hand(case, case.clean, "mid", lambda t: set_cols(t, slice(2, 3), 0.0)), atol=ATOL)


def test_ablation_sweep_mean_in_small_batches(case):
    res = sm.ablation_sweep(
        case.model, case.clean, ["enc", "mid.units[2]"], metric, method="mean", reference=case.reference, batch_size=2
    )
    np.testing.assert_allclose(res.baseline.values, hand(case, case.clean), atol=ATOL)
    enc_mean = act(case, "enc", case.reference).mean(0)  # per position
    mid_mean = act(case, "mid", case.reference)[..., 2:3].mean(0)
    np.testing.assert_allclose(
        res.ablated.sel(site="enc").values, hand(case, case.clean, "enc", lambda t: enc_mean.expand_as(t)), atol=ATOL
    )
    np.testing.assert_allclose(
        res.ablated.sel(site="mid.units[2]").values,
        hand(case, case.clean, "mid", lambda t: set_cols(t, slice(2, 3), mid_mean)),
        atol=ATOL,
    )


@pytest.mark.parametrize("direction", ["denoising", "noising"])
def test_patching_sweep_in_small_batches(case, direction):
    res = sm.patching_sweep(
        case.model, case.clean, case.corrupted, ["enc", "mid.units[2]"], metric, direction=direction, batch_size=2
    )
    base, source = (case.corrupted, case.clean) if direction == "denoising" else (case.clean, case.corrupted)
    np.testing.assert_allclose(res.clean.values, hand(case, case.clean), atol=ATOL)
    np.testing.assert_allclose(res.corrupted.values, hand(case, case.corrupted), atol=ATOL)
    enc, mid = act(case, "enc", source), act(case, "mid", source)
    np.testing.assert_allclose(res.patched.sel(site="enc").values, hand(case, base, "enc", lambda t: enc), atol=ATOL)
    np.testing.assert_allclose(
        res.patched.sel(site="mid.units[2]").values,
        hand(case, base, "mid", lambda t: set_cols(t, slice(2, 3), mid[..., 2:3])),
        atol=ATOL,
    )

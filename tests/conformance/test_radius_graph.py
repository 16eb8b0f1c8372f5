"""Per-edge rows of a radius graph that the model builds inside forward (SchNet's pattern).

PyG's ``SchNet`` takes atom types ``z``, positions ``pos`` and a ``batch`` vector (one index per
atom), builds ``radius_graph(pos, r, batch)`` inside ``forward``, expands each edge's distance
in Gaussians (``GaussianSmearing``) and turns it into a continuous filter (a small MLP), which
multiplies the source atom's features in the message to the target atom. ``RadiusNet`` below
has that pattern in plain torch: its ``expand`` and ``filter`` sites have one row per edge,
and how many edges there are depends on the positions, so they are neither the batch's atoms
nor a whole number of rows per atom.

Such a site is refused as the graph's edges, not as a sequence, and the fix the refusal names
(one graph per batch, the site declared ``'edge feature'``: no batch axis) is checked on the
data before it is offered: the message says that the first molecule alone ran and how many
edge rows it gave. That fix is then checked here against plain torch hooks, molecule by molecule.

Truths: edge counts from numpy distances; activations and edited outputs from plain forward hooks.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import scimech as sm
from scimech.errors import DataValidationError, DimensionError

from .helpers import ATOL, capture, edit_output, npy

H, NG, R = 8, 6, 1.6  # hidden width, Gaussians, cutoff radius
SIZES = (5, 6, 4)  # atoms per molecule


class Expand(nn.Module):
    """Gaussian expansion of each edge's length (PyG's GaussianSmearing)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("mu", torch.linspace(0, R, NG))

    def forward(self, d):
        return torch.exp(-4.0 * (d[:, None] - self.mu) ** 2)


class RadiusNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb, self.expand = nn.Embedding(5, H), Expand()
        self.filter = nn.Sequential(nn.Linear(NG, H), nn.Tanh(), nn.Linear(H, H))
        self.lin, self.out = nn.Linear(H, H), nn.Linear(H, 1)

    def forward(self, z, pos, batch):
        near = (batch[:, None] == batch[None]) & (torch.cdist(pos, pos) < R)  # radius_graph(pos, R, batch)
        src, dst = (near & ~torch.eye(len(z), dtype=torch.bool)).nonzero().T
        w = self.filter(self.expand((pos[src] - pos[dst]).norm(dim=-1)))  # (edges, H)
        h = self.emb(z)
        h = h + torch.zeros_like(h).index_add_(0, dst, self.lin(h)[src] * w)
        return self.out(torch.tanh(h)).squeeze(-1)  # one value per atom


def fwd(m, b):
    return m(b["z"], b["pos"], b["batch"])


def atom_sum(out, target=None):
    return out.sum().reshape(1)  # one molecule per batch: one sample


def per_atom(out, target=None):
    return out


def molecule(n: int, seed: int) -> dict:
    g = torch.Generator().manual_seed(seed)
    return {
        "z": torch.randint(0, 5, (n,), generator=g),
        "pos": torch.randn(n, 3, generator=g),
        "batch": torch.zeros(n, dtype=torch.long),
    }


def together(mols: list[dict]) -> dict:
    """Molecules in one batch, as PyG batches them: atoms concatenated, ``batch`` their molecule."""
    return {
        "z": torch.cat([m["z"] for m in mols]),
        "pos": torch.cat([m["pos"] for m in mols]),
        "batch": torch.cat([torch.full((len(m["z"]),), i) for i, m in enumerate(mols)]),
    }


def n_edges(mol: dict) -> int:
    p = mol["pos"].numpy()
    d = np.linalg.norm(p[:, None] - p[None], axis=-1)
    return int(((d < R) & ~np.eye(len(p), dtype=bool)).sum())


@pytest.fixture(scope="module")
def schnet():
    torch.manual_seed(0)
    mols = [molecule(n, 10 + i) for i, n in enumerate(SIZES)]
    assert len({n_edges(m) for m in mols}) > 1  # the premise: the molecules have other numbers of edges
    return RadiusNet().eval(), mols


AXES = {"filter": "edge feature", "expand": "edge feature", "filter.units[0]": "edge feature"}


@pytest.mark.parametrize("site", ["filter", "expand"])
def test_an_edge_site_built_inside_forward_is_refused_as_edges_with_a_checked_fix(schnet, site):
    """On today's code: "Sequence-first tensors: use batch_first=True modules", which no model
    with a radius graph can follow. Now: the graph's edges, 'edge feature', and what the check on
    the data found (the first molecule alone: its atoms and its edge rows, counted here by numpy)."""
    model, mols = schnet
    for verb in (
        lambda: sm.record(model, together(mols), [site], forward=fwd),
        lambda: sm.ablation_sweep(model, together(mols), [site], per_atom, method="zero", forward=fwd, samples="batch"),
    ):
        with pytest.raises(DimensionError) as err:
            verb()
        msg = str(err.value)
        assert "edges of a graph the model builds inside forward" in msg, msg
        assert f"axes={{{site!r}: 'edge feature'}}" in msg, msg
        assert f"first sample alone ({SIZES[0]} rows" in msg and f"gives {n_edges(mols[0])} rows" in msg, msg
        assert "batch_first" not in msg and "Sequence-first" not in msg, msg


def test_without_a_sample_index_the_refusal_still_names_edges_not_sequences(schnet):
    """Positional inputs name no sample of a row: the fix is not checked, and not a sequence's."""
    model, mols = schnet
    b = together(mols)
    with pytest.raises(DimensionError) as err:
        sm.record(model, (b["z"], b["pos"], b["batch"]), ["filter"])
    msg = str(err.value)
    assert "edges of a graph it builds inside forward" in msg and "'edge feature'" in msg, msg
    assert "batch_first" not in msg and "Checked on" not in msg, msg


def test_the_named_fix_zero_ablation_is_each_molecule_with_its_edges_zeroed(schnet):
    """ablation_sweep over a list of one-molecule batches with the sites declared 'edge feature':
    each molecule's summed output with the site's edge rows zeroed (all, or unit 0), by hand."""
    model, mols = schnet
    res = sm.ablation_sweep(
        model, mols, ["filter", "filter.units[0]", "expand"], atom_sum, method="zero", forward=fwd, axes=AXES
    )

    def zeroed(site, unit=None):
        def fn(t):
            t = t.clone()
            if unit is None:
                t[:] = 0
            else:
                t[:, unit] = 0
            return t

        out = []
        for mol in mols:
            with torch.no_grad(), edit_output(model.get_submodule(site), fn):
                out.append(float(fwd(model, mol).sum()))
        return np.array(out)

    for name, truth in (
        ("filter", zeroed("filter")),
        ("filter.units[0]", zeroed("filter", 0)),
        ("expand", zeroed("expand")),
    ):
        np.testing.assert_allclose(res.ablated.sel(site=name).values, truth, rtol=0, atol=ATOL, err_msg=name)


def test_the_named_fix_patching_puts_each_molecules_clean_edges_in(schnet):
    """patching_sweep molecule by molecule (clean and corrupted: the same positions, so the same
    edges, and other atom types): the corrupted run with the clean filter rows put in, by hand."""
    model, mols = schnet
    for mol in mols:
        corrupted = dict(mol, z=(mol["z"] + 1) % 5)
        res = sm.patching_sweep(model, mol, corrupted, ["filter"], atom_sum, forward=fwd, axes=AXES)
        clean = capture(model.filter, lambda _m=mol: fwd(model, _m))
        with torch.no_grad(), edit_output(model.filter, lambda t, _c=clean: _c):
            truth = float(fwd(model, corrupted).sum())
        np.testing.assert_allclose(res.patched.sel(site="filter").values, [truth], rtol=0, atol=ATOL)


def test_the_named_fix_records_each_molecule_and_a_list_of_other_edge_counts_is_refused(schnet):
    """record of one molecule: its edge rows as one sample, as a plain hook sees them. A list of
    molecules with other edge counts cannot share one array: refused naming one call per batch
    (on today's code a numpy concatenation error)."""
    model, mols = schnet
    for mol in mols:
        got = sm.record(model, mol, ["filter"], forward=fwd, axes=AXES)["filter"]
        assert got.sizes["sample"] == 1
        truth = capture(model.filter, lambda _m=mol: fwd(model, _m))
        np.testing.assert_allclose(got.values[0], npy(truth), rtol=0, atol=ATOL)
    with pytest.raises(DataValidationError, match=r"a call of its own"):
        sm.record(model, mols, ["filter"], forward=fwd, axes=AXES)

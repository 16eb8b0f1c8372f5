"""
A sparse dictionary when the world shifts
=========================================

A sparse dictionary (here a TopK sparse autoencoder, :func:`scimech.analysis.dictionary.train_dictionary`)
writes each activation as a few non-negative features. Trained on one world, is it still
faithful in another (a warmer decade, a deeper survey, a stimulus never seen)?
:func:`~scimech.analysis.dictionary.faithfulness_gap` measures how far the shifted
activations' active subspace lies from the dictionary's span (principal angles; 0: the same
subspace, 1: orthogonal), with a sampling control, and
:func:`~scimech.analysis.dictionary.realign` moves the dictionary onto the shifted geometry
from unlabelled shifted activations, without a gradient step.

The activations are planted: each is a sum of 3 of 48 known directions in 32 dimensions, so
the dictionary can be checked against the directions it should find. The shifted worlds
turn the space by a growing rotation.
"""

import matplotlib.pyplot as plt
import numpy as np
import torch
import xarray as xr

import scimech.analysis.dictionary as sd

g = torch.Generator().manual_seed(0)
directions = torch.randn(48, 32, generator=g)
directions /= directions.norm(dim=1, keepdim=True)


def activations(n, seed):
    """n rows, each a sum of 3 of the 48 planted directions with positive codes."""
    gen = torch.Generator().manual_seed(seed)
    idx = torch.stack([torch.randperm(48, generator=gen)[:3] for _ in range(n)])
    codes = torch.zeros(n, 48).scatter(1, idx, torch.empty(n, 3).exponential_(generator=gen) + 0.5)
    return codes @ directions + 0.01 * torch.randn(n, 32, generator=gen)


x = activations(3000, seed=1)
acts = xr.DataArray(x.numpy(), dims=("sample", "unit"))
dic, history = sd.train_dictionary(acts, kind="topk", n_features=96, k=3, epochs=6, batch_size=128, lr=3e-3)
quality = sd.dictionary_quality(dic, acts, n_bootstrap=100)
best = (directions @ dic.W_dec.detach().T).max(1).values
print(f"variance explained {float(quality.fve):.3f}, L0 {float(quality.l0):.1f}")
print(f"planted directions found (cosine > 0.9): {int((best > 0.9).sum())} of 48")

# %%
# Worlds turned by a rotation ``exp(t G)`` of growing size ``t`` (``G`` a random skew-symmetric
# generator), each a fresh sample: the gap grows with the rotation, above the sampling
# control (two samples of one world), and the fit of the dictionary as trained falls.
# Realignment recovers part of it: these activations fill most of the 32 dimensions, so the
# ``subspace`` map can follow only the turn of their dominant part, and the ``eigenbasis`` map
# needs more rows than these to follow a rotation inside it (the map chosen is printed).
G = torch.randn(32, 32, generator=torch.Generator().manual_seed(9))
G = (G - G.T) / np.sqrt(2 * 32)
sizes = [0.0, 0.4, 0.8, 1.6]
rows = []
for t in sizes:
    shifted = xr.DataArray((activations(3000, seed=2) @ torch.linalg.matrix_exp(t * G).T).numpy(), dims=acts.dims)
    shift = sd.faithfulness_gap(dic, acts, shifted)
    fixed = sd.realign(dic, acts, shifted)
    rows.append(
        (
            float(shift.gap),
            float(shift.control_gap),
            float(shift.fve_shifted),
            float(sd.explained_variance(fixed, shifted)),
        )
    )
    print(
        f"t = {t:.1f}: gap {rows[-1][0]:.2f}, variance explained {rows[-1][2]:.3f} -> {rows[-1][3]:.3f} "
        f"realigned ({fixed.realignment})"
    )
gap, control, fve_shifted, fve_realigned = np.array(rows).T

fig, (left, right) = plt.subplots(1, 2, figsize=(10.5, 3.6))
left.plot(sizes, gap, "o-", label="gap")
left.plot(sizes, control, "--", color="0.5", label="sampling control")
left.set(xlabel="rotation size t", ylabel="faithfulness gap", title="how far the subspace moved")
left.legend()
right.axhline(float(quality.fve), color="0.5", ls=":", label="in distribution")
right.plot(sizes, fve_shifted, "o-", label="as trained")
right.plot(sizes, fve_realigned, "s-", label="realigned (no training)")
right.set(xlabel="rotation size t", ylabel="variance explained", title="the dictionary's fit, shifted")
right.legend(fontsize="small")
fig.tight_layout()

"""
A concept bottleneck: name what the model must compute
======================================================

A concept bottleneck model (Koh et al. 2020) predicts named, physical quantities first and its
target from them only, so what it uses can be read and set. :class:`scimech.ConceptBottleneck`
is an encoder, a :class:`scimech.ConceptLayer` of prescribed concepts (supervised with their
true values) and free ones (not supervised: room for what the prescribed ones miss), then a
linear head.

Here a target is the sum of two known processes and one nobody prescribed. The trained model
reads the known ones into their concepts, its free concept takes up part of the third (with
either sign: nothing supervises it), and a test-time intervention (the true value of a concept put in) shows how much each concept's
error costs the forecast (:func:`scimech.analysis.concepts.intervention_efficacy`).
"""

import matplotlib.pyplot as plt
import numpy as np
import torch
from torch import nn

import scimech as sm
from scimech.analysis.concepts import fit_cbm, intervention_efficacy, predict_cbm

g = torch.Generator().manual_seed(0)
n = 2000
x = torch.randn(n, 6, generator=g)
forcing = x[:, 0] + 0.5 * x[:, 1]  # known process 1: linear in the inputs
mixing = torch.tanh(x[:, 2] * x[:, 3])  # known process 2: nonlinear
hidden = 0.8 * torch.sin(x[:, 4])  # a process nobody prescribed
y = forcing + mixing + hidden + 0.05 * torch.randn(n, generator=g)
c = torch.stack([forcing, mixing], 1)

batches = [{"x": x[i : i + 200], "y": y[i : i + 200, None], "c": c[i : i + 200]} for i in range(0, 1600, 200)]
test = [{"x": x[1600:], "y": y[1600:, None], "c": c[1600:]}]

torch.manual_seed(0)
encoder = nn.Sequential(nn.Linear(6, 32), nn.GELU(), nn.Linear(32, 32), nn.GELU())
model = sm.ConceptBottleneck(encoder, sm.ConceptLayer(32, ["forcing", "mixing"], n_free=1))

# %%
# ``mixed`` trains task and concepts together, the concept loss's weight falling from 0.8 to
# 0.2 over the epochs:
history = fit_cbm(model, batches, regime="mixed", epochs=15, lr=1e-2, val_batches=test)
print(history[["train_task", "train_concept", "val_task"]].isel(epoch=[0, -1]).to_dataframe().round(3))

# %%
# The concepts on held-out inputs against their truth, the free concept against the process
# nobody named, and what the true value of each concept does to the forecast's error:
out = predict_cbm(model, test)
truth = {"forcing": forcing[1600:], "mixing": mixing[1600:], "free": hidden[1600:]}
efficacy = intervention_efficacy(model, test)
print(efficacy.to_dataframe().round(3))

fig, axes = plt.subplots(1, 4, figsize=(14, 3.3))
for j, (ax, name) in enumerate(zip(axes, truth)):
    ax.scatter(truth[name], out["concepts"][:, j], s=3, alpha=0.4)
    r = np.corrcoef(truth[name], out["concepts"][:, j])[0, 1]
    ax.set(xlabel=f"true {'hidden process' if name == 'free' else name}", ylabel=f"concept '{name}'")
    ax.set_title(f"r = {r:+.2f}", fontsize="medium")
axes[3].bar(efficacy["intervention"].values, efficacy["mae"].values)
axes[3].set(ylabel="test MAE of y", title="true concept values put in")
fig.tight_layout()

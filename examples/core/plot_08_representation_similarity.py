"""
Compare representations across layers and models
================================================

Do two models, or two layers, represent the same inputs alike? :func:`scimech.linear_cka`
(centred kernel alignment, Kornblith et al. 2019) compares two sets of activations of the same
samples whatever their widths and bases: 1 for representations equal up to a rotation and a
scale, near 0 for unrelated ones. :func:`scimech.procrustes_distance` is its
distance-like cousin.

Here: every layer of a small GPT-2 (random weights, seed 0) against every layer of a twin
with other random weights (seed 1), and against itself.
"""

import matplotlib.pyplot as plt
import numpy as np
import torch
import transformers

import scimech as sm


def gpt2(seed):
    torch.manual_seed(seed)
    config = transformers.GPT2Config(
        n_layer=4, n_head=4, n_embd=64, vocab_size=50, n_positions=32, bos_token_id=0, eos_token_id=0
    )
    return transformers.GPT2Model(config).eval()


tokens = torch.randint(0, 50, (300, 10), generator=torch.Generator().manual_seed(2))
sites = ["wte"] + [f"h.{i}" for i in range(4)]
reps = {}
for seed in (0, 1):
    acts = sm.record(gpt2(seed), tokens, sites, reduce="mean")  # the mean over the tokens
    reps[seed] = [acts[s].values for s in sites]

# %%
# CKA of every pair of layers, within a model and across the two:
names = ["emb", "0", "1", "2", "3"]
within = np.array([[sm.linear_cka(a, b) for b in reps[0]] for a in reps[0]])
across = np.array([[sm.linear_cka(a, b) for b in reps[1]] for a in reps[0]])
print("CKA of each layer with the same layer of the twin:", np.round(np.diag(across), 2))
print("Procrustes distance, last layers:", round(sm.procrustes_distance(reps[0][-1], reps[1][-1]), 3))

fig, axes = plt.subplots(1, 2, figsize=(10.5, 4), layout="constrained")
for ax, m, title in zip(axes, (within, across), ("seed 0 against itself", "seed 0 against seed 1")):
    im = ax.imshow(m, vmin=0, vmax=1, cmap="magma", origin="lower")
    ax.set_xticks(range(5), names)
    ax.set_yticks(range(5), names)
    ax.set(xlabel="layer", title=title)
    for i in range(5):
        for j in range(5):
            ax.text(j, i, f"{m[i, j]:.2f}", ha="center", va="center", color="w" if m[i, j] < 0.6 else "k", fontsize=8)
axes[0].set_ylabel("layer (seed 0)")
fig.colorbar(im, ax=axes, label="linear CKA")

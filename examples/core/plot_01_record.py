"""
Record a transformer's activations
==================================

:func:`scimech.record` runs a model and returns what named sites produced as an
:class:`xarray.Dataset` whose dims say what they are (``sample``, ``position``, ``feature``).
Here the model is a small GPT-2 of Hugging Face ``transformers``, built from a config with
random weights; the sites are its blocks, named as ``model.named_modules()`` names them.
"""

import matplotlib.pyplot as plt
import numpy as np
import torch
import transformers

import scimech as sm

torch.manual_seed(0)
config = transformers.GPT2Config(
    n_layer=4, n_head=4, n_embd=64, vocab_size=50, n_positions=32, bos_token_id=0, eos_token_id=0
)
model = transformers.GPT2LMHeadModel(config).eval()
tokens = torch.randint(0, 50, (256, 12))  # 256 sequences of 12 tokens

# %%
# Every site of the model, heads included (GPT-2's fused attention is split by its ``c_proj``):
sites = sm.list_sites(model)
print(len(sites), "sites, e.g.", [s for s in sites if s.startswith("transformer.h.1.attn")])

# %%
# The output of each block, at every token:
blocks = [f"transformer.h.{i}" for i in range(config.n_layer)]
acts = sm.record(model, tokens, blocks)
print(acts[blocks[0]].dims, acts[blocks[0]].shape)

# %%
# :func:`scimech.stack_sites` puts the blocks on one ``layer`` dim; the size of the residual
# stream by layer and position is then one line of xarray:
stream = sm.stack_sites(acts, blocks, dim="layer", coord=list(range(config.n_layer)))
norm = np.sqrt((stream**2).sum("feature")).mean("sample")
print(norm.dims)

# %%
# A variable of the input (how often token 7 occurs in the sequence) against the feature of
# the last block, averaged over the tokens (``reduce="mean"``), that follows it most closely:
count = (tokens == 7).sum(1).numpy()
last = sm.record(model, tokens, blocks[-1:], reduce="mean")[blocks[-1]]  # (sample, feature)
r = [abs(np.corrcoef(last[:, j], count)[0, 1]) for j in range(last.sizes["feature"])]
best = int(np.argmax(r))

fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
norm.plot(ax=left, cmap="viridis", cbar_kwargs={"label": "mean |activation|"})
left.set_title("residual stream size by layer and token")
left.set_yticks(range(config.n_layer))
sm.feature_vs_variable(last.isel(feature=best), count, ax=right, bins=6)
right.set_xlabel("occurrences of token 7")
right.set_title(f"feature {best} of the last block, mean over tokens (|r| = {r[best]:.2f})", fontsize="medium")
fig.tight_layout()

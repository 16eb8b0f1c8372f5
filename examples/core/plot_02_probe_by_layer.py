"""
Probe every layer for a variable
================================

A linear probe asks whether a variable can be read off a layer's activations, and
:func:`scimech.probe_sites` asks it of every layer at once: cross-validated skill
(held-out folds), a bootstrap interval, and a control task (labels shuffled within the
structure of the data) that says how much skill a probe gets from memorising alone.
:func:`scimech.probe_curve` draws it by layer.

The model is a small BERT of ``transformers`` with random weights; the variable is how
often one token occurs in the sequence, read from the ``[CLS]`` position, where only
attention can have brought it.
"""

import matplotlib.pyplot as plt
import torch
import transformers

import scimech as sm

torch.manual_seed(0)
config = transformers.BertConfig(
    num_hidden_layers=4,
    num_attention_heads=4,
    hidden_size=64,
    intermediate_size=128,
    vocab_size=30,
    max_position_embeddings=32,
)
model = transformers.BertModel(config).eval()
tokens = torch.randint(1, 30, (400, 16))
tokens[:, 0] = 0  # the [CLS] position
count = (tokens == 5).sum(1).float().numpy()  # the variable: occurrences of token 5

# %%
# The ``[CLS]`` position of each layer's output (its embedding is the same in every sequence):
sites = [f"encoder.layer.{i}" for i in range(config.num_hidden_layers)]
acts = sm.record(model, {"input_ids": tokens}, sites, reduce="first")
print({s: acts[s].shape for s in sites})

# %%
# One probe per layer; ``dim="layer"`` with its coordinates:
probes = sm.probe_sites(acts, count, cv=5, n_bootstrap=200, dim="layer", coords=list(range(len(sites))))
print(probes[["score_mean", "control_mean", "selectivity_mean"]].to_dataframe().round(3))

# %%
# The embedding of ``[CLS]`` knows nothing of the other tokens; the first attention layer
# gathers them, and the skill by layer says how well each layer keeps what was gathered:
ax = sm.probe_curve(probes)
ax.set_title("R$^2$ of a probe for the count of token 5, at [CLS]")
plt.tight_layout()

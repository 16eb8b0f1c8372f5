"""
Ablate every head, three ways
=============================

:func:`scimech.ablation_sweep` knocks out one site at a time and measures how a metric of
the output moves. What "knocked out" means is a choice: ``zero`` (set to 0, a value the
model may never have seen), ``mean`` (the mean over reference inputs) or ``resample`` (the
activation of another input). :func:`scimech.layer_head_map` lays the effect of each head out
by layer and head; cells whose bootstrap interval over samples includes 0 are hatched.

The model is a small GPT-2 of ``transformers`` with random weights, the metric the
difference of two logits at the last token.
"""

import matplotlib.pyplot as plt
import torch
import transformers

import scimech as sm
from scimech.causal import metrics

torch.manual_seed(0)
config = transformers.GPT2Config(
    n_layer=3, n_head=4, n_embd=64, vocab_size=50, n_positions=32, bos_token_id=0, eos_token_id=0
)
model = transformers.GPT2LMHeadModel(config).eval()
tokens = torch.randint(0, 50, (96, 10))
reference = torch.randint(0, 50, (96, 10))  # what "mean" and "resample" take their values from

heads = [s for s in sm.list_sites(model) if ".heads[" in s]
metric = metrics.logit_difference(7, 8, key="logits")  # logit of token 7 minus token 8

# %%
# One sweep per method; every result carries ``layer`` and ``head`` coordinates on ``site``:
results = {
    method: sm.ablation_sweep(model, tokens, heads, metric, method=method, reference=reference)
    for method in ("zero", "mean", "resample")
}
print(results["mean"].effect.coords["layer"].values, results["mean"].attrs["sweep_path"])

# %%
# The same heads, ranked differently by the three methods:
fig, axes = plt.subplots(1, 3, figsize=(12, 3.4), sharey=True)
for ax, (method, res) in zip(axes, results.items()):
    sm.layer_head_map(res, "effect", ax=ax)
    ax.set_title(f"method={method!r}")
fig.suptitle("change of logit[7] - logit[8] when one head is ablated (hatched: the 95% interval includes 0)")
fig.tight_layout()

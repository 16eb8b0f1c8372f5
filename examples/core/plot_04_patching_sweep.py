"""
Patch clean activations into a corrupted run
============================================

Activation patching compares two inputs that differ in one thing. :func:`scimech.patching_sweep`
runs the corrupted input and, one site at a time, puts back that site's activation from the
clean run; ``normalized_effect`` is the fraction of the clean-vs-corrupted difference of the
metric that the site restores on its own (1: all of it).

The model is a small BERT classifier of ``transformers`` with random weights. The clean and
corrupted sequences differ at one position only, so every bit of the difference has to travel
from that token to ``[CLS]``, where the classifier reads: through attention, in some layer.
"""

import matplotlib.pyplot as plt
import torch
import transformers

import scimech as sm
from scimech.causal import metrics

torch.manual_seed(0)
config = transformers.BertConfig(
    num_hidden_layers=3,
    num_attention_heads=4,
    hidden_size=64,
    intermediate_size=128,
    vocab_size=30,
    max_position_embeddings=32,
    num_labels=1,
)
model = transformers.BertForSequenceClassification(config).eval()

clean = torch.randint(1, 30, (48, 8))
clean[:, 0] = 0  # [CLS]
corrupted = clean.clone()
corrupted[:, 5] = torch.randint(1, 30, (48,))  # another token at position 5, nothing else changed

# %%
# Heads of every layer, and each layer's whole output (which carries ``layer`` but no ``head``):
heads = [s for s in sm.list_sites(model) if ".heads[" in s]
layers = [f"bert.encoder.layer.{i}" for i in range(config.num_hidden_layers)]
score = metrics.output(key="logits", index=(0,))  # the classifier's score
res = sm.patching_sweep(model, {"input_ids": clean}, {"input_ids": corrupted}, heads + layers, score)
print(res.normalized_effect.sel(site=layers).mean("sample").round(3).to_series())

# %%
# A whole layer's output restores the clean score exactly: it holds every position, position 5
# among them. One head restores only part of it; the map shows which heads carry the changed
# token, and the bars whether the heads of a layer add up to their layer (effects of patching
# are not additive in general: the parts of a layer interact downstream).
mean = res.normalized_effect.mean("sample")
fig, (left, right) = plt.subplots(1, 2, figsize=(11, 3.6), gridspec_kw={"width_ratios": [1.4, 1]})
sm.layer_head_map(res, "normalized_effect", ax=left)
left.set_title("one head patched (hatched: 95% interval includes 0)", fontsize="medium")
by_layer = mean.sel(site=heads).groupby("layer").sum()
right.bar(by_layer["layer"], by_layer.values, label="sum over its heads, each patched alone")
right.plot(range(len(layers)), mean.sel(site=layers).values, "k_", ms=30, mew=2, label="the whole layer")
right.set(xlabel="layer", ylabel="normalized effect", xticks=range(len(layers)), ylim=(0, 1.6))
right.legend(fontsize="small", loc="upper center")
fig.tight_layout()

"""
Which inputs did the forecast use? Attribution with captum
==========================================================

:func:`scimech.attribute` runs captum's attribution methods (integrated gradients, GradientSHAP,
layer conductance, feature ablation) and returns an :class:`xarray.DataArray` shaped like the
inputs, with the dims you name.

The model here is built so that the answer is known: a convolution over a 24 x 24 map whose
output is the mean over a box (a "basin"), so only the box and the one-cell rim its 3 x 3
kernel reaches can matter. Integrated gradients are complete: the attributions of a sample sum
to its output minus the baseline's, which the script checks.
"""

import matplotlib.pyplot as plt
import numpy as np
import torch
from torch import nn

import scimech as sm


class BasinMean(nn.Module):
    """A 3 x 3 convolution, a nonlinearity, then the mean over the box rows 8-13, columns 5-16."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Sequential(nn.Conv2d(2, 8, 3, padding=1), nn.Tanh(), nn.Conv2d(8, 1, 1))
        self.box = (slice(8, 14), slice(5, 17))

    def forward(self, x):
        return self.conv(x)[:, 0, self.box[0], self.box[1]].mean((1, 2))


torch.manual_seed(0)
model = BasinMean().eval()
maps = torch.randn(16, 2, 24, 24)  # two input fields, e.g. SST and wind stress

attributions = sm.attribute(
    model,
    maps,
    method="integrated_gradients",
    n_steps=64,
    dims=["sample", "field", "y", "x"],
    coords={"field": ["sst", "tau"]},
)
print(attributions.dims, attributions.attrs.get("method"))

# %%
# Completeness, and where the attributions are (outside the box and its rim: exactly 0):
with torch.no_grad():
    gap = model(maps) - model(torch.zeros_like(maps))
total = attributions.sum(("field", "y", "x"))
print("max |sum of attributions - (f(x) - f(0))|:", float(np.abs(total.values - gap.numpy()).max()))
reach = np.zeros((24, 24), bool)
reach[7:15, 4:18] = True
outside = float(np.abs(attributions.values[..., ~reach]).max())
print("largest |attribution| outside the box and its rim:", outside)

# %%
# The mean absolute attribution per field, with the box drawn:
fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
for ax, field in zip(axes, attributions.field.values):
    abs(attributions.sel(field=field)).mean("sample").plot(ax=ax, cmap="viridis")
    ax.add_patch(plt.Rectangle((4.5, 7.5), 12, 6, fill=False, ec="w", lw=1.5))
    ax.set_title(f"mean |integrated gradients|, field '{field}'", fontsize="medium")
    ax.invert_yaxis()
fig.tight_layout()

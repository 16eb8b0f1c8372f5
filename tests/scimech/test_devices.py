"""Verbs run where the model lives: no tensor is created on torch's default device.

On a GPU a verb that allocates with torch's defaults (``torch.zeros(n)``, a CPU
``torch.randint``) puts that tensor on the CPU next to CUDA activations and fails or
copies. There is no GPU here, so the test makes the *default* device one that cannot hold
data (``meta``) while the model and inputs stay on the CPU: any allocation that relies on the
default lands on ``meta`` and the verb breaks. Every verb must then give exactly the numbers
it gives with the ordinary default (the only tensors made on purpose off the model's device
are the CPU draws of resample ablation, seeded there so a draw is the same on every device,
and the result rows bound for numpy).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import scimech as sm
from scimech.capture.attention import decompose_attention


@pytest.fixture(scope="module")
def setup():
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(16, 4, 32, batch_first=True, dropout=0.0)
    model = decompose_attention(
        nn.Sequential(nn.Linear(3, 16), nn.TransformerEncoder(layer, 2, enable_nested_tensor=False), nn.Linear(16, 1))
    ).eval()
    g = torch.Generator().manual_seed(1)
    x, x2 = torch.randn(6, 5, 3, generator=g), torch.randn(6, 5, 3, generator=g)
    return model, x, x2, ["1.layers.0.self_attn.heads[1]", "1.layers.1", "1.layers.1.linear1.units[2]"]


def _all_verbs(model, x, x2, sites):
    out = {"record": sm.record(model, x, sites, reduce="mean")[sites[0]].values}
    for method in ("resample", "mean", "zero"):
        out[method] = sm.ablation_sweep(model, x, sites, method=method, reference=x2).effect.values
    out["patching"] = sm.patching_sweep(model, x, x2, sites).patched.values
    out["atp"] = sm.attribution_patching(model, x, x2, sites, graddrop=True, verify_top=2).effect.values
    with torch.no_grad(), sm.ablate(model, sites[:1], method="resample", reference=x2, seed=3):
        out["ablate"] = model(x).numpy()
    acts = sm.record(model, x2, sites[1:2])[sites[1]].values
    with torch.no_grad(), sm.patch(model, {sites[1]: torch.from_numpy(acts)}):
        out["patch"] = model(x).numpy()
    return out


def test_no_verb_allocates_on_the_default_device(setup):
    model, x, x2, sites = setup
    expected = _all_verbs(model, x, x2, sites)
    torch.set_default_device("meta")
    try:
        got = _all_verbs(model, x, x2, sites)
    finally:
        torch.set_default_device(None)
    for k, v in expected.items():
        np.testing.assert_array_equal(got[k], v, err_msg=k)
    # and the verbs did something: patching layer 1 with x2's activations gives x2's output
    with torch.no_grad():
        np.testing.assert_allclose(got["patch"], model(x2).numpy(), atol=1e-5)

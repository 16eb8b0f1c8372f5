"""GPT-2 heads against TransformerLens 4.3 on the same weights.

The TransformerBridge is built offline around a deep copy of the HF GPT2LMHeadModel with
``transformer_lens.model_bridge.sources.build_bridge_from_module`` (no hub access: the
config comes from the local model, and no tokenizer is needed for token inputs). The bridge
replaces submodules of the model it wraps, hence the copy: scimech runs on the untouched
``lm.transformer``. TL's ``blocks.{l}.attn.hook_z`` (batch, pos, head, d_head) and its
patching functions are the truth for head activations and head patching.
"""

from __future__ import annotations

import copy
from types import SimpleNamespace

import numpy as np
import pytest
import torch

import scimech as sm

from .helpers import ATOL, npy

B, T = 3, 7


@pytest.fixture(scope="module")
def tl(gpt2):
    from transformer_lens.model_bridge.sources import build_bridge_from_module

    bridge_lm = copy.deepcopy(gpt2.lm)
    bridge = build_bridge_from_module(bridge_lm, "GPT2LMHeadModel", hf_config=bridge_lm.config)
    bridge.eval()
    g = torch.Generator().manual_seed(20)
    clean, corrupted = torch.randint(0, 64, (B, T), generator=g), torch.randint(0, 64, (B, T), generator=g)
    return SimpleNamespace(bridge=bridge, clean=clean, corrupted=corrupted)


def tl_metric(logits):
    """The conftest metric on TL's logits: logit of token 5 minus token 7, last position."""
    return logits[:, -1, 5] - logits[:, -1, 7]


def test_the_bridge_runs_the_same_weights(gpt2, tl):
    with torch.no_grad():
        np.testing.assert_allclose(
            npy(tl_metric(tl.bridge(tl.clean))), npy(gpt2.metric(gpt2.model(tl.clean))), atol=ATOL
        )


def test_head_recording_equals_hook_z(gpt2, tl):
    sites = [f"h.{layer}.attn.heads" for layer in range(2)] + [
        f"h.{layer}.attn.heads[{h}]" for layer in range(2) for h in range(4)
    ]
    ds = sm.record(gpt2.model, tl.clean, sites)
    with torch.no_grad():
        _, cache = tl.bridge.run_with_cache(tl.clean)
    for layer in range(2):
        z = npy(cache[f"blocks.{layer}.attn.hook_z"])  # (batch, pos, head, d_head)
        assert z.shape == (B, T, 4, 8)
        np.testing.assert_allclose(ds[f"h.{layer}.attn.heads"].values, z, atol=ATOL)
        for h in range(4):
            np.testing.assert_allclose(ds[f"h.{layer}.attn.heads[{h}]"].values, z[:, :, h], atol=ATOL)


def test_patching_sweep_equals_transformer_lens_head_patching(gpt2, tl):
    from transformer_lens import patching

    sites = [f"h.{layer}.attn.heads[{h}]" for layer in range(2) for h in range(4)]
    res = sm.patching_sweep(gpt2.model, tl.clean, tl.corrupted, sites, gpt2.metric)
    with torch.no_grad():
        _, clean_cache = tl.bridge.run_with_cache(tl.clean)
        per_sample = patching.get_act_patch_attn_head_out_all_pos(
            tl.bridge, tl.corrupted, clean_cache, tl_metric, reduce="none"
        ).values  # (layer, head, batch)
    expect = npy(per_sample).reshape(8, B)
    np.testing.assert_allclose(res.patched.values, expect, atol=ATOL)


def test_noising_equals_run_with_hooks_on_hook_z(gpt2, tl):
    sites = [f"h.{layer}.attn.heads[{h}]" for layer in range(2) for h in range(4)]
    res = sm.patching_sweep(gpt2.model, tl.clean, tl.corrupted, sites, gpt2.metric, direction="noising")
    with torch.no_grad():
        _, corrupted_cache = tl.bridge.run_with_cache(tl.corrupted)
        for layer in range(2):
            name = f"blocks.{layer}.attn.hook_z"
            for h in range(4):

                def put(z, hook, h=h, name=name):
                    z = z.clone()
                    z[:, :, h] = corrupted_cache[name][:, :, h]
                    return z

                logits = tl.bridge.run_with_hooks(tl.clean, fwd_hooks=[(name, put)])
                np.testing.assert_allclose(
                    res.patched.sel(site=f"h.{layer}.attn.heads[{h}]").values, npy(tl_metric(logits)), atol=ATOL
                )


def test_the_bridges_own_hook_z_is_recorded_and_ablated_by_head_as_tl_shows_it(tl):
    """The bridge's hook_z module sees a flat (batch, pos, head * d_head) tensor that TL's hooks
    and cache see as (batch, pos, head, d_head): scimech reads it TL's way."""
    ds = sm.record(tl.bridge, tl.clean, ["blocks.0.attn.hook_z", "blocks.0.attn.hook_z.heads[1]"])
    with torch.no_grad():
        _, cache = tl.bridge.run_with_cache(tl.clean)
    z = npy(cache["blocks.0.attn.hook_z"])
    assert ds["blocks.0.attn.hook_z"].dims == ("sample", "position", "head", "head_dim")
    np.testing.assert_allclose(ds["blocks.0.attn.hook_z"].values, z, atol=ATOL)
    np.testing.assert_allclose(ds["blocks.0.attn.hook_z.heads[1]"].values, z[:, :, 1], atol=ATOL)

    def zero_head(value, hook):
        value = value.clone()
        value[:, :, 1] = 0.0
        return value

    with torch.no_grad():
        truth = tl_metric(tl.bridge.run_with_hooks(tl.clean, fwd_hooks=[("blocks.0.attn.hook_z", zero_head)]))
        with sm.ablate(tl.bridge, "blocks.0.attn.hook_z.heads[1]", method="zero"):
            got = tl_metric(tl.bridge(tl.clean))
    np.testing.assert_allclose(npy(got), npy(truth), atol=ATOL)

"""Head sweeps on a tiny random AION reuse the encoder's unpatched prefix and equal the
naive loop (one forward pass of the whole model per head, inside ``ablate`` / ``patch``)."""

from __future__ import annotations

import numpy as np
import torch
from aion import AION

from astro import synthetic
from astro.models import aion as aion_adapter
from astro.models import standin
from scimech import attribution_patching
from scimech.capture.record import Recorder
from scimech.causal.intervene import ablate, ablation_sweep, patch, patching_sweep

TINY = dict(
    domains_in=[*aion_adapter.LEGACY_SCALARS, "tok_image"],
    domains_out=["tok_z"],
    dim=32,
    encoder_depth=2,
    decoder_depth=1,
    num_heads=4,
    mlp_ratio=2.0,
    qkv_bias=True,
    proj_bias=True,
    mlp_bias=True,
    norm_bias=True,
    act_layer="GELU",
    gated_mlp=False,
    qk_norm=False,
)
ATOL = 1e-6  # expected redshift (0..1) through a few float32 layers


def test_aion_head_sweeps_reuse_the_prefix_and_equal_the_naive_loop():
    sample = synthetic.make_galaxies(12, seed=11, images=False)
    torch.manual_seed(0)
    ad = aion_adapter.AIONRedshift(
        AION(TINY).eval(), standin.fit_codecs(sample.catalog, reservoir_size=12, codebook_size=32)
    )
    tokens = ad.tokenize(sample.catalog[:5])
    tokens["tok_image"] = torch.randint(0, 4375, (5, 576), generator=torch.Generator().manual_seed(1))  # 24 x 24
    multi, phot = ad.batch(tokens), ad.batch(tokens, masked=[aion_adapter.IMAGE_KEY])
    sites, metric = ad.head_sites(), ad.z_metric()
    kw = dict(forward=ad.forward, max_rows=10)  # 2 heads per tiled forward

    abl = ablation_sweep(ad.model, multi, sites, metric, method="zero", **kw)
    full = ablation_sweep(ad.model, multi, sites, metric, method="zero", reuse_prefix=False, **kw)
    pt = patching_sweep(ad.model, multi, phot, sites, metric, direction="noising", **kw)
    assert abl.attrs["sweep_path"] == pt.attrs["sweep_path"] == "prefix_reuse"
    assert full.attrs["sweep_path"] == "batched"
    with torch.no_grad():
        with Recorder(ad.model, sites) as rec:
            ad.forward(ad.model, phot)
        for s in sites:
            with ablate(ad.model, [s], method="zero"):
                z_abl = metric(ad.forward(ad.model, multi)).numpy()
            with patch(ad.model, {s: rec.activations[s]}):
                z_pt = metric(ad.forward(ad.model, multi)).numpy()
            np.testing.assert_allclose(abl.ablated.sel(site=s).values, z_abl, atol=ATOL, rtol=0)
            np.testing.assert_allclose(full.ablated.sel(site=s).values, z_abl, atol=ATOL, rtol=0)
            np.testing.assert_allclose(pt.patched.sel(site=s).values, z_pt, atol=ATOL, rtol=0)
    # attribution patching runs through the adapter too, and its verified top heads are exact
    est = attribution_patching(
        ad.model, multi, phot, sites, metric, direction="noising", forward=ad.forward, verify_top=3
    )
    top = est.site.values[est.verified.values]
    np.testing.assert_allclose(
        est.exact_patched.sel(site=top).values, pt.patched.sel(site=top).values, atol=ATOL, rtol=0
    )

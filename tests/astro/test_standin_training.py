"""The stand-in's training guards: noisy views of the catalogue, early stopping on a
validation split, frozen embedding tables (astro.models.standin)."""

from __future__ import annotations

import astropy.units as u
import numpy as np
import pytest
import torch

from astro import synthetic
from astro.models import aion as aion_adapter
from astro.models import standin


def _tiny(n=40, seed=5):
    s = synthetic.make_galaxies(n, seed=seed)
    codecs = standin.fit_codecs(s.catalog, reservoir_size=n, codebook_size=32, z_codebook_size=64)
    ad = aion_adapter.AIONRedshift(standin.build(codecs=codecs), codecs, standin.PatchTokenizer(vocab=16).fit(s.images))
    return s, ad


def test_noisy_catalog_redraws_fluxes_within_errors_and_rotates_shapes():
    s = synthetic.make_galaxies(1500, seed=6, images=False)
    cat = standin.noisy_catalog(s.catalog, np.random.default_rng(0))
    for b in "griz":
        sig = 1 / np.sqrt(u.Quantity(s.catalog[f"flux_ivar_{b}"]).to_value(u.nmgy**-2))
        pull = (u.Quantity(cat[f"flux_{b}"]) - u.Quantity(s.catalog[f"flux_{b}"])).to_value(u.nmgy) / sig
        # unit-variance pulls: the sample std of 1500 N(0,1) draws is 1 +- 0.018; 0.06 is > 3 sigma
        assert abs(np.std(pull) - 1) < 0.06 and abs(np.mean(pull)) < 0.1
    e0 = np.hypot(np.asarray(s.catalog["shape_e1"], float), np.asarray(s.catalog["shape_e2"], float))
    e1 = np.hypot(np.asarray(cat["shape_e1"], float), np.asarray(cat["shape_e2"], float))
    np.testing.assert_allclose(e1, e0, rtol=1e-12, atol=1e-15)  # a rotation keeps |e|
    assert not np.allclose(np.asarray(cat["shape_e1"]), np.asarray(s.catalog["shape_e1"]))
    for col, sc in (("shape_r", standin.SHAPE_SCATTER), ("ebv", standin.EBV_SCATTER)):
        lr = np.log(u.Quantity(cat[col]).value / u.Quantity(s.catalog[col]).value)
        assert abs(np.std(lr) - sc) < 0.1 * sc  # std of 1500 draws: sc (1 +- 0.018)
    assert cat["flux_g"].unit == s.catalog["flux_g"].unit and cat["z"] is not s.catalog["z"]
    np.testing.assert_array_equal(np.asarray(cat["z"]), np.asarray(s.catalog["z"]))  # truth untouched


def test_noisy_views_start_with_the_measured_catalogue_and_turn_the_images():
    s, ad = _tiny()
    views = standin.noisy_views(ad, s.catalog, s.images, 3, seed=1)
    ref = ad.tokenize(s.catalog, s.images)
    assert len(views) == 3 and all(set(v) == set(ref) for v in views)
    for k in ref:
        torch.testing.assert_close(views[0][k], ref[k])
    assert not torch.equal(views[1]["tok_flux_r"], ref["tok_flux_r"])
    # view 2: two quarter turns of the stamps = the 6x6 token grid turned by hand
    grid = ref["tok_image"].reshape(-1, 6, 6)
    torch.testing.assert_close(views[2]["tok_image"], torch.rot90(grid, 2, dims=(1, 2)).reshape(-1, 36))
    shared = standin.noisy_views(ad, s.catalog, s.images, 2, seed=1, rotate_images=False)
    torch.testing.assert_close(shared[1]["tok_image"], ref["tok_image"])


def test_early_stopping_keeps_the_best_validation_epoch():
    s, ad = _tiny()
    z = np.asarray(s.catalog["z"], float)
    hist = standin.train(
        ad, ad.tokenize(s.catalog, s.images), z, epochs=3, batch_size=10, val_fraction=0.25, seed=0, lr=3e-2
    )
    vals = hist["val_mean_abs_dz"]
    assert hist["n_val"] == 10 and len(vals) == 3 and hist["best_epoch"] == int(np.argmin(vals)) + 1
    # recompute by hand on the restored model: the same seeded split, mean|dz| of both modes
    order = torch.randperm(40, generator=torch.Generator().manual_seed(777)).numpy()[:10]
    tok = {k: v[order] for k, v in ad.tokenize(s.catalog, s.images).items()}
    zv = z[order]
    got = np.mean([np.mean(np.abs(ad.predict_z(ad.batch(tok, masked=m)) - zv) / (1 + zv)) for m in (["tok_image"], [])])
    np.testing.assert_allclose(got, min(vals), rtol=1e-5)  # float32 forward, same batches


def test_table_lr_zero_freezes_the_smooth_tables_only():
    s, ad = _tiny()
    before = {n: p.detach().clone() for n, p in ad.model.named_parameters()}
    standin.train(ad, ad.tokenize(s.catalog, s.images), np.asarray(s.catalog["z"]), epochs=1, batch_size=10, table_lr=0)
    tables = {id(p) for p in standin._table_params(ad.model)}
    for n, p in ad.model.named_parameters():
        if id(p) in tables:
            torch.testing.assert_close(p.detach(), before[n], rtol=0, atol=0)
        assert p.requires_grad, n
    moved = [n for n, p in ad.model.named_parameters() if id(p) not in tables and not torch.equal(p, before[n])]
    assert any("encoder.0.attn.qkv" in n for n in moved)


def test_fewer_galaxies_than_a_batch_is_refused_rather_than_left_untrained():
    # the epoch loop takes whole batches: 60 galaxies at batch_size 64 took no step and reported a
    # loss of 0.0 per epoch, and a study would have gone on with an untrained model
    from astro.synthetic import make_galaxies
    from astro.training import train_standin
    from scimech.errors import ConfigError

    with pytest.raises(ConfigError, match="fewer than batch_size=64: not one training step"):
        train_standin(make_galaxies(60, seed=0), epochs=1, batch_size=64, n_views=1)

"""The training of the shipped stand-ins ends each stage on the checkpoint with the lowest held-out
mean|dz| (early stopping, astro.models.staged): on a training set small enough to be memorised the
kept checkpoint is not the last one, and the returned model scores on the validation galaxies what
the record says, recomputed here from its predictions."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from astro import synthetic
from astro.models.aion import IMAGE_KEY
from astro.training import STAGED_KEYS, train_standin_staged

#: a stand-in small enough to train in seconds, on few enough galaxies that it memorises them
SMALL = dict(
    planted=False,
    image_features="colours",
    codebook_size=128,
    reservoir_size=256,
    flux_reference="r",
    dim=16,
    encoder_depth=1,
    decoder_depth=1,
    num_heads=2,
    mlp_ratio=2.0,
    linear_init=1.0,
    n_views=1,
    phot_steps=0,
    steps=120,
    batch_size=32,
    phot_lr=3e-3,
    lr=1e-2,
    weight_decay=0.0,
    target_width=0.01,
    colour_weight=1.0,
    check_every=10,
    seed=0,
)


def _mean_abs_dz(z, zp):
    return float(np.mean(np.abs(np.asarray(zp) - z) / (1 + z)))


@pytest.fixture(scope="module")
def trained():
    torch.manual_seed(0)
    train = synthetic.make_galaxies(64, seed=3, world="degenerate")
    val = synthetic.make_galaxies(200, seed=4, world="degenerate")
    ad, hist = train_standin_staged(train, SMALL, validation=val)
    return ad, hist, val


def test_the_settings_name_every_key_the_training_reads():
    assert set(SMALL) == set(STAGED_KEYS)


def test_each_stage_ends_on_its_best_held_out_checkpoint(trained):
    ad, hist, val = trained
    checks = hist["checks_both"]
    assert [c["step"] for c in checks] == list(range(10, 121, 10))
    scores = np.array([c["score"] for c in checks])
    best = checks[int(np.argmin(scores))]
    assert hist["best_step_both"] == best["step"]
    # 64 galaxies for 120 steps of batch 32 (60 passes): the held-out error rises again, so the kept
    # checkpoint is an earlier one, strictly better than the last
    assert best["step"] < 120 and scores.min() < scores[-1]
    # the returned model is that checkpoint: its held-out mean|dz|, recomputed from its predictions
    z = np.asarray(val.catalog["z"], float)
    tok = ad.tokenize(val.catalog, val.images)
    phot = _mean_abs_dz(z, ad.predict_z(ad.batch(tok, masked=[IMAGE_KEY])))
    multi = _mean_abs_dz(z, ad.predict_z(ad.batch(tok)))
    assert phot == pytest.approx(best["photometry"], abs=1e-6)
    assert multi == pytest.approx(best["multimodal"], abs=1e-6)
    assert (phot + multi) / 2 == pytest.approx(best["score"], abs=1e-6)


def test_without_validation_galaxies_the_last_step_is_kept():
    train = synthetic.make_galaxies(64, seed=3, world="degenerate")
    ad, hist = train_standin_staged(train, {**SMALL, "steps": 20})
    assert "best_step_both" not in hist and len(hist["loss_both"]) == 20

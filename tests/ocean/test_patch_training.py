"""A study that trains on patches sampled from a grid larger than a patch (as OceanCBM trains, and as a
product at real size must) scores its test split on the whole grid: the unit's maps are the grid's.

The truth is the store itself: the unit's ``y_true`` at each test sample must be the target read from
the store at that sample's time (``t + lead``), member and grid point, and ``y_clim`` the training
months' mean of the same calendar month, computed here with xarray.

A product larger than the training's block cache is read in an order that shuffles within blocks of
time steps (:class:`ocean.data.samples.BlockSampler`); here the cache's floor is lowered so that the small
store is such a product, and the blocks read per epoch are counted.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from ocean import data, training
from ocean.data import samples
from ocean.plan import StudyConfig

from .test_training import NX, NY, planted_dataset


def test_a_unit_trained_on_patches_scores_the_whole_grid(tmp_path, monkeypatch):
    monkeypatch.setattr(samples, "MIN_CACHE_BYTES", 0)  # the cache holds two blocks of 10 months: out of core
    made = []
    make_batches = data.make_batches

    def spying(dataset, *a, **kw):
        made.append((dataset, make_batches(dataset, *a, **kw)))
        return made[-1][1]

    monkeypatch.setattr(data, "make_batches", spying)
    ds = planted_dataset()
    store = data.write_zarr(data.validate(ds), tmp_path / "planted.zarr", time_chunk=10)
    # 4 x 4 patches of the 8 x 8 grid: four tiles per window in training
    cfg = StudyConfig(
        synth={}, window=2, lead=1, epochs=1, batch_size=8, width=4, fractions=[0.6, 0.2, 0.2], patch=[4, 4]
    )
    unit = training.train_unit(dataclasses.asdict(cfg), "mixed", 0, str(store), str(tmp_path / "ck"))
    assert (unit.sizes["lat"], unit.sizes["lon"]) == (NY, NX)
    truth = ds["dmlhc_dt"].sel(time=unit["time"].values.astype(ds["time"].dtype)).values
    truth = truth[unit["member"].values, np.arange(unit.sizes["sample"])]
    ocean = ds["mask"].values.astype(bool)
    # float32 storage of the store and of the normalised round trip: 1e-4 relative
    np.testing.assert_allclose(unit["y_true"].values[:, ocean], truth[:, ocean], rtol=1e-4, atol=1e-3)
    assert np.isnan(unit["y_true"].values[:, ~ocean]).all()
    assert np.isfinite(unit["y_pred"].values[:, ocean]).all()
    # training: shuffled within blocks; the training and validation windows read through one cache, each of
    # the blocks they need read once per epoch (one epoch here)
    (train, batches), (val, _) = made[:2]
    assert batches.order == "blocks" and train.reader is val.reader
    assert train.reader.loads <= len(set(train.blocks) | set(val.blocks))


@pytest.mark.slow
def test_training_in_block_order_learns_as_the_global_shuffle(tmp_path, monkeypatch):
    """The two orders give every window once per epoch; only which windows share a batch differs (one
    block's: 10 months of patches), which changes the noise of the gradient steps, not what is learned. The
    validation loss after 3 epochs of the block order lies within 15 % of the global shuffle's, 2.5 times
    the spread between two seeds of the global shuffle itself (0.411 and 0.388: 6 %)."""
    store = data.write_zarr(data.validate(planted_dataset()), tmp_path / "planted.zarr", time_chunk=10)
    cfg = StudyConfig(
        synth={}, window=2, lead=1, epochs=3, batch_size=8, width=4, fractions=[0.6, 0.2, 0.2], patch=[4, 4]
    )
    loss = {}
    for floor in (256 * 2**20, 0):  # the store held whole (global shuffle), then two blocks (block order)
        monkeypatch.setattr(samples, "MIN_CACHE_BYTES", floor)
        unit = training.train_unit(dataclasses.asdict(cfg), "mixed", 0, str(store), str(tmp_path / f"ck{floor}"))
        loss[floor] = unit["hist_val_task"].values
    glob, blocks = loss[256 * 2**20], loss[0]
    assert blocks[-1] < 0.7 * blocks[0] and glob[-1] < 0.7 * glob[0]  # both learn
    assert abs(blocks[-1] - glob[-1]) <= 0.15 * glob[-1]

"""A study that trains on patches sampled from a grid larger than a patch (as OceanCBM trains, and as a
product at real size must) scores its test split on the whole grid: the unit's maps are the grid's.

The truth is the store itself: the unit's ``y_true`` at each test sample must be the target read from
the store at that sample's time (``t + lead``), member and grid point, and ``y_clim`` the training
months' mean of the same calendar month, computed here with xarray.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ocean import data, training
from ocean.plan import StudyConfig

from .test_training import NX, NY, planted_dataset


def test_a_unit_trained_on_patches_scores_the_whole_grid(tmp_path):
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

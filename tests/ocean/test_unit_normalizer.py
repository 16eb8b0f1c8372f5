"""A unit keeps the normalisation its model was trained with, and the report's attribution reuses it
instead of fitting it again over the product (at ORCA025 size a pass over every training month)."""

import dataclasses
import json

import numpy as np
import pytest

from ocean import data as odata
from ocean import training
from ocean.experiment import StudyConfig, prepare_data, train_unit
from ocean.variables import INPUTS


@pytest.fixture(scope="module")
def unit_and_store(tmp_path_factory):
    out = tmp_path_factory.mktemp("unit")
    cfg = StudyConfig(
        synth={"n_members": 1, "years": 4, "ny": 8, "nx": 8, "n_eddies": 2},
        window=2,
        epochs=1,
        width=4,
        regimes=["mixed"],
        seeds=[0],
        fractions=[0.6, 0.2, 0.2],
    )
    store = prepare_data(cfg, out)
    unit = train_unit(dataclasses.asdict(cfg), "mixed", 0, str(store), str(out / "checkpoints"))
    return unit, store, cfg


def test_the_unit_keeps_the_training_split_statistics(unit_and_store):
    unit, store, cfg = unit_and_store
    kept = json.loads(unit.attrs["normalizer"])
    ds = odata.open_zarr(store)
    split = training.study_split(ds, cfg)
    # by hand with numpy: the input steps of the training windows, ocean points only
    steps = np.arange(split.train.min() - cfg.window + 1, split.train.max() + 1)
    sea = ds["mask"].values.astype(bool)
    for name in INPUTS:
        v = ds[name].isel(time=steps).values[..., sea]
        assert kept["mean"][name] == pytest.approx(float(np.mean(v)), rel=1e-5, abs=1e-9)
        assert kept["std"][name] == pytest.approx(float(np.std(v)), rel=1e-4)
    target = ds[cfg.target].isel(time=split.train + cfg.lead).values[..., sea]
    assert kept["scale"] == pytest.approx(float(np.std(target)), rel=1e-4)


def test_the_report_reuses_the_kept_normaliser(unit_and_store, monkeypatch):
    unit, store, cfg = unit_and_store
    ds = odata.open_zarr(store)

    def refit(*a, **k):
        raise AssertionError("the normaliser was fitted again")

    monkeypatch.setattr(odata, "fit_normalizer", refit)
    norm = training.unit_normalizer(unit, ds, training.study_split(ds, cfg), cfg)
    assert norm.to_dict() == json.loads(unit.attrs["normalizer"])
    assert norm.scale == pytest.approx(unit.attrs["scale_W_m2"])


def test_a_unit_written_before_it_kept_one_is_fitted_again_on_the_same_split(unit_and_store):
    unit, store, cfg = unit_and_store
    ds = odata.open_zarr(store)
    old = unit.copy()
    kept = json.loads(old.attrs.pop("normalizer"))
    norm = training.unit_normalizer(old, ds, training.study_split(ds, cfg), cfg)
    assert norm.scale == pytest.approx(kept["scale"], rel=1e-6)
    assert norm.mean == pytest.approx(kept["mean"], rel=1e-6)

"""Resuming the ocean study is keyed by a fingerprint of its data and settings: a changed data
file or generator under the same settings sets the old units aside (``stale-<fingerprint>/``,
with a warning) instead of resuming them; the same data still skip finished units."""

from __future__ import annotations

import dataclasses
import shutil
import warnings

import numpy as np
import pytest

from ocean import data, run, synthetic
from ocean.plan import StudyConfig
from scimech.run.fingerprint import read_fingerprint
from scimech.run.results import UnitStore

SMALL = dict(n_members=1, years=3, ny=8, nx=10)
STUDY = dict(window=2, lead=1, epochs=1, batch_size=8, width=4, regimes=["mixed"], seeds=[0], fractions=[0.6, 0.2, 0.2])


def _boom(**kw):
    raise AssertionError("a finished unit was retrained")


@pytest.mark.slow  # two whole studies
def test_a_changed_data_file_sets_the_units_aside(tmp_path, monkeypatch):
    ds = synthetic.generate(synthetic.SynthConfig(**SMALL))
    store = data.write_zarr(ds, tmp_path / "ocean.zarr", time_chunk=12)
    cfg = StudyConfig(data=str(store), **STUDY)
    out = tmp_path / "run"
    _, first = run.run_units(cfg, out)
    fp = read_fingerprint(out)
    # the same data: resumed, nothing retrained, nothing set aside
    train = run.train_unit
    monkeypatch.setattr(run, "train_unit", _boom)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*held a study of other data")
        _, again = run.run_units(cfg, out)
    assert not list(out.glob("stale-*")) and read_fingerprint(out) == fp
    np.testing.assert_array_equal(again[("mixed", 0)]["y_pred"].values, first[("mixed", 0)]["y_pred"].values)
    # one changed value in the file, same path and settings: the target at the last month, one ocean cell
    changed = ds.load().copy(deep=True)
    j, i = np.argwhere(changed["mask"].values == 1)[0]
    changed["dmlhc_dt"][0, -1, j, i] += 100.0
    shutil.rmtree(store)
    data.write_zarr(changed, store, time_chunk=12)
    monkeypatch.setattr(run, "train_unit", train)
    with pytest.warns(UserWarning, match=rf"held a study of other data \(fingerprint {fp}, now \w+; changed: data\)"):
        _, new = run.run_units(cfg, out)
    stale = out / f"stale-{fp}"
    assert read_fingerprint(out) != fp and (stale / "summary.nc").exists()
    old_store = UnitStore(stale / "units")
    assert old_store.keys() == ["mixed/seed=0"]  # the old unit, kept aside
    old = old_store.load("mixed/seed=0")
    y_new, y_old = new[("mixed", 0)]["y_true"].values, old["y_true"].values
    assert not np.allclose(y_new, y_old, equal_nan=True)  # scored against the new data
    assert np.nanmax(np.abs(y_new - y_old)) == pytest.approx(100.0, rel=1e-3)


@pytest.mark.slow  # two whole studies
def test_a_changed_generator_sets_the_units_aside(tmp_path, monkeypatch):
    cfg = StudyConfig(synth=SMALL, **STUDY)
    out = tmp_path / "run"
    run.run_units(cfg, out)
    fp = read_fingerprint(out)
    before = data.open_zarr(out / "ocean.zarr")["q_hidden"].values
    # the same settings, a generator whose hidden flux is twice as strong
    gen = synthetic.generate
    monkeypatch.setattr(run, "generate", lambda c: gen(dataclasses.replace(c, hidden_coeff=2 * c.hidden_coeff)))
    with pytest.warns(UserWarning, match=rf"fingerprint {fp}, now \w+; changed: data"):
        _, units = run.run_units(cfg, out)
    stale = out / f"stale-{fp}"
    np.testing.assert_array_equal(data.open_zarr(stale / "ocean.zarr")["q_hidden"].values, before)
    after = data.open_zarr(out / "ocean.zarr")["q_hidden"].values
    assert not np.allclose(after, before, equal_nan=True)  # the new generator's ocean is studied
    old = UnitStore(stale / "units").load("mixed/seed=0")
    assert not np.allclose(units[("mixed", 0)]["c_true"].values, old["c_true"].values, equal_nan=True)
    # rerun with the new generator unchanged: resumed
    fp2 = read_fingerprint(out)
    monkeypatch.setattr(run, "train_unit", _boom)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*held a study of other data")
        run.run_units(cfg, out)
    assert read_fingerprint(out) == fp2 and sorted(p.name for p in out.glob("stale-*")) == [stale.name]


def test_other_result_settings_set_the_units_aside(tmp_path):
    ds = synthetic.generate(synthetic.SynthConfig(**SMALL))
    store = data.write_zarr(ds, tmp_path / "ocean.zarr", time_chunk=12)
    cfg = StudyConfig(data=str(store), **STUDY)
    fp, parts = run.study_fingerprint(cfg, data.open_store(store))
    # seeds, regimes and threads do not change a unit's result; the learning rate does
    same = dataclasses.replace(cfg, seeds=[0, 1], regimes=["mixed", "prediction_only"], torch_threads=0)
    assert run.study_fingerprint(same, data.open_store(store)) == (fp, parts)
    other_fp, other = run.study_fingerprint(dataclasses.replace(cfg, lr=1e-4), data.open_store(store))
    assert other_fp != fp and other["data"] == parts["data"] and other["settings"] != parts["settings"]

"""Resuming the astro study is keyed by a fingerprint of its inputs: under the same settings, a
changed synthetic generator or one changed value in a given sample sets the folder's units aside
(``stale-<fingerprint>/``, with a warning) instead of resuming them; the same inputs still skip
finished units. The analysis after the units is stubbed (the head study of block 0 only)."""

from __future__ import annotations

import dataclasses
import shutil
import warnings

import numpy as np
import pytest

import astro.run
from astro import synthetic
from astro.data.files import load_sample, save_sample
from astro.plan import DEFAULT_WORLD
from astro.run import run_resumable_study
from scimech.run.fingerprint import read_fingerprint
from scimech.run.results import UnitStore

# HIERARCH cards for the samples' long meta keys: astropy says so once per key, harmlessly
pytestmark = pytest.mark.filterwarnings("ignore::astropy.io.fits.verify.VerifyWarning")
SMALL = dict(n_train=40, n_test=16, epochs=1, batch_size=20, n_bootstrap=5, chunk_size=8)


@pytest.fixture
def heads_only(monkeypatch):
    """The study's analysis cut to the resumable units: the head interventions of block 0."""
    monkeypatch.setattr(
        astro.run, "gather_evidence", lambda ad, train, test, *, intervene, **kw: {"interventions": intervene(0)}
    )


def _boom(**kw):
    raise AssertionError("a finished unit was redone")


def _resumed(monkeypatch, run):
    """``run()`` with every unit function refusing to run and no stale warning allowed."""
    with monkeypatch.context() as m:
        for name in ("synth_unit", "train_unit", "interventions_unit", "catalog_unit"):
            m.setattr(astro.run, name, _boom)
        with warnings.catch_warnings():
            warnings.filterwarnings("error", message=".*held a study of other data")
            return run()


def test_a_changed_generator_sets_the_units_aside(tmp_path, monkeypatch, heads_only):
    out = tmp_path / "run"
    first, _ = run_resumable_study(out, sizes=SMALL, seed=0)
    fp = read_fingerprint(out)
    keys = UnitStore(out / "units").keys()
    assert {"synth/train", "synth/test", "train"} < set(keys)
    again, _ = _resumed(monkeypatch, lambda: run_resumable_study(out, sizes=SMALL, seed=0))
    np.testing.assert_array_equal(
        again["interventions"]["z_ablated"].values, first["interventions"]["z_ablated"].values
    )
    assert not list(out.glob("stale-*"))
    # the same settings, a world whose dust is stronger: the generator changed
    monkeypatch.setitem(
        synthetic.WORLDS, DEFAULT_WORLD, dataclasses.replace(synthetic.WORLDS[DEFAULT_WORLD], av_mean=0.9)
    )
    with pytest.warns(UserWarning, match=rf"fingerprint {fp}, now \w+; changed: generator\)"):
        new, _ = run_resumable_study(out, sizes=SMALL, seed=0)
    stale = out / f"stale-{fp}"
    assert UnitStore(stale / "units").keys() == keys and (stale / "plan.json").exists()
    assert read_fingerprint(out) not in (None, fp) and UnitStore(out / "units").keys() == keys
    old_av = np.asarray(load_sample(stale / "train.fits").catalog["a_v"])
    new_av = np.asarray(load_sample(out / "train.fits").catalog["a_v"])
    assert not np.allclose(new_av, old_av)  # drawn again, by the new generator
    assert not np.allclose(new["interventions"]["z_ablated"].values, first["interventions"]["z_ablated"].values)
    # rerun under the new generator: resumed
    _resumed(monkeypatch, lambda: run_resumable_study(out, sizes=SMALL, seed=0))
    assert [p.name for p in out.glob("stale-*")] == [stale.name]


@pytest.mark.slow  # two whole studies
def test_one_changed_value_in_a_given_sample_sets_the_units_aside(tmp_path, monkeypatch, heads_only):
    made = tmp_path / "made"
    run_resumable_study(made, sizes=SMALL, seed=0)
    given = tmp_path / "given"
    given.mkdir()
    shutil.copytree(made / "model", given / "model")
    for name in ("train.fits", "test.fits"):
        shutil.copy(made / name, given / name)
    files = dict(model=given / "model", train=given / "train.fits", test=given / "test.fits")
    out = tmp_path / "run"
    first, _ = run_resumable_study(out, sizes=SMALL, seed=0, **files)
    fp = read_fingerprint(out)
    _resumed(monkeypatch, lambda: run_resumable_study(out, sizes=SMALL, seed=0, **files))
    # one galaxy's g flux doubled in the test file, same path and settings
    test = load_sample(files["test"])
    test.catalog["flux_g"][3] *= 2
    save_sample(test, files["test"])
    with pytest.warns(UserWarning, match=rf"fingerprint {fp}, now \w+; changed: test\)"):
        new, _ = run_resumable_study(out, sizes=SMALL, seed=0, **files)
    stale = out / f"stale-{fp}"
    assert len(UnitStore(stale / "units").keys()) == SMALL["n_test"] // SMALL["chunk_size"]
    assert files["test"].exists() and (given / "model").is_dir()  # the inputs are not moved
    z_old = first["interventions"]["z_multi"].values
    z_new = new["interventions"]["z_multi"].values
    assert not np.allclose(z_new[3], z_old[3]) and np.allclose(np.delete(z_new, 3, 0), np.delete(z_old, 3, 0))

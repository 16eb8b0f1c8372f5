"""Property-based bad-input checks for the domain loaders and validators (hypothesis).

Each case feeds a public loader or validator of ``ocean``, ``astro`` or ``neuro`` one kind
of bad input (wrong dims or units, NaN at ocean points, missing variables, non-monotonic
time, missing / truncated / corrupt files, malformed candidate programs, configs with
unknown keys) and checks the documented error: a ``scimech.errors`` class (or the builtin
the code raises on purpose) whose message names the problem, and that nothing already on
disk is damaged.

Only documented behaviour is asserted. The gaps this suite found (inf at ocean points,
truncated zarr metadata, truncated codec files) were fixed in the loaders; their cases
now pass as ordinary tests.
"""

from __future__ import annotations

import json
import shutil
import string
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scimech.errors import (
    CheckpointError,
    ConfigError,
    DataValidationError,
    DimensionError,
    MissingVariableError,
    UnitsError,
)

SETTINGS = dict(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
FEW = dict(SETTINGS, max_examples=5)
NAME = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=3, max_size=12)


# ==================================================================== ocean
@pytest.fixture(scope="module")
def ocean_ds():
    from ocean import synthetic

    # tiny but schema-complete: 2 members x 2 years monthly x 4 x 5 grid
    return synthetic.generate(synthetic.SynthConfig(years=2, ny=4, nx=5)).load()


@pytest.fixture(scope="module")
def ocean_store(ocean_ds, tmp_path_factory):
    from ocean import data as od

    return od.write_zarr(ocean_ds, tmp_path_factory.mktemp("ocean") / "ocean.zarr", time_chunk=12)


def _validated_vars():
    from ocean.variables import INPUTS, PRESCRIBED

    return [*INPUTS, *PRESCRIBED, "dmlhc_dt"]


def test_a_valid_dataset_passes(ocean_ds):
    from ocean import data as od

    assert od.validate(ocean_ds) is ocean_ds


@settings(**SETTINGS)
@given(data=st.data())
def test_missing_variables_are_named(ocean_ds, data):
    from ocean import data as od

    names = [*_validated_vars(), "mask"]
    drop = data.draw(st.lists(st.sampled_from(names), min_size=1, max_size=4, unique=True))
    with pytest.raises(MissingVariableError) as err:
        od.validate(ocean_ds.drop_vars(drop))
    for v in drop:
        assert repr(v) in str(err.value)
    assert isinstance(err.value, KeyError)  # catchable as the builtin too


def test_empty_dataset_is_missing_everything():
    from ocean import data as od

    with pytest.raises(MissingVariableError, match="lacks"):
        od.validate(xr.Dataset())


@settings(**SETTINGS)
@given(n_time=st.integers(0, 5), window=st.integers(1, 6), lead=st.integers(1, 3))
def test_too_few_time_steps_is_a_clear_error(n_time, window, lead):
    from ocean import data as od

    # at most 5 - window - lead + 1 <= 4 window ends, while three gapped splits need
    # 3 * (window + lead) >= 6 of them
    with pytest.raises(DataValidationError, match="too few|time steps"):
        od.chronological_split(n_time, window=window, lead=lead)


@settings(**SETTINGS)
@given(data=st.data())
def test_wrong_dims_are_named(ocean_ds, data):
    from ocean import data as od

    v = data.draw(st.sampled_from(_validated_vars()))
    how = data.draw(st.sampled_from(["transpose", "drop_member", "extra_dim"]))
    ds = ocean_ds.copy()
    if how == "transpose":
        ds[v] = ds[v].transpose("member", "time", "lon", "lat")
    elif how == "drop_member":
        ds[v] = ds[v].isel(member=0, drop=True)
    else:
        ds[v] = ds[v].expand_dims(depth=[0.0])
    with pytest.raises(DimensionError, match=repr(v)):
        od.validate(ds)


@settings(**FEW)
@given(how=st.sampled_from(["transpose", "with_time"]))
def test_mask_on_the_wrong_dims(ocean_ds, how):
    from ocean import data as od

    ds = ocean_ds.copy()
    ds["mask"] = ds["mask"].T if how == "transpose" else ds["mask"].expand_dims(time=ds["time"].values)
    with pytest.raises(DimensionError, match="'mask'"):
        od.validate(ds)


@settings(**SETTINGS)
@given(data=st.data())
def test_wrong_units_are_named(ocean_ds, data):
    from ocean import data as od
    from ocean.variables import EXPECTED_UNITS
    from ocean.variables import UNIT_ALIASES as _ALIASES

    v = data.draw(st.sampled_from(_validated_vars()))
    exp = EXPECTED_UNITS[v]
    units = data.draw(
        st.one_of(st.none(), st.sampled_from(["K", "kelvin", "cm", "W", "Pa s", "J kg-1", "1", ""]), NAME)
    )
    if units is not None and (units == exp or units in _ALIASES.get(exp, set())):
        units = "furlong"  # drew a legitimate spelling; use one that is certainly wrong
    ds = ocean_ds.copy()
    ds[v] = ds[v].copy()
    if units is None:
        ds[v].attrs.pop("units", None)
    else:
        ds[v].attrs["units"] = units
    with pytest.raises(UnitsError) as err:
        od.validate(ds)
    assert repr(v) in str(err.value) and repr(exp) in str(err.value)


def _ocean_points(ds):
    return np.argwhere(ds["mask"].values.astype(bool))


@settings(**SETTINGS)
@given(data=st.data())
def test_nan_at_an_ocean_point_is_named(ocean_ds, data):
    from ocean import data as od

    v = data.draw(st.sampled_from(_validated_vars()))
    pts = _ocean_points(ocean_ds)
    iy, ix = pts[data.draw(st.integers(0, len(pts) - 1))]
    m = data.draw(st.integers(0, ocean_ds.sizes["member"] - 1))
    t = data.draw(st.integers(0, ocean_ds.sizes["time"] - 1))
    ds = ocean_ds.copy()
    vals = ds[v].values.copy()
    vals[m, t, iy, ix] = np.nan
    ds[v] = ds[v].copy(data=vals)
    with pytest.raises(DataValidationError, match=f"{v!r} has 1 NaN"):
        od.validate(ds)
    od.validate(ds, check_nans=False)  # the documented opt-out for lazy opening


@settings(**FEW)
@given(data=st.data())
def test_nan_on_land_is_allowed(ocean_ds, data):
    from ocean import data as od

    land = np.argwhere(~ocean_ds["mask"].values.astype(bool))
    if len(land) == 0:  # pragma: no cover - the synthetic ocean has land
        pytest.fail("synthetic ocean has no land points")
    v = data.draw(st.sampled_from(_validated_vars()))
    iy, ix = land[data.draw(st.integers(0, len(land) - 1))]
    ds = ocean_ds.copy()
    vals = ds[v].values.copy()
    vals[:, :, iy, ix] = np.nan
    ds[v] = ds[v].copy(data=vals)
    od.validate(ds)


def test_inf_at_an_ocean_point_is_rejected(ocean_ds):
    from ocean import data as od

    iy, ix = _ocean_points(ocean_ds)[0]
    ds = ocean_ds.copy()
    vals = ds["sst"].values.copy()
    vals[0, 0, iy, ix] = np.inf
    ds["sst"] = ds["sst"].copy(data=vals)
    with pytest.raises(DataValidationError, match="'sst'"):
        od.validate(ds)


@settings(**SETTINGS)
@given(data=st.data())
def test_non_monotonic_time_is_rejected(ocean_ds, data):
    from ocean import data as od

    n = ocean_ds.sizes["time"]
    i = data.draw(st.integers(0, n - 2))
    j = data.draw(st.integers(i + 1, n - 1))
    how = data.draw(st.sampled_from(["swap", "duplicate"]))
    t = ocean_ds["time"].values.copy()
    if how == "swap":
        t[i], t[j] = t[j], t[i]
    else:
        t[j] = t[i]
    ds = ocean_ds.assign_coords(time=t)
    with pytest.raises(DataValidationError, match="strictly increasing"):
        od.validate(ds)


def test_missing_store_is_a_clear_error(tmp_path):
    from ocean import data as od

    with pytest.raises(DataValidationError, match="No zarr store"):
        od.open_zarr(tmp_path / "nope.zarr")


@settings(**FEW)
@given(data=st.data())
def test_store_missing_a_variable_is_named(ocean_store, tmp_path_factory, data):
    from ocean import data as od

    v = data.draw(st.sampled_from([*_validated_vars(), "mask"]))
    q = tmp_path_factory.mktemp("cut") / "o.zarr"
    shutil.copytree(ocean_store, q)
    shutil.rmtree(q / v)  # a store that lost one array (e.g. a partial copy)
    with pytest.raises(MissingVariableError, match=repr(v)):
        od.open_zarr(q)


def test_truncated_store_metadata_names_the_store(ocean_store, tmp_path):
    from ocean import data as od

    q = tmp_path / "o.zarr"
    shutil.copytree(ocean_store, q)
    (q / "zarr.json").write_bytes((q / "zarr.json").read_bytes()[:10])
    with pytest.raises(DataValidationError, match="o.zarr"):
        od.open_zarr(q)


def test_failed_write_leaves_the_existing_store_intact(ocean_ds, ocean_store, tmp_path):
    from ocean import data as od

    q = tmp_path / "o.zarr"
    shutil.copytree(ocean_store, q)
    bad = ocean_ds.copy()
    bad["junk"] = (("member",), np.array([{"a": 1}, {"b": 2}], dtype=object))  # zarr cannot encode dicts
    with pytest.raises(ValueError):  # raised by zarr's encoder, before anything is moved into place
        od.write_zarr(bad, q)
    back = od.open_zarr(q).load()
    xr.testing.assert_identical(back["sst"], ocean_ds["sst"].load().astype(back["sst"].dtype))
    assert not [p for p in q.parent.iterdir() if p.name.startswith(".o.zarr")]  # no temp left behind


@settings(**SETTINGS)
@given(keys=st.lists(NAME, min_size=1, max_size=3, unique=True))
def test_unknown_study_config_keys_are_named(tmp_path_factory, keys):
    import dataclasses

    from ocean.experiment import StudyConfig, load_config

    fields = {f.name for f in dataclasses.fields(StudyConfig)}
    keys = [k for k in keys if k not in fields]
    if not keys:
        return
    p = tmp_path_factory.mktemp("cfg") / "c.yaml"
    p.write_text("".join(f"{k}: 1\n" for k in keys) + "epochs: 2\n")
    with pytest.raises(ConfigError) as err:
        load_config(p)
    # a key YAML reads as a boolean, null or number is refused first, by itself (it is not a name)
    not_names = [
        k
        for k in keys
        if not isinstance(yaml.safe_load(f"{k}: 1"), dict) or not isinstance(next(iter(yaml.safe_load(f"{k}: 1"))), str)
    ]
    for k in not_names or keys:
        assert k in str(err.value)


@settings(**FEW)
@given(key=NAME)
def test_unknown_synth_keys_are_named(tmp_path_factory, key):
    import dataclasses

    from ocean.experiment import load_config
    from ocean.synthetic import SynthConfig

    if key in {f.name for f in dataclasses.fields(SynthConfig)}:
        return
    p = tmp_path_factory.mktemp("cfg") / "c.yaml"
    p.write_text(f"synth:\n  {key}: 3\n")
    with pytest.raises(ConfigError, match=key):
        load_config(p)


@settings(**FEW)
@given(regime=NAME)
def test_unknown_regimes_are_named(regime):
    from ocean.experiment import load_config
    from scimech.analysis.concepts import REGIMES

    if regime in REGIMES:
        return
    with pytest.raises(ConfigError, match=regime):
        load_config(None, regimes=["mixed", regime])


@pytest.mark.parametrize("text", ["- 1\n- 2\n", "3\n", "just a string\n"])
def test_config_that_is_not_a_mapping(tmp_path, text):
    from ocean.experiment import load_config

    p = tmp_path / "c.yaml"
    p.write_text(text)
    with pytest.raises(ConfigError, match="mapping"):
        load_config(p)


# ==================================================================== astro
def _catalog(n=48, seed=0):
    """A Legacy-Survey-like catalogue with units (hand-made; enough for codecs and I/O)."""
    import astropy.units as u
    from astropy.table import QTable

    rng = np.random.default_rng(seed)
    cat = QTable()
    for b in "griz":
        cat[f"flux_{b}"] = rng.lognormal(1.0, 0.5, n) * u.Unit("nmgy")
    cat["shape_r"] = rng.lognormal(0.0, 0.3, n) * u.arcsec
    cat["shape_e1"] = rng.uniform(-0.3, 0.3, n)
    cat["shape_e2"] = rng.uniform(-0.3, 0.3, n)
    cat["ebv"] = rng.uniform(0.0, 0.1, n) * u.mag
    cat["z"] = rng.uniform(0.05, 0.9, n)
    cat["a_v"] = rng.uniform(0.0, 1.0, n) * u.mag
    return cat


@pytest.fixture(scope="module")
def aion_folder(tmp_path_factory):
    """A tiny stand-in AION checkpoint in the real folder layout (config, weights, codecs)."""
    from astro.models import aion as A
    from astro.models import standin as M

    codecs = M.fit_codecs(_catalog(), reservoir_size=48, codebook_size=16, z_codebook_size=32)
    cfg = M.StandinConfig(dim=16, encoder_depth=1, decoder_depth=1, num_heads=2, image_grid=2, image_vocab=8)
    model = M.build(cfg)
    folder = tmp_path_factory.mktemp("aion") / "ck"
    A.save_checkpoint(model, folder, config=M.standin_config(cfg), codecs=codecs)
    return folder


def _copy(folder, tmp_path_factory):
    q = tmp_path_factory.mktemp("aion_copy") / "ck"
    shutil.copytree(folder, q)
    return q


def test_the_stand_in_checkpoint_loads(aion_folder):
    from astro.models.aion import AIONRedshift

    ad = AIONRedshift.from_folder(aion_folder)
    assert ad.num_heads == 2


def test_missing_checkpoint_folder(tmp_path):
    from astro.models.aion import load_model

    with pytest.raises(CheckpointError, match="does not exist"):
        load_model(tmp_path / "nope")


@settings(**FEW)
@given(victim=st.sampled_from(["config.json", "model.safetensors"]))
def test_missing_checkpoint_file_is_named(aion_folder, tmp_path_factory, victim):
    from astro.models.aion import load_model

    q = _copy(aion_folder, tmp_path_factory)
    (q / victim).unlink()
    with pytest.raises(CheckpointError, match=f"missing {victim}"):
        load_model(q)


@settings(**SETTINGS)
@given(victim=st.sampled_from(["config.json", "model.safetensors"]), frac=st.floats(0.0, 0.95))
def test_truncated_checkpoint_file(aion_folder, tmp_path_factory, victim, frac):
    from astro.models.aion import load_model

    q = _copy(aion_folder, tmp_path_factory)
    raw = (q / victim).read_bytes()
    (q / victim).write_bytes(raw[: int(frac * len(raw))])
    with pytest.raises(CheckpointError, match=victim.replace(".", r"\.")):
        load_model(q)
    assert (aion_folder / victim).read_bytes() == raw  # the original is untouched


def test_weights_that_do_not_match_the_config(aion_folder, tmp_path):
    from astro.models.aion import load_model

    q = tmp_path / "ck"
    shutil.copytree(aion_folder, q)
    cfg = json.loads((q / "config.json").read_text())
    cfg["encoder_depth"] = 2  # one more block than the weights hold
    (q / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(CheckpointError, match="does not match"):
        load_model(q)


@settings(**FEW)
@given(
    codec=st.sampled_from(["FLUX_G", "SHAPE_R", "EBV", "Z"]),
    victim=st.sampled_from(["config.json", "model.safetensors"]),
)
def test_missing_codec_file_is_named(aion_folder, tmp_path_factory, codec, victim):
    from astro.models.aion import AIONRedshift

    q = _copy(aion_folder, tmp_path_factory)
    (q / "codecs" / codec / victim).unlink()
    with pytest.raises(CheckpointError, match=f"codecs/{codec}/{victim}".replace(".", r"\.")):
        AIONRedshift.from_folder(q)


@pytest.mark.parametrize("victim", ["config.json", "model.safetensors"])
def test_truncated_codec_file_is_a_checkpoint_error(aion_folder, tmp_path, victim):
    from astro.models.aion import AIONRedshift

    q = tmp_path / "ck"
    shutil.copytree(aion_folder, q)
    f = q / "codecs" / "FLUX_G" / victim
    f.write_bytes(f.read_bytes()[:20])
    with pytest.raises(CheckpointError, match="FLUX_G"):
        AIONRedshift.from_folder(q)


def test_missing_image_tokenizer(tmp_path):
    from astro.models.standin import PatchTokenizer

    with pytest.raises(CheckpointError, match="missing image tokenizer"):
        PatchTokenizer.load(tmp_path / "image_tokenizer.npz")


@settings(**FEW)
@given(col=st.sampled_from(["flux_g", "flux_z", "shape_r", "shape_e1", "ebv"]))
def test_catalogue_missing_a_column_is_named(aion_folder, col):
    from astro.models.aion import AIONRedshift

    ad = AIONRedshift.from_folder(aion_folder)
    cat = _catalog(8)
    cat.remove_column(col)
    with pytest.raises(DataValidationError, match=f"'{col}'"):
        ad.tokenize(cat)


@settings(**SETTINGS)
@given(site=st.text(min_size=0, max_size=30))
def test_bad_head_site_strings(site):
    import re

    from astro.models.aion import site_to_head

    if re.fullmatch(r"encoder\.\d+\.attn\.heads\[\d+\]", site):
        return
    with pytest.raises(ConfigError, match="not an encoder head site"):
        site_to_head(site)


@settings(**FEW)
@given(col=st.sampled_from(["a_v", "shape_r"]))
def test_populations_need_their_columns(col):
    from astro.synthetic import populations

    cat = _catalog(8)
    cat.remove_column(col)
    with pytest.raises(MissingVariableError, match=col):
        populations(cat)


def test_missing_fits_and_zarr_samples(tmp_path):
    from astro.synthetic import GalaxySample

    with pytest.raises(FileNotFoundError, match="No FITS sample"):
        GalaxySample.from_fits(tmp_path / "s.fits")
    with pytest.raises(FileNotFoundError, match="No zarr sample"):
        GalaxySample.from_zarr(tmp_path / "s.zarr")


@settings(**FEW)
@given(names=st.lists(st.sampled_from(["IMAGES", "TABLE", "CAT", "EXTRA"]), min_size=0, max_size=2, unique=True))
def test_fits_without_a_catalog_hdu(tmp_path_factory, names):
    from astropy.io import fits

    from astro.synthetic import GalaxySample

    hdus = [fits.PrimaryHDU()] + [fits.ImageHDU(np.zeros((2, 2), np.float32), name=n) for n in names]
    p = tmp_path_factory.mktemp("fits") / "s.fits"
    fits.HDUList(hdus).writeto(p)
    with pytest.raises(MissingVariableError, match="no CATALOG HDU"):
        GalaxySample.from_fits(p)


# ==================================================================== neuro
@pytest.fixture(scope="module")
def cand_data(candidate_data_file):
    return candidate_data_file


_MALFORMED = {
    "syntax": ("class Model(:\n    pass\n", "SyntaxError"),
    "no_model": ("import numpy as np\nclass Forecaster:\n    pass\n", "Model"),
    "wrong_shape": (
        "import numpy as np\nclass Model:\n    def fit(self, s, st, m): pass\n"
        "    def predict(self, c, sc, sf): return np.zeros((len(c), 1))\n",
        "shape",
    ),
    "non_finite": (
        "import numpy as np\nclass Model:\n    def fit(self, s, st, m): pass\n"
        "    def predict(self, c, sc, sf): return np.full((len(c), sf.shape[1], c.shape[2]), np.nan)\n",
        "non-finite",
    ),
    "raises": ("class Model:\n    def fit(self, s, st, m): raise RuntimeError('boom in fit')\n", "boom in fit"),
}


@settings(**dict(FEW, max_examples=len(_MALFORMED)))
@given(kind=st.sampled_from(sorted(_MALFORMED)))
def test_malformed_candidates_are_failed_results(cand_data, kind):
    from neuro.search.sandbox import SandboxLimits, run_in_sandbox

    code, needle = _MALFORMED[kind]
    before = Path(cand_data).read_bytes()
    r = run_in_sandbox(code, cand_data, SandboxLimits(wall_seconds=30), stage="quick")
    assert not r.ok and r.status == "error"
    assert needle in r.error
    assert Path(cand_data).read_bytes() == before  # the shared data file is untouched


@settings(**SETTINGS)
@given(
    garbage=st.text(alphabet=string.ascii_letters + string.digits + string.punctuation + " ", min_size=1, max_size=80)
)
def test_torn_journal_line_is_ignored(tmp_path_factory, garbage):
    from dataclasses import asdict

    from neuro.search.tree import Node, load_journal

    nodes = [
        Node(id=i, parent=None, op="draft", code=f"# {i}", hash=f"h{i}", status="ok", val=float(i)) for i in range(3)
    ]
    p = tmp_path_factory.mktemp("j") / "journal.jsonl"
    p.write_text("".join(json.dumps(asdict(n)) + "\n" for n in nodes) + garbage)
    back = load_journal(p)
    try:
        extra = Node(**json.loads(garbage))
    except (json.JSONDecodeError, TypeError):
        extra = None
    assert back[:3] == nodes and len(back) == 3 + (extra is not None)


@settings(**SETTINGS)
@given(T=st.integers(1, 12), context=st.integers(1, 8), horizon=st.integers(1, 8))
def test_windows_longer_than_the_trials(T, context, horizon):
    from neuro.tasks import make_windows

    series, stim = np.zeros((2, T, 3)), np.zeros((2, T, 5))
    if T >= context + horizon:
        w = make_windows(series, stim, context, horizon, stride=1)
        assert len(w) == 2 * (T - context - horizon + 1)  # every start 0..T-C-H, per trial
        return
    with pytest.raises(ConfigError, match="too short"):
        make_windows(series, stim, context, horizon, stride=1)


@settings(**FEW)
@given(victim=st.sampled_from(["zarr.json", ".scimech-complete", "rates/zarr.json"]), keep=st.integers(0, 8))
def test_damaged_recording_is_a_checkpoint_error(tmp_path_factory, victim, keep):
    from neuro.sim.recording import load_recording, save_recording

    ds = xr.Dataset(
        {"rates": (("trial", "time", "neuron"), np.arange(24.0).reshape(2, 3, 4))},
        coords={"time": ("time", [0.005, 0.01, 0.015], {"units": "s"})},
    )
    p = save_recording(ds, tmp_path_factory.mktemp("rec") / "rec.zarr")
    np.testing.assert_array_equal(load_recording(p)["rates"].values, ds["rates"].values)
    f = p / victim
    if victim == ".scimech-complete":
        f.unlink()  # an interrupted write never got its completion marker
    else:
        f.write_bytes(f.read_bytes()[:keep])
    with pytest.raises(CheckpointError):
        load_recording(p)


def test_missing_recording(tmp_path):
    from neuro.sim.recording import load_recording

    with pytest.raises(CheckpointError, match="No result"):
        load_recording(tmp_path / "rec.zarr")


@settings(**FEW)
@given(policy=NAME)
def test_unknown_tree_search_policy(tmp_path_factory, policy):
    from neuro.search.tree import TreeSearch

    if policy in ("greedy", "ucb"):
        return
    with pytest.raises(ConfigError, match="policy"):
        TreeSearch(task=None, proposer=None, out_dir=tmp_path_factory.mktemp("ts"), policy=policy)

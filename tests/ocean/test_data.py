"""Schema validation errors, zarr v3 round trip, chronological split, train-only normalisation."""

import json

import numpy as np
import pytest

from ocean import data, synthetic
from scimech.errors import DataValidationError, DimensionError, MissingVariableError, UnitsError


@pytest.fixture(scope="module")
def ds():
    return synthetic.generate(n_members=2, years=7, ny=6, nx=8, seed=2)  # 7 years: window 6 needs 74 steps


def test_valid_dataset_passes(ds):
    assert data.validate(ds) is ds


def test_missing_variable(ds):
    with pytest.raises(MissingVariableError, match="qnet"):
        data.validate(ds.drop_vars("qnet"))
    with pytest.raises(MissingVariableError, match="mask"):
        data.validate(ds.drop_vars("mask"))


def test_wrong_units(ds):
    bad = ds.copy()
    bad["sst"] = bad["sst"] + 273.15
    bad["sst"].attrs = {"units": "K"}
    with pytest.raises(UnitsError, match="sst.*'K'.*degree_Celsius"):
        data.validate(bad)
    ok = ds.copy()
    ok["sst"].attrs["units"] = "degC"  # an accepted CF alias
    data.validate(ok)


@pytest.mark.parametrize(
    "var, change, words",
    [
        ("sst", lambda x: x + 273.15, "kelvin labelled"),  # K values under a degC label
        ("mld", lambda x: x * 100.0, "in cm"),  # cm values under an m label
        ("mld", lambda x: -x, "positive up"),
        ("zos", lambda x: x * 100.0, "in cm"),
        ("tauu", lambda x: x * 1000.0, "mN m-2"),  # a few x 0.1 N m-2 -> hundreds
    ],
)
def test_values_outside_what_an_ocean_gives_are_a_units_error(ds, var, change, words):
    bad = ds.copy()
    bad[var] = change(bad[var]).assign_attrs(ds[var].attrs)
    with pytest.raises(UnitsError, match=f"'{var}'.*ranges over.*{words}"):
        data.validate(bad)
    data.validate(bad, check_nans=False)  # the values are only read with check_nans (they are not read lazily)


def test_land_filled_with_a_number_inside_the_mask_is_named(ds):
    bad = ds.copy(deep=True)
    land = np.argwhere(ds["mask"].values == 1)[0]
    bad["sst"][:, :, land[0], land[1]] = 1e20  # a fill value at a point the mask calls ocean
    with pytest.raises(UnitsError, match="Land filled with a number"):
        data.validate(bad)


def test_wrong_dims(ds):
    with pytest.raises(DimensionError, match="expand_dims"):
        data.validate(ds.isel(member=0))
    with pytest.raises(DimensionError, match="transpose"):
        bad = ds.copy()
        bad["zos"] = bad["zos"].transpose("member", "time", "lon", "lat")
        data.validate(bad)


def test_nans_at_ocean_points(ds):
    bad = ds.copy(deep=True)
    ocean = np.argwhere(ds["mask"].values == 1)[0]
    bad["mld"][0, 3, ocean[0], ocean[1]] = np.nan
    with pytest.raises(DataValidationError, match="'mld' has 1 NaN"):
        data.validate(bad)


def test_time_not_monotonic(ds):
    bad = ds.isel(time=[0, 2, 1, *range(3, ds.sizes["time"])])
    with pytest.raises(DataValidationError, match="strictly increasing"):
        data.validate(bad)


def test_zarr_v3_round_trip_is_lazy(ds, tmp_path):
    path = data.write_zarr(ds, tmp_path / "o.zarr", time_chunk=6)
    meta = json.loads((path / "zarr.json").read_text())
    assert meta["zarr_format"] == 3
    back = data.open_zarr(path)
    assert back["sst"].chunks is not None and back["sst"].chunks[1][0] == 6  # dask chunks as written
    np.testing.assert_array_equal(back["mlhc"].values, ds["mlhc"].values)
    assert back["mlhc"].attrs["units"] == "J m-2"


def test_chronological_split_has_gaps():
    s = data.chronological_split(100, window=6, lead=1)
    assert s.train.max() < s.val.min() < s.test.min()
    # the first val window starts after the last training target
    assert s.val.min() - 6 + 1 > s.train.max() + 1
    assert s.test.min() - 6 + 1 > s.val.max() + 1
    with pytest.raises(DataValidationError, match="too few"):
        data.chronological_split(10, window=6, lead=1)


def test_normalizer_uses_training_split_only(ds):
    s = data.chronological_split(ds.sizes["time"], window=6, lead=1)
    norm = data.fit_normalizer(ds, s.train, window=6, lead=1)
    ocean = ds["mask"].values.astype(bool)
    t_in = np.arange(s.train.min() - 5, s.train.max() + 1)
    sst = ds["sst"].values[:, t_in][..., ocean]
    assert norm.mean["sst"] == pytest.approx(sst.mean(), rel=1e-12)
    assert norm.std["sst"] == pytest.approx(sst.std(), rel=1e-12)
    y = ds["dmlhc_dt"].values[:, s.train + 1][..., ocean]
    assert norm.scale == pytest.approx(y.std(), rel=1e-12)


def test_window_item_matches_manual_indexing(ds):
    s = data.chronological_split(ds.sizes["time"], window=6, lead=1, fractions=(0.6, 0.2, 0.2))
    norm = data.fit_normalizer(ds, s.train, window=6, lead=1)
    wd = data.WindowDataset(ds, s.val, norm, window=6, lead=1, block=5)  # windows straddle blocks
    m, t, _ = wd.items[1]
    item = wd[1]
    ocean = ds["mask"].values.astype(bool)
    xin = item["x"].numpy().reshape(len(synthetic.INPUTS), 6, *ocean.shape)  # variable-major channels
    v = synthetic.INPUTS.index("zos")
    manual = (ds["zos"].values[m, t - 5 : t + 1] - norm.mean["zos"]) / norm.std["zos"]
    np.testing.assert_allclose(xin[v][:, ocean], manual[:, ocean], rtol=1e-5, atol=1e-6)  # float32
    y = (ds["dmlhc_dt"].values[m, t + 1] - norm.mean["dmlhc_dt"]) / norm.scale
    np.testing.assert_allclose(item["y"].numpy()[0][ocean], y[ocean], rtol=1e-5, atol=1e-6)
    # budget survives normalisation: y = sum of all (normalised) concepts
    c = item["c"].numpy().sum(0) + item["hidden"].numpy()[0]
    np.testing.assert_allclose(c[ocean], item["y"].numpy()[0][ocean], atol=1e-4)
    assert item["valid"].numpy()[0].tolist() == ocean.tolist()


def test_own_concept_scaling_divides_each_concept_by_its_training_std(ds):
    s = data.chronological_split(ds.sizes["time"], window=6, lead=1, fractions=(0.6, 0.2, 0.2))
    norm = data.fit_normalizer(ds, s.train, window=6, lead=1, concept_scaling="own")
    ocean = ds["mask"].values.astype(bool)
    wd = data.WindowDataset(ds, s.val, norm, window=6, lead=1)
    m, t, _ = wd.items[0]
    item = wd[0]
    for k, name in enumerate(synthetic.PRESCRIBED):
        train = ds[name].values[:, s.train + 1][..., ocean]  # numpy, independent of the dask path
        manual = (ds[name].values[m, t + 1] - train.mean()) / train.std()
        np.testing.assert_allclose(item["c"].numpy()[k][ocean], manual[ocean], rtol=1e-5, atol=1e-5)
    # the target keeps its own scale
    y = (ds["dmlhc_dt"].values[m, t + 1] - norm.mean["dmlhc_dt"]) / norm.scale
    np.testing.assert_allclose(item["y"].numpy()[0][ocean], y[ocean], rtol=1e-5, atol=1e-5)
    with pytest.raises(DataValidationError, match="concept_scaling"):
        data.fit_normalizer(ds, s.train, window=6, lead=1, concept_scaling="per-point")


def test_budget_head_reproduces_the_target_from_the_true_concepts():
    # with the hidden flux switched off the five prescribed terms close the budget, so the
    # head started at the budget identity maps the true (normalised) concepts to the target
    import torch

    from ocean import training
    from ocean.model import build_model

    ds = synthetic.generate(n_members=1, years=3, ny=6, nx=8, seed=4, hidden_coeff=0.0)
    s = data.chronological_split(ds.sizes["time"], window=3, lead=1, fractions=(0.6, 0.2, 0.2))
    ocean = ds["mask"].values.astype(bool)
    for scaling in ("own", "target"):
        norm = data.fit_normalizer(ds, s.train, window=3, lead=1, concept_scaling=scaling)
        model = build_model(3 * len(synthetic.INPUTS), synthetic.PRESCRIBED, 1, width=4, seed=0)
        training._budget_head(model, norm, 1)
        item = data.WindowDataset(ds, s.test, norm, window=3, lead=1)[2]
        c = torch.cat([item["c"], torch.zeros(1, *item["c"].shape[1:])])[None]  # free concept = 0
        with torch.no_grad():
            y = model.head(c)[0, 0].numpy()
        # float32 maps of O(1) values: 1e-4 is a few ulps of the sum of five terms
        np.testing.assert_allclose(y[ocean], item["y"].numpy()[0][ocean], atol=1e-4)

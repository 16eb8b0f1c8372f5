"""Property-based bad-input checks for the core loaders (hypothesis).

Whatever bytes end up in a result file, checkpoint or cluster config, loading either
works or raises the documented scimech error (never a bare traceback from deep inside a
library), and a failed save never damages the result already on disk.
"""

import json

import numpy as np
import pytest
import xarray as xr
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scimech.errors import CheckpointError, ConfigError
from scimech.run.parallel import read_cluster_config
from scimech.run.results import UnitStore, load, save, torch_load

SETTINGS = dict(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@settings(**SETTINGS)
@given(junk=st.binary(min_size=0, max_size=300))
def test_corrupt_netcdf_is_a_checkpoint_error(tmp_path, junk):
    p = tmp_path / "r.nc"
    p.write_bytes(junk)
    with pytest.raises(CheckpointError):
        load(p)


@settings(**SETTINGS)
@given(cut=st.integers(min_value=0, max_value=400))
def test_truncated_torch_checkpoint_is_a_checkpoint_error(tmp_path, cut):
    import io

    import torch

    buf = io.BytesIO()
    torch.save({"w": torch.arange(50.0)}, buf)
    data = buf.getvalue()
    p = tmp_path / "ck.pt"
    p.write_bytes(data[: min(cut, len(data) - 1)])
    with pytest.raises(CheckpointError):
        torch_load(p)


@settings(**SETTINGS)
@given(victim=st.sampled_from(["zarr.json", "score/zarr.json", "score/c/0/0"]), keep=st.integers(0, 20))
def test_truncated_zarr_store_never_loads_silently(tmp_path, victim, keep):
    ds = xr.Dataset({"score": (("layer", "seed"), np.arange(6.0).reshape(3, 2))})
    path = save(ds, tmp_path / f"r{keep}.zarr")
    target = path / victim
    if target.exists():
        target.write_bytes(target.read_bytes()[:keep])
    try:
        back = load(path)
    except CheckpointError:
        return
    # if the damaged bytes still parse (e.g. keep >= size), the values must be right
    np.testing.assert_array_equal(back["score"].values, ds["score"].values)


@settings(**SETTINGS)
@given(key=st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=12))
def test_unknown_cluster_keys_are_named(tmp_path, key):
    from scimech.run.parallel import _CLUSTER_KEYS

    if key in _CLUSTER_KEYS:
        return
    p = tmp_path / "c.toml"
    p.write_text(f'[cluster]\nkind = "local"\n{key} = 1\n')
    with pytest.raises(ConfigError, match=key):
        read_cluster_config(p)


def test_unparseable_config_is_config_error(tmp_path):
    p = tmp_path / "c.toml"
    p.write_text("[cluster\nkind=")
    with pytest.raises(ConfigError, match="not valid TOML"):
        read_cluster_config(p)
    # the suffix decides, as for every --config file: anything not named .toml is YAML
    y = tmp_path / "c.yaml"
    y.write_text("cluster: {kind: local")
    with pytest.raises(ConfigError, match="not valid YAML"):
        read_cluster_config(y)
    y.write_text("cluster:\n  kind: local\n")
    assert read_cluster_config(y) == {"kind": "local"}


def test_failed_save_keeps_previous_result(tmp_path):
    good = xr.Dataset({"x": ("a", np.arange(3.0))})
    save(good, tmp_path / "r.nc")
    bad = xr.Dataset({"x": ("a", np.array([object(), object()], dtype=object))})  # not writable
    with pytest.raises(ValueError):  # netCDF cannot encode Python objects
        save(bad, tmp_path / "r.nc")
    np.testing.assert_array_equal(load(tmp_path / "r.nc")["x"].values, np.arange(3.0))
    assert [p.name for p in tmp_path.iterdir()] == ["r.nc"]  # no temporary left behind


def test_torn_unit_record_means_not_done(tmp_path):
    store = UnitStore(tmp_path)
    store.save("a", {"v": 1})
    rec = next((tmp_path / "units").glob("*.done.json"))
    rec.write_text(json.dumps({"key": "a"})[:5])
    assert not store.done("a") and store.keys() == []

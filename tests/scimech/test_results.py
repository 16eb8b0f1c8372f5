"""Saving and loading labelled results; resumable unit stores."""

import json

import numpy as np
import pytest
import xarray as xr

from scimech.errors import CheckpointError
from scimech.run.results import (
    COMPLETE_MARKER,
    UnitStore,
    atomic_torch_save,
    load,
    save,
    torch_load,
)


def _result():
    rng = np.random.default_rng(0)
    return xr.Dataset(
        {"score": (("layer", "seed"), rng.normal(size=(3, 2)), {"units": "1", "description": "R2"})},
        coords={"layer": [0, 1, 2], "seed": [0, 1]},
        attrs={"flag": True, "sizes": [1, 2]},
    )


@pytest.mark.parametrize("suffix", [".nc", ".zarr"])
def test_roundtrip_keeps_values_and_provenance(tmp_path, suffix):
    ds = _result()
    path = save(ds, tmp_path / f"r{suffix}", config={"lr": 1e-3, "regime": "mixed"}, seed=7)
    back = load(path)
    xr.testing.assert_allclose(back["score"], ds["score"])
    assert back.attrs["seed"] == 7
    assert json.loads(back.attrs["config"]) == {"lr": 1e-3, "regime": "mixed"}
    assert "scimech_version" in back.attrs and "created" in back.attrs
    assert back["score"].attrs["units"] == "1"


def test_zarr_without_marker_is_refused(tmp_path):
    path = save(_result(), tmp_path / "r.zarr")
    (path / COMPLETE_MARKER).unlink()
    with pytest.raises(CheckpointError, match="completion marker"):
        load(path)


def test_overwrite_zarr_replaces_whole_store(tmp_path):
    save(_result(), tmp_path / "r.zarr")
    other = xr.Dataset({"x": ("a", np.arange(4.0))})
    save(other, tmp_path / "r.zarr")
    back = load(tmp_path / "r.zarr")
    assert list(back.data_vars) == ["x"]


def test_missing_and_corrupt_files_are_checkpoint_errors(tmp_path):
    with pytest.raises(CheckpointError, match="No result"):
        load(tmp_path / "nothing.nc")
    bad = tmp_path / "bad.nc"
    bad.write_bytes(b"not a netcdf file")
    with pytest.raises(CheckpointError, match="corrupt"):
        load(bad)
    # a CheckpointError is also a ValueError (catchable by the builtin it refines)
    with pytest.raises(ValueError):
        load(bad)


def test_bad_suffix_is_clear(tmp_path):
    with pytest.raises(ValueError, match="'.nc' or '.zarr'"):
        save(_result(), tmp_path / "r.csv")


def test_torch_checkpoint_roundtrip_and_corruption(tmp_path):
    import torch

    p = atomic_torch_save({"w": torch.arange(3.0)}, tmp_path / "ck.pt")
    assert torch.equal(torch_load(p)["w"], torch.arange(3.0))
    p.write_bytes(p.read_bytes()[:20])  # truncated by a crash
    with pytest.raises(CheckpointError, match="corrupt or truncated"):
        torch_load(p)


def test_unit_store_skips_done_and_detects_tampering(tmp_path):
    store = UnitStore(tmp_path / "run")
    assert not store.done("mixed/seed=0")
    store.save("mixed/seed=0", _result())
    store.save("note", {"a": 1})
    assert store.keys() == ["mixed/seed=0", "note"]
    assert store.load("note") == {"a": 1}
    # a unit file altered after its record (e.g. a torn rewrite) is no longer done
    path = store.path("mixed/seed=0")
    path.write_bytes(path.read_bytes()[:-10])
    assert not store.done("mixed/seed=0")
    with pytest.raises(CheckpointError, match="not finished"):
        store.load("mixed/seed=0")
    # a fresh store on the same folder sees the same state
    assert UnitStore(tmp_path / "run").keys() == ["note"]
    store.discard("note")
    assert store.keys() == []


def test_a_training_state_round_trips_exactly_without_a_pickle(tmp_path):
    import math

    import torch

    from scimech.errors import CheckpointError
    from scimech.run.results import load_state, save_state

    model = torch.nn.Linear(3, 2)
    opt = torch.optim.AdamW(model.parameters(), lr=0.1)
    model(torch.randn(4, 3, generator=torch.Generator().manual_seed(0))).sum().backward()
    opt.step()
    state = {
        "model": model.state_dict(),
        "opt": opt.state_dict(),
        "epoch": 3,
        "config": {"lr": 0.1, "tag": None},
        "hist": {"loss": [np.float64(0.5), math.nan], "stage": ["joint", "joint"]},
    }
    path = save_state(state, tmp_path / "ck.safetensors")
    raw = path.read_bytes()
    assert raw[8:9] == b"{" and b"\x80\x02" not in raw[:16]  # a safetensors header, no pickle
    back = load_state(path)
    assert back["epoch"] == 3 and back["config"] == {"lr": 0.1, "tag": None}
    assert back["hist"]["loss"][0] == 0.5 and math.isnan(back["hist"]["loss"][1])
    assert back["opt"]["param_groups"][0]["betas"] == opt.state_dict()["param_groups"][0]["betas"]  # a tuple again
    assert set(back["opt"]["state"]) == set(opt.state_dict()["state"])  # int keys kept
    for k, v in model.state_dict().items():
        assert torch.equal(back["model"][k], v)
    for i, s in opt.state_dict()["state"].items():
        for name, t in s.items():
            assert torch.equal(back["opt"]["state"][i][name], t)
    fresh = torch.optim.AdamW(torch.nn.Linear(3, 2).parameters(), lr=0.1)
    fresh.load_state_dict(back["opt"])  # the optimiser takes it back
    (tmp_path / "bad.safetensors").write_bytes(raw[:40])
    with pytest.raises(CheckpointError, match="corrupt"):
        load_state(tmp_path / "bad.safetensors")
    torch.save(state, tmp_path / "old.pt")  # a pickle is not read
    with pytest.raises(CheckpointError, match="not a scimech state file"):
        load_state(tmp_path / "old.pt")


def test_results_get_the_permissions_of_any_new_file_not_mkstemps_0600(tmp_path):
    """On a cluster a group reads a results folder; mkstemp's 0600 made every result private."""
    import os
    import stat

    from scimech.run.results import atomic_write_text

    plain = tmp_path / "plain.txt"
    plain.write_text("x")  # what the umask gives a new file
    expected = stat.S_IMODE(plain.stat().st_mode)
    atomic_write_text(tmp_path / "findings.txt", "x")
    save(xr.Dataset({"v": ("x", np.arange(3.0))}), tmp_path / "r.nc")
    for name in ("findings.txt", "r.nc"):
        assert stat.S_IMODE(os.stat(tmp_path / name).st_mode) == expected, name

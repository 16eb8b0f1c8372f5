"""scimech.run.fingerprint: equal inputs hash equal, any change in value, coordinate, dtype or
file content hashes differently; a folder of another fingerprint is set aside, never resumed."""

from __future__ import annotations

import dataclasses
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
import xarray as xr

from scimech.run.fingerprint import fingerprint, read_fingerprint, set_aside_stale


def ds(values=None, lat=None, attrs=None) -> xr.Dataset:
    v = np.arange(12.0).reshape(3, 4) if values is None else values
    return xr.Dataset(
        {"sst": (("lat", "lon"), v, {"units": "degree_Celsius"})},
        coords={"lat": [10.0, 20.0, 30.0] if lat is None else lat, "lon": np.arange(4)},
        attrs={"title": "t", **(attrs or {})},
    )


def test_equal_data_equal_fingerprint():
    a, b = np.arange(10.0), np.arange(10.0)
    assert fingerprint(a) == fingerprint(b) and len(fingerprint(a)) == 16
    assert fingerprint(ds()) == fingerprint(ds())
    assert fingerprint(ds()) == fingerprint(ds().chunk({"lat": 1}))  # dask-backed: same values
    assert fingerprint(np.asfortranarray(np.ones((3, 2)))) == fingerprint(np.ones((3, 2)))
    assert fingerprint(np.arange(3, dtype=">i8")) == fingerprint(np.arange(3, dtype="<i8"))  # byte order
    assert fingerprint({"a": 1, "b": [1, 2]}) == fingerprint({"b": [1, 2], "a": 1})  # key order
    assert fingerprint(torch.ones(3)) == fingerprint(torch.ones(3))
    assert fingerprint(ds(attrs={"created": "2024"})) == fingerprint(ds(attrs={"created": "2025"}))  # write time


def test_one_changed_value_coordinate_or_dtype_changes_it():
    base = fingerprint(ds())
    v = np.arange(12.0).reshape(3, 4)
    v[2, 3] += 1e-9
    assert fingerprint(ds(values=v)) != base  # one value
    assert fingerprint(ds(lat=[10.0, 20.0, 31.0])) != base  # a coordinate
    assert fingerprint(ds(values=np.arange(12.0, dtype="f4").reshape(3, 4))) != base  # dtype
    assert fingerprint(ds(attrs={"title": "u"})) != base  # an attribute
    assert fingerprint(ds().rename(sst="sss")) != base  # a name
    assert fingerprint(np.arange(6).reshape(2, 3)) != fingerprint(np.arange(6).reshape(3, 2))
    assert fingerprint(np.arange(3)) != fingerprint(np.arange(3.0))
    assert fingerprint(torch.ones(3)) != fingerprint(torch.ones(3, dtype=torch.float64))
    assert fingerprint(torch.ones(3, dtype=torch.bfloat16)) != fingerprint(torch.ones(3, dtype=torch.float16))
    t = np.array(["2000-01-01", "2000-02-01"], "datetime64[ns]")
    assert fingerprint(t) == fingerprint(t.copy()) != fingerprint(t + np.timedelta64(1, "D"))
    assert fingerprint(np.array(["ab", "c"])) != fingerprint(np.array(["a", "bc"]))
    assert fingerprint(np.array(["a", 1], object)) != fingerprint(np.array(["a", "1"], object))
    assert fingerprint(1) != fingerprint(1.0) != fingerprint("1") != fingerprint(True)
    assert fingerprint([1, 2]) != fingerprint([2, 1]) != fingerprint((2, 1))
    assert fingerprint(xr.DataArray([1.0, 2.0], dims="x", coords={"x": [0, 1]})) != fingerprint(
        xr.DataArray([1.0, 2.0], dims="x", coords={"x": [0, 2]})
    )


def test_paths_hash_their_content(tmp_path):
    a, b = tmp_path / "a.bin", tmp_path / "b.bin"
    a.write_bytes(b"\x00" * 5000)
    b.write_bytes(b"\x00" * 5000)
    assert fingerprint(a) == fingerprint(b) != fingerprint(str(a))  # a str is a value, not a path
    b.write_bytes(b"\x00" * 4999 + b"\x01")
    assert fingerprint(a) != fingerprint(b)
    d = tmp_path / "store"
    (d / "x").mkdir(parents=True)
    (d / "x" / "0").write_bytes(b"abc")
    before = fingerprint(d)
    (d / "x" / "0").write_bytes(b"abd")
    assert fingerprint(d) != before
    with pytest.raises(FileNotFoundError):
        fingerprint(tmp_path / "missing.nc")


def test_dataclasses_and_unknown_types():
    @dataclasses.dataclass
    class Cfg:
        gain: float = 1.0

    assert fingerprint(Cfg()) == fingerprint(Cfg()) != fingerprint(Cfg(gain=2.0))
    with pytest.raises(TypeError, match="does not know how to hash"):
        fingerprint(object())


def _fill(out: Path) -> None:
    (out / "units").mkdir(parents=True)
    (out / "units" / "a.nc").write_text("old result")
    (out / "summary.nc").write_text("old summary")


def test_set_aside_stale_moves_other_fingerprints_and_keeps_the_same(tmp_path):
    out = tmp_path / "run"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert set_aside_stale(out, "aaaa", parts={"data": "d1", "settings": "s1"}) is None  # a new folder
        _fill(out)
        assert set_aside_stale(out, "aaaa", parts={"data": "d1", "settings": "s1"}) is None  # the same data
    assert (out / "units" / "a.nc").read_text() == "old result"
    with pytest.warns(UserWarning, match=r"fingerprint aaaa, now bbbb; changed: data\).*stale-aaaa"):
        dest = set_aside_stale(out, "bbbb", parts={"data": "d2", "settings": "s1"})
    assert dest == out / "stale-aaaa"
    assert (dest / "units" / "a.nc").read_text() == "old result" and (dest / "summary.nc").exists()
    assert sorted(p.name for p in out.iterdir()) == ["data_fingerprint.txt", "stale-aaaa"]
    assert read_fingerprint(out) == "bbbb"
    assert (out / "data_fingerprint.txt").read_text().splitlines()[1:] == ["data d2", "settings s1"]
    # back to the first data: the folder of bbbb goes aside; an existing stale name is not overwritten
    _fill(out)
    with pytest.warns(UserWarning):
        set_aside_stale(out, "aaaa")
    _fill(out)
    with pytest.warns(UserWarning):
        assert set_aside_stale(out, "bbbb") == out / "stale-aaaa-2"
    assert {p.name for p in out.iterdir()} == {"data_fingerprint.txt", "stale-aaaa", "stale-bbbb", "stale-aaaa-2"}


def test_a_folder_without_a_fingerprint_is_set_aside_and_kept_inputs_stay(tmp_path):
    out = tmp_path / "run"
    _fill(out)
    (out / "ocean.zarr").mkdir()  # the user's input, living in the folder
    with pytest.warns(UserWarning, match="fingerprint unknown, now cccc"):
        dest = set_aside_stale(out, "cccc", keep=[out / "ocean.zarr"])
    assert dest == out / "stale-unknown" and (dest / "summary.nc").exists()
    assert (out / "ocean.zarr").is_dir() and not (dest / "ocean.zarr").exists()

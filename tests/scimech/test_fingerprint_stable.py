"""Fingerprints never change for the same input: a study's output folder written by an earlier
version of scimech is resumed, not set aside. Checked two ways: hashed by hand as
:func:`scimech.run.fingerprint.fingerprint` describes its format (a tag, the payload's length
in 8 little-endian bytes, the payload), and against the digests the previous implementation
gave for one object of every kind it understands."""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import xarray as xr

from scimech.run.fingerprint import fingerprint


def tag(t: bytes, payload: bytes = b"") -> bytes:
    return t + len(payload).to_bytes(8, "little") + payload


def by_hand(*parts: bytes, length: int = 16) -> str:
    return hashlib.sha256(b"".join(parts)).hexdigest()[:length]


@dataclasses.dataclass
class Epochs:
    n: int


def test_the_format_hashed_by_hand():
    top = tag(b"L", b"1")  # fingerprint(*objects) hashes the list of its arguments
    assert fingerprint(None) == by_hand(top, tag(b"N"))
    assert fingerprint(3, "a") == by_hand(tag(b"L", b"2"), tag(b"I", b"3"), tag(b"S", b"a"))
    assert fingerprint(2.5) == by_hand(top, tag(b"F", (2.5).hex().encode()))
    a = np.arange(3, dtype="<i8")
    assert fingerprint(a) == by_hand(top, tag(b"A", b"<i8(3,)"), a.tobytes())
    assert fingerprint(a.astype(">i8")) == fingerprint(a)  # native byte order
    key = hashlib.sha256(tag(b"S", b"n")).digest()  # a mapping's keys enter by their digests
    assert fingerprint({"n": 1}) == by_hand(top, tag(b"M", b"1"), key, tag(b"I", b"1"))
    cls = f"{Epochs.__module__}.{Epochs.__qualname__}".encode()
    assert fingerprint(Epochs(1)) == by_hand(top, tag(b"D", cls), tag(b"M", b"1"), key, tag(b"I", b"1"))
    t = torch.arange(2.0)
    f32 = t.numpy()
    assert fingerprint(t) == by_hand(top, tag(b"T", b"torch.float32(2,)"), tag(b"A", b"<f4(2,)"), f32.tobytes())


def objects(tmp: Path) -> dict[str, list]:
    """One object of every kind the fingerprint understands, by group."""
    (tmp / "d" / "sub").mkdir(parents=True)
    (tmp / "d" / "a.txt").write_bytes(b"alpha\n")
    (tmp / "d" / "sub" / "b.bin").write_bytes(bytes(range(7)))
    ds = xr.Dataset(
        {"sst": (("lat", "lon"), np.arange(6.0).reshape(2, 3), {"units": "degC", "created": "x"})},
        coords={"lat": [10.0, 20.0], "lon": np.arange(3)},
        attrs={"title": "t", "date_created": "2024"},
    )
    return {
        "values": [None, True, False, 3, -7, 2.5, 1 + 2j, "héllo", b"\x00\x01", bytearray(b"ab")]
        + [np.float32(1.5), np.int64(4)],
        "arrays": [
            np.arange(6).reshape(2, 3),
            np.arange(3, dtype=">f8"),
            np.array(["a", 1, None], object),
            np.array(["x", "yz"]),
        ],
        "xarray": [ds, ds["sst"], xr.DataArray([1.0, 2.0], dims="x", coords={"x": [0, 1]}, name="v")],
        "torch": [torch.arange(4.0), torch.ones(2, 2, dtype=torch.bfloat16), torch.tensor([1, 2], dtype=torch.int8)],
        "pandas": [
            pd.Index([1, 2], name="i"),
            pd.Series([1.0, 2.0], index=["a", "b"], name="s"),
            pd.DataFrame({"a": [1, 2], "b": [0.5, 1.5]}),
        ],
        "containers": [{"b": [1, 2], "a": (3, 4)}, {1, 2, "x"}, frozenset({0.5})],
        "paths": [tmp / "d", tmp / "d" / "a.txt"],
    }


#: the digests of :func:`objects`, group by group, as scimech 0.1.0's fingerprint gave them (before
#: its type dispatch was split by kind of object): run folders written then carry these
PREVIOUS = {
    "values": "28a056082957b6008d5923482e828557fec014710bb2aafc384ddc1ae8289e6b",
    "arrays": "df958aa7eb7b6c6e5564ad51aabe28015da3b741992547e55457a14ca0df8f5b",
    "xarray": "f2013b89019fdd3ac0263165326d4f7c2698bea9ea34cc0fe444a418d8c0f815",
    "torch": "0ef2c0af11274d0fa29247bd11d6c62ab8c54374b5e48158fec34852c4b6d71f",
    "pandas": "21729563af6db48dc1ffafc8a78aa88b0854647d4f5d500ba8123a2b3cc55fd4",
    "containers": "004fd9ca4a3562bb0921506ede0c63eb6c403742a43b7b1b8fbaf681a2044e83",
    "paths": "cd220180e4450d32ce0dd3c2cd2a0c29d4e41692cde4a52a4e83f412ab92e1b8",
}


def test_every_kind_hashes_as_before(tmp_path):
    got = {group: fingerprint(*items, length=64) for group, items in objects(tmp_path).items()}
    assert got == PREVIOUS

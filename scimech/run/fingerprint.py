"""Fingerprints of a study's inputs, and setting aside results of other inputs.

A study resumes from its output folder (:class:`scimech.run.results.UnitStore`): finished
units are skipped. Units are keyed by what varies *within* a study (a regime and a seed, a
catalogue chunk), so results computed from other data (a changed generator, one changed
value in a data file, other settings) would be resumed and scored as new. Before any unit
runs, a study therefore computes :func:`fingerprint` over the data it actually uses (the
synthetic dataset as generated, the bytes of the user's file) and the settings that change
results, and calls :func:`set_aside_stale`: a folder of another fingerprint is moved to
``out_dir/stale-<old fingerprint>/`` (nothing is deleted) with a warning naming both
fingerprints, and the study starts afresh.

>>> import numpy as np
>>> fingerprint(np.arange(3)) == fingerprint(np.arange(3))
True
>>> fingerprint(np.arange(3)) == fingerprint(np.arange(3.0))   # another dtype
False
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import sys
import warnings
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from scimech.run.results import atomic_write_text

__all__ = ["fingerprint", "set_aside_stale", "read_fingerprint", "VOLATILE_ATTRS", "FINGERPRINT_FILE"]

#: the default name of the fingerprint file in a study's output folder
FINGERPRINT_FILE = "data_fingerprint.txt"
#: attributes of xarray objects left out of a fingerprint: when a file was written, not what it holds
VOLATILE_ATTRS = frozenset({"created", "date_created", "date_modified", "date_issued"})
_CHUNK = 1 << 20


def fingerprint(*objects: Any, length: int = 16) -> str:
    """A sha256 over ``objects`` (hex, the first ``length`` characters).

    Equal inputs give equal fingerprints in any process and on any machine; a changed
    value, shape, dtype, coordinate, name or attribute gives another. Understood:

    - ``None``, ``bool``, ``int``, ``float``, ``str``, ``bytes`` (and numpy scalars, with their dtype);
    - numpy arrays (dtype, shape and bytes in native byte order; object arrays element by element);
    - xarray ``DataArray`` / ``Dataset``: every variable (data and coordinates: name, dims,
      dtype, values, attrs) and the attrs, leaving out :data:`VOLATILE_ATTRS` (write times);
      dask-backed variables are computed one at a time;
    - torch tensors (dtype, shape, values on the CPU), pandas Series / DataFrames
      (index, columns, values);
    - mappings (keys in any order), lists and tuples (in order), sets, dataclass instances;
    - ``pathlib.Path`` (any ``os.PathLike``): the *content* of the file, or of every file
      under a folder with its relative path (a plain ``str`` is a value, never a path).

    Raises
    ------
    TypeError
        An object of another type (say what of it matters: pass its arrays or a dict).
    FileNotFoundError
        A path that does not exist.
    """
    h = hashlib.sha256()
    _feed(h, list(objects))
    return h.hexdigest()[:length]


def _tag(h, tag: bytes, payload: bytes = b"") -> None:
    h.update(tag + len(payload).to_bytes(8, "little") + payload)


def _digest(obj: Any) -> bytes:
    h = hashlib.sha256()
    _feed(h, obj)
    return h.digest()


def _feed_array(h, a: np.ndarray) -> None:
    a = np.asarray(a)
    if a.dtype.kind == "O":
        _tag(h, b"O", repr(a.shape).encode())
        for x in a.ravel():
            _feed(h, x, in_array=True)
        return
    if a.dtype.byteorder not in ("=", "|"):
        a = a.astype(a.dtype.newbyteorder("="))
    a = np.ascontiguousarray(a)
    _tag(h, b"A", f"{a.dtype.str}{a.shape}".encode())
    h.update(a.reshape(-1).view(np.uint8).data)


def _attrs(attrs: Mapping) -> dict:
    return {str(k): v for k, v in attrs.items() if k not in VOLATILE_ATTRS}


def _feed_variable(h, name, var) -> None:
    _feed(h, [str(name), [str(d) for d in var.dims], _attrs(var.attrs)])
    _feed_array(h, var.values)


def _feed_path(h, path: Path) -> None:
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"Cannot fingerprint {str(path)!r}: no such file or folder.")
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    _tag(h, b"P", str(len(files)).encode())
    for f in files:
        _feed(h, "" if f == path else f.relative_to(path).as_posix())
        _tag(h, b"Z", str(f.stat().st_size).encode())
        with open(f, "rb") as fh:
            while block := fh.read(_CHUNK):
                h.update(block)


def _feed(h, obj: Any, in_array: bool = False) -> None:
    """Feed ``obj`` to the hash ``h``: a value, then data (arrays, tables, files), then a container;
    ``in_array``: an element of an object array, whose text stands for it where nothing else does."""
    if _feed_value(h, obj) or _feed_data(h, obj) or _feed_container(h, obj):
        return
    if in_array:  # an element of an object array (a cftime date, ...): its text
        _tag(h, b"R", f"{type(obj).__qualname__}:{obj!s}".encode())
        return
    raise TypeError(
        f"fingerprint() does not know how to hash a {type(obj).__module__}.{type(obj).__qualname__}; "
        "pass what of it matters (its arrays, a dict of its settings, or the path of its file)."
    )


def _feed_value(h, obj: Any) -> bool:
    """A plain value (``None``, a number, text, bytes; a numpy scalar with its dtype): fed, ``True``."""
    if obj is None:
        _tag(h, b"N")
    elif isinstance(obj, bool):
        _tag(h, b"B", b"1" if obj else b"0")
    elif isinstance(obj, np.generic):
        _feed_array(h, np.asarray(obj))
    elif isinstance(obj, int):
        _tag(h, b"I", str(obj).encode())
    elif isinstance(obj, float):
        _tag(h, b"F", float(obj).hex().encode())
    elif isinstance(obj, complex):
        _tag(h, b"C", f"{obj.real.hex()},{obj.imag.hex()}".encode())
    elif isinstance(obj, str):
        _tag(h, b"S", obj.encode("utf-8", "surrogatepass"))
    elif isinstance(obj, (bytes, bytearray, memoryview)):
        _tag(h, b"Y", bytes(obj))
    else:
        return False
    return True


def _feed_data(h, obj: Any) -> bool:
    """Data: a file or folder by its content, a numpy array, an xarray object, a torch tensor, a
    pandas object: fed, ``True``."""
    if isinstance(obj, os.PathLike):
        _feed_path(h, Path(obj))
    elif isinstance(obj, np.ndarray):
        _feed_array(h, obj)
    elif _is(obj, "xarray", "DataArray") or _is(obj, "xarray", "Dataset"):
        _feed_xarray(h, obj)
    elif _is(obj, "torch", "Tensor"):
        _feed_tensor(h, obj)
    elif _is(obj, "pandas", "Index") or _is(obj, "pandas", "Series") or _is(obj, "pandas", "DataFrame"):
        _feed_pandas(h, obj)
    else:
        return False
    return True


def _feed_xarray(h, obj: Any) -> None:
    """A DataArray (its variable, then its coordinates by name) or a Dataset (coordinate names and
    attrs, then every variable by name)."""
    if _is(obj, "xarray", "DataArray"):
        _tag(h, b"XA")
        _feed_variable(h, obj.name, obj.variable)
        coords = sorted(obj.coords, key=str)
        _feed(h, [str(c) for c in coords])
        for c in coords:
            _feed_variable(h, c, obj.coords[c].variable)
        return
    _tag(h, b"XD")
    _feed(h, [sorted(map(str, obj.coords)), _attrs(obj.attrs)])
    for name in sorted(obj.variables, key=str):
        _feed_variable(h, name, obj.variables[name])


def _feed_tensor(h, obj: Any) -> None:
    """A torch tensor: dtype and shape, then its values on the CPU (bfloat16 by its bits)."""
    import torch

    t = obj.detach().cpu().contiguous()
    _tag(h, b"T", f"{t.dtype}{tuple(t.shape)}".encode())
    if t.dtype == torch.bfloat16:
        t = t.view(torch.int16)
    _feed_array(h, t.numpy())


def _feed_pandas(h, obj: Any) -> None:
    """A pandas Index (name, values), Series (name, index, values) or DataFrame (index, columns,
    then each column's values)."""
    if _is(obj, "pandas", "Index"):
        _tag(h, b"PI")
        _feed(h, obj.name)
        _feed_array(h, obj.to_numpy())
    elif _is(obj, "pandas", "Series"):
        _tag(h, b"PS")
        _feed(h, [obj.name, obj.index])
        _feed_array(h, obj.to_numpy())
    else:
        _tag(h, b"PF")
        _feed(h, [obj.index, obj.columns])
        for k in range(obj.shape[1]):
            _feed_array(h, obj.iloc[:, k].to_numpy())


def _feed_container(h, obj: Any) -> bool:
    """A container: a mapping (keys in any order), a list or tuple (in order), a set, a dataclass
    instance (its class and fields): fed, ``True``."""
    if isinstance(obj, Mapping):
        items = sorted(((_digest(k), v) for k, v in obj.items()), key=lambda kv: kv[0])
        _tag(h, b"M", str(len(items)).encode())
        for dk, v in items:
            h.update(dk)
            _feed(h, v)
    elif isinstance(obj, (list, tuple)):
        _tag(h, b"L" if isinstance(obj, list) else b"U", str(len(obj)).encode())
        for x in obj:
            _feed(h, x)
    elif isinstance(obj, (set, frozenset)):
        _tag(h, b"E", str(len(obj)).encode())
        for d in sorted(_digest(x) for x in obj):
            h.update(d)
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        _tag(h, b"D", f"{_home(type(obj).__module__)}.{type(obj).__qualname__}".encode())
        _feed(h, {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)})
    else:
        return False
    return True


def _home(module: str) -> str:
    """A module's name as fingerprints spell it: a class of a module that moved into a subpackage
    (``scimech.studies.reading``, ``ocean.data.stores``) by its old path (``scimech.reading``, ``ocean.stores``), so that a run folder
    from before the move is still current (a fingerprint names a dataclass's module)."""
    from scimech._moved import old_path

    return old_path(module)


def _is(obj: Any, module: str, name: str) -> bool:
    """``isinstance(obj, module.name)`` without importing ``module`` when nothing of it is in use."""

    mod = sys.modules.get(module)
    cls = getattr(mod, name, None) if mod is not None else None
    return cls is not None and isinstance(obj, cls)


def read_fingerprint(out_dir: str | os.PathLike, name: str = FINGERPRINT_FILE) -> str | None:
    """The fingerprint recorded in ``out_dir/name`` (its first line), or ``None`` when there is none."""
    f = Path(out_dir) / name
    if not f.is_file():
        return None
    lines = f.read_text().splitlines()
    return (lines[0].strip() or None) if lines else None


def _read_parts(f: Path) -> dict[str, str]:
    if not f.is_file():
        return {}
    out = {}
    for line in f.read_text().splitlines()[1:]:
        k, _, v = line.strip().partition(" ")
        if k and v:
            out[k] = v.strip()
    return out


def set_aside_stale(
    out_dir: str | os.PathLike,
    fp: str,
    name: str = FINGERPRINT_FILE,
    *,
    parts: Mapping[str, str] | None = None,
    keep: Iterable[str | os.PathLike] = (),
    stacklevel: int = 2,
) -> Path | None:
    """Make ``out_dir`` a folder of fingerprint ``fp``, setting aside results of another one.

    When ``out_dir`` holds anything (but earlier ``stale-*`` folders) under another
    fingerprint than ``fp`` (or under none: a folder written before fingerprints), all of it
    is moved to ``out_dir/stale-<old fingerprint>/`` (``-2``, ``-3``, ... when that exists),
    nothing is deleted, and a ``UserWarning`` names both fingerprints and where the old
    results went. Then ``fp`` is written to ``out_dir/name`` atomically. Call it before any
    unit runs, so that no result of other data is resumed.

    Parameters
    ----------
    parts
        Named fingerprints of the parts of ``fp`` (say ``{"data": ..., "settings": ...}``),
        written under it, one ``name fingerprint`` a line; the warning then names the parts that changed.
    keep
        Paths never moved (nor the entries of ``out_dir`` holding them): inputs that live in the folder.
    stacklevel
        Of the warning, as in :func:`warnings.warn` but counted from the function that calls
        this one (1: that call; 2, the default: the caller of that function).

    Returns
    -------
    Path or None
        Where the stale results went, or ``None`` when nothing was set aside.
    """

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    f = out_dir / name
    old = read_fingerprint(out_dir, name)
    old_parts = _read_parts(f)
    kept = [Path(p).resolve() for p in keep]

    def held(p: Path) -> bool:
        r = p.resolve()
        return any(k == r or r in k.parents for k in kept)

    previous = [
        p for p in sorted(out_dir.iterdir()) if not p.name.startswith("stale-") and p.name != name and not held(p)
    ]
    dest = None
    if old != fp and previous:
        base = out_dir / f"stale-{old or 'unknown'}"
        dest, k = base, 1
        while dest.exists():
            k += 1
            dest = base.with_name(f"{base.name}-{k}")
        dest.mkdir()
        for p in previous:
            os.replace(p, dest / p.name)
        new_parts = parts or {}
        changed = [k for k in new_parts if k in old_parts and old_parts[k] != new_parts[k]]
        why = f"; changed: {', '.join(changed)}" if changed else ""
        warnings.warn(
            f"{out_dir} held a study of other data (fingerprint {old or 'unknown'}, now {fp}{why}); "
            f"moved it to {dest} and started afresh: none of its results are resumed.",
            UserWarning,
            stacklevel=stacklevel + 1,
        )
    if old != fp or old_parts != dict(parts or {}):
        text = "".join([fp, "\n", *(f"{k} {v}\n" for k, v in (parts or {}).items())])
        atomic_write_text(f, text)
    return dest

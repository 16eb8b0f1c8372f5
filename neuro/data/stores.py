"""The study's store: every array its units read or write, written once, as open files.

A study writes arrays in many places that share them: the task the baseline fits read, the
search data the candidates are run on (the same training trials and windows), the task at
the long context (the same training trials again) and the outputs of every evaluated
program. An :class:`ArrayStore` keeps each array once, as a NumPy ``.npy`` file named by the
SHA-256 of its dtype, shape and bytes (``<root>/arrays/<hash>.npy``): writing an array that
is already there writes nothing. What names the arrays is a small JSON *manifest*
(``<root>/<label>-<hash>.json``: ``{"arrays": {name: ref}, "attrs": {...}}``), itself named by
its content, so the same manifest is never written twice either and never changes. An array
is read back bit for bit with its dtype, shape and memory order (C or Fortran), so what is
computed from it does not change.

A *ref* is a small JSON-able dict: ``{"file": "<hash>.npy"}``, plus ``"broadcast_to": shape``
for one value broadcast to a shape (the all-ones wiring prior of a large recording is
stored as its one value) or ``"object": true`` for an array of Python strings (stored as
fixed-width text, read back as an object array). Nothing is pickled: every file opens with
``numpy.load(..., allow_pickle=False)`` or a JSON reader.

Files are written to a temporary name and moved into place, so a killed run leaves no
partial file under a final name; the store may be shared by Dask workers on a shared file
system (writers of the same array write the same bytes).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
from pathlib import Path

import numpy as np

from scimech.run.results import atomic_write_bytes, atomic_write_text

__all__ = ["ArrayStore", "is_ref"]


def is_ref(value) -> bool:
    """Whether ``value`` is a ref to an array of a store (not the array itself)."""
    return isinstance(value, dict) and isinstance(value.get("file"), str)


def _is_broadcast(a: np.ndarray) -> bool:
    """One value broadcast to a shape (every axis longer than 1 of stride 0)."""
    return a.size > 1 and all(st == 0 for st, n in zip(a.strides, a.shape) if n > 1)


class ArrayStore:
    """Arrays stored once by content under ``root`` (see the module doc).

    Parameters
    ----------
    root
        The store's folder (created if missing); made absolute, as Dask workers open its
        files by path.
    """

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root).resolve()
        (self.root / "arrays").mkdir(parents=True, exist_ok=True)

    def __repr__(self) -> str:
        return f"ArrayStore({str(self.root)!r})"

    # ---------------------------------------------------------------- arrays
    def put(self, arrays: dict) -> dict:
        """Write the arrays not yet stored; returns ``{name: ref}`` in the same order.

        The same array object given under several names is hashed once."""
        refs, seen = {}, {}
        for name, value in arrays.items():
            if id(value) not in seen:
                seen[id(value)] = self._put_one(value)
            refs[name] = dict(seen[id(value)])
        return refs

    def _put_one(self, value) -> dict:
        a = np.asarray(value)
        extra = {}
        if _is_broadcast(a):
            extra["broadcast_to"] = list(a.shape)
            a = np.asarray(a.flat[0])  # keeps the dtype
        if a.dtype == object:
            if not all(isinstance(x, str) for x in a.flat):
                raise TypeError(
                    "ArrayStore stores arrays of numbers, booleans or strings; got an object array "
                    "holding something else (it would need a pickle)."
                )
            extra["object"] = True
            a = a.astype(str)
        # the memory layout is kept as a pickle keeps it (Fortran order stays Fortran order):
        # numpy may sum in another order over another layout, changing a result's last bit
        fortran = a.ndim > 1 and a.flags.f_contiguous and not a.flags.c_contiguous
        if not fortran and not a.flags.c_contiguous:
            a = a.copy(order="C")
        h = hashlib.sha256(f"{a.dtype.str}{a.shape}{'F' if fortran else 'C'}".encode())
        h.update((a.T if fortran else a).data if a.size else b"")
        file = f"{h.hexdigest()[:32]}.npy"
        path = self.root / "arrays" / file
        if not path.exists():
            buf = io.BytesIO()
            np.save(buf, a, allow_pickle=False)
            atomic_write_bytes(path, buf.getvalue())
        return {"file": file, **extra}

    def has(self, refs: dict) -> bool:
        """Whether every array ``refs`` names is in the store."""
        return all((self.root / "arrays" / r["file"]).exists() for r in refs.values())

    def get(self, refs: dict) -> dict:
        """``{name: array}`` of ``{name: ref}`` (each file read once)."""
        read, out = {}, {}
        for name, r in refs.items():
            if r["file"] not in read:
                read[r["file"]] = np.load(self.root / "arrays" / r["file"], allow_pickle=False)
            a = read[r["file"]]
            if r.get("object"):
                a = a.astype(object)
            if "broadcast_to" in r:
                a = np.broadcast_to(a, tuple(r["broadcast_to"]))
            out[name] = a
        return out

    # ------------------------------------------------------------- manifests
    def save(self, label: str, arrays: dict, **attrs) -> Path:
        """Store ``arrays`` and a manifest naming them (with JSON-able ``attrs``); returns the
        manifest's path, ``<root>/<label>-<hash>.json``."""
        text = json.dumps({"arrays": self.put(arrays), "attrs": attrs}, indent=1)
        path = self.root / f"{label}-{hashlib.sha256(text.encode()).hexdigest()[:16]}.json"
        if not path.exists():
            atomic_write_text(path, text)
        return path

    @staticmethod
    def load(manifest: str | os.PathLike) -> tuple[dict, dict]:
        """``(arrays, attrs)`` of a manifest written by :meth:`save` (its store is its folder)."""
        manifest = Path(manifest)
        spec = json.loads(manifest.read_text())
        return ArrayStore(manifest.parent).get(spec["arrays"]), spec["attrs"]

"""Labelled results on disk: zarr / netCDF with provenance, written atomically.

Every save goes to a temporary sibling first and is moved into place with
``os.replace``, so a crash never leaves a half-written result under the final name.
A zarr store additionally carries a completion marker (``.scimech-complete``) written
last; :func:`load` refuses a store without it, so a partial store is never mistaken for
a finished one.

:class:`UnitStore` keeps one file per finished unit of a long run (one seed, one
regime, one tree-search node) plus a manifest with checksums, so a rerun with the same
output folder skips what is done and redoes only the rest.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import io
import json
import os
import platform
import shutil
import tempfile
import warnings
from collections.abc import Iterator, Mapping
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from scimech.errors import CheckpointError

__all__ = [
    "provenance",
    "save",
    "load",
    "atomic_write_bytes",
    "atomic_write_text",
    "atomic_torch_save",
    "torch_load",
    "save_state",
    "load_state",
    "UnitStore",
    "COMPLETE_MARKER",
]

COMPLETE_MARKER = ".scimech-complete"


def _version() -> str:
    try:
        return version("scimech")
    except Exception:  # pragma: no cover - running from a source tree without install
        return "0+unknown"


def provenance(config: Mapping[str, Any] | None = None, seed: int | None = None, **extra) -> dict:
    """Attributes that say how a result was made.

    Parameters
    ----------
    config
        The configuration of the run; stored as JSON text under ``config``.
    seed
        The random seed of the run, if any.
    **extra
        More attributes (strings, numbers).

    Returns
    -------
    dict
        ``scimech_version``, ``created`` (UTC ISO time), ``python``, ``torch``, ``numpy``,
        plus ``seed`` and ``config`` when given. All values are netCDF-safe.
    """
    attrs: dict[str, Any] = {
        "scimech_version": _version(),
        "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "numpy": np.__version__,
    }
    try:
        import torch

        attrs["torch"] = torch.__version__
    except Exception:  # pragma: no cover
        pass
    if seed is not None:
        attrs["seed"] = int(seed)
    if config is not None:
        attrs["config"] = json.dumps(_jsonable(config), sort_keys=True)
    for k, v in extra.items():
        attrs[k] = v if isinstance(v, (str, int, float)) else json.dumps(_jsonable(v))
    return attrs


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, Mapping):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, (str, int, float, bool)) or obj is None:
        return obj
    return repr(obj)


def _netcdf_safe_attrs(attrs: Mapping[str, Any]) -> dict:
    out: dict[str, Any] = {}
    for k, v in attrs.items():
        if isinstance(v, bool):
            out[k] = int(v)
        elif isinstance(v, (str, int, float, np.integer, np.floating)):
            out[k] = v
        elif isinstance(v, (list, tuple, np.ndarray)) and all(
            isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, bool) for x in v
        ):
            out[k] = np.asarray(v)
        elif v is None:
            out[k] = "None"
        else:
            out[k] = json.dumps(_jsonable(v))
    return out


def _as_dataset(obj: xr.Dataset | xr.DataArray) -> xr.Dataset:
    if isinstance(obj, xr.DataArray):
        name = obj.name if obj.name is not None else "data"
        return obj.to_dataset(name=name, promote_attrs=True)
    if isinstance(obj, xr.Dataset):
        return obj
    raise TypeError(
        f"save() takes an xarray Dataset or DataArray; got {type(obj).__name__}. "
        "Wrap arrays with xr.DataArray(values, dims=[...]) first."
    )


def save(
    obj: xr.Dataset | xr.DataArray,
    path: str | os.PathLike,
    *,
    config: Mapping[str, Any] | None = None,
    seed: int | None = None,
    **attrs,
) -> Path:
    """Save a labelled result with provenance attrs, atomically.

    Parameters
    ----------
    obj
        The result. A DataArray is stored as a one-variable Dataset.
    path
        Ends in ``.nc`` (netCDF4) or ``.zarr`` (zarr v3 store).
    config, seed, **attrs
        Provenance; see :func:`provenance`.

    Returns
    -------
    Path
        The final path.

    Examples
    --------
    >>> ds = xr.Dataset({"effect": ("site", [0.5, 0.0])}, coords={"site": ["0", "1"]})
    >>> path = sm.save(ds, "effects.nc", config={"n_samples": 8}, seed=0)
    >>> back = sm.load(path)
    >>> back["effect"].values.tolist(), int(back.attrs["seed"])
    ([0.5, 0.0], 0)
    """
    path = Path(path)
    ds = _as_dataset(obj).copy()
    ds.attrs = _netcdf_safe_attrs({**ds.attrs, **provenance(config, seed, **attrs)})
    for name in list(ds.variables):
        ds[name].attrs = _netcdf_safe_attrs(ds[name].attrs)
    path.parent.mkdir(parents=True, exist_ok=True)
    suffix = path.suffix.lower()
    if suffix == ".nc":
        fd, tmp = _sibling_tmp(path)
        os.close(fd)
        try:
            ds.to_netcdf(tmp, engine="netcdf4")
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)
    elif suffix == ".zarr":
        tmp_dir = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
        try:
            store = tmp_dir / "store.zarr"
            ds.to_zarr(store, mode="w", consolidated=False)
            (store / COMPLETE_MARKER).write_text(ds.attrs.get("created", ""))
            if path.exists():
                old = path.with_name(f".{path.name}.old")
                if old.exists():
                    shutil.rmtree(old)
                os.replace(path, old)
                os.replace(store, path)
                shutil.rmtree(old, ignore_errors=True)
            else:
                os.replace(store, path)
        finally:
            shutil.rmtree(tmp_dir, ignore_errors=True)
    else:
        raise ValueError(f"Cannot tell the format of {str(path)!r}: expected a name ending in '.nc' or '.zarr'.")
    return path


def load(path: str | os.PathLike) -> xr.Dataset:
    """Load a result written by :func:`save` (fully into memory).

    Raises
    ------
    CheckpointError
        The path is missing, a zarr store lacks its completion marker (an interrupted
        write), or the file cannot be read.

    Examples
    --------
    >>> _ = sm.save(xr.DataArray([1.0, 2.0], dims="sample", name="y"), "y.nc")
    >>> sm.load("y.nc")["y"].values.tolist()
    [1.0, 2.0]
    """
    path = Path(path)
    if not path.exists():
        raise CheckpointError(f"No result at {str(path)!r}. Check the path, or run the step that writes it.")
    try:
        if path.suffix.lower() == ".zarr":
            if not (path / COMPLETE_MARKER).exists():
                raise CheckpointError(
                    f"The zarr store {str(path)!r} has no completion marker: it was not written to the "
                    "end (an interrupted run?). Delete it and rerun the step that writes it."
                )
            with warnings.catch_warnings():  # the marker file is not a zarr node; that is fine
                warnings.filterwarnings("ignore", message=".*not recognized as a component.*")
                with xr.open_zarr(path, consolidated=False) as ds:
                    return ds.load()
        with xr.open_dataset(path, engine="netcdf4") as ds:
            return ds.load()
    except CheckpointError:
        raise
    except Exception as err:
        raise CheckpointError(
            f"Could not read the result at {str(path)!r} ({type(err).__name__}: {err}). "
            "The file is corrupt or not a scimech result: delete it and rerun the step that writes it."
        ) from err


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


#: the permission bits a new file gets in this process (the umask read once: setting it to read
#: it is not thread-safe)
_FILE_MODE = 0o666 & ~_umask()


def _sibling_tmp(path: Path) -> tuple[int, str]:
    """A temporary file beside ``path`` with the permissions a plainly created file gets:
    ``mkstemp`` makes it 0600, which would leave results unreadable by the user's group."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.fchmod(fd, _FILE_MODE)
    return fd, tmp


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    """Write bytes to ``path`` via a temporary sibling and ``os.replace`` (permissions as for
    any new file under the umask)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = _sibling_tmp(path)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return path


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    """Write text (UTF-8) atomically."""
    return atomic_write_bytes(path, text.encode("utf-8"))


def atomic_torch_save(obj: Any, path: str | os.PathLike) -> Path:
    """``torch.save`` to ``path`` atomically (a crash leaves the previous file intact)."""
    import torch

    buf = io.BytesIO()
    torch.save(obj, buf)
    return atomic_write_bytes(path, buf.getvalue())


def torch_load(path: str | os.PathLike, *, weights_only: bool = True) -> Any:
    """Load a torch checkpoint; a missing or corrupt file is a :class:`CheckpointError`."""
    import torch

    path = Path(path)
    if not path.exists():
        raise CheckpointError(f"No checkpoint at {str(path)!r}. Check the path or train first.")
    try:
        return torch.load(path, map_location="cpu", weights_only=weights_only)
    except Exception as err:
        raise CheckpointError(
            f"The checkpoint {str(path)!r} is corrupt or truncated ({type(err).__name__}: {err}). "
            "Delete it to start that unit afresh."
        ) from err


def save_state(state: Any, path: str | os.PathLike) -> Path:
    """A training state (nested dicts, lists and tuples of tensors, numbers, strings and None: a
    model's and an optimiser's ``state_dict``, a history, a config) in one safetensors file,
    atomically: the tensors as safetensors, everything else as JSON in its metadata. No pickle,
    so loading it runs no code (:func:`load_state`)."""
    from safetensors.torch import save as st_save

    tensors: dict[str, Any] = {}
    meta = json.dumps(_encode_state(state, tensors))
    return atomic_write_bytes(path, st_save(tensors, metadata={"scimech_state": meta}))


def load_state(path: str | os.PathLike) -> Any:
    """The state :func:`save_state` wrote, tensors on the CPU; a missing, corrupt or foreign file is a
    :class:`CheckpointError`."""
    from safetensors import safe_open

    path = Path(path)
    if not path.exists():
        raise CheckpointError(f"No checkpoint at {str(path)!r}. Check the path or train first.")
    try:
        with safe_open(str(path), framework="pt", device="cpu") as f:
            meta = (f.metadata() or {}).get("scimech_state")
            tensors = {k: f.get_tensor(k) for k in f.keys()}
        if meta is None:
            raise ValueError("no scimech state in its metadata")
        return _decode_state(json.loads(meta), tensors)
    except Exception as err:
        raise CheckpointError(
            f"The checkpoint {str(path)!r} is corrupt, truncated or not a scimech state file ({type(err).__name__}: "
            f"{err}). Delete it to start that unit afresh."
        ) from err


def _encode_state(obj: Any, tensors: dict) -> Any:
    import torch

    if isinstance(obj, torch.Tensor):
        key = f"t{len(tensors)}"
        tensors[key] = obj.detach().cpu().contiguous().clone()
        return {"__tensor__": key}
    if isinstance(obj, Mapping):
        return {"__items__": [[_encode_state(k, tensors), _encode_state(v, tensors)] for k, v in obj.items()]}
    if isinstance(obj, tuple):
        return {"__tuple__": [_encode_state(v, tensors) for v in obj]}
    if isinstance(obj, list):
        return [_encode_state(v, tensors) for v in obj]
    if isinstance(obj, np.generic):
        return obj.item()
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    raise TypeError(f"save_state: a {type(obj).__name__} is not a tensor, number, string or container of them.")


def _decode_state(obj: Any, tensors: Mapping) -> Any:
    if isinstance(obj, dict):
        if "__tensor__" in obj:
            return tensors[obj["__tensor__"]]
        if "__tuple__" in obj:
            return tuple(_decode_state(v, tensors) for v in obj["__tuple__"])
        return {_decode_state(k, tensors): _decode_state(v, tensors) for k, v in obj["__items__"]}
    if isinstance(obj, list):
        return [_decode_state(v, tensors) for v in obj]
    return obj


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    if path.is_dir():
        for p in sorted(path.rglob("*")):
            if p.is_file():
                h.update(str(p.relative_to(path)).encode())
                h.update(p.read_bytes())
    else:
        h.update(path.read_bytes())
    return h.hexdigest()


class UnitStore:
    """A folder of finished units of a long run, each with a checksum record.

    A unit is one independent piece of work (a ``(regime, seed)`` training, a node of a
    tree search). ``save(key, result)`` writes the unit's result atomically and then,
    last, a small record ``<unit>.done.json`` holding its key and checksum; ``done(key)``
    is true only for a unit whose file exists and matches that checksum, so a file left
    by a killed run is redone rather than trusted. Each unit has its own record (no
    shared manifest), so units finishing at once on several workers never race. Saving
    *distinct* keys concurrently is safe across processes and across threads (unique
    temporary names, ``os.replace``; xarray serialises netCDF writes in one process with
    its HDF5 lock). Two writers of the *same* key: the last replace wins, and if the record
    then does not match the file the unit counts as unfinished and is redone.

    Parameters
    ----------
    root
        The run's output folder. Created if missing.
    fmt
        ``"nc"`` (default) or ``"zarr"`` for xarray results; other results are stored as
        JSON.

    Examples
    --------
    >>> store = sm.UnitStore("run")
    >>> store.done("mixed/seed=0")
    False
    >>> _ = store.save("mixed/seed=0", xr.DataArray([0.9, 0.8], dims="metric", name="skill"))
    >>> store.done("mixed/seed=0")
    True
    """

    def __init__(self, root: str | os.PathLike, fmt: str = "nc"):
        self.root = Path(root)  # created by the first save: reading a folder writes nothing into it
        if fmt not in ("nc", "zarr"):
            raise ValueError(f"UnitStore fmt must be 'nc' or 'zarr'; got {fmt!r}.")
        self.fmt = fmt

    @staticmethod
    def _slug(key: str) -> str:
        safe = "".join(c if c.isalnum() or c in "-_=." else "_" for c in str(key))
        digest = hashlib.sha1(str(key).encode()).hexdigest()[:8]
        return f"{safe[:80]}-{digest}"

    def path(self, key: str, suffix: str | None = None) -> Path:
        """Where the result of unit ``key`` lives."""
        return self.root / "units" / f"{self._slug(key)}.{suffix or self.fmt}"

    def _record(self, key: str) -> Path:
        return self.root / "units" / f"{self._slug(key)}.done.json"

    def _entry(self, key: str) -> dict | None:
        rec = self._record(key)
        if not rec.exists():
            return None
        try:
            return json.loads(rec.read_text())
        except json.JSONDecodeError:
            return None  # a torn record: treat the unit as unfinished

    def keys(self) -> list[str]:
        """Keys of the finished units."""
        out = []
        for rec in (self.root / "units").glob("*.done.json"):
            try:
                key = json.loads(rec.read_text())["key"]
            except (json.JSONDecodeError, KeyError):
                continue
            if self.done(key):
                out.append(key)
        return sorted(out)

    def __iter__(self) -> Iterator[str]:
        return iter(self.keys())

    def __contains__(self, key: str) -> bool:
        return self.done(key)

    def __len__(self) -> int:
        return len(self.keys())

    def done(self, key: str) -> bool:
        """True when ``key`` was saved completely (file present, checksum matches)."""
        entry = self._entry(str(key))
        if entry is None or entry.get("key") != str(key):
            return False
        path = self.root / entry["file"]
        return path.exists() and _sha256(path) == entry["sha256"]

    def save(self, key: str, result: Any, **attrs) -> Path:
        """Store the result of unit ``key`` and then mark it finished."""
        key = str(key)
        if isinstance(result, (xr.Dataset, xr.DataArray)):
            path = save(result, self.path(key), unit=key, **attrs)
        else:
            text = json.dumps(_jsonable(result), indent=1, sort_keys=True)
            path = atomic_write_text(self.path(key, "json"), text)
        record = {"key": key, "file": str(path.relative_to(self.root)), "sha256": _sha256(path)}
        atomic_write_text(self._record(key), json.dumps(record))
        return path

    def load(self, key: str) -> Any:
        """The stored result of unit ``key``."""
        key = str(key)
        entry = self._entry(key) if self.done(key) else None
        if entry is None:
            raise CheckpointError(
                f"Unit {key!r} is not finished in {str(self.root)!r} (finished: {self.keys()[:10]}). Run it first."
            )
        path = self.root / entry["file"]
        if path.suffix == ".json":
            return json.loads(path.read_text())
        return load(path)

    def discard(self, key: str) -> None:
        """Forget unit ``key`` so that it will be redone."""
        entry = self._entry(str(key))
        self._record(str(key)).unlink(missing_ok=True)
        if entry:
            p = self.root / entry["file"]
            if p.is_dir():
                shutil.rmtree(p, ignore_errors=True)
            elif p.exists():
                p.unlink()
